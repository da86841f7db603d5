"""The ``rfed`` command: list, describe and run the registered experiments.

::

    rfed list
    rfed show NAME
    rfed run [NAME] [--seed S] [--set key=value ...] [--out DIR] [--overwrite]
                    [--checkpoint-every N] [--checkpoint-seconds S] [--no-progress]
                    [--secure]
    rfed run [NAME] --resume DIR
    mpiexec -n K python -m mpi4py -m rfed run NAME --engine mpi [...]
    mpiexec -n K2 python -m mpi4py -m rfed run --resume DIR --engine mpi
    rfed run NAME --engine flower|flower-sim [--supernodes K] [...]
    rfed audit NAME [--trials N] [--noise-factor F] [--secure]
    rfed --version

Runs are seeded by default, for research: their noise can be replayed from the seed. ``--secure``
draws every algorithm's randomness from the operating system and releases noise with the discrete
Gaussian / Laplace mechanisms (:mod:`rfed.privacy.secure`); such runs are not replayable.
``rfed audit`` runs an empirical privacy audit of a named configuration
(:mod:`rfed.experiments.audits`, with :mod:`rfed.privacy.audit`'s method) and prints its epsilon
lower bound beside the certified epsilon.

``rfed run`` without a name runs the default experiment, ``pca-synthetic``. Results go to
``DIR`` (default ``runs/NAME``), which must be empty or absent unless ``--overwrite`` (clears an
earlier rfed results folder) or ``--resume`` (continues the run saved there from its last
checkpoint; the experiment, seed and settings are read from ``DIR/config.json``). Files are
written as results arrive (see :mod:`rfed.experiments.run_context`); the run's state is
checkpointed at the end of every algorithm run, at Ctrl-C, and every ``N`` rounds once ``S``
seconds (default 5; 0: every ``N`` rounds) have passed since the last checkpoint.

Each ``--engine`` runs the experiment inside one engine object (:class:`rfed.engines.Engine`:
``inprocess`` :data:`rfed.engines.IN_PROCESS`, ``mpi`` :class:`rfed.engines.mpi.MPIEngine`,
``flower`` :class:`rfed.engines.flower_runs.FlowerEngine`), which gives every network its
communicator and every run its checkpoint hook.

``--engine mpi`` runs the experiment's decentralized algorithms on the MPI engine
(:mod:`rfed.engines.mpi`): every rank builds the same graph, owns a block of agents, keeps
only its agents' data (the problem's shard, once the reference is computed) and runs the same
rounds; rank 0 reads the settings, writes the results and the checkpoints and prints the
summary, the other ranks write nothing. The results are
bit-identical to ``--engine inprocess`` (the default) for any number of ranks. Checkpoints work
as in one process (``--checkpoint-every N``, and at the end of every algorithm run): the ranks'
blocks are gathered into one file that holds every agent's state, so ``--resume DIR
--engine mpi`` continues on the same or ANOTHER number of ranks and ends with results files
bit-identical to an uninterrupted run. A run checkpointed in one process also resumes on MPI;
a run checkpointed on MPI resumes only with ``--engine mpi`` (on one rank: ``mpiexec -n 1``,
or plain ``python -m rfed ... --engine mpi``). On MPI, Ctrl-C stops at once (the ranks could
not all save in the same round): resume from the last periodic checkpoint. Launch through
``python -m mpi4py`` (an error on one rank then stops them all; an error on rank 0 stops the
job with its exit status). Only the experiments in :data:`MPI_EXPERIMENTS` run on MPI (the
others use federated algorithms, which the MPI engine does not drive); a run on MPI is not
secure-mode.

``--engine flower`` runs the experiment's PriRFed runs on a Flower federation started on this
machine for the run (:mod:`rfed.engines.flower_runs`): a SuperLink with ``--supernodes K``
SuperNodes (default 2) on loopback, with TLS and SuperNode authentication, each SuperNode a
process reading its agents' rows from its own data file; ``--engine flower-sim`` uses Flower's
simulation engine instead (Ray). The results and privacy reports are those of ``--engine
inprocess`` bit for bit, except that the history has no ``n_clipped`` (it never leaves a
client) and each report has a ``federation`` section (trust model, checks, refused replies).
Only the experiments in :data:`FLOWER_EXPERIMENTS` run there; a run on Flower is not
secure-mode (its noise is replayable from the seed, by design of the comparison).

Exit status: 0 done; 2 bad input (unknown experiment, bad ``--set``, unusable ``--out``); 1 the
run failed (e.g. the disk is full); 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (as a batch
system's time limit stops a job): both save the run's checkpoint and print the "continue with:
rfed run NAME --resume DIR" line. A long run prints its estimated total time after its first
algorithm run (:class:`rfed.experiments.timings.TimeEstimate`). Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rfed import __version__

DEFAULT_EXPERIMENT = "pca-synthetic"
DEFAULT_OUT = Path("runs")

#: Experiments whose algorithms all run on the MPI engine (checked bit-identical to one process).
MPI_EXPERIMENTS = ("doadp-digits", "doadp-logreg", "dpdda-svm", "dpdgt-ieee14", "dpdl-digits")

#: Experiments whose algorithms all run on the Flower engine (PriRFed through one driver).
FLOWER_EXPERIMENTS = ("pca-synthetic", "prirfed-fig1", "prirfed-fig2", "prirfed-fig3",
                      "prirfed-fig4", "prirfed-fig5", "prirfed-kpca")


class _Parser(argparse.ArgumentParser):
    """rfed's top-level parser; it keeps its ``run`` subparser for ``rfed run NAME --help``."""

    run_parser: argparse.ArgumentParser


