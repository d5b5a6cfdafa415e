"""
==============================================================
Semi-supervised digits: few labels, withheld classes, transfer
==============================================================

The semi-supervised experiment of Stewart et al. (2023, section 4.2) on
scikit-learn's digits. A network embeds 1,200 training images; a quarter of them
are labelled, and the labels of three digits (0, 1, 2) are withheld entirely.
Training with the partial Fenchel-Young loss uses the labelled *and* the
unlabelled images of each batch. We compare with the same network trained with a
cross-entropy head on the labelled images only:

* clustering error on held-out images, in batches of 64 as in the paper (the
  fraction of pairs whose same-cluster status is wrong);
* a linear probe: logistic regression on the frozen embeddings, fitted on a
  hold-out set with every class, scored on the test images.
"""

# %%
# Data and partial labels
# -----------------------
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import train_test_split

from skdiffclust import SpanningForestClustering

X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=1200, random_state=0,
                                                    stratify=y)
X_probe, X_test, y_probe, y_test = train_test_split(X_rest, y_rest, train_size=300,
                                                    random_state=0, stratify=y_rest)
rng = np.random.default_rng(0)
withheld = [0, 1, 2]
labelled = (rng.random(len(y_train)) < 0.25) & ~np.isin(y_train, withheld)
partial = np.where(labelled, y_train, -1)
print(f"{labelled.sum()} labelled training images, none of digits {withheld}")

# %%
# Learning through clustering
# ---------------------------
# 30 perturbed forests per batch (the default is 100): enough for this
# embedding, at a third of the cost
model = SpanningForestClustering(
    n_clusters=10, embedding="mlp", hidden_layer_sizes=(128,), n_components=16,
    max_iter=60, learning_rate=3e-3, n_perturbations=30, random_state=0,
).fit(X_train, partial_labels=partial)

# %%
# Baseline: the same network with a cross-entropy head, on the labelled images
# ----------------------------------------------------------------------------
generator = torch.Generator().manual_seed(0)
with torch.random.fork_rng():  # seed the initial weights without touching torch's seed
    torch.manual_seed(0)
    backbone = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                   torch.nn.Linear(128, 16))
    head = torch.nn.Linear(16, 10)
optimizer = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=3e-3)
X_lab = torch.as_tensor(X_train[labelled])
y_lab = torch.as_tensor(y_train[labelled])
for epoch in range(60):
    for batch in torch.randperm(len(y_lab), generator=generator).split(64):
        loss = torch.nn.functional.cross_entropy(head(backbone(X_lab[batch])), y_lab[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def baseline_embed(images):
    with torch.no_grad():
        return backbone(torch.as_tensor(images)).numpy()


# %%
# Clustering error on held-out batches, and a linear probe
# --------------------------------------------------------
def batch_clustering(embedded, labels, batch_size=64, seed=1):
    order = np.random.default_rng(seed).permutation(len(labels))
    errors, scores = [], []
    for start in range(0, len(order) - batch_size + 1, batch_size):
        batch = order[start : start + batch_size]
        k = len(np.unique(labels[batch]))
        found = SpanningForestClustering(n_clusters=k).fit(embedded[batch]).labels_
        same_found = found[:, None] == found[None, :]
        same_true = labels[batch][:, None] == labels[batch][None, :]
        errors.append(np.mean(same_found != same_true))
        scores.append(adjusted_rand_score(labels[batch], found))
    return np.mean(errors), np.mean(scores)


def probe_accuracy(embed):
    probe = LogisticRegression(max_iter=2000).fit(embed(X_probe), y_probe)
    return probe.score(embed(X_test), y_test)


results = {
    "partial Fenchel-Young (ours)": (
        model.transform, *batch_clustering(model.transform(X_test), y_test)),
    "cross-entropy baseline": (baseline_embed, *batch_clustering(baseline_embed(X_test), y_test)),
}
for name, (embed, error, ari) in results.items():
    print(f"{name:30s} clustering error {error:.3f}  batch ARI {ari:.2f}  "
          f"linear probe accuracy {probe_accuracy(embed):.3f}")
print(f"held-out images assigned to the learned clusters: ARI = "
      f"{adjusted_rand_score(y_test, model.predict(X_test)):.2f}")

# %%
# The learned embedding of the test images (first two dimensions of a PCA)
# ------------------------------------------------------------------------
from sklearn.decomposition import PCA  # noqa: E402

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
for ax, (name, (embed, error, _)) in zip(axes, results.items()):
    points = PCA(n_components=2).fit_transform(embed(X_test))
    scatter = ax.scatter(points[:, 0], points[:, 1], c=y_test, cmap="tab10", s=8)
    ax.set_title(f"{name}\nclustering error {error:.3f}")
    ax.set_xticks([])
    ax.set_yticks([])
fig.colorbar(scatter, ax=axes, label="digit")
plt.show()
