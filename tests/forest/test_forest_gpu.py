"""The CUDA solver of the perturbed forests, checked against the CPU solver sample by sample.

Without a GPU, the CUDA kernels run on numba's CUDA simulator, in a subprocess
(``NUMBA_ENABLE_CUDASIM=1`` changes numba.cuda for the whole process), on tiny
problems: this file, run as a script, dumps the device results; the tests compare
them with the CPU solver on the very perturbed matrices the kernels saw. With a GPU,
the same comparisons run on CUDA tensors.
"""

import os
import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skdiffclust.forest._constraints import Constraints  # noqa: E402
from skdiffclust.forest._gpu import DeviceConstraints  # noqa: E402
from skdiffclust.forest._kruskal import tree_connectors  # noqa: E402
from skdiffclust.forest._perturbed import perturb  # noqa: E402
from skdiffclust.forest._solver import forest_from_similarity, similarity_tree  # noqa: E402
from skdiffclust.forest._seeds import seed_from_generator  # noqa: E402

pytestmark = pytest.mark.torch
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


# ----------------------------------------------------------------- problems
def _blobs(n, seed, dtype=np.float32):
    X = np.random.default_rng(seed).standard_normal((n, 2))
    S = -((X[:, None] - X[None]) ** 2).sum(-1)
    return S.astype(dtype)


def _line(n, seed):
    """Points on a line, slightly jittered: Prim's tree is the path 0-1-...-(n-1)."""
    x = np.arange(n) + 0.1 * np.random.default_rng(seed).standard_normal(n)
    return (-((x[:, None] - x[None]) ** 2)).astype(np.float32)


def _ties(n):
    """Integer similarities with many exact ties, far from 0 so that a tiny noise
    rounds away in float32."""
    x = np.array([0, 1, 1, 2, 3, 3, 3, 5, 6, 6, 7, 9])[:n]
    return (-np.abs(x[:, None] - x[None]) - 8.0).astype(np.float32)


def _many_ties(n, seed):
    """As :func:`_ties` for any n: integer positions in 0..5, drawn."""
    x = np.random.default_rng(seed).integers(0, 6, n)
    return (-np.abs(x[:, None] - x[None]) - 8.0).astype(np.float32)


def _matrix_constraints(n):
    C = np.zeros((n, n), dtype=np.int8)
    for i, j, sign in ((0, 4, 1), (2, 7, 1), (5, 6, 1), (0, 2, -1)):
        C[i, j] = C[j, i] = sign
    return Constraints.from_matrix(C, n)


SCENARIOS = {
    "labels": dict(S=lambda: _blobs(10, 0), k=3, eps=0.5, N=4, threads=4,
                   labels=[0, 1, 0, -1, 2, -1, 1, -1, -1, -1]),
    "ties": dict(S=lambda: _ties(9), k=3, eps=1e-9, N=2, threads=16,
                 labels=[0, -1, -1, 1, -1, -1, -1, -1, 0]),
    "ties_few_threads": dict(S=lambda: _ties(12), k=4, eps=1e-9, N=2, threads=2,
                             labels=[-1, 0, -1, -1, 1, 2, -1, 1, -1, 0, -1, -1]),
    "float64": dict(S=lambda: _blobs(8, 1, np.float64), k=2, eps=0.3, N=3, threads=1,
                    labels=None),
    "crossing": dict(S=lambda: _line(10, 2), k=3, eps=0.05, N=4, threads=2,
                     labels=[0, 1, 0, 1, -1, 1, -1, -1, 2, 2]),
    "reset": dict(S=lambda: _line(10, 3), k=6, eps=0.05, N=4, threads=2,
                  labels=[0, -1, 0, 1, -1, 1, -1, -1, 2, 2]),
    "matrix": dict(S=lambda: _blobs(9, 4), k=3, eps=0.5, N=4, threads=8, matrix=True),
    "one_class": dict(S=lambda: _blobs(8, 5), k=2, eps=0.5, N=4, threads=2,
                      labels=[0, -1, 0, 0, -1, -1, -1, -1]),
    # Prim's argmin reduces within warps, then across them: two warps, 33 positions
    # (the second warp holds one, then none), equal keys in both
    "two_warps": dict(S=lambda: _many_ties(34, 0), k=4, eps=1e-9, N=1, threads=64,
                      labels=None),
    # one edge, one position: a full warp with 31 idle lanes
    "two_points": dict(S=lambda: _blobs(2, 0), k=1, eps=0.5, N=2, threads=32, labels=None),
}


