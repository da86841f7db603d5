"""Memory and time of the data builders, each measured in a fresh subprocess.

Rows (peak RSS from ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the subprocess, which
includes the interpreter and the imports; wall time of the builder call only):

* ``descriptors``: the covariance descriptors of prirfed-fig4 (28x28 patches, stride 7, of
  scikit-learn's two photos: 10,208 SPD(9) matrices), computed in one block (``chunk_size``
  larger than the number of patches, what the code did before: every patch's features stacked at
  once) and in blocks of 512 patches (the default now). Both give the same bits; the SHA-256 of
  the result is printed.
* ``epsilon``: :func:`rfed.datasets.make_epsilon_like_cached` at ``--eps-rows`` x 2,000 (default
  100,000; the full 400,000 takes about 2 minutes on a shared 2-core machine), built into a
  temporary cache folder, against the in-memory :func:`rfed.datasets.make_epsilon_like` with
  float32 output.
* ``dirichlet``: a Dirichlet(1.0) split of 60,000 labels over 1,000 agents plus the padded
  per-agent layout.
* ``fashion-mnist``: loading the 60,000 + 10,000 images, if the files are installed.

Run: ``python benchmarks/bench_datasets.py [--eps-rows 100000] [--skip-epsilon]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRELUDE = f"""
import hashlib, resource, sys, time
sys.path.insert(0, {str(REPO)!r})
import numpy as np
"""

EPILOGUE = """
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{LABEL:<44s} {elapsed:8.2f} s {rss:9.0f} MiB  {NOTE}")
"""

CASES = {
    "descriptors-one-block": """
from rfed.datasets import load_sample_image_descriptors
LABEL = "descriptors fig4, one block (before)"
t0 = time.perf_counter()
d, _ = load_sample_image_descriptors(stride=7, chunk_size=10**6)
elapsed = time.perf_counter() - t0
NOTE = f"{d.shape} sha256 {hashlib.sha256(d.tobytes()).hexdigest()[:16]}"
""",
    "descriptors-chunked": """
from rfed.datasets import load_sample_image_descriptors
LABEL = "descriptors fig4, chunks of 512 (now)"
t0 = time.perf_counter()
d, _ = load_sample_image_descriptors(stride=7)
elapsed = time.perf_counter() - t0
NOTE = f"{d.shape} sha256 {hashlib.sha256(d.tobytes()).hexdigest()[:16]}"
""",
    "epsilon-in-memory": """
from rfed.datasets import make_epsilon_like
LABEL = f"epsilon {N_ROWS} x 2000 in memory (float32)"
t0 = time.perf_counter()
x, y = make_epsilon_like(N_ROWS, 2000, 0, dtype=np.float32)
elapsed = time.perf_counter() - t0
NOTE = f"{x.nbytes / 2**20:.0f} MiB array"
""",
    "epsilon-cached-build": """
from rfed.datasets import make_epsilon_like_cached
LABEL = f"epsilon {N_ROWS} x 2000 cached, build"
t0 = time.perf_counter()
x, y = make_epsilon_like_cached(N_ROWS, 2000, 0, cache_dir=CACHE)
elapsed = time.perf_counter() - t0
NOTE = f"{x.nbytes / 2**20:.0f} MiB on disk, memory-mapped"
""",
    "epsilon-cached-read": """
from rfed.datasets import make_epsilon_like_cached
LABEL = f"epsilon {N_ROWS} x 2000 cached, read + validate"
t0 = time.perf_counter()
x, y = make_epsilon_like_cached(N_ROWS, 2000, 0, cache_dir=CACHE)
elapsed = time.perf_counter() - t0
NOTE = "memory-mapped, nothing generated"
""",
    "dirichlet": """
from rfed.datasets import dirichlet_partition, stack_agents_padded
LABEL = "dirichlet 60,000 labels -> 1,000 agents"
y = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 6000))
x = np.random.default_rng(1).random((60000, 784), dtype=np.float32)
t0 = time.perf_counter()
parts = dirichlet_partition(y, 1000, 1.0, 2, min_size=10)
stacked, counts = stack_agents_padded(x, parts)
elapsed = time.perf_counter() - t0
NOTE = f"padded {stacked.shape}"
""",
    "fashion-mnist": """
from rfed.datasets import fashion_mnist_available, load_fashion_mnist
LABEL = "Fashion-MNIST load, train + test"
if fashion_mnist_available():
    t0 = time.perf_counter()
    (x, y), (xt, yt) = load_fashion_mnist(split="both")
    elapsed = time.perf_counter() - t0
    NOTE = f"{x.shape} + {xt.shape} {x.dtype}"
else:
    elapsed, NOTE = float("nan"), "not installed (apt-get install dataset-fashion-mnist)"
""",
}


def run(case: str, **values) -> None:
    assignments = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    code = PRELUDE + assignments + textwrap.dedent(CASES[case]) + EPILOGUE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{out.stderr}")
    print(out.stdout.rstrip(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps-rows", type=int, default=100_000)
    parser.add_argument("--skip-epsilon", action="store_true")
    args = parser.parse_args()
    print(f"{'case':<44s} {'time':>10s} {'peak RSS':>13s}")
    run("descriptors-one-block")
    run("descriptors-chunked")
    if not args.skip_epsilon:
        run("epsilon-in-memory", N_ROWS=args.eps_rows)
        with tempfile.TemporaryDirectory() as cache:
            run("epsilon-cached-build", N_ROWS=args.eps_rows, CACHE=cache)
            run("epsilon-cached-read", N_ROWS=args.eps_rows, CACHE=cache)
    run("dirichlet")
    run("fashion-mnist")


if __name__ == "__main__":
    main()
