"""The training contract every trained estimator keeps (the engine's, ``_training``).

``max_iter`` counts epochs; ``ConvergenceWarning`` when it runs out before the
stopping rule holds, none on a converged fit; ``n_iter_ <= max_iter``;
``len(loss_curve_) == n_iter_``; ``device_`` names where the fit trained; same
``random_state``, same labels; ``verbose`` shows one progress bar (an ETA, the
objective ``loss_curve_`` records) that ends at ``n_iter_``.
"""

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from tests._estimators import each

X, Y = make_blobs(n_samples=150, centers=3, random_state=1)
PARTIAL = np.where(np.arange(150) % 5 == 0, Y, -1)

# every registered estimator, trained by epochs; each converges on these blobs with
# its default tol and patience
PARAMS = each(trained=True, counting=True)


def _fit(entry, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator = entry.make_trained(n_clusters=3, random_state=0, **params).fit(
            entry.as_input(X), **entry.label_params(PARTIAL))
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    return estimator, convergence


@pytest.mark.parametrize("entry", PARAMS)
def test_a_converged_fit_does_not_warn(entry):
    estimator, convergence = _fit(entry, max_iter=500)
    assert convergence == []
    assert 1 <= estimator.n_iter_ < 500
    assert estimator.loss_curve_.shape == (estimator.n_iter_,)
    assert np.isfinite(estimator.loss_curve_).all()


@pytest.mark.parametrize("entry", PARAMS)
def test_too_few_epochs_warn_and_are_all_run(entry):
    estimator, convergence = _fit(entry, max_iter=2)
    assert len(convergence) == 1
    assert "max_iter=2" in str(convergence[0].message)
    assert convergence[0].filename == __file__  # at the user's fit, in _fit
    assert estimator.n_iter_ == 2 and estimator.loss_curve_.shape == (2,)


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.parametrize("entry", PARAMS)
def test_device_names_where_the_fit_trained(entry):
    estimator, _ = _fit(entry, max_iter=2)
    assert isinstance(estimator.device_, str)
    # 'auto' trains on the CPU of a machine without CUDA (test_cuda_fits: with it)
    assert estimator.device_ == ("cuda" if _cuda_available() else "cpu") or (
        estimator.device_ == "cpu" and _cuda_available())
    if "device" in estimator.get_params():
        assert _fit(entry, max_iter=2, device="cpu")[0].device_ == "cpu"


@pytest.mark.parametrize("entry", PARAMS)
def test_same_random_state_same_labels(entry):
    first, _ = _fit(entry, max_iter=5)
    second, _ = _fit(entry, max_iter=5)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    np.testing.assert_array_equal(first.loss_curve_, second.loss_curve_)


@pytest.mark.parametrize("entry", PARAMS)
def test_verbose_shows_one_bar_ending_at_n_iter(entry, capsys):
    estimator, _ = _fit(entry, max_iter=500, verbose=True)
    # a cold numba cache prints its compilation notice in the middle of the bar:
    # a line of its own, not the bar's
    err = re.sub(r"skdiffclust: compiling [^\n]*\n", "", capsys.readouterr().err)
    # tqdm redraws one line with carriage returns; its last state is "n/total"
    states = re.findall(r"(\d+)/(\d+) \[", err)
    assert states, err
    totals = {int(total) for _, total in states}  # a total, hence an ETA
    if entry.pinned.get("n_clusters") == "auto":
        # the candidates' trainings and the kept one's, on one bar
        assert len(totals) == 1 and totals.pop() % 500 == 0, states
        assert int(states[-1][0]) >= estimator.n_iter_
    else:
        assert totals == {500}
        assert int(states[-1][0]) == estimator.n_iter_
    assert err.count("\n") == 1  # one bar, closed once
    last = err.rsplit("\r", 1)[-1]
    # an ETA (tqdm's "elapsed<remaining") and the current objective: the last epoch's
    assert re.search(r"\[\d+:\d+<\d+:\d+", last), last
    loss = re.search(r"loss=(\S+?)\]", last)
    assert loss, last
    if entry.pinned.get("n_clusters") != "auto":  # 'auto': its kept training's
        assert loss.group(1) == f"{estimator.loss_curve_[-1]:.4g}", last
