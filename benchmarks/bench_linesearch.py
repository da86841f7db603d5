"""Non-private PriRFed with an Armijo line search against pymanopt's steepest descent.

Run on demand: ``python benchmarks/bench_linesearch.py [--repeat 5] [--n 20000] [--d 100]``
(writes ``benchmarks/results/bench_linesearch.txt``).

The problem: PCA on the sphere S^{d-1}, the leading eigenvector of ``Z^T Z / n`` for a synthetic
``n x d`` matrix ``Z`` (Gaussian columns of standard deviations ``linspace(1, 0.2, d)``, seed
0), cost ``f(x) = -||Z x||^2 / n`` evaluated on the data (no precomputed ``d x d``
covariance, with which any method would stop reading the data), from ``x_0 = 1 / sqrt(d)``.
The accuracy target is ``f(x) - f* <= tol |f*|`` with ``f*`` minus the top eigenvalue
(``numpy.linalg.eigh``), ``tol = 1e-10`` by default.

Rows (one BLAS thread, interleaved, median CPU time of ``--repeat`` calls):

* ``rfed PriRFed + Armijo``: ``PriRFed(DPRSGD(steps=1, batch_size=None), n_sampled=None,
  line_search=ArmijoLineSearch())`` on one agent holding the data, run for the rounds it needs
  to reach the target (counted in an untimed run first);
* ``pymanopt SteepestDescent``: pymanopt 2.2's ``SteepestDescent`` (its default
  ``BackTrackingLineSearcher``, the same constants) on ``Sphere(d)`` with the cost and the
  Riemannian gradient written in numpy on the same data (``-||Z x||^2 / n`` and the projection
  of ``-2 Z^T (Z x) / n``), for the iterations it needs (counted the same way; its
  ``max_iterations`` set to them);
* ``rfed PriRFed, fixed step``: the same PriRFed without the line search, at the best fixed step
  of a small grid, for reference (``-`` when no step of the grid reaches the target in 5,000
  rounds).

The last column is time over pymanopt's. Both methods take an exponential-map (rfed) or a
retraction (pymanopt: the metric projection) step along minus the gradient; the iteration counts
are printed beside.
"""

from __future__ import annotations

import argparse
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from _timing import interleaved_medians, results_file  # noqa: E402

from rfed.algorithms.federated import DPRSGD, PriRFed  # noqa: E402
from rfed.optim import ArmijoLineSearch  # noqa: E402
from rfed.problems import SpherePCA  # noqa: E402


def make_data(n: int, d: int) -> np.ndarray:
    """The ``n x d`` data matrix (module docstring)."""
    return np.random.default_rng(0).standard_normal((n, d)) * np.linspace(1.0, 0.2, d)


def rfed_runner(z: np.ndarray, x0: np.ndarray, line_search: bool, step: float = 0.1):
    """``run(rounds) -> x`` of PriRFed on one agent holding ``z``."""
    problem = SpherePCA(z[None])
    alg = PriRFed(DPRSGD(steps=1, batch_size=None), None, step,
                  line_search=ArmijoLineSearch() if line_search else None)

    def run(rounds: int) -> np.ndarray:
        return alg.run(problem, rounds, rng=0, x0=x0, eval_every=rounds,
                       with_reference=False).x

    return run


def pymanopt_runner(z: np.ndarray, x0: np.ndarray):
    """``run(iterations) -> x`` of pymanopt's SteepestDescent on the same cost."""
    import pymanopt
    from pymanopt.manifolds import Sphere
    from pymanopt.optimizers import SteepestDescent

    n, d = z.shape
    manifold = Sphere(d)

    @pymanopt.function.numpy(manifold)
    def cost(x):
        zx = z @ x
        return -(zx @ zx) / n

    @pymanopt.function.numpy(manifold)
    def riemannian_gradient(x):
        g = -2.0 * (z.T @ (z @ x)) / n
        return g - (x @ g) * x

    problem = pymanopt.Problem(manifold, cost, riemannian_gradient=riemannian_gradient)

    def run(iterations: int) -> np.ndarray:
        opt = SteepestDescent(max_iterations=iterations, min_gradient_norm=0.0,
                              min_step_size=0.0, verbosity=0, log_verbosity=0)
        return opt.run(problem, initial_point=x0).point

    return run


def needed(run, gap, tol: float, limit: int) -> int | None:
    """The fewest iterations (doubling, then bisection) whose end point meets the target."""
    lo, hi = 0, 1
    while gap(run(hi)) > tol:
        lo, hi = hi, 2 * hi
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if gap(run(mid)) <= tol:
            hi = mid
        else:
            lo = mid
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    z = make_data(args.n, args.d)
    x0 = np.full(args.d, 1.0 / np.sqrt(args.d))
    f_star = -float(np.linalg.eigh(z.T @ z / args.n)[0][-1])

    def gap(x: np.ndarray) -> float:
        zx = z @ (x / np.linalg.norm(x))
        return (-(zx @ zx) / args.n - f_star) / abs(f_star)

    runners = {"rfed PriRFed + Armijo": rfed_runner(z, x0, True),
               "pymanopt SteepestDescent": pymanopt_runner(z, x0)}
    counts = {name: needed(run, gap, args.tol, 5000) for name, run in runners.items()}
    best = None
    for step in (0.5, 1.0, 2.0, 4.0):
        run = rfed_runner(z, x0, False, step)
        k = needed(run, gap, args.tol, 5000)
        if k is not None and (best is None or k < best[1]):
            best = (step, k, run)
    if best is not None:
        name = f"rfed PriRFed, fixed step {best[0]:g}"
        runners[name] = best[2]
        counts[name] = best[1]
    calls = {name: (lambda run=run, k=counts[name]: run(k))
             for name, run in runners.items() if counts[name] is not None}
    times = interleaved_medians(calls, args.repeat)
    ref = times["pymanopt SteepestDescent"]
    with results_file("bench_linesearch"):
        print(f"PCA on S^{args.d - 1}, {args.n} x {args.d}, f - f* <= {args.tol:g} |f*|, one "
              f"BLAS thread, median CPU time of {args.repeat} interleaved calls")
        print(f"{'method':36s} {'iterations':>10s} {'final gap':>10s} {'time (s)':>9s} "
              f"{'/ pymanopt':>10s}")
        for name, t in times.items():
            final = gap(runners[name](counts[name]))
            print(f"{name:36s} {counts[name]:10d} {final:10.2e} {t:9.4f} {t / ref:10.2f}")


if __name__ == "__main__":
    main()
