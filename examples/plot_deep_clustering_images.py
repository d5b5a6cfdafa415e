"""
=============================================
Deep clustering of images, without any labels
=============================================

:class:`~skdiffclust.DeepImageClustering` trains a small convolutional
network to sort images into clusters from the images alone: it starts from
spectral clustering of a nearest-neighbour graph of the images' gradient
histograms, then learns a partition that keeps each image with its graph
neighbours and with randomly moved views of itself (PRCut's bound of the ratio
cut on these pairs), on several heads of which it keeps the one of lowest
objective. Nothing is tuned to the image set:
the same defaults cluster MNIST, Fashion-MNIST and scikit-learn's 8 x 8 digits
(:ref:`deep_clustering`).

The example clusters 4,000 MNIST training images, then predicts the clusters of
1,000 images it has not seen with the trained network. It takes about a minute
on two CPU cores.

MNIST is read by :func:`~skdiffclust.datasets.load_mnist` from its original IDX
files, in the folder ``mnist/`` of the data folder that the environment variable
``SKDIFFCLUST_DATA_HOME`` names (else ``~/skdiffclust_data``); nothing is
downloaded. Without the files the example stops at once with a message that
says where to get them.
"""

# %%
# The images
# ----------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score

from skdiffclust.datasets import load_mnist
from skdiffclust import DeepImageClustering
from skdiffclust.metrics import clustering_accuracy

mnist = load_mnist(kind="mnist", subset="train")
images = mnist.images[:5_000] / np.float32(255)  # (n, 28, 28), float32 in [0, 1]
digits = mnist.target[:5_000]
n_train = 4_000
train, held_out = slice(0, n_train), slice(n_train, None)
print(f"MNIST: {n_train} training images of {images.shape[1]} x {images.shape[2]} "
      f"pixels, {len(images) - n_train} held out")

# %%
# Fit and predict
# ---------------
# ``random_state`` seeds everything (the graph's features, the start, the
# network's weights, the batches and the random views): the same seed gives the
# same clusters in any process.
model = DeepImageClustering(n_clusters=10, max_iter=15, random_state=0)
with warnings.catch_warnings():
    # 15 epochs are a time budget for the documentation
    warnings.simplefilter("ignore", ConvergenceWarning)
    model.fit(images[train])
predicted = model.predict(images[held_out])

kmeans = KMeans(10, n_init=10, random_state=0).fit(images[train].reshape(n_train, -1))
print(f"{'':<34} {'accuracy':>8} {'NMI':>6}")
for name, truth, found in (
        ("k-means on the pixels", digits[train], kmeans.labels_),
        ("spectral start (the graph)", digits[train], model.start_labels_),
        ("DeepImageClustering", digits[train], model.labels_),
        ("  held-out images (predict)", digits[held_out], predicted)):
    print(f"{name:<34} {clustering_accuracy(truth, found):8.3f} "
          f"{normalized_mutual_info_score(truth, found):6.3f}")

# %%
# A few images of each cluster
# ----------------------------
# Each row is a cluster, its most confident training images first, its size at
# the left; the last column shows its least confident member.
n_shown = 8
confidence = model.predict_proba(images[train]).max(axis=1)
clusters = np.unique(model.labels_)
fig, axes = plt.subplots(len(clusters), n_shown + 1,
                         figsize=((n_shown + 1) * 0.75, len(clusters) * 0.75))
for row, cluster in zip(axes, clusters):
    members = np.flatnonzero(model.labels_ == cluster)
    order = members[np.argsort(-confidence[members])]
    for ax in row:
        ax.set_axis_off()
    for ax, index in zip(row, [*order[:n_shown], order[-1]]):
        ax.imshow(images[index], cmap="gray_r")
    row[0].text(-0.3, 0.5, str(members.size), transform=row[0].transAxes, ha="right",
                va="center", fontsize=8)
fig.suptitle("DeepImageClustering on MNIST: clusters, most confident first")
fig.subplots_adjust(left=0.08, wspace=0.05, hspace=0.05)

# %%
# The learning curve
# ------------------
# The objective of the kept head in each epoch of the clustering phase: PRCut's
# bound on the pairs (image, neighbour or another view of itself), plus the
# balance term. It falls quickly once the network has learnt the start.
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(np.arange(1, model.n_iter_ + 1), model.loss_curve_)
ax.set_xlabel("epoch")
ax.set_ylabel("objective (mean over the epoch's steps)")
ax.set_title(f"head {model.head_} of {model.n_heads}, {model.n_iter_} epochs")
fig.tight_layout()
plt.show()
