"""The snippets of the user guide "The objectives in your own torch model" run, and
reach what the page says they do (so that they cannot rot)."""

import re
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

PAGE = Path(__file__).resolve().parents[1] / "doc" / "user_guide" / "torch_objectives.rst"
# what each snippet computes last, in the page's order, and the least it must reach
# (a number, True, or the name of another of its results: ClAM after a joint
# training against KMeans on the pre-trained code)
EXPECTED = [("ari", 0.9), ("ari", 0.95), ("ari", 0.95), ("ari", 0.95),
            ("accuracy", "kmeans_accuracy"), ("same", True)]


def _snippets():
    """The code of every ``.. code-block:: python`` of the page, dedented."""
    blocks = re.findall(r"^\.\. code-block:: python\n\n((?:(?: {4}.*)?\n)+)",
                        PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return [textwrap.dedent(block) for block in blocks]


def test_the_page_has_one_snippet_per_objective():
    snippets = _snippets()
    assert len(snippets) == len(EXPECTED)
    for name in ("partial_fenchel_young_loss", "PRCutLoss", "gemini_loss", "clam_loss",
                 "BatchNorm1d", "from_estimator"):
        assert any(name in snippet for snippet in snippets)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_the_snippet_runs_and_reaches_what_the_page_says(index):
    name, least = EXPECTED[index]
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. an estimator's ConvergenceWarning
        exec(compile(_snippets()[index], f"{PAGE.name}[{index}]", "exec"), namespace)
    if least is True:
        assert namespace[name] is True
    else:
        assert namespace[name] >= namespace.get(least, least)
    assert isinstance(namespace.get("torch"), type(torch))
