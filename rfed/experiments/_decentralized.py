"""Shared runner of the decentralized papers' experiments (DO-ADP, DPDL, DP-DDA, DP-DGT).

A *setting* is one curve: a label, a problem, an algorithm factory and optional extra metrics.
Each setting runs ``repetitions`` times with independent generators derived from the context's
seed; every evaluated round is logged (``ctx.log``) with the setting, repetition and metrics, and
the privacy report of the first repetition is stored with ``ctx.set_privacy``. Private settings
run at a certified budget (the algorithms' ``budget=``) are labelled
``'certified eps=X (delta=Y)'``; the papers' calibrations are extra settings labelled as such.

On a distributed engine (``rfed run NAME --engine mpi``) every process runs on a shard of the
problem (:func:`engine_problem`): the rows of its block of agents only, with the metrics that
sum over agents (cost, gradient norm, excess risk, training accuracy) computed by reductions in
agent order, so every logged number has the one-process bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rfed.algorithms.private import certifies
from rfed.experiments.registry import RunContext, summary_row
from rfed.networks.engine import default_communicator
from rfed.problems.base import Problem
from rfed.problems.dispatch import QuadraticResourceAllocation

__all__ = ["DecSetting", "engine_problem", "run_dec_settings", "privacy_summary",
           "budget_label", "summary_rows"]


def engine_problem(problem: Any) -> Any:
    """The problem as this process of the engine in use should hold it.

    In one process (or a 1-rank MPI job): ``problem`` itself. On a distributed engine (inside
    :func:`rfed.engines.mpi.mpi_engine` with several ranks): ``problem.shard(agents,
    reducer=comm)`` for this process's block of agents (the blocks of
    :func:`rfed.networks.engine.default_communicator`, which every network of the run uses), so
    the run can touch no other agent's rows and ``cost``/``grad`` are reductions with the
    one-process bits. Call it once the public facts are computed (e.g. ``reference_cost()``,
    which reads every agent's data) and drop the full problem. DP-DGT's resource allocation
    shards the same way; anything else, or a shard already, is returned as is.
    """
    if not isinstance(problem, (Problem, QuadraticResourceAllocation)) or problem.is_shard:
        return problem
    comm = default_communicator(problem.n_agents)
    if comm.n_local == comm.n_agents:
        return problem
    return problem.shard(comm.agents, reducer=comm)


@dataclass
class DecSetting:
    """One curve: ``make()`` builds a fresh algorithm (its network counts traffic per run).

    ``make`` is called without arguments; ``Callable[..., Any]`` lets the experiments' loops bind
    their variables as a lambda's default arguments, which mypy cannot type as ``() -> Any``.
    """

    label: str
    problem: Any
    make: Callable[..., Any]
    x0: Callable[[np.random.Generator], np.ndarray] | None = None
    extra: Callable[[Any, Any], dict] | None = None
    tags: dict = field(default_factory=dict)
    rounds: int | None = None
    epochs_per_round: float | None = None


def privacy_summary(report: dict | None) -> dict:
    """Flatten a run's privacy report (``result.privacy``) into table columns.

    The primary label is the certified ``(epsilon, delta)`` of the whole run; the paper's value
    (if any) sits beside it, marked as the paper's formula.
    """
    if report is None or not certifies(report):
        return {"privacy": "non-private", "epsilon_certified": None}
    out = {"privacy": report["label"], "epsilon_certified": report["epsilon_certified"],
           "delta": report["delta"], "level": report["level"],
           "noise_multiplier": report["noise_multiplier"],
           "target_epsilon": report["target_epsilon"],
           "epsilon_paper": report["epsilon_paper"]}
    paper = report.get("paper") or {}
    for key, val in paper.items():
        if key.startswith("epsilon") and key != "epsilon":
            out[f"paper_{key}"] = val
    return out


def budget_label(epsilon: float, delta: float | None = None) -> str:
    """``'planned eps<=X'``: the label of a setting run budget-first.

    The label names the budget the noise was calibrated for (the PLANNED bound); the epsilon
    the run certifies (its report, with its relation and delta) is added to every legend and
    is the summary table's epsilon column: one certified number per curve. ``delta`` is
    accepted for the callers' convenience and not shown (the table and legends show the
    certified delta).
    """
    return f"planned eps<={epsilon:g}"


def run_dec_settings(ctx: RunContext, settings: Sequence[DecSetting], *, rounds: int,
                     repetitions: int, eval_every: int, with_reference: bool = True
                     ) -> dict[str, list]:
    """Run every setting ``repetitions`` times; returns ``{label: [RunResult, ...]}``.

    A setting with its own ``rounds`` runs that many (evaluated proportionally as often) and,
    with ``epochs_per_round``, logs an ``epoch`` column to compare settings on one axis.
    """
    results: dict[str, list] = {}
    # one shard per problem on a distributed engine (settings usually share their problem)
    shards: dict[int, Any] = {}
    for st in settings:
        if id(st.problem) not in shards:
            shards[id(st.problem)] = engine_problem(st.problem)
        st.problem = shards[id(st.problem)]
    total = sum(st.rounds or rounds for st in settings) * repetitions
    bar = ctx.progress_bar(total, desc="rounds")
    for si, st in enumerate(settings):
        runs = []
        for rep in range(repetitions):
            alg = st.make()
            x0 = st.x0(ctx.rng(10_000, rep)) if st.x0 is not None else None
            last = [0]

            def callback(t, rec, state, st=st, rep=rep, last=last):
                extra = st.extra(st.problem, state) if st.extra else {}
                if st.epochs_per_round is not None:
                    extra["epoch"] = t * st.epochs_per_round
                ctx.log(setting=st.label, repetition=rep, **st.tags, **rec, **extra)
                bar.update(t - last[0])
                last[0] = t

            n_rounds = st.rounds or rounds
            every = max(1, round(eval_every * n_rounds / rounds))
            res = alg.run(st.problem, n_rounds, rng=ctx.rng(si, rep), x0=x0,
                          eval_every=every, with_reference=with_reference, callback=callback)
            if res.diverged:
                # marked, kept out of the means and the curves, counted in the summary
                ctx.log(setting=st.label, repetition=rep, **st.tags, diverged=True,
                        diverged_round=res.diverged_round, diverged_reason=res.diverged_reason)
            bar.update(n_rounds - last[0])
            runs.append(res)
        results[st.label] = runs
        if certifies(runs[0].privacy):
            ctx.set_privacy(st.label, runs[0].privacy)
    bar.close()
    return results


def summary_rows(ctx: RunContext, results: dict[str, list], *, metric: str,
                 utility_name: str, percent: bool = False, figure: str = "",
                 reference: float | None = None, reference_name: str = "",
                 where: Callable[[dict], bool] | None = None,
                 references: dict[str, str] | None = None) -> list[dict]:
    """One :func:`summary_row` per setting of ``results`` (from :func:`run_dec_settings`).

    The utility is ``metric`` at each repetition's last logged round (``ctx.records``, so
    metrics added by a setting's ``extra`` count too; ``where`` filters the records), mean +-
    std over the repetitions that did not diverge (``x 100`` with ``percent``); the start is
    its mean at round 0. The reference of a setting is the non-private setting that
    ``references`` names for it (the same algorithm without noise), else the first
    non-private setting (a label containing ``"non-private"``), else ``reference``. Private
    settings carry their certified ``(epsilon, delta)``, the relation, the accountant, and the
    paper's epsilon beside it.
    """
    scale = 100.0 if percent else 1.0
    last: dict[tuple[str, Any], tuple[float, float]] = {}
    first: dict[tuple[str, Any], float] = {}
    for rec in ctx.records:
        if rec.get("setting") not in results or metric not in rec or "round" not in rec:
            continue
        if where is not None and not where(rec):
            continue
        key = (rec["setting"], rec.get("repetition"))
        if key not in last or rec["round"] >= last[key][0]:
            last[key] = (rec["round"], float(rec[metric]))
        if rec["round"] == 0:
            first[key] = float(rec[metric])
    stats = {}
    for label, runs in results.items():
        vals = np.array([last[(label, rep)][1] for rep, run in enumerate(runs)
                         if not run.diverged and (label, rep) in last], dtype=float)
        starts = [first[(label, rep)] for rep in range(len(runs)) if (label, rep) in first]
        stats[label] = ((scale * vals.mean(), scale * vals.std()) if vals.size
                        else (float("nan"), None),
                        scale * float(np.mean(starts)) if starts else None)
    ref_labels = [k for k in results if "non-private" in k.lower()]
    rows = []
    for label, runs in results.items():
        priv = runs[0].privacy if runs and certifies(runs[0].privacy) else None
        if label in ref_labels:
            ref_label: str | None = label
        elif references is not None:
            ref_label = references.get(label)
        else:
            ref_label = ref_labels[0] if ref_labels else None
        ref_value, ref_name = reference, reference_name
        if ref_label in stats:
            ref_value, ref_name = stats[ref_label][0][0], "non-private"
        rows.append(summary_row(
            label, utility_name=utility_name, utility=stats[label][0][0],
            utility_std=stats[label][0][1], reference=ref_value, reference_name=ref_name,
            epsilon=priv["epsilon_certified"] if priv else None,
            delta=priv["delta"] if priv else None,
            accountant=_accountant_text(priv) if priv else "",
            figure=figure, repetitions=len(runs),
            diverged=sum(1 for run in runs if run.diverged),
            epsilon_paper=priv.get("epsilon_paper") if priv else None,
            start=stats[label][1], higher_is_better="accuracy" in utility_name.lower()))
    return rows


def _accountant_text(report: dict) -> str:
    """The accountant and the neighbouring relation of a report, in one line."""
    text = str(report.get("accountant") or "certified accountant")
    relation = str(report.get("neighboring") or "")
    return f"{text}, {relation}" if relation and relation not in text else text
