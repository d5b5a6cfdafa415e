"""One progress bar per training run, the same for every estimator."""

from tqdm.auto import tqdm


class EpochProgress:
    """A tqdm bar over the epochs of a training run (total ``max_iter``, an ETA).

    It advances once per epoch with the epoch's objective as postfix, and is closed
    where training stopped, so that it ends at ``n_iter_``. With ``verbose=False``
    every method is a no-op.
    """

    def __init__(self, verbose, name, max_iter):
        self._bar = None
        if verbose:
            self._bar = tqdm(total=max_iter, desc=name, unit="epoch", leave=True)

    def update(self, objective):
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{objective:.4g}", refresh=False)
            self._bar.update(1)

    def close(self):
        if self._bar is not None:
            self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False