def _parser() -> _Parser:
    parser = _Parser(
        prog="rfed",
        description="Differentially private federated and decentralized optimization on "
        "Riemannian manifolds: run the papers' experiments.",
    )
    parser.add_argument("--version", action="version", version=f"rfed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("list", help="list the registered experiments, one line each")
    show = sub.add_parser("show", help="describe an experiment and its settings")
    show.add_argument("name", help="experiment name (see 'rfed list')")
    run = sub.add_parser("run", help="run an experiment (rfed run NAME --help describes NAME)")
    run.add_argument("name", nargs="?", default=None,
                     help=f"experiment name (default: {DEFAULT_EXPERIMENT}; see 'rfed list')")
    run.add_argument("--seed", type=int, default=None, help="master seed, an int >= 0 "
                     "(default 0)")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a setting (repeatable), e.g. "
                     "--set rounds=100 --set 'epsilons=[0.1, 1.0]'")
    run.add_argument("--out", type=Path, default=None,
                     help=f"output folder, absent or empty (default: {DEFAULT_OUT}/NAME)")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", action="store_true",
                      help="clear an earlier rfed results folder at --out first")
    mode.add_argument("--resume", type=Path, default=None, metavar="DIR",
                      help="continue the interrupted run saved in DIR")
    run.add_argument("--checkpoint-every", type=int, default=100, metavar="N",
                     help="save the run's state every N rounds (default 100; 0: only at the "
                     "end of each run and at Ctrl-C)")
    run.add_argument("--checkpoint-seconds", type=float, default=5.0, metavar="S",
                     help="at most one periodic checkpoint every S seconds of wall time "
                     "(default 5; 0: every N rounds); the results do not depend on it")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--engine", choices=("inprocess", "mpi", "flower", "flower-sim"),
                     default="inprocess",
                     help="inprocess (default): every agent in this process; mpi: the agents "
                     "in blocks on the MPI ranks (launch with mpiexec -n K python -m mpi4py -m "
                     f"rfed run NAME --engine mpi; experiments: {', '.join(MPI_EXPERIMENTS)}); "
                     "flower: a Flower SuperLink with SuperNodes on loopback (TLS, SuperNode "
                     "authentication), flower-sim: Flower's simulation engine (experiments: "
                     f"{', '.join(FLOWER_EXPERIMENTS)})")
    run.add_argument("--supernodes", type=int, default=None, metavar="K",
                     help="SuperNodes of --engine flower / flower-sim (default 2; refused with "
                     "the other engines)")
    run.add_argument("--secure", action="store_true",
                     help="secure mode: the operating system's randomness and discrete noise "
                     "for every algorithm run (not replayable from the seed, by design); "
                     "without it runs are seeded, for research, and replayable from --seed")
    sub.add_parser("audit", add_help=False,
                   help="empirical privacy audit of a named configuration "
                   "(rfed audit --help lists them)")
    parser.run_parser = run  # for `rfed run NAME --help`
    return parser


def _error(message: str | Exception) -> None:
    print(f"rfed: error: {' '.join(str(message).split())}", file=sys.stderr)


