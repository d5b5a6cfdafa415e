"""ClAM's fused CUDA kernel (``_cuda_kernels``), checked against the CPU kernel epoch
by epoch.

Without a GPU, the kernel runs on numba's CUDA simulator, in a subprocess
(``NUMBA_ENABLE_CUDASIM=1`` changes numba.cuda for the whole process), on tiny
problems: this file, run as a script, trains the same restarts with the CPU trainer
and the CUDA trainer (same permutations and masks: both draw them on the host from
the same seed) and saves both. Where NVVM exists, another subprocess compiles the
kernel for an H100 (sm_90) with the signatures it was launched with.
"""

import importlib.util
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

N_EPOCHS = 2
# metric, weighted, mask_prob (0: the unmasked loss), gradient clip, restarts, batch
CASES = {
    "euclidean": ("euclidean", False, 0.4, 1.5, 2, 4),
    "euclidean-weighted-unclipped": ("euclidean", True, 0.4, 0.0, 1, 4),
    "euclidean-unmasked": ("euclidean", False, 0.0, 1.5, 2, 5),
    "cosine": ("cosine", False, 0.4, 1.5, 2, 4),
    "cosine-weighted-unmasked": ("cosine", True, 0.0, 0.0, 1, 3),
}
FIELDS = ("losses", "prototypes", "log_weights", "averages", "log_weight_averages",
          "counts", "position_loss", "m_P", "v_P", "m_W", "v_W")


def _problem(case):
    metric, weighted, mask_prob, clip, n_restarts, batch_size = CASES[case]
    rng = np.random.default_rng(len(case))
    X = rng.standard_normal((11, 5)).astype(np.float32)
    if metric == "cosine":
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    initial = np.stack([X[rng.choice(11, 3, replace=False)] for _ in range(n_restarts)])
    from skdiffclust.clam._settings import Dynamics

    dynamics = Dynamics(beta=1.5, n_steps=3, alpha=0.4, metric=metric)
    settings = dict(learning_rate=0.05, seed=7, weighted=weighted, mask_prob=mask_prob,
                    batch_size=batch_size, clip=clip)
    return X, initial, dynamics, settings


def _train(trainer_class, case):
    X, initial, dynamics, settings = _problem(case)
    trainer = trainer_class.start(X, X.mean(0), initial, dynamics, **settings)
    record = {field: [] for field in FIELDS}
    for epoch in range(N_EPOCHS):
        # the second epoch without the last restart: a pruned one is left alone
        active = np.arange(initial.shape[0]) < initial.shape[0] - epoch
        record["losses"].append(trainer.epoch(active))
        record["prototypes"].append(trainer.prototypes.copy())
        record["log_weights"].append(trainer.log_weights.copy())
        record["averages"].append(trainer.averages[0].copy())
        record["log_weight_averages"].append(trainer.averages[1].copy())
        record["counts"].append(trainer.counts.copy())
        record["position_loss"].append(trainer.position_loss.copy())
        for name, moment in zip(("m_P", "v_P", "m_W", "v_W"), trainer.optimizer.moments):
            record[name].append(moment.copy())
    return {field: np.array(values) for field, values in record.items()}


# ------------------------------------------------------- device side (script)
def _device_results(path):
    import numba

    from skdiffclust.clam import _cuda_fit
    from skdiffclust.clam._trainer import CPUTrainer

    kernels = _cuda_fit.kernels()
    launch, signatures = kernels.train_batches_kernel, set()

    class Recording:  # the numba types of every launch (to compile them for a GPU)
        def __getitem__(self, configuration):
            def call(*args):
                signatures.add(tuple(numba.typeof(getattr(a, "_ary", a)) for a in args))
                return launch[configuration](*args)
            return call

    kernels.train_batches_kernel = Recording()
    out = {}
    for case in CASES:
        for where, trainer_class in (("cpu", CPUTrainer), ("cuda", _cuda_fit.CUDATrainer)):
            for field, value in _train(trainer_class, case).items():
                out[f"{case}/{where}/{field}"] = value
    with open(f"{path}.signatures", "wb") as f:
        pickle.dump(signatures, f)
    np.savez(path, **out)


_COMPILE_FOR_H100 = """
import pickle, sys
import numba.cuda.dispatcher as dispatcher
from numba import cuda


class H100:
    compute_capability = (9, 0)


# device functions ask the current device for its architecture: there is none here
dispatcher.get_current_device = lambda: H100()
from skdiffclust.clam import _cuda_fit

kernel = _cuda_fit.kernels().train_batches_kernel
with open(sys.argv[1], "rb") as f:
    signatures = pickle.load(f)
for signature in signatures:
    cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
print(len(signatures))
"""


