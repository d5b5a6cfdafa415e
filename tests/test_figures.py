"""One source of truth for the benchmark figures: the pages show what the result
files ``benchmarks/results/*.csv`` hold.

The convention (``doc/_figures.py``): a page of ``doc/`` quotes a benchmark figure
as a substitution, e.g. ``|quality-prcut-ari|`` beside ``|quality-when|`` (its
machine, date and load), which ``conf.py`` defines from the result files at build
time, and shows a table of results as a ``csv-table`` of a file ``_figures.py``
writes from them. ``README.rst``, rendered without Sphinx, defines its few figures
itself at its end, and they must equal the generated ones.

So a figure typed by hand is findable: a timing (``12 s``, ``4.5 ms``,
``2 minutes``), a speed-up (``2.9x``, ``34 times faster``), a score (``0.71``), a
share (``97.1%``) or a memory peak (``peaks at 7 MB``, ``+623 MB``) outside code,
literals and substitution definitions. No page
holds one: a figure no result file holds is said in words.
"""

import csv
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
DOC = CHECKOUT / "doc"
GENERATED = {"auto_examples", "gen_modules", "generated", "_build", "_generated"}
GENERATED_FILES = {"sg_execution_times.rst"}

sys.path.insert(0, str(DOC))
try:
    import _figures
finally:
    sys.path.remove(str(DOC))

# ---------------------------------------------------------------- finding figures

FIGURES = {
    "timing": re.compile(
        r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?:\s(?:s|ms|µs|seconds?|minutes?|min|hours?|h)"
        r"|\s?(?:ms|µs))\b"),
    "speed-up": re.compile(
        r"(?<![\w.,])\d+(?:\.\d+)?x\b"
        r"|(?<![\w.,])\d+(?:\.\d+)?\s+times\s+(?:faster|slower|longer|shorter|less|more|as)\b"),
    # three decimals, or two after the name of a score ("ARI 0.70"): not a
    # parameter's value ("a learning rate of 0.01")
    "score": re.compile(
        r"(?<![\w.,])[01]\.\d{3,4}(?![\d.])"
        r"|\b(?:ARI|NMI|ACC|accuracy|precision|silhouette|scores?)[\s:,(]+[01]\.\d{2}(?![\d.])",
        re.IGNORECASE),
    # a share measured to a decimal from 2% up ("97.1% of its neighbours"); a
    # setting is written below it ("0.1% of the samples") or without a decimal
    "share": re.compile(r"(?<![\w.,])(?:[2-9]|[1-9]\d)\.\d+\s?%"),
    # a memory peak measured ("peaks at 7 MB", "+623 MB"); a size that follows from
    # the data or a package ("a 640 MB file", "a 192 MB wheel") is not one
    "memory": re.compile(
        r"(?:\bpeak(?:s|ed)?\s+(?:at\s+|of\s+)?(?:about\s+)?|(?<![\w.])\+\s?)"
        r"\d[\d,]*(?:\.\d+)?\s?[KMGT]i?B\b", re.IGNORECASE),
}
# directives whose content is code or output, not prose
LITERAL_DIRECTIVES = re.compile(
    r"\s*\.\.\s+(?:code-block|code|sourcecode|doctest|testcode|testoutput|literalinclude"
    r"|math|highlight|raw)::")
SUBSTITUTION_DEFINITION = re.compile(r"\s*\.\.\s+\|[^|]+\|\s+replace::")
INLINE_LITERAL = re.compile(r"``.+?``|:math:`[^`]*`|`[^`]*<[^>]*>`_|https?://\S+", re.S)
# a literal that is only a number (``0.865``) is a figure set in code type, read as
# prose; one with a name (``tol=0.001``, ``LAYER_WEIGHT = 0.001``) is a setting
BARE_NUMBER = re.compile(r"``\s*-?\d[\d,]*(?:\.\d+)?\s*``")
# pages of dated records (doc/records/): experiments as measured on their day, with
# the code of that day, which no benchmark repeats; each says so at its top
RECORDS = "records"


def _indent(line):
    return len(line) - len(line.lstrip())


