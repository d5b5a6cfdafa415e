"""The cases of ``bench_mnist.py``: what a case returns (:class:`Fit`), the registry
(:data:`CASES`, filled by the :func:`case` decorator in the order of ``--list``),
and the clustering cases: k-means, PRCut (the paper's protocol, its defaults, on
PCA features, with a CNN), deep clustering of images (DeepImageClustering over
seeds, spectral clustering, N2D, ClustPy's DEC and IDEC). The papers' own
experiments are in ``_mnist_paper_cases.py``.

A case is ``function(data) -> Fit`` (``data`` a :class:`_mnist_data.Mnist`), or
None when the package of a peer is missing. The cases run over seeds read
:data:`DEEP_SEEDS` when they run (``bench_mnist.py --seeds`` sets it).
"""

import importlib.util
import os
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skdiffclust.metrics import clustering_accuracy


@dataclass
class Fit:
    """What a case returns: the labels of its training images (and which they are),
    optionally the test images' labels from ``predict``, and extra columns."""

    labels: np.ndarray
    truth: np.ndarray
    test_labels: np.ndarray = None
    test_truth: np.ndarray = None
    extra: dict = field(default_factory=dict)


CASES = {}


def case(name, description):
    """Register ``function(data) -> Fit`` as the case ``name``."""
    def register(function):
        CASES[name] = (description, function)
        return function
    return register


# ---------------------------------------------------------------- peers
@case("kmeans", "KMeans(10, n_init=3) on the 60,000 training images' raw pixels")
def kmeans_pixels(data):
    from sklearn.cluster import KMeans

    model = KMeans(10, n_init=3, random_state=0).fit(data.X_train)
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels)


# ---------------------------------------------------------------- PRCut
# The paper's protocol (Table 2): the 60,000 training images' raw pixels, a k=150
# nearest-neighbour graph on them, ten clusters, the paper's balance weight
# gamma=100 (its Table 5; our balance=100). Our start: spectral clustering of
# the graph's edges reweighted by their shared neighbours (init='spectral_snn'; the graph's own
# spectral partition, at k=150, has ACC 0.585 and NMI 0.650), read off 20
# eigenvectors by k-means (n_eigenvectors=20: ten split the 1s, whose slant spans
# a direction of its own, and merge the 4s with the 9s); Adam at 0.01, 50 epochs
# (the partition settles after about 30).
PRCUT_MNIST = dict(n_neighbors=150, balance=100.0, init="spectral_snn", n_eigenvectors=20,
                   learning_rate=0.01, max_iter=50, random_state=0)


class PhaseTimer:
    """Wall-clock seconds of the graph and of the spectral start inside one fit
    (the training is the rest), by wrapping the two functions that do them; their
    results (the graph, the starting partition) are kept in ``results``."""

    def __init__(self):
        self.seconds = {"graph": 0.0, "start": 0.0}
        self.results = {}

    def _timed(self, phase, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                self.results[phase] = function(*args, **kwargs)
                return self.results[phase]
            finally:
                self.seconds[phase] += time.perf_counter() - start
        return timed

    def __enter__(self):
        from skdiffclust.prcut import _start

        self._restore = [(_start, "build_graph", _start.build_graph),
                         (_start, "spectral_start", _start.spectral_start)]
        _start.build_graph = self._timed("graph", _start.build_graph)
        _start.spectral_start = self._timed("start", _start.spectral_start)
        self.begin = time.perf_counter()
        return self

    def __exit__(self, *exc):
        total = time.perf_counter() - self.begin
        for owner, name, original in self._restore:
            setattr(owner, name, original)
        self.seconds["training"] = total - self.seconds["graph"] - self.seconds["start"]
        self.shares = {phase: s / total for phase, s in self.seconds.items()}

    def columns(self):
        return {f"{phase} %": 100 * share for phase, share in self.shares.items()}


@case("prcut", "PRCut(10, n_neighbors=150, balance=100, init='spectral_snn', "
               "n_eigenvectors=20, learning_rate=0.01, max_iter=50) on the 60,000 "
               "training images' raw pixels (the paper's Table 2)")
def prcut_pixels(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, device=data.device, **PRCUT_MNIST)
    with PhaseTimer() as phases:
        model.fit(data.X_train)
    start = phases.results["start"][1]  # (its graph, spectral clustering's partition)
    extra = {"start ACC": clustering_accuracy(data.train_labels, start),
             "start NMI": normalized_mutual_info_score(data.train_labels, start)}
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels, extra=dict(phases.columns(), **extra,
                                            epochs=model.n_iter_))