def _random_case(seed):
    """A random feasible problem: size, dtype, noise, labels, threads per block."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 15))
    y = np.where(rng.random(n) < 0.5, rng.integers(0, 4, n), -1)
    lo, hi = Constraints.from_labels(y, n).feasible_n_clusters()
    dtype = (np.float32, np.float64)[seed % 2]
    return dict(S=lambda: _blobs(n, seed, dtype), k=int(rng.integers(lo, min(hi, lo + 3) + 1)),
                eps=float(rng.choice([0.05, 0.5, 2.0])), N=3,
                threads=int(rng.choice([1, 2, 4, 8, 16, 32])), labels=y.tolist())


SCENARIOS.update({f"random{seed}": _random_case(seed) for seed in range(8)})
SEED = 12345
GRAD = dict(n=8, k=2, eps=0.5, N=4, generator_seed=7, labels=[0, 1, -1, 0, -1, -1, 1, -1])


def _constraints(case, n):
    if case.get("matrix"):
        return _matrix_constraints(n)
    if case["labels"] is None:
        return None
    return Constraints.from_labels(np.array(case["labels"]), n)


def _gradient_inputs():
    rng = np.random.default_rng(3)
    n = GRAD["n"]
    S = _blobs(n, 6, np.float64)
    G_A, G_M = rng.standard_normal((2, n, n))
    return S, G_A, G_M


# ------------------------------------------------------- device side (script)
def _record_kernel_signatures(_gpu, signatures):
    """Record the numba types every kernel is launched with (to compile them for a GPU)."""
    import numba

    launch = _gpu.Launcher.__call__

    def recording(self, kernel, blocks, threads, shared, *args):
        types = tuple(numba.typeof(self._view(a)) for a in args)
        signatures.setdefault(kernel.__name__, set()).add(types)
        launch(self, kernel, blocks, threads, shared, *args)

    _gpu.Launcher.__call__ = recording


def _dump(obj, path):
    with open(f"{path}.part", "wb") as f:
        pickle.dump(obj, f)
    os.replace(f"{path}.part", path)  # atomic: a reader never sees half a file


def _exercise_every_kernel(_gpu):
    """Every kernel with every argument type (both dtypes of S), on a tiny problem."""
    for dtype in (np.float32, np.float64):
        _gpu.solve_on_device(_blobs(5, 0, dtype), 2, 0.5, 1, np.array([0, 1, -1, -1, -1]),
                             threads=2, with_exact=True)
    problem = _gpu.DeviceProblem(torch.zeros(4, 4), 2, 1.0, 1, None,
                                 torch.zeros(1, dtype=torch.int64), threads=2)
    problem.score_gradient(torch.ones(1))


def _device_results(path):
    """Run the device solver on every scenario; save everything to ``path`` (npz).

    First, the kernels' signatures go to ``path.signatures`` (then
    ``path.all_signatures`` at the end), so that the compilation check can start
    while the scenarios run.
    """
    from skdiffclust import torch as cpu_api
    from skdiffclust.forest import _gpu

    signatures = {}
    _record_kernel_signatures(_gpu, signatures)
    _exercise_every_kernel(_gpu)
    _dump(signatures, f"{path}.signatures")
    out = {}
    for name, case in SCENARIOS.items():
        S = case["S"]()
        constraints = (_matrix_constraints(S.shape[0]) if case.get("matrix")
                       else None if case["labels"] is None else np.array(case["labels"]))
        res = _gpu.solve_on_device(S, case["k"], case["eps"], case["N"], constraints,
                                   seed=SEED, threads=case["threads"], with_exact=True)
        for key, value in res.items():
            if isinstance(value, dict):
                for field, array in value.items():
                    out[f"{name}/{key}/{field}"] = array
            elif value is not None:
                out[f"{name}/{key}"] = np.asarray(value)
    # the noise itself: S = 0, epsilon = 1
    zeros = torch.zeros(9, 9)
    seed = torch.full((1,), SEED, dtype=torch.int64)
    problem = _gpu.DeviceProblem(zeros, 2, 1.0, 3, None, seed, threads=2)
    out["noise"] = np.stack([problem.perturbed_matrix(s).numpy() for s in range(3)])
    out.update(_device_gradients(_gpu, cpu_api))
    _dump(signatures, f"{path}.all_signatures")
    np.savez(path, **out)


def _device_gradients(_gpu, cpu_api):
    """Autograd through the device operators and through the CPU ones, same generator."""
    S, G_A, G_M = _gradient_inputs()
    n, k, eps, N = GRAD["n"], GRAD["k"], GRAD["eps"], GRAD["N"]
    labels = torch.tensor(GRAD["labels"])
    out = {}
    for where, api in (("device", _gpu), ("cpu", cpu_api)):
        def generator():
            return torch.Generator().manual_seed(GRAD["generator_seed"])

        for cv in (True, False):
            S_var = torch.tensor(S, requires_grad=True)
            A, F, M = api.perturbed_spanning_forest(S_var, k, epsilon=eps, n_samples=N,
                                                    constraints=labels, generator=generator(),
                                                    control_variate=cv)
            if cv:
                (F_grad,) = torch.autograd.grad(F, S_var, retain_graph=True)
                out.update({f"grad/{where}/A": A.detach().numpy(), f"grad/{where}/F": F.item(),
                            f"grad/{where}/M": M.detach().numpy(),
                            f"grad/{where}/F_grad": F_grad.numpy()})
            (torch.tensor(G_A) * A).sum().add((torch.tensor(G_M) * M).sum()).backward()
            out[f"grad/{where}/score_cv{int(cv)}"] = S_var.grad.numpy()
        S_var = torch.tensor(S, requires_grad=True)
        A, F, M = api.perturbed_spanning_forest(S_var, k, epsilon=eps, n_samples=N,
                                                generator=generator())
        (torch.tensor(G_A) * A).sum().add((torch.tensor(G_M) * M).sum()).add(F).backward()
        out.update({f"grad/{where}/free_A": A.detach().numpy(), f"grad/{where}/free_F": F.item(),
                    f"grad/{where}/free_M": M.detach().numpy(),
                    f"grad/{where}/free_grad": S_var.grad.numpy()})
        S_var = torch.tensor(S, requires_grad=True)
        loss = api.partial_fenchel_young_loss(S_var, labels, k, epsilon=eps, n_samples=N,
                                              generator=generator())
        loss.backward()
        out[f"grad/{where}/loss"] = loss.item()
        out[f"grad/{where}/loss_grad"] = S_var.grad.numpy()
    seed = seed_from_generator(torch.Generator().manual_seed(GRAD["generator_seed"]))
    res = _gpu.solve_on_device(S, k, eps, N, np.array(GRAD["labels"]), seed=seed, threads=4,
                               with_exact=True, materialize=False)
    for field, array in res["constrained"].items():
        out[f"grad/samples/{field}"] = array
    problem = _gpu.DeviceProblem(torch.zeros(n, n, dtype=torch.float64), k, 1.0, N, None,
                                 torch.full((1,), seed, dtype=torch.int64), threads=2)
    out["grad/noise"] = np.stack([problem.perturbed_matrix(s).numpy() for s in range(N)])
    return out


_COMPILE_FOR_H100 = """
import pickle, sys
import numba.cuda.dispatcher as dispatcher
from numba import cuda


