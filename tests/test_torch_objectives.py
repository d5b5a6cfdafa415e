"""The public torch objectives: gemini_loss, PRCutLoss and PRCutBatchPairs."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.neighbors import kneighbors_graph
from torch import nn

from skdiffclust.gemini import OBJECTIVES, gemini_value_and_grad
from skdiffclust.prcut._device import PaddedGraph
from skdiffclust._graphcut._graph import bipartite_objective, pbar_floor
from skdiffclust.torch import PRCutBatchPairs, PRCutLoss, gemini_loss, set_input_checks

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _generator(seed):
    return torch.Generator().manual_seed(seed)


# -- gemini_loss ---------------------------------------------------------------------


def _gemini_problem(gemini, n, k, seed):
    """Random probabilities and a linear kernel (MMD) or Euclidean distances
    (Wasserstein) of random points, as NumPy float64 arrays."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    similarity = X @ X.T if gemini.startswith("mmd") else pairwise_distances(X)
    return rng.dirichlet(np.ones(k), n), similarity


@pytest.mark.parametrize("gemini", OBJECTIVES)
@pytest.mark.parametrize("n, k, seed", [(8, 2, 0), (20, 3, 1), (40, 5, 2)])
def test_gemini_loss_equals_the_numpy_objective_and_gradient(gemini, n, k, seed):
    proba, similarity = _gemini_problem(gemini, n, k, seed)
    value, grad = gemini_value_and_grad(proba, similarity, gemini)
    T = torch.tensor(proba, requires_grad=True)
    loss = gemini_loss(T, torch.tensor(similarity), gemini)
    loss.backward()
    assert loss.item() == pytest.approx(-value, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(T.grad.numpy(), -grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("gemini", OBJECTIVES)
def test_gemini_loss_passes_gradcheck_in_float64(gemini):
    # Wasserstein: the transport cost is piecewise linear in the histograms (and in
    # the distances), with kinks where the optimal transport is degenerate (several
    # optimal dual potentials or plans). Strictly positive random probabilities and
    # Euclidean distances of random points in general position have no ties: a
    # unique plan and unique potentials, so finite differences see one linear piece.
    proba, similarity = _gemini_problem(gemini, 10, 3, 7)
    T = torch.tensor(proba, requires_grad=True)
    S = None if gemini == "mi" else torch.tensor(similarity, requires_grad=True)

    def loss(proba, similarity=None):
        return gemini_loss(proba, similarity, gemini)

    # finite differences step out of the domain (the distance matrix's zero
    # diagonal goes negative): no value checks while they do
    previous = set_input_checks("off")
    try:
        assert torch.autograd.gradcheck(loss, (T,) if S is None else (T, S))
    finally:
        set_input_checks(previous)


@pytest.mark.parametrize("gemini", OBJECTIVES)
def test_gemini_loss_in_float32_follows_float64(gemini):
    proba, similarity = _gemini_problem(gemini, 30, 4, 3)
    losses = [gemini_loss(torch.tensor(proba, dtype=dtype), torch.tensor(similarity, dtype=dtype),
                          gemini) for dtype in (torch.float32, torch.float64)]
    assert losses[0].dtype == torch.float32
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-4)


def test_gemini_loss_trains_a_softmax_head_to_find_blobs():
    """What a user wants of the loss: minimised, it separates the clusters."""
    X, y = make_blobs(300, centers=3, cluster_std=0.5, random_state=0)
    x = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    kernel = torch.as_tensor(rbf_kernel(x.numpy(), gamma=1.0))
    head = nn.Linear(2, 3)
    with torch.no_grad():  # a local draw: no global seeding
        head.weight.copy_(0.1 * torch.randn(3, 2, generator=_generator(0)))
        head.bias.zero_()
    optimizer = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(150):
        loss = gemini_loss(torch.softmax(head(x), dim=1), kernel, "mmd_ovo")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert adjusted_rand_score(y, head(x).argmax(1).numpy()) >= 0.95


def test_gemini_loss_takes_no_similarity_for_the_mutual_information():
    proba = torch.softmax(torch.randn(6, 2, generator=_generator(0), dtype=torch.float64), 1)
    # I(x; y) = 1/n sum_i sum_k p_ik log(p_ik / pi_k), pi the mean of the rows
    p = proba.numpy()
    mutual_information = np.mean(np.sum(p * np.log(p / p.mean(0)), axis=1))
    assert gemini_loss(proba, None, "mi").item() == pytest.approx(-mutual_information,
                                                                  rel=1e-12)


def test_gemini_loss_gradient_flows_into_a_learned_kernel():
    embedding = torch.randn(12, 3, generator=_generator(1), dtype=torch.float64,
                            requires_grad=True)
    proba = torch.softmax(torch.randn(12, 3, generator=_generator(2), dtype=torch.float64), 1)
    # the gradient that reaches the embedding through the kernel is the loss's
    # (checked against central finite differences)
    assert torch.autograd.gradcheck(
        lambda E: gemini_loss(proba, E @ E.T, "mmd_ova"), (embedding,))


@pytest.mark.parametrize("args, error, match", [
    ((torch.ones(4, 2) / 2, torch.eye(4), "nope"), ValueError, "gemini must be one of"),
    ((torch.ones(4, 2) / 2, torch.eye(3), "mmd_ovo"), ValueError, r"shape \(4, 4\)"),
    ((torch.ones(4) / 2, torch.eye(4), "mmd_ovo"), ValueError, "proba must have shape"),
    ((torch.ones(0, 2), torch.eye(0), "mi"), ValueError, "at least one sample"),
    ((np.ones((4, 2)) / 2, torch.eye(4), "mmd_ovo"), TypeError, "proba must be a torch"),
    ((torch.ones(4, 2, dtype=torch.int64), torch.eye(4), "mi"), TypeError, "floating"),
    # half precision: the message said float32 or float64, yet the loss took it and
    # then refused kernels of more than a few hundred samples (issue 45)
    ((torch.ones(4, 2, dtype=torch.float16) / 2, torch.eye(4, dtype=torch.float16),
      "mmd_ovo"), TypeError, "float32 or float64, got torch.float16"),
    ((torch.ones(4, 2, dtype=torch.bfloat16) / 2, None, "mi"), TypeError,
     "float32 or float64, got torch.bfloat16"),
    ((torch.ones(4, 2) / 2, None, "mmd_ova"), TypeError, "kernel matrix"),
    ((torch.ones(4, 2) / 2, None, "wasserstein_ovo"), TypeError, "distance matrix"),
    ((torch.tensor([[0.5, 0.5], [float("nan"), 0.5]]), None, "mi"), ValueError,
     "proba contains NaN"),
    ((torch.ones(2, 2) / 2, torch.tensor([[0.0, float("inf")], [1.0, 0.0]]),
      "wasserstein_ova"), ValueError, "distance matrix.*NaN"),
    # torch's "Could not run 'aten::as_strided' ... from the 'SparseCPU' backend"
    ((torch.ones(4, 2) / 2, torch.eye(4).to_sparse(), "mmd_ovo"), TypeError,
     "similarity must be a dense tensor, got layout torch.sparse_coo"),
    ((torch.eye(2).to_sparse(), None, "mi"), TypeError, "proba must be a dense tensor"),
])
def test_gemini_loss_rejects_bad_input_clearly(args, error, match):
    with pytest.raises(error, match=match):
        gemini_loss(*args)


def _points_and_probabilities(n=60, seed=0):
    g = _generator(seed)
    x = torch.randn(n, 4, generator=g, dtype=torch.float64)
    return x, torch.softmax(torch.randn(n, 3, generator=g, dtype=torch.float64), 1)


@pytest.mark.parametrize("gemini", ["mmd_ovo", "mmd_ova"])
def test_gemini_loss_refuses_distances_for_a_kernel(gemini):
    # distances passed as the MMD's kernel gave a loss of -7e-7 and a gradient of
    # 1e-10: every squared MMD was negative, floored, and training did nothing
    x, proba = _points_and_probabilities()
    with pytest.raises(ValueError, match="not a kernel.*wasserstein"):
        gemini_loss(proba, torch.cdist(x, x), gemini)


@pytest.mark.parametrize("gemini", ["wasserstein_ovo", "wasserstein_ova"])
def test_gemini_loss_refuses_a_kernel_for_distances(gemini):
    x, proba = _points_and_probabilities()
    kernel = torch.exp(-torch.cdist(x, x) ** 2 / 2)
    with pytest.raises(ValueError, match="not a distance matrix.*mmd"):
        gemini_loss(proba, kernel, gemini)


def test_gemini_loss_takes_kernels_that_are_not_gaussian():
    # linear, negated distances (the energy distance's kernel), constant: all pass
    # and give the one-vs-one MMD GEMINI, sum_kl pi_k pi_l MMD(k, l), with the MMD
    # of two weighted samples, w_k' K w_k + w_l' K w_l - 2 w_k' K w_l squared (w_k the
    # column k of the probabilities divided by its sum; the constant kernel's is 0, up
    # to the loss's floor of 1e-6 on each MMD)
    x, proba = _points_and_probabilities()
    D = torch.cdist(x, x)
    P = proba.numpy()
    pi, w = P.mean(0), P / P.sum(0)
    for kernel in (x @ x.T, -D, torch.ones_like(D), torch.exp(-D ** 2 / 1e8)):
        gram = w.T @ kernel.numpy() @ w
        squared = np.diag(gram)[:, None] + np.diag(gram)[None, :] - 2.0 * gram
        expected = pi @ np.sqrt(np.maximum(squared, 0.0)) @ pi
        assert gemini_loss(proba, kernel, "mmd_ovo").item() == pytest.approx(
            -expected, rel=1e-9, abs=1e-6)


def test_gemini_loss_says_why_a_meta_tensor_cannot_be_transported():
    proba = torch.full((4, 2), 0.5, device="meta")
    with pytest.raises(ValueError, match="meta tensor"):
        gemini_loss(proba, torch.ones(4, 4, device="meta"), "wasserstein_ovo")


@CUDA
@pytest.mark.parametrize("gemini", OBJECTIVES)
def test_gemini_loss_on_cuda_equals_the_cpu(gemini):
    proba, similarity = _gemini_problem(gemini, 20, 3, 4)
    grads, values = [], []
    for device in ("cpu", "cuda"):
        T = torch.tensor(proba, device=device, requires_grad=True)
        loss = gemini_loss(T, torch.tensor(similarity, device=device), gemini)
        loss.backward()
        assert loss.device.type == device
        values.append(loss.item())
        grads.append(T.grad.cpu())
    assert values[1] == pytest.approx(values[0], rel=1e-10)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-10, atol=1e-12)


