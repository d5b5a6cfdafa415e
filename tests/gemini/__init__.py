"""Tests of skdiffclust/gemini/: SparseGEMINI, its objectives and proximal operators."""
