"""No user-facing text points at documents outside the repository (tools/check_references.py).

The CLI's output and every comment and string of every module under ``rfed/`` are clean and must
stay so: a reference reintroduced anywhere fails, and ``python tools/check_references.py`` prints
each with its file and line. Cite the paper's equation, section or algorithm, or a label of
``docs/papers/`` (``tools/reference_labels.json`` maps the working notes' items to those labels).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import check_references  # noqa: E402

FOUND = {
    "spec": ["see spec 000 section 3.7", "the spec's resolution", "(spec pitfall 11)",
             "spec P7 says", "Spec 004 pitfall 15: the paper", "as spec 5.2 states"],
    "specs-path": ["specs/anchors_manifolds.md section 4", "see specs/004_prirfed.md"],
    "seed": ["PriRFed (seed 004), Fig. 1", "DO-ADP (seed 000)"],
    "pitfall": ["(P20)", "resolution P4: a matching", "pitfall 13", "P12-P13"],
    "line": ["paper L486", "[L48]", "(L233-239; eq. 7)"],
    "issue": ["(issue 11)", "issue #9's must-show", "issues 3, 5"],
    "citation-key": ["[HMJG24 Sec 5.1]", "[UHJM23, Claim 5]"],
}

CLEAN = [
    "Algorithm 1 line 2 of the paper; eq. (3.2); Sec. 6.1; Fig. 2(a); Table I; Theorem 4.2",
    "L_g = 2 B^2 and the L2 norm; L1 regularizer; L-BFGS",
    "parallel transport P_{x->y}; the matrix P; P^{1/2} S P^{1/2}",
    "Open MPI issue #14452 (a public tracker, named with its project)",
    "importlib.util.find_spec('geomstats'); an EventSpec; the event's spec object",
    "seed 0, 10 repetitions; --seed 42",
    "Canonne, Kamath and Steinke (NeurIPS 2020), Algorithm 1",
]


@pytest.mark.parametrize("kind, texts", FOUND.items())
def test_checker_finds_every_kind(kind, texts):
    for text in texts:
        kinds = {hit.kind for hit in check_references.find_in_text(text, "<sample>")}
        assert kind in kinds, f"{text!r}: found {kinds or 'nothing'}"


@pytest.mark.parametrize("text", CLEAN)
def test_checker_leaves_legitimate_text_alone(text):
    assert check_references.find_in_text(text, "<sample>") == []


def test_checker_reads_comments_and_strings_only(tmp_path):
    source = tmp_path / "module.py"
    source.write_text('"""Docstring citing spec 003."""\n\nspec = 1  # see P20\nP20 = spec\n'
                      'x = "text (issue 4)"\n')
    hits = check_references.find_in_python(source)
    assert [(h.line, h.kind) for h in hits] == [(1, "spec"), (3, "pitfall"), (5, "issue")]


def test_checker_finds_a_reference_wrapped_over_two_lines():
    hits = check_references.find_in_text("the noise of\n    issue\n    11 and more", "<sample>")
    assert [(h.line, h.kind) for h in hits] == [(2, "issue")]


def test_cli_output_has_no_internal_references():
    outputs = check_references.cli_outputs()
    assert "rfed list" in outputs and len(outputs) > 10
    hits = check_references.find_in_cli()
    assert hits == [], "\n".join(map(str, hits))


def test_package_has_no_internal_references():
    hits = check_references.find_in_package()
    assert hits == [], f"{len(hits)} references in rfed/, e.g.\n" + "\n".join(map(str, hits[:20]))


def test_the_package_sweep_reaches_nested_modules(tmp_path):
    """The whole-package test is not vacuous: a reference deep in a subpackage is found."""
    nested = tmp_path / "pkg" / "sub" / "deeper"
    nested.mkdir(parents=True)
    (tmp_path / "pkg" / "clean.py").write_text('"""Algorithm 1 of the paper."""\n')
    (nested / "module.py").write_text('def f():\n    """As spec 004 says."""\n')
    hits = check_references.find_in_package(tmp_path / "pkg")
    assert [(h.where.endswith("module.py"), h.line, h.kind) for h in hits] == [(True, 2, "spec")]


def test_every_label_of_the_sweep_map_exists_in_the_papers_pages():
    import json
    import re

    labels = set()
    for page in (ROOT / "docs" / "papers").glob("*.md"):
        labels |= set(re.findall(r"^\(([\w-]+)\)=$", page.read_text(encoding="utf-8"), re.M))
    mapping = json.loads((ROOT / "tools" / "reference_labels.json").read_text())
    missing = {k: v for k, v in mapping.items() if not k.startswith("_") and v not in labels}
    assert missing == {}
