"""The shared floors' numba kernels refuse what they would read out of bounds, and
numba's bounds checking reaches every kernel declared by ``_utils._numba.jit``.

CI runs the kernels' tests once more with ``NUMBA_BOUNDSCHECK=1`` (``.ci/boundscheck``),
so that an index out of range is an ``IndexError`` in a test rather than memory
corrupted in a user's process: the last test here checks that the package's ``jit``
(its cache, the options of internal kernels, inlining) does not defeat it.
"""

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from skdiffclust._training._optim import Adam
from skdiffclust._utils._symmetry import summarise
from tests._isolated import outcomes_in_subprocess


def test_the_summary_of_a_square_matrix_is_numpys():
    S = np.random.default_rng(0).normal(size=(70, 70))
    asymmetry, lowest, highest = summarise(S)
    assert asymmetry == np.abs(S - S.T).max()
    assert (lowest, highest) == (S.min(), S.max())


def test_matrices_that_are_not_square_are_refused_before_the_kernel():
    # the kernel reads S[j, i] for every S[i, j] of the upper triangle
    outcomes = outcomes_in_subprocess("""
        import numpy as np
        from skdiffclust._utils._symmetry import summarise
        """, [("wide", "summarise(np.ones((40, 70)))"),
              ("tall", "summarise(np.ones((70, 40)))"),
              ("1-D", "summarise(np.ones(70))"),
              ("3-D", "summarise(np.ones((4, 4, 4)))")])
    for name, outcome in outcomes.items():
        assert outcome.startswith("ValueError: a square matrix is expected"), (name, outcome)


def test_adam_refuses_a_gradient_of_another_shape():
    params = {"w": np.zeros((3, 4))}
    optimizer = Adam(params, learning_rate=0.1)
    with pytest.raises(ValueError, match=r"gradient of 'w' has shape \(4, 3\)"):
        optimizer.step(params, {"w": np.ones((4, 3))})
    with pytest.raises(ValueError, match=r"shape \(3, 1\)"):
        optimizer.step(params, {"w": np.ones((3, 1))})
    assert np.all(params["w"] == 0.0)
    optimizer.step(params, {"w": np.ones((3, 4))})
    np.testing.assert_allclose(params["w"], -0.1)  # Adam's first step: -lr sign(g)


KERNELS = """
    import numpy as np
    from skdiffclust._utils._numba import jit
    from skdiffclust.clam._kernels import INTERNAL
    from skdiffclust.forest._perturbed import _add_edges

    @jit(**INTERNAL)
    def _store(a, i):
        a[i] = 1.0

    @jit(error_model="numpy", _nrt=False)
    def internal(a, i):
        _store(a, i)
        return 0

    @jit(inline="always")
    def _load(a, i):
        return a[i]

    @jit
    def inlined(a, i):
        return _load(a, i)
    """


def test_boundscheck_reaches_every_kind_of_kernel():
    """With NUMBA_BOUNDSCHECK=1 and a fresh cache, an out-of-range index raises
    IndexError in a package kernel, in a kernel with the internal kernels' options
    (no CPython wrapper, no NRT) and in an inlined helper."""
    with tempfile.TemporaryDirectory() as cache:
        outcomes = outcomes_in_subprocess(KERNELS, [
            ("package kernel", "_add_edges(np.array([[[0, 5]]], np.int32), np.array([1]), "
                               "np.zeros((3, 3)))"),
            ("internal kernel", "internal(np.zeros(3), 7)"),
            ("inlined helper", "inlined(np.zeros(3), 7)"),
            ("in range", "assert inlined(np.arange(3.0), 2) == 2.0"),
        ], env={"NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": cache})
    assert outcomes.pop("in range") == "returned"
    for name, outcome in outcomes.items():
        assert outcome.startswith("IndexError"), (name, outcome)


# a numba kernel (skdiffclust's jit, numba's njit) or intrinsic declared in a module;
# the CUDA kernels' ``@cuda.jit`` are not (see .ci/boundscheck)
_DECLARES_KERNEL = re.compile(
    r"^\s*@(jit|njit|intrinsic|numba\.njit|numba\.jit)\b|\bnumba\.njit\(|^\s*\w+ = jit\(",
    re.MULTILINE)


def test_the_bounds_checked_leg_covers_every_numba_kernel_and_intrinsic():
    """.ci/boundscheck names every module of the package that declares a numba
    kernel or intrinsic (``_utils/_packed``'s included) beside the test files that
    exercise it, and runs each of those files."""
    import skdiffclust

    root = Path(__file__).resolve().parent.parent
    script = (root / ".ci" / "boundscheck").read_text()
    comment = "\n".join(line for line in script.splitlines() if line.startswith("#"))
    files = re.findall(r"^\s+(tests/\S+\.py)\b", script, re.MULTILINE)
    assert files and all((root / name).is_file() for name in files), files
    for name in re.findall(r"\btest_[\w*]+", comment):
        pattern = re.compile(name.replace("*", r"\w*") + r"\.py$")
        assert any(pattern.search(file) for file in files), f"{name} is not run"
    package = Path(skdiffclust.__file__).parent
    declaring = sorted(path.relative_to(package) for path in package.rglob("*.py")
                       if _DECLARES_KERNEL.search(path.read_text(encoding="utf-8")))
    assert Path("_utils/_packed.py") in declaring, declaring
    missing = [str(path) for path in declaring
               if not re.search(rf"(\b|/){path.stem}\b", comment)]
    assert not missing, f"not covered in .ci/boundscheck: {missing}"
    for name in ("tests/test_packed.py", "tests/clam/test_compact_kernel.py"):
        assert name in files
