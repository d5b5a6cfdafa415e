"""Torch plumbing shared by the torch estimators: device, seeding, models, state.

Imported only from training code paths, so that ``import skdiffclust`` never
imports torch.
"""

import contextlib
import copy
import math
import warnings

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from skdiffclust._utils._torch_checks import checked_device

DEVICES = ("auto", "cpu", "cuda")
# rows of X in the forward pass that materialises a user's module's lazy parameters
# and checks its output (two: a batch, not a single sample)
PROBE_ROWS = 2


def resolve_device(device):
    """``'auto'`` -> ``'cuda'`` when available, else ``'cpu'``; check ``'cuda'``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return checked_device(device)


def make_generator(seed, device="cpu"):
    """A local torch generator (global torch seeding is never touched)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


@contextlib.contextmanager
def torch_threads(n_threads):
    """Run with ``n_threads`` intra-op CPU threads, then restore the previous count.

    Small batches gain nothing from more threads, and on a shared machine more
    threads than free cores make every step wait for the slowest (measured: 20x
    slower on 2 busy cores); a fixed count also keeps results independent of the
    machine's default.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(max(int(n_threads), 1))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


# torch splits some sums across its CPU threads in an order that depends on their
# count (a convolution's weight gradient, summed over the batch; a tensor's total;
# the products of the spectral start's tall eigenvector blocks), so their last bits
# do, and a fit's stopping epoch and labels with them: the same PRCut fit of 60,000
# MNIST images stopped after 12 epochs on one thread and after 15, with other
# labels, on two. Whatever a fit keeps is computed on one thread; only work whose
# every output is summed by one thread (a sparse graph's row products, integer
# counts, numba's kernels) takes ``n_jobs``.
def one_thread(device=None):
    """One torch CPU thread, restored afterwards (nothing on CUDA): the results of
    torch's CPU computations then do not depend on the thread count."""
    if device is not None and torch.device(device).type == "cuda":
        return contextlib.nullcontext()
    return torch_threads(1)


@contextlib.contextmanager
def seeded_global_rng(seed, device="cpu"):
    """Run with torch's global generators (the CPU's, and ``device``'s when it is
    CUDA) seeded from ``seed``, and restore their states afterwards.

    For code that draws from the global generators and cannot be given a local one:
    a user's module materialising its lazy parameters (``nn.LazyLinear``) or
    drawing dropout masks. Its results then follow from ``seed``, and the caller's
    random streams are left as they were.
    """
    device = torch.device(device)
    cuda = []
    if device.type == "cuda":
        cuda = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(int(seed))
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(int(seed))
        yield


@contextlib.contextmanager
def float32_by_default():
    """Run with torch's default dtype float32, and restore the caller's: a built-in
    network is float32, and draws the same weights, whatever the user set."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _init_linear(layer, generator):
    # nn.Linear's default initialisation, drawn from a local generator
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    if layer.bias is not None:
        bound = 1.0 / math.sqrt(layer.in_features) if layer.in_features > 0 else 0.0
        nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


def build_mlp(n_inputs, hidden_layer_sizes, n_outputs, generator, activation=nn.ReLU):
    """Linear layers (ReLU between them), initialised from ``generator``.

    ``hidden_layer_sizes=()`` gives a single linear map.
    """
    sizes = [n_inputs, *hidden_layer_sizes, n_outputs]
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layer = nn.utils.skip_init(nn.Linear, fan_in, fan_out)
        _init_linear(layer, generator)
        layers.append(layer)
        if i < len(sizes) - 2:
            layers.append(activation())
    return layers[0] if len(layers) == 1 else nn.Sequential(*layers)


def tensor_from_numpy(array, dtype, device):
    """``array`` as a tensor, sharing its memory when torch can.

    torch cannot share a read-only array (a memory map, a broadcast view): it is
    copied instead of warning that writes would be undefined.
    """
    array = np.asarray(array)
    if not array.flags.writeable:
        return torch.tensor(array, dtype=dtype, device=device)
    return torch.as_tensor(array, dtype=dtype, device=device)


def state_to_numpy(module):
    """The module's parameters and buffers as NumPy arrays (picklable, CPU)."""
    return {name: value.detach().to("cpu").numpy().copy()
            for name, value in module.state_dict().items()}


def optimizer_state_to_numpy(optimizer):
    """A torch optimiser's ``state_dict`` with its tensors as NumPy arrays (on the
    host, copied): picklable, loadable without torch; :func:`optimizer_state_from_numpy`
    gives it back."""
    return _map_arrays(optimizer.state_dict(), torch.Tensor,
                       lambda value: value.detach().to("cpu").numpy().copy())