def prose(text):
    """The lines of reStructuredText a reader reads as prose: without literal blocks
    (after ``::``), code directives, doctest lines, comments, substitution
    definitions and inline literals. Returns [(line number, text)]."""
    lines = text.splitlines()
    kept, skip_from = [], None  # skip_from: the indent of the block being skipped
    for number, line in enumerate(lines, 1):
        if skip_from is not None:
            if not line.strip() or _indent(line) > skip_from:
                continue
            skip_from = None
        stripped = line.strip()
        starts_block = (
            LITERAL_DIRECTIVES.match(line)
            or SUBSTITUTION_DEFINITION.match(line)
            or (stripped.startswith("..") and not re.match(r"\.\.\s+[\w:-]+::", stripped)
                and not stripped.startswith(".. _") and not stripped.startswith(".. |"))
            or (stripped.endswith("::") and not stripped.startswith("..")))
        if stripped.startswith(">>>") or stripped.startswith("..."):
            continue
        if starts_block:
            skip_from = _indent(line)
            if stripped.endswith("::") and not stripped.startswith(".."):
                kept.append((number, stripped[:-2]))  # "the text::" keeps its text
            continue
        kept.append((number, line))
    # inline literals may span lines: removed from the paragraph, lines kept
    joined = INLINE_LITERAL.sub(_literal_as_read, "\n".join(line for _, line in kept))
    return list(zip([number for number, _ in kept], joined.split("\n")))


def _literal_as_read(match):
    """An inline literal as the scan reads it: a bare number as itself, anything
    else as a space (its line breaks kept)."""
    text = match.group()
    if BARE_NUMBER.fullmatch(text):
        return text.strip("`").strip()
    return "\n" * text.count("\n") or " "


def example_prose(source):
    """An example's text: its docstring and its comment lines."""
    found = []
    docstring = re.match(r'\s*(?:r|u)?("""|\'\'\')(.*?)\1', source, re.S)
    if docstring:
        offset = source[:docstring.start(2)].count("\n")
        found += [(number + offset, line) for number, line in prose(docstring.group(2))]
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("# %%"):
            found.append((number, INLINE_LITERAL.sub(" ", stripped.lstrip("# "))))
    return found


def figures_in(lines):
    """[(line, kind, text)] of every figure typed in the lines."""
    return [(number, kind, match.group()) for number, line in lines
            for kind, pattern in FIGURES.items() for match in pattern.finditer(line)]


def page_lines(path):
    text = path.read_text(encoding="utf-8")
    return example_prose(text) if path.suffix == ".py" else prose(text)


def pages():
    found = [CHECKOUT / "README.rst"]
    for path in sorted(DOC.rglob("*.rst")):
        parts = path.relative_to(DOC).parts
        if GENERATED.isdisjoint(parts) and path.name not in GENERATED_FILES \
                and parts[0] != RECORDS:
            found.append(path)
    examples = CHECKOUT / "examples"
    return found + sorted(examples.glob("*.py")) + sorted(examples.glob("*.rst"))


def name(path):
    return path.relative_to(CHECKOUT).as_posix()


# pages with no figure typed by hand: every figure is a substitution or a csv-table
# every page of README.rst, doc/ and examples/ is strict: a figure typed by hand on
# any of them fails the test (the long guide pages' dated figures went to result
# files, or into words)
# ---------------------------------------------------------------- the scan


@pytest.mark.parametrize("text", [
    "PRCut fits in 26.8 s", "a fit takes 112 to 120 s", "0.087 s", "in 4.5 ms",
    "in about 2 minutes", "12 minutes and 5.5 GiB", "2.9x", "34 times slower",
    "ARI 0.70", "ACC 0.987 / NMI 0.962", "(0.626, 0.625)",
    "a mean NMI of ``0.865``", "from ``0.813`` to\n``0.864``",
    "97.1% of its neighbours", "for 99.99% of the points", "still 3.7% misassigned",
    "peaks at 7 MB", "it peaked at 0.15 GB", "MiniBatchKMeans +28 MB", "a peak of 38 MiB",
])
def test_the_scan_finds_typed_figures(text):
    assert figures_in(prose(text)), text