def _timings() -> dict:
    """The timings file's experiments (:func:`rfed.experiments.timings.read_timings`)."""
    from rfed.experiments.timings import read_timings

    return read_timings()


def _duration(seconds: float) -> str:
    from rfed.experiments.timings import duration

    return duration(seconds)


def _cpu_times(name: str, scales: tuple[str, ...] = ()) -> str:
    """``"CPU 13 s; paper scale 25 min; scale=paper-ring 20 min"``: the measured CPU times of
    ``name`` at its quick defaults and at each of its named ``scales`` ("not measured" where
    the timings file has none).

    Parameters
    ----------
    name : str
        The experiment's name.
    scales : tuple of str, default ()
        Its named scales (``"paper"``, ``"paper-ring"``, ...), in the registry's order.

    Returns
    -------
    str
    """
    times = _timings().get(name, {})
    parts = []
    for scale in ("quick", *scales):
        entry = times.get(scale)
        label = {"quick": "CPU", "paper": "paper scale"}.get(scale, f"scale={scale}")
        parts.append(f"{label} {_duration(float(entry['cpu_seconds']))}"
                     if isinstance(entry, dict) and "cpu_seconds" in entry
                     else f"{label} not measured")
    return "; ".join(parts)


#: The longest line of ``rfed list`` (the description is shortened to fit).
LIST_WIDTH = 200


def _print_list() -> None:
    from rfed.experiments import list_experiments

    exps = list_experiments()
    width = max(len(e.name) for e in exps)
    for e in exps:
        tags = (" (default)" if e.name == DEFAULT_EXPERIMENT else "") + (" [slow]" if e.slow
                                                                         else "")
        tags += "".join(f" [needs {d}]" for d in e.requires)
        tail = f" [{e.paper_label}]{tags} ({_cpu_times(e.name, tuple(e.scales))})"
        room = LIST_WIDTH - width - 2 - len(tail)   # one line of at most LIST_WIDTH characters
        short = e.short if len(e.short) <= room else e.short[:max(room - 3, 20)].rstrip() + "..."
        print(f"{e.name:<{width}}  {short}{tail}")
    print("\n'rfed show NAME' describes an experiment and its settings. CPU times: measured by "
          "benchmarks/bench_experiments.py --record (rfed/experiments/timings.json; the date "
          "and commit are in 'rfed show NAME').")


def _print_show(name: str) -> None:
    import textwrap

    from rfed.experiments import get_experiment
    from rfed.experiments.registry import clean_text

    e = get_experiment(name)
    print(f"{e.name}: {e.short}")
    print(f"paper: {e.paper_label}" + ("  [slow]" if e.slow else ""))
    if e.requires:
        print(f"needs data: {', '.join(e.requires)} (installed files; never downloaded)")
    print()
    print(textwrap.fill(clean_text(e.description), width=96))
    _print_citations(e.paper_label, e.description)
    print("\nsettings (--set KEY=VALUE):")
    width = max(len(k) for k in e.defaults)
    for key, value in e.defaults.items():
        print(f"  {key:<{width}}  {value!r}")
    for scale, changes in e.scales.items():
        print(f"\n--set scale={scale} (the papers' sizes) sets:")
        for key, value in changes.items():
            print(f"  {key:<{width}}  {value!r}")
    print("\nmeasured CPU time (benchmarks/bench_experiments.py --record):")
    times = _timings().get(e.name, {})
    for scale in ("quick", *e.scales):
        entry = times.get(scale)
        what = "defaults" if scale == "quick" else f"scale={scale}"
        if isinstance(entry, dict) and "cpu_seconds" in entry:
            print(f"  {what}: {_duration(float(entry['cpu_seconds']))} of CPU "
                  f"({float(entry['cpu_seconds']):.0f} s; measured {entry.get('date', '?')} at "
                  f"commit {entry.get('commit', '?')})")
        else:
            print(f"  {what}: not measured")


def _print_citations(paper_label: str, description: str) -> None:
    """Full references: the papers an experiment reproduces (named in its paper label), then
    the methods and data its description names."""
    import textwrap

    from rfed.bibliography import PAPERS, cited_in

    reproduces = [r for r in cited_in(paper_label) if r.key in PAPERS]
    uses = [r for r in cited_in(paper_label + " " + description) if r not in reproduces]
    for title, group in (("reproduces", reproduces), ("compares with or uses", uses)):
        if group:
            print(f"\n{title}:")
            for ref in group:
                print(textwrap.fill(str(ref), width=96, initial_indent="  ",
                                    subsequent_indent="    "))


