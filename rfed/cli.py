"""The ``rfed`` command: list and run the registered experiments.

::

    rfed list
    rfed run [NAME] [--seed S] [--set key=value ...] [--out DIR] [--no-progress]

``rfed run`` without a name runs the default experiment, ``pca-synthetic``. Results are written
to ``DIR`` (default ``results/NAME``) as they arrive: ``history.jsonl`` grows line by line,
``privacy.json`` after each setting, then ``history.csv``, the tables (``.csv`` / ``.md``),
``summary.json`` and the PNG figures. Bad input (unknown experiment, malformed ``--set``) prints
one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from rfed.experiments.registry import format_table

DEFAULT_EXPERIMENT = "pca-synthetic"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rfed",
        description="Differentially private federated and decentralized optimization on "
        "Riemannian manifolds: run the papers' experiments.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("list", help="list the registered experiments")
    run = sub.add_parser("run", help="run an experiment")
    run.add_argument("name", nargs="?", default=DEFAULT_EXPERIMENT,
                     help=f"experiment name (default: {DEFAULT_EXPERIMENT}; see 'rfed list')")
    run.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a setting (repeatable), e.g. "
                     "--set rounds=100 --set 'epsilons=[0.1, 1.0]'")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default: results/NAME)")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return str(v)


def _print_list() -> None:
    from rfed.experiments import list_experiments

    exps = list_experiments()
    width = max(len(e.name) for e in exps)
    for e in exps:
        tag = " [slow]" if e.slow else ""
        default = " (default)" if e.name == DEFAULT_EXPERIMENT else ""
        print(f"{e.name:<{width}}  {e.paper}{default}{tag}")
        print(f"{'':<{width}}  {e.description}")
        print(f"{'':<{width}}  settings: "
              + ", ".join(f"{k}={v!r}" for k, v in e.defaults.items()))


def _print_summary(name: str, summary: dict, out: Path, privacy: dict) -> None:
    print(f"\n{name}: done in {summary.get('seconds', float('nan')):.1f} s; results in {out}")
    settings = summary.get("settings")
    if isinstance(settings, dict) and settings:
        cols = ("final_cost_mean", "final_excess_risk_mean", "final_excess_risk_std",
                "epsilon_paper", "delta_paper", "epsilon_certified", "delta", "diverged")
        heads = ("final cost", "excess risk", "+- std", "eps (Thm 4.2)", "delta (Thm 4.2)",
                 "eps (certified)", "delta (cert.)", "diverged runs")
        width = max(len(k) for k in settings)
        print(f"{'setting':<{width}}  " + "  ".join(f"{h:>15}" for h in heads))
        for label, row in settings.items():
            print(f"{label:<{width}}  " + "  ".join(f"{_fmt(row.get(c)):>15}" for c in cols))
    if "reference_cost" in summary:
        print(f"reference (true value) cost: {_fmt(summary['reference_cost'])}")
    shown = {"settings", "reference_cost", "accountant", "seconds"}
    for key, value in summary.items():
        if key in shown:
            continue
        if isinstance(value, (int, float, str)):
            print(f"{key}: {_fmt(value)}")
        elif isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            print(f"\n{key}:")
            print(format_table(value[:_MAX_ROWS]), end="")
            if len(value) > _MAX_ROWS:
                print(f"... {len(value) - _MAX_ROWS} more rows in the files")
    if "accountant" in summary:
        print(f"accountant: {summary['accountant']}")
    elif privacy:
        _print_privacy(privacy)


_MAX_ROWS = 12


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
    print(format_table(rows[:_MAX_ROWS]), end="")
    for text in accountants:
        print(f"accountant: {text}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rfed`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "list":
        _print_list()
        return 0
    from rfed.experiments.registry import get_experiment, parse_overrides, run_experiment

    try:
        exp = get_experiment(args.name)
        overrides = parse_overrides(args.overrides)
        exp.config(overrides)
    except ValueError as exc:
        print(f"rfed: error: {exc}", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else Path("results") / args.name
    print(f"rfed run {args.name} (seed {args.seed}) -> {out}")
    try:
        summary, ctx = run_experiment(args.name, seed=args.seed, overrides=overrides, out_dir=out,
                                    progress=not args.no_progress)
    except (ValueError, TypeError) as exc:
        # bad values reach the experiment's constructors, which name the argument
        print(f"rfed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nrfed: interrupted; partial history in {out / 'history.jsonl'}",
              file=sys.stderr)
        return 130
    _print_summary(args.name, summary, out, ctx.privacy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