@pytest.mark.parametrize("text", [
    "10,000 x 16 points", "28 x 28 images", "Python 3.11, NumPy 2.4.6, SciPy 1.17.1",
    "2026-11-27", "ARI |quality-prcut-ari| in |quality-prcut-cpu|",
    "``learning_rate=0.01``", "``LAYER_WEIGHT = 0.001``", "``tol=1e-3``", "the 1990s", "5% of the labels", "n_init=10",
    "at most 0.1% of the samples", "0.3%, 1%, 1.5% and 10%",
    "a 2-core x86-64 CPU", "version 0.9.7",
    "a 192 MB wheel, about 790 MB installed", "a 640 MB file", "under 1 GB above it",
    "shared memory (48 KB)", "peaked at |scale-blobs-70000-prcut-peak-mib|",
    "Example::\n\n    model.fit(X)  # 0.087 s\n\nAfter.",
    ".. code-block:: python\n\n   print(0.71)\n",
    ">>> round(0.713, 2)",
    ".. |quality-prcut-ari| replace:: 0.71",
    ".. note: measured in 2.9 s\n   on the side",
])
def test_the_scan_passes_what_is_not_a_typed_figure(text):
    assert not figures_in(prose(text)), figures_in(prose(text))


def test_the_scan_reads_an_example_s_text_not_its_code():
    source = ('"""Title\n\nIt takes 15 s.\n"""\n'
              "x = 0.05  # a value\n# It scores 0.68 here.\nprint(f'{t:.2f} s')\n")
    assert [text for _, _, text in figures_in(example_prose(source))] == ["15 s", "scores 0.68"]


def _typed(path):
    return figures_in(page_lines(path))


def test_no_page_holds_a_typed_figure():
    found = {name(path): _typed(path) for path in pages()}
    found = {page: hits for page, hits in found.items() if hits}
    assert not found, "\n".join(
        f"{page}:{line}: {kind} {text!r}" for page, hits in found.items()
        for line, kind, text in hits) + (
        "\nquote the result file instead (a substitution of doc/_figures.py, or in "
        "README.rst one of its definitions at the end), or describe it in words")


def test_the_scan_reads_every_page():
    names = {name(path) for path in pages()}
    assert {"README.rst", "doc/index.rst", "doc/benchmarks.rst",
            "doc/user_guide/prcut.rst", "doc/user_guide/n_clusters.rst"} <= names
    assert any(page.startswith("examples/") for page in names)


def test_a_record_says_it_is_one_and_when():
    """The pages the scan leaves out are records: each says at its top that its
    figures were measured on their day, and which days."""
    records = sorted((DOC / RECORDS).glob("*.rst"))
    assert records
    for path in records:
        top = " ".join(path.read_text(encoding="utf-8").split("\n")[:20])
        assert "record" in top and re.search(r"\d{4}-\d\d-\d\d", top), name(path)
        assert "measured then" in top, name(path)


# ---------------------------------------------------------------- the quoted figures


@pytest.fixture(scope="module")
def generated():
    return _figures.substitutions()


SUBSTITUTION = re.compile(r"(?<![|\w])\|([A-Za-z0-9][\w.-]*?)\|(?![|\w])")
BUILTIN = {"version", "release", "today"}


def test_every_substitution_a_page_quotes_is_generated(generated):
    missing = []
    for path in pages():
        if path.suffix != ".rst" or name(path) == "README.rst":
            continue
        text = path.read_text(encoding="utf-8")
        defined = set(re.findall(r"\.\.\s+\|([^|]+)\|", text))
        for line_number, line in prose(text):  # not in literals: ``|x|`` is no quote
            for used in SUBSTITUTION.findall(line):
                if used not in generated and used not in defined and used not in BUILTIN:
                    missing.append(f"{name(path)}:{line_number}: |{used}|")
    assert not missing, "\n".join(missing) + "\nno result file gives these (doc/_figures.py)"


def test_every_included_table_is_generated():
    made = _figures.tables()
    missing = []
    for path in pages():
        if path.suffix == ".rst":
            for table in re.findall(r":file:\s*/?_generated/(\S+)", path.read_text("utf-8")):
                if table not in made:
                    missing.append(f"{name(path)}: _generated/{table}")
    assert not missing, missing


def readme_definitions(text):
    """{name: text} of the substitution definitions of README.rst."""
    return dict(re.findall(r"^\.\.\s+\|([^|]+)\|\s+replace::\s*(.*?)\s*$", text, re.M))


