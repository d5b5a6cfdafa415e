"""The approximate kNN search on a torch device: ``_ivf``'s inverted-file index,
held and searched where the data lie (CUDA).

:func:`device_ivf_kneighbors` finds the neighbours ``skdiffclust._ivf`` finds, by
the same index: the same cells (about sqrt(n), k-means of
:data:`~skdiffclust._ivf.KMEANS_ITERATIONS` Lloyd rounds on
:data:`~skdiffclust._ivf.KMEANS_SAMPLES_PER_CELL` sampled rows per cell), and each
row compared with every row of its ``probed_cells`` nearest cells. Only the order
of the work differs, to suit a GPU: where the numba scan walks the rows and
pushes candidates into one heap per row, this one walks the cells. For each cell,
the rows that probe it (gathered once for all cells, by one stable sort of the
(row, probed cell) pairs) are compared with the cell's rows, which lie together
once the rows are sorted by home cell: one ``addmm`` gives the squared distances
up to each query's own norm, ``topk`` the cell's nearest, and a second ``topk``
merges them into each query's nearest so far. A cell's work is a few kernels on
blocks of about n_probe * n / n_cells by n / n_cells entries (32,000 by 1,000 at
n = 1,000,000): about 20 launches per cell, nothing read back by the host inside
the loop (its plan, the cells' and the pairs' boundaries, is copied once).

Measured on an H200 on the blobs ``make_blobs(n, 32, centers=10, cluster_std=6)``,
k=10: at 1,000,000 samples 1.7 s (k-means 0.2 s, the scan 1.4 s; 2.4 GiB at its
peak), recall@10 0.91 as the numba index's, against 24 s for the exact search
on the device; at 200,000 samples 0.44 s, recall@10 0.986.

Probing each row's own nearest cells rather than its cell's nearest cells (one
list per cell, its queries searching the union of its lists) keeps the recall of
the numba index: measured on the same blobs at 200,000 samples, k=10, recall@10
0.986 per row against 0.875 per cell, the rows near a cell's border losing the
neighbours in the cells beyond it.

Everything is float32 on ``device``; the random draws (the k-means sample and
starts, and the restarts of emptied cells) come from a local CPU generator seeded
by ``seed``, so that every device draws the same ones. The k-means' sums are
cumulative float64 sums over the rows sorted by cell (an ``index_add`` on CUDA
adds in the order its threads arrive, which changes the rounding from run to
run). Ties among candidates at equal distances are broken by ``topk``, not by the
row order the numba heaps keep.
"""

import math


from skdiffclust._ivf import KMEANS_ITERATIONS, KMEANS_SAMPLES_PER_CELL, index_plan

# entries of one block of squared distances (float32): 1 GiB; on CUDA at most a
# sixteenth of the free memory (the block, topk's scratch and the gathered rows),
# at least MIN_BLOCK_ENTRIES. The largest cell can hold several times the mean
# number of rows, and be probed by several times the mean number of queries
BLOCK_ENTRIES = 1 << 28
MIN_BLOCK_ENTRIES = 1 << 22


def device_ivf_kneighbors(points, n_neighbors, *, seed, device, n_probe=None):
    """Approximate ``n_neighbors`` nearest other rows of every row of ``points``,
    searched on ``device`` by torch.

    Parameters
    ----------
    points : ndarray of shape (n_samples, n_features), float32, C-contiguous
        The rows (centred: the float32 inner products lose less precision).

    n_neighbors : int
        Neighbours per row.

    seed : int
        Seeds the k-means of the cells.

    device : torch.device or str
        Where the index is built and searched (CUDA; the CPU works too).

    n_probe : int or None, default=None
        Cells probed per row; ``None``: ``skdiffclust._ivf.probed_cells``.

    Returns
    -------
    neighbours : ndarray of shape (n_samples, n_neighbors), int64
        Row numbers, in no particular order; -1 where the probed cells held
        fewer than ``n_neighbors`` other rows.

    Raises
    ------
    ValueError
        For points that are not finite, or so large that their squared distances
        overflow float32 (``skdiffclust._ivf.check_points``), and
        ``n_neighbors`` below 1.
    """
    import torch

    points, n_cells, n_probe = index_plan(points, n_neighbors, n_probe)
    n_neighbors = int(n_neighbors)
    device = torch.device(device)
    generator = torch.Generator().manual_seed(int(seed))
    rows = torch.as_tensor(points).to(device)
    block_entries = _block_entries(device)
    centres = _kmeans(rows, n_cells, generator, block_entries)
    # each row's probed cells, nearest first: the first is its home cell
    probes = _nearest_centres(rows, centres, n_probe, block_entries)
    order = torch.sort(probes[:, 0], stable=True).indices
    rows, probes = rows[order], probes[order]
    found = _scan(rows, _boundaries(probes[:, 0], n_cells), probes, n_neighbors,
                  block_entries)
    del rows, probes
    # back from the sorted rows' numbers to the given rows'
    found = torch.where(found >= 0, order[found.clamp(min=0)], -1)
    neighbours = torch.empty_like(found)
    neighbours[order] = found
    return neighbours.to("cpu").numpy()


