"""The quickstart (``python -m skdiffclust``) and the README's example tell the truth."""

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skdiffclust.__main__ as quickstart
from skdiffclust._registry import ESTIMATORS

README = Path(__file__).resolve().parents[1] / "README.rst"


def _run(dataset, **kwargs):
    out = io.StringIO()
    rows = quickstart.run(dataset, out=out, **kwargs)
    return rows, out.getvalue()


def _without_torch(dataset, **kwargs):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quickstart, "torch_available", lambda: False)
        return _run(dataset, **kwargs)


@pytest.fixture(scope="module")
def tour():
    """Each part of the tour once, seed 0; the digits without PRCut (tested apart)."""
    return {name: _without_torch(name) for name in quickstart.TOUR}


def _ari(rows):
    return {row.name: row.ari for row in rows}


def test_quickstart_explains_the_scores_and_each_estimator_before_its_fit(tour):
    rows, text = tour["moons"]
    assert "ARI (adjusted Rand index)" in text and "NMI (normalised mutual information)" in text
    assert "1 when the" in text and "about 0 for a random partition" in text
    assert "cached on disk" in text  # the first fit compiles numba kernels
    for method in (quickstart.FOREST, quickstart.KMEANS):
        description = text.index(f"  {method.name}: {method.blurb}")
        scores = text.index(f"ARI {_ari(rows)[method.name]:6.3f}", description)
        assert description < scores
    assert [row.name for row in rows] == ["SpanningForestClustering", "KMeans (reference)"]


def test_quickstart_forest_follows_the_moons_where_kmeans_cuts_them(tour):
    ari = _ari(tour["moons"][0])
    assert ari["SpanningForestClustering"] == 1.0
    assert ari["KMeans (reference)"] < 0.5


def test_quickstart_a_few_labels_let_the_forest_find_the_digits(tour):
    rows, text = tour["digits"]
    ari = _ari(rows)
    assert ari["SpanningForestClustering"] < 0.1  # single linkage chains the digits
    assert ari["SpanningForestClustering + labels"] > 0.8 > ari["KMeans (reference)"]
    assert "(5% of the samples labelled)" in text
    # without torch, PRCut and DeepImageClustering say why they are left out
    assert "PRCut" not in ari and "DeepImageClustering" not in ari
    assert "PRCut: skipped, it needs PyTorch" in text
    assert "DeepImageClustering: skipped, it needs PyTorch" in text


def test_quickstart_sparse_gemini_keeps_the_informative_features(tour):
    rows, text = tour["celeux"]
    gemini = next(row for row in rows if row.name == "SparseGEMINI")
    np.testing.assert_array_equal(np.flatnonzero(gemini.estimator.get_support()), range(5))
    assert "kept 5 of 100 features: [0, 1, 2, 3, 4]" in text
    assert "exactly the informative ones in 3 of 3 draws" in text
    ari = _ari(rows)
    assert ari["SparseGEMINI"] > 0.7
    # on the features it selects, the GEMINI clusters better than k-means on all
    assert ari["SparseGEMINI on its features"] > ari["KMeans (reference)"] + 0.02
    assert "It does here" in text


def _claim_line(text):
    return next(line for line in text.splitlines() if line.strip().startswith("Claim:"))


def test_quickstart_says_whether_each_papers_claim_holds_from_the_numbers(tour):
    for name in ("elongated", "celeux"):
        rows, text = tour[name]
        section = quickstart.TOUR[name]
        method, _ = section.claim
        gap = _ari(rows)[method] - _ari(rows)["KMeans (reference)"]
        line = _claim_line(text)
        assert f"{gap:+.3f}" in line
        expected = ("It does here" if gap > quickstart.CLEAR_MARGIN else "It does not here"
                    if gap < -quickstart.CLEAR_MARGIN else "Not here")
        assert expected in line


