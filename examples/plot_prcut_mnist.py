"""
==========================================================
Images: a CNN on the pixels, the graph from other features
==========================================================

PRCut (Ghriss & Monteleoni, 2025) trains a network to minimise the ratio cut of a
similarity graph. The network and the graph need not see the same thing: the
paper reads raw pixels (or a pretrained embedding) with the network while the
graph comes from a representation whose neighbours are trustworthy. Here a small
convolutional network reads the images as they are, shape ``(n, 1, 28, 28)``,
and the 10-nearest-neighbour graph is built from their first 50 principal
components, passed to :meth:`~skdiffclust.PRCut.fit` as ``graph_input``.

The example clusters 5,000 MNIST training images, then predicts the clusters of
1,000 images it has not seen, through the network alone (no graph is needed to
predict). It takes well under a minute on two CPU cores; the accuracy of the
held-out images' clusters is about that of the training images'.

MNIST is read by :func:`~skdiffclust.datasets.load_mnist` from its original IDX
files, in the folder ``mnist/`` of the data folder that the environment variable
``SKDIFFCLUST_DATA_HOME`` names (else ``~/skdiffclust_data``); nothing is
downloaded. Without the files the example stops at once with a message that
says where to get them.
"""

# %%
# The images and the graph's features
# ------------------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score

from skdiffclust.datasets import load_mnist
from skdiffclust.metrics import clustering_accuracy
from skdiffclust.prcut import PRCut

mnist = load_mnist(kind="mnist", subset="train")
images = mnist.images[:6_000, None] / np.float32(255)  # (n, 1, 28, 28), float32
digits = mnist.target[:6_000]
n_train = 5_000
side = images.shape[-1]
train, held_out = slice(0, n_train), slice(n_train, None)
pca = PCA(50, random_state=0)
features = pca.fit_transform(images[train].reshape(n_train, -1))
print(f"MNIST: {n_train} training images of {side} x {side} pixels, "
      f"{len(images) - n_train} held out; graph features: {pca.n_components_} "
      "principal components")


# %%
# A small CNN on the pixels
# -------------------------
# Any ``torch.nn.Module`` mapping a batch of samples to ``n_clusters`` logits
# will do; PRCut adds the softmax. Its weights are drawn from a local generator,
# so that the fit is reproducible without seeding torch globally. torch is
# imported here, once the images are loaded: without them the example stops
# before it.
import torch  # noqa: E402
from torch import nn  # noqa: E402


def small_cnn(side, n_clusters=10, seed=0):
    cnn = nn.Sequential(  # strided convolutions: cheap on a CPU
        nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.GELU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GELU(),
        nn.Flatten(), nn.Linear(16 * ((side + 3) // 4) ** 2, n_clusters),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in cnn:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                bound = (6.0 / (layer.weight[0].numel() + layer.weight.shape[0])) ** 0.5
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.zero_()
    return cnn


# 15 epochs are a time budget: the objective is still improving slowly when they
# run out, which a ConvergenceWarning would say
model = PRCut(n_clusters=10, module=small_cnn(side), n_neighbors=10, max_iter=15,
              device="cpu", random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    model.fit(images[train], graph_input=features)

predicted = model.predict(images[held_out])
print(f"{'':<22} {'accuracy':>8} {'NMI':>6}")
for name, truth, found in (("training images", digits[train], model.labels_),
                           ("held-out (predict)", digits[held_out], predicted)):
    print(f"{name:<22} {clustering_accuracy(truth, found):8.3f} "
          f"{normalized_mutual_info_score(truth, found):6.3f}")
print(f"{model.n_iter_} epochs")

# %%
# A few images of each cluster
# ----------------------------
# Each row is a cluster, its most confident training images first; the cluster
# sizes are at the left.
n_shown = 8
proba = model.predict_proba(images[train]).max(axis=1)
fig, axes = plt.subplots(model.n_clusters_, n_shown,
                         figsize=(n_shown * 0.8, model.n_clusters_ * 0.8))
for cluster, row in enumerate(axes):
    members = np.flatnonzero(model.labels_ == cluster)
    shown = members[np.argsort(-proba[members])][:n_shown]
    for ax in row:
        ax.set_axis_off()
    for ax, index in zip(row, shown):
        ax.imshow(images[index, 0], cmap="gray_r")
    row[0].text(-0.3, 0.5, str(members.size),
                transform=row[0].transAxes, ha="right", va="center", fontsize=8)
fig.suptitle("PRCut: a CNN on MNIST's pixels, the graph from PCA features")
fig.subplots_adjust(left=0.08, wspace=0.05, hspace=0.05)
plt.show()
