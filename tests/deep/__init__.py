"""Tests of skdiffclust/deep/: DeepImageClustering."""