def _fmt(v) -> str:
    from rfed.experiments.tables import format_value as fmt

    return fmt(v)


def _rows_from_settings(name: str, summary: dict, ctx) -> list[dict]:
    """Summary-table rows from a PriRFed-style ``summary["settings"]`` (final excess risk per
    setting), for experiments that do not call ``ctx.summary_table`` yet."""
    import numpy as np

    from rfed.experiments import get_experiment
    from rfed.experiments.registry import summary_row

    settings = summary.get("settings")
    if not isinstance(settings, dict) or not settings or not all(
        isinstance(r, dict) and "final_excess_risk_mean" in r for r in settings.values()
    ):
        return []
    exp = get_experiment(name)
    reps = ctx.records and max((r.get("repetition", 0) for r in ctx.records), default=0) + 1
    ref = summary.get("random_start_excess_risk")
    lost = {(d.get("setting"), d.get("repetition")) for d in ctx.diverged_runs}
    finals: dict = {}
    for rec in ctx.records:   # each repetition's last recorded excess risk
        if "excess_risk" in rec and "round" in rec:
            key = (rec.get("setting"), rec.get("repetition"))
            if key not in finals or rec["round"] >= finals[key][0]:
                finals[key] = (rec["round"], rec["excess_risk"])
    rows = []
    for label, row in settings.items():
        n_lost = sum(1 for s, _ in lost if s == label)
        kept = [v for (s, r), (_, v) in finals.items() if s == label and (s, r) not in lost]
        if n_lost:   # the experiment's own mean includes diverged runs: recompute without them
            mean = float(np.mean(kept)) if kept else None
            std = float(np.std(kept)) if kept else None
        else:
            mean, std = row.get("final_excess_risk_mean"), row.get("final_excess_risk_std")
        rows.append(summary_row(
            label, utility_name="excess risk f(x) - f(x*)", utility=mean, utility_std=std,
            reference=ref, reference_name="random start" if ref is not None else "",
            epsilon=row.get("epsilon_certified"), delta=row.get("delta"),
            accountant=summary.get("accountant", ""), figure=exp.paper_label,
            repetitions=reps or None, diverged=max(int(row.get("diverged") or 0), n_lost),
            epsilon_paper=row.get("epsilon_paper"),
        ))
    return rows


def _print_summary(name: str, summary: dict, ctx) -> None:
    from rfed.experiments.registry import format_summary_table, format_table

    where = f"; results in {ctx.out_dir}" if ctx.out_dir is not None else ""
    print(f"\n{name}: done in {summary.get('seconds', float('nan')):.1f} s{where}")
    rows = ctx.summary_rows or _rows_from_settings(name, summary, ctx)
    shown = {"seconds"}
    if rows:
        print(format_summary_table(rows), end="")
        shown |= {"settings", "accountant", "random_start_excess_risk"}
    if "reference_cost" in summary:
        print(f"reference (true value) cost: {_fmt(summary['reference_cost'])}")
        shown.add("reference_cost")
    for key, value in summary.items():
        if key in shown:
            continue
        if isinstance(value, (int, float, str)):
            print(f"{key}: {_fmt(value)}")
        elif isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            print(f"\n{key}:")
            print(format_table(value), end="")
        elif key == "settings" and isinstance(value, dict) and value:
            print("\nsettings:")
            print(format_table([{"setting": k, **v} for k, v in value.items()
                                if isinstance(v, dict)]), end="")
    if "accountant" in summary and not rows:
        print(f"accountant: {summary['accountant']}")
    elif ctx.privacy and not rows:
        _print_privacy(ctx.privacy)
    if ctx.privacy or any(r.get("eps (certified)") is not None or r.get("epsilon") is not None
                          for r in rows):
        from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE

        print(f"privacy, {OUTSIDE_THE_GUARANTEE}")
    _print_divergence(ctx.diverged_runs)
    _print_scale_note(name, ctx)


