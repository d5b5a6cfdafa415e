"""The package's listeners of numba's compile events (``_utils._numba``: the
compilation notice, the garbage collector's pause) run in every numba compilation of
the process, the user's and other libraries' too: an event whose payload is not
numba's usual one must not fail that compilation."""

from types import SimpleNamespace

import numba
import pytest
from numba.core import event

from skdiffclust._utils import _numba


class _RaisingMapping(dict):
    def get(self, key, default=None):
        raise RuntimeError("a payload that raises when it is read")


class _RaisingDispatcher:
    @property
    def py_func(self):
        raise RuntimeError("a dispatcher that raises when it is read")


MALFORMED = {
    "no payload": None,
    "an empty payload": {},
    "a payload that is not a mapping": "numba:compile",
    "a list of pairs": [("dispatcher", 1)],
    "a mapping that raises": _RaisingMapping(),
    "no dispatcher": {"dispatcher": None},
    "a dispatcher without py_func": {"dispatcher": object()},
    "a py_func of None": {"dispatcher": SimpleNamespace(py_func=None)},
    "a dispatcher that raises": {"dispatcher": _RaisingDispatcher()},
    "a module that is not a string": {
        "dispatcher": SimpleNamespace(py_func=SimpleNamespace(__module__=3))},
}


def _event(status, data):
    return event.Event("numba:compile", status, data=data)


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_compile_event_names_no_module(case):
    assert _numba._module_compiled(_event(event.EventStatus.START, MALFORMED[case])) == ""


def test_an_event_without_data_names_no_module():
    assert _numba._module_compiled(SimpleNamespace()) == ""


def test_a_compile_event_names_the_compiled_functions_module():
    dispatcher = numba.njit(lambda x: x)
    ev = _event(event.EventStatus.START, {"dispatcher": dispatcher, "args": (1,)})
    assert _numba._module_compiled(ev) == __name__


@pytest.mark.parametrize("case", MALFORMED)
def test_the_listeners_take_malformed_events_in_their_stride(case):
    """Each listener takes the start and end of a malformed event without raising,
    stays balanced, and pauses nothing."""
    import gc

    enabled = gc.isenabled()
    for listener in (_numba._CompilationNotice(), _numba._CollectorPause()):
        listener.on_start(_event(event.EventStatus.START, MALFORMED[case]))
        assert gc.isenabled() == enabled
        listener.on_end(_event(event.EventStatus.END, MALFORMED[case]))
        assert listener.depth == 0


def test_numba_compiles_around_a_malformed_event_of_another_library():
    """Another library's malformed compile event, broadcast to every listener (the
    package's registered ones), raises nothing; numba compiles as usual meanwhile."""
    with event.trigger_event("numba:compile", data=None):
        assert numba.njit(lambda x: x + 1)(1) == 2
