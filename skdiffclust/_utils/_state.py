"""Fitted state is replaced only when a fit succeeds."""

import functools


def keeps_state_on_failure(fit):
    """Decorate a ``fit``-like method: if it raises, the estimator is left as before.

    Restores every attribute (fitted attributes, ``n_features_in_``,
    ``feature_names_in_`` and private fitted state alike), so that a failed refit
    never leaves ``labels_`` of one fit next to ``n_features_in_`` of another.
    Place it below ``@_fit_context``.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        saved = dict(vars(self))
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            vars(self).clear()
            vars(self).update(saved)
            raise

    return wrapper
