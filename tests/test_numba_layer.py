"""The numba layer: chunked kernels, Ctrl-C, read-only installs, the compilation notice.

Most tests run Python in a subprocess: signals, a fresh numba cache or an
unwritable install are properties of a process.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import skdiffclust
from skdiffclust._utils import _numba
from skdiffclust.forest import _perturbed, _solver
from skdiffclust.forest._solver import feature_tree, similarity_tree

PACKAGE = Path(skdiffclust.__file__).resolve().parent
INTERRUPT_WITHIN = 2.0  # seconds from the signal to KeyboardInterrupt


def _python(code, env=None, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, **kwargs)


# -- chunks give the results of one call ---------------------------------------------


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "chebyshev", "minkowski",
                                    "cosine"])
def test_prim_in_chunks_of_one_iteration_is_prim_in_one_call(metric, monkeypatch):
    X = np.random.default_rng(0).standard_normal((80, 4))
    params = {"p": 3} if metric == "minkowski" else None
    whole = feature_tree(X, metric=metric, metric_params=params, algorithm="prim")
    monkeypatch.setattr(_solver, "PRIM_TERMS_PER_CALL", 1)
    chunked = feature_tree(X, metric=metric, metric_params=params, algorithm="prim")
    for a, b in zip(whole, chunked):
        np.testing.assert_array_equal(a, b)


def test_similarity_prim_in_chunks_is_prim_in_one_call(monkeypatch):
    W = np.random.default_rng(1).uniform(size=(60, 60))
    S = W + W.T
    whole = similarity_tree(S)
    monkeypatch.setattr(_solver, "PRIM_TERMS_PER_CALL", 7)
    for a, b in zip(whole, similarity_tree(S)):
        np.testing.assert_array_equal(a, b)


def test_perturbed_samples_do_not_depend_on_chunks_or_threads(monkeypatch):
    import numba

    from skdiffclust.forest._constraints import Constraints
    from skdiffclust.forest._dense import kernel_constraints

    rng = np.random.default_rng(2)
    W = rng.standard_normal((30, 30))
    S = (W + W.T).astype(np.float32)
    labels = np.full(30, -1)
    labels[:6] = [0, 0, 1, 1, 2, 2]
    constraints = kernel_constraints(Constraints.from_labels(labels, 30))

    def solve():
        free, con = _perturbed.perturbed_forests(S, 3, 0.5, 7, 23, True, constraints)
        G = rng.standard_normal((30, 30))
        return (*free, *con, _perturbed.mean_connectivity(free[3]),
                _perturbed.connectivity_inner(G, con[3]),
                _perturbed.score_function_gradient(30, 0.5, 7, np.linspace(-1, 1, 23)))

    rng = np.random.default_rng(3)
    whole = solve()
    monkeypatch.setattr(_perturbed, "ENTRIES_PER_CALL", 1)  # one sample or row a call
    threads = numba.get_num_threads()
    for n_threads in {1, threads}:
        numba.set_num_threads(n_threads)
        try:
            rng = np.random.default_rng(3)
            for a, b in zip(whole, solve()):
                np.testing.assert_array_equal(a, b)
        finally:
            numba.set_num_threads(threads)


def test_clam_epoch_in_chunks_of_one_batch_is_one_call(monkeypatch):
    from skdiffclust.clam import _epoch, _kernels

    rng = np.random.default_rng(4)
    X = rng.standard_normal((70, 5)).astype(np.float32)
    P = rng.standard_normal((3, 4, 5)).astype(np.float32)
    hidden = _kernels.hidden_features(rng.random((3, 70, 2)), 5)

    def epoch():
        params = [P.copy(), np.zeros((3, 4), np.float32)]
        moments = tuple(np.zeros_like(a) for a in (params[0], params[0], params[1],
                                                   params[1]))
        steps, *outputs = _epoch.train_epoch(
            X, np.arange(70), hidden, X.mean(0), True, np.arange(3), *params, moments,
            np.full(3, 0.05), 0, True, 1.0, False, 4, 0.25, 8)
        return steps, *outputs, *params, *moments

    whole = epoch()
    monkeypatch.setattr(_kernels, "LANE_STEPS_PER_CALL", 1)
    chunked = epoch()
    assert whole[0] == chunked[0] == 9  # ceil(70 / 8) Adam steps
    assert len(whole) == len(chunked)
    for a, b in zip(whole[1:], chunked[1:]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("n_hidden", [0, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_clam_inference_in_numpy_is_the_kernel(metric, n_hidden, sparse, monkeypatch):
    """Small inference runs in NumPy, large inference by the kernel: the same bits,
    in slices of any size, on any number of threads."""
    import scipy.sparse as sp

    from skdiffclust.clam import _inference, _kernels
    from skdiffclust.clam._data import ScaledData

    rng = np.random.default_rng(5)
    X = rng.standard_normal((90, 6))
    X[rng.random(X.shape) < 0.3] = 0.0
    cosine = metric == "cosine"
    rows = ScaledData(sp.csr_matrix(X) if sparse else X, cosine)
    rows = rows if sparse else rows.dense()
    P, W = rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 4))
    fill = rng.standard_normal(6)
    if n_hidden:
        hidden = np.repeat(_kernels.hidden_features(rng.random((1, 90, n_hidden)), 6), 3,
                           axis=0)
    else:
        hidden = np.broadcast_to(np.arange(6), (3, 1, 6))

    def infer(numpy_work, n_threads):
        monkeypatch.setattr(_inference, "NUMPY_WORK", numpy_work)
        losses = _inference.completion_losses(
            rows, hidden, P, W, fill, n_hidden > 0, 0.7, cosine, 5, 0.3, 4,
            n_threads=n_threads, per_point=n_hidden > 0)
        final = _inference.converged_points(rows, P[:1], W[:1], 0.7, cosine, 5, 0.3, 4,
                                            n_threads=n_threads)
        return losses, final

    kernel = infer(-1, 1)
    for numpy_work, n_threads in [(2**62, 1), (2**62, 2)]:
        for a, b in zip(kernel, infer(numpy_work, n_threads)):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(_kernels, "LANE_STEPS_PER_CALL", 1)  # a slice per chunk of 4
    sliced = infer(-1, 2)
    np.testing.assert_array_equal(sliced[1], kernel[1])  # the losses: other partial sums
    np.testing.assert_allclose(sliced[0], kernel[0], rtol=1e-12)
    for a, b in zip(sliced, infer(2**62, 2)):
        np.testing.assert_array_equal(a, b)


def test_clam_exp_in_numpy_is_the_float64_kernel():
    """The NumPy exp of small inference has the float64 kernel's bits, floor,
    totals and all, over the whole range of logits, also where the kernel was first
    compiled for a caller with other fastmath flags (numba's flags inheritance)."""
    import numba

    from skdiffclust.clam import _fastexp
    from skdiffclust.clam._kernels import LOGIT_FLOOR

    @numba.njit(fastmath={"contract"})
    def through_a_kernel(logits, largest, floor, n_lanes, p, total, shifted):
        _fastexp.exp_weights(logits, largest, floor, n_lanes, p, total, shifted)

    rng = np.random.default_rng(0)
    logits = rng.uniform(2.0 * LOGIT_FLOOR, 1.0, (3, 20_000))
    logits[:, :5] = [[0.0], [LOGIT_FLOOR], [-1e-300]]
    largest = logits.max(axis=0)
    n_lanes = logits.shape[1]
    p_numpy, total_numpy = np.empty_like(logits), np.full(n_lanes, 0.25)
    _fastexp.exp_weights_numpy(logits, largest, LOGIT_FLOOR, p_numpy, total_numpy)
    assert p_numpy.min() > 0.0 and p_numpy.max() == 1.0
    for kernel in [through_a_kernel, _fastexp.exp_weights_double]:
        p, total = np.empty_like(logits), np.full(n_lanes, 0.25)
        kernel(logits, largest, LOGIT_FLOOR, n_lanes, p, total, np.empty_like(logits))
        np.testing.assert_array_equal(p_numpy, p)
        np.testing.assert_array_equal(total_numpy, total)


# -- compiling for size ------------------------------------------------------------


def _attributes_of(llvm_ir, name):
    """The attributes of the definition of the function whose symbol contains
    ``name`` in a module's LLVM IR (groups ``#N`` resolved)."""
    define = next(line for line in llvm_ir.splitlines()
                  if line.startswith("define") and name in line)
    words = set(define.split())
    for group in re.findall(r"#(\d+)", define):
        words |= set(re.search(rf"^attributes #{group} = {{(.*)}}", llvm_ir, re.M)[1].split())
    return words


def test_compile_for_size_marks_the_kernel_only_when_asked_and_keeps_its_bits():
    import numba

    @numba.njit
    def affine_sum(x, for_size):
        _numba.compile_for_size(for_size)
        total = 0.0
        for i in range(x.shape[0]):
            total += 2.0 * x[i] + 1.0
        return total

    x = np.random.default_rng(0).standard_normal(10_001)
    assert affine_sum(x, True) == affine_sum(x, None)
    for signature in affine_sum.signatures:
        marked = signature[1] != numba.none
        attributes = _attributes_of(affine_sum.inspect_llvm(signature), "affine_sum")
        assert ({"minsize", "optsize"} <= attributes) is marked


@pytest.mark.parametrize("source, target", [(np.float64, np.int64), (np.int64, np.float64),
                                            (np.float32, np.int32), (np.int32, np.float32)])
def test_bits_as_reads_the_bits_as_numpy_view_does(source, target):
    import numba

    @numba.njit
    def reread(values, out):
        for i in range(values.shape[0]):
            out[i] = _numba.bits_as(values[i], target)

    special = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1e-45, 3.4e38]
    rng = np.random.default_rng(0)
    if np.issubdtype(source, np.floating):
        values = np.concatenate([np.array(special, source),
                                 rng.standard_normal(50).astype(source)])
    else:
        info = np.iinfo(source)
        values = np.concatenate([np.array([0, -1, 1, info.min, info.max], source),
                                 rng.integers(info.min, info.max, 50, dtype=source)])
    out = np.empty(values.shape, target)
    reread(values, out)
    assert np.array_equal(out.view(source), values, equal_nan=True)
    assert np.array_equal(out, values.view(target), equal_nan=True)