@case("prcut-defaults", "PRCut(10) at its defaults on the 60,000 training images' raw "
      "pixels (what a user gets from PRCut(10).fit(X)); test ACC by predict")
def prcut_defaults(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, device=data.device, random_state=0)
    with PhaseTimer() as phases:
        model.fit(data.X_train)
    start = phases.results["start"][1]
    extra = {"start ACC": clustering_accuracy(data.train_labels, start),
             "start NMI": normalized_mutual_info_score(data.train_labels, start),
             "test NMI": normalized_mutual_info_score(data.test_labels,
                                                      model.predict(data.X_test))}
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels, extra=dict(phases.columns(), **extra,
                                            epochs=model.n_iter_))


@case("prcut-10k", "PRCut(10, init='spectral_snn') and SpectralClustering on the graph "
                   "it trains on (the shared-neighbour weights of the 10-NN graph of the "
                   "first 10,000 training images' PCA-50)")
def prcut_10k_pca(data):
    from sklearn.cluster import SpectralClustering

    from skdiffclust.prcut import PRCut

    X, y = pca50(data, 10_000)
    model, seconds = timed_fit(PRCut(10, init="spectral_snn", random_state=0,
                                     device=data.device), X)
    spectral, spectral_seconds = timed_fit(
        SpectralClustering(10, affinity="precomputed", random_state=0),
        model.affinity_matrix_)
    extra = {"Spectral NMI": normalized_mutual_info_score(y, spectral.labels_),
             "Spectral ACC": clustering_accuracy(y, spectral.labels_),
             "PRCut s": seconds, "Spectral s": spectral_seconds,
             "epochs": model.n_iter_}
    return Fit(model.labels_, y, extra=extra)


# The user's network on images (the paper's use of PRCut with a pretrained
# representation, here PCA): the network reads the pixels, the 10-NN graph comes
# from the 50 principal components (``graph_input``); 15 epochs, a time budget.
# The PCA is computed once per run, in the time of the first case that needs it.
PRCUT_PCA_GRAPH = dict(n_neighbors=10, n_eigenvectors=20, max_iter=15, random_state=0)


def pca_features(data):
    from sklearn.decomposition import PCA

    return data.cached("pca50", lambda: PCA(50, random_state=0).fit_transform(data.X_train))


# pca50 apart from pca_features: float32 and of the first n images, what the
# prcut-10k case and the ClAM and GEMINI comparisons fit (pca_features, float64 of
# all, is the graph of the cases above; merging them would change their results)
def pca50(data, n):
    """PCA-50 of the first n training images (fitted on them, seed 0), as a new
    user would make it, with their labels."""
    from sklearn.decomposition import PCA

    features = data.cached(f"pca50-{n}", lambda: PCA(50, random_state=0).fit_transform(
        data.X_train[:n]).astype(np.float32))
    return features, data.train_labels[:n]


GRAPH_IMAGES = 20_000  # the images whose neighbours are counted (an exact search)


def share_of_own_class(features, truth, n_neighbors=10):
    """The share of each point's ``n_neighbors`` nearest neighbours (itself left
    out) that have its label: how pure the kNN graph of the features is."""
    from sklearn.neighbors import NearestNeighbors

    search = NearestNeighbors(n_neighbors=n_neighbors).fit(features)
    neighbours = search.kneighbors(return_distance=False)  # the point itself left out
    return float(np.mean(truth[neighbours] == truth[:, None]))


@case("graph-neighbours", f"The share of each image's 10 nearest neighbours of its class "
      f"among the first {GRAPH_IMAGES:,} training images: DeepImageClustering's graph "
      "features (gradient histograms, PCA-50) against the pixels' PCA-50; labels: "
      "KMeans(10, n_init=3) of the histograms' PCA-50")
def graph_neighbours(data):
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    from skdiffclust.deep._features import graph_features

    images = data.train_images[:GRAPH_IMAGES]
    truth = data.train_labels[:GRAPH_IMAGES]
    channels = images[:, None] if images.ndim == 3 else images  # (n, C, H, W)
    histograms = graph_features(channels, seed=0)
    pixels = PCA(50, random_state=0).fit_transform(images.reshape(len(images), -1))
    extra = {"neighbours in class": share_of_own_class(histograms, truth),
             "pixels neighbours in class": share_of_own_class(pixels, truth)}
    labels = KMeans(10, n_init=3, random_state=0).fit_predict(histograms)
    return Fit(labels, truth, extra=extra)