def readme_mismatches(text, figures):
    """Lines saying where README.rst's definitions differ from the result files'."""
    return [f"|{key}|: README.rst says {value!r}, the result files "
            f"{figures.get(key, 'nothing (no such figure)')!r}"
            for key, value in readme_definitions(text).items() if figures.get(key) != value]


def test_readme_figures_are_the_result_files(generated):
    text = (CHECKOUT / "README.rst").read_text(encoding="utf-8")
    definitions = readme_definitions(text)
    assert definitions, "README.rst quotes no figure of a result file"
    for key in definitions:
        assert f"|{key}|" in text.replace(f".. |{key}| replace::", ""), f"|{key}| is unused"
    assert not readme_mismatches(text, generated), "\n".join(
        readme_mismatches(text, generated)) + (
        "\nrun python doc/_figures.py --readme: it writes the result files' figures there")


def test_a_readme_figure_that_differs_from_its_file_is_reported(generated):
    """The check can fail: a wrong number, a figure no file gives."""
    good = f".. |quality-prcut-ari| replace:: {generated['quality-prcut-ari']}\n"
    assert readme_mismatches(good, generated) == []
    wrong = ".. |quality-prcut-ari| replace:: 0.99\n"
    assert readme_mismatches(wrong, generated)
    assert readme_mismatches(".. |quality-made-up| replace:: 1\n", generated)


# ---------------------------------------------------------------- against the files


def _rows(stem):
    with open(_figures.RESULTS / f"{stem}.csv", newline="") as file:
        return list(csv.DictReader(file))


def test_the_quality_figures_are_the_means_of_the_result_file(generated):
    """Recomputed here from the rows, as bench_quality.py prints them."""
    rows = [row for row in _rows("quality") if row["benchmark"] == "bench_quality"]
    by_dataset = defaultdict(dict)
    for row in rows:
        by_dataset[row["dataset"]][row["estimator"]] = row
    names = {row["estimator"] for row in rows}
    common = [fits for fits in by_dataset.values()
              if all(n in fits and fits[n]["ari"] for n in names)]
    assert len(common) == int(generated["quality-n"])
    for estimator in names:
        mean = sum(float(fits[estimator]["ari"]) for fits in common) / len(common)
        assert generated[f"quality-{estimator.lower()}-ari"] == f"{mean:.2f}", estimator
        cpu = sum(float(row["cpu_seconds"]) for row in rows if row["estimator"] == estimator)
        assert generated[f"quality-{estimator.lower()}-cpu"] == _figures.seconds(cpu)
    assert {row["date"] for row in rows} == {generated["quality-date"]}, \
        "the quality datasets are measured in one run"
    assert all(row["machine"] and row["date"] for row in rows)


def test_each_row_figure_is_its_cell(generated):
    for stem, prefix in (("mnist", ""), ("gpu", "gpu-")):
        for (dataset, estimator, device), row in _figures.newest(_rows(stem)).items():
            key = f"{prefix}{_figures.slug(dataset)}-{_figures.slug(estimator)}"
            key += "" if device == "cpu" else f"-{device}"
            if row.get("acc"):
                assert generated[f"{key}-acc"] == f"{float(row['acc']):.3f}", key
            if row.get("seconds"):
                assert generated[f"{key}-seconds"] == _figures.seconds(float(row["seconds"]))
            assert row["date"] in generated[f"{key}-when"]


def test_every_result_file_records_its_machine_and_date():
    for path in sorted(_figures.RESULTS.glob("*.csv")):
        rows = _rows(path.stem)
        if rows and "benchmark" in rows[0]:
            assert all(row["machine"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"])
                       for row in rows), path.name


def test_the_choosing_page_follows_the_result(generated):
    """The first row's advice is the result's, whichever way it goes."""
    summary = {"PRCut": {"ari": 0.80, "cpu": 30.0}, "Spectral": {"ari": 0.70, "cpu": 1.0}}
    assert _figures.quality_advice(summary)["quality-use-side"] == "skdiffclust"
    summary["PRCut"]["ari"] = 0.71
    assert _figures.quality_advice(summary)["quality-use-name"] == "SpectralClustering"
    choosing = (DOC / "user_guide" / "choosing.rst").read_text(encoding="utf-8")
    assert "|quality-use|" in choosing and "|quality-verdict|" in choosing
