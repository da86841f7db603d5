"""The package type-checks: ``mypy rfed`` (its configuration is in ``pyproject.toml``) reports
no error, so the ``py.typed`` marker the wheel ships is honest.

mypy keeps its incremental cache in pytest's cache folder (in ``.mypy_cache`` when pytest's cache
plugin is disabled): the first run on a fresh clone checks
everything (about two minutes of one core), later runs re-check what changed (a second or two).
Skipped when mypy is not installed (it is in the ``test`` extra).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]


def _mypy(request, *args: str) -> subprocess.CompletedProcess:
    # Without pytest's cache plugin (``-p no:cacheprovider``) mypy keeps its own default cache
    # folder, ``.mypy_cache`` in the repository, rather than failing on the missing plugin.
    plugin_cache = getattr(request.config, "cache", None)
    cache = plugin_cache.mkdir("mypy") if plugin_cache is not None else ROOT / ".mypy_cache"
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_mypy_reports_no_error_in_the_package(request):
    done = _mypy(request, "rfed")
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, \
        f"mypy rfed (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-2000:]}"


def test_the_check_fails_on_a_type_error(request, tmp_path):
    """Not vacuous: the same invocation exits non-zero and names a planted error."""
    bad = tmp_path / "planted.py"
    bad.write_text("import numpy as np\n\n\ndef f(x: np.ndarray) -> int:\n    return x.shape\n")
    done = _mypy(request, str(bad))
    assert done.returncode == 1 and "planted.py:5: error" in done.stdout, done.stdout
