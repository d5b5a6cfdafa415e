"""PRCut's training (Ghriss & Monteleoni, 2025, algorithm 1): its tasks for the
engine, and the functions ``fit`` and ``partial_fit`` call with a
:class:`~skdiffclust.prcut._settings.PRCutSettings`.

Each step draws a left and a right batch (on the training device), reads the block
of the graph between them (``_device``), and moves the network along the eq. 8
gradient of the ratio-cut bound (through its stop-gradient surrogate) plus the
gradient of gamma * KL(batch mean || uniform). The epoch loop, Adam, the stopping
rule and the device handling are the engine's (:mod:`skdiffclust._training._torch`).

With an initial partition (``init='spectral'``, see ``_spectral``), the network is
first fitted to it by cross-entropy (``_start_fit``), so that the ratio-cut
training starts from the partition spectral clustering finds, as network weights.
"""

import contextlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from skdiffclust._training import TrainingResult
from skdiffclust._training._torch import PairedBatches, TrainOptions, adam, one_thread, train
from skdiffclust._utils._torch import (
    build_mlp,
    make_generator,
    module_dtype,
    module_from_state,
    optimizer_state_from_numpy,
    optimizer_state_to_numpy,
    seeded_global_rng,
    shared_tensor,
    state_to_numpy,
)
from skdiffclust.prcut._device import HostGraph, device_graph
from skdiffclust._graphcut._loss import PRCutLoss, WholeGraphBlock
from skdiffclust.prcut._module import copy_module
from skdiffclust._graphcut._selection import keep_best
from skdiffclust.prcut._start_fit import (
    INIT_ERROR_TARGET,
    INIT_LEARNING_RATE,
    fit_to_partition,
    init_learning_rate,
)

# hardness at the first annealing step: small enough that the uniform assignment
# is stable, so that the partition grows out of the graph's smoothest directions
HARDNESS_START = 1e-2


class AssignmentNetwork(nn.Module):
    """Linear layers (GELU between them) ending in the assignment logits.

    Its input is a dense batch of features, or a batch of rows of a sparse matrix
    (``SparseRows``), which the first layer reads with ``embedding_bag``: a sparse
    row times the weight matrix, never densified. ``input_offset`` is subtracted
    from the input inside the first layer (``(x - offset) @ A = x @ A - offset @ A``),
    so that sparse features are centred without being densified; it is not part
    of the exported weights (the estimator folds its standardisation into them).
    """

    def __init__(self, n_features, hidden_layer_sizes, n_clusters, generator,
                 input_offset=None):
        super().__init__()
        layers = build_mlp(n_features, tuple(hidden_layer_sizes), n_clusters, generator,
                           activation=nn.GELU)
        if not isinstance(layers, nn.Sequential):
            layers = nn.Sequential(layers)
        self.layers = layers
        offset = torch.zeros(n_features) if input_offset is None else torch.as_tensor(
            input_offset, dtype=torch.float32)
        self.register_buffer("input_offset", offset)
        self.centred = input_offset is not None

    def forward(self, x):
        first, rest = self.layers[0], self.layers[1:]
        if isinstance(x, SparseRows):
            h = nn.functional.embedding_bag(
                x.indices, first.weight.T, x.offsets, mode="sum",
                per_sample_weights=x.values,
            ) + first.bias
        else:
            h = first(x)
        if self.centred:
            h = h - first.weight @ self.input_offset
        return rest(h)

    def weights_as_numpy(self):
        """(coefs, intercepts): per layer, an (n_in, n_out) matrix and a bias."""
        linears = [layer for layer in self.layers if isinstance(layer, nn.Linear)]
        coefs = [layer.weight.detach().to("cpu", torch.float64).numpy().T.copy()
                 for layer in linears]
        intercepts = [layer.bias.detach().to("cpu", torch.float64).numpy().copy()
                      for layer in linears]
        return coefs, intercepts


class SparseRows:
    """A batch of CSR rows in embedding_bag's format."""

    def __init__(self, indices, offsets, values):
        self.indices, self.offsets, self.values = indices, offsets, values


