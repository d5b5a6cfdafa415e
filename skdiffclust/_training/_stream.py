"""What ``partial_fit`` carries from a call to the next, for every streaming estimator.

Each estimator's stream (ClAM's ``ClamStream``, SparseGEMINI's ``GeminiStream``,
PRCut's ``PRCutStream``) is a dataclass deriving from :class:`StreamState`: its
own training state (parameters, optimiser moments, generators, the first chunk's
scaling) next to the work counted here, all in NumPy, so that an estimator
pickles mid-stream, and resumes, without torch objects. A call works on a
:meth:`StreamState.copy`, stored only when the call succeeds (a failed call
leaves the estimator as it was); :func:`keep_stream` stores it with the counts
every streaming estimator exposes, :func:`forget_stream` (``fit``) drops them.

A stream also records the estimator's parameters it froze at its start (its
class's ``FIXED_PARAMETERS``: those that shape what it trains, ``n_clusters``...), and
:func:`resumed_stream` refuses to go on after ``set_params`` changed one: the
first versions failed deep inside (a state dict of the wrong shape, an index out
of bounds) or trained on, ignoring the change.
"""

import copy
from dataclasses import dataclass, field

import numpy as np

from skdiffclust._utils._validation import check_magnitude, column_extremes, validate_data
from skdiffclust._utils._warn import warn_user

# the attributes a stream sets on its estimator, besides the fitted ones
STREAM_ATTRIBUTES = ("_stream", "n_steps_", "n_samples_seen_")


@dataclass(kw_only=True)
class StreamState:
    """The work a stream has done: each pass's objective, steps, samples seen,
    and the parameters it started with."""

    FIXED_PARAMETERS = ()  # the estimator's parameters the stream freezes

    objectives: list = field(default_factory=list)  # each pass's objective
    n_steps: int = 0
    n_samples_seen: int = 0
    started_with: dict = field(default_factory=dict)  # the frozen parameters
    first_range: tuple = None  # the first chunk's smallest and largest value per feature
    n_clusters_found: int = None  # n_clusters_ of the last chunk that could fill them

    def copy(self):
        """A deep copy, for a call to work on."""
        return copy.deepcopy(self)

    def count_pass(self, objective, n_steps, n_samples):
        """Record a pass: its objective (one value, or one per restart), its
        optimisation steps and the samples of its chunk."""
        self.objectives.append(objective)
        self.n_steps += int(n_steps)
        self.n_samples_seen += int(n_samples)

    def curve(self):
        """Each pass's objective, of the first (after the first pass, the kept)
        restart: ``loss_curve_``."""
        return np.asarray([np.ravel(values)[0] for values in self.objectives],
                          dtype=np.float64)


# A later chunk, centred and scaled as the first one was, is trained on in float32
# (ClAM's prototypes, PRCut's network and its approximate neighbour search): its
# squares overflow float32 beyond sqrt(3.4e38) = 1.8e19, sums over features sooner.
# Values beyond this bound, in the first chunk's units, are refused.
MAX_CHUNK_UNITS = 1e15
# At the other end, a chunk whose values differ by less than this, in the first
# chunk's units, collapses to one point (float32 keeps 7 digits of a value, and the
# squares of its differences underflow): a chunk on another scale too, refused
MIN_CHUNK_SPREAD = 1e-15
# Between those bounds, a chunk whose values lie farther beyond the first chunk's
# range of a feature than this many times its width is, with all likelihood, on
# another scale (shifted, or in other units): the stream reads it in the first
# chunk's units, and clusters it wrongly; a warning says so
OFF_RANGE_WIDTHS = 3.0


def check_chunk_units(X, shift, scale, *, stream, name):
    """Raise a ValueError, naming the call, when a chunk ``X`` (dense or sparse, finite)
    holds values that the first chunk's centring ``shift`` and scales ``scale`` (per
    feature, or one) take beyond :data:`MAX_CHUNK_UNITS`, or whose samples they bring
    closer than :data:`MIN_CHUNK_SPREAD` (though not all equal): a chunk on another scale,
    which the stream cannot represent (``name``: the estimator's); warn when it
    lies far beyond the first chunk's range. Reads each feature's extremes only."""
    if X.shape[0] == 0 or X.shape[1] == 0:
        return
    lowest, highest = column_extremes(X)
    with np.errstate(over="ignore", under="ignore"):
        largest = float(np.max(np.maximum(highest - shift, shift - lowest) / scale))
        spread = float(np.max((highest - lowest) / scale))
    call = len(stream.objectives) + 1
    advice = ("it is not on the first chunk's scale. Bring it to that scale, or start "
              "a new stream from a representative chunk (fit, or partial_fit on a new "
              "estimator). The estimator is left as it was.")
    if not largest <= MAX_CHUNK_UNITS:
        raise ValueError(
            f"The chunk passed to partial_fit (call {call}) holds values up to "
            f"{largest:.3g} in the units of the first chunk (centred and scaled as it "
            f"was: the stream keeps its units), beyond the {MAX_CHUNK_UNITS:.0e} that "
            f"{name} can train on: {advice}")
    if 0.0 < spread < MIN_CHUNK_SPREAD:
        raise ValueError(
            f"The samples of the chunk passed to partial_fit (call {call}) differ by "
            f"at most {spread:.3g} in the units of the first chunk (centred and scaled "
            f"as it was: the stream keeps its units), under the {MIN_CHUNK_SPREAD:.0e} "
            f"that {name} can tell apart, so that they would be trained on as one "
            f"point: {advice}")
    _warn_off_range(lowest, highest, getattr(stream, "first_range", None), call, name)