class H100:
    compute_capability = (9, 0)


# device functions ask the current device for its architecture: there is none here
dispatcher.get_current_device = lambda: H100()
from skdiffclust.forest import _gpu

kernels = _gpu._kernels()  # as the solver loads them (NumPy >= 2.5 needs its stand-in)

with open(sys.argv[1], "rb") as f:
    signatures = pickle.load(f)
for name, sigs in sorted(signatures.items()):
    for sig in sigs:
        cuda.compile_ptx(getattr(kernels, name).py_func, sig, cc=(9, 0))
print(sum(len(sigs) for sigs in signatures.values()))
"""


def _has_nvvm():
    check = "from numba.cuda.cudadrv import nvvm; assert nvvm.is_available()"
    return subprocess.run([sys.executable, "-c", check], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """The device results, computed on numba's CUDA simulator in a subprocess.

    Meanwhile, where NVVM is installed, another subprocess compiles the kernels for
    an H100 with the signatures they were launched with (``compiled``).
    """
    path = tmp_path_factory.mktemp("gpu") / "device.npz"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.Popen([sys.executable, __file__, str(path)], env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    compile_env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    compiling = None
    nvvm = _has_nvvm()
    while run.poll() is None:
        if nvvm and compiling is None and os.path.exists(f"{path}.signatures"):
            compiling = subprocess.Popen(
                [sys.executable, "-c", _COMPILE_FOR_H100, f"{path}.signatures"],
                env=compile_env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.05)
    _, stderr = run.communicate()
    assert run.returncode == 0, stderr[-3000:]
    with np.load(path) as data:
        results = dict(data)
    with open(f"{path}.signatures", "rb") as f:
        results["signatures"] = pickle.load(f)
    with open(f"{path}.all_signatures", "rb") as f:
        results["all_signatures"] = pickle.load(f)
    results["compiled"] = None
    if compiling is not None:
        stdout, stderr = compiling.communicate(timeout=600)
        results["compiled"] = (compiling.returncode, stdout, stderr)
    return results


# ------------------------------------------------------------------- helpers
def _edges(src, dst, m):
    return sorted((min(a, b), max(a, b)) for a, b in zip(src[:m], dst[:m]))


def _assert_same_forest(device, s, forest):
    m = device["n_edges"][s]
    expected = _edges(*forest.edges.T, len(forest.edges))
    assert _edges(device["src"][s], device["dst"][s], m) == expected
    np.testing.assert_array_equal(device["labels"][s], forest.labels)
    assert device["n_reached"][s] == forest.n_clusters
    assert device["values"][s] == pytest.approx(2 * forest.weights.sum(), rel=1e-12, abs=1e-12)


def _fields(data, prefix):
    start = len(prefix) + 1
    return {key[start:]: value for key, value in data.items() if key.startswith(prefix + "/")}


def _adjacency(pairs, n):
    A = np.zeros((n, n))
    for a, b in pairs:
        A[a, b] += 1
        A[b, a] += 1
    return A


def _sample_adjacency(samples, s, n):
    return _adjacency(_edges(samples["src"][s], samples["dst"][s], samples["n_edges"][s]), n)


def _mean_adjacency(samples, n, rows):
    return np.mean([_sample_adjacency(samples, s, n) for s in range(rows)], 0)


# ------------------------------------------------------------ simulator tests
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_sample_is_the_cpu_forest_of_its_perturbed_matrix(simulated, name):
    case = SCENARIOS[name]
    S = case["S"]()
    n, N = S.shape[0], case["N"]
    constraints = _constraints(case, n)
    perturbed = simulated[f"{name}/perturbed"]
    for s in range(N + 1):  # the last row is the unperturbed forest (control variate)
        P = perturbed[s] if s < N else S
        _assert_same_forest(_fields(simulated, f"{name}/free"), s,
                            forest_from_similarity(P, case["k"]))
        if constraints is not None:
            _assert_same_forest(_fields(simulated, f"{name}/constrained"), s,
                                forest_from_similarity(P, case["k"], constraints=constraints))


def test_the_device_noise_is_the_cpu_noise(simulated):
    for s, Z in enumerate(simulated["noise"]):
        expected = np.empty((9, 9), dtype=np.float32)
        perturb(np.zeros((9, 9), dtype=np.float32), 1.0, SEED, s, expected)
        np.testing.assert_allclose(Z, expected, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(Z, Z.T)
        assert np.all(np.diagonal(Z) == 0)
    assert np.std(simulated["noise"]) == pytest.approx(1.0, abs=0.25)


def test_ties_are_broken_as_on_the_cpu(simulated):
    # the noise rounds away: the kernels saw S itself, with its many exact ties,
    # and still built the CPU's forests (checked sample by sample above)
    for name in ("ties", "ties_few_threads", "two_warps"):
        S = SCENARIOS[name]["S"]()
        for P in simulated[f"{name}/perturbed"]:
            np.testing.assert_array_equal(P, S)
        n = S.shape[0]
        assert np.unique(S[np.triu_indices(n, 1)]).size < n


def test_scenarios_cover_every_branch_of_the_connectors(simulated):
    """Clean connectors, groups that need their own tree, and the fallback to own trees."""
    seen = set()
    for name in ("labels", "crossing", "reset", "matrix", "one_class"):
        case = SCENARIOS[name]
        n = case["S"]().shape[0]
        group_ptr, members, group, *_ = _constraints(case, n).kernel_arrays()
        for P in simulated[f"{name}/perturbed"]:
            tree = similarity_tree(P)
            path_src, _, _, own = tree_connectors(n, *tree, group_ptr, members, group, case["k"])
            if path_src.size:
                seen.add("connector")
            if own.any() and path_src.size:
                seen.add("own tree")
            if own.all() and not path_src.size:
                seen.add("all own trees")
    assert seen == {"connector", "own tree", "all own trees"}


@pytest.mark.parametrize("name", ["labels", "crossing", "matrix", "float64"])
def test_reductions_are_the_means_of_the_samples(simulated, name):
    case = SCENARIOS[name]
    n, N = case["S"]().shape[0], case["N"]
    constrained = _constraints(case, n) is not None
    samples = _fields(simulated, f"{name}/{'constrained' if constrained else 'free'}")
    np.testing.assert_array_equal(simulated[f"{name}/A"], _mean_adjacency(samples, n, N))
    assert simulated[f"{name}/F"] == pytest.approx(samples["values"][:N].mean(), rel=1e-12)
    labels = samples["labels"][:N]
    M = (labels[:, :, None] == labels[:, None, :]).mean(0)
    np.testing.assert_array_equal(simulated[f"{name}/M"], M)
    if constrained:
        free = _fields(simulated, f"{name}/free")
        assert simulated[f"{name}/loss"] == pytest.approx(
            free["values"][:N].mean() - samples["values"][:N].mean(), rel=1e-12)
        np.testing.assert_allclose(simulated[f"{name}/direction"],
                                   _mean_adjacency(free, n, N) - _mean_adjacency(samples, n, N))


def test_gradient_of_the_forest_value_is_the_mean_forest(simulated):
    np.testing.assert_array_equal(simulated["grad/device/F_grad"], simulated["grad/device/A"])


def test_gradient_of_the_loss_is_the_difference_of_mean_forests(simulated):
    S, _, _ = _gradient_inputs()
    n, k, N = GRAD["n"], GRAD["k"], GRAD["N"]
    samples = _fields(simulated, "grad/samples")
    constraints = Constraints.from_labels(np.array(GRAD["labels"]), n)
    noise = simulated["grad/noise"]
    free = [forest_from_similarity(S + GRAD["eps"] * noise[s], k) for s in range(N)]
    A_free = np.mean([_adjacency(_edges(*f.edges.T, len(f.edges)), n) for f in free], 0)
    expected = A_free - _mean_adjacency(samples, n, N)
    np.testing.assert_allclose(simulated["grad/device/loss_grad"], expected, atol=1e-12)
    for s in range(N):  # the device forests are those of S + eps Z_s
        P = S + GRAD["eps"] * noise[s]
        _assert_same_forest(samples, s, forest_from_similarity(P, k, constraints=constraints))


@pytest.mark.parametrize("control_variate", [True, False])
def test_score_function_gradient_regenerates_the_noise(simulated, control_variate):
    """VJP = (1 / (2 eps N)) sum_s (c_s - c_exact) Z_s, c_s = <G_A, A_s> + <G_M, M_s>."""
    _, G_A, G_M = _gradient_inputs()
    n, N, eps = GRAD["n"], GRAD["N"], GRAD["eps"]
    samples = _fields(simulated, "grad/samples")

    def coefficient(s):
        labels = samples["labels"][s]
        M = labels[:, None] == labels[None]
        return (G_A * _sample_adjacency(samples, s, n)).sum() + (G_M * M).sum()

    c = np.array([coefficient(s) for s in range(N + 1)])
    c = c[:N] - c[N] if control_variate else c[:N]
    expected = np.einsum("s,sij->ij", c, simulated["grad/noise"].astype(np.float64))
    expected /= 2 * eps * N
    np.testing.assert_allclose(simulated[f"grad/device/score_cv{int(control_variate)}"],
                               expected, rtol=1e-10, atol=1e-12)


def test_same_generator_gives_the_cpu_solver_results(simulated):
    for key in ("A", "M", "F", "loss", "loss_grad", "F_grad", "score_cv1", "score_cv0",
                "free_A", "free_F", "free_M", "free_grad"):
        np.testing.assert_allclose(simulated[f"grad/device/{key}"], simulated[f"grad/cpu/{key}"],
                                   rtol=1e-5, atol=1e-6, err_msg=key)


def test_kernels_compile_for_a_gpu_with_the_signatures_they_run_with(simulated):
    """Typing, lowering and NVVM for sm_90, as on an H100, where the simulator checks
    no types; skipped where no NVVM (the CUDA toolkit's compiler) is installed."""
    assert simulated["all_signatures"] == simulated["signatures"]  # all were compiled
    if simulated["compiled"] is None:
        pytest.skip("needs NVVM (the CUDA toolkit's compiler library)")
    returncode, stdout, stderr = simulated["compiled"]
    assert returncode == 0, stderr[-3000:]
    assert int(stdout.split()[-1]) >= 10


_COMPILE_WITHOUT_ROW_STACK = """
import math
import numpy as np
import scipy.sparse  # imports that read NumPy's whole namespace, before the removal
import numba.cuda.dispatcher as dispatcher
from numba import cuda, types
from skdiffclust.forest import _gpu

del np.row_stack  # as in NumPy >= 2.5


class H100:
    compute_capability = (9, 0)


dispatcher.get_current_device = lambda: H100()
_gpu._kernels()
assert not hasattr(np, "row_stack"), "the stand-in must not outlive the registries' load"


@cuda.jit
def kernel(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = math.exp(a[i])


cuda.compile_ptx(kernel.py_func, (types.float64[:],), cc=(9, 0))
"""


def test_kernels_compile_under_a_numpy_without_row_stack():
    """numba-cuda registers an overload of np.row_stack, which NumPy 2.5 removed: on
    an H100 with NumPy 2.5.2 every launch failed with AttributeError until _gpu
    provided a stand-in while the registries load."""
    if not hasattr(np, "row_stack"):
        pytest.skip("this NumPy has no row_stack to remove; the device run covers it")
    if not _has_nvvm():
        pytest.skip("needs NVVM (the CUDA toolkit's compiler library)")
    done = subprocess.run([sys.executable, "-c", _COMPILE_WITHOUT_ROW_STACK],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


# ------------------------------------------------------- host-side pieces
@pytest.mark.parametrize("seed", range(12))
def test_label_constraints_on_the_device_match_the_host_constraints(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 15))
    y = rng.integers(-1, int(rng.integers(1, 5)), n)
    dev = DeviceConstraints.from_labels(torch.as_tensor(y))
    group_ptr, members, group, rooted, general, _ = Constraints.from_labels(y, n).kernel_arrays()
    assert not general
    n_groups = int(dev.n_groups[0])
    assert n_groups == group_ptr.size - 1
    np.testing.assert_array_equal(dev.group.numpy(), group)
    np.testing.assert_array_equal(dev.group_ptr.numpy()[: n_groups + 1], group_ptr)
    np.testing.assert_array_equal(dev.group_members.numpy()[: group_ptr[-1]], members)
    np.testing.assert_array_equal(dev.rooted.numpy(), rooted)


def test_importing_the_torch_api_loads_no_cuda_code():
    code = ("import sys, skdiffclust, skdiffclust.torch; "
            "assert 'numba.cuda' not in sys.modules, 'numba.cuda'; "
            "assert 'skdiffclust.forest._gpu' not in sys.modules, '_gpu'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_partial_labels_are_accepted_as_constraints_on_the_cpu():
    from skdiffclust.torch import (
        constraints_from_labels,
        partial_fenchel_young_loss,
        perturbed_spanning_forest,
    )

    S = torch.as_tensor(_blobs(12, 7))
    y = torch.tensor([0, 1, -1, 0, 2, -1, -1, 1, -1, -1, 2, -1])
    for fn, args in ((perturbed_spanning_forest, (3,)), (partial_fenchel_young_loss, None)):
        def call(C):
            gen = torch.Generator().manual_seed(0)
            if args is None:
                return (partial_fenchel_young_loss(S, C, 3, epsilon=0.5, n_samples=20,
                                                   generator=gen),)
            return fn(S, *args, epsilon=0.5, n_samples=20, constraints=C, generator=gen)

        for a, b in zip(call(y), call(constraints_from_labels(y))):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("S,match", [
    (torch.zeros(3, 4), "square"),
    (torch.tensor([[0.0, 1.0], [0.0, 0.0]]), "symmetric"),
    (torch.tensor([[0.0, float("nan")], [float("nan"), 0.0]]), "NaN"),
    (torch.tensor([[0.0, float("inf")], [float("inf"), 0.0]]), "NaN"),
])
def test_device_validation_raises_the_cpu_errors(S, match):
    from skdiffclust.forest._torch import _check_device_similarity

    with pytest.raises(ValueError, match=match):
        _check_device_similarity(S)
    with pytest.raises(TypeError, match="floating"):
        _check_device_similarity(torch.zeros(3, 3, dtype=torch.int64))
    # float32 rounding of a symmetric product passes, as on the CPU
    X = torch.randn(30, 5, generator=torch.Generator().manual_seed(0))
    _check_device_similarity(-torch.cdist(X, X) ** 2)


def test_device_dispatch_keeps_rooted_constraints_and_sends_the_rest_to_the_cpu():
    from skdiffclust.forest._torch import _device_constraints

    S = torch.as_tensor(_blobs(6, 0))
    y = torch.tensor([0, 1, -1, 0, -1, 1])
    parsed = _device_constraints(S, 2, 0.1, 10, y)
    assert isinstance(parsed, Constraints)
    # two labels, apart: the labelled samples are tied to the root, the rest free
    np.testing.assert_array_equal(parsed.rooted_samples(),
                                  [True, True, False, True, False, True])
    assert _device_constraints(S, 2, 0.1, 10, None) is None
    assert _device_constraints(S, 2, 0.1, 10, torch.full((6,), -1)) is None
    # cannot-links 0-1 and 1-2 but not 0-2: not complete between groups
    C = torch.zeros(6, 6, dtype=torch.int8)
    C[0, 1] = C[1, 0] = C[1, 2] = C[2, 1] = -1
    assert _device_constraints(S, 2, 0.1, 10, C) is False
    assert _device_constraints(torch.zeros(1, 1), 1, 0.1, 10, None) is False
    with pytest.raises(ValueError, match="infeasible"):
        _device_constraints(S, 1, 0.1, 10, y)
    with pytest.raises(ValueError, match="6 entries"):
        _device_constraints(S, 2, 0.1, 10, y[:5])


class _FakeCudaTensor:
    """What :func:`device_view` reads of a CUDA tensor: its address, layout, device."""

    def __init__(self, pointer, shape, dtype=torch.float32, device_index=0):
        self.pointer, self.shape, self.dtype = pointer, shape, dtype
        self.device = torch.device("cuda", device_index)

    def data_ptr(self):
        return self.pointer

    def stride(self):
        return tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.pointer, False), "shape": self.shape, "version": 2,
                "typestr": "<i8" if self.dtype == torch.int64 else "<f4", "strides": None}


