"""Tests of skdiffclust/prcut/: PRCut, its graph and spectral start, PRCutLoss and
PRCutBatchPairs."""
