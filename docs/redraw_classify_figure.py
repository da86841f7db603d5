"""Redraw utility-fmnist-classify's privacy_utility.png of a finished run from its own files
(privacy_utility.csv, references.csv, privacy.json, config.json) with the current plotting code.

Usage: ``python docs/redraw_classify_figure.py RUN_DIR`` (writes RUN_DIR/privacy_utility.png).
Used where a run finished before a change of the figure only (its numbers are the run's own)."""
import csv
import json
import sys
from pathlib import Path

from rfed.experiments import utility_decentralized as ud
from rfed.experiments.plotting import finish_figure
from rfed.experiments.registry import get_experiment

run = Path(sys.argv[1])
cfg = json.loads((run / "config.json").read_text())
cfg = cfg.get("config", cfg)
privacy = json.loads((run / "privacy.json").read_text())


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


rows = [{k: num(v) if k not in ("panel", "partition", "algorithm", "relation") else v
         for k, v in r.items()} for r in csv.DictReader(open(run / "privacy_utility.csv"))]
refs_rows = list(csv.DictReader(open(run / "references.csv")))
exp = get_experiment("utility-fmnist-classify")


class Shim:
    def save_figure(self, fig, name):
        finish_figure(fig, title=f"{exp.short}: {name.replace('_', ' ')}", privacy=privacy,
                      stand_in=False)
        fig.savefig(run / f"{name}.png", dpi=120, bbox_inches="tight")


n = int(cfg["n_agents"])
private = [dict(r, algorithm=f"{r['algorithm']} ({ud._RELATIONS[r['relation']]})")
           for r in rows if r.get("epsilon_certified") not in ("", None)]
refs = {}
for r in refs_rows:
    refs.setdefault(r["partition"], {})[f"non-private L-BFGS, dim {r['dim']}"] = float(
        r["nonprivate_optimum_test_accuracy"])
    refs[r["partition"]]["zero start (chance)"] = float(r["zero_start_test_accuracy"])
delta = float(refs_rows[0]["delta"])
feats = f"scattering J={cfg['scatter_J']} + GroupNorm({cfg['groups']})"
ud._privacy_utility_plot(
    Shim(), private, list(cfg["partitions"]), "accuracy", "test accuracy (%)",
    f"Fashion-MNIST softmax regression on {feats}, {n} agents, delta={delta:g}",
    "privacy_utility", {kind: {lab: v for lab, v in r.items()
                               if "non-private" in lab or "zero" in lab}
                        for kind, r in refs.items()},
    relation=lambda r: ud._RELATIONS[r["relation"]])
print("redrawn", run / "privacy_utility.png")
