"""Imports flow one way through rfed: manifolds <- privacy <- algorithms; networks, problems,
datasets <- algorithms <- engines, experiments <- cli.

Every import statement of every module counts, the ones inside functions and under
``TYPE_CHECKING`` too (a lazy import that runs up the layers is still a dependency the wrong way),
and so does ``importlib.import_module("rfed....")``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rfed"

#: Modules at the bottom, importable from anywhere: they import no other module of rfed.
FOUNDATION = ("rfed", "_checks", "_docstrings", "_einsum", "_io", "_malloc", "bibliography",
              "randomness")

#: Each of rfed's packages (and top-level modules) with the units it may import directly;
#: what those may import, it may import too. Its own unit and FOUNDATION are always allowed.
ALLOWED: dict[str, tuple[str, ...]] = {
    "manifolds": (),
    "networks": ("manifolds",),
    "datasets": ("manifolds",),
    "optim": ("manifolds",),
    "problems": ("manifolds", "datasets"),
    "privacy": ("manifolds",),
    "state": ("privacy",),
    "algorithms": ("networks", "datasets", "optim", "problems", "privacy", "state"),
    "engines": ("algorithms",),
    "experiments": ("algorithms", "engines"),
    "cli": ("experiments",),
    "__main__": ("cli",),
}


def _closure() -> dict[str, set[str]]:
    reach: dict[str, set[str]] = {}

    def visit(unit: str) -> set[str]:
        if unit not in reach:
            out = {unit, *FOUNDATION}
            for dep in ALLOWED[unit]:
                out |= visit(dep)
            reach[unit] = out
        return reach[unit]

    for unit in ALLOWED:
        visit(unit)
    for unit in FOUNDATION:
        reach[unit] = {unit, "rfed"}
    return reach


def _unit(module: str) -> str:
    """``rfed.privacy.audit`` -> ``privacy``; ``rfed`` -> ``rfed``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, module imported)`` for every import of an rfed module in ``tree``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: from the package holding this module
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
        elif (isinstance(node, ast.Call) and node.args
              and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"):
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) and arg.values:
                arg = arg.values[0]   # f"rfed.experiments.{name}": its fixed prefix
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((node.lineno, arg.value.rstrip(".")))
    return [(line, name) for line, name in out if name == "rfed" or name.startswith("rfed.")]


def upward_imports(root: Path) -> tuple[list[str], list[str]]:
    """The imports of the package at ``root`` that run against :data:`ALLOWED`, and the units
    that :data:`ALLOWED` does not place.

    Returns
    -------
    (list of str, list of str)
        ``"path:line: rfed.a.b imports rfed.c.d (a may not import c)"`` for each offending
        import; the names of the unplaced units.
    """
    reach = _closure()
    bad, unplaced = [], set()
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        unit = _unit(module)
        if unit not in reach:
            unplaced.add(unit)
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imported(tree, module, path.name == "__init__.py"):
            target = _unit(name)
            if target not in reach[unit]:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {module} imports {name} "
                           f"({unit} may not import {target})")
    return bad, sorted(unplaced)


def test_no_import_runs_up_the_layers():
    bad, unplaced = upward_imports(ROOT)
    assert not unplaced, (f"place the new units {unplaced} in ALLOWED (tests/test_layers.py): "
                          "what may they import, and who may import them?")
    assert not bad, "imports that run up the layers:\n" + "\n".join(bad)


def test_the_layers_form_one_way_order():
    """No two units may import each other: the allowed graph has no cycle."""
    reach = _closure()
    for unit, below in reach.items():
        for other in below - {unit}:
            assert unit not in reach[other], f"{unit} and {other} may import each other"


@pytest.mark.parametrize("source, offending", [
    ("from rfed.algorithms.base import Algorithm\n", True),
    ("def f():\n    from rfed.experiments import registry\n", True),          # lazy
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from rfed.problems.base import Problem\n", True),
    ("import importlib\nimportlib.import_module(f'rfed.engines.{x}')\n", True),
    ("from . import sphere\nfrom rfed.manifolds.base import Manifold\n", False),
    ("from rfed._io import atomic_write_text\nimport numpy\n", False),
])
def test_the_check_catches_an_import_up_the_layers(tmp_path, source, offending):
    """The check itself: a module of ``manifolds`` importing from above is reported, lazy or
    not; imports of its own package and of the foundation are not."""
    pkg = tmp_path / "rfed" / "manifolds"
    pkg.mkdir(parents=True)
    (tmp_path / "rfed" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "new.py").write_text(source)
    bad, unplaced = upward_imports(tmp_path / "rfed")
    assert unplaced == []
    assert bool(bad) is offending, bad
    if offending:
        assert "rfed/manifolds/new.py" in bad[0] and "manifolds may not import" in bad[0]


def test_a_new_unit_must_be_placed(tmp_path):
    (tmp_path / "rfed").mkdir()
    (tmp_path / "rfed" / "__init__.py").write_text("")
    (tmp_path / "rfed" / "federation.py").write_text("import rfed\n")
    assert upward_imports(tmp_path / "rfed") == ([], ["federation"])


def test_the_developer_page_states_the_layers_of_this_test():
    """docs/developer.md's table "may import directly" is :data:`ALLOWED`, row for row."""
    page = (ROOT.parent / "docs" / "developer.md").read_text(encoding="utf-8")
    table = page.split("| unit | may import directly |", 1)[1].split("\n\n", 1)[0]
    stated = {}
    for row in table.strip().splitlines()[1:]:           # the first line is |---|---|
        unit, allowed = (cell.strip() for cell in row.strip().strip("|").split("|"))
        unit = unit.replace("\\_", "_")
        stated[unit] = tuple(a.strip() for a in allowed.split(",") if a.strip())
    assert stated == ALLOWED