def test_device_views_are_memoised_by_address_layout_and_device(monkeypatch):
    # the views of a step's tensors are reused: only a new address, layout or
    # device converts again (numba.cuda's conversion is what the memo saves)
    from numba import cuda

    from skdiffclust.forest import _gpu

    converted = []

    class View:
        def __init__(self, desc, dtype=None):
            self.desc, self.dtype = desc, dtype

        def view(self, dtype):
            return View(self.desc, dtype)

    def convert(desc, owner=None, sync=True):
        assert owner is None and not sync  # the memo must not keep tensors alive
        converted.append(desc["shape"])
        return View(desc)

    monkeypatch.setattr(cuda, "from_cuda_array_interface", convert)
    monkeypatch.setattr(_gpu, "_device_views", {})
    first = _gpu.device_view(_FakeCudaTensor(4096, (3, 4)))
    assert _gpu.device_view(_FakeCudaTensor(4096, (3, 4))) is first
    assert _gpu.device_view(_FakeCudaTensor(4096, (4, 3))) is not first
    assert _gpu.device_view(_FakeCudaTensor(4096, (3, 4), device_index=1)) is not first
    unsigned = _gpu.device_view(_FakeCudaTensor(4096, (3, 4), torch.int64), unsigned=True)
    assert unsigned.dtype == np.uint64
    assert converted == [(3, 4), (4, 3), (3, 4), (3, 4)]
    monkeypatch.setattr(_gpu, "MAX_DEVICE_VIEWS", 2)
    _gpu.device_view(_FakeCudaTensor(8192, (3, 4)))  # the memo is full: it starts again
    assert len(_gpu._device_views) == 1


