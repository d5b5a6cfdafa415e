"""One ``random_state`` per estimator: the seeds of every generator derive from it."""

import numpy as np
from sklearn.utils import check_random_state

MAX_SEED = 2**31 - 1


def derive_seeds(random_state, n_seeds):
    """``n_seeds`` integer seeds drawn once from ``random_state`` (never global state)."""
    rng = check_random_state(random_state)
    return [int(s) for s in rng.randint(0, MAX_SEED, size=n_seeds)]


def numpy_generator(seed):
    return np.random.default_rng(seed)


def draw_in_proportion(rng, weights, n_wanted):
    """Up to ``n_wanted`` distinct indices of positive ``weights``, drawn from the
    NumPy generator ``rng`` without replacement, each with probability proportional
    to its weight (k-means++'s D² sampling, by a method's own loss)."""
    candidates = np.flatnonzero(weights > 0)
    n_drawn = min(n_wanted, candidates.size)
    if n_drawn == 0:
        return candidates[:0]
    return rng.choice(candidates, n_drawn, replace=False,
                      p=weights[candidates] / weights[candidates].sum())
