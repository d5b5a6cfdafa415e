"""The training engine: stopping rule, epoch loop, optimisers, device batches."""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skdiffclust._training import (
    Cooldown,
    EarlyStopping,
    EpochHook,
    EveryEpoch,
    StoppingRule,
    TrainingSession,
    run_epochs,
)
from skdiffclust._training._optim import (
    Adam,
    ReduceOnPlateau,
    SGDMomentum,
    adam_update,
    bias_corrections,
)


def _stop_epoch(objectives, **rule):
    stopping = StoppingRule(**rule)
    for epoch, objective in enumerate(objectives, start=1):
        if stopping.update(objective):
            return epoch
    return None


def test_patience_counts_epochs_without_relative_improvement():
    # improvements of 10% then a plateau: stops n_iter_no_change epochs into it
    objectives = [10.0, 9.0, 8.1, 8.1, 8.1, 8.1, 8.1]
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=3) == 6
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=5) is None


def test_tol_is_relative_to_the_objectives_scale():
    # gains of 0.5% of the objective count as improvement at tol=1e-3, not at 1e-2
    objectives = [100.0 * 0.995**t for t in range(12)]
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=3) is None
    assert _stop_epoch(objectives, tol=1e-2, n_iter_no_change=3) == 4
    # the same gains in other units give the same decisions
    scaled = [1e-6 * value for value in objectives]
    assert _stop_epoch(scaled, tol=1e-2, n_iter_no_change=3) == 4


def test_a_loss_decaying_to_zero_converges():
    # relative to |best| alone, a geometric decay would never converge (each gain is
    # half of best); relative to the first objective, 10, the gain 10 * 0.5**t of
    # epoch t + 1 falls below tol * 10 = 0.01 from t = 10 (0.0098; 0.0195 at t = 9):
    # epochs 11 to 15 are the 5 without improvement
    objectives = [10.0 * 0.5**t for t in range(40)]
    first_small_gain = next(t for t in range(1, 40) if 10.0 * 0.5**t < 1e-3 * 10.0)
    assert first_small_gain == 10
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=5) == first_small_gain + 5


def test_negative_objectives_improve_downwards():
    objectives = [-1.0, -2.0, -3.0, -3.0, -3.0]
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=2) == 5


def test_warm_up_epochs_never_stop():
    objectives = [1.0] * 10
    assert _stop_epoch(objectives, tol=1e-3, n_iter_no_change=2, min_epochs=6) == 8


def test_run_epochs_records_each_epoch_and_warns_when_max_iter_runs_out():
    values = iter([5.0, 4.0, 3.0, 2.0])
    with pytest.warns(ConvergenceWarning, match="Est ran max_iter=4"):
        result = run_epochs(lambda: next(values), max_iter=4, tol=1e-3,
                            n_iter_no_change=2, name="Est")
    assert result.n_iter == 4 and not result.converged
    np.testing.assert_array_equal(result.loss_curve, [5.0, 4.0, 3.0, 2.0])


def test_run_epochs_stops_without_warning_once_converged():
    calls = []

    def epoch():
        calls.append(None)
        return 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run_epochs(epoch, max_iter=100, tol=1e-3, n_iter_no_change=3, name="Est")
    assert result.converged and result.n_iter == len(calls) == 4


def test_restarts_keep_their_own_curves_and_stop_on_their_sum():
    values = iter([[3.0, 5.0], [2.0, 5.0], [2.0, 5.0], [2.0, 5.0]])
    seen = []
    result = run_epochs(lambda: next(values), max_iter=4, tol=1e-3, n_iter_no_change=2,
                        name="Est", hooks=[EveryEpoch(seen.append)])
    assert result.converged and result.n_iter == 4
    assert result.loss_curve.shape == (4, 2)
    assert seen == [8.0, 7.0, 7.0, 7.0]