def _warn_off_range(lowest, highest, first_range, call, name):
    """Warn when a chunk's values (each feature's ``lowest`` and ``highest``) lie
    beyond the first chunk's range by more than :data:`OFF_RANGE_WIDTHS` times its
    width, in some feature that varied in the first chunk; name the farthest."""
    if first_range is None:
        return
    low, high = first_range
    width = high - low
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        excess = np.where(width > 0, np.maximum(low - lowest, highest - high) / width, 0.0)
    beyond = excess > OFF_RANGE_WIDTHS
    if not beyond.any():
        return
    j = int(np.argmax(np.where(beyond, excess, -np.inf)))
    value = lowest[j] if low[j] - lowest[j] > highest[j] - high[j] else highest[j]
    others = int(beyond.sum()) - 1
    warn_user(
        f"The chunk passed to partial_fit (call {call}) holds values far beyond the "
        f"first chunk's: feature {j} reaches {value:.4g}, where the first chunk's lay "
        f"in [{low[j]:.4g}, {high[j]:.4g}]"
        + (f" (and {others} more feature{'s' if others > 1 else ''} so)" if others else "")
        + f". {name} reads every chunk in the first chunk's centring and scale, so a "
        "chunk on another scale (shifted, or in other units) is clustered wrongly: "
        "bring it to the first chunk's scale, or start a new stream from a "
        "representative chunk.", UserWarning)


def next_chunk(estimator, stream, X):
    """A later chunk of ``partial_fit``, and the stream to continue on it: the
    chunk validated against the first (its features; CSR or dense, float64 or
    float32), its magnitudes checked, the stream's own checks (``check_chunk``:
    the first chunk's units), and a copy of the stream, so that a call that fails
    later leaves the estimator as it was."""
    X = validate_data(estimator, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                      reset=False)
    check_magnitude(X)
    stream.check_chunk(X)
    return X, stream.copy()


def resumed_stream(estimator):
    """The stream of the previous ``partial_fit`` calls (None before the first),
    once its frozen parameters are checked unchanged."""
    stream = getattr(estimator, "_stream", None)
    if stream is None:
        return None
    changed = [f"{name}={getattr(estimator, name)!r} (the stream started with {value!r})"
               for name, value in getattr(stream, "started_with", {}).items()
               if not _same_parameter(value, getattr(estimator, name))]
    if changed:
        raise ValueError(
            f"partial_fit cannot change {', '.join(changed)}: it shapes what the stream "
            "trains. Call fit, or partial_fit on a new estimator (sklearn.base.clone), "
            "to start a stream with it.")
    return stream


def _same_parameter(started, now):
    if started is now:
        return True
    started, now = (tuple(v) if isinstance(v, list) else v for v in (started, now))
    try:
        return bool(started == now)
    except (TypeError, ValueError):  # arrays, modules: only themselves are the same
        return False


def keep_stream(estimator, stream, X):
    """Store a call's stream on the estimator, with ``n_iter_`` (the calls),
    ``n_steps_`` and ``n_samples_seen_``; a new stream records the parameters
    it froze (its ``FIXED_PARAMETERS``) and the range of its first chunk ``X``
    (validated), which later chunks are compared with; after a chunk of fewer
    samples than the clusters found, ``n_clusters_`` stays the earlier one."""
    if not stream.started_with:
        stream.started_with = {name: getattr(estimator, name)
                               for name in stream.FIXED_PARAMETERS}
    if getattr(stream, "first_range", None) is None:
        rows = X if X.ndim == 2 else X.reshape(X.shape[0], -1)
        stream.first_range = column_extremes(rows)
    # a chunk of fewer samples than the clusters found cannot fill them: it says
    # nothing of empty clusters, and n_clusters_ stays the last one that could
    found = getattr(stream, "n_clusters_found", None)
    if found is not None and X.shape[0] < found:
        estimator.n_clusters_ = found
    else:
        stream.n_clusters_found = estimator.n_clusters_
    estimator.n_iter_ = len(stream.objectives)
    estimator.n_steps_ = stream.n_steps
    estimator.n_samples_seen_ = stream.n_samples_seen
    estimator._stream = stream


def forget_stream(estimator):
    """Drop the stream and its counts (``fit`` starts afresh)."""
    for name in STREAM_ATTRIBUTES:
        estimator.__dict__.pop(name, None)