# -- PRCutLoss -----------------------------------------------------------------------


def _pair(seed, n_left=7, n_right=5, k=3, density=0.5, dtype=torch.float64):
    """Probabilities of two batches and a random non-negative dense block."""
    generator = _generator(seed)
    proba = torch.softmax(torch.randn(n_left + n_right, k, generator=generator,
                                      dtype=dtype), 1)
    weights = torch.rand(n_left, n_right, generator=generator, dtype=dtype)
    keep = torch.rand(n_left, n_right, generator=generator) < density
    return proba[:n_left].clone(), proba[n_left:].clone(), torch.where(keep, weights, 0.0)


def _layouts(block):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        csr = block.to_sparse_csr()
    return {"dense": block, "coo": block.to_sparse_coo(), "csr": csr}


def _eq8(P, Q, W, p_bar, gamma):
    """Eq. 8 of Ghriss & Monteleoni (2025) written from the paper, sample by sample,
    for the block W divided by its total, plus the gradient of gamma * KL(mean || u)."""
    W = W / W.sum()
    n, k = P.shape[0] + Q.shape[0], P.shape[1]
    grad_P, grad_Q = torch.zeros_like(P), torch.zeros_like(Q)
    for c in range(k):
        cut = sum(W[i, j] * (P[i, c] + Q[j, c] - 2 * P[i, c] * Q[j, c])
                  for i in range(P.shape[0]) for j in range(Q.shape[0]))
        for i in range(P.shape[0]):
            pull = sum(W[i, j] * (1 - 2 * Q[j, c]) for j in range(Q.shape[0]))
            grad_P[i, c] = pull / p_bar[c] - cut / (n * p_bar[c] ** 2)
        for j in range(Q.shape[0]):
            pull = sum(W[i, j] * (1 - 2 * P[i, c]) for i in range(P.shape[0]))
            grad_Q[j, c] = pull / p_bar[c] - cut / (n * p_bar[c] ** 2)
    mean = torch.cat([P, Q]).mean(0)
    kl_grad = gamma * (torch.log(mean * k) + 1) / n  # d/dp_il of sum_l m_l log(k m_l)
    return grad_P + kl_grad, grad_Q + kl_grad


