"""Progress reporting without torch."""


def progress_bar(verbose, description, total=None):
    """A tqdm bar when ``verbose`` (and tqdm is installed), else ``None``."""
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=description)


def progress(iterable, verbose, description):
    """A tqdm progress bar when ``verbose``, the iterable itself otherwise."""
    if not verbose:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description)
