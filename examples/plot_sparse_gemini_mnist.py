"""
===================================================
Sparse GEMINI on MNIST: which pixels does it keep?
===================================================

Ohl et al. (2024, section 5.4, figure 3) cluster MNIST digits with Sparse GEMINI
and show that the pixels the group-lasso path keeps "concentrate precisely on the
good location of the digits". This example draws the same picture: the pixels the
selected model keeps, as a 28 x 28 mask over the mean image, with
:class:`~skdiffclust.inspection.FeatureMaskDisplay`.

It runs a light version of the paper's experiment (under a minute): 2,000
images and a 64-unit MLP (the paper: 12,000 images, two hidden
layers of 1,200 units; ``python benchmarks/bench_mnist.py --only gemini-path``
runs that, see :doc:`/user_guide/mnist`).

MNIST is read by :func:`~skdiffclust.datasets.load_mnist` from its original IDX
files, in the folder ``mnist/`` of the data folder that the environment variable
``SKDIFFCLUST_DATA_HOME`` names (else ``~/skdiffclust_data``); nothing is
downloaded. Without the files the example stops at once with a message that
says where to get them.
"""

# %%
# The data
# --------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SparseGEMINI
from skdiffclust.datasets import load_mnist
from skdiffclust.inspection import FeatureMaskDisplay, GeminiPathDisplay

X, y = load_mnist(kind="mnist", subset="train", return_X_y=True)
X, y = X[:2000] / np.float32(255), y[:2000]  # pixels in [0, 1], float32
shape = (28, 28)
print(f"{X.shape[0]} images of {shape[0]} x {shape[1]} pixels")

# %%
# The path
# --------
# The dense fit first, then proximal steps at penalties growing by 5% until at
# most 50 pixels remain (the paper stops there too); the estimator keeps the
# sparsest model whose GEMINI stays within 90% of the best. Float32 images train
# in float32.
model = SparseGEMINI(10, hidden_layer_sizes=(64,), dropout=0.05, lambda_start=10.0,
                     n_features_stop=50, random_state=0)
path = model.path(X)
print(f"selected model: {int(model.get_support().sum())} pixels, "
      f"{model.n_clusters_} clusters, ARI {adjusted_rand_score(y, model.labels_):.2f}")

# %%
# Nothing leaves for a while, then most pixels leave over a few steps: the
# GEMINI holds until the pixels that carry the digits' shapes start to go.
GeminiPathDisplay.from_estimator(model)
plt.show()

# %%
# The selected pixels
# -------------------
# Coloured by importance (the norm of each pixel's skip weights per standard
# deviation), over the mean image in grey: the pixels sit where the strokes of
# the digits differ, none in the blank border.
FeatureMaskDisplay.from_estimator(model, shape, background=X.mean(axis=0))
plt.show()
