"""The API reference, generated at build time from the ``__all__`` of every public module.

A public module is one whose dotted path has no component starting with ``_``. Every name in its
``__all__`` is documented once, under the shortest public path that exports the same object
(``rfed.manifolds.Sphere`` rather than ``rfed.manifolds.sphere.Sphere``); a cross-reference to any
other public path of the same object is resolved to that one (:func:`resolve_alias`). One page per
subpackage is written to ``docs/api/`` before Sphinx reads the sources, so the reference can never
miss a name that ``__all__`` exports.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Pages of the reference, in order: (page name, title, module prefixes it holds).
PAGES = [
    ("manifolds", "Manifolds", ("rfed.manifolds",)),
    ("optim", "Riemannian optimizers", ("rfed.optim",)),
    ("privacy", "Privacy", ("rfed.privacy",)),
    ("networks", "Networks and gossip", ("rfed.networks",)),
    ("problems", "Problems", ("rfed.problems",)),
    ("datasets", "Datasets", ("rfed.datasets",)),
    ("algorithms", "Algorithms", ("rfed.algorithms",)),
    ("engines", "Engines: in one process, on MPI and on Flower", ("rfed.engines",)),
    ("experiments", "Experiments", ("rfed.experiments",)),
    ("package", "The package, its command line, keyed randomness, saved states and citations",
     ("rfed", "rfed.cli", "rfed.randomness", "rfed.bibliography", "rfed.state")),
]


def public_modules() -> list[str]:
    """Every importable public module of rfed, sorted (packages before their submodules)."""
    import rfed

    names = ["rfed"]
    for info in pkgutil.walk_packages(rfed.__path__, "rfed."):
        if any(part.startswith("_") for part in info.name.split(".")):  # also __main__
            continue
        names.append(info.name)
    return sorted(names)


@dataclass
class Entry:
    """One documented object: its documented path and every other public path to it."""

    path: str
    kind: str
    aliases: list[str] = field(default_factory=list)


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj) or callable(obj):
        return "function"
    return "data"


def collect() -> tuple[dict[str, list[Entry]], dict[str, str]]:
    """(module -> entries documented in its section, every public path -> documented path)."""
    exported: dict[tuple[int, str], list[str]] = {}   # (id(obj), name) -> module paths
    objects: dict[tuple[int, str], object] = {}
    for mod_name in public_modules():
        module = importlib.import_module(mod_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue  # documented by its own automodule
            key = (id(obj), name) if _kind(obj) != "data" else (id(module), name)
            exported.setdefault(key, []).append(mod_name)
            objects[key] = obj
    by_module: dict[str, list[Entry]] = {}
    alias: dict[str, str] = {}
    for key, mods in exported.items():
        obj, name = objects[key], key[1]
        home = min(mods, key=lambda m: (m.count("."), m))
        path = f"{home}.{name}"
        entry = Entry(path, _kind(obj), [f"{m}.{name}" for m in mods if m != home])
        by_module.setdefault(home, []).append(entry)
        for other in mods:
            alias[f"{other}.{name}"] = path
        defining = getattr(obj, "__module__", None)
        if entry.kind != "data" and defining and getattr(obj, "__qualname__", name) == name:
            alias.setdefault(f"{defining}.{name}", path)
    for entries in by_module.values():
        entries.sort(key=lambda e: e.path.rsplit(".", 1)[1].lower())
    return by_module, alias


def _directive(entry: Entry) -> str:
    obj = _resolve(entry.path)
    if entry.kind == "class":
        text = f".. autoclass:: {entry.path}\n   :members:\n   :show-inheritance:\n"
    elif entry.kind == "exception":
        text = f".. autoexception:: {entry.path}\n   :show-inheritance:\n"
    elif entry.kind == "function":
        text = f".. autofunction:: {entry.path}\n"
    else:
        text = f".. autodata:: {entry.path}\n"
        if len(repr(obj)) > 60:
            text += "   :no-value:\n"
    if entry.aliases:
        text += "\n   Also importable as " + ", ".join(f"``{a}``" for a in entry.aliases) + ".\n"
    return text


def _resolve(path: str):
    mod_name, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(mod_name), name)


def _title(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def _page(title: str, prefixes: tuple[str, ...], by_module: dict[str, list[Entry]],
          modules: list[str]) -> str:
    def belongs(mod: str) -> bool:
        return any(mod == p or (p != "rfed" and mod.startswith(p + ".")) for p in prefixes)

    mine = [m for m in modules if belongs(m)]
    out = [".. This page is generated by docs/_ext/rfed_api.py at every build; do not edit.\n",
           _title(title, "=")]
    for mod in mine:
        entries = by_module.get(mod, [])
        module = importlib.import_module(mod)
        if not entries and not (module.__doc__ or "").strip():
            continue
        out.append(_title(f"``{mod}``", "-"))
        out.append(f".. automodule:: {mod}\n   :no-members:\n")
        if entries:
            out.append(_summary_table(entries))
            for entry in entries:
                out.append(_directive(entry))
    return "\n".join(out)


def _first_sentence(obj) -> str:
    """The docstring's first sentence, or '' when cutting it would break its markup."""
    doc = inspect.getdoc(obj) or ""
    para = " ".join(doc.strip().split("\n\n", 1)[0].split())
    # a sentence ends at '. ' outside inline literals and roles
    end = len(para)
    for match in re.finditer(r"``.*?``|`[^`]*`|\.(?=\s|$)", para):
        if match.group(0) == ".":
            end = match.end()
            break
    text = para[:end]
    if text.count("`") % 2 or text.count("*") % 2 or text.count("|") % 2:
        return ""
    return text


