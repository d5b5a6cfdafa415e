"""numba glue: best-effort on-disk caching, compiling for size, a notice while kernels
compile (the garbage collector paused meanwhile), Ctrl-C.

* Every kernel of the package is declared with :func:`jit`, a drop-in for
  ``numba.njit(cache=True, ...)`` that never fails for want of a writable cache
  location: read-only installs (containers, service accounts without a home)
  compile in memory instead, with one :class:`CachingDisabledWarning` per process.
  Small helpers are declared ``jit(inline="always")``: numba compiles each callee
  on its own, then links and optimises it again into every caller, so that each
  level of calls adds compilation time.
* :func:`compile_for_size`, called at the top of a kernel, has LLVM compile it for
  size: ClAM's compact kernel of small fits, whose compilation is most of the fit.
  :func:`bits_as` reads a number's bits as another type without compiling a
  function for it.
* Compiling a family of kernels (ClAM's, the spanning forests') takes seconds the
  first time. numba reports each compilation (not the loads from its on-disk
  cache) as an event; once a family has spent ``NOTICE_DELAY`` seconds compiling
  in this process, one line on stderr says what is happening. Python's garbage
  collector pauses while they compile (:class:`_CollectorPause`).
* Ctrl-C during a kernel sets Python's signal flag; if the kernel returns arrays,
  numba's boxing of them runs Python code that raises ``KeyboardInterrupt`` inside
  numba, which then reports a ``SystemError``. Long kernels run in chunks that
  return nothing (the interrupt is raised between chunks); :func:`interruptible`
  turns the ``SystemError`` of the other kernels back into ``KeyboardInterrupt``.
"""

import functools
import gc
import sys
import threading
import time
from collections.abc import Mapping

import numba
from numba.core import errors, event, types
from numba.core.caching import FunctionCache
from numba.extending import intrinsic

from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import CachingDisabledWarning

NOTICE_DELAY = 2.0  # seconds of compilation before the notice is printed

# What the notice calls each module's kernels, and how long compiling them took on
# one core of a 2-core AMD EPYC VM (benchmarks/bench_first_fit.py measures it: its
# cold CPU seconds less its warm ones; ClAM's: 5 to 7 s for the compact training
# kernel of small fits, 11 to 13 s for the vectorised one of large fits) (the first
# entry whose key starts the module's name)
FAMILIES = {
    "skdiffclust.clam": ("ClAM's", "5 to 12"),
    "skdiffclust.forest._perturbed": ("the perturbed spanning forests'", 10),
    "skdiffclust.forest": ("the spanning forests'", 3),
    "skdiffclust._utils._symmetry": ("the spanning forests'", 3),
}
DEFAULT_FAMILY = ("skdiffclust's", 3)

_state = {"caching_off": False}


# -- caching -------------------------------------------------------------------------


class _BestEffortCache(FunctionCache):
    """numba's on-disk cache, where a failure to write turns caching off instead of
    failing the call (a location that was writable at import may not be later)."""

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError as error:
            _warn_caching_off(error)


def _warn_caching_off(error):
    if _state["caching_off"]:
        return
    _state["caching_off"] = True
    warn_user(
        f"skdiffclust cannot cache its compiled numba kernels ({error}); they are "
        "compiled again in every new Python process, which makes first fits slower. "
        "Set the environment variable NUMBA_CACHE_DIR to a writable directory to "
        "cache them there.",
        CachingDisabledWarning,
    )


def jit(function=None, **options):
    """``numba.njit(cache=True, **options)``, caching only where it can.

    Kernels compile without numba's C-callable wrapper (``no_cfunc_wrapper``),
    which only a kernel passed to another as a first-class function value needs;
    each wrapper costs its kernel's first call compilation time.

    Parameters
    ----------
    function : callable, optional
        The function to compile; without it, returns a decorator.
    **options
        Options of :func:`numba.njit` (``cache`` is implied; ``no_cfunc_wrapper``
        defaults to True).

    Returns
    -------
    numba dispatcher, or a decorator that makes one.
    """
    if function is None:
        return functools.partial(jit, **options)
    dispatcher = numba.njit(**{"no_cfunc_wrapper": True, **options})(function)
    try:
        dispatcher._cache = _BestEffortCache(dispatcher.py_func)
    except RuntimeError as error:  # "cannot cache function ...: no locator available"
        _warn_caching_off(error)
    return dispatcher


def caching_is_off():
    """Whether kernels compile in memory only (see :class:`CachingDisabledWarning`)."""
    return _state["caching_off"]


# -- compiling for size ----------------------------------------------------------------