def timed_fit(estimator, X):
    start = time.perf_counter()
    estimator.fit(X)
    return estimator, time.perf_counter() - start


def small_cnn(n_clusters=10, seed=0):
    """Two strided convolutions and a linear layer on (n, 1, 28, 28) images,
    drawn from a local generator (Glorot-uniform weights, zero biases)."""
    import torch
    from torch import nn

    cnn = nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.GELU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GELU(),
        nn.Flatten(), nn.Linear(16 * 7 * 7, n_clusters),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in cnn:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                bound = (6.0 / (layer.weight[0].numel() + layer.weight.shape[0])) ** 0.5
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.zero_()
    return cnn


@case("prcut-cnn", "PRCut(10, module=small CNN, n_neighbors=10, max_iter=15) on the "
                   "(n, 1, 28, 28) images, the graph from their PCA-50 features")
def prcut_cnn_pca_graph(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, module=small_cnn(), device=data.device, **PRCUT_PCA_GRAPH)
    model.fit(data.train_images[:, None], graph_input=pca_features(data))
    return Fit(model.labels_, data.train_labels, model.predict(data.test_images[:, None]),
               data.test_labels, extra={"epochs": model.n_iter_})


# the CNN's starts and searches: (tag, PRCut's parameters); the first is prcut-cnn's
CNN_STARTS = (("auto approximate", dict(init="auto", neighbors_algorithm="auto")),
              ("spectral approximate", dict(init="spectral", neighbors_algorithm="auto")),
              ("auto exact", dict(init="auto", neighbors_algorithm="exact")),
              ("spectral exact", dict(init="spectral", neighbors_algorithm="exact")),
              ("narrow approximate", dict(init="spectral", n_eigenvectors=None)))


@case("prcut-cnn-inits", "prcut-cnn from each start (init='auto', 'spectral', and the narrow "
                         "start: 'spectral' with n_eigenvectors=None) on the approximate and "
                         "the exact graph (ACC and NMI of each)")
def prcut_cnn_starts(data):
    from skdiffclust.prcut import PRCut

    extra, first = {}, None
    for tag, parameters in CNN_STARTS:
        model = PRCut(10, module=small_cnn(), device=data.device,
                      **{**PRCUT_PCA_GRAPH, **parameters})
        model.fit(data.train_images[:, None], graph_input=pca_features(data))
        extra[f"ACC {tag}"] = clustering_accuracy(data.train_labels, model.labels_)
        extra[f"NMI {tag}"] = normalized_mutual_info_score(data.train_labels, model.labels_)
        print(f"   {tag}: ACC {extra[f'ACC {tag}']:.3f}, NMI {extra[f'NMI {tag}']:.3f}",
              flush=True)
        first = first or model
    return Fit(first.labels_, data.train_labels, first.predict(data.test_images[:, None]),
               data.test_labels, extra=extra)


@case("prcut-mlp-pca", "PRCut(10, n_neighbors=10, max_iter=15), built-in MLP on "
                       "the pixels, the same PCA-50 graph as prcut-cnn")
def prcut_mlp_pca_graph(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, device=data.device, **PRCUT_PCA_GRAPH)
    model.fit(data.X_train, graph_input=pca_features(data))
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels, extra={"epochs": model.n_iter_})


# ---------------------------------------------------------------- deep clustering of images
# DeepImageClustering and its peers on the 60,000 training images of
# whatever --data-dir holds (MNIST, Fashion-MNIST, any set in their layout). The
# recipe is the estimator's defaults, the same on every set; only n_clusters=10
# and both cores (n_jobs=-1) are given. Three seeds: the main columns are their
# means, ``sd`` their standard deviations.
DEEP_SEEDS = (0, 1, 2)
DEEP_SETTINGS = dict(n_clusters=10, n_jobs=-1)
# Published results from pixels, without pretrained models (ACC / NMI; not re-run)
PUBLISHED = (
    ("N2D: autoencoder + UMAP + GMM (McConville et al., ICPR 2020)",
     "0.979 / 0.942", "0.672 / 0.684"),
    ("DynAE (Mrabah et al., Neural Networks 2020)", "0.987 / 0.964", "0.591 / 0.642"),
    ("IIC (Ji et al., ICCV 2019), best head / mean", "0.992 / 0.984 (ACC)", "--"),
    ("DCCS (Zhao et al., 2020)", "0.989 / 0.970", "0.756 / 0.704"),
    ("VMM (PRCut's paper, Ghriss & Monteleoni 2025, Table 3)", "0.960 / 0.907",
     "0.712 / 0.688"),
)