def test_a_monitored_validation_error_decides_when_to_stop():
    # the training objective keeps improving; the validation error stops at epoch 3
    objectives = iter(np.linspace(10.0, 1.0, 50))
    errors = iter([0.5, 0.3, 0.2] + [0.25] * 47)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run_epochs(lambda: next(objectives), max_iter=50, tol=1e-3,
                            n_iter_no_change=4, name="X",
                            hooks=[EarlyStopping(lambda: next(errors))])
    assert result.converged and result.n_iter == 7
    np.testing.assert_allclose(result.validation_curve, [0.5, 0.3, 0.2, 0.25, 0.25, 0.25, 0.25])
    assert result.loss_curve.shape == (7,)
    with TrainingSession("X", warn=False) as quiet:
        assert run_epochs(lambda: 1.0, max_iter=1, tol=0, n_iter_no_change=1, name="X",
                          session=quiet).validation_curve is None


def test_zero_epochs_train_nothing_and_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run_epochs(lambda: pytest.fail("no epoch expected"), max_iter=0, tol=0.1,
                            n_iter_no_change=1, name="Est")
    assert result.n_iter == 0 and result.loss_curve.shape == (0,)


class _Recorder(EpochHook):
    """A hook that records what the loop tells it, and settles after ``settle_at``."""

    def __init__(self, settle_at=0, cooldown_epochs=0):
        self.events, self.settle_at, self.cooldown_epochs = [], settle_at, cooldown_epochs

    def on_epoch_end(self, objective):
        self.events.append(("epoch", objective))

    def settled(self):
        self.events.append("asked")
        return len([e for e in self.events if e != "asked"]) >= self.settle_at

    def on_cooldown_epoch(self, i):
        self.events.append(("cooldown", i))


def test_hooks_are_called_in_the_loops_order():
    hook = _Recorder(settle_at=4, cooldown_epochs=2)
    result = run_epochs(lambda: 1.0, max_iter=10, tol=1e-3, n_iter_no_change=2, name="Est",
                        hooks=[hook, EpochHook()])
    # converged at epoch 3 by the rule, held until the hook settles at 4, then 2
    # cool-down epochs, not reported to on_epoch_end
    assert hook.events == [("epoch", 1.0), ("epoch", 1.0), ("epoch", 1.0), "asked",
                           ("epoch", 1.0), "asked", ("cooldown", 0), ("cooldown", 1)]
    assert result.converged and result.n_iter == 6


def test_a_cooldown_scales_the_step_within_max_iter():
    scales = []
    result = run_epochs(lambda: 1.0, max_iter=4, tol=1e-3, n_iter_no_change=2, name="Est",
                        hooks=[Cooldown(5, 0.5, scales.append)])
    # converged at epoch 3: one cool-down epoch is left within max_iter
    assert result.n_iter == 4 and scales == [0.5]


def test_a_session_shows_one_bar_and_warns_once_for_the_trainings_kept(capsys):
    with pytest.warns(ConvergenceWarning) as caught:
        with TrainingSession("Est", verbose=True, total=6) as session:
            first = run_epochs(iter([3.0, 2.0, 1.0]).__next__, max_iter=3, tol=1e-3,
                               n_iter_no_change=2, name="Est", session=session)
            session.note(step=2)
            run_epochs(iter([3.0, 2.0, 1.0]).__next__, max_iter=3, tol=0.5,
                       n_iter_no_change=2, name="Est", session=session)
    assert not first.converged
    assert len(caught) == 1 and "tol=0.001" in str(caught[0].message)
    bar = capsys.readouterr().err
    assert "6/6" in bar and "step=2" in bar  # both trainings' epochs on the one bar
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with TrainingSession("Est") as session:
            result = run_epochs(lambda: 1.0, max_iter=1, tol=0.0, n_iter_no_change=5,
                                name="Est", session=session)
            session.discard([result])  # the fitted model does not rest on it


def test_a_session_that_fails_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FloatingPointError):
            with TrainingSession("Est") as session:
                run_epochs(lambda: 1.0, max_iter=1, tol=0.0, n_iter_no_change=5,
                           name="Est", session=session)
                run_epochs(lambda: math.nan, max_iter=1, tol=0.0, n_iter_no_change=5,
                           name="Est", session=session)