def test_quickstart_clam_on_the_papers_elongated_clusters(tour):
    rows, text = tour["elongated"]
    assert "(3 draws of the data, mean scores, total time)" in text
    # we could not reproduce the paper's figure 13: both cut across the clusters
    ari = _ari(rows)
    assert ari["ClAM"] < 0.5 and abs(ari["ClAM"] - ari["KMeans (reference)"]) < 0.05
    # and the tour says why, from ClAM's own loss: the cut it finds scores better
    # than the long clusters, which ClAM keeps when started from their means
    why = " ".join(text[text.index("  Why: "):].split())
    found, classes, kept = map(float, re.search(
        r"finds \((\d\.\d\d), mean over the draws\) than for the long clusters "
        r"\((\d\.\d\d): ClAM started from the classes' means, which it keeps, "
        r"ARI (\d\.\d\d)\)", why).groups())
    assert found < classes and kept > 0.5
    assert text.index("Claim: ClAM") < text.index("Why: ClAM")


@pytest.mark.torch
def test_quickstart_runs_prcut_and_the_network_on_the_digits_when_torch_is_installed():
    rows, text = _run("digits")
    assert f"  PRCut: {quickstart.PRCUT.blurb}" in text
    assert f"  DeepImageClustering: {quickstart.DEEP.blurb}" in text
    ari = _ari(rows)
    assert ari["PRCut"] > 0.5
    # the network on the images beats k-means on the pixels
    assert ari["DeepImageClustering"] > ari["KMeans (reference)"] + 0.05


def test_quickstart_tours_every_registered_estimator():
    # a new method's registry entry is not enough: the tour must show it too
    toured = {method.registered for section in quickstart.TOUR.values()
              for method in section.methods}
    assert toured == {entry.name for entry in ESTIMATORS}


def test_quickstart_is_deterministic_and_seeded(tour):
    _, text = _without_torch("digits", seed=0)
    fit_times = re.compile(r" *\d+\.\d\d s")  # padded to 6 characters: 9.99 or 10.00
    assert fit_times.sub("", text) == fit_times.sub("", tour["digits"][1])
    # the seed picks the labelled samples
    y = np.arange(1000) % 10
    assert not np.array_equal(quickstart.hide_labels(y, 0.05, 0),
                              quickstart.hide_labels(y, 0.05, 1))


def test_quickstart_command_line_options(capsys):
    with pytest.raises(SystemExit) as exit_help:
        quickstart.main(["--help"])
    help_text = capsys.readouterr().out
    assert exit_help.value.code == 0
    for option in ("--dataset", "--seed", "--label-fraction"):
        assert option in help_text
    for name in quickstart.TOUR:
        assert name in help_text

    with pytest.raises(SystemExit) as exit_bad:
        quickstart.main(["--label-fraction", "2"])
    assert exit_bad.value.code == 2
    assert "--label-fraction must be between 0 and 1" in capsys.readouterr().err
    for seed in ("-1", str(2**32)):  # a traceback after the introduction, before
        with pytest.raises(SystemExit) as exit_bad:
            quickstart.main(["--seed", seed])
        assert exit_bad.value.code == 2
        assert "--seed must be between 0 and 2**32 - 1" in capsys.readouterr().err


def test_quickstart_command_runs_one_part_of_the_tour():
    result = subprocess.run(
        [sys.executable, "-m", "skdiffclust", "--dataset", "moons", "--seed", "1"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "SpanningForestClustering" in result.stdout and "Two moons" in result.stdout
    assert "Handwritten digits" not in result.stdout


def _readme_example():
    """The README's Python example and the output it says the example prints."""
    text = README.read_text()
    code = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text).group(1)
    printed = re.search(r"It prints::\n\n((?:   .*\n)+)", text).group(1)
    return _dedent(code), _dedent(printed)


def _dedent(block):
    return "\n".join(line[3:] for line in block.splitlines()).strip()


def test_readme_example_prints_what_the_readme_says():
    code, printed = _readme_example()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {})
    assert out.getvalue().strip() == printed
