"""The documentation's pages: code that runs, every experiment described, the papers cited.

* every ```python block of the hand-written pages runs (each in a fresh namespace, in a temporary
  folder), and a number in a trailing comment of a top-level expression or assignment must be the
  value computed, to the digits shown (as README.md's blocks, tests/test_readme.py);
* every experiment of ``rfed list`` is on the experiments page;
* every paper's page names its algorithm's class and cites the paper by its arXiv identifier.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from rfed.bibliography import PAPERS
from rfed.experiments import list_experiments

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md")
               if not {"_build", "api", "tutorials", "results"} & set(p.relative_to(DOCS).parts))
_BLOCK = re.compile(r"((?:<!--[^\n]*-->\n)*)```python\n(.*?)```", re.S)
_SKIP = re.compile(r"<!-- docs-test: skip \((.+?)\) -->")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _blocks():
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text[: match.start(2)].count("\n") + 1
            skip = _SKIP.search(match.group(1))
            out.append(pytest.param(match.group(2), skip.group(1) if skip else None,
                                    id=f"{page.relative_to(DOCS)}:{line}"))
    return out


def _check_comment(lines, stmt, value):
    comment = lines[stmt.end_lineno - 1].partition("#")[2]
    match = _NUMBER.search(comment)
    if not match or isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        return
    shown = match.group(0).replace("_", "")
    decimals = len(shown.split(".")[1].split("e")[0]) if "." in shown else 0
    scale = 10.0 ** int(shown.split("e")[1]) if "e" in shown else 1.0
    assert abs(float(value) - float(shown)) <= 0.5 * 10.0 ** -decimals * scale * (1 + 1e-9), (
        f"'{lines[stmt.end_lineno - 1].strip()}': computed {value!r}")


BLOCKS = _blocks()


def test_the_pages_have_code():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("body, skip", BLOCKS)
def test_page_code_block_runs(body, skip, tmp_path, monkeypatch):
    if skip:
        pytest.skip(skip)
    monkeypatch.chdir(tmp_path)
    tree = ast.parse(body)
    lines = body.splitlines()
    # a real module, as a reader's script is (dataclasses look their module up), compiled
    # without this file's `from __future__ import annotations`
    module = types.ModuleType("__docs__")
    monkeypatch.setitem(sys.modules, "__docs__", module)
    namespace = module.__dict__
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr):
            code = compile(ast.Expression(stmt.value), "docs", "eval", dont_inherit=True)
            value = eval(code, namespace)
        else:
            exec(compile(ast.Module([stmt], []), "docs", "exec", dont_inherit=True), namespace)
            value = None
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                value = namespace[stmt.targets[0].id]
        _check_comment(lines, stmt, value)


def test_every_experiment_is_on_the_experiments_page():
    text = (DOCS / "guide" / "experiments.md").read_text(encoding="utf-8")
    missing = [e.name for e in list_experiments() if f"`{e.name}`" not in text]
    assert missing == []


@pytest.mark.parametrize("key, cls", [("prirfed", "PriRFed"), ("doadp", "DOADP"),
                                      ("dpdl", "DPDL"), ("dpdda", "DPDDA"), ("dpdgt", "DPDGT")])
def test_each_paper_page_cites_its_paper_and_names_its_class(key, cls):
    text = (DOCS / "papers" / f"{key}.md").read_text(encoding="utf-8")
    flat = " ".join(text.split())
    assert PAPERS[key].arxiv in flat and PAPERS[key].title in flat
    assert f".{cls}`" in text
    labels = re.findall(r"^\(([\w-]+)\)=$", text, re.M)
    assert len(labels) >= 8 and len(set(labels)) == len(labels)
    assert all(label.startswith(f"{key}-") or label == f"papers-{key}" for label in labels)


def test_optional_pages_are_left_out_until_they_exist(tmp_path):
    """Pages other helpers write arrive later: their toctree lines and links are dropped while
    the file is missing, and kept as soon as it exists (docs/_ext/rfed_docs.py)."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(DOCS / "_ext"))
    pytest.importorskip("docutils")
    import rfed_docs

    (tmp_path / "guide").mkdir()
    app = SimpleNamespace(srcdir=str(tmp_path),
                          config=SimpleNamespace(rfed_optional_pages=["guide/scale",
                                                                      "guide/flower"]))
    text = ("```{toctree}\nprivacy\nscale\nflower\n```\n"
            "See [the scale page](scale.md#top) and [Flower](flower.md).\n")
    (tmp_path / "guide" / "flower.md").write_text("# Flower\n")
    source = [text]
    rfed_docs._drop_missing_optional_pages(app, "guide/index", source)
    assert source[0] == ("```{toctree}\nprivacy\nflower\n```\n"
                         "See the scale page (page to come) and [Flower](flower.md).\n")
