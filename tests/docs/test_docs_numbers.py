"""Every measured number the documentation quotes equals its results file.

(``docs/generate_results.py check``.)

The quotes are ``{measured}`VALUE <SOURCE>``` roles in the pages; the generated fragments
(``docs/results/NAME/results.md``) and the bibliography page must equal what their sources give.
The last test edits a quoted number by hand, as someone updating prose without rerunning would,
and checks that the check catches it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import generate_results  # noqa: E402
import measured  # noqa: E402


def test_every_quote_fragment_and_the_bibliography_agree_with_their_sources():
    problems = generate_results.check()
    assert problems == [], "\n".join(problems)


def test_the_pages_quote_measured_numbers_and_every_results_folder_has_its_command():
    quotes = [q for page in measured.pages() for q in measured.quotes(page)]
    assert len(quotes) >= 10
    for folder in generate_results.experiments():
        prov = (generate_results.RESULTS / folder / "provenance.json").read_text()
        name = json.loads((generate_results.RESULTS / folder / "summary.json").read_text())[
            "experiment"]
        assert f'"rfed run {name}' in prov and '"commit": "' in prov
        assert folder == name or folder.startswith(name + "-")   # e.g. NAME-paper-ring


def test_import_replaces_a_folders_files_and_keeps_its_subfolders(tmp_path, monkeypatch):
    """`import NAME RUN --into FOLDER` writes docs/results/FOLDER; importing again replaces the
    files there but keeps its subfolders."""
    monkeypatch.setattr(generate_results, "RESULTS", tmp_path / "results")
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"experiment": "dpdl-digits", "summary": {}}')
    (run / "summary_table.csv").write_text("setting,utility\nA,1\n")
    (run / "history.csv").write_text("not copied\n")
    out = generate_results.import_run("dpdl-digits", run, "rfed run dpdl-digits --set "
                                      "scale=paper-ring", into="dpdl-digits-other-grid")
    assert out == tmp_path / "results" / "dpdl-digits-other-grid"
    assert sorted(p.name for p in out.iterdir()) == ["provenance.json", "summary.json",
                                                     "summary_table.csv"]
    (out / "sub").mkdir()
    (out / "sub" / "table.csv").write_text("a\n1\n")
    (out / "stale.csv").write_text("a\n1\n")
    generate_results.import_run("dpdl-digits", run, None, into="dpdl-digits-other-grid")
    assert (out / "sub" / "table.csv").exists() and not (out / "stale.csv").exists()
    # a second run of the same experiment goes into a subfolder, which the first keeps
    nested = generate_results.import_run("dpdl-digits", run, None,
                                         into="dpdl-digits-other-grid/second")
    assert nested == out / "second" and (nested / "summary_table.csv").exists()
    generate_results.import_run("dpdl-digits", run, None, into="dpdl-digits-other-grid")
    assert (nested / "summary_table.csv").exists()
    for bad in ("a/b/c", "", ".hidden", "a/../b", "a//b", "/abs", "a/.b"):
        with pytest.raises(SystemExit, match="--into"):
            generate_results.import_run("dpdl-digits", run, None, into=bad)


def test_import_bench_records_the_commit_that_ran(tmp_path, monkeypatch):
    monkeypatch.setattr(generate_results, "RESULTS", tmp_path / "results")
    table = tmp_path / "bench_x.txt"
    table.write_text("row 1.0\n")
    head = generate_results._git("rev-parse", "HEAD")
    parent = generate_results._git("rev-parse", "HEAD~1")
    if "unknown" in (head, parent):
        pytest.skip("not a git checkout with a parent commit")
    out = generate_results.import_bench(table, "python benchmarks/bench_x.py", "HEAD~1")
    text = out.read_text()
    assert f"# commit: {parent}\n" in text and head not in text and text.endswith("row 1.0\n")


@pytest.mark.parametrize("value, actual, ok", [
    ("19.9", 19.944, True), ("19.9", 19.96, False), ("2.8e-3", 0.0028078, True),
    ("2.8e-3", 0.00286, False), ("95%", 0.9524, True), ("96%", 0.9524, False),
    ("0.76", 0.7593, True), ("1,234", 1234.4, True), ("361", 360.4, False),
])
def test_a_quote_agrees_with_its_source_at_the_precision_it_shows(value, actual, ok):
    assert measured.agrees(value, actual) is ok


@pytest.mark.parametrize("value, actual, printed", [
    ("19.9", 60.6712, "60.7"), ("2.8e-3", 0.00063360, "6.3e-4"), ("95%", 0.99531, "100%"),
    ("0.76", 0.7593, "0.76"), ("1,234", 12345.6, "12,346"),
])
def test_reprint_keeps_the_format_of_the_quote(value, actual, printed):
    assert measured.reprint(value, actual) == printed
    assert measured.agrees(printed, actual)


def test_a_source_that_names_no_single_row_is_an_error():
    with pytest.raises(measured.QuoteError, match="rows match"):
        measured.resolve("pca-synthetic[certified eps].utility")
    with pytest.raises(measured.QuoteError, match="no column"):
        measured.resolve("pca-synthetic[non-private].nonsense")
    with pytest.raises(measured.QuoteError, match="no results"):
        measured.resolve("no-such-experiment[x].utility")


def test_editing_a_quoted_number_by_hand_fails_the_check(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("_build", "api",
                                                                       "tutorials"))
    page = docs / "guide" / "experiments.md"
    text = page.read_text(encoding="utf-8")
    original = "{measured}`38.9 <dpdl-digits[DPDL bipartite planned eps<=2].utility>`"
    assert original in text
    assert measured.check_pages(docs, docs / "results") == []
    page.write_text(text.replace(original, original.replace("38.9", "40.9")), encoding="utf-8")
    problems = measured.check_pages(docs, docs / "results")
    assert len(problems) == 1 and "38.864" in problems[0] and "40.9" in problems[0]
    # the regeneration prints it again from its source
    assert measured.rewrite_pages(docs, docs / "results") == [page]
    assert measured.check_pages(docs, docs / "results") == []
    assert page.read_text(encoding="utf-8") == text


def test_editing_a_generated_table_by_hand_fails_the_check(tmp_path, monkeypatch):
    results = tmp_path / "results"
    shutil.copytree(generate_results.RESULTS, results)
    monkeypatch.setattr(generate_results, "RESULTS", results)
    fragment = results / "dpdl-digits" / "results.md"
    fragment.write_text(fragment.read_text().replace("38.86", "40.86"), encoding="utf-8")
    problems = generate_results.check()
    assert any("dpdl-digits/results.md" in p for p in problems)


def test_a_benchmark_output_and_a_summary_value_are_sources_too(tmp_path):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "bench_gossip.txt").write_text("# command: python benchmarks/bench_gossip.py\n"
                                            "rfed / bare CSR W @ X   4.72x\n")
    assert measured.resolve(r"bench:bench_gossip.txt:CSR W @ X\s+([\d.]+)x", tmp_path) == 4.72
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "summary.json").write_text('{"summary": {"a": {"b/c": 0.25}}}')
    assert measured.resolve("exp:a/b~1c", tmp_path) == 0.25


def test_a_table_in_a_subfolder_of_a_results_folder_is_a_source(tmp_path):
    for folder, value in ((tmp_path / "exp", "1.5"), (tmp_path / "exp" / "sub", "2.5")):
        folder.mkdir(parents=True)
        (folder / "tuning.csv").write_text(f"algorithm,step,chosen\nA,{value},True\n")
    assert measured.resolve("exp/tuning[A & True].step", tmp_path) == 1.5
    assert measured.resolve("exp/sub/tuning[A & True].step", tmp_path) == 2.5


def test_cells_joined_by_and_prefer_the_row_that_equals_them(tmp_path):
    """[0.3 & 1.0] names the row whose cells are 0.3 and 1.0 even when another row's longer
    cells contain them (0.35...); still an error when no single row equals them."""
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "tuning.csv").write_text(
        "step,eps,score\n0.3,1.0,7\n0.01,1.0,0.35\n0.3,8.0,0.1\n")
    assert measured.resolve("exp/tuning[0.3 & 1.0].score", tmp_path) == 7
    with pytest.raises(measured.QuoteError, match="2 rows match"):
        measured.resolve("exp/tuning[0.3].score", tmp_path)
    (tmp_path / "exp" / "tuning.csv").write_text("step,eps,score\n0.35,1.0,7\n0.3x,1.0,8\n")
    with pytest.raises(measured.QuoteError, match="2 rows match"):
        measured.resolve("exp/tuning[0.3 & 1.0].score", tmp_path)