def test_bits_as_refuses_types_of_another_width():
    import numba

    @numba.njit
    def narrowing(x):
        return _numba.bits_as(x, np.int32)

    with pytest.raises(numba.core.errors.TypingError, match="bits_as: cannot read"):
        narrowing(1.0)


def test_systemerror_of_an_interrupted_kernel_becomes_keyboardinterrupt():
    def kernel_interrupted_while_boxing():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set"
                              ) from interrupt

    with pytest.raises(KeyboardInterrupt):
        _numba.interruptible(kernel_interrupted_while_boxing)()
    with pytest.raises(SystemError):
        _numba.interruptible(lambda: (_ for _ in ()).throw(SystemError("other")))()


# -- Ctrl-C --------------------------------------------------------------------------------

INTERRUPTED = """
    import signal, time, traceback
    # Python leaves SIGINT ignored when its parent ignored it (a test run started in
    # the background by a shell: nohup ... &), so that no Ctrl-C would arrive
    signal.signal(signal.SIGINT, signal.default_int_handler)
    reference = small()  # compiles the kernels (or loads them)
    print("ready", flush=True)
    try:
        big()
        print("finished before the signal", flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.time(), flush=True)
        traceback.print_exc()
    again = small()
    print("usable", all(np.array_equal(a, b) for a, b in zip(reference, again)), flush=True)
"""


