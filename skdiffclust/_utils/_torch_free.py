"""Progress reporting without torch (tqdm is optional)."""


def progress_bar(verbose, description, total=None):
    """A tqdm bar when ``verbose`` (and tqdm is installed), else ``None``."""
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=description)
