"""Random views of images, in torch, drawn from a local generator.

Two strengths. The *weak* view, read by the clustering phase, moves each image by
a small random affine map (rotation, scaling, translation): the changes that
leave an image's class as it was, whatever the image set (no flips: a flipped 2,
or a flipped 7, is another digit). The *strong* view, read by the self-labelling
phase (FixMatch's recipe: the label of the weak view, learnt from the strong
one), doubles the affine ranges and erases a random square of a third of the
side. Both are one ``affine_grid`` + ``grid_sample`` for the whole batch (about
0.5 s of CPU per 60,000 images of 28 x 28); pixels pulled in from outside the
image repeat its border.
"""

import math

import torch
from torch.nn import functional as F


def weak_view(images, ranges, generator):
    """A weak random view of each image of a (b, C, H, W) batch (a new tensor);
    ``ranges``: an :class:`~skdiffclust.deep._settings.Augmentation`."""
    return random_affine(images, generator, ranges.rotation, ranges.scale, ranges.shift)


def strong_view(images, ranges, generator):
    """A strong random view: twice the affine ranges, then a square erased."""
    moved = random_affine(images, generator, 2 * ranges.rotation, 2 * ranges.scale,
                          2 * ranges.shift)
    return erase_square(moved, generator)


def random_affine(images, generator, rotation, scale, shift):
    """Each image of a (b, C, H, W) batch under its own random affine map."""
    b = images.shape[0]
    device, dtype = images.device, images.dtype
    draws = torch.rand((b, 4), generator=generator, device=device, dtype=dtype) * 2 - 1
    angle = draws[:, 0] * math.radians(rotation)
    factor = 1 + draws[:, 1] * scale
    # affine_grid's coordinates span [-1, 1]: a shift of s sides is 2 s
    offsets = draws[:, 2:] * (2 * shift)
    cos, sin = torch.cos(angle) / factor, torch.sin(angle) / factor
    theta = torch.stack([torch.stack([cos, -sin, offsets[:, 0]], 1),
                         torch.stack([sin, cos, offsets[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border",
                         align_corners=False)


def erase_square(images, generator, fraction=1 / 3):
    """Each image with a random square of ``fraction`` of its smaller side set to
    the image's mean (cutout; the square may cross the border)."""
    b, _, height, width = images.shape
    device = images.device
    side = max(1, int(round(fraction * min(height, width))))
    corner_y = torch.randint(-side + 1, height, (b,), generator=generator, device=device)
    corner_x = torch.randint(-side + 1, width, (b,), generator=generator, device=device)
    rows = torch.arange(height, device=device)[None, :, None] - corner_y[:, None, None]
    cols = torch.arange(width, device=device)[None, None, :] - corner_x[:, None, None]
    inside = (rows >= 0) & (rows < side) & (cols >= 0) & (cols < side)
    fill = images.mean(dim=(2, 3), keepdim=True)
    return torch.where(inside[:, None], fill, images)