def _interrupt(setup, delay=0.5):
    """Run INTERRUPTED with ``setup`` in a subprocess, SIGINT ``delay`` s after "ready"."""
    code = "import numpy as np\n" + textwrap.dedent(setup) + textwrap.dedent(INTERRUPTED)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready", process.stderr.read()
        time.sleep(delay)
        sent = time.time()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, (process.returncode, stderr[-3000:])
    lines = dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)
    assert "interrupted" in lines, stdout + stderr[-3000:]
    assert float(lines["interrupted"]) - sent < INTERRUPT_WITHIN
    assert "KeyboardInterrupt" in stderr and "SystemError" not in stderr
    assert lines["usable"] == "True"


@pytest.mark.torch
def test_ctrl_c_interrupts_perturbed_spanning_forest():
    _interrupt("""
        import numba, torch
        from skdiffclust.torch import perturbed_spanning_forest
        numba.set_num_threads(min(numba.get_num_threads(), 2))
        X = torch.randn(1500, 5, generator=torch.Generator().manual_seed(0))
        S = -torch.cdist(X, X) ** 2

        def small():
            g = torch.Generator().manual_seed(1)
            return [t.numpy() for t in perturbed_spanning_forest(S[:50, :50], 3,
                                                                 n_samples=10, generator=g)]

        def big():  # 20 s of work on 2 threads if not interrupted
            perturbed_spanning_forest(S, 3, n_samples=2000)
    """)


def test_ctrl_c_interrupts_a_long_prim_fit():
    _interrupt("""
        from skdiffclust import SpanningForestClustering
        X = np.random.default_rng(0).standard_normal((120000, 16))

        def small():
            return [SpanningForestClustering(3, algorithm="prim").fit(X[:200]).labels_]

        def big():  # minutes of work if not interrupted
            SpanningForestClustering(3, algorithm="prim").fit(X)
    """)


def test_ctrl_c_interrupts_clam_training():
    _interrupt("""
        from skdiffclust import ClAM
        X = np.random.default_rng(0).standard_normal((200000, 12))

        def small():
            model = ClAM(3, max_iter=2, device="cpu", random_state=0).fit(X[:100])
            return [model.labels_, model.cluster_centers_]

        def big():  # minutes of work if not interrupted
            ClAM(3, init="random", max_iter=1000, tol=0, device="cpu", random_state=0).fit(X)
    """)


# -- read-only installs --------------------------------------------------------------------


