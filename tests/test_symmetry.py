"""The one-pass summary of a square matrix (``_utils._symmetry``) behind every check
of a dense similarity or affinity matrix."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skdiffclust._utils._symmetry import TILE, summarise
from skdiffclust._utils._validation import check_similarity_matrix, is_symmetric


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3 * TILE + 5), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from([np.float32, np.float64]), fortran=st.booleans(),
       symmetric=st.booleans())
def test_the_summary_is_numpys_on_any_size_layout_and_dtype(n, seed, dtype, fortran,
                                                            symmetric):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((n, n)).astype(dtype)
    if symmetric:
        S = np.triu(S) + np.triu(S, 1).T
    if fortran:
        S = np.asfortranarray(S)
    asymmetry, lowest, highest = summarise(S)
    expected = np.abs(S.astype(np.float64) - S.T.astype(np.float64)).max()
    assert asymmetry == pytest.approx(expected, rel=1e-6, abs=0)
    assert (lowest, highest) == (S.min(), S.max())
    assert is_symmetric(S) == (symmetric or n == 1)


def test_one_asymmetric_pair_in_the_last_tile_is_found():
    S = np.zeros((2 * TILE + 3, 2 * TILE + 3))
    S[-1, 5] = 2.0
    assert summarise(S) == (2.0, 0.0, 2.0)
    with pytest.raises(ValueError, match="exceeds the tolerance by up to 2"):
        check_similarity_matrix(S)


def test_an_empty_matrix_is_symmetric():
    assert summarise(np.empty((0, 0))) == (0.0, 0.0, 0.0)
    assert is_symmetric(np.empty((0, 0)))