def test_a_non_finite_objective_raises_naming_the_estimator():
    with pytest.raises(FloatingPointError, match="Est's training diverged"):
        run_epochs(lambda: math.nan, max_iter=3, tol=0.1, n_iter_no_change=1, name="Est")


def _reference_adam(p, grads, lr):
    m = v = 0.0
    for t, g in enumerate(grads, start=1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return p


def test_adam_follows_kingma_and_ba():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)) for _ in range(5)]
    params = {"w": np.ones((3, 4))}
    adam = Adam(params, 0.1)
    for grad in grads:
        adam.step(params, {"w": grad})
    np.testing.assert_allclose(params["w"], _reference_adam(np.ones((3, 4)), grads, 0.1),
                               rtol=1e-12)
    # the kernel the numba training loops call is the same update
    p, m, v = np.ones(4), np.zeros(4), np.zeros(4)
    for t, grad in enumerate(grads, start=1):
        c1, c2 = bias_corrections(t)
        adam_update(p, np.ascontiguousarray(grad[0]), m, v, 0.1 / c1, c2)
    np.testing.assert_allclose(p, params["w"][0], rtol=1e-12)


def test_maximising_optimisers_ascend():
    params = {"w": np.zeros(2)}
    Adam(params, 0.1, maximize=True).step(params, {"w": np.array([1.0, -1.0])})
    # a step up the gradient: Kingma and Ba's first step, lr g / (|g| + eps), added
    np.testing.assert_allclose(params["w"], [0.1 / (1 + 1e-8), -0.1 / (1 + 1e-8)],
                               rtol=1e-14)
    descent = _reference_adam(np.zeros(2), [np.array([1.0, -1.0])], 0.1)
    np.testing.assert_allclose(params["w"], -descent, rtol=1e-14)
    params = {"w": np.zeros(2)}
    sgd = SGDMomentum(params, 0.1, maximize=True)
    sgd.step(params, {"w": np.array([1.0, -1.0])})
    sgd.step(params, {"w": np.array([1.0, -1.0])})
    np.testing.assert_allclose(params["w"], [0.1 + 0.19, -0.29])


class _Rate:
    learning_rate = 1.0


def test_plateau_schedule_lowers_the_rate_after_its_patience():
    rate = _Rate()
    schedule = ReduceOnPlateau(rate, factor=0.5, patience=2, threshold=1e-3, min_lr=0.2)
    for objective in [5.0, 4.0, 4.0, 4.0]:
        schedule.step(objective)
    assert rate.learning_rate == 1.0
    schedule.step(4.0)
    assert rate.learning_rate == 0.5
    for _ in range(10):
        schedule.step(4.0)
    assert rate.learning_rate == 0.2


