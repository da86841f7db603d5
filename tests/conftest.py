"""Session-wide setup of the test suite.

The bit-identity tests pin SHA-256 digests of whole runs. OpenBLAS picks its kernels by CPU at
load time, and its AVX-512 kernels (``SkylakeX``) round some products differently from its
AVX2 kernels (``Haswell``), on which the digests were recorded. So that a digest means the same
arithmetic on every x86-64 machine, the suite asks OpenBLAS for its Haswell kernels (the
variable must be set before numpy loads OpenBLAS, hence here, and it is inherited by the
``mpiexec`` and CLI subprocesses the tests start). A user's own ``OPENBLAS_CORETYPE`` wins.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings

if platform.machine() in ("x86_64", "AMD64"):
    if "numpy" in sys.modules and "OPENBLAS_CORETYPE" not in os.environ:
        warnings.warn("numpy was imported before tests/conftest.py: OpenBLAS keeps the kernels of "
                      "this CPU and the pinned bit-identity digests may differ", stacklevel=1)
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module (a script, not part of the package), with
    ``benchmarks/`` on ``sys.path`` while it loads (its ``from _timing import ...``)."""
    import importlib.util
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


try:
    import pytest
except ImportError:  # pragma: no cover - pytest runs this file
    pass
else:
    @pytest.fixture(name="load_benchmark", scope="session")
    def _load_benchmark_fixture():
        """:func:`load_benchmark` for tests (conftest is not importable from subfolders)."""
        return load_benchmark