def print_published():
    print("   published, from pixels without pretrained models (ACC / NMI, not re-run):")
    print(f"   {'method':<58} {'MNIST':<20} Fashion-MNIST")
    for method, mnist, fashion in PUBLISHED:
        print(f"   {method:<58} {mnist:<20} {fashion}")


def over_seeds(runs, truth, test_truth):
    """The row of a case run once per seed: means (main columns) and standard
    deviations of ACC, NMI, test ACC and fit seconds, printed seed by seed."""
    scores = {"ACC": [], "NMI": [], "ARI": [], "test ACC": [], "fit s": []}
    for seed, (labels, test_labels, seconds) in zip(DEEP_SEEDS, runs):
        scores["ACC"].append(clustering_accuracy(truth, labels))
        scores["NMI"].append(normalized_mutual_info_score(truth, labels))
        scores["ARI"].append(adjusted_rand_score(truth, labels))
        scores["test ACC"].append(clustering_accuracy(test_truth, test_labels)
                                  if test_labels is not None else np.nan)
        scores["fit s"].append(seconds)
        print(f"   seed {seed}: ACC {scores['ACC'][-1]:.3f}  NMI {scores['NMI'][-1]:.3f}  "
              f"test ACC {scores['test ACC'][-1]:.3f}  fit {seconds:.1f} s", flush=True)
    extra = {}
    for column, values in scores.items():
        extra[column] = float(np.mean(values))
        extra[f"{column} sd"] = float(np.std(values))
    extra["max fit s"] = float(np.max(scores["fit s"]))
    return extra


@case("deep", "DeepImageClustering(10, n_jobs=-1) at its defaults on the 60,000 "
      "training images, random_state 0, 1, 2 (means and sd); test ACC by predict")
def deep_images(data):
    from skdiffclust.deep import DeepImageClustering

    print_published()
    if data.device == "cuda":  # CUDA's start and kernels' loading, as bench_gpu.py
        start = time.perf_counter()
        DeepImageClustering(random_state=0, device="cuda", **DEEP_SETTINGS).fit(
            data.train_images[:2000])
        print(f"   untimed warm-up fit (2,000 images): {time.perf_counter() - start:.1f} s")
    runs, models = [], []
    for seed in DEEP_SEEDS:
        model = DeepImageClustering(random_state=seed, device=data.device, **DEEP_SETTINGS)
        start = time.perf_counter()
        model.fit(data.train_images)
        seconds = time.perf_counter() - start
        runs.append((model.labels_, model.predict(data.test_images), seconds))
        models.append(model)
    extra = over_seeds(runs, data.train_labels, data.test_labels)
    extra["epochs"] = models[0].n_iter_
    extra["start ACC"] = float(np.mean([clustering_accuracy(data.train_labels, m.start_labels_)
                                        for m in models]))
    return Fit(runs[0][0], data.train_labels, runs[0][1], data.test_labels, extra=extra)


@case("spectral", "SpectralClustering(10, affinity='precomputed', assign_labels="
      "'cluster_qr') of the 10-NN graph of the 60,000 training images' PCA-50")
def spectral_pca_graph(data):
    from sklearn.cluster import SpectralClustering

    from skdiffclust._graphcut._graph import knn_affinity

    graph = knn_affinity(pca_features(data), 10)
    model = SpectralClustering(10, affinity="precomputed", assign_labels="cluster_qr",
                               random_state=0).fit(graph)
    return Fit(model.labels_, data.train_labels)


# N2D (McConville et al., 2020): an autoencoder d-500-500-2000-10 (ReLU, MSE, Adam
# 1e-3, batches of 256), UMAP of its code (n_components=10, n_neighbors=20,
# min_dist=0), a GaussianMixture of 10. The paper trains the autoencoder 1,000
# epochs on a GPU; here N2D_EPOCHS, so that the pipeline takes about
# DeepImageClustering's time on the 2-core CPU (``pip install umap-learn``)
N2D_EPOCHS = 8


