"""Cost of ``rfed run dpdda-svm --set scale=paper``: per round, per evaluation, and in total.

Run on demand: ``python benchmarks/bench_dpdda_paper_scale.py [--rounds 2000]
[--eval-rows 100000] [--out FILE]``; the tables are printed and written to
``benchmarks/results/bench_dpdda_paper_scale.txt``. One BLAS thread, CPU time
(``time.process_time``).

1. A DP-DDA round at the paper's 20 nodes and ``d = 2,000`` (l2- and l1-SVM, ``n_active`` 2, 4
   and 20, private at the paper scale's noise and non-private), with the keyed streams' layout
   of the decentralized algorithms (16 agents per Philox stream: a draw for one agent generates
   its group's 16 x 2,000 normals) and one stream per agent (the paper scale's layout); the
   replay of the public node sampling a budget-first run plans with, per round. The rows per
   node do not enter a round's cost (one record per active node), so these run on 200.
2. One evaluation at ``--eval-rows`` rows (the paper's 100,000): the objective, the training
   accuracy as computed now (the rows' own array) and before (a pooled copy first, the
   strongest baseline: the previous code), and the gradient norm the paper scale skips.
3. The paper scale's schedule (the registered ``scale=paper`` settings: public tuning,
   convergence curves, the sweep's other budgets) and its estimated CPU from 1, 2 and 4.
4. The reference optima at ``--eval-rows`` rows (the paper scale's 100,000 x 2,000, seed 99 of
   the experiment's recipe): the scalable solvers the experiment uses above 5,000 samples
   (:func:`rfed.problems.linear.l2_svm_dual_cd`, :func:`rfed.problems.linear.l1_svm_working_set`),
   their CPU seconds, certified gap and peak memory above the data (Linux: the process' peak
   resident set, reset before each solve); and, at ``--baseline-rows`` rows (a subset of the
   same rows), the exact solvers they replace (a smoothing continuation for l2, HiGHS on the
   dual LP for l1; at 100,000 rows the continuation ran over 2 CPU-minutes without finishing
   and the LP took 264 s already at 20,000 rows) beside the scalable ones on the same rows.
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from rfed.algorithms.decentralized import DPDDA
from rfed.datasets.synthetic import make_epsilon_like
from rfed.experiments.registry import get_experiment
from rfed.networks.graphs import complete
from rfed.networks.network import Network
from rfed.problems.linear import (
    HingeSVM,
    L1Regularizer,
    L2Regularizer,
    l1_svm_reference,
    l1_svm_working_set,
    l2_svm_dual_cd,
    l2_svm_reference,
    split_evenly,
)

RESULTS = Path(__file__).resolve().parent / "results"
#: The paper scale's noise std at planned eps 0.8 (iota 0.1, 150,000 rounds, delta 1e-5),
#: from its budget calibration; the round's cost does not depend on the value.
SIGMA = 1.7


def _problem(reg: str, n: int, q: int, d: int, seed: int = 0) -> HingeSVM:
    x, y = make_epsilon_like(n * q, d, np.random.default_rng(seed), spectrum_decay=1.0)
    feats, labels = split_evenly(x, y, n, np.random.default_rng(seed + 1))
    regularizer = L2Regularizer(5e-4) if reg == "l2" else L1Regularizer(5e-4)
    problem = HingeSVM(feats, labels, regularizer, feature_bound=1.0)
    problem.evaluate_grad_norm = False
    return problem


def round_costs(rounds: int) -> dict[tuple, float]:
    """CPU seconds per round of DP-DDA, keyed ``(reg, n_active, private, layout)``."""
    n, d = 20, 2000
    out: dict[tuple, float] = {}
    for reg in ("l2", "l1"):
        problem = _problem(reg, n, 200, d)
        schedule, gamma = (("strongly_convex", 1e4) if reg == "l2" else ("general", 1.0))
        for na, private, layout in ((2, True, 16), (2, True, 1), (4, True, 1), (20, True, 1),
                                    (4, True, 16), (20, True, 16), (2, False, 1)):
            alg = DPDDA(Network(complete(n)), n_active=na, schedule=schedule, gamma=gamma,
                        clip=1.0, sigma=SIGMA if private else 0.0, agents_per_stream=layout)
            state = alg.init(problem, np.zeros(d), np.random.default_rng(3))
            t0 = time.process_time()
            for _ in range(rounds):
                state = alg.step(problem, state)
            out[(reg, na, private, layout)] = (time.process_time() - t0) / rounds
    alg = DPDDA(Network(complete(n)), n_active=2)
    t0 = time.process_time()
    alg.planned_activity(7, 10 * rounds)
    out[("plan",)] = (time.process_time() - t0) / (10 * rounds)
    return out


def eval_costs(rows: int) -> dict[str, float]:
    """CPU seconds of one evaluation's parts at ``rows`` rows (d = 2,000, 20 nodes)."""
    n, d = 20, 2000
    t0 = time.process_time()
    problem = _problem("l2", n, rows // n, d, seed=10)
    out = {"data generation": time.process_time() - t0}
    x = np.random.default_rng(4).normal(size=d) * 0.01

    def timed(fn, repeat=3):
        t0 = time.process_time()
        for _ in range(repeat):
            fn()
        return (time.process_time() - t0) / repeat

    out["objective"] = timed(lambda: problem.cost(x))
    out["accuracy (rows' own array)"] = timed(lambda: problem.accuracy(x))

    def pooled_accuracy():
        features, labels = problem.pooled()
        return float(np.mean(np.where(features @ x >= 0, 1.0, -1.0) == labels))

    assert pooled_accuracy() == problem.accuracy(x)
    out["accuracy (pooled copy, before)"] = timed(pooled_accuracy)
    out["gradient norm (skipped at scale=paper)"] = timed(lambda: problem.grad_norm(x), 1)
    return out


def _memory_kb(field: str) -> float:
    """``VmRSS`` / ``VmHWM`` of this process in kB (Linux), NaN elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except OSError:
        pass
    return float("nan")


def _reset_peak() -> None:
    """Reset ``VmHWM`` to the current resident set (Linux >= 4.0; no-op elsewhere)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def reference_costs(rows: int, baseline_rows: int) -> list[dict]:
    """CPU seconds, certified gap and peak extra memory of the reference solvers.

    Parameters
    ----------
    rows : int
        Rows of the scalable solvers' data set (d = 2,000).
    baseline_rows : int
        Rows (the first ones of the same set) on which the exact solvers run beside them.

    Returns
    -------
    list of dict
        One row per (solver, rows): ``reg, solver, rows, cpu_s, gap, peak_mb``.
    """
    c_rows, labels = make_epsilon_like(rows, 2000, np.random.default_rng(99),
                                       spectrum_decay=1.0)
    c_rows *= labels[:, None]
    del labels
    out = []
    for reg, fast, exact in (("l2", l2_svm_dual_cd, l2_svm_reference),
                             ("l1", l1_svm_working_set, l1_svm_reference)):
        for solver, n in ((fast, rows), (fast, baseline_rows), (exact, baseline_rows)):
            data = c_rows if n == rows else np.ascontiguousarray(c_rows[:n])
            _reset_peak()
            before = _memory_kb("VmRSS")
            t0 = time.process_time()
            _, gap = solver(data, 5e-4)
            cpu = time.process_time() - t0
            peak = (_memory_kb("VmHWM") - before) / 1024
            out.append({"reg": reg, "solver": solver.__name__, "rows": n, "cpu_s": cpu,
                        "gap": gap, "peak_mb": peak})
            del data
    return out


def schedule() -> list[dict]:
    """The runs of ``scale=paper``: ``{part, reg, n_active, rounds, private, evals}``."""
    cfg = get_experiment("dpdda-svm").config({"scale": "paper"})
    n, q = cfg["n_agents"], cfg["n_per_agent"]

    def rounds(na):
        return int(round(cfg["epochs"] * q * n / na))

    runs = []
    curve_evals = rounds(cfg["n_active"][0]) // cfg["eval_every"] + 1
    for reg in ("l2", "l1"):
        eps_fig = cfg[f"eps_{reg}"]
        na_max = max(cfg["n_active"])
        for _ in cfg[f"gammas_{reg}"]:
            runs.append({"part": "public tuning", "reg": reg, "n_active": na_max,
                         "rounds": rounds(na_max), "private": True, "evals": 2})
        variants = list(cfg["n_active"]) + ([n] if reg == "l2" and cfg["baseline"] else [])
        for na in variants:
            runs.append({"part": "curve", "reg": reg, "n_active": na, "rounds": rounds(na),
                         "private": True, "evals": curve_evals})
        na0 = cfg["n_active"][0]
        for part, private in (("curve: paper's Theorem 1 noise", True),
                              ("curve: paper's gamma (if not chosen)", True),
                              ("curve: non-private", False)):
            runs.append({"part": part, "reg": reg, "n_active": na0, "rounds": rounds(na0),
                         "private": private, "evals": curve_evals})
        for eps in cfg["eps_sweep"]:
            if eps == eps_fig:
                continue
            for na in variants:
                runs.append({"part": f"sweep eps={eps:g}", "reg": reg, "n_active": na,
                             "rounds": rounds(na), "private": True, "evals": 2})
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2000, help="rounds timed per setting")
    ap.add_argument("--eval-rows", type=int, default=100_000,
                    help="rows of the evaluation's data set (the paper scale's 100,000)")
    ap.add_argument("--baseline-rows", type=int, default=5000,
                    help="rows on which the exact reference solvers run beside the scalable")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_dpdda_paper_scale.txt")
    args = ap.parse_args(argv)
    lines = [f"# dpdda-svm at scale=paper: CPU cost ({platform.processor() or platform.machine()}"
             f", python {sys.version.split()[0]}, numpy {np.__version__}, one BLAS thread)", ""]
    costs = round_costs(args.rounds)
    lines += ["## 1. one DP-DDA round (20 nodes, d = 2,000), CPU microseconds",
              f"{'reg':<4}{'n_active':>9}{'private':>9}{'agents/stream':>15}{'us/round':>10}"]
    for key, val in costs.items():
        if key[0] == "plan":
            continue
        reg, na, private, layout = key
        lines.append(f"{reg:<4}{na:>9}{'yes' if private else 'no':>9}{layout:>15}"
                     f"{1e6 * val:>10.0f}")
    lines.append(f"public node-sampling replay (budget planning): {1e6 * costs[('plan',)]:.0f}"
                 " us per planned round")
    evals = eval_costs(args.eval_rows)
    lines += ["", f"## 2. one evaluation at {args.eval_rows:,} rows x 2,000, CPU seconds"]
    lines += [f"{k:<42}{v:>8.3f}" for k, v in evals.items()]
    per_eval = evals["objective"] + evals["accuracy (rows' own array)"]
    refs = reference_costs(args.eval_rows, args.baseline_rows)
    ref_s = sum(r["cpu_s"] for r in refs if r["rows"] == args.eval_rows)
    runs = schedule()
    lines += ["", "## 3. the scale=paper schedule and its estimated CPU (with the references)",
              f"{'part':<38}{'reg':<4}{'n_act':>6}{'rounds':>9}{'evals':>6}{'CPU s':>9}"]
    total = {"rounds": 0, "round_s": 0.0, "eval_s": 0.0, "plan_s": 0.0}
    for run in runs:
        key = (run["reg"], run["n_active"], run["private"], 1)
        round_s = run["rounds"] * costs[key]
        eval_s = run["evals"] * per_eval
        plan_s = run["rounds"] * costs[("plan",)] if run["private"] else 0.0
        total["rounds"] += run["rounds"]
        total["round_s"] += round_s
        total["eval_s"] += eval_s
        total["plan_s"] += plan_s
        lines.append(f"{run['part']:<38}{run['reg']:<4}{run['n_active']:>6}{run['rounds']:>9}"
                     f"{run['evals']:>6}{round_s + eval_s + plan_s:>9.0f}")
    est = (total["round_s"] + total["eval_s"] + total["plan_s"]
           + 2 * evals["data generation"] * 2 + ref_s)
    lines += [f"{'reference optima (section 4)':<42}{'':>21}{ref_s:>9.0f}",
              f"total: {total['rounds']:,} rounds; rounds {total['round_s']:.0f} s, evaluations "
              f"{total['eval_s']:.0f} s, planning {total['plan_s']:.0f} s, data "
              f"{4 * evals['data generation']:.0f} s, references {ref_s:.0f} s: {est:.0f} s = "
              f"{est / 60:.1f} CPU-minutes",
              "(with 16 agents per stream, the rounds alone: "
              f"{sum(r['rounds'] * costs[(r['reg'], r['n_active'], r['private'], 16 if r['private'] else 1)] for r in runs):.0f} s)"]  # noqa: E501
    lines += ["", "## 4. the reference optima (mu = phi = 5e-4, d = 2,000): CPU seconds, "
              "certified duality gap, peak memory above the data",
              f"{'reg':<4}{'solver':<20}{'rows':>8}{'CPU s':>9}{'gap':>11}{'peak MB':>9}"]
    lines += [f"{r['reg']:<4}{r['solver']:<20}{r['rows']:>8}{r['cpu_s']:>9.2f}{r['gap']:>11.2g}"
              f"{r['peak_mb']:>9.0f}" for r in refs]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
