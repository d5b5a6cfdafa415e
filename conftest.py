"""Collection rules shared by the test suite and the doctests of the package."""

import importlib.util

# Without torch (the torch-free CI environment) the torch code is not collected at
# all; the environment with torch runs all of it.
collect_ignore_glob = []
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob += [
        "skdiffclust/torch.py",
        "skdiffclust/forest/_torch_ops.py",
        "skdiffclust/forest/_embedding.py",
        "skdiffclust/_utils/_torch.py",
        "skdiffclust/clam/_backprop.py",
        "skdiffclust/clam/_dynamics.py",
        "skdiffclust/clam/_torch_training.py",
        "skdiffclust/prcut/_estimator.py",  # its doctest fits a model
        "skdiffclust/prcut/_loss.py",
        "skdiffclust/prcut/_training.py",
        "tests/test_torch_*.py",
    ]
