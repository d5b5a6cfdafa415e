"""ClAM's training on CUDA by the fused kernel of ``_cuda_kernels`` (numba.cuda, no
torch).

:class:`CUDATrainer` is the CPU trainer (``_trainer.CPUTrainer``) with its kernel call
swapped: everything on the host stays as it is (the permutation and masks drawn
from the same generator, re-seeding of dead prototypes, pruning, the plateau
schedule and stopping of ``_fit.train_restarts``), so that a fit on CUDA follows the
CPU's within float32 rounding. Per fit, the points go to the device once; per epoch,
the permutation and masks go there and the parameters, Adam's moments and what the
host logic reads (losses, counts, averages) come back; in between, one kernel launch
per slice of the epoch trains every active restart (a thread block each) on every
batch of the slice, with nothing copied. Each slice is waited for, so that Ctrl-C is
honoured between slices.
"""

import numpy as np

from skdiffclust._utils._cuda import import_kernels, simulated
from skdiffclust.clam._data import dense_rows
from skdiffclust.clam._trainer import CPUTrainer
from skdiffclust.clam._kernels import COSINE, LANE_STEPS_PER_CALL

# a kernel launch trains on about this many lane-steps (tens of milliseconds on an H100)
LANE_STEPS_PER_LAUNCH = 4 * LANE_STEPS_PER_CALL


def kernels():
    """The kernels' module, loaded for the GPU (or the simulator)."""
    return import_kernels("skdiffclust.clam._cuda_kernels")


def workspace(n_clusters, n_features, n_hidden, n_steps, batch_size):
    """Threads a lane, lanes in flight, the layout of a block's working memory and its
    length in float32 elements (``_cuda_kernels.workspace_layout``)."""
    module = kernels()
    per_lane, n_slots = module.lane_shape(n_clusters, batch_size)
    layout, size = module.workspace_layout(n_clusters, n_features, n_hidden, n_steps,
                                           n_slots, batch_size, n_slots * per_lane)
    return per_lane, n_slots, layout, size


def fits_in_shared_memory(n_clusters, n_features, n_hidden, n_steps, batch_size):
    """Whether a block's working memory fits in shared memory (``n_hidden`` 0: the
    unmasked loss, which tracks every feature)."""
    size = workspace(n_clusters, n_features, n_hidden or n_features, n_steps, batch_size)[3]
    return 4 * size <= kernels().SHARED_BYTES


