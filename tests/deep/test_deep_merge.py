"""Merging clusters along a graph (``_graphcut._merge``) and the outputs of an
over-clustered network grouped into clusters (``deep._merge``): no torch."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skdiffclust._graphcut._merge import (MERGE_LINK, MIN_CLUSTERS, link_strengths,
                                          merge_clusters, move_weights)
from skdiffclust.deep._merge import merge_columns, merged_outputs
from skdiffclust.deep._settings import MIN_MERGE_NEIGHBORS, merge_neighbors, over_clusters


def chain_graph(sizes, bridges):
    """Cliques of ``sizes`` vertices; ``bridges[i]`` edges between clique i and
    i + 1 (symmetric, unit weights)."""
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows, cols = [], []
    for start, stop in zip(starts[:-1], starts[1:]):
        block = np.arange(start, stop)
        r, c = np.meshgrid(block, block)
        keep = r != c
        rows.append(r[keep])
        cols.append(c[keep])
    for i, count in enumerate(bridges):
        for j in range(count):
            a, b = starts[i] + j % sizes[i], starts[i + 1] + j % sizes[i + 1]
            rows.append(np.array([a, b]))
            cols.append(np.array([b, a]))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    n = starts[-1]
    graph = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    graph.sum_duplicates()
    return graph, np.repeat(np.arange(len(sizes)), sizes)


def test_pieces_joined_by_many_edges_merge_and_separate_groups_stay():
    """Four cliques: 0-1 and 2-3 joined by many edges (pieces of one class), 1-2
    by none: two clusters, clearly."""
    graph, labels = chain_graph([10, 10, 10, 10], [30, 0, 30])
    sequence = merge_clusters(graph, labels, 4)
    assert sequence.n_clusters == 2 and sequence.clear
    np.testing.assert_array_equal(sequence.groups, [0, 0, 1, 1])
    np.testing.assert_array_equal(sequence.candidates, [2, 3, 4])
    assert sequence.links[0] == 0.0 and np.all(sequence.links[1:] >= MERGE_LINK)


def test_links_are_the_smaller_clusters_share_of_edges():
    weights = np.array([[8.0, 2.0, 0.0], [2.0, 18.0, 1.0], [0.0, 1.0, 3.0]])
    links = link_strengths(weights)
    assert links[0, 1] == pytest.approx(2.0 / 10.0)
    assert links[1, 2] == pytest.approx(1.0 / 4.0)
    assert links[0, 2] == 0.0 and np.all(np.diag(links) == -np.inf)


def test_moves_count_each_view_both_ways_and_skip_views_outside():
    labels = np.array([0, 0, 1, 2])
    moved = np.array([[0, 1, 1, -1], [1, 0, 2, 2]])
    counts = move_weights(labels, moved, 3)
    np.testing.assert_array_equal(counts, [[4, 2, 0], [2, 2, 1], [0, 1, 2]])


def test_pieces_the_views_move_between_merge_though_the_graph_parts_them():
    """Two cliques no edge joins, three apart from them: by the graph alone all
    stay apart; with the views of the first two's images moving between them
    (the mean of no edges and 40% of moves: 0.2) those two merge; moves that
    stay in their clusters change nothing."""
    graph, labels = chain_graph([10, 10, 10], [0, 0])
    assert merge_clusters(graph, labels, 3).n_clusters == 3
    moved = np.tile(labels, (5, 1))
    moved[:2, :20] = 1 - labels[:20]  # two of five views cross
    sequence = merge_clusters(graph, labels, 3, moves=move_weights(labels, moved, 3))
    assert sequence.n_clusters == 2 and sequence.clear
    np.testing.assert_array_equal(sequence.groups, [0, 0, 1])
    assert sequence.links[sequence.candidates == 3][0] == pytest.approx(0.2)
    still = merge_clusters(graph, labels, 3,
                           moves=move_weights(labels, np.tile(labels, (5, 1)), 3))
    assert still.n_clusters == 3


def test_clusters_linked_at_every_number_stop_at_the_fewest_unclear():
    graph, labels = chain_graph([10, 10, 10], [40, 40])
    sequence = merge_clusters(graph, labels, 3)
    assert sequence.n_clusters == MIN_CLUSTERS and not sequence.clear


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(3, 8), min_size=2, max_size=6),
       bridges=st.lists(st.integers(0, 12), min_size=5, max_size=5),
       threshold=st.sampled_from([0.01, 0.03, 0.1, 0.3]))
def test_the_number_found_is_the_largest_whose_strongest_link_is_below(
        sizes, bridges, threshold):
    """Whatever the graph: every number above the one found had a link at least
    the threshold, the one found none; the groups partition the clusters into
    that many non-empty groups, numbered by their smallest member."""
    graph, labels = chain_graph(sizes, bridges[:len(sizes) - 1])
    sequence = merge_clusters(graph, labels, len(sizes), min_link=threshold)
    found = sequence.n_clusters
    assert set(sequence.groups) == set(range(found))
    firsts = [int(np.flatnonzero(sequence.groups == g)[0]) for g in range(found)]
    assert firsts == sorted(firsts)
    above = sequence.candidates > found
    assert np.all(sequence.links[above] >= threshold)
    at_found = sequence.links[sequence.candidates == found][0]
    assert at_found < threshold or (found == MIN_CLUSTERS and not sequence.clear)


def test_outputs_of_an_over_clustered_network_are_grouped():
    """Two blobs each cut into three outputs, one output never chosen: two
    clusters; the unchosen output joins the cluster whose images give it the
    most probability; the identity grouping returns the probabilities as
    they are."""
    rng = np.random.default_rng(0)
    embedding = np.concatenate([rng.normal(0, 1, (60, 4)), rng.normal(20, 1, (60, 4))])
    outputs = np.concatenate([np.arange(60) % 3, 3 + np.arange(60) % 3])
    proba = np.full((120, 7), 0.01)
    proba[np.arange(120), outputs] = 1.0
    proba[60:, 6] = 0.5  # never the most probable; the second blob's
    proba /= proba.sum(1, keepdims=True)
    groups, count = merged_outputs(embedding, proba, n_neighbors=10)
    assert count.n_clusters == 2 and count.clear
    np.testing.assert_array_equal(groups, [0, 0, 0, 1, 1, 1, 1])
    merged = merge_columns(proba, groups)
    np.testing.assert_allclose(merged.sum(1), 1.0)
    assert merge_columns(proba, np.arange(7)) is proba


def test_views_of_images_move_outputs_together():
    """Four groups of images, one output each, far apart in the embedding: the
    graph alone keeps four; the views of the first two groups' images move
    between their outputs (and views to an output no image chose are not
    counted): three clusters."""
    rng = np.random.default_rng(0)
    embedding = np.concatenate([rng.normal(100 * c, 1, (30, 4)) for c in range(4)])
    outputs = np.repeat(np.arange(4), 30)
    proba = np.full((120, 5), 0.01)
    proba[np.arange(120), outputs] = 1.0
    proba /= proba.sum(1, keepdims=True)
    _, alone = merged_outputs(embedding, proba, n_neighbors=5)
    assert alone.n_clusters == 4
    moved = np.tile(outputs, (4, 1))
    moved[0, :60] = np.where(outputs[:60] == 0, 1, 0)
    moved[1, 60:] = 4  # an output no image chose
    groups, count = merged_outputs(embedding, proba, n_neighbors=5, moved=moved)
    assert count.n_clusters == 3
    np.testing.assert_array_equal(groups[:4], [0, 0, 1, 2])


def test_the_clusters_trained_on_are_bounded():
    assert over_clusters(50, "auto", 1000) == 50
    assert over_clusters(50, 12, 1000) == 12
    assert over_clusters(50, "auto", 20) == 19


def test_the_merge_graph_has_at_most_half_a_clusters_images_as_neighbours():
    assert merge_neighbors(10, 60_000, 50) == 10
    assert merge_neighbors(10, 400, 50) == 4  # clusters of 8 images
    assert merge_neighbors(10, 100, 50) == MIN_MERGE_NEIGHBORS
    assert merge_neighbors(2, 60_000, 50) == 2  # the user's fewer kept
    assert merge_neighbors(10, 3, 2) == 2  # at most the images less one


def test_many_small_clusters_stay_apart_with_the_merge_graphs_neighbours():
    """Forty tight groups of 8 points, far apart (40 classes of 8 images): with
    10 neighbours every point has two outside its group, so the groups are linked
    whatever the data and merge; with the neighbours of ``merge_neighbors`` (4)
    the 40 stay, clearly."""
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=100.0, size=(40, 16))
    labels = np.repeat(np.arange(40), 8)
    embedding = centres[labels] + rng.normal(size=(labels.size, 16))
    proba = np.full((labels.size, 40), 0.1 / 39)
    proba[np.arange(labels.size), labels] = 0.9
    neighbours = merge_neighbors(10, labels.size, 40)
    groups, count = merged_outputs(embedding, proba, n_neighbors=neighbours)
    assert neighbours == 4 and count.n_clusters == 40 and count.clear
    np.testing.assert_array_equal(groups, np.arange(40))
    _, crowded = merged_outputs(embedding, proba, n_neighbors=10)
    assert crowded.n_clusters < 40
