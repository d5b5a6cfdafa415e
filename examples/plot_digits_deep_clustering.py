"""
==========================================================
Deep clustering of digit images: one CNN, three objectives
==========================================================

The 1,797 handwritten digits of scikit-learn are 8 x 8 images. A small
convolutional network (two convolutions of 8 and 16 channels, a hidden layer of
32 units) maps each image to 10 cluster logits, and is trained, without labels,
three ways:

* ``PRCut(module=cnn)``: the estimator trains a copy of the network on the ratio
  cut of the 10-nearest-neighbour graph of the pixels (fitted first to spectral
  clustering's partition of that graph, then trained on PRCut's bound);
* :func:`skdiffclust.torch.gemini_loss` in a plain torch loop: the network
  maximises the MMD one-vs-one GEMINI of each batch, whose kernel is the RBF
  kernel of the pixels;
* :class:`skdiffclust.torch.ClAMLayer` on a learned embedding: the 32 hidden
  units of the network PRCut trained (frozen), clustered by an associative
  memory trained with :func:`skdiffclust.torch.clam_loss`. A learned latent space
  is where the ClAM paper proposes to take the method next, and the embedding
  PRCut trained is one at hand; PCA of the pixels would give it nothing the
  pixels do not. Its result therefore builds on PRCut's: it is not an
  independent third method.

KMeans and SpectralClustering on the pixels are the references. Every network
is initialised from a local :class:`torch.Generator`, with one seed fixed in
advance (0); torch's global generator is never seeded. It is one of the
gallery's longer examples: a minute or two on two CPU cores.
"""

# %%
# The data and the network
# ------------------------
# The network reads the rows of X as given (PRCut standardises the features of
# its built-in network only), so the pixels are scaled to [0, 1] first; the
# network's first layer reshapes each row into a one-channel 8 x 8 image.
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.cluster import KMeans, SpectralClustering, kmeans_plusplus
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from torch import nn

from skdiffclust.metrics import clustering_accuracy
from skdiffclust.prcut import PRCut
from skdiffclust.torch import ClAMLayer, clam_loss, gemini_loss

digits = load_digits()
X = (digits.data / 16.0).astype(np.float32)
y = digits.target
x = torch.as_tensor(X)
SEED = 0
# batches of a few hundred small images: one thread is fastest (with more, torch's
# threads spend the step waiting on each other); restored at the end
n_threads = torch.get_num_threads()
torch.set_num_threads(1)


def make_cnn(seed):
    """The CNN, initialised as torch initialises its layers, from a local generator."""
    cnn = nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),                                   # rows -> images
        nn.Conv2d(1, 8, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),    # 8 x 4 x 4
        nn.Conv2d(8, 16, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),   # 16 x 2 x 2
        nn.Flatten(), nn.Linear(64, 32), nn.GELU(),                   # the embedding
        nn.Linear(32, 10),                                            # 10 cluster logits
    )
    generator = torch.Generator().manual_seed(seed)
    for layer in cnn:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.weight[0].numel())
            nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return cnn


labels, seconds = {}, {}

# %%
# 1. PRCut trains the network
# ---------------------------
# The estimator deep-copies the module and trains the copy, ``module_``; the
# network passed in is left as it was.
start = time.perf_counter()
prcut = PRCut(n_clusters=10, module=make_cnn(SEED), random_state=SEED).fit(X)
seconds["PRCut(module=cnn)"] = time.perf_counter() - start
labels["PRCut(module=cnn)"] = prcut.labels_

