"""The built-in network: a small convolutional body, an embedding, clustering heads.

Two 5 x 5 convolutions (16 and 32 maps, each followed by 2 x 2 max pooling,
batch normalisation and ReLU), an adaptive average pooling to 4 x 4 (so that any
image of at least 4 x 4 pixels fits: 28 x 28 gives 7 x 7 maps, 8 x 8 gives 2 x
2, repeated), and a linear layer to the embedding (128 units, batch
normalisation, ReLU). Each head is a linear map from the embedding to
``n_clusters`` logits; the clustering phase trains several heads from different
random weights on the same body, and the one with the lowest objective is kept
(IIC's and SCAN's heads). About 2.8 M multiply-adds per 28 x 28 image.

Images larger than ``max_side`` (32) on a side are first reduced to it on their
longer side by area averaging, the network's first layer (so that ``predict``
does it too): the convolutions' cost grows with the pixels, and on 1,440 images
of 128 x 128 (a proxy of COIL-20's objects) a fit took 563 s at full size (NMI
0.921) and takes 55 s reduced (0.945).

On the CPU the maps are stored channels-last and pooled before their
normalisation (a quarter of the values to normalise): a training step on 28 x
28 images took 12.6 s of CPU per 60,000 images on one core, against 23.4 s with
the textbook order and layout.
"""

import torch
from torch import nn

from skdiffclust._utils._torch import (
    float32_by_default,
    module_from_state,
    seeded_global_rng,
)
from skdiffclust.deep._images import MAX_SIDE, reduced_side
from skdiffclust.deep._inference import POOLED_SIDE

EMBEDDING_DIM = 128
CHANNELS = (16, 32)


class ClusteringNetwork(nn.Module):
    """``body`` maps (b, C, H, W) images to (b, embedding_dim) embeddings; ``heads``
    map an embedding to each head's logits. ``forward`` returns the logits of
    head ``head`` (the kept one, once fitted)."""

    def __init__(self, body, heads, head=0):
        super().__init__()
        self.body = body
        self.heads = nn.ModuleList(heads)
        self.head = int(head)

    def forward(self, images):
        return self.heads[self.head](self.embed(images))

    def embed(self, images):
        """The embedding of (b, C, H, W) images."""
        return self.body(images.contiguous(memory_format=torch.channels_last))

    def all_logits(self, images):
        """The embedding and every head's logits."""
        embedding = self.embed(images)
        return embedding, [head(embedding) for head in self.heads]

    def keep_head(self, head):
        """Drop every head but ``head`` (after the selection)."""
        self.heads = nn.ModuleList([self.heads[head]])
        self.head = 0
        return self


def build_network(image_shape, n_clusters, n_heads, seed, max_side=MAX_SIDE):
    """The built-in network for images of shape (C, H, W), its weights drawn from
    ``seed`` (torch's global generators are restored afterwards); images larger
    than ``max_side`` are reduced by its first layer."""
    channels = image_shape[0]
    first, second = CHANNELS
    side = reduced_side(image_shape, max_side)
    reduce = [nn.AdaptiveAvgPool2d(side)] if side != tuple(image_shape[1:]) else []
    with seeded_global_rng(seed), float32_by_default():  # also for build_network alone
        body = nn.Sequential(
            *reduce,
            nn.Conv2d(channels, first, 5, padding=2, bias=False),
            nn.MaxPool2d(2, ceil_mode=True), nn.BatchNorm2d(first), nn.ReLU(),
            nn.Conv2d(first, second, 5, padding=2, bias=False),
            nn.MaxPool2d(2, ceil_mode=True), nn.BatchNorm2d(second), nn.ReLU(),
            nn.AdaptiveAvgPool2d(POOLED_SIDE), nn.Flatten(),
            nn.Linear(second * POOLED_SIDE ** 2, EMBEDDING_DIM, bias=False),
            nn.BatchNorm1d(EMBEDDING_DIM), nn.ReLU(),
        )
        heads = [nn.Linear(EMBEDDING_DIM, n_clusters) for _ in range(n_heads)]
    return ClusteringNetwork(body, heads).to(memory_format=torch.channels_last)


def network_from_state(state, image_shape, input_side):
    """The fitted network (one head, evaluation mode, on the CPU) rebuilt from its
    state as NumPy arrays, for images of ``image_shape`` read at ``input_side``."""
    reduced = tuple(input_side) != tuple(image_shape[1:])
    network = build_network(image_shape, state["heads.0.bias"].shape[0], 1, seed=0,
                            max_side=max(input_side) if reduced else None)
    return module_from_state(network, state)


@torch.no_grad()
def evaluate(network, images, batch_size=2048):
    """The network's embeddings and every head's probabilities of (n, C, H, W)
    images (a tensor), in evaluation mode: (n, embedding_dim) and (n_heads, n, k)."""
    training = network.training
    network.eval()
    try:
        embeddings, probabilities = [], []
        for start in range(0, images.shape[0], batch_size):
            embedding, logits = network.all_logits(images[start:start + batch_size])
            embeddings.append(embedding)
            probabilities.append(torch.stack([torch.softmax(lg, 1) for lg in logits]))
        return torch.cat(embeddings), torch.cat(probabilities, 1)
    finally:
        network.train(training)