class FeatureBatches:
    """Batches of the network's input, dense or sparse, on the training device.

    Dense features are converted to the training precision once. With
    ``share=True`` (a dense precomputed affinity, as large as n x n), a float32
    or float64 array on the CPU is shared instead, not copied: each batch is
    gathered and cast a few rows at a time, so that a step needs O(batch_size *
    n_inputs) memory in the training precision only. Batches of sparse rows are
    :class:`SparseRows` (the built-in network's format), or, with
    ``dense_rows=True`` (a user's module), dense tensors made on the device.
    """

    def __init__(self, X, device, dtype, share=False, dense_rows=False, scale=1.0):
        self.device, self.dtype, self.dense_rows = device, dtype, dense_rows
        self.inverse = 1.0 / scale  # the rows are read divided by scale (exact)
        # a user's module may read samples of any shape (images): n_inputs counts
        # the values of one sample
        self.n_samples, self.sample_shape = X.shape[0], tuple(X.shape[1:])
        self.n_inputs = int(np.prod(self.sample_shape))
        self.sparse = sp.issparse(X)
        self.shared = (share and not self.sparse and device.type == "cpu"
                       and X.dtype in (np.float32, np.float64))
        if self.sparse:
            X = sp.csr_matrix(X)
            self.indptr = X.indptr.astype(np.int64)
            self.indices = torch.as_tensor(X.indices.astype(np.int64), device=device)
            # divided before the cast: in float32, weights of 1e-200 were 0
            self.values = torch.as_tensor(self._divided(X.data), dtype=dtype, device=device)
        elif self.shared:  # divided a batch at a time (no copy of the affinity)
            self.X = shared_tensor(np.asarray(X))
        else:
            self.X = torch.as_tensor(self._divided(np.asarray(X)), device=device).to(dtype)

    def __call__(self, index):
        """Rows ``index`` (an index tensor on the device); sparse rows are gathered
        on the host."""
        if self.shared and (self.X.dtype != self.dtype or self.inverse != 1.0):
            return self._gather_and_cast(index)
        if not self.sparse:
            return self.X[index]
        index = index.to("cpu").numpy()
        starts = self.indptr[index]
        lengths = self.indptr[index + 1] - starts
        offsets = np.cumsum(lengths) - lengths
        entries = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
        entries = torch.as_tensor(entries, device=self.device)
        if self.dense_rows:
            rows = torch.zeros((index.shape[0], self.n_inputs), dtype=self.dtype,
                               device=self.device)
            owners = torch.as_tensor(np.repeat(np.arange(index.shape[0]), lengths),
                                     device=self.device)
            # accumulate: a non-canonical CSR row may repeat a column
            return rows.index_put_((owners, self.indices[entries]), self.values[entries],
                                   accumulate=True)
        return SparseRows(self.indices[entries],
                          torch.as_tensor(offsets, device=self.device),
                          self.values[entries])

    def _gather_and_cast(self, index):
        rows = torch.empty((index.shape[0], *self.sample_shape), dtype=self.dtype)
        step = max(1, (1 << 20) // max(self.n_inputs, 1))  # 8 MiB of float64 at a time
        for start in range(0, index.shape[0], step):
            rows[start:start + step] = self._divided(self.X[index[start:start + step]])
        return rows

    def _divided(self, values):
        """``values`` over the input scale, in their own precision."""
        return values * self.inverse if self.inverse != 1.0 else values


def hardness_schedule(n_annealing_steps):
    """Hardness s of each step: geometric from HARDNESS_START to 1 over the first
    ``n_annealing_steps`` steps, then 1 (the paper's bound)."""
    def hardness(step):
        if step > n_annealing_steps:
            return 1.0
        return HARDNESS_START ** (1.0 - (step - 1) / n_annealing_steps)
    return hardness


class RatioCutTask:
    """The engine's task: one step of algorithm 1 on a batch pair, whose loss is the
    public ``skdiffclust.torch.PRCutLoss`` (P-bar is its buffer).

    Capturable in a CUDA graph when nothing changes on the host from step to step:
    no annealing schedule, a padded device graph and dense features.
    """

    def __init__(self, network, features, graph, *, n_clusters, momentum, gamma,
                 n_annealing_steps, device, dtype, initial_proportions=None):
        self.network, self.features, self.graph = network, features, graph
        self.criterion = PRCutLoss(n_clusters, gamma=gamma, momentum=momentum,
                                   device=device, dtype=dtype)
        if initial_proportions is not None:
            self.criterion.p_bar.copy_(torch.as_tensor(initial_proportions))
        self.hardness = hardness_schedule(n_annealing_steps)
        self.n_steps = 0
        # a user's module may keep host-side state or change shapes: never captured
        self.capturable = (n_annealing_steps == 0 and not isinstance(graph, HostGraph)
                           and not features.sparse
                           and isinstance(network, AssignmentNetwork))
        # batches of every sample (small data): both hold all of them, in two
        # orders, so every step reads the whole graph; the network then runs once
        # on the samples, against the whole graph read once
        self.every_sample = self.whole_graph = None
        # each sample's last hard assignment and the changes of the epoch, on the
        # device: training has settled once an epoch changes almost none of them,
        # or once the changes have stopped falling (the fewest of an epoch so far,
        # and the epochs since), which is the batches' noise, not progress
        n_samples = features.n_samples
        self.assignments = torch.full((n_samples,), -1, dtype=torch.int64, device=device)
        self.changes = torch.zeros((), dtype=torch.int64, device=device)
        self.fewest_changes = torch.full((), n_samples + 1, dtype=torch.int64, device=device)
        self.epochs_since_fewest = torch.zeros((), dtype=torch.int64, device=device)

    def parameters(self):
        return self.network.parameters()

    def cover_every_sample(self, W, device, dtype):
        """Declare that each batch of the sampler holds every sample of the graph
        W: the batch pair's objective is then the whole graph's, whatever the two
        orders."""
        self.every_sample = torch.arange(W.shape[0], device=device)
        self.whole_graph = WholeGraphBlock(W, device, dtype)

    def start_epoch(self, epoch):
        if epoch > 0:
            self._record_epoch_changes()
        self.changes.zero_()

    def _record_epoch_changes(self):
        """Fold the last epoch's changes into the fewest so far (on the device)."""
        fewer = self.changes < self.fewest_changes
        self.fewest_changes = torch.minimum(self.fewest_changes, self.changes)
        self.epochs_since_fewest = torch.where(fewer, 0, self.epochs_since_fewest + 1)

    def settled(self):
        """Whether the last epoch changed the hard assignment of at most
        ``SETTLED_FRACTION`` of the samples, or the changes have not fallen below
        their fewest for ``SETTLE_EPOCHS`` epochs, this one included: what still
        changes is the batches' noise around a partition, which the cool-down
        then quiets (one read back from the device)."""
        changes = int(self.changes)
        if changes <= SETTLED_FRACTION * self.assignments.shape[0]:
            return True
        stalled = changes >= int(self.fewest_changes)
        return stalled and int(self.epochs_since_fewest) + 1 >= SETTLE_EPOCHS

    def loss(self, batch):
        self.n_steps += 1
        if self.every_sample is not None:
            left = self.every_sample
            p_left = p_right = probabilities_of(self.network(self.features(left)))
            block = self.whole_graph
        else:
            left, right = batch[0], batch[1]
            block = self.graph(left, right)
            probabilities = probabilities_of(
                self.network(self.features(torch.cat([left, right]))))
            p_left, p_right = probabilities[:left.shape[0]], probabilities[left.shape[0]:]
        # along the first dimension of the transpose, which is contiguous
        self._record_assignments(left, p_left.detach().T.argmax(0))
        loss = self.criterion(p_left, p_right, block, hardness=self.hardness(self.n_steps))
        return loss, loss.detach()

    def _record_assignments(self, samples, labels):
        """Count the samples whose hard assignment changed, and keep the new ones
        (in place, on the device: nothing waits for it)."""
        self.changes.add_((self.assignments[samples] != labels).sum())
        self.assignments.index_copy_(0, samples, labels)


def probabilities_of(logits):
    """The softmax of each row of logits, computed down the columns of their
    transpose: torch's CPU softmax and its backward along a last dimension of
    k ~ 10 run about three times slower (1.4 ms a step at 2,048 x 10) than along
    the first dimension of a contiguous copy (0.45 ms)."""
    return torch.softmax(logits.T.contiguous(), 0).T


def train_prcut(X, graph, settings, *, init_seed, batch_seed, name="PRCut",
                initial_labels=None, fit_target=INIT_ERROR_TARGET):
    """Make the network (the built-in one, or a copy of ``settings.module``) and
    train it on the graph (:func:`train_network`).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_inputs)
        The network's input (features, or rows of a precomputed affinity).
    graph : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_samples)
        Canonical affinity graph, or a dense affinity.
    settings : PRCutSettings
        With a module, it is trained as a deep copy in the dtype of its
        parameters, on dense rows of X (sparse rows are densified a batch at a
        time); the built-in :class:`AssignmentNetwork` trains in float32.
    init_seed : int
        Seeds the built-in network's initialisation; with a module, torch's
        global generators while the copy's lazy parameters are materialised and
        while it trains (dropout), restored afterwards.

    Other parameters are those of :func:`train_network`.

    Returns
    -------
    candidates, result
        See :func:`train_network`; the candidates' weights are (coefs,
        intercepts) for the built-in network, the module's ``state_dict`` as
        NumPy arrays for a user's module.
    """
    device = torch.device(settings.device)
    module = settings.module
    with _global_rng(module, init_seed, device):
        network = new_network(X, n_clusters=settings.n_clusters,
                              hidden_layer_sizes=settings.hidden_layer_sizes,
                              init_seed=init_seed, input_offset=settings.input_offset,
                              module=module)
        dtype = module_dtype(network)
        features = FeatureBatches(X, device, dtype, share=settings.share_inputs,
                                  dense_rows=module is not None, scale=settings.input_scale)
        return train_network(network.to(device), features, graph, settings,
                             batch_seed=batch_seed, name=name,
                             initial_labels=initial_labels, fit_target=fit_target)


def train_and_keep_best(X, graph, settings, *, n_init, seeds, initial_labels, whole):
    """``fit``'s training: ``n_init`` networks (:func:`train_prcut`, the i-th from
    the seeds ``seeds[2 i]`` and ``seeds[2 i + 1]``), of which the one
    :func:`~skdiffclust._graphcut._selection.keep_best` keeps: the one whose partition
    uses the most clusters, then has the lowest objective on the whole graph
    (with an initial partition, the network fitted to it competes too). With
    ``whole`` (``initial_labels`` are the graph's components), one network is
    fitted to them exactly, and not trained.

    Returns the kept network's weights (:func:`network_weights`) and loss curve.
    """
    if whole:
        settings = settings.but(max_iter=0)

    def candidates():
        for init in range(1 if whole else n_init):
            found, result = train_prcut(
                X, graph, settings, init_seed=seeds[2 * init],
                batch_seed=seeds[2 * init + 1], initial_labels=initial_labels,
                name="PRCut" if n_init == 1 else f"PRCut ({init + 1}/{n_init})",
                fit_target=0.0 if whole else INIT_ERROR_TARGET)
            for weights, labels in found:
                yield weights, labels, result.loss_curve

    return keep_best(candidates(), graph, settings.n_clusters, settings.gamma)


def train_network(network, features, graph, settings, *, batch_seed, name="PRCut",
                  initial_labels=None, fit_target=INIT_ERROR_TARGET):
    """Train a given network on the graph (algorithm 1), in place.

    Parameters
    ----------
    network : torch.nn.Module
        On ``settings.device``: the built-in :class:`AssignmentNetwork` or a
        user's module, mapping rows of ``features`` to ``n_clusters`` logits.
    features : FeatureBatches
        The network's input on the device, in the network's dtype.
    graph : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_samples)
        Canonical affinity graph, or a dense affinity.
    settings : PRCutSettings
        ``max_iter`` epochs at most (``n_samples // batch_size`` batch pairs
        each, at least one; 0 only fits the network to ``initial_labels``); the
        bound hardens over ``settings.annealing_epochs`` (see ``_loss``), and the
        stopping rule applies after them.
    initial_labels : ndarray of int, default=None
        A partition the network is first fitted to (:func:`fit_to_partition`);
        P-bar then starts at its proportions. ``None``:
        the network starts from its current weights (the paper: a random
        initialisation).
    fit_target : float, default=INIT_ERROR_TARGET
        Fraction of an epoch's samples the network fitted to ``initial_labels``
        may still assign elsewhere (0: all of them as given, within the budget).

    Returns
    -------
    candidates : list of (weights, labels)
        The trained network's weights as NumPy arrays (:func:`network_weights`),
        with the cluster it gives each training sample; preceded by those of the
        network fitted to the initial partition, when there is one.
    result : TrainingResult
        Epochs run, the objective (bound + gamma * KL) of each, convergence.
    """
    device = torch.device(settings.device)
    batch_size, n_clusters = settings.batch_size, settings.n_clusters
    n_samples = features.n_samples
    initial_proportions, candidates = None, []
    if initial_labels is not None:
        builtin = isinstance(network, AssignmentNetwork)
        fit_to_partition(network, features, initial_labels, batch_size=batch_size,
                         device=device, batch_seed=batch_seed + 1,
                         target=fit_target, capturable=builtin,
                         learning_rate=_init_learning_rate(network))
        candidates.append(_candidate(network, features, batch_size, device))
        if settings.max_iter == 0:
            return candidates, TrainingResult(n_iter=0, loss_curve=np.empty(0),
                                              converged=True)
        initial_proportions = np.bincount(initial_labels, minlength=n_clusters) / len(
            initial_labels)
    sampler = PairedBatches(n_samples, batch_size, make_generator(batch_seed, device),
                            device)
    n_annealing_epochs = settings.annealing_epochs
    task = ratio_cut_task(
        network, features, graph, sampler, n_clusters=n_clusters,
        momentum=settings.momentum, gamma=settings.gamma,
        n_annealing_steps=n_annealing_epochs * sampler.n_batches, device=device,
        initial_proportions=initial_proportions)
    network.train()
    result = train(task, sampler, TrainOptions(
        name=name, device=device, learning_rate=settings.learning_rate,
        max_iter=settings.max_iter, tol=settings.tol,
        n_iter_no_change=settings.n_iter_no_change, verbose=settings.verbose,
        min_epochs=n_annealing_epochs, cooldown=cooldown_schedule(sampler.n_batches)))
    candidates.append(_candidate(network, features, batch_size, device))
    return candidates, result


def ratio_cut_task(network, features, graph, sampler, *, n_clusters, momentum, gamma,
                   n_annealing_steps, device, initial_proportions=None):
    """The :class:`RatioCutTask` of a network on the graph, for the batch pairs of
    ``sampler``; when its batches hold every sample, each step reads the whole
    graph (small data)."""
    dtype = features.dtype
    task = RatioCutTask(
        network, features, device_graph(graph, device, dtype), n_clusters=n_clusters,
        momentum=momentum, gamma=gamma, n_annealing_steps=n_annealing_steps,
        device=device, dtype=dtype, initial_proportions=initial_proportions)
    if sampler.left.batch_size == features.n_samples:
        task.cover_every_sample(graph, device, dtype)
    return task


def new_network(X, *, n_clusters, hidden_layer_sizes, init_seed, input_offset=None,
                module=None):
    """The built-in :class:`AssignmentNetwork` drawn from ``init_seed``, or a copy of
    ``module`` (its lazy parameters drawn from torch's global generator: call it
    under :func:`_global_rng`)."""
    if module is None:
        return AssignmentNetwork(X.shape[1], hidden_layer_sizes, n_clusters,
                                 make_generator(init_seed), input_offset)
    return copy_module(module, X, n_clusters)


def restored_network(state, n_inputs, *, n_clusters, hidden_layer_sizes,
                     input_offset=None, module=None):
    """The network whose ``state_dict`` (NumPy arrays) a stream carries: the built-in
    one, or a CPU copy of ``module``, in training mode; a ValueError where ``module``
    was changed since the stream started (the stream keeps no torch object to
    compare it with: its weights do not fit the network now asked for)."""
    try:
        if module is not None:
            return module_from_state(module, state).train()
        network = AssignmentNetwork(n_inputs, hidden_layer_sizes, n_clusters,
                                    make_generator(0), input_offset)
        network.load_state_dict({name: torch.as_tensor(value)
                                 for name, value in state.items()})
    except RuntimeError as error:  # torch's "Error(s) in loading state_dict"
        first = str(error).strip().splitlines()[-1].strip()
        raise ValueError(
            f"partial_fit cannot change module: the stream's weights do not fit the "
            f"{'module' if module is not None else 'built-in network'} now set "
            f"({first}). Call fit, or partial_fit on a new estimator "
            "(sklearn.base.clone), to start a stream with it.") from error
    return network


def _global_rng(module, seed, device):
    """torch's global generators seeded from ``seed`` while a user's module is made
    and trained (lazy parameters, dropout); the built-in network uses none."""
    if module is None:
        return contextlib.nullcontext()
    return seeded_global_rng(seed, device)


@dataclass
class StreamPass:
    """What one pass of ``partial_fit`` over a chunk hands back, all NumPy: the
    network's ``state_dict``, Adam's state and P-bar to continue from, the pass's
    mean objective and steps, the network's exported weights
    (:func:`network_weights`) and the cluster it gives each sample of the chunk."""

    state: dict
    optimizer: dict
    p_bar: np.ndarray
    objective: float
    n_steps: int
    weights: object
    labels: np.ndarray


def stream_pass(X, graph, settings, *, learning_rate, n_annealing_steps, steps_done,
                init_seed, batch_seed, state=None, optimizer_state=None, p_bar=None,
                initial_labels=None, fit_target=INIT_ERROR_TARGET):
    """One pass of algorithm 1 over a chunk and its own graph, on the CPU
    (``partial_fit``): an epoch of ``max(n // batch_size, 1)`` batch pairs with
    Adam at a constant, resolved ``learning_rate`` (``settings.learning_rate`` is
    not read, nor are ``max_iter``, ``tol`` or ``device``).

    With ``state=None`` the network is new (:func:`new_network`, from
    ``init_seed``), first fitted to ``initial_labels`` when given (P-bar then
    starts at their proportions, else at uniform), and Adam starts afresh;
    otherwise the network (``state``), Adam (``optimizer_state``) and P-bar
    (``p_bar``) continue from the previous pass. ``steps_done`` steps of the
    annealing schedule (``n_annealing_steps``) have passed. With a module,
    torch's global generators are seeded from ``init_seed`` (dropout) and
    restored afterwards.

    Returns
    -------
    StreamPass
    """
    n_clusters, hidden_layer_sizes = settings.n_clusters, settings.hidden_layer_sizes
    batch_size = settings.batch_size
    module, input_offset = settings.module, settings.input_offset
    device = torch.device("cpu")
    with _global_rng(module, init_seed, device):
        if state is None:
            network = new_network(X, n_clusters=n_clusters,
                                  hidden_layer_sizes=hidden_layer_sizes,
                                  init_seed=init_seed, input_offset=input_offset,
                                  module=module)
        else:
            network = restored_network(state, X.shape[1], n_clusters=n_clusters,
                                       hidden_layer_sizes=hidden_layer_sizes,
                                       input_offset=input_offset, module=module)
        features = FeatureBatches(X, device, module_dtype(network),
                                  dense_rows=module is not None)
        if initial_labels is not None:
            fit_to_partition(network, features, initial_labels, batch_size=batch_size,
                             device=device, batch_seed=batch_seed + 1,
                             target=fit_target,
                             learning_rate=_init_learning_rate(network))
            p_bar = np.bincount(initial_labels, minlength=n_clusters) / len(initial_labels)
        sampler = PairedBatches(features.n_samples, batch_size,
                                make_generator(batch_seed, device), device)
        task = ratio_cut_task(network, features, graph, sampler, n_clusters=n_clusters,
                              momentum=settings.momentum, gamma=settings.gamma,
                              n_annealing_steps=n_annealing_steps, device=device,
                              initial_proportions=p_bar)
        task.n_steps = int(steps_done)  # the annealing schedule goes on
        optimizer = adam(list(network.parameters()), learning_rate, capturable=False,
                         on_cuda=False)
        if optimizer_state is not None:
            optimizer.load_state_dict(optimizer_state_from_numpy(optimizer_state))
        network.train()
        result = train(task, sampler, TrainOptions(
            name="PRCut", device=device, learning_rate=learning_rate, max_iter=1, tol=0.0,
            n_iter_no_change=1, warn=False, optimizer=optimizer))
        weights, labels = _candidate(network, features, batch_size, device)
    return StreamPass(state=state_to_numpy(network),
                      optimizer=optimizer_state_to_numpy(optimizer),
                      p_bar=task.criterion.p_bar.numpy().copy(),
                      objective=float(result.loss_curve[0]), n_steps=sampler.n_batches,
                      weights=weights, labels=labels)


def network_weights(network):
    """The weights of a network as NumPy arrays on the host: ``(coefs,
    intercepts)`` of the built-in network (layer l maps h to ``h @ coefs[l] +
    intercepts[l]``, float64), the ``state_dict`` of a user's module."""
    if isinstance(network, AssignmentNetwork):
        return network.weights_as_numpy()
    return state_to_numpy(network)


# training has settled (and may stop, once the objective has too) when an epoch
# changes the hard assignment of at most this fraction of the samples: where the
# noisy objective trips the stopping rule then no longer decides the partition
SETTLED_FRACTION = 1e-3
# ... or when the number of changes has not reached a new low for this many epochs:
# on large data the batches' noise keeps flipping the samples at the boundaries (on
# MNIST's 60,000 images, 0.5 to 1% an epoch at the step size 'auto' for hundreds of
# epochs), so the fraction alone never held there and training ran to max_iter
SETTLE_EPOCHS = 5
# once converged, about this many steps (at least an epoch) with Adam's step size
# shrinking geometrically to COOLDOWN_FINAL of its value: Adam's steps do not
# shrink with the gradient, so without it the network ends wherever the last
# steps' oscillation put it, which hangs on the data's last bits
COOLDOWN_STEPS, COOLDOWN_FINAL = 8, 1.0 / 16


def cooldown_schedule(n_batches):
    """``(n_epochs, factor)`` of the cool-down for epochs of ``n_batches`` steps."""
    n_epochs = max(1, -(-COOLDOWN_STEPS // n_batches))
    return n_epochs, COOLDOWN_FINAL ** (1.0 / n_epochs)


def _init_learning_rate(network):
    """The step size fitting ``network`` to the start: scaled by the built-in
    network's input size (``init_learning_rate``), a module's as it is."""
    if isinstance(network, AssignmentNetwork):
        return init_learning_rate(network.layers[0].in_features)
    return INIT_LEARNING_RATE


def _candidate(network, features, batch_size, device):
    """The network's weights (NumPy) and the cluster it gives each training sample,
    computed on the training device, a few batches at a time (fewer rows when the
    rows are long, such as those of a dense affinity)."""
    network.eval()
    step = max(1, min(4 * batch_size, (1 << 22) // max(features.n_inputs, 1)))
    with torch.no_grad(), one_thread(device):
        labels = torch.cat([
            network(features(torch.arange(start, min(start + step, features.n_samples),
                                          device=device))).argmax(1)
            for start in range(0, features.n_samples, step)
        ])
    network.train()
    return network_weights(network), labels.to("cpu").numpy()
