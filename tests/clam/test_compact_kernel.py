"""The compact training kernel (one lane at a time) computes the vectorised kernel's
bits: every output of an epoch, for every option of the batch."""

import numpy as np
import pytest

from skdiffclust.clam import _epoch, _kernels
from skdiffclust.clam._data import ScaledData

N_SAMPLES, N_FEATURES, K, N_RESTARTS, BATCH = 45, 6, 4, 3, 8


def _problem(dtype, n_hidden, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_SAMPLES, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = 0.0
    if n_hidden:
        hidden = _kernels.hidden_features(rng.random((N_RESTARTS, N_SAMPLES, n_hidden)),
                                          N_FEATURES)
    else:  # the unmasked loss: every coordinate evolves from the point itself
        hidden = np.broadcast_to(np.arange(N_FEATURES),
                                 (N_RESTARTS, N_SAMPLES, N_FEATURES)).copy()
    P = rng.standard_normal((N_RESTARTS, K, N_FEATURES)).astype(dtype)
    W = (0.1 * rng.standard_normal((N_RESTARTS, K))).astype(dtype)
    return X, hidden, P, W, rng.permutation(N_SAMPLES), X.mean(0).astype(dtype)


def _two_epochs(compact, X, hidden, P, W, order, fill, *, cosine, clip, weighted, n_hidden,
                restarts):
    P, W = P.copy(), W.copy()
    moments = tuple(np.zeros_like(a) for a in (P, P, W, W))
    steps, outputs = 0, []
    for _ in range(2):
        steps, *epoch = _epoch.train_epoch(
            X, order, hidden, fill, n_hidden > 0, restarts, P, W, moments,
            np.full(N_RESTARTS, 0.05), steps, weighted, 0.8, cosine, 4, 0.3, BATCH,
            clip=clip, compact=compact)
        outputs += [steps, *epoch]
    return outputs + [P, W, *moments]


@pytest.mark.parametrize("cosine, dtype", [(False, np.float32), (True, np.float64),
                                           (False, np.float64)])
@pytest.mark.parametrize("clip", [0.0, 1.5])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_hidden", [2, 0])
def test_compact_kernel_computes_the_vectorised_kernels_bits(cosine, dtype, clip, weighted,
                                                             n_hidden):
    X, hidden, P, W, order, fill = _problem(dtype, n_hidden, seed=n_hidden + weighted)
    rows = ScaledData(X, cosine).dense().astype(dtype)
    options = dict(cosine=cosine, clip=clip, weighted=weighted, n_hidden=n_hidden,
                   restarts=np.array([0, 2]))
    vectorised = _two_epochs(False, rows, hidden, P, W, order, fill, **options)
    compact = _two_epochs(True, rows, hidden, P, W, order, fill, **options)
    assert len(compact) == len(vectorised)
    for a, b in zip(compact, vectorised):
        np.testing.assert_array_equal(a, b)
    trained = compact[-6]  # the active restarts moved, the other did not
    assert np.all(trained[[0, 2]] != P[[0, 2]]) and np.array_equal(trained[1], P[1])


def test_compact_kernel_reads_sparse_rows_as_the_vectorised_kernel():
    import scipy.sparse as sp

    X, hidden, P, W, order, fill = _problem(np.float32, 2, seed=7)
    rows = ScaledData(sp.csr_matrix(X), False)
    options = dict(cosine=False, clip=1.5, weighted=True, n_hidden=2,
                   restarts=np.arange(N_RESTARTS))
    vectorised = _two_epochs(False, rows, hidden, P, W, order, fill, **options)
    for a, b in zip(_two_epochs(True, rows, hidden, P, W, order, fill, **options), vectorised):
        np.testing.assert_array_equal(a, b)


def test_small_epochs_take_the_compact_kernel():
    assert _epoch.uses_compact_kernel(200, 3, 1, 10)  # a first fit on 200 points
    assert _epoch.uses_compact_kernel(4_000, 5, 2, 10)
    assert not _epoch.uses_compact_kernel(1797, 10, 10, 10)  # the digits
    assert not _epoch.uses_compact_kernel(60_000, 10, 118, 10)  # MNIST