def _has_nvvm():
    check = "from numba.cuda.cudadrv import nvvm; assert nvvm.is_available()"
    return subprocess.run([sys.executable, "-c", check], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """Both trainers' epochs, on numba's CUDA simulator in a subprocess."""
    path = tmp_path_factory.mktemp("clam_cuda") / "device.npz"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, __file__, str(path)], env=env, text=True,
                          capture_output=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(path) as data:
        results = dict(data)
    results["signatures"] = f"{path}.signatures"
    return results


# ------------------------------------------------------------ simulator tests
@pytest.mark.parametrize("case", list(CASES))
def test_an_epoch_on_the_device_is_the_cpu_epoch(simulated, case):
    for field in FIELDS:
        cpu, cuda = simulated[f"{case}/cpu/{field}"], simulated[f"{case}/cuda/{field}"]
        if field == "counts":
            np.testing.assert_array_equal(cuda, cpu, err_msg=field)
        elif field in ("m_P", "v_P", "m_W", "v_W"):  # v: squares of small gradients
            np.testing.assert_allclose(cuda, cpu, rtol=1e-3, atol=1e-9, err_msg=field)
        else:  # float32 rounding (exp, fused multiply-adds), which Adam's m / sqrt(v) amplifies
            np.testing.assert_allclose(cuda, cpu, rtol=1e-4, atol=1e-5, err_msg=field)


def test_a_pruned_restart_is_left_alone(simulated):
    # the second epoch trains all but the last restart: its parameters stay
    for field in ("prototypes", "m_P"):
        values = simulated[f"euclidean/cuda/{field}"]
        np.testing.assert_array_equal(values[1, -1], values[0, -1])
    assert np.isnan(simulated["euclidean/cuda/losses"][1, -1])


def test_the_kernel_compiles_for_an_h100_with_the_signatures_it_runs_with(simulated):
    """Typing, lowering and NVVM for sm_90, where the simulator checks no types;
    skipped where no NVVM (the CUDA toolkit's compiler library) is installed."""
    if not _has_nvvm():
        pytest.skip("needs NVVM (the CUDA toolkit's compiler library)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", _COMPILE_FOR_H100, simulated["signatures"]],
                          env=env, text=True, capture_output=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 1


# ------------------------------------------------------- host-side pieces
def test_device_choice(monkeypatch):
    from skdiffclust.clam import _device, _settings

    monkeypatch.setattr(_device, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: True)
    for batch_size in (1, 16, 1024):
        # device='cuda' trains with the fused kernel, whatever the data
        assert _settings.training_device("cuda", batch_size,
                                         _device.Machine()) == _device.NUMBA_CUDA
        assert _settings.training_device(
            "cpu", batch_size,
            _device.Machine(_device.FitShape(10**6, 20, 32, 0.15, 10))) == _settings.CPU
    # 'auto': the fused kernel where it was measured to win (200,000 x 32, k=20,
    # batch 16, mask_prob=0.15: 1.6x on an H200), the CPU for small data, few
    # clusters, tiny batches, and working memory beyond shared memory (unmeasured)

    def auto(batch_size=16, *shape):
        fit = _device.FitShape(*shape) if shape else None
        return _settings.training_device("auto", batch_size, _device.Machine(fit))

    measured = (200_000, 20, 32, 0.15, 10)
    assert auto(16, *measured) == _device.NUMBA_CUDA
    assert auto(16, 100_000, 8, 32, 0.15, 10) == _device.NUMBA_CUDA
    assert auto(16) == _settings.CPU
    assert auto(16, 99_999, 20, 32, 0.15, 10) == _settings.CPU
    assert auto(16, 200_000, 4, 32, 0.15, 10) == _settings.CPU
    assert auto(4, *measured) == _settings.CPU
    assert auto(16, 200_000, 20, 64, 0.15, 10) == _settings.CPU  # 65 KB of working memory
    assert auto(16, 200_000, 20, 32, 0.0, 10) == _settings.CPU  # unmasked: every feature
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: False)
    assert auto(16, *measured) == _settings.CPU
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: True)
    monkeypatch.setattr(_device, "nvidia_driver_present", lambda: False)
    assert auto(16, *measured) == _settings.CPU