def _summary_table(entries: list[Entry]) -> str:
    rows = []
    for entry in entries:
        obj = _resolve(entry.path)
        summary = _first_sentence(obj) if entry.kind != "data" else ""
        rows.append(f"   * - :py:obj:`~{entry.path}`\n     - {summary}\n")
    return ".. list-table::\n   :widths: 30 70\n\n" + "".join(rows)


def write_pages(out_dir: Path) -> dict[str, str]:
    """Write ``index.rst`` and one page per entry of :data:`PAGES`; return the alias map."""
    by_module, alias = collect()
    modules = public_modules()
    placed = {m for m in modules for _, _, prefixes in PAGES
              if any(m == p or (p != "rfed" and m.startswith(p + ".")) for p in prefixes)}
    if set(modules) - placed:
        raise RuntimeError(f"public modules on no page of the API reference: "
                           f"{sorted(set(modules) - placed)} (add them to PAGES in {__file__})")
    out_dir.mkdir(parents=True, exist_ok=True)
    toc = []
    for page, title, prefixes in PAGES:
        text = _page(title, prefixes, by_module, modules)
        _write_if_changed(out_dir / f"{page}.rst", text)
        toc.append(f"   {page}")
    index = (".. This page is generated by docs/_ext/rfed_api.py at every build; do not edit.\n\n"
             + _title("API reference", "=")
             + "\nEvery public name of rfed (every name in a public module's ``__all__``), "
             "documented from its docstring. A name is listed under the shortest path that "
             "exports it; the paths it is also importable from are given with it.\n\n"
             ".. toctree::\n   :maxdepth: 1\n\n" + "\n".join(toc) + "\n")
    _write_if_changed(out_dir / "index.rst", index)
    # pages of an earlier layout would be orphans (a warning, hence a failed build)
    wanted = {f"{page}.rst" for page, _, _ in PAGES} | {"index.rst"}
    for stale in out_dir.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    return alias


def _write_if_changed(path: Path, text: str) -> None:
    # an unchanged page keeps its mtime, so an incremental build does not re-read it
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def documented_names() -> set[str]:
    """Every public path (documented or alias) that the reference covers."""
    return set(collect()[1])


