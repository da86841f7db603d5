"""The documentation builds with its one documented command, offline, without a warning.

``python -m sphinx -W --keep-going -n -b html docs docs/_build/html``: ``-W`` makes any warning
an error, ``-n`` (nitpicky) makes any broken cross-reference a warning, and sphinx-gallery runs
every tutorial and aborts on one that raises. The build reads rfed's docstrings (the API
reference of every name in a public ``__all__``), checks every quoted measured number against its
results file, and executes the tutorials.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The command of docs/conf.py's docstring and of the README, with the output folder replaced.
COMMAND = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html", "docs"]


def test_the_documented_build_command_is_the_one_tested():
    documented = " ".join(["python"] + COMMAND[1:]) + " docs/_build/html"
    assert documented in (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert documented in (ROOT / "README.md").read_text(encoding="utf-8")


def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="the docs extra (pip install '.[docs]', Python >= 3.11)")
    pytest.importorskip("sphinx_gallery", reason="the docs extra")
    pytest.importorskip("myst_parser", reason="the docs extra")
    pytest.importorskip("numpydoc", reason="the docs extra")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    start = time.perf_counter()
    proc = subprocess.run(COMMAND + [str(tmp_path / "html"), "-d", str(tmp_path / "doctrees")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines()
                if re.search(r"WARNING|ERROR|Traceback", line)]
    assert proc.returncode == 0 and not warnings, (
        f"docs build failed (exit {proc.returncode}, {seconds:.0f} s):\n" + "\n".join(warnings)
        + "\n" + proc.stderr[-3000:])
    html = tmp_path / "html"
    for page in ("index.html", "getting-started.html", "bibliography.html",
                 "api/privacy.html", "papers/prirfed.html", "guide/experiments.html"):
        assert (html / page).exists(), page
    # every name of every public module's __all__ has its entry in the API reference
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    import rfed_api

    by_module, _ = rfed_api.collect()
    api = "".join(p.read_text(encoding="utf-8") for p in (html / "api").glob("*.html"))
    undocumented = [e.path for entries in by_module.values() for e in entries
                    if f'id="{e.path}"' not in api]
    assert undocumented == []
    # the tutorials ran: each page shows the output of its script
    for name in ("plot_1_first_script", "plot_2_private_frechet_mean",
                 "plot_3_decentralized_own_data", "plot_4_audit_a_claim"):
        text = (html / "tutorials" / f"{name}.html").read_text(encoding="utf-8")
        assert "sphx-glr-script-out" in text and "certified" in text, name
