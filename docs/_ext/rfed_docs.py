"""rfed's local Sphinx extension: the generated API reference and its cross-reference aliases."""

from __future__ import annotations

from pathlib import Path

import rfed_api


def _generate_api(app) -> None:
    app.config.rfed_api_aliases = rfed_api.write_pages(Path(app.srcdir) / "api")


def setup(app):
    app.add_config_value("rfed_api_aliases", {}, "env")
    app.connect("builder-inited", _generate_api)
    app.connect("missing-reference", rfed_api.resolve_alias)
    app.connect("autodoc-skip-member", rfed_api.skip_foreign_docstrings)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
