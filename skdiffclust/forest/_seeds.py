"""The perturbed forests' noise seed, drawn from a torch generator: shared by the
CPU solver's operators (``_torch``), the device solver (``_gpu``) and the
embedding's training, so that one generator gives the same noise on both solvers."""

import torch

MAX_SEED = 2**62  # the noise kernels' seeds (CPU and device solvers alike)


def seed_from_generator(generator):
    """A 62-bit seed for the numba noise, drawn from a torch generator (or torch's)."""
    device = generator.device if generator is not None else "cpu"
    return int(torch.randint(0, MAX_SEED, (1,), generator=generator, device=device).item())
