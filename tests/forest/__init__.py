"""Tests of skdiffclust/forest/: SpanningForestClustering, spanning_forest, the torch
operators and the embedding trained through them, the CUDA solver."""
