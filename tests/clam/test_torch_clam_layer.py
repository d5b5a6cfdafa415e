"""ClAMLayer and clam_loss: ClAM's recursion and loss as public torch building blocks."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.cluster import kmeans_plusplus
from sklearn.datasets import load_iris, load_wine, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skdiffclust import ClAM
from skdiffclust.clam._inference import fitted_masked_loss
from skdiffclust.clam._kernels import hidden_count
from skdiffclust.torch import ClAMLayer, clam_loss
from tests.clam.test_torch_clam import _hidden_and_masks, _paper_step

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _layer(metric="euclidean", weighted=False, seed=0, **params):
    layer = ClAMLayer(4, 6, beta=0.7, n_steps=5, step_size=0.3, metric=metric,
                      weighted=weighted, dtype=torch.float64, generator=_generator(seed),
                      **params)
    if weighted:
        with torch.no_grad():
            layer.log_weights.normal_(generator=_generator(seed + 1))
    return layer


def _fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a ConvergenceWarning changes nothing here
        return ClAM(device="cpu", random_state=0, **params).fit(X)


def _points(n=30, d=6, seed=2):
    return torch.randn(n, d, generator=_generator(seed), dtype=torch.float64)


# -- the estimator's inference ---------------------------------------------------------


def _iris():
    return load_iris().data


def _wine():
    return StandardScaler().fit_transform(load_wine().data)


def _blobs():
    return make_blobs(500, n_features=5, centers=4, random_state=0)[0] + 100.0


@pytest.mark.parametrize("data, params", [
    pytest.param(_iris, dict(n_clusters=3, beta=1.0), id="iris"),
    pytest.param(_wine, dict(n_clusters=3, beta=1.0), id="wine-standardised"),
    pytest.param(_blobs, dict(n_clusters=4, beta=1.0), id="blobs-offset"),
    pytest.param(_iris, dict(n_clusters=3, beta="auto", metric="cosine"), id="iris-cosine"),
    pytest.param(_wine, dict(n_clusters=3, beta=1.0, weighted=True), id="wine-weighted"),
])
def test_a_layer_copied_from_a_fitted_clam_predicts_what_it_predicts(data, params):
    X = data()
    clam = _fit(X, **params)
    assert clam.n_clusters_ == clam.n_clusters  # a real partition, not a trivial one
    layer = ClAMLayer.from_estimator(clam)
    assert layer.prototypes.dtype == torch.float64
    np.testing.assert_array_equal(layer.predict(torch.as_tensor(X)).numpy(), clam.predict(X))
    proba = layer.predict_proba(torch.as_tensor(X)).detach().numpy()
    np.testing.assert_allclose(proba, clam.predict_proba(X), rtol=1e-9, atol=1e-12)


def test_soft_assignments_are_differentiable_and_agree_with_predict():
    layer = _layer(weighted=True)
    x = torch.randn(50, 6, dtype=torch.float64, generator=_generator(1))
    proba = layer.predict_proba(x)
    torch.testing.assert_close(proba.sum(1), torch.ones(50, dtype=torch.float64))
    torch.testing.assert_close(proba.argmax(1), layer.predict(x))
    # the gradients with respect to the points, the prototypes and the log-weights
    # (which move the points) are those of central finite differences; gradcheck
    # perturbs the layer's own parameters in place
    assert torch.autograd.gradcheck(lambda points, *parameters: layer.predict_proba(points),
                                    (x[:8].detach().requires_grad_(True), layer.prototypes,
                                     layer.log_weights))


@pytest.mark.parametrize("metric, weighted", [("euclidean", False), ("euclidean", True),
                                              ("cosine", False)])
def test_a_copied_layer_scores_the_estimators_masked_loss(metric, weighted):
    """The fill value and the masked recursion carried to the input's units: with the
    estimator's own masks, the layer's completion loss is its masked loss."""
    X = _wine() * 3.0 + 5.0
    clam = _fit(X, n_clusters=3, beta=1.0, metric=metric, weighted=weighted, max_iter=20,
                mask_prob=0.3)
    layer = ClAMLayer.from_estimator(clam)
    x = torch.as_tensor(X)
    if metric == "cosine":
        x = x / x.norm(dim=1, keepdim=True)
    _, masks = _hidden_and_masks(np.random.default_rng(clam._score_seed), (1,) + X.shape,
                                 hidden_count(0.3, X.shape[1]))
    with torch.no_grad():
        completed = layer(x, mask=masks[0])
    loss = ((x - completed) * masks[0]).square().sum(1).mean()
    assert loss.item() == pytest.approx(fitted_masked_loss(clam, X), rel=1e-9)


def test_the_unmasked_loss_of_a_copied_layer_is_the_estimators_loss():
    X = _blobs()
    clam = _fit(X, n_clusters=4, beta=1.0, mask_prob=0.0, max_iter=10)
    loss = clam_loss(ClAMLayer.from_estimator(clam), torch.as_tensor(X), mask_prob=0.0)
    assert loss.item() == pytest.approx(fitted_masked_loss(clam, X), rel=1e-9)


def test_from_estimator_needs_a_fitted_clam():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ClAMLayer.from_estimator(ClAM())
    with pytest.raises(TypeError, match="ClAM"):
        ClAMLayer.from_estimator(object())


# -- forward, predict, loss ------------------------------------------------------------


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
def test_forward_is_the_papers_recursion_unrolled(metric, weighted):
    layer, x = _layer(metric, weighted), _points()
    if metric == "cosine":
        x = x / x.norm(dim=1, keepdim=True)
    expected = x
    for _ in range(layer.n_steps):
        expected = _paper_step(expected, layer.prototypes.detach(), layer.beta, layer.alpha,
                               None if layer.log_weights is None
                               else layer.log_weights.detach(), metric)
    torch.testing.assert_close(layer(x), expected)


def test_a_mask_moves_the_hidden_coordinates_only_starting_from_the_fill():
    layer, x = _layer(), _points()
    with torch.no_grad():
        layer.fill.copy_(torch.arange(6.0))
    mask = torch.rand(x.shape, generator=_generator(5)) < 0.3
    out = layer(x, mask=mask)
    torch.testing.assert_close(out[~mask], x[~mask], rtol=0, atol=0)
    assert (out[mask] != x[mask]).all()
    # one step from the fill: the hidden coordinates of the start are the fill's
    one_step = ClAMLayer(4, 6, beta=0.7, n_steps=1, step_size=1e-12, dtype=torch.float64)
    one_step.load_state_dict(layer.state_dict())
    start = one_step(x, mask=mask)
    torch.testing.assert_close(start[mask], layer.fill.expand_as(x)[mask])
    torch.testing.assert_close(layer(x, mask=torch.zeros_like(mask)), x)


def test_predict_is_the_nearest_prototype_of_the_final_state():
    layer, x = _layer(), _points(200)
    final = layer(x)
    distances = torch.cdist(final, layer.prototypes)
    torch.testing.assert_close(layer.predict(x), distances.argmin(1), rtol=0, atol=0)
    assert not layer.predict(x).requires_grad


@pytest.mark.parametrize("mask_prob, n_hidden", [(0.15, 1), (0.5, 3), (0.0, 0)])
def test_clam_loss_scores_the_hidden_features_it_draws(mask_prob, n_hidden):
    layer, x = _layer(), _points()
    loss = clam_loss(layer, x, mask_prob, generator=_generator(3))
    if n_hidden == 0:  # eq. 8
        expected = (x - layer(x)).square().sum(1).mean()
    else:  # the same masks, drawn by the same generator
        keys = torch.rand(x.shape, generator=_generator(3), dtype=torch.float32)
        hidden = keys.topk(n_hidden, dim=1, largest=False).indices
        mask = torch.zeros_like(x, dtype=torch.bool).scatter_(1, hidden, True)
        expected = ((x - layer(x, mask=mask)) * mask).square().sum(1).mean()
    torch.testing.assert_close(loss, expected)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
def test_forward_and_loss_pass_gradcheck_for_inputs_and_prototypes(metric, weighted):
    layer, x = _layer(metric, weighted), _points(8).requires_grad_(True)
    names = ["prototypes", "log_weights"] if weighted else ["prototypes"]
    loss = _CompletionLoss(layer)

    def with_parameters(module, prefix):
        def call(x, *params):
            return torch.func.functional_call(
                module, {prefix + name: p for name, p in zip(names, params)}, (x,))
        return call

    inputs = (x, *[getattr(layer, name).detach().clone().requires_grad_(True)
                   for name in names])
    assert torch.autograd.gradcheck(with_parameters(layer, ""), inputs)
    assert torch.autograd.gradcheck(with_parameters(loss, "layer."), inputs)


def test_a_zero_input_of_the_cosine_layer_has_a_finite_gradient():
    """A zero row stays zero when scaled to unit norm; its gradient was infinite
    (the scaling divided by the dtype's smallest number), and the other rows' and
    the forward pass are as before."""
    layer = _layer("cosine", False)
    x = torch.cat([_points(4), torch.zeros(1, layer.n_features, dtype=torch.float64)])
    x.requires_grad_(True)
    out = layer(x)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert torch.isfinite(layer.prototypes.grad).all()
    alone = _points(4).requires_grad_(True)
    layer(alone).sum().backward()
    torch.testing.assert_close(out[:4], layer(alone), rtol=0, atol=0)
    torch.testing.assert_close(x.grad[:4], alone.grad, rtol=0, atol=0)


class _CompletionLoss(torch.nn.Module):
    """clam_loss with fixed masks (a fresh generator each call), as a module, so that
    functional_call can substitute the layer's parameters."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return clam_loss(self.layer, x, 0.3, generator=_generator(1))


def test_the_layer_trains_with_clam_loss_and_finds_the_blobs():
    """ClAM's masked completion loss, minimised with Adam, places the prototypes."""
    X, y = make_blobs(400, n_features=8, centers=4, cluster_std=3.0, random_state=0)
    x = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    generator = _generator(0)
    layer = ClAMLayer(4, 8, beta=1.0)
    centres, _ = kmeans_plusplus(x.numpy(), 4, random_state=0)
    with torch.no_grad():  # k-means++ seeds, as ClAM's default init
        layer.prototypes.copy_(torch.as_tensor(centres))
        layer.fill.copy_(x.mean(0))

    def held_out_loss():  # on the same masks every time
        with torch.no_grad():
            return clam_loss(layer, x, mask_prob=0.25, generator=_generator(9)).item()

    initial_ari, initial_loss = adjusted_rand_score(y, layer.predict(x).numpy()), \
        held_out_loss()
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    for _ in range(10):
        for batch in torch.randperm(400, generator=generator).view(-1, 16):
            loss = clam_loss(layer, x[batch], mask_prob=0.25, generator=generator)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert initial_ari < 0.95  # the seeds alone do not get there
    assert adjusted_rand_score(y, layer.predict(x).numpy()) >= 0.95
    assert held_out_loss() < 0.75 * initial_loss


def test_the_layer_saves_its_parameters_and_fill_in_the_state_dict():
    state = _layer(weighted=True).state_dict()
    assert set(state) == {"prototypes", "log_weights", "fill"}
    assert set(_layer().state_dict()) == {"prototypes", "fill"}


@pytest.mark.parametrize("params, match", [
    (dict(n_clusters=0, n_features=2), "n_clusters"),
    (dict(n_clusters=2, n_features=2, beta=0.0), "beta"),
    (dict(n_clusters=2, n_features=2, n_steps=0), "n_steps"),
    (dict(n_clusters=2, n_features=2, step_size=1.5), "step_size"),
    (dict(n_clusters=2, n_features=2, metric="manhattan"), "metric"),
])
def test_bad_parameters_get_a_clear_error(params, match):
    with pytest.raises(ValueError, match=match):
        ClAMLayer(**params)


def test_a_flag_that_is_not_a_bool_is_refused():
    with pytest.raises(TypeError, match="weighted must be True or False, got 'no'"):
        ClAMLayer(2, 2, weighted="no")  # read by its truth, it meant True


@pytest.mark.parametrize("dtype, reason", [
    (torch.int64, " (an integer dtype would truncate the values)."),
    (torch.complex64, "."),  # said "an integer dtype would truncate" before
    (np.float32, " (not a torch.dtype)."),
])
def test_a_dtype_that_is_not_a_floating_torch_dtype_is_refused_with_the_reason(dtype, reason):
    with pytest.raises(TypeError) as caught:
        ClAMLayer(2, 2, dtype=dtype)
    assert str(caught.value).endswith(f"got {dtype!r}{reason}")


def test_numbers_may_be_zero_dimensional_cpu_tensors():
    # a schedule computed with torch ops was refused as out of range
    X = torch.as_tensor(make_blobs(40, 2, centers=2, random_state=0)[0])
    kwargs = dict(n_clusters=2, n_features=2, dtype=torch.float64)
    as_tensors = ClAMLayer(beta=torch.tensor(2.0), step_size=torch.tensor(0.5), **kwargs)
    as_floats = ClAMLayer(beta=2.0, step_size=0.5, **kwargs)
    as_floats.load_state_dict(as_tensors.state_dict())
    torch.testing.assert_close(as_tensors(X), as_floats(X))
    losses = [clam_loss(as_floats, X, mask_prob=p, generator=torch.Generator().manual_seed(0))
              for p in (torch.tensor(0.25), 0.25)]
    torch.testing.assert_close(*losses)


@pytest.mark.parametrize("call, error, match", [
    (lambda layer, x: layer(x[:, :3]), ValueError, "n_features=6"),
    (lambda layer, x: layer(x.float()), TypeError, "move one"),
    (lambda layer, x: layer(x.numpy()), TypeError, "torch.Tensor"),
    (lambda layer, x: layer(x, mask=torch.ones_like(x)), TypeError, "boolean"),
    (lambda layer, x: layer(x, mask=torch.ones(3, 6, dtype=torch.bool)), ValueError,
     "mask must have"),
    (lambda layer, x: clam_loss(layer, x, mask_prob=1.0), ValueError, "mask_prob"),
    (lambda layer, x: clam_loss(object(), x), TypeError, "ClAMLayer"),
    # torch's "unsupported memory format option Contiguous"
    (lambda layer, x: layer(x.to_sparse()), TypeError, "x must be a dense tensor"),
])
def test_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call(_layer(), _points())


@CUDA
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_the_layer_on_cuda_computes_what_it_computes_on_the_cpu(metric):
    layer, x = _layer(metric, weighted=True), _points(64)
    results = []
    for device in ("cpu", "cuda"):
        moved = _layer(metric, weighted=True).to(device)
        moved.load_state_dict(layer.state_dict())
        inputs = x.detach().to(device).requires_grad_(True)  # a leaf on each device
        mask = (torch.arange(6) % 3 == 0).expand(64, 6).to(device)
        out = moved(inputs, mask=mask)
        out.square().sum().backward()
        results.append([t.detach().cpu() for t in (out, inputs.grad, moved.prototypes.grad,
                                                   moved.predict(inputs))])
    for got, expected in zip(results[1], results[0]):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_an_empty_batch_gives_empty_outputs_as_torchs_layers_do(metric):
    # torch.nn.Linear maps (0, d) to (0, k); ClAMLayer refused it (issue 45)
    layer = _layer(metric)
    x = torch.zeros(0, 6, dtype=torch.float64)
    assert layer(x).shape == (0, 6)
    assert layer(x, mask=torch.zeros(0, 6, dtype=torch.bool)).shape == (0, 6)
    assert layer.predict(x).shape == (0,) and layer.predict(x).dtype == torch.int64
    assert layer.predict_proba(x).shape == (0, 4)
    # a loss averages over the batch: an empty one has none
    with pytest.raises(ValueError, match="x is empty"):
        clam_loss(layer, x)


@CUDA
def test_a_generator_on_cuda_draws_the_masks_of_points_on_cuda():
    layer = _layer().to("cuda")
    x = _points(64).to(layer.prototypes.device)
    generator = torch.Generator("cuda").manual_seed(0)  # its device: 'cuda', no number
    clam_loss(layer, x, 0.3, generator=generator).backward()
    assert torch.isfinite(layer.prototypes.grad).all()
