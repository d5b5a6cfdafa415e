"""PRCut.partial_fit beyond the contract every streaming estimator shares
(test_partial_fit.py): its NumPy state, the user's module, the frozen scaling."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust import PRCut

torch = pytest.importorskip("torch")
nn = torch.nn

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(3000, n_features=5, centers=3, random_state=2)


def _chunks(n, n_chunks=3):
    return np.array_split(np.arange(n), n_chunks)


def _torch_objects(value, path="_stream"):
    """Paths of the torch tensors and modules inside a stream's state."""
    if isinstance(value, (torch.Tensor, nn.Module)):
        return [path]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        items = vars(value).items()
    else:
        return []
    return [found for key, item in items for found in _torch_objects(item, f"{path}.{key}")]


def test_the_stream_state_holds_no_torch_object(blobs):
    X, _ = blobs
    model = PRCut(3, random_state=0, device="cpu")
    for chunk in _chunks(len(X)):
        model.partial_fit(X[chunk])
    assert _torch_objects(model._stream) == []
    assert not any(isinstance(v, torch.Tensor) for v in vars(model).values())
    assert model._stream.scaling.metric is None  # the first chunk's data are not kept


def test_steps_are_batch_pairs_of_each_chunk(blobs):
    X, _ = blobs
    model = PRCut(3, batch_size=256, random_state=0, device="cpu")
    model.partial_fit(X[:1000]).partial_fit(X[1000:1600])
    assert model.n_steps_ == 1000 // 256 + 600 // 256
    assert model.n_samples_seen_ == 1600 and model.n_iter_ == 2


# the chunk on another scale lands in one cluster, with a warning
@pytest.mark.filterwarnings("ignore:PRCut found 1 non-empty clusters:UserWarning")
def test_later_chunks_are_seen_in_the_first_chunks_units(blobs):
    X, _ = blobs
    model = PRCut(3, random_state=0, device="cpu").partial_fit(X[:1500])
    scaling = model._stream.scaling
    mean, std = scaling.mean.copy(), scaling.std.copy()
    model.partial_fit(X[1500:] * 3.0 + 50.0)  # another scale: not re-learnt
    np.testing.assert_array_equal(model._stream.scaling.mean, mean)
    np.testing.assert_array_equal(model._stream.scaling.std, std)


def test_a_users_module_streams_and_survives_pickling(blobs):
    X, y = blobs
    X = (X - X.mean(0)) / X.std(0)
    module = nn.Sequential(nn.LazyLinear(16), nn.BatchNorm1d(16), nn.ReLU(),
                           nn.Dropout(0.2), nn.Linear(16, 3))
    generator = torch.Generator().manual_seed(0)  # the eager layer, never global
    with torch.no_grad():
        for parameter in module[-1].parameters():
            parameter.uniform_(-0.25, 0.25, generator=generator)
    first = PRCut(3, module=module, random_state=0, device="cpu")
    second = PRCut(3, module=module, random_state=0, device="cpu")
    for i, chunk in enumerate(_chunks(len(X))):
        first.partial_fit(X[chunk])
        second.partial_fit(X[chunk])
        if i == 0:
            second = pickle.loads(pickle.dumps(second))
    np.testing.assert_array_equal(first.predict(X), second.predict(X))
    assert adjusted_rand_score(y, first.predict(X)) > 0.95
    assert _torch_objects(first._stream) == []
    assert module[0].has_uninitialized_params()  # the user's module is never changed
    np.testing.assert_array_equal(first.predict(X[_chunks(len(X))[-1]]), first.labels_)


def _mlp(width):
    return nn.Sequential(nn.Linear(5, width), nn.ReLU(), nn.Linear(width, 3))


@pytest.mark.parametrize("first, then", [(_mlp(8), _mlp(16)), (_mlp(8), None),
                                         (None, _mlp(8))])
def test_a_module_changed_within_a_stream_is_refused_and_the_stream_kept(blobs, first,
                                                                          then):
    # torch's "Error(s) in loading state_dict" before
    X, _ = blobs
    model = PRCut(3, module=first, random_state=0, device="cpu").partial_fit(X[:500])
    labels = model.labels_.copy()
    with pytest.raises(ValueError, match="partial_fit cannot change module"):
        model.set_params(module=then).partial_fit(X[500:1000])
    np.testing.assert_array_equal(model.labels_, labels)
    model.set_params(module=first).partial_fit(X[500:1000])  # the stream goes on


def test_sparse_chunks_cluster_as_dense_ones(blobs):
    X, y = blobs
    X = np.where(np.abs(X) > 1.0, X, 0.0)
    sparse = PRCut(3, random_state=0, device="cpu")
    for chunk in _chunks(len(X)):
        sparse.partial_fit(sp.csr_matrix(X[chunk]))
    assert adjusted_rand_score(y, sparse.predict(sp.csr_matrix(X))) > 0.95


def test_a_precomputed_affinity_is_refused():
    W = sp.random(20, 20, density=0.3, random_state=0)
    with pytest.raises(ValueError, match="precomputed"):
        PRCut(2, affinity="precomputed").partial_fit((W + W.T).tocsr())
