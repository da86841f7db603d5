"""PriRFed's experiments (Sec. 6 of the paper, :ref:`prirfed-experiments`) as named runs, plus
the fast default.

Every experiment builds its problems, runs each setting for several repetitions (one generator
per setting and repetition, the same random start for every setting of a repetition), logs the
history as it goes, records the privacy report of every setting, saves a table (final excess
risk mean +- std, epsilons) and the paper's panels as PNG. Where the paper's data are not
available offline, a stand-in is used and named as such in the description, the table and the
figure titles.

Privacy: every private setting is budget-first (``PriRFed(..., budget=PrivacyBudget(eps,
delta), n_rounds=T)``) and labelled ``certified eps=X (delta=Y)``; where an experiment reproduces
a paper's figure, the paper's calibration (``paper_epsilon``) is kept as an extra setting,
labelled with its certified epsilon first and the paper's value beside it, marked as the
paper's. A certified epsilon in a label is the a-priori one (any agent selection: the agent
charged every round). Clip levels and step sizes are PUBLIC: given numbers, a bound asserted on
the data domain (named in the report's assumptions), or chosen on a declared public stand-in
drawn from the same recipe with its own seed; never read from the private data.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rfed.algorithms.base import _HOOK
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.repeated import RepeatedRuns
from rfed.experiments.plotting import new_figure, plot_curves, range_without
from rfed.experiments.registry import (
    RunContext,
    check_choices,
    check_setting,
    get_experiment,
    register,
    summarise_repetitions,
    summary_row,
)
from rfed.experiments.tables import choose_best, gap_closed
from rfed.privacy import PrivacyBudget
from rfed.problems import HyperbolicPrediction, Problem, SPDFrechetMean, SpherePCA

__all__ = ["run_settings", "Setting"]

_METRICS = ("cost", "grad_norm", "excess_risk", "dist_to_ref")


class Setting:
    """One curve of an experiment: a label, a problem and an algorithm.

    ``algorithm_name`` names the local trainer (e.g. ``"DP-RSGD"``): a private setting's
    non-private reference in the summary table is the non-private setting of the same group
    and ``algorithm_name``. ``repetitions`` overrides the experiment's count for this setting
    (its repetitions are the experiment's first ones: same starts, same generators).

    Parameters
    ----------
    label : str
        The curve's label (legend and table).
    problem : Problem
        The federated problem it runs on.
    algorithm : PriRFed
        The configured algorithm.
    group : str, default ""
        The group in which a private setting's non-private reference is looked up.
    algorithm_name : str, default ""
        The local trainer's name.
    repetitions : int, optional
        This setting's number of repetitions; the experiment's when ``None``.
    """

    def __init__(self, label: str, problem: Problem, algorithm: PriRFed, group: str = "",
                 algorithm_name: str = "", repetitions: int | None = None):
        self.label = label
        self.problem = problem
        self.algorithm = algorithm
        self.group = group
        self.algorithm_name = algorithm_name
        self.repetitions = repetitions


def run_settings(
    ctx: RunContext,
    settings: Sequence[Setting],
    *,
    rounds: int,
    repetitions: int,
    eval_every: int,
    start: Callable[[Problem, np.random.Generator], np.ndarray] | None = None,
    extra_metrics: Callable[[Problem, np.ndarray], dict] | None = None,
    report_rounds: Sequence[int] = (),
) -> tuple[list[dict], dict[str, list]]:
    """Run every setting ``repetitions`` times, logging each evaluated round through ``ctx``.

    The repetitions of a PriRFed setting run together as one
    :class:`~rfed.algorithms.federated.repeated.RepeatedRuns` (each local step is one batched
    call for all of them; each repetition's history is bit for bit the one it has alone), and
    their records are logged afterwards in the order a run alone logs them; one repetition, or
    secure mode (OS randomness, not stackable), runs alone. A repetition that diverges is
    logged and counted as before, and the others go on.

    ``report_rounds`` adds the excess risk (mean and std over repetitions) at those rounds
    (which must be evaluated, i.e. multiples of ``eval_every``) to each row, as
    ``excess_risk_at_<t>_mean`` / ``_std``: a setting may lead early and trail at the end.

    Parameters
    ----------
    ctx : RunContext
        The run's context: generators, log, privacy reports.
    settings : sequence of Setting
        The curves to run.
    rounds : int
        Rounds per run.
    repetitions : int
        Repetitions per setting (unless the setting overrides it).
    eval_every : int
        Evaluate and log every ``eval_every`` rounds.
    start : callable, optional
        ``start(problem, rng) -> x0``, the starting point (shape: a point of ``problem``'s
        manifold); a random point of the manifold when ``None``.
    extra_metrics : callable, optional
        ``extra_metrics(problem, x) -> dict`` of further values logged at each evaluation.
    report_rounds : sequence of int, default ()
        Rounds at which the excess risk is added to the rows.

    Returns
    -------
    rows : list of dict
        One summary row per setting (final excess risk mean +- std, epsilons).
    results : dict
        ``{label: [RunResult, ...]}``.
    """
    rows = []
    results: dict[str, list] = {}
    reps_of = [st.repetitions or repetitions for st in settings]
    bar = ctx.progress_bar(sum(reps_of) * rounds, desc="rounds")
    for si, (st, n_reps) in enumerate(zip(settings, reps_of, strict=True)):
        x0s = []
        for rep in range(n_reps):
            x0_rng = ctx.rng(10_000, rep)
            x0s.append(start(st.problem, x0_rng) if start
                       else st.problem.manifold.random_point(x0_rng))
        rngs = [ctx.rng(si, rep) for rep in range(n_reps)]
        if (n_reps > 1 and not ctx.secure and isinstance(st.algorithm, PriRFed)
                and _federated_runner(st) is None):
            runs = _run_together(ctx, st, x0s, rngs, rounds, eval_every, extra_metrics, bar)
        else:
            runs = [_run_alone(ctx, st, rep, x0s[rep], rngs[rep], rounds, eval_every,
                               extra_metrics, bar) for rep in range(n_reps)]
        summ = summarise_repetitions(runs, ("excess_risk", "cost"))
        kept = summ["kept"]
        results[st.label] = runs
        # the worst repetition's ledger (with partial participation the ledgers differ): what
        # the run spent, the one epsilon of this curve
        report = (max((r.privacy for r in runs), key=lambda rep: rep["epsilon_certified"])
                  if runs and runs[0].privacy is not None
                  else st.algorithm.privacy_after(st.problem, rounds))
        ctx.set_privacy(st.label, report)
        starts = np.array([r.history[0]["excess_risk"] for r in runs
                           if r.history and "excess_risk" in r.history[0]])
        rows.append({
            "setting": st.label,
            "group": st.group,
            "algorithm": st.algorithm_name,
            "private": bool(report.get("private", True)),
            "rounds": rounds,
            "repetitions": n_reps,
            "start_excess_risk_mean": float(starts.mean()) if starts.size else math.nan,
            "diverged": summ["diverged"],
            "diverged_rounds": summ["diverged_rounds"],
            "final_cost_mean": summ["cost_mean"],
            "final_excess_risk_mean": summ["excess_risk_mean"],
            "final_excess_risk_std": summ["excess_risk_std"],
            "epsilon_certified": report["epsilon_certified"],
            "delta": report["delta"],
            "accountant": report.get("accountant", ""),
            "target_epsilon": report["target_epsilon"],
            "epsilon_paper": report["epsilon_paper"],
            "delta_paper": report["delta_paper"],
            "certified_bound": report["certified"]["bound"],
        })
        for t in report_rounds:
            at = np.array([rec["excess_risk"] for r in kept for rec in r.history
                           if rec["round"] == t])
            rows[-1][f"excess_risk_at_{t}_mean"] = float(at.mean()) if at.size else math.nan
            rows[-1][f"excess_risk_at_{t}_std"] = float(at.std()) if at.size else math.nan
    bar.close()
    return rows, results


def _run_alone(ctx: RunContext, st: Setting, rep: int, x0: np.ndarray,
               rng: np.random.Generator, rounds: int, eval_every: int,
               extra_metrics: Callable | None, bar: Any):
    """One repetition by :meth:`Algorithm.run`, its records logged as they come."""
    last = [0]

    def callback(t, rec, state):
        extra = extra_metrics(st.problem, state.x) if extra_metrics else {}
        ctx.log(setting=st.label, group=st.group, repetition=rep, **rec, **extra)
        bar.update(t - last[0])
        last[0] = t

    federated = _federated_runner(st)
    run = st.algorithm.run if federated is None else (
        lambda *args, **kwargs: federated(st.algorithm, *args, **kwargs))
    res = run(st.problem, rounds, rng=rng, x0=x0, eval_every=eval_every, callback=callback)
    if res.diverged:
        ctx.log(setting=st.label, group=st.group, repetition=rep, diverged=True,
                diverged_round=res.diverged_round, diverged_reason=res.diverged_reason)
    bar.update(rounds - last[0])
    return res


def _federated_runner(st: Setting) -> Callable | None:
    """The engine's ``run_federated`` when one runs this setting's PriRFed runs elsewhere
    (``rfed run NAME --engine flower``: :class:`rfed.engines.flower_runs.FlowerRunHook`); the
    repetitions then run one by one (each bit for bit what it is in a batched group)."""
    runner = getattr(_HOOK.get(), "run_federated", None)
    return runner if runner is not None and isinstance(st.algorithm, PriRFed) else None


def _run_together(ctx: RunContext, st: Setting, x0s: list, rngs: list, rounds: int,
                  eval_every: int, extra_metrics: Callable | None, bar: Any) -> list:
    """All repetitions of ``st`` as one :class:`RepeatedRuns` (one batched call per local
    step), then each repetition's records logged in the order :func:`_run_alone` logs them.

    The group is one checkpointed run (resumed as a whole); a repetition that diverges is
    logged as a run alone logs it, and the others go on.
    """
    group = RepeatedRuns(
        st.algorithm, x0s, rngs, n_rounds=rounds, eval_every=eval_every,
        on_record=(lambda r, state: extra_metrics(st.problem, state.x)) if extra_metrics
        else None)
    last = [0]

    def progress(t, rec, state):
        bar.update(len(x0s) * (t - last[0]))
        last[0] = t

    res = group.run(st.problem, rounds, rng=rngs[0], x0=x0s[0], eval_every=eval_every,
                    callback=progress)
    bar.update(len(x0s) * (rounds - last[0]))
    # a run alone is hooked (checkpointed) by the experiment's context, which logs a diverged
    # run's record at its end: the same record here, for the same history
    hooked = _HOOK.get() is ctx
    runs = group.results(st.problem, res.state)
    for rep, run in enumerate(runs):
        where = {"setting": st.label, "group": st.group, "repetition": rep}
        for rec, extra in zip(run.history, res.state.extras[rep], strict=True):
            ctx.log(**where, **rec, **extra)
        if run.diverged:
            if hooked:
                ctx.record_divergence(run, where, ctx.runs_started - 1)
            ctx.log(**where, diverged=True, diverged_round=run.diverged_round,
                    diverged_reason=run.diverged_reason)
    return runs


def _summary(ctx: RunContext, rows: list[dict], reference_cost: float | None = None,
             **extra) -> dict:
    """The experiment's summary dict, and its one summary table (``ctx.summary_table``).

    Utility: the final excess risk (cost minus the optimal cost) over the repetitions that did
    not diverge; reference: the non-private setting's, where the experiment runs one.
    """
    keys = ("final_cost_mean", "final_excess_risk_mean", "final_excess_risk_std",
            "epsilon_certified", "delta", "target_epsilon", "epsilon_paper", "delta_paper",
            "diverged", "diverged_rounds")
    out: dict[str, Any] = {"settings": {
        r["setting"]: {k: v for k, v in r.items()
                       if k in keys or k.startswith("excess_risk_at_")}
        for r in rows
    }}
    if reference_cost is not None:
        out["reference_cost"] = reference_cost
    out.update(extra)
    out["accountant"] = ("certified: dp-accounting (tighter of RDP and PLD), record-level "
                         "replace-one, worst agent's ledger, agent selection public (no "
                         "amplification by agent sampling); the paper's epsilon (its "
                         "closed-form composition with its sigma formulas) is shown beside it "
                         "as the paper's formula, not a guarantee")
    try:
        figure = get_experiment(ctx.experiment).paper_label
    except (KeyError, ValueError):
        figure = ""
    table = []
    for r in rows:
        private = r.get("private", True)
        ref_row = _reference_row(rows, r)
        ref = ref_row["final_excess_risk_mean"] if ref_row is not None else None
        table.append(summary_row(
            r["setting"], utility_name="excess risk (cost - optimum)",
            utility=r["final_excess_risk_mean"], utility_std=r["final_excess_risk_std"],
            reference=ref, reference_name="non-private" if ref is not None else "",
            epsilon=r["epsilon_certified"] if private else None,
            delta=r["delta"] if private else None,
            accountant=(r["accountant"] or "dp-accounting, record-level") if private else "",
            figure=figure, repetitions=r["repetitions"], diverged=r["diverged"],
            epsilon_paper=r["epsilon_paper"] if private else None,
            start=r.get("start_excess_risk_mean"), higher_is_better=False))
    ctx.summary_table(table)
    return out


def _reference_row(rows: list[dict], row: dict) -> dict | None:
    """The non-private row of ``row``'s group and algorithm (any non-private row of the group
    when no algorithm is named), or ``None``."""
    same_group = [r for r in rows if not r.get("private", True)
                  and r.get("group", "") == row.get("group", "")]
    named = [r for r in same_group if row.get("algorithm")
             and r.get("algorithm") == row.get("algorithm")]
    pool = named or (same_group if not row.get("algorithm") or len(same_group) == 1 else [])
    return pool[0] if pool else None


#: The reference line of the cost panels: the pooled problem's optimum, what a non-private
#: solver reaches.
_TRUE_VALUE = "true value (non-private optimum)"


def _panels(ctx: RunContext, name: str, title: str, reference_cost: float,
            where=None, order=None, ys=("cost", "grad_norm", "excess_risk")) -> None:
    logy = [k != "cost" for k in ys]
    hl = [{_TRUE_VALUE: reference_cost} if k == "cost" else None for k in ys]
    fig = plot_curves(ctx.records, "round", list(ys), by="setting", where=where, logy=logy,
                      hlines=hl, suptitle=title, order=order)
    ctx.save_figure(fig, name)


def planned_label(epsilon: float) -> str:
    """``planned eps<=X``: a budget-first setting's label names its budget as the PLANNED
    bound (what the noise was calibrated for, any agent selection); the epsilon the run spent
    (its ledger) is added to every legend and is the table's epsilon column.

    Parameters
    ----------
    epsilon : float
        The planned budget.

    Returns
    -------
    str
        The label.
    """
    return f"planned eps<={epsilon:g}"


def paper_label(epsilon: float) -> str:
    """``paper's calibration (local eps=X)``: the paper's noise formula at its epsilon.

    Parameters
    ----------
    epsilon : float
        The paper's local epsilon.

    Returns
    -------
    str
        The label.
    """
    return f"paper's calibration (local eps={epsilon:g})"


def _private(trainer_for, problem: Problem, n_sampled: int | None, step, rounds: int,
             epsilons: Sequence[float], delta: float | None, paper_epsilons: Sequence[float] = (),
             paper_delta: float | None = None, prefix: str = "", group: str = "",
             algorithm_name: str = "") -> list[Setting]:
    """Budget-first settings (one per planned epsilon) and the paper's calibrations.

    ``trainer_for(**noise)`` builds the trainer: ``{}`` for a budget (the budget sets the
    noise), ``{"paper_epsilon": e, "paper_delta": d}`` for the paper's calibration. Labels
    carry no certified number (:func:`planned_label`, :func:`paper_label`): the one certified
    epsilon of a curve is its run's ledger, known once it has run.
    """
    out = []
    for eps in epsilons:
        alg = PriRFed(trainer_for(), n_sampled, step, budget=PrivacyBudget(eps, delta),
                      n_rounds=rounds)
        out.append(Setting(prefix + planned_label(eps), problem, alg, group, algorithm_name))
    for eps in paper_epsilons:
        alg = PriRFed(trainer_for(paper_epsilon=eps, paper_delta=paper_delta), n_sampled, step,
                      privacy_delta=delta, n_rounds=rounds)
        out.append(Setting(prefix + paper_label(eps), problem, alg, group, algorithm_name))
    return out


def _public_pca_constants(config: dict, ctx: RunContext, n_per_agent: int,
                          rule: str) -> tuple[float, float]:
    """Clip level and L_g chosen on a PUBLIC stand-in drawn from the same recipe (own seed).

    ``rule``: ``'paper'`` (2 max|z|^2, the paper's tau = L_g), ``'tight'`` (max|z|^2) or
    ``'median'`` (median of |z|^2: clipping then activates on half the records, a labelled
    deviation that lowers the noise); L_g = 2 max|z|^2 of the stand-in.
    """
    from rfed.datasets.synthetic import make_pca_synthetic

    public = make_pca_synthetic(config["n_agents"], n_per_agent, config["dim"],
                                config["eigengap"], ctx.rng(7_777, n_per_agent))
    sq = np.sum(public**2, axis=-1)
    levels = {"paper": 2.0 * sq.max(), "tight": sq.max(), "median": float(np.median(sq))}
    if str(rule) not in levels:
        raise ValueError(f"setting 'clip' must be 'paper', 'tight' or 'median', got {rule!r}")
    return float(levels[str(rule)]), float(2.0 * sq.max())


def check_pca_recipe(cfg: dict, per_agent: str | int) -> None:
    """The settings of PriRFed's synthetic PCA recipe
    (:func:`rfed.datasets.synthetic.make_pca_synthetic`), refused naming the setting before
    the run starts: ``dim``, ``eigengap`` and the records per agent.

    Parameters
    ----------
    cfg : dict
        The experiment's settings.
    per_agent : str or int
        The setting holding the records per agent, or their number when it is fixed.

    Raises
    ------
    ValueError
        A setting out of the recipe's range, naming the setting.
    """
    dim = cfg["dim"]
    check_setting(cfg, "dim", dim >= 6, "an int >= 6 (the records' dimension d + 1: the "
                  "recipe's spectrum has 5 structured entries)")
    check_setting(cfg, "eigengap", 0 < cfg["eigengap"] < 1 / 1.4,
                  "a number in (0, 1/1.4) (the recipe's spectrum holds 1 - 1.4 eigengap)")
    if isinstance(per_agent, str):
        check_setting(cfg, per_agent, cfg[per_agent] >= dim,
                      f"an int >= dim = {dim} (each agent's records span the dimensions)")
    else:
        check_setting(cfg, "dim", dim <= per_agent, f"an int in [6, {per_agent}] (each agent's "
                      f"{per_agent} records span the dimensions)")


def check_pca_settings(cfg: dict) -> None:
    """The settings of the PCA experiments (pca-synthetic, prirfed-kpca): batch fraction,
    sampled agents, and the recipe's (:func:`check_pca_recipe`).

    Parameters
    ----------
    cfg : dict
        The experiment's settings.

    Raises
    ------
    ValueError
        A setting is out of its range, naming the setting.
    """
    fraction = cfg["batch_fraction"]
    check_setting(cfg, "batch_fraction", fraction is None or (
        isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
        and 0 < fraction <= 1), "None (full batch) or a fraction of the records in (0, 1]")
    sampled = cfg["n_sampled"]
    check_setting(cfg, "n_sampled", sampled is None or (
        isinstance(sampled, int) and not isinstance(sampled, bool)
        and 1 <= sampled <= cfg["n_agents"]),
        f"None (every agent) or an int in [1, n_agents = {cfg['n_agents']}]")
    check_pca_recipe(cfg, "n_per_agent")

def _check_pca_synthetic(cfg: dict) -> None:
    check_pca_settings(cfg)
    step = cfg["step_size"]
    try:   # the setting is a string: 'paper' or a number, read as the run reads it
        number = float(step) if step != "paper" else 1.0
    except (TypeError, ValueError):
        number = float("nan")
    check_setting(cfg, "step_size", math.isfinite(number) and number > 0,
                  "'paper' (1/(2 L_g), L_g from the public stand-in) or a number > 0")
    check_setting(cfg, "clip", cfg["clip"] in ("paper", "tight", "median"),
                  "'paper', 'tight' or 'median' (a rule on the public stand-in)")


@register(
    "pca-synthetic",
    paper="PriRFed, Sec. 6.1 / Fig. 1 column 1 (fast default)",
    description=(
        "Leading eigenvector on the sphere S^24 from the paper's synthetic recipe (16 agents x 70 "
        "samples, eigengap 1e-3), PriRFed-DP-RSGD in the setting of Fig. 1 column 1 (all agents, "
        "K = 1, full batch, step 1/(2 L_g)) at certified whole-run budgets eps in {2, 8, 32} "
        "(delta 1e-5, noise calibrated by rfed for the 2000 planned rounds) and the non-private "
        "run; 3 repetitions. With 70 records per agent and 2000 noisy steps, small budgets "
        "leave the runs at the excess risk of a random start (the measured values, with the "
        "command that wrote them, are on the documentation's Experiments page). The clip level "
        "and L_g are chosen on a PUBLIC stand-in drawn from the "
        "same recipe with its own seed: 'clip' = 'median' (median of its |z|^2, a labelled "
        "DEVIATION: the paper's tau = 2 max|z|^2 ('paper') is several times larger, hence "
        "several times the noise) or 'paper' / 'tight' (max|z|^2). T = 2000 rounds (the paper "
        "gives no T; with step 1/(2 L_g) even the non-private run needs them at this eigengap)."
    ),
    defaults={
        "n_agents": 16, "n_per_agent": 70, "dim": 25, "eigengap": 1e-3,
        "epsilons": [2.0, 8.0, 32.0], "delta": 1e-5, "local_steps": 1, "batch_fraction": None,
        "step_size": "paper", "n_sampled": None, "clip": "median", "rounds": 2000,
        "repetitions": 3, "eval_every": 50, "non_private": True,
    },
    validate=_check_pca_synthetic,
)
def pca_synthetic(config: dict, ctx: RunContext) -> dict:
    """Experiment ``pca-synthetic``: leading eigenvector on the sphere with PriRFed.

    The fast default of PriRFed Sec. 6.1 / Fig. 1 (column 1): the paper's synthetic recipe on
    S^24. See ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show pca-synthetic`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets.synthetic import make_pca_synthetic

    z = make_pca_synthetic(config["n_agents"], config["n_per_agent"], config["dim"],
                           config["eigengap"], ctx.rng(0))
    problem = SpherePCA(z)
    tau, lg = _public_pca_constants(config, ctx, config["n_per_agent"], config["clip"])
    # "paper": alpha = 1/(2 L_g) (Fig. 1 column 1), L_g from the public stand-in
    step = 1.0 / (2.0 * lg) if config["step_size"] == "paper" else float(config["step_size"])
    note = "" if config["clip"] == "paper" else f", clip={config['clip']}"

    def trainer(**noise):
        return DPRSGD(steps=config["local_steps"], batch_size=config["batch_fraction"],
                      clip=tau, **noise)

    settings = _private(trainer, problem, config["n_sampled"], step, config["rounds"],
                        config["epsilons"], config["delta"], prefix="DP-RSGD ",
                        algorithm_name="DP-RSGD")
    for st in settings:
        st.label += note
    if config["non_private"]:
        tr = DPRSGD(steps=config["local_steps"], batch_size=config["batch_fraction"])
        settings.append(Setting("DP-RSGD non-private", problem,
                                PriRFed(tr, config["n_sampled"], step),
                                algorithm_name="DP-RSGD"))
    rows, _ = run_settings(ctx, settings, rounds=config["rounds"],
                           repetitions=config["repetitions"], eval_every=config["eval_every"])
    ctx.save_table("final", rows)
    ref = problem.reference_cost()
    _panels(ctx, "pca_synthetic", "PriRFed-DP-RSGD, synthetic PCA on S^24", ref,
            ys=("cost", "grad_norm"))
    c = np.linalg.eigvalsh(problem.covariance())
    return _summary(ctx, rows, ref, lambda_max=-ref, clip_level=tau, step_size=step,
                    clip_chosen_on="public stand-in (same recipe, own seed)",
                    random_start_excess_risk=float(c[-1] - c.mean()))


# ====================================================================== Figure 1
def _check_fig1(cfg: dict) -> None:
    check_pca_recipe(cfg, 70)   # N_i = 70 in columns 1 and 2 (100 in column 3)


@register(
    "prirfed-fig1",
    paper="PriRFed, Fig. 1 (Sec. 6.1)",
    description=(
        "Synthetic PCA on S^24 (16 agents, eigengap 1e-3), delta 1e-5, three columns: (1) "
        "DP-RSGD, all agents, K = 1, full batch, step 1/(2 L_g), N_i = 70; (2) DP-RSGD, one agent, "
        "K = 5, b = 35, step 1.0, N_i = 70; (3) DP-RSVRG, one agent, K = 2, m = floor(10N/3) = 53, "
        "step 1/(10 N^(2/3) L_g), N_i = 100. Per column: budget-first runs at the certified "
        "whole-run 'epsilons' and, as labelled extra settings, the paper's calibration at its "
        "local eps in {0.08, 0.15, 0.3} ('paper_epsilons'), labelled with their certified eps "
        "and the paper's value. tau and L_g from a PUBLIC stand-in of the same recipe ('clip': "
        "'paper' = 2 max|z|^2 as the paper, 'tight', or 'median', a labelled deviation). T is "
        "not given by the paper (default 300). 10 repetitions. With the paper's clip "
        "('clip' = 'paper') the noise std per step exceeds the mean gradient by orders of "
        "magnitude and every private run stays at the cost of a random start; the default "
        "'median' clip (clipping acts on about half the records) at the planned eps 8 lets "
        "column 1's DP-RSGD come close to the non-private run's excess risk (planned eps 1: "
        "--set epsilons=[1.0]). The quick default already has the paper's sizes; "
        "scale=paper runs them at the planned eps 1 and 8."
    ),
    defaults={
        "n_agents": 16, "dim": 25, "eigengap": 1e-3, "epsilons": [8.0],
        "paper_epsilons": [0.08, 0.15, 0.3], "delta": 1e-5, "rounds": 300, "repetitions": 10,
        "eval_every": 10, "columns": [1, 2, 3], "clip": "median", "non_private": True,
        "reference_repetitions": 2, "scale": "quick",
    },
    scales={"paper": {"epsilons": [1.0, 8.0]}},
    slow=True,
    validate=_check_fig1,
)
def fig1(config: dict, ctx: RunContext) -> dict:
    """Experiment ``prirfed-fig1``: synthetic PCA on S^24, PriRFed Fig. 1 (Sec. 6.1).

    See ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show prirfed-fig1`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets.synthetic import make_pca_synthetic

    n = config["n_agents"]
    problems = {70: SpherePCA(make_pca_synthetic(n, 70, config["dim"], config["eigengap"],
                                                 ctx.rng(0))),
                100: SpherePCA(make_pca_synthetic(n, 100, config["dim"], config["eigengap"],
                                                  ctx.rng(1)))}
    public = {k: _public_pca_constants(config, ctx, k, config["clip"]) for k in problems}
    note = "" if config["clip"] == "paper" else f", clip={config['clip']}"
    common = {"rounds": config["rounds"], "epsilons": config["epsilons"],
              "delta": config["delta"], "paper_epsilons": config["paper_epsilons"],
              "paper_delta": config["delta"]}
    settings = []
    references = []
    trainer: Callable[..., Any]   # each column's trainer, its public constants bound
    for col in config["columns"]:
        if col == 1:
            p, (tau, lg) = problems[70], public[70]

            def trainer(tau=tau, **noise):
                return DPRSGD(steps=1, clip=tau, **noise)

            sampled, step, name = None, 1.0 / (2.0 * lg), "DP-RSGD"
        elif col == 2:
            p, (tau, lg) = problems[70], public[70]

            def trainer(tau=tau, **noise):
                return DPRSGD(steps=5, batch_size=0.5, clip=tau, **noise)

            sampled, step, name = 1, 1.0, "DP-RSGD"
        elif col == 3:
            p, (tau, lg) = problems[100], public[100]
            m = (10 * n) // 3

            def trainer(tau=tau, m=m, **noise):
                return DPRSVRG(steps=2, inner_steps=m, clip=tau, clip_full=tau, **noise)

            sampled, step, name = 1, 1.0 / (10.0 * n ** (2.0 / 3.0) * lg), "DP-RSVRG"
        else:
            raise ValueError(f"setting 'columns' holds 1, 2 or 3, got {col}")
        group = _private(trainer, p, sampled, step, prefix=f"col{col} {name} ",
                         group=f"col{col}", algorithm_name=name, **common)
        for st in group:
            st.label += note
        settings.extend(group)
        if config["non_private"]:
            # the same local trainer (same clip level) without noise: the curves' reference
            references.append(Setting(
                f"col{col} {name} non-private", p,
                PriRFed(trainer(), sampled, step), f"col{col}", name,
                repetitions=min(config["reference_repetitions"], config["repetitions"])))
    # after every private setting: each keeps the generators it had before references existed
    settings.extend(references)
    rows, _ = run_settings(ctx, settings, rounds=config["rounds"],
                           repetitions=config["repetitions"], eval_every=config["eval_every"])
    ctx.save_table("final", rows)
    fig, axes = new_figure(len(config["columns"]))
    fig2, axes2 = new_figure(len(config["columns"]))
    for ax, ax2, col in zip(axes, axes2, config["columns"], strict=False):
        ref = (problems[100] if col == 3 else problems[70]).reference_cost()
        def where(r, c=col):
            return r.get("group") == f"col{c}"
        plot_curves(ctx.records, "round", "cost", by="setting", where=where, axes=[ax],
                    hlines={_TRUE_VALUE: ref}, titles=f"column {col}")
        plot_curves(ctx.records, "round", "grad_norm", by="setting", where=where, axes=[ax2],
                    logy=True, titles=f"column {col}")
    fig.suptitle("PriRFed, synthetic PCA on S^24 (paper's Fig. 1): cost", fontsize=11)
    fig2.suptitle("PriRFed, synthetic PCA on S^24 (paper's Fig. 1): gradient norm",
                  fontsize=11)
    ctx.save_figure(fig, "fig1_cost")
    ctx.save_figure(fig2, "fig1_grad_norm")
    # E f(x) - f* for x uniform on the sphere: lambda_max - tr(C)/(d+1), the no-progress level
    start = {}
    for k, p in problems.items():
        c = np.linalg.eigvalsh(p.covariance())
        start[f"N_i={k}"] = float(c[-1] - c.mean())
    summary = _summary(ctx, rows, clip_levels={f"N_i={k}": v[0] for k, v in public.items()},
                       clip_chosen_on="public stand-in (same recipe, own seed)",
                       random_start_excess_risk=start)
    summary.update(_noise_against_signal(ctx, problems[70].manifold.dim))
    return summary


def _noise_against_signal(ctx: RunContext, dim: int,
                          step_sizes: Mapping[str, float] | None = None) -> dict:
    """Why a budget-first setting learns or not, measured: per setting its noise multiplier and
    the norm of one noisy step's noise (std per coordinate times sqrt(dim)) over its clip level
    (the largest norm a step's clipped gradient can have), with ``step_sizes`` the length of
    the move that noise alone makes in one step (step size times that norm), and, for every setting
    that closes less than a quarter of the gap from its start to its non-private reference or
    diverged, one line saying so (``why_not_learning``).

    Parameters
    ----------
    ctx : RunContext
        The finished run's context (its privacy reports and summary rows).
    dim : int
        The manifold's dimension.
    step_sizes : mapping, optional
        Setting label -> its (constant) step size, for the noise's move per step.

    Returns
    -------
    dict
        ``noise_against_signal`` (list of dict, one per budget-first setting) and, when a
        setting did not learn, ``why_not_learning`` (str).
    """
    table, notes = [], []
    rows = {r["setting"]: r for r in ctx.summary_rows}
    for label, report in ctx.privacy.items():
        if report.get("calibration") != "budget" or not report.get("clip"):
            continue
        sigma = (report.get("sigma") or {}).get("max")
        if sigma is None:
            continue
        ratio = float(sigma) * math.sqrt(dim) / float(report["clip"])
        row = rows.get(label, {})
        closed = gap_closed(row) if row else None
        entry = {"setting": label, "noise_multiplier": report.get("noise_multiplier"),
                 "noise_norm_per_step_over_clip": ratio,
                 "gap_closed_pct": None if closed is None else 100.0 * closed}
        move = ""
        step_size = (step_sizes or {}).get(label)
        if step_size is not None:
            entry["noise_move_per_step"] = step_size * float(sigma) * math.sqrt(dim)
            move = (f" (step {step_size:g}: the noise alone moves the iterate "
                    f"{entry['noise_move_per_step']:.3g} per step)")
        table.append(entry)
        lost, reps = int(row.get("diverged") or 0), row.get("repetitions")
        if lost:
            notes.append(f"'{label}' diverged in {lost} of {reps or lost} runs: each noisy "
                         f"step's noise is {ratio:.3g} times the clip level{move}")
        elif closed is not None and closed < 0.25:
            notes.append(f"'{label}' closes {100 * closed:.0f} % of the gap from its start to "
                         f"the non-private reference: each noisy step's noise is {ratio:.3g} "
                         f"times the clip level{move}")
    out: dict[str, Any] = {"noise_against_signal": table}
    if notes:
        out["why_not_learning"] = "; ".join(notes)
    return out


# ====================================================================== Figure 2 (images)
def _check_fig2(cfg: dict) -> None:
    check_choices(cfg, "data", ("digits", "mnist", "fashion-mnist"))
    check_setting(cfg, "clip", cfg["clip"] in ("paper", "public") or _positive(cfg["clip"]),
                  "'paper' (2 B^2 from the pixel bound), 'public' (2 x the public images' "
                  "median |z|^2) or a public clip level > 0")
    check_setting(cfg, "digits_public_fraction", 0 < cfg["digits_public_fraction"] < 1,
                  "a fraction in (0, 1) of the digits declared public")
    check_setting(cfg, "step_sizes", all(a > 0 for a in cfg["step_sizes"]),
                  "a list of step sizes > 0 (one: no tuning)")


def _positive(text: Any) -> bool:
    """``text`` reads as a finite number > 0."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and value > 0


def _fig2_problem(images: np.ndarray, n: int, per_agent: int, rng: np.random.Generator
                  ) -> SpherePCA:
    """``n`` agents of ``per_agent`` images (0: every image, split equally), pixels in [0, 1]:
    ``||z|| <= sqrt(d)``, a public bound on the data domain."""
    from rfed.datasets import iid_partition
    from rfed.datasets.partition import stack_agents

    parts = iid_partition(images.shape[0], n, rng)
    if per_agent:
        parts = parts[:, :per_agent]
    return SpherePCA(stack_agents(images, parts), norm_bound=float(np.sqrt(images.shape[1])))


@register(
    "prirfed-fig2",
    paper="PriRFed, Fig. 2 (Sec. 6.1)",
    description=(
        "PCA on real images. Quick default: OFFLINE STAND-IN for MNIST, scikit-learn's 1,797 "
        "digits (8x8, pixels in [0,1], S^63): a DECLARED PUBLIC split of 20 % "
        "('digits_public_fraction', never trained on) sets the clip level (tau = 2 x the "
        "median of its |z|^2) and the step (from 'step_sizes', as at scale=paper below), and "
        "the other 1,438 images are split equally among N in {10, 12, 15, 18} agents; delta "
        "1e-4, planned eps 8. With the paper's clip rule on the PUBLIC bound ||z|| <= B = 8 "
        "(clip='paper': tau = 2 B^2 = 128, about 8 times the typical |z|^2; the paper's tau = 2 "
        "max|z|^2 reads the data) or at planned eps 1, the noise randomizes the direction every "
        "step and no private setting improves on a random start at this size. "
        "scale=paper: the paper's sizes, 60,000 images of 28x28 (S^783) split among N in "
        "{50, 60, 80, 100} agents (N_i = 1,200 to 600): MNIST when its IDX files are installed, "
        "else Fashion-MNIST (stand-in, said in the summary); certified delta 1e-5; the clip "
        "level and the step chosen on the DECLARED PUBLIC split, the 10,000 test images "
        "(never trained on): tau = 2 x the median of their |z|^2 (clipping then acts on about "
        "half the records, a labelled deviation from the paper's never-acting tau), and the "
        "step from 'step_sizes' giving the lowest excess risk of DP-RSGD at the largest "
        "planned epsilon on the public images resampled to N x N_i (the 'tuning' table). "
        "Both: one agent per round, K = 3, m = floor(10N/3), b = N_i/2; DP-RSGD and DP-RSVRG "
        "budget-first at the planned 'epsilons' and at the paper's local eps 0.15 "
        "('paper_epsilons', the paper's formula with its delta 1e-4), and the same trainers "
        "without noise ('reference_repetitions' runs each); 5 repetitions (the quick size, to "
        "keep it near a minute of CPU; 'repetitions' 10 as the paper)."
    ),
    defaults={
        "agents": [10, 12, 15, 18], "epsilons": [8.0], "paper_epsilons": [0.15],
        "delta": 1e-4, "paper_delta": 1e-4, "local_steps": 3,
        "rounds": 200, "repetitions": 5, "eval_every": 10,
        "non_private": True, "reference_repetitions": 2, "scale": "quick", "data": "digits",
        "data_path": "", "per_agent": 0, "clip": "public",
        "step_sizes": [0.005, 0.01, 0.02], "digits_public_fraction": 0.2,
    },
    scales={"paper": {
        "agents": [50, 60, 80, 100], "epsilons": [1.0, 8.0], "delta": 1e-5, "data": "mnist",
        "clip": "public", "step_sizes": [0.00025, 0.0005, 0.001, 0.002], "rounds": 100,
        "repetitions": 5, "eval_every": 5}},
    slow=True,
    validate=_check_fig2,
)
def fig2(config: dict, ctx: RunContext) -> dict:
    """Experiment ``prirfed-fig2``: PCA on real images, PriRFed Fig. 2 (Sec. 6.1).

    See ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show prirfed-fig2`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets import load_digits_images

    if config["data"] == "digits":
        images, _ = load_digits_images()
        public = None
        data_name = "scikit-learn digits (stand-in for MNIST)"
        if config["clip"] == "public" or len(config["step_sizes"]) > 1:
            # a DECLARED public split (never trained on) sets the clip level and the step
            order = ctx.rng(9_999).permutation(len(images))
            n_public = int(round(config["digits_public_fraction"] * len(images)))
            public, images = images[order[:n_public]], images[order[n_public:]]
            data_name += f", {n_public} of them a declared public split"
    else:
        from rfed.experiments._paper_data import load_paper_images

        data_name, (images, _), (public, _) = load_paper_images(config["data"],
                                                                config["data_path"])
    settings = []
    references = []
    problems = {}
    tuning: list[dict] = []
    for n in config["agents"]:
        p = _fig2_problem(images, n, config["per_agent"], ctx.rng(0, n))
        problems[n] = p
        m = (10 * n) // 3
        if config["clip"] == "paper":
            tau = p.clip_level("paper")
        elif config["clip"] == "public":
            assert public is not None   # _check_fig2: clip='public' needs mnist or fashion-mnist
            # the paper's rule 2 |z|^2 at the median of the PUBLIC images' norms
            tau = 2.0 * float(np.median(np.sum(public**2, axis=1)))
        else:
            tau = float(config["clip"])
        common = {"epsilons": config["epsilons"], "delta": config["delta"],
                  "paper_epsilons": config["paper_epsilons"],
                  "paper_delta": config["paper_delta"], "group": f"N={n}"}

        def rsgd(tau=tau, **noise):
            return DPRSGD(steps=config["local_steps"], batch_size=0.5, clip=tau, **noise)

        def rsvrg(tau=tau, m=m, **noise):
            return DPRSVRG(steps=config["local_steps"], inner_steps=m, clip=tau, clip_full=tau,
                           **noise)

        step = float(config["step_sizes"][0])
        if len(config["step_sizes"]) > 1:
            assert public is not None   # _check_fig2: tuning needs mnist or fashion-mnist
            step = _step_on_public(ctx, config, public, n, p.counts[0], rsgd, tuning)
        settings += _private(rsgd, p, 1, step, config["rounds"],
                             prefix=f"N={n} DP-RSGD ", algorithm_name="DP-RSGD", **common)
        settings += _private(rsvrg, p, 1, step, config["rounds"],
                             prefix=f"N={n} DP-RSVRG ", algorithm_name="DP-RSVRG", **common)
        if config["non_private"]:
            reps = min(config["reference_repetitions"], config["repetitions"])
            references += [Setting(f"N={n} {name} non-private", p, PriRFed(make(), 1, step),
                                   f"N={n}", name, repetitions=reps)
                           for name, make in (("DP-RSGD", rsgd), ("DP-RSVRG", rsvrg))]
    # after every private setting: each keeps the generators it had before references existed
    settings += references
    rows, _ = run_settings(ctx, settings, rounds=config["rounds"],
                           repetitions=config["repetitions"], eval_every=config["eval_every"])
    ctx.save_table("final", rows)
    if tuning:
        ctx.save_table("tuning", tuning)
    fig, axes = new_figure(len(problems))
    short = data_name.split(" (")[0]
    for ax, (n, p) in zip(axes, problems.items(), strict=False):
        plot_curves(ctx.records, "round", "cost", by="setting", axes=[ax],
                    where=lambda r, n=n: r.get("group") == f"N={n}",
                    hlines={_TRUE_VALUE: p.reference_cost()},
                    titles=f"{short}, N = {n}, N_i = {p.counts[0]}")
    fig.suptitle(f"PriRFed, PCA on {data_name} (paper's Fig. 2)", fontsize=11)
    ctx.save_figure(fig, "fig2_cost")
    summary = _summary(ctx, rows, data=data_name,
                       step_chosen_on=("given" if not tuning else "public split (the test "
                                       "images)" if config["data"] != "digits" else
                                       "declared public split of the digits"),
                       **_rsvrg_against_rsgd(rows, ()))
    summary.update(_noise_against_signal(ctx, next(iter(problems.values())).manifold.dim))
    return summary


def _step_on_public(ctx: RunContext, config: dict, public: np.ndarray, n: int, per_agent: int,
                    trainer_for, tuning: list[dict]) -> float:
    """The step of ``config['step_sizes']`` whose DP-RSGD run, budget-first at the largest
    planned epsilon, ends at the lowest excess risk on the PUBLIC images resampled to ``n``
    agents x ``per_agent`` (with replacement, own seed); one row per candidate in ``tuning``."""
    rng = ctx.rng(8_888, n)
    idx = rng.integers(0, public.shape[0], size=n * per_agent)
    pub = _fig2_problem(public[idx], n, per_agent, rng)
    eps = max(config["epsilons"])
    for k, step in enumerate(config["step_sizes"]):
        alg = PriRFed(trainer_for(), 1, step, budget=PrivacyBudget(eps, config["delta"]),
                      n_rounds=config["rounds"])
        res = alg.run(pub, config["rounds"], rng=ctx.rng(8_889, n, k),
                      x0=pub.manifold.random_point(ctx.rng(8_890, n)),
                      eval_every=config["rounds"])
        final = math.inf if res.diverged else float(res.history[-1]["excess_risk"])
        tuning.append({"agents": n, "step_size": step, "planned_epsilon": eps,
                       "public_final_excess_risk": final,
                       "public_data": "test images resampled to the private shape"})
    this_search = tuning[-len(config["step_sizes"]):]
    return float(choose_best(this_search, "public_final_excess_risk", ["step_size"])["step_size"])


# ====================================================================== Figures 3 and 4 (SPD)
def _spd_experiment(ctx: RunContext, config: dict, points: np.ndarray, title: str,
                    name: str) -> dict:
    from rfed.datasets import iid_partition
    from rfed.datasets.partition import stack_agents

    settings = []
    references = []
    problems = {}
    shared: dict[bytes, SPDFrechetMean] = {}
    for n in config["agents"]:
        parts = iid_partition(points.shape[0], n, ctx.rng(0, n))
        if config.get("per_agent"):
            parts = parts[:, : config["per_agent"]]
        # the paper's Fig. 3/4 plot the cost and the excess risk: the gradient norm (the
        # logs' eigenvectors, 1.8x a cost-only evaluation) only on request
        p = SPDFrechetMean(stack_agents(points, parts), gradient_bound=config["clip"],
                           evaluate_grad_norm=config["grad_norm"])
        # splits of the same pooled samples have the same Karcher mean: compute it once (the
        # reference is a 10,000-point Karcher mean to a gradient norm of 1e-13)
        pooled = np.sort(parts, axis=None).tobytes()
        if pooled in shared:
            p.set_reference(shared[pooled].reference_point())
        else:
            shared[pooled] = p
        problems[n] = p
        tau = float(config["clip"])  # the paper's public tau = 1
        common = {"epsilons": config["epsilons"], "delta": config["delta"],
                  "paper_epsilons": config["paper_epsilons"],
                  "paper_delta": config["paper_delta"], "group": f"N={n}"}

        def rsgd(tau=tau, **noise):
            return DPRSGD(steps=config["local_steps"], batch_size=0.5, clip=tau, **noise)

        def rsvrg(tau=tau, **noise):
            return DPRSVRG(steps=config["local_steps"], inner_steps=config["inner_steps"],
                           clip=tau, clip_full=tau, **noise)

        settings += _private(rsgd, p, 1, config["step_size"], config["rounds"],
                             prefix=f"N={n} DP-RSGD ", algorithm_name="DP-RSGD", **common)
        settings += _private(rsvrg, p, 1, config["step_size"], config["rounds"],
                             prefix=f"N={n} DP-RSVRG ", algorithm_name="DP-RSVRG", **common)
        # Alg. 3 as written at smaller steps: whether any step lets it learn at these budgets
        for small in config["rsvrg_step_sizes"]:
            settings += _private(rsvrg, p, 1, small, config["rounds"], config["epsilons"],
                                 config["delta"], prefix=f"N={n} DP-RSVRG step {small:g} ",
                                 group=f"N={n}", algorithm_name="DP-RSVRG")
        if config["non_private"]:
            reps = min(config["reference_repetitions"], config["repetitions"])
            references += [Setting(f"N={n} {alg} non-private", p,
                                   PriRFed(make(), 1, config["step_size"]), f"N={n}", alg,
                                   repetitions=reps)
                           for alg, make in (("DP-RSGD", rsgd), ("DP-RSVRG", rsvrg))]
    # after every private setting: each keeps the generators it had before references existed
    settings += references
    early = [t for t in config["report_rounds"] if t < config["rounds"]]
    rows, _ = run_settings(ctx, settings, rounds=config["rounds"],
                           repetitions=config["repetitions"], eval_every=config["eval_every"],
                           report_rounds=early)
    ctx.save_table("final", rows)
    fig, axes = new_figure(2 * len(problems))
    for i, (n, p) in enumerate(problems.items()):
        def where(r, n=n):
            return r.get("group") == f"N={n}"
        sub = f"N = {n}, N_i = {p.counts[0]}"
        plot_curves(ctx.records, "round", "cost", by="setting", where=where, axes=[axes[2 * i]],
                    hlines={_TRUE_VALUE: p.reference_cost()}, titles=sub)
        plot_curves(ctx.records, "round", "excess_risk", by="setting", where=where,
                    axes=[axes[2 * i + 1]], logy=True, titles=sub)
    fig.suptitle(title, fontsize=11)
    ctx.save_figure(fig, name)
    summary = _summary(ctx, rows, **_rsvrg_against_rsgd(rows, early))
    steps = {st.label: float(st.algorithm.step_size) for st in settings
             if not callable(st.algorithm.step_size)}
    summary.update(_noise_against_signal(ctx, next(iter(problems.values())).manifold.dim,
                                         step_sizes=steps))
    return summary


def _rsvrg_against_rsgd(rows: list[dict], early: Sequence[int]) -> dict:
    """The paper's claim of Figs. 3-4, measured: per group and privacy level, DP-RSVRG's and
    DP-RSGD's excess risk early (the first of ``early``) and at the end, and which is lower."""
    out = []
    for r in rows:
        if r.get("algorithm") != "DP-RSVRG":
            continue
        twin = next((o for o in rows if o.get("algorithm") == "DP-RSGD"
                     and o["group"] == r["group"]
                     and o["setting"].split("DP-RSGD", 1)[-1]
                     == r["setting"].split("DP-RSVRG", 1)[-1]), None)
        if twin is None:
            continue
        entry = {"group": r["group"], "privacy": r["setting"].split("DP-RSVRG", 1)[-1].strip(),
                 "rsvrg_final": r["final_excess_risk_mean"],
                 "rsgd_final": twin["final_excess_risk_mean"]}
        entry["lower_at_end"] = ("DP-RSVRG" if entry["rsvrg_final"] < entry["rsgd_final"]
                                 else "DP-RSGD")
        if early:
            key = f"excess_risk_at_{early[0]}_mean"
            entry[f"rsvrg_at_{early[0]}"] = r.get(key)
            entry[f"rsgd_at_{early[0]}"] = twin.get(key)
        out.append(entry)
    if not out:
        return {}
    # the paper's claim (DP-RSVRG below DP-RSGD), counted over the certified budget-first rows,
    # DP-RSVRG at its best step (the shared step and those of 'rsvrg_step_sizes')
    certified = [e for e in out if e["privacy"].startswith("planned eps")]
    for e in certified:
        finals = [e["rsvrg_final"]] + [
            r["final_excess_risk_mean"] for r in rows
            if r.get("algorithm") == "DP-RSVRG" and r["group"] == e["group"]
            and " step " in r["setting"] and r["setting"].endswith(" " + e["privacy"])]
        finite = [float(f) for f in finals if f is not None and math.isfinite(float(f))]
        e["rsvrg_best_over_steps"] = min(finite) if finite else math.nan
    lower = [e for e in certified if e["rsvrg_best_over_steps"] < e["rsgd_final"]]
    lost = [e for e in certified if not math.isfinite(float(e["rsvrg_final"]))]
    claim: dict[str, Any] = {"rsvrg_vs_rsgd": out}
    if certified:
        claim["rsvrg_vs_rsgd_claim"] = (
            f"the paper's claim (DP-RSVRG ends below DP-RSGD) holds in {len(lower)} of "
            f"{len(certified)} certified settings (planned eps <= "
            f"{max(float(e['privacy'].split('<=')[-1]) for e in certified):g}; DP-RSVRG at its "
            f"best step); at the shared step DP-RSVRG diverged in {len(lost)} of them")
    return claim


def _check_spd(cfg: dict) -> None:
    check_setting(cfg, "clip", cfg["clip"] > 0, "a public clip level > 0")
    check_setting(cfg, "step_size", cfg["step_size"] > 0, "a number > 0")
    check_setting(cfg, "rsvrg_step_sizes", all(a > 0 for a in cfg["rsvrg_step_sizes"]),
                  "a list of step sizes > 0 (extra DP-RSVRG settings; empty: none)")


_SPD_COMMON = {"non_private": True, "reference_repetitions": 2, "scale": "quick",
               "rsvrg_step_sizes": []}

@register(
    "prirfed-fig3",
    paper="PriRFed, Fig. 3 (Sec. 6.2)",
    description=(
        "Frechet mean on SPD(2) of 5,000 Wishart W(I/2, 2) samples restricted to the geodesic "
        "ball of radius 0.5 around I (diameter bound 1), (N, N_i) in {(20, 250), (50, 100)}; "
        "one agent per round, K = 3, m = 10, tau = 1 (public), step 0.05, "
        "b = N_i/2. DP-RSGD and DP-RSVRG budget-first at the planned 'epsilons' and, labelled, "
        "at the paper's local eps 0.15 ('paper_epsilons', the paper's formula with its delta "
        "1e-4), and the same trainers without noise ('reference_repetitions' runs each); cost "
        "and excess risk (grad_norm=True also records the gradient norm); 10 repetitions. The "
        "quick default certifies at the paper's delta 1e-4; scale=paper (the paper's sizes "
        "are the default's) certifies at delta 1e-5 and planned eps in {1, 8}. The table also "
        "gives the excess risk at rounds 5 and 10 and the summary compares DP-RSVRG with "
        "DP-RSGD: DP-RSVRG (K m = 30 noisy steps a round against K = 3) may lead early, then "
        "DP-RSGD reaches a lower floor, as the paper's own noise formulas imply (sigma^2 of "
        "DP-RSVRG is m = 10 times that of DP-RSGD, and the stationary excess risk of noisy "
        "gradient steps on dist^2 is about dim alpha sigma^2 / 4). At certified budgets Alg. 3 "
        "as written (one record per inner step, sensitivity 4 tau + 2 tau / N_i) needs a noise "
        "far above the clip level: scale=paper adds DP-RSVRG at the smaller steps of "
        "'rsvrg_step_sizes' {0.002, 0.0005, 0.0001}, and the summary gives each setting's "
        "noise against its clip level and the paper's claim counted at DP-RSVRG's best step."
    ),
    defaults={
        "n_samples": 5000, "agents": [20, 50], "epsilons": [1.0], "paper_epsilons": [0.15],
        "delta": 1e-4, "paper_delta": 1e-4, "local_steps": 3,
        "inner_steps": 10, "clip": 1.0, "step_size": 0.05, "rounds": 100, "repetitions": 10,
        "eval_every": 5, "report_rounds": [5, 10], "grad_norm": False, **_SPD_COMMON,
    },
    scales={"paper": {"epsilons": [1.0, 8.0], "delta": 1e-5,
                      "rsvrg_step_sizes": [0.002, 0.0005, 0.0001]}},
    slow=True,
    validate=_check_spd,
)
def fig3(config: dict, ctx: RunContext) -> dict:
    """Experiment ``prirfed-fig3``: Frechet mean on SPD(2) of Wishart samples, PriRFed Fig. 3
    (Sec. 6.2).

    See ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show prirfed-fig3`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets.synthetic import make_wishart_spd

    pts = make_wishart_spd(config["n_samples"], 2, ctx.rng(0))
    return _spd_experiment(ctx, config, pts, "PriRFed on SPD(2), Wishart data", "fig3")


def _check_fig4(cfg: dict) -> None:
    _check_spd(cfg)
    check_choices(cfg, "data", ("photos", "fashion-mnist"))


@register(
    "prirfed-fig4",
    paper="PriRFed, Fig. 4 (Sec. 6.2)",
    description=(
        "Frechet mean of covariance descriptors (Tuzel et al.) of real images, a STAND-IN for "
        "PathMNIST (the paper: 9x9 descriptors of 20,000 PathMNIST images, N in {50, 100}). "
        "Quick default: 9x9 descriptors (x, y, R, G, B, |I_x|, |I_y|, |I_xx|, |I_yy|) of 28x28 "
        "patches (stride 7) of scikit-learn's two shipped photos, 10,000 descriptors, (N, N_i) "
        "in {(25, 400), (50, 200)}, certified at the paper's delta 1e-4. scale=paper: the "
        "paper's sizes, 7x7 descriptors (x, y, I, |I_x|, |I_y|, |I_xx|, |I_yy|) of 20,000 "
        "Fashion-MNIST training images (PathMNIST is not available offline), (N, N_i) in {(50, "
        "400), (100, 200)}, whitened by the log-Euclidean mean of the descriptors of the 10,000"
        " test images (declared public; an isometry of the affine-invariant metric that centres"
        " the data near I, where tau = 1 and the random starts are meaningful), certified delta"
        " 1e-5, planned eps in {1, 8}, DP-RSVRG also at the smaller steps of 'rsvrg_step_sizes'"
        " {0.01, 0.001, 0.0001} (as prirfed-fig3). Both: one agent per round, K = 3, m = 10, "
        "tau = 1 (public), step 0.3; DP-RSGD and DP-RSVRG budget-first at the planned "
        "'epsilons' and, labelled, at the paper's local eps 0.15 (its formula with its delta "
        "1e-4), and the same trainers without noise; cost and excess risk (grad_norm=True also "
        "records the gradient norm). 10 repetitions."
    ),
    defaults={
        "n_samples": 10000, "agents": [25, 50], "epsilons": [1.0], "paper_epsilons": [0.15],
        "delta": 1e-4, "paper_delta": 1e-4,
        "local_steps": 3, "inner_steps": 10, "clip": 1.0, "step_size": 0.3, "rounds": 100,
        "repetitions": 10, "eval_every": 5, "report_rounds": [5, 10], "grad_norm": False,
        "data": "photos", "data_path": "", **_SPD_COMMON,
    },
    scales={"paper": {"n_samples": 20000, "agents": [50, 100], "epsilons": [1.0, 8.0],
                      "delta": 1e-5, "data": "fashion-mnist", "repetitions": 5,
                      "rsvrg_step_sizes": [0.01, 0.001, 0.0001]}},
    slow=True,
    validate=_check_fig4,
)
def fig4(config: dict, ctx: RunContext) -> dict:
    """Experiment ``prirfed-fig4``: Frechet mean of covariance descriptors, PriRFed Fig. 4
    (Sec. 6.2).

    See ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show prirfed-fig4`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    if config["data"] == "photos":
        from rfed.datasets import load_sample_image_descriptors

        desc, _ = load_sample_image_descriptors(stride=7)
        idx = ctx.rng(0).permutation(desc.shape[0])[: config["n_samples"]]
        return _spd_experiment(ctx, config, desc[idx],
                               "PriRFed on SPD(9), photo patch descriptors (PathMNIST "
                               "stand-in)", "fig4")
    points = _fmnist_descriptors(config, ctx)
    return _spd_experiment(ctx, config, points,
                           f"PriRFed on SPD(7), descriptors of {config['n_samples']:,} "
                           "Fashion-MNIST images (PathMNIST stand-in)", "fig4")


def _fmnist_descriptors(config: dict, ctx: RunContext) -> np.ndarray:
    """SPD(7) descriptors of ``n_samples`` Fashion-MNIST training images (a fixed permutation),
    whitened by the log-Euclidean mean of the test images' descriptors (declared public)."""
    from rfed.algorithms.baselines.spd_mean import spd_exp, spd_log
    from rfed.datasets import load_fashion_mnist
    from rfed.datasets.images import covariance_descriptors

    (x_tr, _), (x_te, _) = load_fashion_mnist(config["data_path"] or None, split="both")
    if not 1 <= config["n_samples"] <= len(x_tr):
        raise ValueError(f"setting 'n_samples' must be in [1, {len(x_tr)}] with Fashion-MNIST, "
                         f"got {config['n_samples']!r}")
    order = ctx.rng(0).permutation(len(x_tr))[: config["n_samples"]]
    private = covariance_descriptors(x_tr[order], 1e-3, relative_ridge=True)
    public = covariance_descriptors(x_te, 1e-3, relative_ridge=True)
    w, v = np.linalg.eigh(spd_exp(spd_log(public).mean(axis=0)))
    whiten = (v * w ** -0.5) @ v.T
    return whiten @ private @ whiten


# ====================================================================== Figures 5 and 6
def _check_fig5(cfg: dict) -> None:
    check_choices(cfg, "rsvrg_variant", ("released_snapshot", "paper"))
    for key in ("clip_diff", "step_size", "gamma", "bandwidth", "diameter"):
        check_setting(cfg, key, cfg[key] > 0, "a number > 0")
    check_setting(cfg, "rsvrg_step_sizes", all(a > 0 for a in cfg["rsvrg_step_sizes"]),
                  "a list of step sizes > 0 (one: that step, no tuning)")
    check_setting(cfg, "grad_norm", isinstance(cfg["grad_norm"], bool), "true or false")
    check_setting(cfg, "rsgd_step_sizes", bool(cfg["rsgd_step_sizes"])
                  and all(a > 0 for a in cfg["rsgd_step_sizes"]),
                  "a list of step sizes > 0 (one: that step at every planned epsilon, no "
                  "tuning)")
    check_setting(cfg, "public_fraction", 0 < cfg["public_fraction"] < 1,
                  "a fraction in (0, 1)")
    check_setting(cfg, "tune_repetitions",
                  isinstance(cfg["tune_repetitions"], int) and cfg["tune_repetitions"] >= 1,
                  "an int >= 1")


@register(
    "prirfed-fig5",
    paper="PriRFed, Figs. 5-6 (Sec. 6.3)",
    description=(
        "Hyperbolic structured prediction of 'primate' on H^2 from WordNet mammals: Laplacian "
        "eigenmap features (r = 3), targets from a Lorentz embedding trained by rfed (STAND-IN "
        "for the pretrained Poincare embedding), 9 agents x 131 words, vbar 0.3, M = 4, "
        "delta 1e-4, one agent per round, K = 3, m = 5, step 0.3 (the paper's, for every "
        "method; kept for non-private RSGD and the paper's calibrations). RSVRG's OWN STEP: at "
        "the paper's step 0.3 RSVRG without noise leaves the "
        "floating-point range of the Lorentz model, so RSVRG (its non-private reference and "
        "the budget-first DP-RSVRG) runs at the step of 'rsvrg_step_sizes' whose budget-first "
        "DP-RSVRG, at the largest planned epsilon, ends at the lowest mean excess risk over "
        "'tune_repetitions' runs on PUBLIC words (the 'tuning' table; one step given: no "
        "tuning); the paper's step is kept for RSVRG without noise and for the paper's "
        "calibration of DP-RSVRG, labelled \"paper's step 0.3\". DP-RSGD's OWN STEP, PER "
        "PLANNED EPSILON: at the paper's step a small budget's noise random-walks DP-RSGD far "
        "from its start, so each budget-first DP-RSGD runs at the step of 'rsgd_step_sizes' "
        "whose budget-first DP-RSGD at that planned epsilon ends at the lowest mean public "
        "excess risk over 'tune_repetitions' runs (the 'tuning_rsgd' table; one step given: "
        "that step at every epsilon, no tuning); where the chosen step is not the paper's, "
        "DP-RSGD also runs at the paper's step, labelled \"paper's step 0.3\". "
        "The quick default searches smaller grids ('rsvrg_step_sizes' {0.01, 0.005, 0.002}, "
        "'rsgd_step_sizes' {0.1, 0.03, 0.01, 0.003}) over 3 public runs each, so that both "
        "searches cost no more than the one RSVRG search did; scale=paper searches "
        "{0.05, 0.02, 0.01, 0.005, 0.002} and {0.3, 0.1, 0.03, 0.01, 0.003} over 5 runs. "
        "DEVIATION for record-level "
        "privacy ('weights'): the default 'kernel' weights alpha_ij = k(w_ij, w) depend on "
        "record j only (the paper's 'kernel_ridge' weights, gamma 1e-5, depend on all of an "
        "agent's records, which rfed accounts with a sensitivity 2 tau per clipped mean); "
        "tau = L_f = max|alpha| M = M = 4 (public, |alpha| <= 1). PriRFed-RSGD / RSVRG "
        "non-private, and DP at the certified whole-run 'epsilons' and, labelled, at the paper's "
        "local eps 0.15; cost, distance to the true 'primate' (grad_norm=True also records "
        "the gradient norm), and the best prediction on the "
        "Poincare disk. 10 repetitions. The DP noise dwarfs the mean gradient, so the DP runs "
        "random-walk outward; runs that leave the floating-point range of the Lorentz model "
        "are reported as diverged. The budget-first DP-RSVRG is, by default "
        "('rsvrg_variant'), the standard private variance reduction, labelled 'released "
        "snapshot (not the paper's)': the snapshot gradient released once per outer loop "
        "(sensitivity 2 tau / N_i) and inner steps on per-sample differences clipped to "
        "tau_d = 'clip_diff' tau over minibatches of 'rsvrg_batch' records (2 tau_d / b, "
        "amplified by the subsampling); the paper's Alg. 3 keeps its calibrated settings. "
        "The measured results (divergence counts and excess risks per setting, with the "
        "command that wrote them) are on the documentation's Experiments page. tau_d = tau / 8 "
        "and b = 16 ('clip_diff', 'rsvrg_batch') were chosen on the same PUBLIC words: "
        "utility-hyperbolic's declared public split ('public_fraction' = 20 % of the words, "
        "its permutation) resampled to this shape (9 x 131), fig5's model settings, "
        "budget-first "
        "at eps 8, lowest mean excess risk over 5 runs on the grid {tau, tau/2, tau/4, tau/8} "
        "x {8, 16, 32, 64}, confirmed over 10 runs on {tau/4, tau/8, tau/16} x {8, 16, 32}. "
        "fig5 itself trains on all "
        "1,179 words as the paper does, so the public words are also among its training "
        "words: for a guarantee that no tuning data is private, use utility-hyperbolic."
    ),
    defaults={
        "n_agents": 9, "per_agent": 131, "epsilons": [1.0, 8.0], "paper_epsilons": [0.15],
        "rsvrg_variant": "released_snapshot", "clip_diff": 0.125, "rsvrg_batch": 16,
        "delta": 1e-4, "paper_delta": 1e-4, "local_steps": 3, "weights": "kernel",
        "inner_steps": 5, "step_size": 0.3, "rounds": 100, "repetitions": 10, "eval_every": 2,
        "rsvrg_step_sizes": [0.01, 0.005, 0.002],
        "rsgd_step_sizes": [0.1, 0.03, 0.01, 0.003], "public_fraction": 0.2,
        "tune_repetitions": 3,
        "gamma": 1e-5, "bandwidth": 0.3, "kernel": "paper", "diameter": 4.0, "grad_norm": False,
        "scale": "quick",
    },
    scales={"paper": {"epsilons": [1.0, 8.0], "delta": 1e-5, "tune_repetitions": 5,
                      "rsvrg_step_sizes": [0.05, 0.02, 0.01, 0.005, 0.002],
                      "rsgd_step_sizes": [0.3, 0.1, 0.03, 0.01, 0.003]}},
    validate=_check_fig5,
)
def fig5(config: dict, ctx: RunContext) -> dict:
    """Experiment ``prirfed-fig5``: hyperbolic structured prediction on H^2, PriRFed Figs. 5-6
    (Sec. 6.3).

    Predicts the position of 'primate' from WordNet mammals. See
    ``docs/guide/experiments.md`` and ``docs/papers/prirfed.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show prirfed-fig5`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    from rfed.datasets import iid_partition
    from rfed.datasets.partition import stack_agents
    from rfed.datasets.wordnet import wordnet_prediction_data

    data = wordnet_prediction_data()
    n, per = config["n_agents"], config["per_agent"]
    parts = iid_partition(data["features"].shape[0], n, ctx.rng(0))[:, :per]
    problem = HyperbolicPrediction(
        stack_agents(data["features"], parts), stack_agents(data["targets"], parts),
        data["test_feature"], gamma=config["gamma"], bandwidth=config["bandwidth"],
        kernel=config["kernel"], diameter=config["diameter"], weights=config["weights"],
    )
    # the paper's Figs. 5-6 plot the cost and the distance to 'primate': the gradient norm
    # (a full gradient per evaluation, about 8 % of the run) only on request
    problem.evaluate_grad_norm = bool(config["grad_norm"])
    truth = data["test_target"]
    man = problem.manifold
    k, m, a = config["local_steps"], config["inner_steps"], config["step_size"]
    # L_f = max|alpha| M: public with the per-record kernel weights (|alpha| <= 1); the
    # kernel-ridge weights have no public bound, and M is then used as the (public) clip level
    tau = problem.gradient_bound or config["diameter"]
    common = {"epsilons": config["epsilons"], "delta": config["delta"],
              "paper_epsilons": config["paper_epsilons"], "paper_delta": config["paper_delta"]}

    def rsgd(**noise):
        return DPRSGD(steps=k, batch_size=0.5, clip=tau, **noise)

    def rsvrg(**noise):
        return DPRSVRG(steps=k, inner_steps=m, clip=tau, clip_full=tau, **noise)

    def rsvrg_released(**noise):
        # the standard private variance reduction (not the paper's Alg. 3): differences
        # clipped to tau_d = clip_diff * tau, minibatches of rsvrg_batch records
        return DPRSVRG(steps=k, inner_steps=m, clip=config["clip_diff"] * tau, clip_full=tau,
                       variant="released_snapshot", batch_size=config["rsvrg_batch"], **noise)

    rounds = config["rounds"]
    if config["rsvrg_variant"] == "released_snapshot":
        budget_trainer, budget_prefix = (rsvrg_released, "PriRFed-DP-RSVRG released snapshot "
                                         "(not the paper's) ")
    elif config["rsvrg_variant"] == "paper":
        budget_trainer, budget_prefix = rsvrg, "PriRFed-DP-RSVRG "
    else:
        raise ValueError(f"setting 'rsvrg_variant' must be 'released_snapshot' or 'paper', got "
                         f"{config['rsvrg_variant']!r}")
    # each method's own step, chosen on public words: the paper's step 0.3 sends RSVRG without
    # noise out of the Lorentz model's floating-point range, and DP-RSGD at a small budget
    # random-walks away from its start; DP-RSGD's step is chosen per planned epsilon
    # (budget-first: a smaller budget, more noise per step, wants a smaller step)
    tuning: list[dict] = []
    tuning_rsgd: list[dict] = []
    public = None
    if len(config["rsvrg_step_sizes"]) == 1:
        a_vrg = float(config["rsvrg_step_sizes"][0])
    else:
        public, described = _fig5_public_problem(ctx, config, data)
        a_vrg = _fig5_step_on_public(ctx, config, public, described, budget_trainer,
                                     config["rsvrg_step_sizes"], max(config["epsilons"]),
                                     "rsvrg_step_size", (8_889,), tuning)
    a_rsgd = {}
    for j, eps in enumerate(config["epsilons"]):
        if len(config["rsgd_step_sizes"]) == 1:
            a_rsgd[float(eps)] = float(config["rsgd_step_sizes"][0])
            continue
        if public is None:
            public, described = _fig5_public_problem(ctx, config, data)
        a_rsgd[float(eps)] = _fig5_step_on_public(
            ctx, config, public, described, rsgd, config["rsgd_step_sizes"], eps,
            "rsgd_step_size", (8_891, j), tuning_rsgd)
    if tuning:
        ctx.save_table("tuning", tuning)
    if tuning_rsgd:
        ctx.save_table("tuning_rsgd", tuning_rsgd)
    paper_step = f"paper's step {a:g}"
    # the budgets at which DP-RSGD runs at a chosen step other than the paper's: there the
    # paper's step is run too, labelled, after every other setting
    rsgd_moved = [eps for eps in config["epsilons"] if a_rsgd[float(eps)] != a]
    # the order fixes each setting's generators (ctx.rng(index, rep)): the paper's-step runs
    # come last, so every earlier setting keeps the generators it had before they were added
    settings = [
        Setting("PriRFed-RSGD non-private", problem,
                PriRFed(DPRSGD(steps=k, batch_size=0.5), 1, a), algorithm_name="DP-RSGD"),
        Setting("PriRFed-RSVRG non-private", problem,
                PriRFed(DPRSVRG(steps=k, inner_steps=m), 1, a_vrg), algorithm_name="DP-RSVRG"),
        *[s for eps in config["epsilons"]
          for s in _private(rsgd, problem, 1, a_rsgd[float(eps)], rounds, [eps],
                            config["delta"], prefix="PriRFed-DP-RSGD ",
                            algorithm_name="DP-RSGD")],
        *_private(rsgd, problem, 1, a, rounds, (), config["delta"], common["paper_epsilons"],
                  common["paper_delta"], prefix="PriRFed-DP-RSGD ", algorithm_name="DP-RSGD"),
        *_private(budget_trainer, problem, 1, a_vrg, rounds, config["epsilons"],
                  config["delta"], prefix=budget_prefix, algorithm_name="DP-RSVRG"),
        # the paper's calibration at the paper's step; its reference: RSVRG at that step
        *_private(rsvrg, problem, 1, a, rounds, (), config["delta"],
                  common["paper_epsilons"], common["paper_delta"], prefix="PriRFed-DP-RSVRG ",
                  group=paper_step, algorithm_name="DP-RSVRG"),
        Setting(f"PriRFed-RSVRG non-private, {paper_step}", problem,
                PriRFed(DPRSVRG(steps=k, inner_steps=m), 1, a), group=paper_step,
                algorithm_name="DP-RSVRG"),
        # DP-RSGD budget-first at the paper's step (its reference: RSGD at that step, the
        # non-private RSGD above)
        *_private(rsgd, problem, 1, a, rounds, rsgd_moved, config["delta"],
                  prefix=f"PriRFed-DP-RSGD {paper_step}, ", algorithm_name="DP-RSGD"),
    ]

    def to_truth(_p, x):
        return {"dist_to_primate": float(man.dist(x, truth))}

    rows, results = run_settings(
        ctx, settings, rounds=config["rounds"], repetitions=config["repetitions"],
        eval_every=config["eval_every"], start=lambda p, rng: man.random_point(rng),
        extra_metrics=to_truth,
    )
    for row in rows:
        d = np.array([float(man.dist(r.x, truth)) for r in results[row["setting"]]])
        row["final_dist_to_primate_mean"] = float(d.mean()) if d.size else None
        row["final_dist_to_primate_best"] = float(d.min()) if d.size else None
    ctx.save_table("final", rows)
    ref = problem.reference_cost()
    fig = plot_curves(ctx.records, "round", ["cost", "dist_to_primate"], by="setting",
                      logy=[False, True], hlines=[{_TRUE_VALUE: ref}, None],
                      suptitle="Hyperbolic prediction of 'primate' (WordNet mammals, H^2)\n"
                               "steps: DP-RSGD " + ", ".join(
                                   f"{a_rsgd[float(e)]:g} at eps<={e:g}"
                                   for e in config["epsilons"])
                               + f" ({'chosen on public words' if tuning_rsgd else 'given'}),"
                               f" RSGD {a:g}; RSVRG {a_vrg:g} ("
                               + ("chosen on public words" if tuning else "given")
                               + f"); {paper_step} where labelled")
    for ax in fig.axes[:2]:
        # the paper's step and calibration can end far above the tuned curves (at eps 1 the
        # paper's step 0.3 ends at hundreds): they stay drawn and named, but do not set the range
        range_without(ax, lambda label: "paper's step" in label or "paper's calibration" in label,
                      "the paper's step or calibration")
    ctx.save_figure(fig, "fig5")
    fig = _poincare_figure(problem, data, truth, results)
    ctx.save_figure(fig, "fig6_poincare")
    steps = sorted(float(x) for x in config["rsvrg_step_sizes"])
    rsgd_grid = [float(x) for x in config["rsgd_step_sizes"]]
    summary = _summary(ctx, rows, ref, dist_reference_to_primate=float(man.dist(
        problem.reference_point(), truth)), step_size=a, rsvrg_step_size=a_vrg,
        rsvrg_step_chosen_on=("given" if not tuning else
                              f"public words (the 'tuning' table), budget-first at planned "
                              f"eps {max(config['epsilons']):g}"),
        rsvrg_step_at_grid_edge=bool(tuning) and a_vrg in (steps[0], steps[-1]),
        rsgd_step_sizes=[{"planned_epsilon": float(e), "step_size": a_rsgd[float(e)]}
                         for e in config["epsilons"]],
        rsgd_step_chosen_on=("given" if not tuning_rsgd else
                             "public words (the 'tuning_rsgd' table), budget-first at each "
                             "planned eps"),
        rsgd_step_at_grid_edge=bool(tuning_rsgd) and any(
            a_rsgd[float(e)] in (min(rsgd_grid), max(rsgd_grid)) for e in config["epsilons"]))
    summary.update(_noise_against_signal(ctx, man.dim, step_sizes={
        st.label: float(st.algorithm.step_size) for st in settings
        if not callable(st.algorithm.step_size)}))
    summary.update(_fig5_rsvrg_against_rsgd(rows, config["epsilons"], budget_prefix, a_rsgd,
                                            a_vrg, chosen=bool(tuning_rsgd)))
    return summary


def _fig5_rsvrg_against_rsgd(rows: list[dict], epsilons: Sequence[float], rsvrg_prefix: str,
                             rsgd_steps: Mapping[float, float], rsvrg_step: float,
                             chosen: bool = False) -> dict:
    """The paper's claim of Fig. 5 (DP-RSVRG ends below DP-RSGD), measured at each planned
    epsilon on the budget-first rows, each algorithm at its own step (``rsgd_steps``: DP-RSGD's
    per planned epsilon; ``chosen``: those were chosen on public words); a setting whose every
    run diverged ends at no value and counts as not below."""
    final = {r["setting"]: r["final_excess_risk_mean"] for r in rows}
    out = []
    for eps in epsilons:
        rsgd = final.get(f"PriRFed-DP-RSGD {planned_label(eps)}")
        rsvrg = final.get(rsvrg_prefix + planned_label(eps))
        if rsgd is None or rsvrg is None:
            continue
        below = math.isfinite(float(rsvrg)) and (not math.isfinite(float(rsgd))
                                                 or float(rsvrg) < float(rsgd))
        out.append({"planned_epsilon": float(eps), "rsvrg_final": rsvrg, "rsgd_final": rsgd,
                    "rsgd_step_size": float(rsgd_steps[float(eps)]),
                    "rsvrg_below_rsgd": bool(below)})
    if not out:
        return {}
    held = sum(e["rsvrg_below_rsgd"] for e in out)
    steps = ", ".join(f"{e['rsgd_step_size']:g} at eps<={e['planned_epsilon']:g}" for e in out)
    return {"rsvrg_vs_rsgd": out, "rsvrg_vs_rsgd_claim": (
        f"the paper's claim (DP-RSVRG ends below DP-RSGD) holds at {held} of {len(out)} "
        f"certified budgets ({rsvrg_prefix.strip()} at step {rsvrg_step:g}, DP-RSGD at step "
        f"{steps}, {'chosen on public words' if chosen else 'given'})")}


def _fig5_public_problem(ctx: RunContext, config: dict, data: Mapping[str, Any]
                         ) -> tuple[HyperbolicPrediction, str]:
    """fig5's tuning problem on PUBLIC words: utility-hyperbolic's declared public split
    (:func:`~rfed.experiments.utility_hyperbolic.declared_public_words`) resampled, with its own
    seed, to fig5's ``n_agents x per_agent``; and its one-line description."""
    from rfed.experiments.utility_hyperbolic import declared_public_words

    n, per = config["n_agents"], config["per_agent"]
    public_idx, _ = declared_public_words(len(data["features"]), config["public_fraction"], ctx)
    words = public_idx[ctx.rng(2).integers(0, len(public_idx), size=(n, per))]
    public = HyperbolicPrediction(
        data["features"][words], data["targets"][words], data["test_feature"],
        gamma=config["gamma"], bandwidth=config["bandwidth"], kernel=config["kernel"],
        diameter=config["diameter"], weights=config["weights"])
    public.evaluate_grad_norm = False   # a search reads the final excess risk only
    return public, f"declared public split ({len(public_idx)} words) resampled to {n} x {per}"


def _fig5_step_on_public(ctx: RunContext, config: dict, public: HyperbolicPrediction,
                         described: str, trainer_for: Callable, steps: Sequence[float],
                         epsilon: float, column: str, stream: tuple[int, ...],
                         tuning: list[dict]) -> float:
    """The step of ``steps`` whose budget-first run of ``trainer_for`` at planned ``epsilon``
    ends at the lowest mean excess risk over ``tune_repetitions`` runs on the PUBLIC problem
    ``public`` (:func:`_fig5_public_problem`); a diverged run counts as infinite. One row per
    candidate is appended to ``tuning`` (the step under ``column``), marked by
    :func:`~rfed.experiments.tables.choose_best`; candidate ``i``'s repetition ``r`` draws from
    ``ctx.rng(*stream, i, r)``, and every search starts from the same points."""
    rounds, reps = config["rounds"], config["tune_repetitions"]
    x0s = [public.manifold.random_point(ctx.rng(8_890, r)) for r in range(reps)]
    rows = []
    for i, step in enumerate(steps):
        alg = PriRFed(trainer_for(), 1, step, budget=PrivacyBudget(epsilon, config["delta"]),
                      n_rounds=rounds)
        rngs = [ctx.rng(*stream, i, r) for r in range(reps)]
        group = RepeatedRuns(alg, x0s, rngs, n_rounds=rounds, eval_every=rounds)
        res = group.run(public, rounds, rng=rngs[0], x0=x0s[0], eval_every=rounds)
        finals = [math.inf if run.diverged else float(run.history[-1]["excess_risk"])
                  for run in group.results(public, res.state)]
        rows.append({column: float(step), "planned_epsilon": float(epsilon),
                     "public_mean_final_excess_risk": float(np.mean(finals)),
                     "public_diverged": sum(not math.isfinite(f) for f in finals),
                     "public_runs": reps, "public_data": described})
    best = float(choose_best(rows, "public_mean_final_excess_risk", [column])[column])
    tuning.extend(rows)
    return best


def _poincare_figure(problem: HyperbolicPrediction, data: Mapping[str, Any], truth: np.ndarray,
                     results: dict) -> Any:
    """Fig. 6: the embedding on the Poincare disk, the true 'primate', and each method's
    estimate: the Frechet mean of its runs' final points (a large marker; the coordinate-wise
    median on the disk, labelled so, when a run lies too far out for the mean's log maps in
    float64) with every run's point (small, faint: the spread); runs that diverged are left
    out, and methods whose every run diverged are named in a note instead of drawn."""
    from rfed.manifolds import PoincareBall

    man = problem.manifold
    to_ball = PoincareBall(2).from_hyperboloid
    emb = to_ball(data["targets"])
    t = to_ball(truth)
    shown, left_out = {}, []
    for label, runs in results.items():
        kept = [r.x for r in runs if not r.diverged and np.all(np.isfinite(r.x))]
        if not kept:
            if runs:
                left_out.append(f"{label} ({len(runs)}/{len(runs)} diverged)")
            continue
        pts = np.stack(kept)
        try:
            centre, how = to_ball(man.mean(pts) if len(pts) > 1 else pts[0]), "mean"
        except FloatingPointError:
            # a run that wandered to x_0 near float64's range has no representable log map,
            # so the Frechet mean cannot be computed; every run still maps into the unit
            # disk, where the coordinate-wise median is defined (and labelled as such)
            centre, how = np.median(to_ball(pts), axis=0), "disk median"
        shown[label] = (centre, to_ball(pts), len(kept), len(runs), how)
    ref = to_ball(problem.reference_point())
    # the zoom shows the estimates near 'primate'; when none lies within 0.35 of it, a zoom
    # would be empty, so the figure keeps the disk alone and says so
    near = min(float(np.linalg.norm(c - t)) for c, *_ in [*shown.values(), (ref,)])
    zooms = (False, True) if near <= 0.35 else (False,)
    fig, axes = new_figure(len(zooms), panel_size=(5.0, 5.0))
    for ax, zoom in zip(axes, zooms, strict=True):
        ax.scatter(emb[:, 0], emb[:, 1], s=3, c="0.7", label="mammals (training words)")
        ax.scatter([t[0]], [t[1]], marker="*", s=180, c="k", label="primate (truth)")
        ax.scatter([ref[0]], [ref[1]], marker="x", s=80, c="r",
                   label="pooled optimum (non-private)")
        for (label, (centre, pts, n_kept, n_runs, how)), mk in zip(shown.items(), "osD^v<>ph",
                                                                    strict=False):
            dot = ax.scatter(pts[:, 0], pts[:, 1], marker=mk, s=10, alpha=0.3)
            ax.scatter([centre[0]], [centre[1]], marker=mk, s=70, color=dot.get_facecolor(),
                       edgecolors="k", linewidths=0.6,
                       label=f"{label}: {how} of {n_kept}/{n_runs} runs (small: each run)")
        ax.set_aspect("equal")
        circle = math.pi * np.linspace(0, 2, 400)
        ax.plot(np.cos(circle), np.sin(circle), "k-", lw=0.8)
        ax.set_xlabel("Poincare disk coordinate 1")
        ax.set_ylabel("Poincare disk coordinate 2")
        if zoom:
            # a square around 'primate' reaching the nearest estimate, cut to the disk's
            # bounding box so no part of it lies outside the model
            r = max(0.05, 1.3 * near)
            ax.set_xlim(max(t[0] - r, -1.02), min(t[0] + r, 1.02))
            ax.set_ylim(max(t[1] - r, -1.02), min(t[1] + r, 1.02))
            ax.set_title(f"zoom near 'primate' (half-width {r:.2g})", fontsize=10)
        else:
            ax.set_xlim(-1.05, 1.05)
            ax.set_ylim(-1.05, 1.05)
            note = "" if len(zooms) > 1 else (
                f"\n(no zoom: the nearest estimate is {near:.2g} from 'primate')")
            ax.set_title(f"Poincare disk{note}", fontsize=10)
    # the note on left-out methods goes under the title, so neither covers the other
    note = textwrap.fill("not drawn, every run diverged: " + "; ".join(left_out), 110)
    fig.suptitle("PriRFed, prediction of 'primate' on H^2 (paper's Fig. 6): each method's "
                 "estimate on the Poincare disk" + (f"\n{note}" if left_out else ""),
                 fontsize=11 if not left_out else 9)
    fig.tight_layout()
    return fig