# %%
# 2. The GEMINI in a plain torch loop
# -----------------------------------
# The MMD one-vs-one GEMINI of each batch of 256 images, with the RBF kernel that
# SparseGEMINI uses by default (``gamma`` one over the number of pixels times
# their mean variance), 50 epochs of Adam.
gamma = 1.0 / (X.shape[1] * X.var(axis=0).mean())
cnn = make_cnn(SEED)
generator = torch.Generator().manual_seed(SEED)
optimizer = torch.optim.Adam(cnn.parameters(), lr=3e-3)
batch_size = 256
start = time.perf_counter()
for epoch in range(50):
    order = torch.randperm(len(x), generator=generator)
    for batch in order[: len(x) // batch_size * batch_size].view(-1, batch_size):
        kernel = torch.exp(-gamma * torch.cdist(x[batch], x[batch]) ** 2)
        loss = gemini_loss(torch.softmax(cnn(x[batch]), dim=1), kernel, gemini="mmd_ovo")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
with torch.no_grad():
    labels["gemini_loss, torch loop"] = cnn.eval()(x).argmax(1).numpy()
seconds["gemini_loss, torch loop"] = time.perf_counter() - start

# %%
# 3. ClAM in the embedding PRCut learned
# --------------------------------------
# All layers of ``prcut.module_`` but the last give a 32-dimensional embedding.
# It is centred and divided by one global scale, as the ClAM estimator does with
# its input, so that ``beta=1`` (the layer's default) is in the units of
# standardised features. The prototypes start at k-means++ seeds; the memory is
# trained by masked pattern completion (10 epochs, batches of 64).
with torch.no_grad():
    z = prcut.module_[:-1](x)
z = (z - z.mean(0)) / z.std()
start = time.perf_counter()
layer = ClAMLayer(10, z.shape[1], beta=1.0, n_steps=10)
prototypes, _ = kmeans_plusplus(z.numpy(), 10, random_state=SEED)
with torch.no_grad():
    layer.prototypes.copy_(torch.as_tensor(prototypes))
    layer.fill.copy_(z.mean(0))
optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
for epoch in range(10):
    for batch in torch.randperm(len(z), generator=generator)[: len(z) // 64 * 64].view(-1, 64):
        loss = clam_loss(layer, z[batch], mask_prob=0.15, generator=generator)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
labels["ClAMLayer on PRCut's embedding"] = layer.predict(z).numpy()
seconds["ClAMLayer on PRCut's embedding"] = time.perf_counter() - start

# %%
# The references on the pixels
# ----------------------------
references = {
    "KMeans": KMeans(n_clusters=10, n_init=10, random_state=SEED),
    "SpectralClustering": SpectralClustering(
        n_clusters=10, affinity="nearest_neighbors", n_neighbors=10, random_state=SEED),
}
for name, model in references.items():
    start = time.perf_counter()
    labels[name] = model.fit(X).labels_
    seconds[name] = time.perf_counter() - start

# %%
# Scores
# ------
# Clustering accuracy (the best one-to-one matching of clusters to digits), NMI
# and ARI against the digits, and the fit time (ClAM's excludes the PRCut fit
# that trained its embedding). PRCut's network and spectral clustering both cut
# the 10-nearest-neighbour graph of the pixels; the network, started from a
# spectral partition, ends well above spectral clustering's. The graph, not the
# network, bounds PRCut's accuracy: its built-in MLP on the same graph ends with
# about the same partition (``benchmarks/bench_torch_api.py --only digits``).
# The GEMINI trains the same network from the same start on another objective.
results = {
    name: (clustering_accuracy(y, found), normalized_mutual_info_score(y, found),
           adjusted_rand_score(y, found), seconds[name])
    for name, found in labels.items()
}
print(f"{'method':<32} {'ACC':>6} {'NMI':>6} {'ARI':>6} {'fit time':>9}")
for name, (acc, nmi, ari, fit_time) in results.items():
    print(f"{name:<32} {acc:6.3f} {nmi:6.3f} {ari:6.3f} {fit_time:8.2f}s")

fig, (ax_scores, ax_time) = plt.subplots(1, 2, figsize=(12, 4.5),
                                         gridspec_kw={"width_ratios": [2, 1]})
names = list(results)
width = 0.8 / 3
for i, metric in enumerate(["ACC", "NMI", "ARI"]):
    ax_scores.bar(np.arange(len(names)) + (i - 1) * width,
                  [results[name][i] for name in names], width, label=metric)
ax_scores.set_xticks(np.arange(len(names)), [name.replace(", ", ",\n").replace(" on ", "\non ")
                                             for name in names], fontsize=8)
ax_scores.set(ylim=(0, 1), title="agreement with the digits")
ax_scores.legend(loc="lower right")
ax_time.barh(names, [results[name][3] for name in names], color="tab:gray")
ax_time.set(xscale="log", xlabel="seconds", title="fit time")
ax_time.invert_yaxis()
ax_time.tick_params(axis="y", labelsize=8)
fig.tight_layout()

# %%
# What PRCut's clusters look like
# -------------------------------
# The mean image of each cluster of ``PRCut(module=cnn)``, with its size.
fig, axes = plt.subplots(1, 10, figsize=(12, 1.8))
for cluster, ax in enumerate(axes):
    members = X[prcut.labels_ == cluster]
    ax.imshow(members.mean(0).reshape(8, 8), cmap="gray_r")
    ax.set_title(f"{len(members)}", fontsize=9)
    ax.axis("off")
fig.suptitle("PRCut(module=cnn): mean image of each cluster (and its size)")
plt.show()
torch.set_num_threads(n_threads)
