"""The package builds as a wheel and an sdist that carry the package data, install in a fresh
virtual environment and run the default experiment (slow: it installs the dependencies).

Run with ``python -m pytest -m slow tests/docs/test_wheel.py``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Files that must ship inside the wheel (paths in the archive).
PACKAGE_DATA = [
    "rfed/py.typed",
    "rfed/datasets/data/wordnet_mammals/WORDNET_LICENSE",
    "rfed/datasets/data/wordnet_mammals/mammal_closure.tsv",
    "rfed/datasets/data/wordnet_mammals/mammal_hypernyms.tsv",
    "rfed/datasets/data/wordnet_mammals/mammal_lorentz_h2.npz",
    "rfed/engines/flower_app/pyproject.toml",
    "rfed/engines/flower.py",
    "rfed/bibliography.py",
]


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def build(out: Path) -> tuple[Path, Path]:
    """``python -m build`` (without isolation when setuptools is at hand, so offline works)."""
    cmd = [sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", str(out)]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.append("--no-isolation")
    proc = subprocess.run(cmd + [str(ROOT)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wheels, sdists = list(out.glob("rfed-*.whl")), list(out.glob("rfed-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return wheels[0], sdists[0]


@pytest.mark.slow
def test_wheel_and_sdist_carry_the_package_data_and_run_in_a_fresh_venv(tmp_path):
    pytest.importorskip("build", reason="python -m build needs the 'build' package")
    wheel, sdist = build(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [p for p in PACKAGE_DATA if p not in names]
    assert missing == [], f"not in the wheel: {missing}"
    assert not any(n.startswith(("tests/", "docs/", "benchmarks/")) for n in names)
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    for path in PACKAGE_DATA + ["README.md", "LICENSE", "pyproject.toml"]:
        assert path in members, f"not in the sdist: {path}"

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=1800, env=_clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    work = tmp_path / "elsewhere"  # not the source tree: the installed package must be used
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import rfed; print(rfed.__file__)"], cwd=work,
                           capture_output=True, text=True, env=_clean_env())
    assert str(env_dir) in where.stdout, where.stdout + where.stderr
    run = subprocess.run([str(env_dir / "bin" / "rfed"), "run", "pca-synthetic", "--out",
                          str(work / "run"), "--no-progress"], cwd=work, capture_output=True,
                         text=True, timeout=1800, env=_clean_env())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "done in" in run.stdout and (work / "run" / "summary.json").exists()
    show = subprocess.run([str(env_dir / "bin" / "rfed"), "show", "prirfed-fig5"], cwd=work,
                          capture_output=True, text=True, env=_clean_env())
    assert show.returncode == 0 and "arXiv:2404.10029" in show.stdout