# ---------------------------------------------------------------- CUDA tests
@needs_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_samples_are_the_cpu_forests_of_their_perturbed_matrices(dtype):
    from skdiffclust.forest._gpu import solve_on_device

    n, k, N = 300, 5, 6
    S = _blobs(n, 8, dtype)
    y = np.where(np.arange(n) % 3 == 0, np.arange(n) % 4, -1)
    constraints = Constraints.from_labels(y, n)
    res = solve_on_device(S, k, 0.5, N, y, seed=SEED, with_exact=True)
    for s in range(N + 1):
        P = res["perturbed"][s] if s < N else S
        _assert_same_forest(res["free"], s, forest_from_similarity(P, k))
        _assert_same_forest(res["constrained"], s,
                            forest_from_similarity(P, k, constraints=constraints))


@needs_cuda
def test_cuda_ties_are_broken_as_on_the_cpu():
    from skdiffclust.forest._gpu import solve_on_device

    x = np.random.default_rng(0).integers(0, 6, 200)
    S = (-np.abs(x[:, None] - x[None]) - 8.0).astype(np.float32)
    y = np.where(np.arange(200) % 5 == 0, x % 3, -1)
    res = solve_on_device(S, 4, 1e-9, 2, y, seed=SEED, with_exact=True)
    constraints = Constraints.from_labels(y, 200)
    for s in range(3):
        _assert_same_forest(res["free"], s, forest_from_similarity(S, 4))
        _assert_same_forest(res["constrained"], s,
                            forest_from_similarity(S, 4, constraints=constraints))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_public_api_matches_the_cpu_solver(dtype):
    from skdiffclust.torch import partial_fenchel_young_loss, perturbed_spanning_forest

    S = torch.as_tensor(_blobs(40, 9)).to(dtype)
    y = torch.tensor([i % 4 if i % 3 == 0 else -1 for i in range(40)])
    G_A, G_M = torch.randn(2, 40, 40, generator=torch.Generator().manual_seed(0), dtype=dtype)
    results = {}
    for device in ("cpu", "cuda"):
        # a fresh leaf per device: S.to("cpu") would be S itself, and S.to("cuda") of a
        # tensor requiring grad not a leaf
        S_var = S.clone().to(device).requires_grad_(True)
        gen = torch.Generator().manual_seed(3)
        A, F, M = perturbed_spanning_forest(S_var, 4, epsilon=0.3, n_samples=50,
                                            constraints=y.to(device), generator=gen)
        ((G_A.to(device) * A).sum() + (G_M.to(device) * M).sum() + F).backward()
        gen = torch.Generator().manual_seed(4)
        S_loss = S.clone().to(device).requires_grad_(True)
        loss = partial_fenchel_young_loss(S_loss, y.to(device), 4, epsilon=0.3, n_samples=50,
                                          generator=gen)
        loss.backward()
        results[device] = [t.detach().cpu() for t in (A, F, M, S_var.grad, loss, S_loss.grad)]
    for a, b in zip(results["cpu"], results["cuda"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@needs_cuda
def test_cuda_same_generator_seed_gives_the_same_results():
    from skdiffclust.torch import perturbed_spanning_forest

    S = torch.as_tensor(_blobs(50, 13), device="cuda")
    y = torch.tensor([i % 3 if i % 4 == 0 else -1 for i in range(50)], device="cuda")

    def run(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        return perturbed_spanning_forest(S, 4, epsilon=0.5, n_samples=30, constraints=y,
                                         generator=gen)

    first, second, other = run(5), run(5), run(6)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], other[0])


@needs_cuda
def test_cuda_general_cannot_links_are_solved_on_the_cpu():
    from skdiffclust.torch import perturbed_spanning_forest

    S = torch.as_tensor(_blobs(12, 12))
    C = torch.zeros(12, 12, dtype=torch.int8)
    C[0, 1] = C[1, 0] = C[1, 2] = C[2, 1] = -1
    results = []
    for device in ("cpu", "cuda"):
        out = perturbed_spanning_forest(S.to(device), 3, n_samples=20, constraints=C.to(device),
                                        generator=torch.Generator().manual_seed(0))
        assert all(t.device.type == device for t in out)
        results.append([t.cpu() for t in out])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)


