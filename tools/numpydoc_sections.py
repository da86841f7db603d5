"""Public names whose docstring lacks the numpydoc Parameters or Returns section.

A public name is a module-level function or class, or a method of a public class, whose name
does not start with ``_``, in a module whose name does not start with ``_`` (``__init__.py``
included). Parameters are required when the callable takes an argument (besides ``self`` or
``cls``), Returns when it returns a value; properties need neither. A method without a docstring
that overrides a documented method of an rfed base class counts as documented (Sphinx shows the
inherited docstring); one decorated with ``@sections_from(Base.method)`` gets that method's
sections (:mod:`rfed._docstrings`); a ``typing.overload`` signature and a property's setter are
skipped (Sphinx shows the implementation's, the property's docstring); a dataclass may document
its fields under Attributes. Usage::

    python tools/numpydoc_sections.py rfed/privacy rfed/manifolds ...

prints one line per name and the totals per kind.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _needs(fn: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> tuple[bool, bool]:
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    if is_method and args and args[0] in ("self", "cls"):
        args = args[1:]
    if fn.args.vararg:
        args.append(fn.args.vararg.arg)
    if fn.args.kwarg:
        args.append(fn.args.kwarg.arg)
    decorators = [ast.unparse(d) for d in fn.decorator_list]
    is_property = any(d.endswith("property") or d.endswith(".setter") for d in decorators)
    if fn.returns is not None:
        returns = ast.unparse(fn.returns) not in ("None", "NoReturn")
    else:
        returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))
    if fn.name == "__init__":
        returns = False
    return bool(args) and not is_property, returns and not is_property


def _is_overload(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``typing.overload`` signature or a property's setter: Sphinx documents the
    implementation's (the property's) docstring."""
    return any(ast.unparse(d).split(".")[-1] in ("overload", "setter", "deleter")
               for d in fn.decorator_list)


def _shared_sections(table, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The docstring whose sections ``@sections_from(Class.method)`` appends to ``fn``'s
    (:func:`rfed._docstrings.sections_from`), looked up like an inherited one."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and ast.unparse(dec.func).split(".")[-1] == "sections_from" \
                and dec.args:
            cls, _, name = ast.unparse(dec.args[0]).rpartition(".")
            cls = cls.split(".")[-1]
            return table.get(cls, ([], {}))[1].get(name) or _inherited(table, cls, name)
    return None


def _missing(doc: str | None, want_params: bool, want_returns: bool) -> list[str]:
    doc = doc or ""
    missing = [] if doc else ["docstring"]
    if want_params and "Parameters\n" not in doc:
        missing.append("Parameters")
    if want_returns and "Returns\n" not in doc and "Yields\n" not in doc:
        missing.append("Returns")
    return missing


def _class_table() -> dict[str, tuple[list[str], dict[str, str | None]]]:
    table: dict[str, tuple[list[str], dict[str, str | None]]] = {}
    for path in (ROOT / "rfed").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = {f.name: ast.get_docstring(f, clean=True) for f in node.body
                           if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                table.setdefault(node.name, (bases, methods))
    return table


def _inherited(table, cls: str, name: str, seen: tuple[str, ...] = ()) -> str | None:
    for base in table.get(cls, ([], {}))[0]:
        if base in seen:
            continue
        doc = table.get(base, ([], {}))[1].get(name) or _inherited(table, base, name,
                                                                   seen + (base,))
        if doc:
            return doc
    return None


def scan(path: Path, table) -> list[tuple[str, list[str], str]]:
    """``(where, missing sections, kind)`` for every public name of one module."""
    out = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and not node.name.startswith("_") and not _is_overload(node):
            missing = _missing(ast.get_docstring(node, clean=True), *_needs(node, False))
            if missing:
                out.append((f"{path}:{node.lineno} {node.name}", missing, "function"))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            init = next((n for n in node.body
                         if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            fields = [n for n in node.body if isinstance(n, ast.AnnAssign)]
            dataclass = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            want = (init is not None and _needs(init, True)[0]) or (dataclass and bool(fields))
            doc = ast.get_docstring(node, clean=True) or ""
            if init is not None and "Parameters\n" in (ast.get_docstring(init, clean=True) or ""):
                doc += "\nParameters\n"
            if dataclass and "Attributes\n" in doc:
                doc += "\nParameters\n"
            missing = _missing(doc, want, False) if doc.strip() else ["docstring"]
            if missing:
                out.append((f"{path}:{node.lineno} {node.name}", missing, "class"))
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and not sub.name.startswith("_") and not _is_overload(sub):
                    doc = ast.get_docstring(sub, clean=True) or _inherited(table, node.name,
                                                                           sub.name)
                    shared = _shared_sections(table, sub)
                    if shared:
                        doc = f"{doc or ''}\n{shared}"
                    missing = _missing(doc, *_needs(sub, True))
                    if missing:
                        out.append((f"{path}:{sub.lineno} {node.name}.{sub.name}", missing,
                                    "method"))
    return out


def main(argv: list[str]) -> int:
    table = _class_table()
    files: list[Path] = []
    for arg in argv or ["rfed"]:
        p = Path(arg)
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    found = []
    for f in files:
        if any(part.startswith("_") and part != "__init__.py" for part in f.parts):
            continue
        found += scan(f, table)
    for where, missing, kind in found:
        print(kind, where, missing)
    print("missing:", dict(collections.Counter(kind for _, _, kind in found)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