def _print_divergence(diverged_runs: list[dict]) -> None:
    """One line per setting: how many of its runs diverged, where first, and why (shortened)."""
    if not diverged_runs:
        return
    by_setting: dict[str, list[dict]] = {}
    for d in diverged_runs:
        where = str(d.get("setting", f"run {d.get('run', '?')}"))
        by_setting.setdefault(where, []).append(d)
    print(f"\n{len(diverged_runs)} run(s) diverged (kept out of the table's means; their "
          f"history up to the divergence is in history.jsonl):")
    for setting, runs in by_setting.items():
        reps = sorted({d["repetition"] for d in runs if "repetition" in d})
        rounds = [d["diverged_round"] for d in runs if d.get("diverged_round") is not None]
        reason = " ".join(str(runs[0].get("reason", "")).split())
        if len(reason) > 90:
            reason = reason[:87].rstrip() + "..."
        which = (f"repetition{'s' if len(reps) > 1 else ''} "
                 f"{', '.join(map(str, reps[:8]))}{', ...' if len(reps) > 8 else ''}"
                 if reps else f"{len(runs)} run(s)")
        first = f", first at round {min(rounds)}" if rounds else ""
        print(f"  {setting}: {len(runs)} diverged ({which}{first}): {reason}")


#: A private setting "learns" when it closes at least this fraction of the gap between its start
#: and its non-private reference (or, without a reference, when it ends better than its start).
LEARNED_FRACTION = 0.25


def _print_scale_note(name: str, ctx) -> None:
    """At the quick default size of an experiment with a paper scale: one line saying how to run
    the papers' scale, and, when no private setting of this run learned (closed at least
    :data:`LEARNED_FRACTION` of the gap from its start to its non-private reference, or ended
    better than its start when it has none), that private settings are not expected to learn at
    this size, with the best private setting's measured fraction."""
    from rfed.experiments import get_experiment

    try:
        exp = get_experiment(name)
    except ValueError:
        return
    if "paper" not in exp.scales or ctx.config.get("scale", "quick") != "quick":
        return
    entry = _timings().get(name, {}).get("paper")
    cost = (f", about {_duration(float(entry['cpu_seconds']))} of CPU"
            if isinstance(entry, dict) and "cpu_seconds" in entry else "")
    from rfed.experiments.tables import gap_closed, worse_than_start

    private = [r for r in ctx.summary_rows if r.get("epsilon") is not None
               and math.isfinite(float(r["epsilon"])) and r.get("start") is not None
               and r.get("utility") is not None and math.isfinite(float(r["utility"]))]
    closed = [(g, r) for r in private if (g := gap_closed(r)) is not None]
    if closed:
        best, row = max(closed, key=lambda item: item[0])
        learned = best >= LEARNED_FRACTION
        why = (f" (the best, '{row['setting']}', closes {100 * best:.0f} % of the gap from its "
               f"start to the non-private reference)")
    else:
        learned = any(r["utility"] != r["start"] and not worse_than_start(r) for r in private)
        why = ""
    what = ("" if learned or not private else
            f": private settings are not expected to learn at this size{why}")
    print(f"\nquick default{what}; the papers' scale: "
          f"rfed run {name} --set scale=paper{cost}")


def _find(report: dict, prefix: str) -> float | None:
    """The first number whose key starts with ``prefix`` (depth-first through sub-reports)."""
    for key, value in report.items():
        if key.startswith(prefix) and isinstance(value, (int, float)) and value is not True:
            return float(value)
    for value in report.values():
        if isinstance(value, dict):
            found = _find(value, prefix)
            if found is not None:
                return found
    return None


def _print_privacy(privacy: dict) -> None:
    """Per setting: the paper's epsilon, the certified epsilon at its delta, the accountant."""
    from rfed.experiments.registry import format_table

    rows, accountants = [], []
    for label, report in privacy.items():
        paper = report.get("paper", {}) if isinstance(report.get("paper"), dict) else {}
        certified = report.get("certified", {})
        certified = certified if isinstance(certified, dict) else {}
        rows.append({"setting": label, "eps (paper)": _find(paper, "epsilon"),
                     "eps (certified)": _find(certified, "epsilon"),
                     "delta (certified)": _find(certified, "delta")})
        if certified.get("accountant") and certified["accountant"] not in accountants:
            accountants.append(certified["accountant"])
    print("\nprivacy (full reports in privacy.json):")
    print(format_table(rows), end="")
    for text in accountants:
        print(f"accountant: {text}")


def _name_setting(message: str, overrides: dict) -> str:
    """Prefix a value error with the ``--set`` it came from when the message does not say."""
    for key, value in overrides.items():
        if f"'{key}'" in message or f"'{key}" in message:
            return message
        if value and (repr(value) in message or f"'{value}'" in message):
            return f"setting '{key}'={value!r}: {message}"
    return message


