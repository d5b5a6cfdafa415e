"""Peak memory for the benchmarks: :class:`PeakMemory` (the peak resident set size
above its level at entry, sampled every 10 ms), :func:`release_freed_memory` (what
earlier work freed handed back to the system, done on entry) and :func:`rss_bytes`
(the resident set size now)."""

import contextlib
import ctypes
import gc
import os
import resource
import threading


def rss_bytes():
    """The process's resident set size in bytes (Linux's ``/proc``)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the process's peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def release_freed_memory():
    """Return to the system what earlier work freed: glibc keeps freed blocks in
    the process's heap, and later work reusing them would not raise the resident
    size, so that its peak would read low (bench_mnist.py's prcut-cnn after three
    cases: 1.5 MB, against 56 MB in a process of its own)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the peak may read low
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakMemory:
    """Peak resident memory above the level at entry (after the memory earlier
    work freed is returned to the system), sampled every 10 ms; ``above`` once
    the block has run."""

    def __enter__(self):
        release_freed_memory()
        self.before = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def above(self):
        return self.peak - self.before