@intrinsic
def compile_for_size(typingctx, when):
    """Have LLVM optimise the calling kernel for size (the ``minsize`` and
    ``optsize`` attributes, as clang's ``-Oz``), unless ``when`` is None or omitted.

    For kernels whose first call costs more compilation than running: LLVM
    optimises them without loop vectorisation or unrolling, in about half the time.
    The arithmetic stays: without fast-math flags no pipeline may change a result,
    so the kernel computes the same bits (where ``contract`` lets products and sums
    fuse, tests compare the two pipelines). numba compiles once per signature: a
    kernel shared with hot paths takes ``when`` as an argument (True or None) and
    compiles once for each.
    """
    def codegen(context, builder, signature, args):
        if not isinstance(signature.args[0], (types.NoneType, types.Omitted)):
            builder.function.attributes.add("optsize")
            builder.function.attributes.add("minsize")
        return context.get_dummy_value()

    return types.none(when), codegen


@intrinsic
def bits_as(typingctx, value, to):
    """The bits of the number ``value`` read as the type ``to`` of the same width:
    ``bits_as(np.float64(x), np.int64)`` is ``np.float64(x).view(np.int64)``, which
    compiles a function of its own for each pair of types (about 0.05 s each), where
    this is one instruction in the calling kernel."""
    target = getattr(to, "instance_type", None) or getattr(to, "dtype", None)
    if not (isinstance(value, types.Number) and isinstance(target, types.Number)
            and value.bitwidth == target.bitwidth):
        raise errors.TypingError(f"bits_as: cannot read the bits of {value} as {to}")

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(target))

    return target(value, to), codegen


# -- the compilation notice ------------------------------------------------------------


def _module_compiled(ev):
    """The module of the function a ``numba:compile`` event compiles ('' if none).

    The listeners run in every compilation of the process, the user's and other
    libraries' too, where an exception would fail the compilation: the event's
    payload (``data["dispatcher"].py_func.__module__`` in numba's own events) is
    read without assuming any part of it."""
    try:
        data = getattr(ev, "data", None)
        dispatcher = data.get("dispatcher") if isinstance(data, Mapping) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "")
    except Exception:  # a mapping or an attribute that raises when it is read
        return ""
    return module if isinstance(module, str) else ""


class _CompilationNotice(event.Listener):
    """Times the compilations of skdiffclust's kernels, per family, and prints one
    line when a family's total passes ``NOTICE_DELAY``.

    A top-level compilation (one called from Python, not from another kernel being
    compiled) arms a timer for what is left of the family's allowance; its end
    cancels it and books the time spent.
    """

    def __init__(self):
        self.depth = 0
        self.started = 0.0
        self.family = None
        self.timer = None
        self.spent = {}
        self.announced = set()

    def on_start(self, ev):
        self.depth += 1
        if self.depth > 1:
            return
        module = _module_compiled(ev)
        if not module.startswith("skdiffclust."):
            return
        self.family = next((family for prefix, family in FAMILIES.items()
                            if module.startswith(prefix)), DEFAULT_FAMILY)
        self.started = time.perf_counter()
        if self.family[0] not in self.announced:
            left = NOTICE_DELAY - self.spent.get(self.family[0], 0.0)
            self.timer = threading.Timer(max(left, 0.0), self._announce, args=(self.family,))
            self.timer.daemon = True
            self.timer.start()

    def on_end(self, ev):
        self.depth -= 1
        if self.depth > 0 or self.family is None:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        name = self.family[0]
        self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - self.started
        self.family = None

    def _announce(self, family):
        name, seconds = family
        if name in self.announced or sys.stderr is None:
            return
        self.announced.add(name)
        when = ("caching is off: in every new process" if _state["caching_off"]
                else "first use only")
        sys.stderr.write(f"skdiffclust: compiling {name} numba kernels ({when}, "
                         f"about {seconds} s)...\n")
        sys.stderr.flush()


event.register("numba:compile", _CompilationNotice())


class _CollectorPause(event.Listener):
    """Pauses Python's cyclic garbage collector while skdiffclust's kernels compile.

    numba's compiler allocates millions of short-lived objects, so the collector runs
    hundreds of times during a compilation, a few of them over every object of the
    process (numba's, scikit-learn's, the user's): about a tenth of a cold first
    fit. Paused, the collector runs once after the compilation, over what it left
    (a few tens of MB meanwhile). A collector the user disabled stays disabled.
    """

    def __init__(self):
        self.depth = 0
        self.paused = False

    def on_start(self, ev):
        self.depth += 1
        module = _module_compiled(ev)
        if self.depth == 1 and module.startswith("skdiffclust.") and gc.isenabled():
            gc.disable()
            self.paused = True

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0 and self.paused:
            self.paused = False
            gc.enable()


event.register("numba:compile", _CollectorPause())


# -- Ctrl-C ------------------------------------------------------------------------------


def _caused_by_interrupt(error):
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def interruptible(function):
    """Decorator: a ``SystemError`` caused by Ctrl-C inside a kernel becomes the
    ``KeyboardInterrupt`` it is."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except SystemError as error:
            if _caused_by_interrupt(error):
                raise KeyboardInterrupt from None
            raise

    return wrapper
