"""rfed's local Sphinx extension.

* the API reference, generated at every build from the ``__all__`` of the public modules
  (:mod:`rfed_api`), and the resolution of its cross-references;
* the ``measured`` role: a measured number quoted with its results file (:mod:`measured`); a
  quote that differs from its source is a warning, hence an error under ``-W``;
* optional pages: pages that other parts of the project write (listed in ``conf.py``'s
  ``rfed_optional_pages``) are left out of toctrees and links while they do not exist yet.
"""

from __future__ import annotations

import re
from pathlib import Path

import measured
import rfed_api
from docutils import nodes


def _generate_api(app) -> None:
    app.config.rfed_api_aliases = rfed_api.write_pages(Path(app.srcdir) / "api")


def measured_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{measured}`VALUE <SOURCE>```: VALUE, checked against SOURCE at build time."""
    match = re.fullmatch(r"\s*(?P<value>[^<]*?)\s*<(?P<source>[^>]+)>\s*", text)
    if match is None:
        msg = inliner.reporter.warning(f"measured: expected 'VALUE <SOURCE>', got {text!r}",
                                       line=lineno)
        return [nodes.problematic(rawtext, rawtext)], [msg]
    value, source = match["value"], match["source"].strip()
    messages = []
    try:
        actual = measured.resolve(source)
        if not measured.agrees(value, actual):
            messages.append(inliner.reporter.warning(
                f"measured: {value} differs from its source {source} = {actual!r} (run "
                f"'python docs/generate_results.py write' to print it again from the source)",
                line=lineno))
    except measured.QuoteError as err:
        messages.append(inliner.reporter.warning(f"measured: {err}", line=lineno))
    node = nodes.abbreviation(value, value, explanation=f"measured: {source}")
    node["classes"].append("measured")
    return [node], messages


def _drop_missing_optional_pages(app, docname, source) -> None:
    """Remove toctree lines and links that name an optional page that does not exist yet."""
    srcdir = Path(app.srcdir)
    here = (srcdir / docname).parent
    text = source[0]
    for page in app.config.rfed_optional_pages:
        if (srcdir / f"{page}.md").exists():
            continue
        rel = Path(page).relative_to(here.relative_to(srcdir)) \
            if Path(page).is_relative_to(here.relative_to(srcdir)) else None
        names = {page} | ({rel.as_posix()} if rel else set())
        for name in names:
            # a toctree entry on its own line
            text = re.sub(rf"(?m)^{re.escape(name)}\s*$\n?", "", text)
            # a markdown link [text](name.md) or [text](name.md#anchor): keep the text
            text = re.sub(rf"\[([^\]]*)\]\({re.escape(name)}\.md(?:#[^)]*)?\)",
                          r"\1 (page to come)", text)
    source[0] = text


def setup(app):
    app.add_config_value("rfed_api_aliases", {}, "env")
    app.add_config_value("rfed_optional_pages", [], "env")
    app.connect("builder-inited", _generate_api)
    app.connect("missing-reference", rfed_api.resolve_alias)
    app.connect("autodoc-skip-member", rfed_api.skip_foreign_docstrings)
    app.connect("source-read", _drop_missing_optional_pages)
    app.add_role("measured", measured_role)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