def _block_entries(device):
    """Entries of one block of squared distances on ``device``."""
    import torch

    if device.type != "cuda":
        return BLOCK_ENTRIES
    free, _ = torch.cuda.mem_get_info(device)
    return max(MIN_BLOCK_ENTRIES, min(BLOCK_ENTRIES, free // 64))


def _boundaries(labels, n_cells):
    """Where each cell's entries start among ``labels`` sorted, and the end:
    an int64 tensor of ``n_cells + 1`` entries."""
    import torch

    start = torch.zeros(n_cells + 1, dtype=torch.int64, device=labels.device)
    start[1:] = torch.bincount(labels, minlength=n_cells).cumsum(0)
    return start


def _drawn(count, size, generator, device):
    """``size`` distinct numbers of ``range(count)``, drawn on the CPU (the same
    draws on every device) and moved to ``device``."""
    import torch

    return torch.randperm(count, generator=generator)[:size].to(device)


def _kmeans(rows, n_cells, generator, block_entries):
    """Centres of ``n_cells`` cells: Lloyd's k-means on a sample of the rows,
    started from random rows; an emptied cell restarts from a random row."""
    import torch

    n_samples = rows.shape[0]
    size = min(n_samples, KMEANS_SAMPLES_PER_CELL * n_cells)
    sample = rows
    if size < n_samples:
        sample = rows[torch.sort(_drawn(n_samples, size, generator, rows.device)).values]
    centres = sample[torch.sort(_drawn(size, n_cells, generator, rows.device)).values]
    for _ in range(KMEANS_ITERATIONS):
        labels = _nearest_centres(sample, centres, 1, block_entries)[:, 0]
        means, filled = _cell_means(sample, labels, n_cells)
        # drawn every round, whether a cell emptied or not: no count is read back
        restarts = sample[_drawn(size, n_cells, generator, rows.device)]
        centres = torch.where(filled[:, None], means, restarts)
    return centres


def _cell_means(sample, labels, n_cells):
    """Each cell's mean row (float32, from float64 sums) and whether it holds any.

    The sums are differences of a cumulative sum over the rows sorted by cell:
    the same bits on every run (see the module docstring)."""
    import torch

    counts = torch.bincount(labels, minlength=n_cells)
    ends = counts.cumsum(0)
    sorted_rows = sample[torch.sort(labels, stable=True).indices].double()
    totals = torch.zeros((sample.shape[0] + 1, sample.shape[1]), dtype=torch.float64,
                         device=sample.device)
    torch.cumsum(sorted_rows, 0, out=totals[1:])
    sums = totals[ends] - totals[ends - counts]
    means = sums / counts.clamp(min=1)[:, None].double()
    return means.float(), counts > 0


def _nearest_centres(rows, centres, n_nearest, block_entries):
    """Each row's ``n_nearest`` nearest centres, nearest first (int64)."""
    import torch

    n_samples, n_centres = rows.shape[0], centres.shape[0]
    squared_norms = (centres * centres).sum(1)
    nearest = torch.empty((n_samples, n_nearest), dtype=torch.int64, device=rows.device)
    block = max(1, block_entries // n_centres)
    for start in range(0, n_samples, block):
        # ||c||^2 - 2 <x, c>: the row's own norm does not change the order
        partial = torch.addmm(squared_norms[None, :], rows[start:start + block],
                              centres.T, alpha=-2.0)
        nearest[start:start + block] = partial.topk(n_nearest, dim=1, largest=False,
                                                    sorted=True).indices
    return nearest


def _scan(rows, cell_start, probes, n_neighbors, block_entries):
    """Each row's ``n_neighbors`` nearest among the rows of its probed cells (row
    numbers among ``rows``, sorted by home cell; -1 where fewer were found).

    The (row, probed cell) pairs are sorted by cell, stably: each cell's queries
    are then one slice, in increasing row order. The cells are searched one after
    the other, each in blocks of at most ``block_entries`` distances.
    """
    import torch

    n_samples, n_probe = probes.shape
    n_cells = cell_start.shape[0] - 1
    cells = probes.reshape(-1)
    queries = torch.sort(cells, stable=True).indices // n_probe
    query_start = _boundaries(cells, n_cells)
    del cells
    squared_norms = (rows * rows).sum(1)
    best = (torch.full((n_samples, n_neighbors), math.inf, device=rows.device),
            torch.full((n_samples, n_neighbors), -1, dtype=torch.int64, device=rows.device))
    # the plan, read back once: the cells' rows and their queries
    plan = zip(cell_start.tolist(), cell_start[1:].tolist(), query_start.tolist(),
               query_start[1:].tolist())
    for low, high, first, last in plan:
        if high == low:
            continue
        step = max(1, block_entries // (high - low))
        for start in range(first, last, step):
            _search_cell(rows, squared_norms, queries[start:min(start + step, last)],
                         low, high, best)
    return best[1]


def _search_cell(rows, squared_norms, queries, low, high, best):
    """Merge the rows ``low`` to ``high`` (one cell) into the nearest found so far
    of ``queries`` (distinct row numbers), ``best``: the distances up to each
    query's own norm and the row numbers, updated in place."""
    import torch

    size = high - low
    partial = torch.addmm(squared_norms[None, low:high], rows[queries],
                          rows[low:high].T, alpha=-2.0)
    # a row of this cell is not its own neighbour: its own column set to +inf
    local = queries - low
    own = (local >= 0) & (local < size)
    column = local.clamp(0, size - 1)[:, None]
    partial.scatter_(1, column, torch.where(own[:, None], math.inf,
                                            partial.gather(1, column)))
    distances, found = partial.topk(min(best[0].shape[1], size), dim=1, largest=False,
                                    sorted=False)
    # an infinite distance is the row itself, or a cell too small to fill the list
    found = torch.where(torch.isinf(distances), -1, found + low)
    distances = torch.cat([best[0][queries], distances], 1)
    found = torch.cat([best[1][queries], found], 1)
    distances, kept = distances.topk(best[0].shape[1], dim=1, largest=False, sorted=False)
    best[0][queries] = distances
    best[1][queries] = found.gather(1, kept)