def _resume_settings(resume: Path, name: str | None, seed: int | None,
                     overrides: list[str]) -> tuple[str, int, dict, bool]:
    """Experiment, seed, settings and secure mode of the run saved in ``resume`` (its
    config.json, checked: a damaged one is refused in one line naming it)."""
    from rfed.experiments.registry import OutputDirError, read_run_config

    if overrides:
        raise ValueError("--resume continues a run with its saved settings; --set is not "
                         "allowed with it")
    try:
        saved = read_run_config(resume)
    except OutputDirError as exc:
        raise ValueError(f"cannot resume: {exc}") from None
    if name is not None and name != saved["experiment"]:
        raise ValueError(f"cannot resume: '{resume}' holds a run of '{saved['experiment']}', "
                         f"not '{name}'")
    if seed is not None and seed != saved["seed"]:
        raise ValueError(f"cannot resume: '{resume}' holds a run with seed {saved['seed']}, "
                         f"not {seed}")
    return saved["experiment"], saved["seed"], saved["config"], saved["secure"]


def _settings(args) -> tuple[str, int, dict, Path, str]:
    """``(name, seed, overrides, out, mode)`` of ``rfed run``, checked (``ValueError``)."""
    from rfed.experiments.registry import get_experiment

    if args.resume is not None:
        if args.out is not None and args.out != args.resume:
            raise ValueError("give the folder to resume once: --resume DIR (not --out)")
        name, seed, overrides, secure = _resume_settings(args.resume, args.name, args.seed,
                                                         args.overrides)
        out, mode = args.resume, "resume"
        args.secure = bool(args.secure or secure)
    else:
        from rfed.experiments.registry import parse_overrides

        name = args.name or DEFAULT_EXPERIMENT
        seed = 0 if args.seed is None else args.seed
        overrides = parse_overrides(args.overrides)
        out = args.out if args.out is not None else DEFAULT_OUT / name
        mode = "overwrite" if args.overwrite else "new"
    if seed < 0:
        raise ValueError(f"--seed must be an int >= 0, got {seed}")
    if args.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every must be an int >= 0, got "
                         f"{args.checkpoint_every}")
    if not (math.isfinite(args.checkpoint_seconds) and args.checkpoint_seconds >= 0):
        raise ValueError(f"--checkpoint-seconds must be a finite number >= 0, got "
                         f"{args.checkpoint_seconds}")
    get_experiment(name).config(overrides)
    return name, seed, overrides, out, mode


def _check_not_mpi_checkpoint(folder: Path) -> None:
    """An in-process ``--resume`` of a run checkpointed on MPI is refused in one line."""
    from rfed.engines.mpi import SavedBlocks
    from rfed.experiments.registry import OutputDirError, read_checkpoint

    try:
        ck = read_checkpoint(folder)
    except OutputDirError:
        return   # RunContext reports an unreadable checkpoint
    if ck is None:
        return
    states = [getattr(r, "state", None) for r, _ in ck["completed"]]
    current = ck["current"] or {}
    states.append(current.get("payload", {}).get("state"))
    if any(isinstance(st, SavedBlocks) for st in states):
        raise ValueError(f"the run in '{folder}' was checkpointed on the MPI engine: resume it "
                         "with --engine mpi (on any number of ranks)")


def _run(args) -> int:
    from rfed._malloc import keep_freed_memory

    keep_freed_memory()   # a run's rounds reuse the same temporaries: no page faults for them
    if args.supernodes is not None and args.engine not in ("flower", "flower-sim"):
        _error(f"--supernodes applies to --engine flower / flower-sim only, not to --engine "
               f"{args.engine}")
        return 2
    if args.engine == "mpi":
        return _run_on_mpi(args)
    if args.engine in ("flower", "flower-sim"):
        return _run_on_flower(args)
    try:
        name, seed, overrides, out, mode = _settings(args)
        if mode == "resume":
            _check_not_mpi_checkpoint(out)
    except ValueError as exc:
        _error(exc)
        return 2
    return _run_and_report(args, name, seed, overrides, out, mode)


