"""Learning through clustering with the device solver: the training path of ``device='cuda'``.

On CUDA, ``SpanningForestClustering(embedding=...)`` solves each batch's forests
with the CUDA kernels (``forest/_gpu.py``), from the batch's labels as a device
tensor. Without a GPU, the same training code runs here on numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``, in a subprocess: it changes numba.cuda for the whole
process) on CPU tensors, and must train exactly as the CPU solver does: same
batches, same noise, same forests, hence the same losses and weights.
"""

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


def _problem():
    """Three blobs in 3-D, one in three samples labelled."""
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 1.0], [0.0, 3.0, -1.0]])
    truth = np.arange(24) % 3
    X = (centers[truth] + 0.8 * rng.standard_normal((24, 3))).astype(np.float32)
    y = np.where(np.arange(24) % 3 == 0, truth, -1)
    y[1] = truth[1]  # a batch may hold several samples of one class
    return X, y


TRAINING = dict(n_clusters=3, epsilon=0.5, n_perturbations=3, batch_size=12, max_iter=3,
                learning_rate=0.05, tol=0.0, n_iter_no_change=10, seed=0, verbose=False)


def _train(device_solver, device="cpu"):
    from skdiffclust._utils._torch import build_mlp, make_generator
    from skdiffclust.forest import _embedding
    from skdiffclust.forest._settings import EmbeddingSettings

    X, y = _problem()
    module = build_mlp(3, (), 2, make_generator(0))
    settings = EmbeddingSettings(device=device, device_solver=device_solver, **TRAINING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state, result = _embedding.train_embedding(module, X, y, settings)
    return {"state": state, "loss_curve": result.loss_curve, "n_iter": result.n_iter}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """Training with the device solver on the simulator (subprocess) and with the
    CPU solver (here)."""
    path = tmp_path_factory.mktemp("gpu_training") / "device.pkl"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, __file__, str(path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(path, "rb") as f:
        device = pickle.load(f)
    return device, _train(device_solver=False)


def test_the_device_solver_trains_as_the_cpu_solver(simulated):
    device, cpu = simulated
    # every step ran the device kernels: Prim, then the constrained forests
    n_steps = TRAINING["max_iter"] * 2
    assert device["launches"].count("prim_kernel") == n_steps
    assert device["launches"].count("rooted_forest_kernel") == n_steps
    assert device["n_iter"] == cpu["n_iter"] == TRAINING["max_iter"]
    np.testing.assert_allclose(device["loss_curve"], cpu["loss_curve"], rtol=1e-5, atol=1e-6)
    assert device["state"].keys() == cpu["state"].keys()
    for name, value in cpu["state"].items():
        np.testing.assert_allclose(device["state"][name], value, rtol=1e-4, atol=1e-5)


def test_the_training_moved_the_weights(simulated):
    from skdiffclust._utils._torch import build_mlp, make_generator, state_to_numpy

    device, _ = simulated
    initial = state_to_numpy(build_mlp(3, (), 2, make_generator(0)))
    assert not np.allclose(device["state"]["weight"], initial["weight"])
    assert np.isfinite(device["loss_curve"]).all() and (device["loss_curve"] >= 0).all()


def test_batches_carry_their_labels_on_the_host():
    from skdiffclust._utils._torch import make_generator
    from skdiffclust.forest._embedding import LabelledBatches

    _, y = _problem()
    sampler = LabelledBatches(y, 12, make_generator(0), "cpu")
    epoch = sampler.epoch()
    assert epoch.shape == (sampler.n_batches, 12)
    for i in range(epoch.shape[0]):
        batch = epoch[i]
        np.testing.assert_array_equal(batch.host, batch.device.numpy())
        assert np.count_nonzero(y[batch.host] >= 0) == 6  # half labelled, half not


@pytest.mark.parametrize("device,batch_size,device_solver,expected", [
    ("cuda", 64, None, False), ("cuda", 127, None, False), ("cuda", 128, None, True),
    ("cuda", 1024, None, True), ("cpu", 1024, None, False), ("cuda", 64, True, True),
    ("cuda", 1024, False, False),
])
def test_small_cuda_batches_solve_their_forests_on_the_host(
        device, batch_size, device_solver, expected):
    # on an H100, a batch of 64 took 10.5 ms a step with the device solver, 4.6 ms with
    # the host's (the device solver's argument preparation dominates a small step)
    from skdiffclust.forest._embedding import solves_on_device
    from skdiffclust.forest._settings import EmbeddingSettings

    settings = EmbeddingSettings(device=device, device_solver=device_solver,
                                 **dict(TRAINING, batch_size=batch_size))
    assert solves_on_device(settings, torch.device(device)) is expected


def test_without_a_working_numba_cuda_the_host_solves_the_forests(monkeypatch):
    # torch's CUDA wheels bring no libNVVM: a machine can train on CUDA while numba.cuda
    # cannot compile there. The device solver's failure is warned about once, and the
    # host solver trains exactly as it does by choice.
    from numba.cuda.cudadrv.error import NvvmSupportError

    from skdiffclust._utils._torch import build_mlp, make_generator
    from skdiffclust.forest import _embedding, _gpu, _torch
    from skdiffclust.forest._settings import EmbeddingSettings

    calls = []

    def no_nvvm(*args, **kwargs):
        calls.append(1)
        raise NvvmSupportError("libNVVM cannot be found")

    monkeypatch.setattr(_gpu, "partial_fenchel_young_loss", no_nvvm)
    monkeypatch.setitem(_torch._DEVICE_SOLVER_FAILURE, "error", None)
    X, y = _problem()
    module = build_mlp(3, (), 2, make_generator(0))
    settings = EmbeddingSettings(device="cpu", device_solver=True, **TRAINING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state, result = _embedding.train_embedding(module, X, y, settings)
    failures = [w for w in caught if "CUDA solver cannot run here" in str(w.message)]
    assert len(failures) == 1 and "NvvmSupportError" in str(failures[0].message)
    assert len(calls) == 1  # not tried again
    host = _train(device_solver=False)
    np.testing.assert_array_equal(result.loss_curve, host["loss_curve"])
    for name, value in host["state"].items():
        np.testing.assert_array_equal(state[name], value)

    def a_bug(*args, **kwargs):
        raise ValueError("not numba's")

    monkeypatch.setattr(_gpu, "partial_fenchel_young_loss", a_bug)
    monkeypatch.setitem(_torch._DEVICE_SOLVER_FAILURE, "error", None)
    with pytest.raises(ValueError, match="not numba's"):
        _embedding.train_embedding(build_mlp(3, (), 2, make_generator(0)), X, y, settings)


@needs_cuda
def test_cuda_training_matches_the_cpu_training():
    cuda = _train(device_solver=None, device="cuda")
    cpu = _train(device_solver=False)
    np.testing.assert_allclose(cuda["loss_curve"], cpu["loss_curve"], rtol=1e-4, atol=1e-5)


@needs_cuda
def test_cuda_training_step_never_waits_for_the_device():
    from skdiffclust._utils._torch import build_mlp, make_generator
    from skdiffclust.forest._embedding import LabelledBatches, PartialFenchelYoungTask

    X, y = _problem()
    module = build_mlp(3, (), 2, make_generator(0)).cuda()
    task = PartialFenchelYoungTask(module, torch.as_tensor(X, device="cuda"), y, n_clusters=3,
                                   epsilon=0.5, n_perturbations=3,
                                   noise_generator=make_generator(1), device_solver=True)
    batches = LabelledBatches(y, 12, make_generator(0), "cuda").epoch()
    task.loss(batches[0])[0].backward()  # compiles the kernels
    torch.cuda.synchronize()
    batches = LabelledBatches(y, 12, make_generator(2), "cuda").epoch()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss, _ = task.loss(batches[0])
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert loss.item() >= 0


if __name__ == "__main__":
    # see tests/forest/test_forest_gpu.py: the simulator's threads meet at every syncthreads
    sys.setswitchinterval(5e-5)
    warnings.filterwarnings("ignore", message="overflow encountered", category=RuntimeWarning)
    from skdiffclust.forest import _gpu

    launches = []
    launch = _gpu.Launcher.__call__

    def counting(self, kernel, *args):
        launches.append(kernel.__name__)
        return launch(self, kernel, *args)

    _gpu.Launcher.__call__ = counting
    result = _train(device_solver=True)
    result["launches"] = launches
    with open(f"{sys.argv[1]}.part", "wb") as f:
        pickle.dump(result, f)
    os.replace(f"{sys.argv[1]}.part", sys.argv[1])


def test_the_operators_fall_back_to_the_host_solver(monkeypatch):
    # the public operators on CUDA tensors, where numba.cuda cannot compile: the host
    # solver's result, and one warning
    from numba.cuda.cudadrv.error import NvvmSupportError

    from skdiffclust.forest import _gpu, _torch
    from skdiffclust.torch import partial_fenchel_young_loss, perturbed_spanning_forest

    def no_nvvm(*args, **kwargs):
        raise NvvmSupportError("libNVVM cannot be found")

    X, y = _problem()
    S = -torch.cdist(torch.tensor(X), torch.tensor(X)) ** 2
    labels = torch.tensor(y)

    def both():
        A = perturbed_spanning_forest(S, 3, epsilon=0.5, n_samples=5,
                                      generator=torch.Generator().manual_seed(1))[0]
        loss = partial_fenchel_young_loss(S, labels, 3, epsilon=0.5, n_samples=5,
                                          generator=torch.Generator().manual_seed(1))
        return A, loss

    host = both()
    monkeypatch.setattr(_torch, "_on_cuda", lambda S: True)
    monkeypatch.setattr(_gpu, "perturbed_spanning_forest", no_nvvm)
    monkeypatch.setattr(_gpu, "partial_fenchel_young_loss", no_nvvm)
    monkeypatch.setitem(_torch._DEVICE_SOLVER_FAILURE, "error", None)
    with pytest.warns(RuntimeWarning, match="CUDA solver cannot run here"):
        fallen_back = both()
    torch.testing.assert_close(fallen_back[0], host[0], rtol=0, atol=0)
    torch.testing.assert_close(fallen_back[1], host[1], rtol=0, atol=0)