@pytest.mark.torch
def test_numpy_adam_and_plateau_match_torch():
    import torch

    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(6) for _ in range(8)]
    weight = torch.zeros(6, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([weight], lr=0.05)
    params = {"w": np.zeros(6)}
    adam = Adam(params, 0.05)
    for grad in grads:
        weight.grad = torch.as_tensor(grad)
        optimizer.step()
        adam.step(params, {"w": grad})
    np.testing.assert_allclose(params["w"], weight.detach().numpy(), rtol=1e-12)

    objectives = [3.0, 2.0, 2.0, 1.999, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, factor=0.8, patience=2, threshold=1e-3, min_lr=1e-5)
    rate = _Rate()
    ours = ReduceOnPlateau(rate, factor=0.8, patience=2, threshold=1e-3, min_lr=1e-5)
    for objective in objectives:
        scheduler.step(objective)
        ours.step(objective)
        assert math.isclose(rate.learning_rate, optimizer.param_groups[0]["lr"] / 0.05)


@pytest.mark.torch
def test_device_batches_are_distinct_seeded_and_pooled():
    import torch

    from skdiffclust._training._torch import PairedBatches, PooledBatches, UniformBatches

    def generator(seed):
        return torch.Generator().manual_seed(seed)

    batches = UniformBatches(10, 4, generator(0), "cpu").epoch()
    assert batches.shape == (2, 4)
    assert len(set(batches.flatten().tolist())) == 8  # a permutation's prefix
    again = UniformBatches(10, 4, generator(0), "cpu").epoch()
    assert torch.equal(batches, again)
    assert UniformBatches(3, 8, generator(0), "cpu").epoch().shape == (1, 3)

    pairs = PairedBatches(10, 5, generator(0), "cpu").epoch()
    assert pairs.shape == (2, 2, 5)

    labelled, unlabelled = np.arange(3), np.arange(3, 20)
    pooled = PooledBatches([labelled, unlabelled], [2, 6], 4, generator(0), "cpu").epoch()
    assert pooled.shape == (4, 8)
    assert (pooled[:, :2] < 3).all() and (pooled[:, 2:] >= 3).all()
    # a small pool cycles through whole permutations of itself
    first_three = pooled[:, :2].flatten()[:3].tolist()
    assert sorted(first_three) == [0, 1, 2]


class _Quadratic:
    """A task whose minimum is known: mean squared distance of a point to the data."""

    capturable = True

    def __init__(self, data, device):
        import torch

        self.data = data
        self.point = torch.zeros(data.shape[1], device=device, requires_grad=True)

    def parameters(self):
        return [self.point]

    def loss(self, batch):
        loss = ((self.data[batch] - self.point) ** 2).sum(1).mean()
        return loss, loss.detach()


def _train_quadratic(device):
    import torch

    from skdiffclust._training._torch import TrainOptions, UniformBatches, train

    data = torch.as_tensor(np.random.default_rng(0).normal(3.0, 1.0, (256, 2)),
                           dtype=torch.float32, device=device)
    task = _Quadratic(data, device)
    generator = torch.Generator(device=device).manual_seed(0)
    result = train(task, UniformBatches(256, 32, generator, device), TrainOptions(
        name="Quadratic", device=device, learning_rate=0.1, max_iter=300, tol=1e-4,
        n_iter_no_change=5))
    return task.point.detach().cpu().numpy(), result, data.mean(0).cpu().numpy()


@pytest.mark.torch
def test_torch_engine_trains_a_task_to_its_minimum_and_restores_threads():
    import torch

    threads = torch.get_num_threads()
    point, result, mean = _train_quadratic("cpu")
    assert result.converged and result.n_iter < 300
    np.testing.assert_allclose(point, mean, atol=0.05)
    assert torch.get_num_threads() == threads


@pytest.mark.torch
def test_torch_engine_on_cuda_captures_the_step_and_trains():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # capture must not fail
        point, result, mean = _train_quadratic("cuda")
    assert result.converged
    np.testing.assert_allclose(point, mean, atol=0.05)


@pytest.mark.torch
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_engines_cpu_adam_is_torchs_fused_adam_bit_for_bit(weight_decay):
    # torch.optim.Adam(fused=True)'s kernel, called without torch.optim (whose first
    # step imports torch._dynamo): the same parameters after every step, with a
    # float64 parameter, a parameter without a gradient at some steps, and a step
    # size changed on the way as CosineDecay and the cool-down change it
    import torch

    from skdiffclust._training._torch import FusedAdam, _fused_cpu_adam_runs

    if not _fused_cpu_adam_runs():
        pytest.skip("this torch has no fused CPU Adam")
    rng = np.random.default_rng(0)
    starts = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5),
              rng.standard_normal(2).astype(np.float32)]
    theirs = [torch.tensor(start, requires_grad=True) for start in starts]
    ours = [torch.tensor(start, requires_grad=True) for start in starts]
    reference = torch.optim.Adam(theirs, lr=0.05, fused=True, weight_decay=weight_decay)
    optimizer = FusedAdam.of(ours, 0.05, weight_decay)
    assert isinstance(optimizer, FusedAdam)
    for step in range(6):
        if step == 3:
            reference.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"] = 0.02
        for optimiser, params in ((reference, theirs), (optimizer, ours)):
            optimiser.zero_grad(set_to_none=True)
            used = params if step % 2 else params[:2]
            sum(((param * param).sum() * (step + 1)) for param in used).backward()
            optimiser.step()
        for mine, torchs in zip(ours, theirs):
            np.testing.assert_array_equal(mine.detach().numpy(), torchs.detach().numpy())