class CUDATrainer(CPUTrainer):
    """:class:`~._trainer.CPUTrainer` whose epochs run on the default CUDA device, by
    :func:`._cuda_kernels.train_batches_kernel`. Trains float32 parameters only (ClAM
    trains in float32); ``n_threads`` is ignored."""

    def __init__(self, X, fill, dynamics, state, **options):
        super().__init__(X, fill, dynamics, state, **options)
        if self.prototypes.dtype != np.float32:
            raise ValueError("ClAM trains on CUDA in float32 only, got "
                             f"{self.prototypes.dtype} parameters.")
        from numba import cuda

        self.cuda, self.kernels = cuda, kernels()
        n_restarts, k, d = self.prototypes.shape
        self.X_device = cuda.to_device(dense_rows(X))
        self.fill_device = cuda.to_device(self.fill)
        h = self.n_hidden or d  # the unmasked loss tracks every feature
        # the unmasked loss: one (1, 1, d) array of every feature, for every example
        self.every_feature = cuda.to_device(np.arange(d, dtype=np.int32).reshape(1, 1, d))
        self.per_lane, self.n_slots, self.layout, size = workspace(
            k, d, h, dynamics.n_steps, self.batch_size)
        self.dlayout, dsize = self.kernels.double_layout(k, self.n_slots, self.batch_size)
        self.in_shared = 4 * size <= self.kernels.SHARED_BYTES
        self.shared_bytes = 4 * size if self.in_shared else 0
        self.ws = cuda.device_array((n_restarts, 1 if self.in_shared else size), np.float32)
        self.doubles = cuda.device_array((n_restarts, dsize), np.float64)
        self.constants = cuda.to_device(self.kernels.device_constants(
            np.float32, dynamics.beta, dynamics.alpha, dynamics.metric == COSINE))
        self.layout_device = cuda.to_device(self.layout)
        self.dlayout_device = cuda.to_device(self.dlayout)
        # the batches of one launch: about LANE_STEPS_PER_LAUNCH lane-steps for all
        # restarts (the backward pass costs about twice the forward one)
        cost = 3 * n_restarts * dynamics.n_steps * (k * (h + 2) + h) * self.batch_size
        self.batches_per_launch = max(LANE_STEPS_PER_LAUNCH // max(cost, 1), 1)

    def _draw_hidden(self, active):
        if self.n_hidden == 0:  # every feature: no (R, n, d) array, see epoch_with
            return None
        return super()._draw_hidden(active)

    def epoch_with(self, order, hidden, active=None):
        """One epoch on a given permutation and hidden features (R, n, h), or None for
        the unmasked loss; returns each restart's mean loss (NaN for inactive ones)."""
        cuda, kernels = self.cuda, self.kernels
        n_restarts = self.prototypes.shape[0]
        active = np.ones(n_restarts, dtype=bool) if active is None else active
        order = np.asarray(order, dtype=np.int64)
        restarts = np.flatnonzero(active)
        state, dynamics = self.optimizer, self.dynamics
        if hidden is None or self.n_hidden == 0:
            hidden_device = self.every_feature
        else:
            hidden_device = cuda.to_device(np.ascontiguousarray(hidden, dtype=np.int32))
        flat = (self.prototypes.reshape(n_restarts, -1),) + tuple(
            moment.reshape(n_restarts, -1) for moment in state.moments[:2])
        parameters = [cuda.to_device(array) for array in flat + (self.log_weights,)
                      + tuple(state.moments[2:])]
        P, m_P, v_P, W, m_W, v_W = parameters
        n_samples = order.shape[0]
        epoch_loss = cuda.to_device(np.zeros(n_restarts))
        counts = cuda.to_device(np.zeros_like(self.counts))
        position_loss = cuda.to_device(np.zeros((n_restarts, n_samples)))
        sum_P = cuda.to_device(np.zeros(flat[0].shape))
        sum_W = cuda.to_device(np.zeros(self.log_weights.shape))
        order_device, lr = cuda.to_device(order), cuda.to_device(state.lr)
        restarts_device = cuda.to_device(restarts.astype(np.int64))
        launch = kernels.train_batches_kernel[
            restarts.size, self.n_slots * self.per_lane, 0, self.shared_bytes]
        step = self.batches_per_launch * self.batch_size
        steps = state.steps
        for start in range(0, n_samples, step) if restarts.size else ():
            stop = min(start + step, n_samples)
            launch(self.X_device, order_device, hidden_device, self.fill_device,
                   self.n_hidden > 0, restarts_device, P, W, m_P, v_P, m_W, v_W, lr, steps,
                   self.weighted, float(dynamics.beta), dynamics.metric == COSINE,
                   int(dynamics.n_steps), self.constants, self.batch_size, self.clip,
                   start, stop, epoch_loss, counts, position_loss, sum_P, sum_W,
                   self.layout_device, self.dlayout_device, self.ws, self.doubles,
                   self.in_shared, self.per_lane, self.n_slots)
            cuda.synchronize()  # Ctrl-C is seen between launches
            steps += -(-(stop - start) // self.batch_size)
        state.steps = steps
        self._copy_back(restarts, flat, parameters)
        n_steps_taken = -(-n_samples // self.batch_size)
        totals = np.full(n_restarts, np.nan)
        totals[restarts] = epoch_loss.copy_to_host()[restarts] / self.n_samples
        self.order = order
        self.counts = counts.copy_to_host()
        self.position_loss = position_loss.copy_to_host()
        mean_P = sum_P.copy_to_host().reshape(self.prototypes.shape) / n_steps_taken
        mean_W = sum_W.copy_to_host() / n_steps_taken
        self.averages[0][restarts] = mean_P[restarts]
        self.averages[1][restarts] = mean_W[restarts]
        return totals

    def _copy_back(self, restarts, flat, parameters):
        """The active restarts' parameters and moments, into the state's arrays."""
        moments = self.optimizer.moments
        hosts = flat + (self.log_weights, moments[2], moments[3])
        for host, device in zip(hosts, parameters):
            host[restarts] = device.copy_to_host()[restarts]


def cuda_available():
    """Whether numba.cuda can launch kernels here (a GPU with a driver, or the
    simulator)."""
    from numba import cuda

    return simulated() or cuda.is_available()
