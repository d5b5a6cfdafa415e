"""Run code in a fresh Python process where ``import torch`` fails, as where torch is
not installed: fitted models must load and predict there."""

import subprocess
import sys

# a finder that refuses torch (``sys.modules['torch'] = None`` would too, but
# SciPy's array-API helpers then trip over the None)
NO_TORCH = (
    "import sys\n"
    "class NoTorch:  # import torch now fails, as where it is not installed\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] == 'torch':\n"
    "            raise ImportError('No module named torch')\n"
    "sys.meta_path.insert(0, NoTorch())\n"
)


def run_without_torch(code, *args):
    """Run ``code`` (after :data:`NO_TORCH`) with ``args``; check that it did not
    import torch and return the finished process."""
    script = NO_TORCH + code + "\nassert 'torch' not in sys.modules\n"
    return subprocess.run([sys.executable, "-c", script, *map(str, args)],
                          capture_output=True, text=True)
