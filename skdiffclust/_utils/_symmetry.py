"""Numba kernel checking that a square matrix is symmetric, without temporaries."""

import numpy as np
from numba import njit, prange

TILE = 32


@njit(cache=True, parallel=True)
def max_asymmetry(S, rtol, atol):
    """Largest excess of |S[i, j] - S[j, i]| over ``atol + rtol * |S[j, i]|`` (0 if none).

    Walks the upper triangle tile by tile so that both S[i, j] and S[j, i] stay in
    cache; ``np.allclose(S, S.T)`` would allocate several n x n temporaries.
    """
    n = S.shape[0]
    n_tiles = (n + TILE - 1) // TILE
    worst = np.zeros(n_tiles)
    for t in prange(n_tiles):
        bi = t * TILE
        for bj in range(bi, n, TILE):
            for i in range(bi, min(bi + TILE, n)):
                for j in range(max(bj, i + 1), min(bj + TILE, n)):
                    b = S[j, i]
                    excess = abs(S[i, j] - b) - (atol + rtol * abs(b))
                    worst[t] = max(worst[t], excess)
    return worst.max() if n_tiles else 0.0
