"""
=====================================================
Basins of attraction of ClAM versus Voronoi partition
=====================================================

ClAM assigns a point to the prototype it ends next to after ``n_steps`` steps of
the associative-memory dynamics::

    x <- x + alpha * sum_mu (rho_mu - x) softmax_mu(-beta ||rho_mu - x||^2)

Every point therefore belongs to the basin of attraction of one prototype. For a
large inverse temperature ``beta`` only the nearest prototype pulls, and the basins
are the Voronoi cells of k-means. For a small ``beta`` the prototypes attract
collectively: a point can be pulled away from its nearest prototype by two others,
and the boundaries become curved (figure 4 of Saha et al., 2023).

We fix five prototypes (``init`` given, ``max_iter=0``: no training) and colour the
plane by basin for several beta; dashed lines are the Voronoi boundaries. ClAM reads
a float ``beta`` in units of the data it is fitted on, centred and divided by their
root mean squared deviation (here the five prototypes themselves); ``beta_`` is the
inverse temperature in the units of the plane. With a small beta some prototypes
keep no basin around the fitted points, and ClAM warns that it found fewer clusters.
"""

# %%
# Fixed prototypes, a grid of starting points
# -------------------------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np

from skdiffclust.clam import ClAM

prototypes = np.array([[-2.0, 0.0], [-0.6, 0.3], [0.6, -0.4], [2.0, 0.0], [0.2, 1.8]])
ticks = np.linspace(-3.5, 3.5, 200)
grid = np.stack(np.meshgrid(ticks, ticks), -1).reshape(-1, 2)
voronoi = ((grid[:, None, :] - prototypes[None]) ** 2).sum(-1).argmin(1)


def basins(beta):
    """Index (into ``prototypes``) of the basin of each grid point, and beta_."""
    clam = ClAM(len(prototypes), beta=beta, init=prototypes, max_iter=0, n_steps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fewer clusters at small beta
        clam.fit(prototypes)
    # cluster_centers_ lists the prototypes in label order: map back to our order
    order = ((clam.cluster_centers_[:, None] - prototypes[None]) ** 2).sum(-1).argmin(1)
    return order[clam.predict(grid)], clam.beta_


# %%
# Basins for increasing beta
# --------------------------
betas = [0.05, 0.2, 1.0, 10.0]
fig, axes = plt.subplots(1, len(betas), figsize=(4 * len(betas), 4), sharey=True)
for ax, beta in zip(axes, betas):
    labels, beta_plane = basins(beta)
    agreement = (labels == voronoi).mean()
    print(f"beta={beta:>5} (beta_={beta_plane:.3g} on the plane): {agreement:.1%} of the "
          "plane in the Voronoi cell of its basin")
    ax.imshow(labels.reshape(200, 200), origin="lower", cmap="Pastel1", vmin=0, vmax=8,
              extent=(ticks[0], ticks[-1], ticks[0], ticks[-1]), interpolation="nearest")
    ax.contour(ticks, ticks, voronoi.reshape(200, 200), levels=np.arange(0.5, 5),
               colors="k", linestyles="dashed", linewidths=0.8)
    ax.scatter(prototypes[:, 0], prototypes[:, 1], c="black", s=30)
    ax.set_title(f"beta = {beta} ({agreement:.0%} Voronoi)")
fig.tight_layout()
plt.show()
