"""Deep clustering of images: a network that learns its own representation
(:class:`DeepImageClustering`)."""

from skdiffclust.deep._estimator import DeepImageClustering

__all__ = ["DeepImageClustering"]
