"""Tests of skdiffclust/clam/: ClAM, ClAMLayer and clam_loss."""