def optimizer_state_from_numpy(state):
    """The ``state_dict`` of :func:`optimizer_state_to_numpy`, for ``load_state_dict``
    (tensors copied from the arrays: the optimiser's updates do not write into them)."""
    return _map_arrays(state, np.ndarray, torch.tensor)


def _map_arrays(value, kind, convert):
    """``value`` (nested dicts, lists, tuples) with every ``kind`` converted."""
    if isinstance(value, kind):
        return convert(value)
    if isinstance(value, dict):
        return {key: _map_arrays(item, kind, convert) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_arrays(item, kind, convert) for item in value)
    return value


def module_from_state(template, state):
    """A CPU copy of ``template`` carrying the weights ``state``."""
    module = copy.deepcopy(template).to("cpu")
    module.load_state_dict({name: torch.as_tensor(np.asarray(value))
                            for name, value in state.items()})
    return module.eval()


def module_dtype(module):
    for parameter in module.parameters():
        return parameter.dtype
    return torch.float32


@torch.no_grad()
def apply_in_batches(module, X, device, batch_size=4096):
    """``module(X)`` for a NumPy X (or a SciPy sparse matrix, densified a batch at a
    time), in batches, returned as a float64 NumPy array (one CPU thread:
    :func:`one_thread`)."""
    dtype = module_dtype(module)
    outputs = []
    with one_thread(device):
        for start in range(0, X.shape[0], batch_size):
            rows = X[start : start + batch_size]
            rows = rows.toarray() if sp.issparse(rows) else rows
            outputs.append(module(tensor_from_numpy(rows, dtype, device))
                           .to("cpu", torch.float64).numpy())
    return np.concatenate(outputs) if outputs else np.empty((0, 0))


def shared_tensor(array):
    """A CPU tensor sharing a NumPy array's memory, read-only arrays included.

    torch warns that writing into a read-only array (a memory map) is undefined;
    PRCut only reads it, and a copy could double the memory of a large affinity.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.as_tensor(array)


def check_module_parameters(module, name, trainer):
    """``module`` (the estimator's parameter ``name``) must be an ``nn.Module`` whose
    parameters are float32 or float64 and hold values: half precision failed inside
    L-BFGS (float16) or NumPy (bfloat16), a meta module inside the copy.
    ``trainer``: the estimator, for the messages."""
    for parameter in module.parameters():
        if parameter.is_meta:
            raise ValueError(f"{name}'s parameters are on the meta device, without "
                             f"values: materialise them first ({name}.to_empty(device="
                             "'cpu') and an initialisation).")
        if parameter.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{name}'s parameters are {parameter.dtype}: {trainer} trains "
                            f"float32 or float64 modules ({name}.float()).")


def probe_module(network, probe, *, name, output, width=None):
    """``network``'s output on ``probe`` (a few samples, in its parameters' dtype),
    checked before any training: a ValueError or TypeError naming the estimator's
    parameter ``name`` where the module fails, or returns anything but finite
    ``output`` (what the training reads: 'logits', 'embeddings') of shape
    (batch, ``width``) (any width >= 1 where None) in the probe's dtype. Runs in
    evaluation mode without gradients, so that batch normalisation does not
    update its running statistics; lazy parameters draw from torch's global
    generator (call under :func:`seeded_global_rng`)."""
    columns = "n_components" if width is None else f"n_clusters={width}"
    expected = f"(batch, {columns})"
    training = network.training
    network.eval()
    try:
        with torch.no_grad():
            result = network(probe)
    except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError) as error:
        raise ValueError(
            f"{name} failed on a batch of rows of X of shape {tuple(probe.shape)} "
            f"({type(error).__name__}: {error}). It must map a float tensor of shape "
            f"(batch, {', '.join(map(str, probe.shape[1:]))}), samples as in X, to "
            f"{output} of shape {expected}.") from error
    finally:
        network.train(training)
    if (not isinstance(result, torch.Tensor) or result.ndim != 2
            or result.shape[0] != probe.shape[0] or result.shape[1] < 1
            or (width is not None and result.shape[1] != width)):
        found = (f"shape {tuple(result.shape)}" if isinstance(result, torch.Tensor)
                 else f"a {type(result).__name__}")
        raise ValueError(f"{name} must return {output} of shape {expected}; on a batch "
                         f"of shape {tuple(probe.shape)} it returned {found}.")
    if result.dtype != probe.dtype:
        raise TypeError(f"{name} returned {result.dtype} {output} from {probe.dtype} "
                        f"parameters: return {output} in the dtype of its parameters.")
    if not bool(torch.isfinite(result).all()):
        raise ValueError(f"{name} returned non-finite {output} (NaN or infinity) on the "
                         "first rows of X.")
    return result
