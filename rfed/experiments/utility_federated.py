"""Privacy-utility companions of PriRFed: certified-budget sweeps against the private baselines.

Every experiment here sweeps the certified whole-run budget epsilon (default {0.5, 1, 2, 4, 8})
at ``delta = min(1e-5, 1 / (10 N))`` (``N`` the smallest local dataset) and, at every budget,
runs PriRFed (DP-RSGD, DP-RSVRG) and the private baselines of :mod:`rfed.algorithms.baselines`
(Analyze Gauss and the noisy power method for PCA, the log-Euclidean private mean for SPD) at the
same certified budget, for several repetitions, each from a data-independent random start.

Utility is the **gap closed**

.. math:: g = \\frac{f(x_0) - f(x)}{f(x_0) - f^\\star},

``x_0`` the repetition's random start and ``f^*`` the non-private optimum of the pooled problem
(closed form for PCA, the Riemannian solver for SPD): 0 is the random start, 1 the non-private
optimum. The experiments write the privacy-utility figure (gap closed and excess risk against the
certified epsilon, one curve per algorithm, mean and one-std band, with the random-start and
non-private lines), the ``utility`` table (costs, gaps, certified budgets), the
``hyperparameters`` table (what was chosen, on which public data, with its public score) and
the summary table.

Hyperparameters (clip level, step size, batch size, rounds, iterations, norm bounds) are chosen
on PUBLIC data, never on the private results: for every algorithm and budget, each candidate
of a small grid is run on a public problem of the same shape (same agents, same local sizes, so
the calibrated noise is the one of the private run) and the candidate with the best mean public
gap is kept. Which public data is used is stated by each experiment (a declared public split, or
a stand-in drawn from the same recipe with its own seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from rfed.algorithms.baselines import (
    AnalyzeGauss,
    LogEuclideanPrivateMean,
    NoisyPowerMethod,
)
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.experiments._paper_data import certified_delta
from rfed.experiments.plotting import new_figure
from rfed.experiments.registry import RunContext, check_choices, register, summary_row
from rfed.privacy import PrivacyBudget
from rfed.problems import Problem, SPDFrechetMean, SpherePCA

__all__ = ["Method", "gap_closed", "make_spread_pca", "spread_spectrum", "sweep_delta",
           "sweep_methods"]

_P = TypeVar("_P", bound=Problem)

_GAP_NAME = "gap closed (f_start - f) / (f_start - f*)"


def gap_closed(f_start: np.ndarray | float, f: np.ndarray | float, f_star: float) -> np.ndarray:
    """``(f_start - f) / (f_start - f_star)``: 0 at the random start, 1 at the optimum.

    Parameters
    ----------
    f_start : float or array
        Cost at the random start(s).
    f : float or array
        Cost of the private output(s), same shape as ``f_start``.
    f_star : float
        The non-private optimum (``f_star < f_start``).

    Returns
    -------
    ndarray
        Of the broadcast shape of ``f_start`` and ``f``.
    """
    f_start = np.asarray(f_start, dtype=float)
    denom = f_start - float(f_star)
    if np.any(denom <= 0):
        raise ValueError("gap_closed: the random start must be above the optimum "
                         f"(f_start - f_star = {denom.min():.3g})")
    return (f_start - np.asarray(f, dtype=float)) / denom


#: The sweep's delta, ``min(1e-5, 1 / (10 N))`` for the smallest local dataset ``N``.
sweep_delta = certified_delta


class Method:
    """One private algorithm of a sweep and its public hyperparameter grid.

    Parameters
    ----------
    name : str
        The curve's label.
    run : callable
        ``run(problem, budget, hp, x0, rng) -> (x, cost, privacy_report, diverged)``.
    grid : sequence of dict
        Candidate hyperparameters, tried on the public problem at every budget.
    """

    def __init__(self, name: str, run: Callable[..., tuple], grid: Sequence[Mapping[str, Any]]):
        if not grid:
            raise ValueError(f"method '{name}': argument 'grid' must hold at least one candidate")
        self.name = name
        self.run = run
        self.grid = [dict(hp) for hp in grid]


def _prirfed_rsgd(problem, budget, hp, x0, rng):
    rounds = int(hp["rounds"])
    alg = PriRFed(DPRSGD(steps=int(hp.get("local_steps", 1)), batch_size=hp.get("batch"),
                         clip=float(hp["clip"])),
                  None, float(hp["step"]), budget=budget, n_rounds=rounds)
    res = alg.run(problem, rounds, rng=rng, x0=x0, eval_every=rounds)
    return res.x, res.history[-1]["cost"], res.privacy, res.diverged


def _prirfed_rsvrg(problem, budget, hp, x0, rng):
    """PriRFed with DP-RSVRG: the paper's Alg. 3 (``hp['variant']`` absent or ``'paper'``) or
    the released-snapshot variant (not the paper's): snapshot gradient clipped to ``clip`` and
    released once per outer loop, inner steps on minibatches of ``hp['batch']`` records with
    per-sample differences clipped to ``clip_diff * clip``."""
    rounds = int(hp["rounds"])
    clip = float(hp["clip"])
    variant = hp.get("variant", "paper")
    if variant == "paper":
        trainer = DPRSVRG(steps=1, inner_steps=int(hp["inner_steps"]), clip=clip,
                          clip_full=clip)
    else:
        trainer = DPRSVRG(steps=1, inner_steps=int(hp["inner_steps"]),
                          clip=float(hp["clip_diff"]) * clip, clip_full=clip, variant=variant,
                          batch_size=int(hp["batch"]))
    alg = PriRFed(trainer, None, float(hp["step"]), budget=budget, n_rounds=rounds)
    res = alg.run(problem, rounds, rng=rng, x0=x0, eval_every=rounds)
    return res.x, res.history[-1]["cost"], res.privacy, res.diverged


def _analyze_gauss(problem, budget, hp, x0, rng):
    res = AnalyzeGauss(budget, float(hp["norm_bound"])).run(problem, rng)
    return res.x, res.cost, res.privacy, False


def _noisy_power(problem, budget, hp, x0, rng):
    res = NoisyPowerMethod(budget, int(hp["n_iters"]), float(hp["norm_bound"])).run(
        problem, rng, x0=x0)
    return res.x, res.cost, res.privacy, False


def _log_euclidean(problem, budget, hp, x0, rng):
    res = LogEuclideanPrivateMean(budget, float(hp["log_norm_bound"])).run(problem, rng)
    return res.x, res.cost, res.privacy, False


def _grid(**axes: Sequence[Any]) -> list[dict]:
    """Every combination of the axes' values, as dicts."""
    out: list[dict] = [{}]
    for key, values in axes.items():
        out = [{**hp, key: v} for hp in out for v in values]
    return out


def _run_once(method: Method, problem: Problem, budget: PrivacyBudget, hp: Mapping[str, Any],
              x0: np.ndarray, rng: np.random.Generator) -> tuple[float, dict, bool]:
    """Cost, privacy report and divergence of one run (a run that raises counts as diverged)."""
    try:
        _, cost, report, diverged = method.run(problem, budget, hp, x0, rng)
    except FloatingPointError:
        return float("nan"), {}, True
    cost = float(cost)
    return cost, report, bool(diverged) or not math.isfinite(cost)


def sweep_methods(
    ctx: RunContext,
    problem: Problem,
    public: Problem,
    methods: Sequence[Method],
    *,
    epsilons: Sequence[float],
    delta: float,
    repetitions: int,
    tune_repetitions: int,
    public_data: str,
    tune_score: str = "gap",
) -> dict:
    """Tune every method on ``public``, run it on ``problem`` at every budget, log and tabulate.

    Parameters
    ----------
    ctx : RunContext
    problem, public : Problem
        The private problem and the public problem of the same shape used for tuning.
    methods : sequence of Method
    epsilons : sequence of float
        Target whole-run budgets (each run is calibrated to it by the certified accountant).
    delta : float
    repetitions, tune_repetitions : int
        Private repetitions, and public runs per candidate.
    public_data : str
        What the public problem is (written in the tables).
    tune_score : {"gap", "excess"}
        How a candidate is scored on the public problem: ``"gap"``, the mean over the public
        starts of each run's gap closed; ``"excess"``, the gap closed by the mean cost,
        ``(mean f_start - mean f) / (mean f_start - f*)``, i.e. the mean excess risk. The
        mean of per-start ratios lets one start that happens to lie near the optimum (a tiny
        denominator) decide the choice; the gap of the means weighs every start's excess risk
        equally (utility-hyperbolic's random starts lie 0.3 to 13 above the optimum).

    Returns
    -------
    dict
        ``{"rows": [...], "chosen": {...}, "f_start": (repetitions,), "f_star": float,
        "public_f_star": float}``; every row is one (method, budget) with the mean and std of
        the gap closed and of the cost over the repetitions that did not diverge, and the gap
        closed by their mean cost (``gap_closed_of_mean_cost``).
    """
    if tune_score not in ("gap", "excess"):
        raise ValueError(f"argument 'tune_score' must be 'gap' or 'excess', got {tune_score!r}")
    f_star = float(problem.reference_cost())
    pub_star = float(public.reference_cost())
    starts = [problem.manifold.random_point(ctx.rng(10_000, r)) for r in range(repetitions)]
    f_start = np.array([problem.cost(x0) for x0 in starts])
    pub_starts = [public.manifold.random_point(ctx.rng(20_000, r))
                  for r in range(tune_repetitions)]
    pub_f_start = np.array([public.cost(x0) for x0 in pub_starts])
    n_runs = len(methods) * len(epsilons) * (
        repetitions + tune_repetitions * max(len(m.grid) for m in methods))
    bar = ctx.progress_bar(n_runs, setting="tuning on public data")
    rows, chosen_rows = [], []
    for mi, method in enumerate(methods):
        for ei, eps in enumerate(epsilons):
            budget = PrivacyBudget(float(eps), delta)
            setting = f"{method.name} eps={eps:g}"
            # ---- choose the hyperparameters on the public problem
            scores = []
            for hi, hp in enumerate(method.grid):
                costs = np.array([
                    _run_once(method, public, budget, hp, pub_starts[r],
                              ctx.rng(30_000, mi, ei, hi, r))[0]
                    for r in range(tune_repetitions)])
                bar.update(tune_repetitions)
                gaps = gap_closed(pub_f_start, costs, pub_star)
                score = (np.mean(gaps) if tune_score == "gap" else
                         gap_closed(pub_f_start.mean(), costs.mean(), pub_star))
                # a candidate that diverged on public data is never chosen
                scores.append(float(score) if np.all(np.isfinite(gaps)) else -np.inf)
            best = int(np.argmax(scores))
            hp = method.grid[best]
            chosen_rows.append({"method": method.name, "target_epsilon": float(eps),
                                "chosen": _hp_text(hp), "public_gap_closed": scores[best],
                                "public_score": ("mean gap closed" if tune_score == "gap" else
                                                 "gap closed by the mean cost"),
                                "candidates": len(method.grid), "public_data": public_data})
            # ---- the private runs
            private_costs: list[tuple[int, float, float]] = []
            reports, diverged = [], 0
            for r in range(repetitions):
                cost, report, div = _run_once(method, problem, budget, hp, starts[r],
                                              ctx.rng(40_000, mi, ei, r))
                bar.update(1)
                if report:
                    reports.append(report)
                if div:
                    diverged += 1
                    ctx.log(setting=setting, method=method.name, target_epsilon=float(eps),
                            repetition=r, diverged=True)
                    continue
                gap = float(gap_closed(f_start[r], cost, f_star))
                private_costs.append((r, cost, gap))
                ctx.log(setting=setting, method=method.name, target_epsilon=float(eps),
                        epsilon_certified=report["epsilon_certified"], delta=report["delta"],
                        repetition=r, cost=cost, excess_risk=cost - f_star, gap_closed=gap,
                        f_start=float(f_start[r]))
            report = max(reports, key=lambda rep: rep["epsilon_certified"]) if reports else {}
            if report:
                ctx.set_privacy(setting, report)
            c = np.array([v[1] for v in private_costs] or [np.nan])
            g = np.array([v[2] for v in private_costs] or [np.nan])
            rows.append({
                "method": method.name, "target_epsilon": float(eps),
                "epsilon_certified": report.get("epsilon_certified"),
                "delta": report.get("delta"), "accountant": report.get("accountant", ""),
                "neighboring": report.get("neighboring"),
                "gap_closed_mean": float(g.mean()), "gap_closed_std": float(g.std()),
                "gap_closed_of_mean_cost": (float(gap_closed(
                    f_start[[v[0] for v in private_costs]].mean(), c.mean(), f_star))
                    if private_costs else float("nan")),
                "cost_mean": float(c.mean()), "cost_std": float(c.std()),
                "excess_risk_mean": float(c.mean() - f_star),
                "repetitions": repetitions, "diverged": diverged,
                "hyperparameters": _hp_text(hp),
            })
    bar.close()
    ctx.save_table("hyperparameters", chosen_rows)
    return {"rows": rows, "chosen": chosen_rows, "f_start": f_start, "f_star": f_star,
            "public_f_star": pub_star}


def _hp_text(hp: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in hp.items())


def _monotone_within_bands(rows: Sequence[Mapping[str, Any]]) -> bool:
    """The mean gap never drops, as epsilon grows, by more than the two bands' half-widths."""
    ordered = sorted(rows, key=lambda r: r["target_epsilon"])
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b["gap_closed_mean"] < a["gap_closed_mean"] - a["gap_closed_std"] - \
                b["gap_closed_std"]:
            return False
    return True


def _finish(ctx: RunContext, out: dict, title: str, *, extra: Mapping[str, Any]) -> dict:
    """Utility table, summary table, privacy-utility figure and summary dict of a sweep."""
    rows, f_start, f_star = out["rows"], out["f_start"], out["f_star"]
    table = [
        {"method": "random start", "target_epsilon": None, "epsilon_certified": None,
         "delta": None, "gap_closed_mean": 0.0, "gap_closed_std": 0.0,
         "cost_mean": float(f_start.mean()), "cost_std": float(f_start.std()),
         "excess_risk_mean": float(f_start.mean() - f_star), "repetitions": len(f_start),
         "diverged": 0, "hyperparameters": "data-independent random point"},
        {"method": "non-private optimum", "target_epsilon": None, "epsilon_certified": None,
         "delta": None, "gap_closed_mean": 1.0, "gap_closed_std": 0.0, "cost_mean": f_star,
         "cost_std": 0.0, "excess_risk_mean": 0.0, "repetitions": None, "diverged": 0,
         "hyperparameters": "pooled data, no noise"},
        *[{k: v for k, v in r.items() if k not in ("accountant", "neighboring")}
          for r in rows],
    ]
    ctx.save_table("utility", table)
    ctx.summary_table([
        summary_row(f"{r['method']} eps={r['target_epsilon']:g}", utility_name=_GAP_NAME,
                    utility=r["gap_closed_mean"], utility_std=r["gap_closed_std"],
                    reference=1.0, reference_name="non-private optimum",
                    epsilon=r["epsilon_certified"], delta=r["delta"],
                    accountant=r["accountant"], repetitions=r["repetitions"],
                    diverged=r["diverged"])
        for r in rows])
    ctx.save_figure(_privacy_utility_figure(rows, f_start, f_star, title), "privacy_utility")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    by_method = {m: [r for r in rows if r["method"] == m] for m in methods}
    summary: dict[str, Any] = {
        "f_star": f_star, "f_start_mean": float(f_start.mean()),
        "gap_closed": {m: {f"{r['target_epsilon']:g}": r["gap_closed_mean"] for r in rs}
                       for m, rs in by_method.items()},
        "gap_closed_std": {m: {f"{r['target_epsilon']:g}": r["gap_closed_std"] for r in rs}
                           for m, rs in by_method.items()},
        "gap_closed_of_mean_cost": {m: {f"{r['target_epsilon']:g}": r["gap_closed_of_mean_cost"]
                                        for r in rs} for m, rs in by_method.items()},
        "epsilon_certified": {m: {f"{r['target_epsilon']:g}": r["epsilon_certified"]
                                  for r in rs} for m, rs in by_method.items()},
        "monotone_within_bands": {m: _monotone_within_bands(rs) for m, rs in by_method.items()},
        "hyperparameters": out["chosen"],
        "accountant": "certified: dp-accounting, record-level replace-one, per agent's dataset "
                      "(parallel composition across agents), the whole planned run",
    }
    summary.update(extra)
    return summary


def _privacy_utility_figure(rows, f_start, f_star, title):
    """Gap closed and excess risk against the certified epsilon, mean and one-std band."""
    fig, (ax_gap, ax_risk) = new_figure(2)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for m in methods:
        rs = sorted((r for r in rows if r["method"] == m and r["epsilon_certified"] is not None),
                    key=lambda r: r["target_epsilon"])
        if not rs:
            continue
        eps = np.array([r["epsilon_certified"] for r in rs])
        g = np.array([r["gap_closed_mean"] for r in rs])
        gs = np.array([r["gap_closed_std"] for r in rs])
        (line,) = ax_gap.plot(eps, g, "o-", label=m)
        # the gap closed is at most 1 (no run ends below the optimum): the band stops there
        ax_gap.fill_between(eps, g - gs, np.minimum(g + gs, 1.0), color=line.get_color(),
                            alpha=0.2)
        risk = np.array([r["excess_risk_mean"] for r in rs])
        rstd = np.array([r["cost_std"] for r in rs])
        ax_risk.plot(eps, risk, "o-", color=line.get_color(), label=m)
        ax_risk.fill_between(eps, np.maximum(risk - rstd, risk * 1e-3), risk + rstd,
                             color=line.get_color(), alpha=0.2)
    ax_gap.axhline(1.0, color="k", ls="--", lw=1, label="non-private optimum")
    ax_gap.axhline(0.0, color="0.5", ls=":", lw=1, label="random start")
    ax_risk.axhline(float(f_start.mean() - f_star), color="0.5", ls=":", lw=1,
                    label="random start")
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    # the target budgets as ticks: the certified values (e.g. 7.995 and 8) would overprint
    ticks = sorted({float(r["target_epsilon"]) for r in rows
                    if r["epsilon_certified"] is not None})
    for ax, ylab in ((ax_gap, "gap closed"), (ax_risk, "excess risk f - f*")):
        ax.set_xscale("log")
        # the budgets themselves as ticks, written plainly (no 2x10^0 clutter)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(_tick_labels(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(_epsilon_axis_label(rows))
        ax.set_ylabel(ylab)
        ax.legend()
    ax_risk.set_yscale("log")
    fig.suptitle(title, fontsize=11, y=1.04)
    return fig


#: The neighbouring relations of the privacy ledger as the figures name them.
_RELATION_NAMES = {"replace_one": "replace-one", "add_remove_one": "add/remove-one"}


def _epsilon_axis_label(rows: Sequence[Mapping[str, Any]]) -> str:
    """The x-axis label naming the relation and delta of the certified runs' privacy reports.

    Parameters
    ----------
    rows : sequence of mapping
        The sweep's rows (``epsilon_certified``, ``neighboring`` and ``delta`` from each
        budget's privacy report; rows without a certified epsilon are skipped).

    Returns
    -------
    str
        ``"certified epsilon, replace-one, delta = 1e-05 (whole run)"``, or one such
        relation-and-delta part per distinct pair, joined by ``"; "``.
    """
    pairs = dict.fromkeys(
        (_RELATION_NAMES.get(r["neighboring"], str(r["neighboring"])), r["delta"])
        for r in rows if r["epsilon_certified"] is not None)
    named = "; ".join(f"{relation}, delta = {delta:g}" for relation, delta in pairs)
    return f"certified epsilon, {named} (whole run)" if named else "certified epsilon (whole run)"


def _tick_labels(ticks: Sequence[float]):
    """Tick labels ``0.5, 1, 2, ...`` for the tick positions ``ticks``."""
    from matplotlib.ticker import FixedFormatter

    return FixedFormatter([f"{t:g}" for t in ticks])


def _check_epsilons(epsilons: Sequence[float]) -> list[float]:
    eps = [float(e) for e in epsilons]
    if not all(e > 0 and math.isfinite(e) for e in eps):
        raise ValueError(f"setting 'epsilons' must hold finite floats > 0, got {epsilons!r}")
    return eps


# ====================================================================== PCA
def _pca_methods(config: dict, norm_bounds: Sequence[float], clips: Sequence[float]
                 ) -> list[Method]:
    methods = [
        Method("PriRFed DP-RSGD", _prirfed_rsgd,
               _grid(rounds=config["rsgd_rounds"], step=config["rsgd_steps"], clip=clips,
                     batch=[None])),
        Method("Analyze Gauss", _analyze_gauss, _grid(norm_bound=norm_bounds)),
        Method("Noisy power method", _noisy_power,
               _grid(n_iters=config["power_iters"], norm_bound=norm_bounds)),
    ]
    if config["rsvrg"]:
        variant = config["rsvrg_variant"]
        if variant == "paper":
            methods.insert(1, Method("PriRFed DP-RSVRG", _prirfed_rsvrg,
                                     _grid(rounds=config["rsvrg_rounds"],
                                           inner_steps=config["rsvrg_inner_steps"],
                                           step=config["rsvrg_steps"], clip=clips)))
        elif variant == "released_snapshot":
            methods.insert(1, Method(
                "PriRFed DP-RSVRG released snapshot (not the paper's)", _prirfed_rsvrg,
                _grid(rounds=config["rsvrg_rounds"], inner_steps=config["rsvrg_inner_steps"],
                      step=config["rsvrg_steps"], clip=clips, variant=[variant],
                      clip_diff=config["rsvrg_clip_diffs"], batch=config["rsvrg_batches"])))
        else:
            raise ValueError(f"setting 'rsvrg_variant' must be 'released_snapshot' or "
                             f"'paper', got {variant!r}")
    return methods


def _pca_summary_extra(out: dict, target: float, eps_check: float) -> dict:
    """The "must show" check at ``eps_check``: PriRFed's gap closed against ``target``."""
    at = {r["method"]: r for r in out["rows"] if r["target_epsilon"] == eps_check}
    extra: dict[str, Any] = {}
    rsgd = at.get("PriRFed DP-RSGD")
    if rsgd is not None:
        extra[f"prirfed_gap_closed_at_eps_{eps_check:g}"] = rsgd["gap_closed_mean"]
        extra[f"prirfed_reaches_{target:g}_at_eps_{eps_check:g}"] = bool(
            rsgd["gap_closed_mean"] >= target)
    return extra


def _fmnist_problems(config: dict, ctx: RunContext) -> tuple[SpherePCA, SpherePCA]:
    """The private problem (training images) and the public one (test images, resampled)."""
    from rfed.datasets import iid_partition, load_fashion_mnist

    n_agents, per = config["n_agents"], config["per_agent"]
    # the uint8 pixels: scaled, cast and normalised below a block of rows at a time
    (x_train, _), (x_test, _) = load_fashion_mnist(config["data_path"] or None, split="both",
                                                   raw=True, flatten=True)
    if n_agents * per > len(x_train):
        raise ValueError(f"settings 'n_agents' x 'per_agent' = {n_agents * per} exceed the "
                         f"{len(x_train)} training images")
    # unit-norm rows: the PUBLIC data-domain bound ||z|| <= 1 (never read from the data)
    parts = iid_partition(len(x_train), n_agents, ctx.rng(0))[:, :per]
    problem = SpherePCA(_unit_rows(x_train, parts), norm_bound=1.0)
    # declared public data: the test images, resampled to the private problem's shape so that
    # the calibrated noise of a tuning run is the one of the private run
    z_pub = _unit_rows(x_test, np.arange(len(x_test))[None, :])[0]
    idx = ctx.rng(1).integers(0, len(z_pub), size=(n_agents, per))
    public = SpherePCA(z_pub[idx], norm_bound=1.0)
    return _cost_only(problem), _cost_only(public)


def _cost_only(problem: _P) -> _P:
    """``problem`` with its runs' recorded rounds holding no gradient norm: a sweep reads the
    last round's cost only, and the norm of the full gradient is a pass over every record at
    each recorded round."""
    problem.evaluate_grad_norm = False
    return problem


#: Rows per block of :func:`_unit_rows` (about 6 MiB of float64 images).
_UNIT_ROWS_BLOCK = 1024


def _unit_rows(pixels: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``normalize_l2(pixels[index] / 255)`` in float64, a block of rows at a time.

    The loader's scaling (float32 ``pixels / 255``), the cast to float64 and
    :func:`rfed.datasets.normalize_l2` act on each row alone: the values are those of the
    calls on the whole split, without their split-sized temporaries (each hundreds of MiB on
    Fashion-MNIST, faulted in by the kernel page by page).

    Parameters
    ----------
    pixels : uint8 array, shape ``(n, d)``
    index : int array, shape ``(n_agents, per)``
        The rows of each agent.

    Returns
    -------
    array, shape ``(n_agents, per, d)``
    """
    from rfed.datasets import normalize_l2

    flat = index.reshape(-1)
    out = np.empty((flat.size, pixels.shape[1]))
    for start in range(0, flat.size, _UNIT_ROWS_BLOCK):
        rows = flat[start:start + _UNIT_ROWS_BLOCK]
        scaled = pixels[rows].astype(np.float32)
        scaled /= np.float32(255.0)
        out[start:start + rows.size] = normalize_l2(scaled.astype(np.float64))
    return out.reshape(index.shape + (pixels.shape[1],))


_PCA_GRID_DEFAULTS = {
    "rsgd_rounds": [5, 10, 20], "rsgd_steps": [0.5, 1.0, 2.0],
    "rsvrg": True, "rsvrg_rounds": [5, 20], "rsvrg_inner_steps": [1, 3],
    "rsvrg_steps": [0.05, 0.2], "power_iters": [3, 10],
    # the released-snapshot DP-RSVRG (not the paper's): tau_d / tau and inner batch grids
    "rsvrg_variant": "released_snapshot", "rsvrg_clip_diffs": [0.25, 1.0],
    "rsvrg_batches": [32, 128],
}


def _check_rsvrg_variant(cfg: dict) -> None:
    check_choices(cfg, "rsvrg_variant", ("released_snapshot", "paper"))


def _check_pca_synthetic(cfg: dict) -> None:
    from rfed.experiments.prirfed import check_pca_recipe

    _check_rsvrg_variant(cfg)
    check_pca_recipe(cfg, "per_agent")

@register(
    "utility-pca-fmnist",
    paper="PriRFed, Sec. 6.1, companion",
    summary="PCA on Fashion-MNIST: PriRFed vs Analyze Gauss, noisy power method; eps sweep",
    description=(
        "Leading eigenvector (SpherePCA on S^783) of the unit-normalised Fashion-MNIST training "
        "images (public data-domain bound ||z|| <= 1), 100 agents x 600 images (iid), full "
        "participation. At every certified whole-run budget eps in {0.5, 1, 2, 4, 8} (delta = "
        "min(1e-5, 1/(10 N))): PriRFed with DP-RSGD (full batch, one local step per round) and "
        "with DP-RSVRG, the federated Analyze Gauss mechanism and the federated noisy power "
        "method, each calibrated by the certified accountant to the same budget; 5 repetitions "
        "from data-independent random starts. Utility: the gap closed between the random start "
        "and the non-private optimum. Hyperparameters (rounds, step, clip, power iterations, "
        "norm bound) are chosen on the DECLARED PUBLIC split: the 10,000 Fashion-MNIST test "
        "images, resampled to 100 x 600, never on the private results. DP-RSVRG is by default "
        "('rsvrg_variant') the released-snapshot variant, labelled 'not the paper's' (its "
        "tau_d / tau and inner batch tuned on the same public split); 'paper' runs Alg. 3. "
        "Needs the Fashion-MNIST IDX files (apt-get install dataset-fashion-mnist, $RFED_DATA, "
        "or 'data_path')."
    ),
    defaults={
        "data_path": "", "n_agents": 100, "per_agent": 600,
        "epsilons": [0.5, 1.0, 2.0, 4.0, 8.0], "repetitions": 5, "tune_repetitions": 1,
        "clips": [0.5, 1.0], "norm_bounds": [1.0],
        **{**_PCA_GRID_DEFAULTS, "rsgd_rounds": [10, 20], "rsgd_steps": [0.5, 1.0],
           "rsvrg_rounds": [10], "rsvrg_inner_steps": [3], "rsvrg_steps": [0.05, 0.2, 1.0],
           "rsvrg_clip_diffs": [0.1, 0.25], "rsvrg_batches": [128, 512]},
    },
    slow=True,
    requires=("fashion-mnist",),
    validate=_check_rsvrg_variant,
)
def pca_fmnist(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-pca-fmnist``: PCA on Fashion-MNIST, PriRFed against Analyze Gauss
    and the noisy power method over an epsilon sweep.

    A companion of PriRFed Sec. 6.1. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-pca-fmnist`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    eps = _check_epsilons(config["epsilons"])
    problem, public = _fmnist_problems(config, ctx)
    delta = sweep_delta(int(problem.counts.min()))
    out = sweep_methods(
        ctx, problem, public, _pca_methods(config, config["norm_bounds"], config["clips"]),
        epsilons=eps, delta=delta, repetitions=config["repetitions"],
        tune_repetitions=config["tune_repetitions"],
        public_data="Fashion-MNIST test images (declared public), resampled to the private shape")
    extra = {"delta": delta, "public_data": "Fashion-MNIST test split",
             "data_bound": "||z|| <= 1 (unit-normalised images, public)"}
    if 1.0 in eps:
        extra.update(_pca_summary_extra(out, 0.9, 1.0))
    return _finish(ctx, out, "PCA on Fashion-MNIST (100 x 600, S^783): gap closed vs "
                             "certified epsilon", extra=extra)


@register(
    "utility-pca-synthetic",
    paper="PriRFed, Sec. 6.1, companion",
    summary="Synthetic PCA, affordable size: PriRFed vs Analyze Gauss, noisy power; eps sweep",
    description=(
        "The paper's synthetic PCA recipe (Z_i = U_i Sigma_i V_i, per-agent bases, singular "
        "values <= 1, so ||z|| <= 1 is a public bound of the recipe) at a size where privacy is "
        "affordable: 20 agents x 2,000 samples in R^25 with eigengap 0.1 (the paper: 16 x 70, "
        "eigengap 1e-3). Certified budgets eps in {0.5, 1, 2, 4, 8}, delta = min(1e-5, "
        "1/(10 N)); PriRFed DP-RSGD and DP-RSVRG against Analyze Gauss and the noisy power "
        "method at the same budget; 5 repetitions. Hyperparameters (clip, step, rounds, norm "
        "bound, and DP-RSVRG's tau_d / tau and inner batch) are chosen on a PUBLIC STAND-IN "
        "drawn from the same recipe with its own seed. DP-RSVRG is by default "
        "('rsvrg_variant') the released-snapshot variant, labelled 'not the paper's' (snapshot "
        "gradient released once per outer loop, inner steps on minibatches of rsvrg_batches "
        "records with per-sample differences clipped to tau_d = clip_diff x clip); "
        "rsvrg_variant = 'paper' runs Alg. 3 as written, which at this size does not beat its "
        "random start at any budget."
    ),
    defaults={
        "n_agents": 20, "per_agent": 2000, "dim": 25, "eigengap": 0.1,
        "epsilons": [0.5, 1.0, 2.0, 4.0, 8.0], "repetitions": 5, "tune_repetitions": 2,
        "clips": [0.005, 0.01, 0.02], "norm_bounds": [0.1, 0.15, 0.3],
        # the second moments are O(1 / N_i): step sizes O(N_i) (a step of 1 / (2 lambda_max))
        **{**_PCA_GRID_DEFAULTS, "rsgd_rounds": [10, 30], "rsgd_steps": [100.0, 300.0, 1000.0],
           "rsvrg_rounds": [30], "rsvrg_inner_steps": [3], "rsvrg_steps": [100.0, 300.0, 1000.0],
           "rsvrg_clip_diffs": [0.1, 0.25], "rsvrg_batches": [128, 512]},
    },
    validate=_check_pca_synthetic,
)
def pca_synthetic(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-pca-synthetic``: synthetic PCA at an affordable size, PriRFed
    against Analyze Gauss and the noisy power method over an epsilon sweep.

    A companion of PriRFed Sec. 6.1. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-pca-synthetic`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets.synthetic import make_pca_synthetic

    eps = _check_epsilons(config["epsilons"])
    shape = (config["n_agents"], config["per_agent"], config["dim"], config["eigengap"])
    problem = _cost_only(SpherePCA(make_pca_synthetic(*shape, ctx.rng(0)), norm_bound=1.0))
    public = _cost_only(SpherePCA(make_pca_synthetic(*shape, ctx.rng(7_777)), norm_bound=1.0))
    delta = sweep_delta(int(problem.counts.min()))
    out = sweep_methods(
        ctx, problem, public, _pca_methods(config, config["norm_bounds"], config["clips"]),
        epsilons=eps, delta=delta, repetitions=config["repetitions"],
        tune_repetitions=config["tune_repetitions"],
        public_data="public stand-in: the same recipe, its own seed")
    extra = {"delta": delta, "public_data": "stand-in from the same recipe (own seed)"}
    if 1.0 in eps:
        extra.update(_pca_summary_extra(out, 0.9, 1.0))
    return _finish(ctx, out, f"Synthetic PCA ({config['n_agents']} x {config['per_agent']}, "
                             f"S^{config['dim'] - 1}): gap closed vs certified epsilon",
                   extra=extra)


def spread_spectrum(dim: int, top_share: float) -> np.ndarray:
    """Singular values ``sigma_k proportional to k^(-alpha/2)``, ``sigma_1 = 1``, with ``alpha``
    such that the top direction holds ``top_share`` of the energy:
    ``sigma_1^2 / sum_k sigma_k^2 = top_share`` (solved by bisection).

    Parameters
    ----------
    dim : int
    top_share : float
        In ``(1 / dim, 1)``.

    Returns
    -------
    ndarray, shape ``(dim,)``, decreasing, first entry 1.
    """
    if not 1.0 / dim < top_share < 1.0:
        raise ValueError(f"setting 'top_share' must be in (1/dim, 1) = ({1.0 / dim:.3g}, 1), "
                         f"got {top_share!r}")
    k = np.arange(1, dim + 1, dtype=float)

    def share(alpha: float) -> float:
        return 1.0 / float(np.sum(k ** -alpha))

    lo, hi = 0.0, 1.0
    while share(hi) < top_share:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if share(mid) < top_share else (lo, mid)
    return k ** (-0.5 * hi)


def make_spread_pca(n_agents: int, per_agent: int, dim: int, top_share: float,
                    rng: np.random.Generator) -> np.ndarray:
    """PCA data with a spread spectrum: ``Z_i = U_i diag(sigma) V`` (rows the records).

    ``sigma`` from :func:`spread_spectrum` (largest 1, so every record has norm at most 1: a
    public bound of the recipe), ``U_i`` Haar column-orthonormal ``(per_agent, dim)`` per
    agent, ``V`` one Haar orthogonal matrix shared by the agents (they agree on the principal
    direction ``V[0]``). Each record's expected share of energy along ``V[0]`` is
    ``top_share``; the pooled second moment's top eigenvalue is ``1 / per_agent`` and its gap
    ``(1 - sigma_2^2) / per_agent``.

    Parameters
    ----------
    n_agents : int
        The number of agents.
    per_agent : int
        Records per agent (at least ``dim``).
    dim : int
        The dimension.
    top_share : float
        Each record's expected share of energy along ``V[0]``.
    rng : numpy.random.Generator
        The generator of ``U_i`` and ``V``.

    Returns
    -------
    ndarray, shape ``(n_agents, per_agent, dim)``
    """
    from rfed.datasets.synthetic import haar_orthogonal, random_orthonormal_columns

    sigma = spread_spectrum(int(dim), float(top_share))
    u = random_orthonormal_columns(int(per_agent), int(dim), rng, (int(n_agents),))
    v = haar_orthogonal(int(dim), rng, (1,))
    return (u * sigma) @ v


@register(
    "utility-pca-highdim",
    paper="PriRFed, Sec. 6.1, companion",
    summary="PCA in high dimension with a spread spectrum: PriRFed vs Analyze Gauss at "
            "eps <= 1",
    description=(
        "Where the iterative method can win: the leading eigenvector (SpherePCA on S^499) of "
        "records whose energy is spread over many directions, the top one holding a small "
        "share (top_share = 0.021) of each record's energy: Z_i = U_i diag(sigma) V with "
        "sigma_k proportional to k^(-alpha/2), sigma_1 = 1 (so ||z|| <= 1, a public bound of "
        "the recipe), one shared Haar V, 16 agents x 2,000 records in R^500. Analyze Gauss "
        "perturbs the whole 500 x 500 second moment once (noise calibrated to the record "
        "norm bound), its error grows with the dimension over a small eigengap; PriRFed "
        "DP-RSGD releases clipped gradients whose norm is the records' projection on the "
        "current iterate, small for spread records. Certified budgets eps in {0.25, 0.5, 1, "
        "2}, delta = min(1e-5, 1/(10 N)); PriRFed DP-RSGD against Analyze Gauss and the "
        "noisy power method at the same budget, 5 repetitions from data-independent random "
        "starts; utility: the gap closed. Hyperparameters (rounds, step, clip, norm bound, "
        "power iterations) are chosen on a PUBLIC STAND-IN drawn from the same recipe with "
        "its own seed, by the gap closed by the mean cost of tune_repetitions public runs. "
        "The 'checks' entry of the summary says at which budgets PriRFed is ahead of Analyze "
        "Gauss, in mean and beyond the one-std bands."
    ),
    defaults={
        "n_agents": 16, "per_agent": 2000, "dim": 500, "top_share": 0.021,
        "epsilons": [0.25, 0.5, 1.0, 2.0], "repetitions": 5, "tune_repetitions": 2,
        "clips": [0.0025, 0.005, 0.01, 0.02], "norm_bounds": [0.1, 0.2, 0.4, 1.0],
        **{**_PCA_GRID_DEFAULTS, "rsgd_rounds": [10, 30, 100],
           "rsgd_steps": [300.0, 1000.0, 3000.0], "rsvrg": False, "power_iters": [3, 10]},
    },
)
def pca_highdim(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-pca-highdim``: PCA in high dimension with a spread spectrum
    (:func:`make_spread_pca`), PriRFed against Analyze Gauss at small epsilon.

    A companion of PriRFed Sec. 6.1. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-pca-highdim`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    eps = _check_epsilons(config["epsilons"])
    shape = (int(config["n_agents"]), int(config["per_agent"]), int(config["dim"]),
             float(config["top_share"]))
    if shape[1] < shape[2]:
        raise ValueError(f"setting 'per_agent' ({shape[1]}) must be at least 'dim' "
                         f"({shape[2]}): each agent's U_i has orthonormal columns")
    problem = _cost_only(SpherePCA(make_spread_pca(*shape, ctx.rng(0)), norm_bound=1.0))
    public = _cost_only(SpherePCA(make_spread_pca(*shape, ctx.rng(7_777)), norm_bound=1.0))
    delta = sweep_delta(int(problem.counts.min()))
    out = sweep_methods(
        ctx, problem, public, _pca_methods(config, config["norm_bounds"], config["clips"]),
        epsilons=eps, delta=delta, repetitions=config["repetitions"],
        tune_repetitions=config["tune_repetitions"], tune_score="excess",
        public_data="public stand-in: the same recipe, its own seed")
    sigma = spread_spectrum(shape[2], shape[3])
    checks = _ahead_checks(out["rows"], "PriRFed DP-RSGD", "Analyze Gauss")
    extra = {"delta": delta, "public_data": "stand-in from the same recipe (own seed)",
             "top_share": float(sigma[0] ** 2 / np.sum(sigma ** 2)),
             "eigengap_over_top": float(1.0 - sigma[1] ** 2), "checks": checks,
             "prirfed_ahead_at_every_eps_le_1": bool(all(
                 c["ahead_in_mean"] for c in checks if c["target_epsilon"] <= 1.0))}
    if 1.0 in eps:
        extra.update(_pca_summary_extra(out, 0.9, 1.0))
    return _finish(ctx, out, f"PCA with a spread spectrum ({shape[0]} x {shape[1]}, "
                             f"S^{shape[2] - 1}, top share {shape[3]:g}): gap closed vs "
                             "certified epsilon", extra=extra)


def _ahead_checks(rows: Sequence[Mapping[str, Any]], method: str, baseline: str
                  ) -> list[dict]:
    """Per budget: ``method``'s mean gap closed against ``baseline``'s, and whether the
    one-std bands are apart (``mean - std`` of the method above ``mean + std`` of the
    baseline)."""
    out = []
    by = {(r["method"], r["target_epsilon"]): r for r in rows}
    for eps in sorted({r["target_epsilon"] for r in rows}):
        a, b = by.get((method, eps)), by.get((baseline, eps))
        if a is None or b is None:
            continue
        out.append({"target_epsilon": eps, method: a["gap_closed_mean"],
                    f"{method} std": a["gap_closed_std"], baseline: b["gap_closed_mean"],
                    f"{baseline} std": b["gap_closed_std"],
                    "ahead_in_mean": bool(a["gap_closed_mean"] > b["gap_closed_mean"]),
                    "ahead_beyond_bands": bool(a["gap_closed_mean"] - a["gap_closed_std"]
                                               > b["gap_closed_mean"] + b["gap_closed_std"])})
    return out


# ====================================================================== SPD
def _spd_methods(config: dict) -> list[Method]:
    """PriRFed DP-RSGD and the one-shot log-Euclidean private mean, with their public grids."""
    return [
        Method("PriRFed DP-RSGD", _prirfed_rsgd,
               _grid(rounds=config["rsgd_rounds"], step=config["rsgd_steps"],
                     clip=config["clips"], batch=[None])),
        Method("Log-Euclidean private mean", _log_euclidean,
               _grid(log_norm_bound=config["log_norm_bounds"])),
    ]


@register(
    "utility-spd",
    paper="PriRFed, Sec. 6.2, companion",
    summary="SPD Frechet mean (Wishart): PriRFed vs log-Euclidean private mean; eps sweep",
    description=(
        "Frechet mean on SPD(2) of Wishart W(I/2, 2) samples restricted to the geodesic ball of "
        "radius 0.5 around I (the paper's recipe; the radius is a public bound of the recipe: "
        "||log a||_F <= 0.5 and per-sample gradients dist(x, a) are clipped to tau), 50 agents "
        "x 1,000 samples, full participation. Certified budgets eps in {0.5, 1, 2, 4, 8}, "
        "delta = min(1e-5, 1/(10 N)); PriRFed DP-RSGD (full batch) against the one-shot "
        "log-Euclidean private mean at the same budget; 5 repetitions from random starts. "
        "Hyperparameters (clip, step, rounds; the log-norm bound) are chosen on a PUBLIC "
        "STAND-IN drawn from the same recipe with its own seed."
    ),
    defaults={
        "n_agents": 50, "per_agent": 1000, "matrix_size": 2,
        "epsilons": [0.5, 1.0, 2.0, 4.0, 8.0], "repetitions": 5, "tune_repetitions": 2,
        "rsgd_rounds": [5, 10, 20], "rsgd_steps": [0.3, 0.6, 1.0], "clips": [0.5, 1.0, 2.0],
        "log_norm_bounds": [0.25, 0.5],
    },
)
def spd_wishart(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-spd``: SPD Frechet mean of Wishart samples, PriRFed against a
    log-Euclidean private mean over an epsilon sweep.

    A companion of PriRFed Sec. 6.2. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-spd`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets.synthetic import make_wishart_spd

    eps = _check_epsilons(config["epsilons"])
    n_agents, per, n = config["n_agents"], config["per_agent"], config["matrix_size"]

    def make(rng):
        pts = make_wishart_spd(n_agents * per, n, rng)
        return SPDFrechetMean(pts.reshape(n_agents, per, n, n))

    problem, public = make(ctx.rng(0)), make(ctx.rng(7_777))
    delta = sweep_delta(per)
    methods = _spd_methods(config)
    out = sweep_methods(ctx, problem, public, methods, epsilons=eps, delta=delta,
                        repetitions=config["repetitions"],
                        tune_repetitions=config["tune_repetitions"],
                        public_data="public stand-in: the same recipe, its own seed")
    return _finish(ctx, out, f"SPD({n}) Frechet mean, Wishart ({n_agents} x {per}): gap "
                             "closed vs certified epsilon",
                   extra={"delta": delta,
                          "public_data": "stand-in from the same recipe (own seed)"})


def _descriptor_problems(config: dict, ctx: RunContext
                         ) -> tuple[SPDFrechetMean, SPDFrechetMean, str, str]:
    """Private and public SPD problems of image covariance descriptors, and their labels.

    ``data="fmnist"``: SPD(7) descriptors (x, y, I, |I_x|, |I_y|, |I_xx|, |I_yy|) of whole
    Fashion-MNIST images; the private ones from the training images, the public ones from the
    test images (declared public). ``data="photos"``: the SPD(9) descriptors of 28x28 patches
    (stride 7) of scikit-learn's two shipped photos (the prirfed-fig4 stand-in); a random
    ``public_fraction`` of the patches is the declared public split. Both use the relative ridge
    ``1e-3 trace / k``.

    Every descriptor ``a`` is whitened by the PUBLIC log-Euclidean mean ``M`` of the public
    descriptors, ``a -> M^(-1/2) a M^(-1/2)``: an isometry of the affine-invariant metric (the
    costs and gaps are those of the raw data) that centres the data near the identity, where the
    log-Euclidean baseline's public norm bound is meaningful.
    """
    from rfed.algorithms.baselines.spd_mean import spd_exp, spd_log
    from rfed.datasets import load_fashion_mnist, load_sample_image_descriptors
    from rfed.datasets.images import covariance_descriptors

    n_agents, data = int(config["n_agents"]), config["data"]
    if data == "fmnist":
        (x_tr, _), (x_te, _) = load_fashion_mnist(config["data_path"] or None, split="both")
        private = covariance_descriptors(x_tr, 1e-3, relative_ridge=True)
        public = covariance_descriptors(x_te, 1e-3, relative_ridge=True)
        label = "Fashion-MNIST SPD(7) covariance descriptors of whole images"
        public_label = "Fashion-MNIST test images (declared public)"
    elif data == "photos":
        desc, _ = load_sample_image_descriptors(stride=7)
        order = ctx.rng(1).permutation(len(desc))
        n_pub = int(round(float(config["public_fraction"]) * len(desc)))
        if not 0 < n_pub < len(desc):
            raise ValueError("setting 'public_fraction' must be in (0, 1), got "
                             f"{config['public_fraction']!r}")
        private, public = desc[order[n_pub:]], desc[order[:n_pub]]
        label = ("STAND-IN: SPD(9) descriptors of 28x28 patches of scikit-learn's two photos "
                 "(not Fashion-MNIST)")
        public_label = f"declared public split: {n_pub} random photo patches"
    else:
        raise ValueError(f"setting 'data' must be 'fmnist' or 'photos', got {data!r}")
    per = int(config["per_agent"]) or len(private) // n_agents
    if n_agents < 1 or not 1 <= per <= len(private) // n_agents:
        raise ValueError(f"settings 'n_agents' x 'per_agent' = {n_agents} x {per} need more "
                         f"than the {len(private)} private descriptors")
    w, v = np.linalg.eigh(spd_exp(spd_log(public).mean(axis=0)))
    whiten = (v * w ** -0.5) @ v.T
    private = whiten @ private @ whiten
    public = whiten @ public @ whiten
    k = private.shape[-1]
    idx = ctx.rng(0).permutation(len(private))[: n_agents * per]
    problem = SPDFrechetMean(private[idx].reshape(n_agents, per, k, k))
    pub_idx = ctx.rng(2).integers(0, len(public), size=(n_agents, per))
    return problem, SPDFrechetMean(public[pub_idx]), label, public_label


@register(
    "utility-spd-descriptors",
    paper="PriRFed, Sec. 6.2, companion",
    summary="SPD Frechet mean of Fashion-MNIST covariance descriptors: PriRFed vs log-Euclidean "
            "private mean; eps sweep",
    description=(
        "Frechet mean (affine-invariant) of image covariance descriptors: SPD(7) descriptors "
        "(x, y, I, |I_x|, |I_y|, |I_xx|, |I_yy|) of the 60,000 Fashion-MNIST training images, "
        "50 agents x 1,200 images, full participation ('data=photos': the prirfed-fig4 STAND-IN, "
        "SPD(9) descriptors of patches of scikit-learn's two photos, labelled as such). The "
        "descriptors are whitened by the public log-Euclidean mean of the declared public "
        "descriptors (an isometry: centres the data at I). Certified budgets eps in {0.5, 1, 2, "
        "4, 8}, delta = min(1e-5, 1/(10 N)); PriRFed DP-RSGD (full batch) against the one-shot "
        "log-Euclidean private mean at the same budget; 5 repetitions from random starts. "
        "Hyperparameters (clip, step, rounds; the log-norm bound) are chosen on the DECLARED "
        "PUBLIC data: the 10,000 test images (photos: a random 20 % of the patches), resampled "
        "to the private shape. Needs the Fashion-MNIST IDX files unless data=photos."
    ),
    defaults={
        "data": "fmnist", "data_path": "", "n_agents": 50, "per_agent": 0,
        "public_fraction": 0.2,
        "epsilons": [0.5, 1.0, 2.0, 4.0, 8.0], "repetitions": 5, "tune_repetitions": 1,
        "rsgd_rounds": [10, 20], "rsgd_steps": [0.3, 0.6, 1.0], "clips": [1.0, 2.0, 4.0],
        "log_norm_bounds": [1.0, 2.0, 4.0],
    },
    slow=True,
    requires=("fashion-mnist",),
)
def spd_descriptors(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-spd-descriptors``: SPD Frechet mean of Fashion-MNIST covariance
    descriptors, PriRFed against a log-Euclidean private mean over an epsilon sweep.

    A companion of PriRFed Sec. 6.2. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-spd-descriptors`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    eps = _check_epsilons(config["epsilons"])
    # the description names the photo option's STAND-IN; only that option is one
    ctx.stand_in = config["data"] == "photos"
    problem, public, label, public_label = _descriptor_problems(config, ctx)
    delta = sweep_delta(int(problem.counts.min()))
    methods = _spd_methods(config)
    out = sweep_methods(ctx, problem, public, methods, epsilons=eps, delta=delta,
                        repetitions=config["repetitions"],
                        tune_repetitions=config["tune_repetitions"], public_data=public_label)
    k = problem.manifold.point_shape[0]
    what = ("Fashion-MNIST descriptors" if config["data"] == "fmnist"
            else "photo-patch descriptors (STAND-IN)")
    return _finish(ctx, out, f"SPD({k}) Frechet mean, {what} ({problem.n_agents} x "
                             f"{int(problem.counts.min())}): gap closed vs certified epsilon",
                   extra={"delta": delta, "data": label, "public_data": public_label})