@pytest.mark.torch
def test_the_engines_cpu_adam_is_refused_where_fused_adam_cannot_run():
    torch = pytest.importorskip("torch")
    from skdiffclust._training._torch import FusedAdam

    assert FusedAdam.of([torch.zeros(2, dtype=torch.int64)], 0.1) is None


@pytest.mark.torch
def test_the_engines_trainings_on_the_cpu_get_the_cpu_adam_and_partial_fit_torchs():
    torch = pytest.importorskip("torch")
    from skdiffclust._training._torch import FusedAdam, _fused_cpu_adam_runs, adam

    weight = [torch.zeros(3, requires_grad=True)]
    own = adam(weight, 0.1, capturable=False, on_cuda=False, state_dict=False)
    assert isinstance(own, FusedAdam) == _fused_cpu_adam_runs()
    # partial_fit carries Adam's state_dict from call to call: torch's optimiser
    assert isinstance(adam(weight, 0.1, capturable=False, on_cuda=False),
                      torch.optim.Adam)


@pytest.mark.torch
def test_cosine_decay_lowers_the_step_along_a_half_cosine_to_zero():
    import torch

    from skdiffclust._training._torch import CosineDecay

    for rate in (0.2, torch.tensor(0.2)):  # capturable Adam holds a tensor
        optimizer = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=rate)
        decay = CosineDecay(optimizer, 4)
        rates = []
        for _ in range(6):
            decay.step(1.0)
            rates.append(float(optimizer.param_groups[0]["lr"]))
        expected = [0.1 * (1 + math.cos(math.pi * e / 4)) for e in (1, 2, 3, 4, 4, 4)]
        np.testing.assert_allclose(rates, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.torch
def test_cosine_decay_brings_stochastic_training_to_rest_at_the_minimum():
    # small batches at a large constant step end a step's noise away from the data
    # mean; decayed to zero, the same training ends at it
    import torch

    from skdiffclust._training._torch import CosineDecay, TrainOptions, UniformBatches, train

    data = torch.as_tensor(np.random.default_rng(0).normal(3.0, 1.0, (256, 2)),
                           dtype=torch.float32)
    distances = {}
    for schedule, scheduler in (("constant", None), ("cosine", CosineDecay.over(20))):
        task = _Quadratic(data, "cpu")
        train(task, UniformBatches(256, 4, torch.Generator().manual_seed(0), "cpu"),
              TrainOptions(name="Quadratic", device="cpu", learning_rate=0.3, max_iter=20,
                           tol=0.0, n_iter_no_change=100, scheduler=scheduler, warn=False))
        distances[schedule] = float(torch.linalg.norm(task.point.detach() - data.mean(0)))
    assert distances["cosine"] < 0.2 * distances["constant"]


def test_in_order_yields_in_order_with_few_pieces_waiting_and_raises_a_pieces_error():
    """The threads of ``in_order`` (SparseGEMINI's row blocks, DeepImageClustering's
    NumPy chunks) give the pieces back in their order whatever finishes first, hold
    at most twice their count ahead of the caller, and pass on a piece's error."""
    import threading
    import time

    from skdiffclust._utils._threads import in_order

    started, lock = [], threading.Lock()

    def piece(i):
        with lock:
            started.append(i)
        time.sleep(0.002 * (i % 3 == 0))  # later pieces finish first
        return i * i

    taken = []
    for value in in_order(piece, range(20), n_threads=3):
        taken.append(value)
        with lock:
            assert len(started) - len(taken) <= 6  # 2 x 3 in flight or waiting
    assert taken == [i * i for i in range(20)]
    assert list(in_order(piece, [], n_threads=3)) == []

    def failing(i):
        if i == 4:
            raise ValueError("piece 4")
        return i

    with pytest.raises(ValueError, match="piece 4"):
        list(in_order(failing, range(10), n_threads=2))
