"""PRCut takes the zero cuts its graph offers, whatever the sizes of the clusters."""

import warnings

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from skdiffclust import PRCut
from skdiffclust.datasets import make_graph_case
from skdiffclust.metrics import ratio_cut

# expected: these graphs have several components by design, which scikit-learn's
# spectral embedding (the reference) warns of
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:Graph is not fully connected:UserWarning"),
]


def _components(model):
    return connected_components(model.affinity_matrix_, directed=False)[1]


def _same_partition(a, b):
    return adjusted_rand_score(a, b) == 1.0


@pytest.mark.parametrize("random_state", [0, 1])
def test_exactly_k_components_are_returned_as_they_are(random_state):
    # 10:3:1, well apart: the balance term used to cut the largest group in two
    X, y, k = make_graph_case("unequal", random_state=random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about
        model = PRCut(n_clusters=k, random_state=0, device="cpu").fit(X)
    components = _components(model)
    assert components.max() + 1 == k
    assert _same_partition(model.labels_, components)
    assert ratio_cut(model.affinity_matrix_, model.labels_) == 0.0
    assert model.n_iter_ == 0 and model.loss_curve_.size == 0  # nothing to train
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_the_components_whatever_the_balance_weight():
    X, _, k = make_graph_case("unequal", random_state=0)
    model = PRCut(n_clusters=k, balance=100.0, random_state=0, device="cpu").fit(X)
    assert _same_partition(model.labels_, _components(model))


def test_more_components_than_clusters_never_cut_through_one():
    X, y, _ = make_graph_case("unequal", random_state=0)
    # a fourth group far away: 4 components for 3 clusters
    X = np.vstack([X, np.random.default_rng(0).normal(size=(50, 2)) + [40.0, 40.0]])
    with pytest.warns(UserWarning, match="4 connected components for n_clusters=3"):
        model = PRCut(n_clusters=3, random_state=0, device="cpu").fit(X)
    components = _components(model)
    assert components.max() + 1 == 4
    for component in range(4):  # each component in one cluster
        assert np.unique(model.labels_[components == component]).size == 1
    assert model.n_clusters_ == 3
    assert ratio_cut(model.affinity_matrix_, model.labels_) == 0.0


def test_the_papers_objective_stays_reachable():
    X, _, k = make_graph_case("unequal", random_state=0)
    with pytest.warns(UserWarning, match="3 connected components"):  # the paper's
        model = PRCut(n_clusters=k, balance=100.0, init="random", keep_components=False,
                      random_state=0, device="cpu").fit(X)
    # the balance term cuts through the largest component to even out the sizes
    components = _components(model)
    assert any(np.unique(model.labels_[components == c]).size > 1 for c in range(k))
    # it trained (the epochs' count itself follows a stochastic trajectory and the
    # stopping rule also watches the samples' moves, which the model does not keep):
    # one objective per epoch, stopped by its rule before max_iter ran out
    assert 0 < model.n_iter_ == model.loss_curve_.size < model.max_iter


@pytest.mark.parametrize("case", ["unequal", "bridge", "rings", "fewer_components"])
def test_generated_cases_at_spectral_clusterings_level(case):
    """At least SpectralClustering's ARI on the same 10-NN graph, minus 0.01."""
    aris, spectral_aris = [], []
    for random_state in (0, 1, 2):
        X, y, k = make_graph_case(case, random_state=random_state)
        model = PRCut(n_clusters=k, random_state=0, device="cpu").fit(X)
        spectral = SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=10,
                                      assign_labels="cluster_qr", random_state=0).fit(X)
        aris.append(adjusted_rand_score(y, model.labels_))
        spectral_aris.append(adjusted_rand_score(y, spectral.labels_))
    assert np.mean(aris) >= np.mean(spectral_aris) - 0.01, (aris, spectral_aris)
    assert min(aris) >= 0.97