def test_auto_trains_large_data_with_the_fused_kernel(monkeypatch):
    # the choice reaches the training settings; n_jobs=None: one thread (the
    # glossary's), -1: every core
    from joblib import effective_n_jobs

    from skdiffclust import ClAM
    from skdiffclust.clam import _device, _fit, _settings

    seen = {}

    def record(rows, fill, initial, dynamics, settings):
        seen.update(device=settings.device, n_threads=settings.n_threads)
        raise RuntimeError("recorded")

    monkeypatch.setattr(_device, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: True)
    monkeypatch.setattr(_device, "FUSED_MIN_SAMPLES", 50)
    monkeypatch.setattr(_fit, "train_restarts", record)
    X = np.random.default_rng(0).normal(size=(60, 3))
    with pytest.raises(RuntimeError, match="recorded"):
        ClAM(8, random_state=0).fit(X)
    assert seen == {"device": _device.NUMBA_CUDA, "n_threads": 1}
    with pytest.raises(RuntimeError, match="recorded"):
        ClAM(8, n_jobs=-1, random_state=0).fit(X[:40])
    assert seen == {"device": _settings.CPU, "n_threads": effective_n_jobs(-1)}


def test_the_workspace_of_the_defaults_fits_in_shared_memory():
    from skdiffclust.clam import _cuda_kernels as kernels

    per_lane, n_slots = kernels.lane_shape(20, 16)
    assert (per_lane, n_slots) == (16, 16)  # 256 threads: no spills at 255 registers
    _, size = kernels.workspace_layout(20, 32, 5, 10, n_slots, 16)
    assert 4 * size <= kernels.SHARED_BYTES
    for k, batch_size in ((100, 1024), (3, 5), (20, 3), (2, 1)):
        per_lane, n_slots = kernels.lane_shape(k, batch_size)
        assert per_lane * n_slots <= kernels.MAX_THREADS
        assert per_lane & (per_lane - 1) == 0 and (per_lane * n_slots) % kernels.WARP == 0


def test_importing_skdiffclust_loads_no_cuda_code():
    code = ("import sys, skdiffclust, skdiffclust.clam._fit; "
            "assert not [m for m in sys.modules if m.startswith('numba.cuda') or m == 'torch']")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


if __name__ == "__main__":
    # the simulator's threads meet at every syncthreads, which a busy-polling manager
    # thread detects: switching threads every 50 us instead of 5 ms makes it 9x faster
    sys.setswitchinterval(5e-5)
    _device_results(sys.argv[1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_falls_back_to_the_cpu_where_the_fused_kernel_fails(monkeypatch):
    # a driver too old for numba's PTX, say: 'auto' must not turn that into a failed
    # fit for a user who never asked for CUDA; 'cuda' keeps the error
    from numba.cuda.cudadrv.error import CudaSupportError

    from skdiffclust import ClAM
    from skdiffclust.clam import _cuda_fit, _device, _settings

    def broken(*args, **kwargs):
        raise CudaSupportError("the driver is too old")

    X = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    cpu = ClAM(8, device="cpu", random_state=0, max_iter=3).fit(X)
    monkeypatch.setattr(_device, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: True)
    monkeypatch.setattr(_device, "FUSED_MIN_SAMPLES", 100)
    monkeypatch.setattr(_cuda_fit.CUDATrainer, "__init__", broken)
    with pytest.warns(RuntimeWarning, match=r"CUDA kernel \(CudaSupportError.*on the CPU"):
        auto = ClAM(8, device="auto", random_state=0, max_iter=3).fit(X)
    np.testing.assert_array_equal(auto.labels_, cpu.labels_)
    np.testing.assert_array_equal(auto.cluster_centers_, cpu.cluster_centers_)
    np.testing.assert_array_equal(auto.loss_curve_, cpu.loss_curve_)
    # device='cuda' goes to torch's path on CUDA, which needs torch and a CUDA device
    monkeypatch.setattr(_device, "torch_cuda_or_raise", lambda error: _settings.CPU)
    with pytest.warns(RuntimeWarning, match="CudaSupportError"):
        ClAM(8, device="cuda", random_state=0, max_iter=3).fit(X)
    monkeypatch.undo()
    monkeypatch.setattr(_cuda_fit.CUDATrainer, "__init__", broken)
    monkeypatch.setattr(_device, "numba_cuda_available", lambda: True)
    if importlib.util.find_spec("torch") is None:  # nothing to fall back to: numba's error
        with pytest.raises(CudaSupportError):
            ClAM(8, device="cuda", random_state=0, max_iter=3).fit(X)
        return
    import torch

    if torch.cuda.is_available():  # torch's path trains on the GPU
        with pytest.warns(RuntimeWarning, match="in torch on CUDA"):
            ClAM(8, device="cuda", random_state=0, max_iter=3).fit(X)
    else:  # torch without a CUDA device: its clear error
        with pytest.raises(ValueError, match="CUDA"):
            ClAM(8, device="cuda", random_state=0, max_iter=3).fit(X)