@needs_cuda
def test_cuda_training_loss_never_waits_for_the_device():
    from skdiffclust.forest import _gpu

    S = torch.as_tensor(_blobs(64, 10), device="cuda").requires_grad_(True)
    y = torch.tensor([i % 5 if i % 2 else -1 for i in range(64)], device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    _gpu.partial_fenchel_young_loss(S, y, 5, n_samples=8, generator=gen).backward()  # compile
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = _gpu.partial_fenchel_young_loss(S, y, 5, n_samples=8, generator=gen)
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert loss.item() >= 0


@needs_cuda
def test_cuda_loss_gradient_matches_finite_differences():
    from skdiffclust.torch import constraints_from_labels, partial_fenchel_young_loss

    S = torch.as_tensor(_blobs(6, 11, np.float64), device="cuda").requires_grad_(True)
    C = constraints_from_labels(torch.tensor([0, 0, 1, -1, -1, 1], device="cuda"))

    def loss_at(M):
        gen = torch.Generator().manual_seed(11)
        return partial_fenchel_young_loss(M, C, 2, epsilon=0.3, n_samples=2000, generator=gen)

    loss_at(S).backward()
    V = torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    V = ((V + V.T) / 2).cuda()
    with torch.no_grad():
        fd = (loss_at(S + 1e-6 * V) - loss_at(S - 1e-6 * V)) / 2e-6
    assert fd.item() == pytest.approx(float((S.grad * V).sum()), rel=1e-4, abs=1e-6)


if __name__ == "__main__":
    # the simulator's threads meet at every syncthreads, which a busy-polling manager
    # thread detects: switching threads every 50 us instead of 5 ms makes it 20x faster
    sys.setswitchinterval(5e-5)
    # splitmix64 wraps around 2^64 on purpose
    warnings.filterwarnings("ignore", message="overflow encountered", category=RuntimeWarning)
    _device_results(sys.argv[1])