def _run_on_mpi(args) -> int:
    """``--engine mpi``: rank 0 reads the settings (and, with ``--resume``, the saved run),
    writes the results and checkpoints, and prints; every rank runs the same rounds on its
    block of agents (:class:`rfed.engines.mpi.MPIRunHook` gathers the checkpoints)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        _error("--engine mpi needs mpi4py and an MPI: pip install 'rfed[mpi]'")
        return 2
    from mpi4py import MPI

    from rfed.engines.mpi import mpi_engine
    from rfed.experiments.registry import run_experiment

    world = MPI.COMM_WORLD
    settings = error = None
    if world.Get_rank() == 0:
        try:
            settings = _settings(args)
            _check_mpi_run(settings[0], args)
        except ValueError as exc:
            error = str(exc)
    # one decision for all ranks (only rank 0 may see the results folder)
    settings, error, args.secure = world.bcast((settings, error, args.secure), root=0)
    if error is not None:
        if world.Get_rank() == 0:
            _error(error)
        return 2
    name, seed, overrides, out, mode = settings
    with mpi_engine():
        if world.Get_rank() != 0:
            # the same rounds as rank 0, on this rank's agents; results are rank 0's
            try:
                run_experiment(name, seed=seed, overrides=overrides, out_dir=None,
                               progress=False, checkpoint_every=args.checkpoint_every,
                               checkpoint_seconds=args.checkpoint_seconds)
            except KeyboardInterrupt:
                return 130   # rank 0 says how to resume
            return 0
        status = _run_and_report(args, name, seed, overrides, out, mode)
    if status != 0 and world.Get_size() > 1:
        # the other ranks may be waiting in a collective: stop the job with rank 0's status
        sys.stdout.flush()
        sys.stderr.flush()
        world.Abort(status)
    return status


def _run_on_flower(args) -> int:
    """``--engine flower`` / ``flower-sim``: the experiment's PriRFed runs on a federation
    started here for the run (:mod:`rfed.engines.flower_runs`)."""
    import tempfile

    try:
        name, seed, overrides, out, mode = _settings(args)
        if mode == "resume":
            _check_not_mpi_checkpoint(out)
        if name not in FLOWER_EXPERIMENTS:
            raise ValueError(f"experiment '{name}' cannot run on the Flower engine (it runs "
                             f"algorithms other than PriRFed); --engine {args.engine} runs: "
                             f"{', '.join(FLOWER_EXPERIMENTS)}")
        if args.secure:
            raise ValueError(f"--secure cannot be used with --engine {args.engine} (the "
                             "federation replays the seeded noise to compare with one process)")
        if args.supernodes is None:
            args.supernodes = 2
        if isinstance(args.supernodes, bool) or args.supernodes < 1:
            raise ValueError(f"--supernodes must be an int >= 1, got {args.supernodes}")
    except ValueError as exc:
        _error(exc)
        return 2
    try:
        import flwr  # noqa: F401
    except ImportError:
        _error(f"--engine {args.engine} needs flwr: pip install 'rfed[flower]'"
               + (" 'rfed[flower-sim]'" if args.engine == "flower-sim" else ""))
        return 2
    from rfed.engines import use_engine
    from rfed.engines.flower_launch import LoopbackFederation
    from rfed.engines.flower_runs import FlowerEngine

    simulation = args.engine == "flower-sim"
    kind = ("Flower simulation engine" if simulation else
            "Flower SuperLink on loopback (TLS, SuperNode authentication)")
    print(f"engine: {kind} with {args.supernodes} SuperNode(s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="rfed-flower-") as workdir:
        try:
            federation = LoopbackFederation(args.supernodes, workdir=workdir,
                                            simulation=simulation, timeout=3600.0)
        except ImportError as exc:
            _error(exc)
            return 2
        try:
            federation.start()
            with use_engine(FlowerEngine(federation)):
                return _run_and_report(args, name, seed, overrides, out, mode)
        except (TimeoutError, RuntimeError) as exc:
            # the runs finished so far are checkpointed in the results folder
            _error(f"the Flower run failed: {exc}"
                   + (f"; continue with rfed run {name} --resume {out} --engine {args.engine}"
                      if out.is_dir() else ""))
            return 1
        finally:
            federation.stop()


def _check_mpi_run(name: str, args) -> None:
    """``--engine mpi``: refuse what it cannot do, in one line."""
    if name not in MPI_EXPERIMENTS:
        raise ValueError(f"experiment '{name}' cannot run on the MPI engine (it needs "
                         f"algorithms the MPI engine does not drive); --engine mpi runs: "
                         f"{', '.join(MPI_EXPERIMENTS)}")
    if args.secure:
        raise ValueError("--secure cannot be used with --engine mpi (the ranks must draw the "
                         "same public randomness, which secure mode's OS randomness is not)")


class _SigtermAsInterrupt:
    """While a run is in progress, SIGTERM (what a batch system's time limit sends) acts as
    Ctrl-C: a checkpointed algorithm run saves its checkpoint at the end of the round and
    stops (a second signal stops at once), anywhere else ``KeyboardInterrupt`` is raised; the
    run then ends with the "continue with: rfed run NAME --resume DIR" line and exit status
    143 (128 + SIGTERM)."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.received = True
        on_interrupt = signal.getsignal(signal.SIGINT)
        if callable(on_interrupt):   # the run's deferred Ctrl-C, or Python's default
            on_interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    def __enter__(self) -> _SigtermAsInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _run_and_report(args, name: str, seed: int, overrides: dict, out: Path, mode: str) -> int:
    import numpy as np

    from rfed.datasets.mnist import DatasetNotFoundError
    from rfed.experiments.registry import OutputDirError, run_experiment

    verb = "resuming" if mode == "resume" else "rfed run"
    header = f"{verb} {name} (seed {seed}) -> {out}"
    terminated = _SigtermAsInterrupt()
    try:
        with terminated:
            summary, ctx = run_experiment(name, seed=seed, overrides=overrides, out_dir=out,
                                          progress=not args.no_progress, mode=mode,
                                          checkpoint_every=args.checkpoint_every,
                                          checkpoint_seconds=args.checkpoint_seconds,
                                          secure=args.secure,
                                          on_start=lambda: print(header, flush=True))
    except OutputDirError as exc:
        _error(exc)
        return 2
    except DatasetNotFoundError as exc:
        # a required data set is not installed: its one-line how-to, nothing else
        _error(exc)
        return 2
    except (ArithmeticError, np.linalg.LinAlgError) as exc:
        # numerical failure outside an algorithm's rounds (those are marked diverged)
        saved = (out / "checkpoint.npz").is_file()
        _error(f"the run failed: {type(exc).__name__}: {exc}"
               + (f"; the rounds done are saved: continue with rfed run {name} --resume {out}"
                  if saved else ""))
        return 1
    except (ValueError, TypeError) as exc:
        # bad values reach the experiment's constructors, which name the argument
        _error(_name_setting(str(exc), overrides if mode != "resume" else {}))
        return 2
    except KeyboardInterrupt:
        print(f"\nrfed: {'terminated (SIGTERM)' if terminated.received else 'interrupted'}; "
              f"continue with: rfed run {name} --resume {out}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated.received else 130
    except OSError as exc:
        _error(f"cannot write the results to '{out}': {exc.strerror or exc}"
               + (f" ({exc.filename})" if exc.filename else ""))
        return 1
    _print_summary(name, summary, ctx)
    print(_randomness_line(seed, args.secure))
    return 0


def _randomness_line(seed: int, secure: bool) -> str:
    if secure:
        return ("randomness: secure mode (operating-system randomness, discrete Gaussian and "
                "Laplace noise on a grid); not replayable, by design")
    return (f"randomness: seeded (seed {seed}), for research: anyone with the seed can replay "
            "the noise; use --secure for a deployment")


def _run_help_for(argv: list[str]) -> str | None:
    """``rfed run NAME --help``: the experiment named, if any."""
    if len(argv) >= 2 and argv[0] == "run" and ("-h" in argv or "--help" in argv):
        names = [a for a in argv[1:] if not a.startswith("-")]
        return names[0] if names else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rfed`` console script; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        The command-line arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns
    -------
    int
        The exit status (0 on success).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader (e.g. `head`) left: stop quietly, without a second error at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "audit":
        from rfed.experiments.audits import audit_main

        return audit_main(argv[1:])
    parser = _parser()
    help_name = _run_help_for(argv)
    if help_name is not None:
        try:
            from rfed.experiments import get_experiment

            get_experiment(help_name)
        except ValueError as exc:
            _error(exc)
            return 2
        parser.run_parser.print_help()
        print()
        _print_show(help_name)
        return 0
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "list":
        _print_list()
        return 0
    if args.command == "show":
        try:
            _print_show(args.name)
        except ValueError as exc:
            _error(exc)
            return 2
        return 0
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
