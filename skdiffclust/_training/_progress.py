"""One progress bar per fit, the same for every estimator (the engine's sessions open it)."""

import numpy as np
from tqdm.auto import tqdm


class EpochProgress:
    """A tqdm bar over the epochs of a training run (total ``max_iter``, an ETA).

    It advances once per epoch with the epoch's objective as postfix (after the
    fields of :meth:`note`), and is closed where training stopped, so that it ends
    at ``n_iter_``. The objective shown is the one ``loss_curve_`` records: of
    restarts (or heads) trained side by side, the lowest, the leading one's (not
    their sum, which the stopping rule watches), times ``scale`` (an estimator
    that trains on rescaled data reports its loss in the data's units).
    ``max_iter`` None: a count without a total (a path, whose number of trainings
    is not known in advance). With ``verbose=False`` every method is a no-op.
    """

    def __init__(self, verbose, name, max_iter, scale=1.0):
        self._bar = None
        self._fields = {}
        self._scale = scale
        if verbose:
            self._bar = tqdm(total=max_iter, desc=name, unit="epoch", leave=True)

    def update(self, objectives):
        """One epoch more; ``objectives``: its objective, or each restart's."""
        if self._bar is not None:
            loss = float(np.min(objectives)) * self._scale
            self._bar.set_postfix(self._fields, loss=f"{loss:.4g}", refresh=False)
            self._bar.update(1)

    def note(self, **fields):
        """Fields shown before the loss from now on (a path's step and feature count)."""
        self._fields.update(fields)

    def close(self):
        if self._bar is not None:
            self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False