@pytest.mark.parametrize("layout", ["dense", "coo", "csr"])
@pytest.mark.parametrize("gamma", [0.0, 2.0])
def test_prcut_loss_gradient_is_the_papers_eq8_with_the_moving_average(layout, gamma):
    criterion = PRCutLoss(3, gamma=gamma, momentum=0.8, dtype=torch.float64)
    for seed in range(3):  # P-bar away from the batch mean: the paper's case
        P, Q, W = _pair(seed)
        criterion(P, Q, W)
    p_bar_before = criterion.p_bar.clone()
    P, Q, W = _pair(10)
    P.requires_grad_(True)
    Q.requires_grad_(True)
    criterion(P, Q, _layouts(W)[layout]).backward()
    mean = torch.cat([P, Q]).mean(0).detach()
    p_bar = 0.2 * p_bar_before + 0.8 * mean
    expected_P, expected_Q = _eq8(P.detach(), Q.detach(), W, p_bar, gamma)
    torch.testing.assert_close(P.grad, expected_P, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(Q.grad, expected_Q, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layout", ["dense", "coo", "csr"])
@pytest.mark.parametrize("hardness", [1.0, 0.3])
def test_prcut_loss_passes_gradcheck_with_the_batch_mean(layout, hardness):
    # momentum=1: P-bar is the batch mean, where eq. 8 is the exact gradient
    criterion = PRCutLoss(3, gamma=0.5, momentum=1.0, dtype=torch.float64)
    P, Q, W = _pair(4)
    affinity = _layouts(W)[layout]
    assert torch.autograd.gradcheck(
        lambda p, q: criterion(p, q, affinity, hardness=hardness),
        (P.requires_grad_(True), Q.requires_grad_(True)))


def test_prcut_loss_value_is_the_batch_objective_of_hard_partitions():
    labels_left, labels_right = np.array([0, 0, 1, 2, 2, 1]), np.array([1, 0, 2, 2, 0])
    W = _pair(5, n_left=6, n_right=5)[2]
    criterion = PRCutLoss(3, gamma=0.7, momentum=1.0, dtype=torch.float64)
    P = torch.eye(3, dtype=torch.float64)[labels_left]
    Q = torch.eye(3, dtype=torch.float64)[labels_right]
    expected = bipartite_objective(W.numpy(), labels_left, labels_right, 3, 0.7)
    assert criterion(P, Q, W).item() == pytest.approx(expected, rel=1e-12)


def test_dense_and_sparse_blocks_give_the_same_loss_and_gradient():
    P, Q, W = _pair(6)
    results = []
    for affinity in _layouts(W).values():
        p, q = P.clone().requires_grad_(True), Q.clone().requires_grad_(True)
        loss = PRCutLoss(3, dtype=torch.float64)(p, q, affinity)
        loss.backward()
        results.append((loss.detach(), p.grad, q.grad))
    for result in results[1:]:
        for got, expected in zip(result, results[0]):
            torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-14)


def test_p_bar_is_a_buffer_updated_in_training_mode_only():
    criterion = PRCutLoss(3, momentum=0.5, dtype=torch.float64)
    assert "p_bar" in criterion.state_dict()
    torch.testing.assert_close(criterion.p_bar, torch.full((3,), 1 / 3, dtype=torch.float64))
    P, Q, W = _pair(7)
    criterion(P, Q, W)
    trained = criterion.p_bar.clone()
    torch.testing.assert_close(trained, 0.5 / 3 + 0.5 * torch.cat([P, Q]).mean(0))
    criterion.eval()
    first = criterion(*_pair(8))
    torch.testing.assert_close(criterion.p_bar, trained)  # read, not updated
    assert criterion(*_pair(8)) == first
    restored = PRCutLoss(3, dtype=torch.float64)
    restored.load_state_dict(criterion.state_dict())
    torch.testing.assert_close(restored.p_bar, trained)


def test_an_emptied_cluster_keeps_the_loss_finite():
    P, Q, W = _pair(9)
    P[:, 2], Q[:, 2] = 0.0, 0.0
    P, Q = P / P.sum(1, keepdim=True), Q / Q.sum(1, keepdim=True)
    P.requires_grad_(True)
    criterion = PRCutLoss(3, momentum=1.0, dtype=torch.float64)
    loss = criterion(P, Q, W)
    loss.backward()
    assert criterion.p_bar[2] == 0 and torch.isfinite(loss) and torch.isfinite(P.grad).all()
    # eq. 8 divides by P-bar floored at 1% of 1 / k: P-bar_2 = 0 becomes 0.01 / 3; with
    # P_i2 = Q_j2 = 0 the cut of cluster 2 is 0, and sample i's gradient is its share of
    # the weight over that floor plus gamma = 1 times the KL term's log(k * floor) / n
    assert pbar_floor(3) == 0.01 / 3
    weights = W / W.sum()
    expected = weights.sum(1) / (0.01 / 3) + np.log(3 * (0.01 / 3)) / (P.shape[0] + Q.shape[0])
    torch.testing.assert_close(P.grad[:, 2], expected, rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("call, error, match", [
    (lambda c, P, Q, W: c(P[:, :2], Q[:, :2], W), ValueError, "n_clusters=3"),
    (lambda c, P, Q, W: c(P, Q, W.T), ValueError, r"\(7, 5\)"),
    (lambda c, P, Q, W: c(P.float(), Q.float(), W), TypeError, "move the loss"),
    (lambda c, P, Q, W: c(P, Q.float(), W), TypeError, "share a dtype"),
    (lambda c, P, Q, W: c(P, Q, W.numpy()), TypeError, "affinity must be a torch.Tensor"),
    (lambda c, P, Q, W: c(P, Q, W, hardness=0.0), ValueError, "hardness"),
    # the complex check came after one that torch failed inside
    (lambda c, P, Q, W: c(P, Q, W.to(torch.complex128)), TypeError, "real weights"),
    (lambda c, P, Q, W: c(P, Q, torch.full_like(W, 1e307)), ValueError, "too large"),
])
def test_prcut_loss_rejects_bad_input_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call(PRCutLoss(3, dtype=torch.float64), *_pair(0))


@pytest.mark.parametrize("params, match", [
    (dict(n_clusters=0), "n_clusters"), (dict(n_clusters=2, momentum=0.0), "momentum"),
    (dict(n_clusters=2, gamma=-1.0), "gamma"),
])
def test_prcut_loss_rejects_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        PRCutLoss(**params)


def test_a_half_precision_affinity_keeps_its_ratio_cut():
    # its total (about 90,000) overflowed float16, and every weight became 0
    g = _generator(0)
    P, Q = (torch.softmax(torch.randn(300, 3, generator=g), 1) for _ in range(2))
    W = 2 * torch.rand(300, 300, generator=g)
    criterion = PRCutLoss(3).eval()
    torch.testing.assert_close(criterion(P, Q, W.half()), criterion(P, Q, W.half().float()))


def test_numbers_may_be_zero_dimensional_cpu_tensors():
    # an annealing schedule computed with torch ops: "hardness must be in (0, 1],
    # got tensor(0.5000)" said the value was out of range
    P, Q, W = _pair(0)
    criterion = PRCutLoss(3, gamma=torch.tensor(2.0), dtype=torch.float64).eval()
    assert criterion.gamma == 2.0
    torch.testing.assert_close(criterion(P, Q, W, hardness=torch.tensor(0.5)),
                               criterion(P, Q, W, hardness=0.5))
    with pytest.raises(ValueError, match="hardness"):
        criterion(P, Q, W, hardness=torch.tensor([0.5]))


# -- PRCutBatchPairs -----------------------------------------------------------------


def _knn_graph(X, n_neighbors=10):
    knn = kneighbors_graph(X, n_neighbors, include_self=False)
    return knn.maximum(knn.T).tocsr()


@pytest.mark.parametrize("reader", ["csr", "padded"])
def test_batch_pairs_are_the_graph_blocks_of_two_permutations(reader):
    X, _ = make_blobs(103, centers=3, random_state=0)
    graph = _knn_graph(X)
    pairs = PRCutBatchPairs(graph, 20, generator=_generator(0))
    if reader == "padded":  # CUDA's reader (fixed shapes), on the CPU
        pairs.graph = PaddedGraph(graph, torch.device("cpu"), torch.float32)
    assert len(pairs) == 5
    lefts, rights = [], []
    for left, right, affinity in pairs:
        assert affinity.layout == torch.sparse_coo and affinity.dtype == torch.float32
        expected = graph[left.numpy()][:, right.numpy()].toarray()
        np.testing.assert_array_equal(affinity.to_dense().numpy(), expected)
        P, Q, _ = _pair(12, n_left=20, n_right=20)  # the same loss as the dense block
        dense = torch.as_tensor(expected, dtype=torch.float64)
        torch.testing.assert_close(PRCutLoss(3, dtype=torch.float64)(P, Q, affinity),
                                   PRCutLoss(3, dtype=torch.float64)(P, Q, dense))
        lefts.append(left)
        rights.append(right)
    for batches in (lefts, rights):  # 100 distinct samples of the 103
        assert torch.cat(batches).unique().numel() == 100


def test_batch_pairs_follow_their_generator():
    graph = _knn_graph(make_blobs(60, random_state=0)[0])
    draws = [[torch.cat([left, right]) for left, right, _ in
              PRCutBatchPairs(graph, 16, generator=_generator(seed))] for seed in (3, 3, 4)]
    assert all(torch.equal(a, b) for a, b in zip(draws[0], draws[1]))
    assert not all(torch.equal(a, b) for a, b in zip(draws[0], draws[2]))


@pytest.mark.parametrize("graph, error, match", [
    (np.eye(4), TypeError, "SciPy sparse"),
    (sp.csr_matrix(np.ones((3, 4))), ValueError, "square"),
    (sp.csr_matrix(np.triu(np.ones((4, 4)), 1)), ValueError, "symmetric"),
    (sp.csr_matrix(-np.ones((4, 4))), ValueError, "non-negative"),
])
def test_batch_pairs_reject_bad_graphs_clearly(graph, error, match):
    with pytest.raises(error, match=match):
        PRCutBatchPairs(graph, 2)


@pytest.mark.parametrize("cluster_std, min_ari", [
    # separated blobs: the ratio cut of the graph is the true partition
    (0.5, 0.95),
    # the data (cluster_std=1): blobs 0 and 2 overlap, and even the
    # Bayes-optimal partition (nearest true centre) reaches ARI 0.84 only (KMeans
    # 0.83, SpectralClustering on the same graph 0.83), so 0.95 is out of reach
    (1.0, 0.80),
])
def test_a_linear_softmax_head_trained_with_prcut_loss_finds_the_blobs(cluster_std, min_ari):
    X, y = make_blobs(2000, centers=4, cluster_std=cluster_std, random_state=0)
    x = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    generator = _generator(0)
    head = nn.Linear(2, 4)
    with torch.no_grad():  # a local draw: no global seeding, no spectral start
        head.weight.copy_(0.1 * torch.randn(4, 2, generator=generator))
        head.bias.zero_()
    criterion = PRCutLoss(4, gamma=1.0)
    pairs = PRCutBatchPairs(_knn_graph(X), 256, generator=generator)
    optimizer = torch.optim.Adam(head.parameters(), lr=0.05)
    n_epochs = 30
    n_annealing = 0.8 * n_epochs * len(pairs)
    step = 0
    for _ in range(n_epochs):
        for left, right, affinity in pairs:
            step += 1
            # annealing, as PRCut(annealing=0.8): the hardness part of the bound grows
            # from 0.01 to 1, so the partition grows out of the graph's smoothest
            # directions instead of freezing in the first one met
            hardness = min(1.0, 0.01 ** (1.0 - step / n_annealing))
            proba = torch.softmax(head(x[torch.cat([left, right])]), dim=1)
            loss = criterion(proba[:len(left)], proba[len(left):], affinity,
                             hardness=hardness)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert adjusted_rand_score(y, head(x).argmax(1).numpy()) >= min_ari


@CUDA
def test_batch_pairs_on_cuda_are_the_graph_blocks():
    X, _ = make_blobs(200, centers=3, random_state=0)
    graph = _knn_graph(X)
    pairs = PRCutBatchPairs(graph, 64, generator=torch.Generator("cuda").manual_seed(0))
    for left, right, affinity in pairs:
        assert left.is_cuda and affinity.is_cuda
        expected = graph[left.cpu().numpy()][:, right.cpu().numpy()].toarray()
        np.testing.assert_array_equal(affinity.to_dense().cpu().numpy(), expected)


@CUDA
@pytest.mark.parametrize("layout", ["dense", "coo", "csr"])
def test_prcut_loss_on_cuda_equals_the_cpu(layout):
    P, Q, W = _pair(11, n_left=64, n_right=48)
    results = []
    for device in ("cpu", "cuda"):
        # leaves on each device (P.to('cuda') of a tensor that requires grad is not one)
        p, q = (T.detach().to(device).requires_grad_(True) for T in (P, Q))
        criterion = PRCutLoss(3, dtype=torch.float64).to(device)
        loss = criterion(p, q, _layouts(W.to(device))[layout])
        loss.backward()
        results.append([t.detach().cpu() for t in (loss, p.grad, q.grad, criterion.p_bar)])
    for got, expected in zip(results[1], results[0]):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


@CUDA
def test_a_prcut_loss_step_replays_in_a_cuda_graph():
    """No host synchronisation in the step: it is captured, and P-bar keeps moving."""
    graph = _knn_graph(make_blobs(512, centers=4, random_state=0)[0])
    pairs = PRCutBatchPairs(graph, 128, device="cuda",
                            generator=torch.Generator("cuda").manual_seed(0))
    x = torch.randn(512, 2, device="cuda")
    head = nn.Linear(2, 4).cuda()
    criterion = PRCutLoss(4).cuda()
    optimizer = torch.optim.Adam(head.parameters(), lr=0.01, capturable=True)
    left, right, affinity = next(iter(pairs))
    static = [left.clone(), right.clone(), affinity._indices().clone(),
              affinity._values().clone()]

    def step():
        block = torch.sparse_coo_tensor(static[2], static[3], affinity.shape,
                                        check_invariants=False)
        proba = torch.softmax(head(x[torch.cat(static[:2])]), 1)
        loss = criterion(proba[:128], proba[128:], block)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        static_loss = step()
    before = criterion.p_bar.clone()
    for left, right, affinity in pairs:  # padded blocks: the same shapes every step
        for buffer, value in zip(static, (left, right, affinity._indices(),
                                          affinity._values())):
            buffer.copy_(value)
        captured.replay()
    assert torch.isfinite(static_loss) and not torch.equal(criterion.p_bar, before)