@case("n2d", f"N2D: autoencoder d-500-500-2000-10 ({N2D_EPOCHS} epochs), UMAP(10, "
      "n_neighbors=20, min_dist=0) of its code, GaussianMixture(10); random_state 0, 1, 2")
def n2d(data):
    if importlib.util.find_spec("umap") is None:
        print("   skipped: umap-learn is not installed (pip install umap-learn)")
        return None
    runs = []
    for seed in DEEP_SEEDS:
        start = time.perf_counter()
        labels, test_labels = _n2d_run(data, seed)
        runs.append((labels, test_labels, time.perf_counter() - start))
    extra = over_seeds(runs, data.train_labels, data.test_labels)
    return Fit(runs[0][0], data.train_labels, runs[0][1], data.test_labels, extra=extra)


def _n2d_run(data, seed):
    """N2D's labels of the training images, and of the test images (their codes
    mapped by the fitted UMAP, then the mixture's prediction)."""
    import torch
    import umap
    from sklearn.mixture import GaussianMixture
    from torch import nn

    from skdiffclust._utils._torch import seeded_global_rng

    X = torch.as_tensor(data.X_train)
    sizes = [X.shape[1], 500, 500, 2000, 10]
    with seeded_global_rng(seed):
        layers = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
        encoder = nn.Sequential(*layers)
        layers = []
        reverse = sizes[::-1]
        for i, (a, b) in enumerate(zip(reverse[:-1], reverse[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(reverse) - 2 else [])
        decoder = nn.Sequential(*layers)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], 1e-3)
    previous = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        for _ in range(N2D_EPOCHS):
            for batch in torch.randperm(len(X), generator=generator).split(256):
                optimizer.zero_grad()
                nn.functional.mse_loss(decoder(encoder(X[batch])), X[batch]).backward()
                optimizer.step()
        with torch.no_grad():
            code = encoder(X).numpy()
            test_code = encoder(torch.as_tensor(data.X_test)).numpy()
    finally:
        torch.set_num_threads(previous)
    mapper = umap.UMAP(n_components=10, n_neighbors=20, min_dist=0.0, random_state=seed)
    embedded = mapper.fit_transform(code)
    mixture = GaussianMixture(10, covariance_type="full", random_state=seed).fit(embedded)
    return mixture.predict(embedded), mixture.predict(mapper.transform(test_code))


# DEC (Xie et al., 2016) and IDEC (Guo et al., 2017) from ClustPy (``pip install
# clustpy``; it needs torchvision, whose wheels must match the installed torch: on
# the project's machine, a venv with ``pip install torch==2.14.1
# torchvision==0.29.1`` (CUDA builds, which run on the CPU), then ``pip install
# clustpy`` and this package; PyPI's torchvision fails beside the CPU torch 2.13):
# the feedforward autoencoder d-500-500-2000-10, pretrained DEC_EPOCHS[0] epochs,
# clustered DEC_EPOCHS[1] (the defaults are 100 and 150: hours on the 2-core CPU)
DEC_EPOCHS = (10, 10)


def _clustpy(name, data):
    try:
        from clustpy import deep
    except Exception as error:  # ImportError, or torchvision's mismatched operators
        print(f"   skipped: ClustPy cannot be imported here ({type(error).__name__}: "
              f"{str(error).splitlines()[0] if str(error) else ''}); pip install clustpy, "
              "with a torchvision built for the installed torch")
        return None
    runs = []
    for seed in DEEP_SEEDS:
        model = getattr(deep, name)(10, pretrain_epochs=DEC_EPOCHS[0],
                                    clustering_epochs=DEC_EPOCHS[1], random_state=seed,
                                    device="cpu")
        start = time.perf_counter()
        model.fit(data.X_train)
        runs.append((model.labels_, model.predict(data.X_test),
                     time.perf_counter() - start))
    extra = over_seeds(runs, data.train_labels, data.test_labels)
    return Fit(runs[0][0], data.train_labels, runs[0][1], data.test_labels, extra=extra)


@case("dec", f"ClustPy's DEC(10), {DEC_EPOCHS[0]} + {DEC_EPOCHS[1]} epochs, where "
      "ClustPy imports; random_state 0, 1, 2")
def dec(data):
    return _clustpy("DEC", data)


@case("idec", f"ClustPy's IDEC(10), {DEC_EPOCHS[0]} + {DEC_EPOCHS[1]} epochs, where "
      "ClustPy imports; random_state 0, 1, 2")
def idec(data):
    return _clustpy("IDEC", data)
