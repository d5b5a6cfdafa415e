"""Numba kernel checking that a square matrix is symmetric, without temporaries."""

import numpy as np

from skdiffclust._utils._numba import jit

TILE = 32
# tiles of rows per kernel call: Ctrl-C is seen between calls
ENTRIES_PER_CALL = 1 << 24


@jit
def _tile_rows_asymmetry(S, rtol, atol, start, stop, worst):
    """``worst[t]``: the largest excess in the rows of tile t, for t in [start, stop)."""
    n = S.shape[0]
    for t in range(start, stop):
        bi = t * TILE
        for bj in range(bi, n, TILE):
            for i in range(bi, min(bi + TILE, n)):
                for j in range(max(bj, i + 1), min(bj + TILE, n)):
                    b = S[j, i]
                    excess = abs(S[i, j] - b) - (atol + rtol * abs(b))
                    worst[t] = max(worst[t], excess)


def max_asymmetry(S, rtol, atol):
    """Largest excess of |S[i, j] - S[j, i]| over ``atol + rtol * |S[j, i]|`` (0 if none).

    Walks the upper triangle tile by tile so that both S[i, j] and S[j, i] stay in
    cache; ``np.allclose(S, S.T)`` would allocate several n x n temporaries.
    """
    n = S.shape[0]
    n_tiles = (n + TILE - 1) // TILE
    worst = np.zeros(n_tiles)
    step = max(ENTRIES_PER_CALL // max(TILE * n, 1), 1)
    for start in range(0, n_tiles, step):
        _tile_rows_asymmetry(S, float(rtol), float(atol), start, min(start + step, n_tiles),
                             worst)
    return worst.max() if n_tiles else 0.0