def _read_only_copy(root):
    """A copy of the package under ``root`` where numba cannot cache: read-only, and
    with a file named ``__pycache__`` in each package folder (so that root, whom
    permissions do not stop, cannot cache next to the sources either)."""
    site = root / "site"
    shutil.copytree(PACKAGE, site / "skdiffclust",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nb[ic]"))
    for folder, _, _ in os.walk(site):
        (Path(folder) / "__pycache__").write_text("")
    for folder, _, files in os.walk(site):
        for name in files:
            os.chmod(Path(folder) / name, 0o444)
        os.chmod(folder, 0o555)
    return site


def _writable_again(site):
    for folder, _, _ in os.walk(site):
        os.chmod(folder, 0o755)


def test_import_and_fit_from_a_read_only_install_without_a_home(tmp_path):
    site = _read_only_copy(tmp_path)
    home = tmp_path / "home"
    home.write_text("")  # a file: no ~/.cache can be made in it
    env = {key: value for key, value in os.environ.items()
           if key not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")}
    env.update(HOME=str(home), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    try:
        result = _python("""
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                import skdiffclust
                from skdiffclust import ClAM, SpanningForestClustering
                from sklearn.datasets import make_blobs
                X, y = make_blobs(150, centers=3, random_state=0)
                forest = SpanningForestClustering(3).fit(X)
                # no epoch: the inference kernels alone keep the test short
                clam = ClAM(3, max_iter=0, device="cpu", random_state=0).fit(X)
            from skdiffclust._utils._numba import CachingDisabledWarning, caching_is_off
            messages = [str(w.message) for w in caught
                        if issubclass(w.category, CachingDisabledWarning)]
            print(skdiffclust.__file__)
            print(caching_is_off(), len(messages), "NUMBA_CACHE_DIR" in messages[0])
            print(len(set(forest.labels_)), len(clam.labels_))
        """, env=env, cwd=tmp_path)
    finally:
        _writable_again(site)
    assert result.returncode == 0, result.stderr[-3000:]
    location, caching, sizes = result.stdout.splitlines()[-3:]
    assert location.startswith(str(site))
    assert caching.split() == ["True", "1", "True"]  # one warning, naming the fix
    assert sizes.split() == ["3", "150"]
    assert not list(site.rglob("*.nbi"))


# -- the compilation notice -----------------------------------------------------------------


def test_compilation_notice_when_compiling_and_never_from_the_cache(tmp_path):
    code = """
        import numpy as np
        from skdiffclust._utils import _numba
        from skdiffclust.forest._solver import similarity_tree
        _numba.NOTICE_DELAY = 0.0  # any compilation is long enough
        similarity_tree(np.eye(4))
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    # printed from a timer while numba compiles: not a warning, so not an error here
    cold = subprocess.run([sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, env=env)
    warm = _python(code, env=env)
    for result in (cold, warm):
        assert result.returncode == 0, result.stderr[-3000:]
    notices = [line for line in cold.stderr.splitlines() if line.startswith("skdiffclust:")]
    assert len(notices) == 1
    assert "compiling the spanning forests' numba kernels (first use only" in notices[0]
    assert "skdiffclust:" not in warm.stderr


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_pauses_while_a_kernel_compiles_and_no_longer(enabled):
    import gc

    from numba.core import event

    from skdiffclust.forest._dense import group_trees, upper_triangle_edges

    seen = []
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with event.trigger_event("numba:compile", data={"dispatcher": upper_triangle_edges}):
            with event.trigger_event("numba:compile", data={"dispatcher": group_trees}):
                seen.append(gc.isenabled())
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    finally:
        (gc.enable if was_enabled else gc.disable)()
    assert seen == [False, False, enabled]


def test_the_collector_runs_while_other_code_compiles():
    import gc

    import numba
    from numba.core import event

    def twice(x):
        return 2 * x

    seen = []
    with event.trigger_event("numba:compile", data={"dispatcher": numba.njit(twice)}):
        seen.append(gc.isenabled())
    assert seen == [gc.isenabled()]


def test_a_second_process_loads_every_prim_kernel_from_the_cache(tmp_path):
    # The sweep once took its row kernel as an argument: numba never found such a
    # kernel in its cache, so every process compiled it again (and saving the
    # cache index could fail with ReferenceError, depending on the GC).
    code = """
        import numpy as np
        from skdiffclust import SpanningForestClustering
        from skdiffclust._utils import _numba
        _numba.NOTICE_DELAY = 0.0  # any compilation prints the notice
        X = np.random.default_rng(0).standard_normal((30, 3))
        for dtype in (np.float64, np.float32):
            for metric in ("euclidean", "manhattan", "chebyshev", "minkowski", "cosine"):
                SpanningForestClustering(3, metric=metric, algorithm="prim").fit(X.astype(dtype))
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    cold, warm = _python(code, env=env), _python(code, env=env)
    for result in (cold, warm):
        assert result.returncode == 0, result.stderr[-3000:]
    assert "skdiffclust:" in cold.stderr
    assert "skdiffclust:" not in warm.stderr