def _lookup(path: str):
    """The object at dotted ``path`` (a module, or attributes of one), or raise LookupError."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    raise LookupError(path)


def _has_member(cls, name: str) -> bool:
    """``name`` is an attribute of class ``cls``: a class attribute, a dataclass field or an
    annotated attribute of it or a base, or assigned as ``self.name`` in its source."""
    if hasattr(cls, name):
        return True
    for base in getattr(cls, "__mro__", ()):
        if name in getattr(base, "__annotations__", {}):
            return True
        if base.__module__.startswith("rfed"):
            try:
                if f"self.{name} =" in inspect.getsource(base):
                    return True
            except (OSError, TypeError):
                pass
    return False


def _exists(candidates: list[str]) -> bool:
    """Some candidate names an existing object, or a member of an existing class."""
    for cand in candidates:
        if not cand.startswith("rfed"):
            continue
        try:
            _lookup(cand)
            return True
        except LookupError:
            pass
        head, _, attr = cand.rpartition(".")
        try:
            owner = _lookup(head)
        except LookupError:
            continue
        if inspect.isclass(owner) and _has_member(owner, attr):
            return True
        if inspect.ismodule(owner):
            # a method of a class the docstring's module defines or imports
            for value in vars(owner).values():
                if inspect.isclass(value) and value.__module__.startswith("rfed") \
                        and _has_member(value, attr):
                    return True
    return False


def resolve_alias(app, env, node, contnode):
    """``missing-reference`` handler for rfed's Python references, in this order.

    1. A public path of a documented object (``rfed.manifolds.sphere.Sphere``, or a name
       relative to the docstring's module or class) links to where it is documented.
    2. A short name (``Algorithm.run``, ``cost``) that ends exactly one documented path links
       there, preferring the docstring's own class and module.
    3. A name that exists but has no entry of its own (a private helper, an attribute without
       a docstring) is set as plain code, unlinked.
    Anything else stays unresolved, and ``-n -W`` makes it an error: a reference to a name
    that does not exist (a typo, a renamed function) fails the build.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip(".~")
    alias = app.config.rfed_api_aliases
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if module and not target.startswith("rfed."):
        if cls:
            candidates.append(f"{module}.{cls}.{target}")
        candidates.append(f"{module}.{target}")
    source = str(node.source or "")
    if "docstring of " in source and not target.startswith("rfed."):
        # the documented object's own path: its class, then its defining module; for an
        # inherited docstring, the base classes' modules too
        owner = source.rsplit("docstring of ", 1)[1].split(":", 1)[0]
        parts = owner.split(".")
        candidates += [".".join(parts[:cut] + [target]) for cut in range(len(parts), 1, -1)]
        for cut in range(len(parts), 1, -1):
            try:
                found = _lookup(".".join(parts[:cut]))
            except LookupError:
                continue
            if inspect.isclass(found):
                candidates += [f"{base.__module__}.{target}" for base in found.__mro__
                               if base.__module__.startswith("rfed")]
                break
    domain = env.get_domain("py")
    reftype = node.get("reftype", "obj")

    def resolve(path):
        new = node.deepcopy()
        new["reftarget"] = path
        for role in (reftype, "obj"):
            found = domain.resolve_xref(env, node.get("refdoc"), app.builder, role, path,
                                        new, contnode)
            if found is not None:
                return found
        return None

    for cand in candidates:
        path = alias.get(cand)
        if path is None and "." in cand:
            head, _, attr = cand.rpartition(".")  # a member of an aliased class
            if head in alias:
                path = f"{alias[head]}.{attr}"
        if path is not None and path != target:
            found = resolve(path)
            if found is not None:
                return found
    if not target.startswith("rfed."):
        matches = [name for name in domain.objects if name.endswith("." + target)]
        for scope in (f"{module}.{cls}." if cls else None, f"{module}." if module else None):
            inside = [m for m in matches if scope and m.startswith(scope)]
            if len(inside) == 1:
                matches = inside
                break
        if len(matches) == 1:
            found = resolve(matches[0])
            if found is not None:
                return found
    # a name that exists but is not documented on its own: plain code, no link
    more = []
    if "." in target and not target.startswith("rfed."):
        head = target.split(".", 1)[0]  # e.g. "Communicator.gather_from_neighbors"
        more = [f"{home}.{target}" for name, home in
                ((n, p.rsplit(".", 1)[0]) for n, p in alias.items()) if name.endswith("." + head)]
    if _exists(candidates + more) or ("." not in target and target in _all_members()):
        return contnode
    return None


@functools.lru_cache(maxsize=1)
def _all_members() -> frozenset[str]:
    """Every attribute name of every class defined in rfed (private modules included)."""
    import rfed

    names: set[str] = set()
    modules = [importlib.import_module(info.name)
               for info in pkgutil.walk_packages(rfed.__path__, "rfed.")
               if not info.name.endswith("__main__")]
    for module in modules:
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                for base in value.__mro__:
                    if base.__module__.startswith("rfed"):
                        names.update(vars(base))
                        names.update(getattr(base, "__annotations__", {}))
    return frozenset(names)


def skip_foreign_docstrings(app, what, name, obj, skip, options):
    """Leave out class members whose only docstring is inherited from outside rfed.

    (``AgentBlockGenerator`` subclasses numpy's ``Generator``; ``PymanoptAdapter`` pymanopt's
    ``Manifold``: their inherited docstrings refer to those projects' own pages.)
    """
    if skip or what not in ("class", "exception"):
        return None
    func = getattr(obj, "__func__", getattr(obj, "fget", obj))
    defined_in = getattr(func, "__module__", "") or ""
    if not defined_in.startswith("rfed"):
        return True  # a member of a foreign base class
    if getattr(func, "__doc__", None):
        return None
    if getattr(func, "__name__", name) != name:
        return True  # an undocumented alias (``normal = _refuse``)
    try:
        owner = _lookup(f"{defined_in}.{func.__qualname__.rsplit('.', 1)[0]}")
    except (LookupError, AttributeError):
        return None
    for base in getattr(owner, "__mro__", ())[1:]:
        member = base.__dict__.get(name)
        if member is not None and getattr(member, "__doc__", None):
            return None if base.__module__.startswith("rfed") else True
    return None
