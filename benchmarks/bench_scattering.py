"""Images per second of the scattering transform on one core: rfed against kymatio.

The transform of Tramer and Boneh's features (``J = 2``, ``L = 8`` on 28 x 28 images: 81 x 7 x 7
coefficients): :class:`rfed.datasets.Scattering2D` in float32 (the default, complex64 FFTs) and
float64, against kymatio's numpy backend (``kymatio.scattering2d.frontend.numpy_frontend.
ScatteringNumPy2D``, float32; its ``kymatio.numpy`` import fails under scipy 1.17, the frontend
module itself imports) when installed. Every transform gets the same images, in batches of
``--batch``; the figure is the median CPU time (``process_time``) per batch over ``--repeat``
interleaved calls, one BLAS and FFT thread. The coefficients are checked against kymatio's
(after kymatio's ``3.1415`` for pi, see :mod:`rfed.datasets.scattering`).

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scattering.py [--batch 256] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved_medians  # noqa: E402


def main() -> None:
    from rfed.datasets.scattering import Scattering2D

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    x = np.random.default_rng(0).random((args.batch, 28, 28)).astype(np.float32)
    s32 = Scattering2D((28, 28), 2, 8)
    s64 = Scattering2D((28, 28), 2, 8, dtype=np.float64)
    fns = {"rfed float32": lambda: s32(x, batch_size=args.batch),
           "rfed float64": lambda: s64(x, batch_size=args.batch)}
    try:
        from kymatio.scattering2d.frontend.numpy_frontend import ScatteringNumPy2D
    except ImportError:
        kym = None
        print("kymatio not installed: rfed only")
    else:
        kym = ScatteringNumPy2D(J=2, shape=(28, 28), L=8)
        fns["kymatio numpy"] = lambda: kym.scattering(x)
        orders = np.array([p.order for p in s64.paths])
        ref = kym.scattering(x) / ((math.pi / 3.1415) ** (orders + 1))[None, :, None, None]
        scale = np.abs(ref).max(axis=(0, 2, 3))[None, :, None, None]
        err = float(np.max(np.abs(s32(x) - ref) / scale))
        print(f"max relative difference to kymatio (per channel scale): {err:.2e}")
    med = interleaved_medians(fns, args.repeat)
    base = med.get("kymatio numpy")
    print("| transform | CPU ms / image | images / s | speed-up over kymatio |")
    print("|---|---|---|---|")
    for name, t in med.items():
        per = t / args.batch
        ratio = f"{base / t:.2f}" if base else ""
        print(f"| {name} | {1e3 * per:.3f} | {1.0 / per:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
