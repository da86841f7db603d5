"""A repetition that diverges is marked, kept out of the summary, counted in the table and
reported by the command line; the other repetitions are kept."""

import json

import numpy as np

from rfed.algorithms.base import Algorithm
from rfed.cli import main
from rfed.experiments import registry
from rfed.experiments.registry import summarise_repetitions, summary_row
from rfed.manifolds import Euclidean


class _Growth(Algorithm):
    """x <- factor * x; overflows to inf when factor is huge (a diverging run)."""

    name = "growth"

    def __init__(self, factor):
        self.factor = factor

    def init(self, problem, x0, rng):
        return {"x": np.array(x0, dtype=float)}

    def step(self, problem, state):
        with np.errstate(over="ignore"):
            return {"x": state["x"] * self.factor}

    def output(self, problem, state):
        return state["x"]

    def iterates(self, state):
        return state["x"]

    def metrics(self, problem, state, with_reference):
        return {"size": float(np.abs(state["x"]).max())}


class _Problem:
    manifold = Euclidean(2)


def _experiment(config, ctx):
    results = []
    for rep, factor in enumerate([0.5, 1e200, 0.25]):
        results.append(_Growth(factor).run(
            _Problem(), 6, rng=0, x0=np.ones(2), eval_every=1,
            callback=lambda t, rec, st, rep=rep: ctx.log(setting="demo", repetition=rep, **rec)))
    s = summarise_repetitions(results, metrics=("size",))
    ctx.summary_table([summary_row("demo", utility_name="final size", utility=s["size_mean"],
                                   utility_std=s["size_std"], repetitions=s["repetitions"],
                                   diverged=s["diverged"])])
    return {"kept": len(s["kept"])}


def test_diverged_repetition_is_marked_counted_and_reported(tmp_path, capsys, monkeypatch):
    exp = registry.Experiment("demo-divergence", "none", "A test. Diverges once.",
                              {"repetitions": 3}, _experiment)
    monkeypatch.setitem(registry._REGISTRY, exp.name, exp)
    assert main(["run", exp.name, "--out", str(tmp_path / "d"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 run(s) diverged" in out
    assert "setting demo, repetition 1: growth diverged in round 2" in out
    table = next(line for line in out.splitlines() if line.startswith("demo "))
    # kept: 0.5^6 and 0.25^6; the diverged one is excluded from the mean and counted
    assert f"{(0.5**6 + 0.25**6) / 2:.4g}" in table and table.rstrip().endswith("1/3")
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["summary"]["kept"] == 2
    [lost] = summary["diverged_runs"]
    assert lost["repetition"] == 1 and lost["diverged_round"] == 2
    records = [json.loads(x) for x in (tmp_path / "d" / "history.jsonl").read_text().split("\n")
               if x]
    marks = [r for r in records if "diverged" in r]
    assert len(marks) == 1 and marks[0]["repetition"] == 1 and "round 2" in marks[0]["diverged"]
    # the diverged run's history up to round 1 is kept, nothing after it
    assert [r["round"] for r in records if r.get("repetition") == 1 and "round" in r] == [0, 1]


class _OverflowingReport(_Growth):
    def privacy(self, state):
        raise OverflowError("math range error")


def _overflowing(config, ctx):
    _OverflowingReport(0.5).run(_Problem(), 4, rng=0, x0=np.ones(2),
                                callback=lambda t, rec, st: ctx.log(setting="s", **rec))
    return {}


def test_a_report_overflowing_after_the_rounds_keeps_them_and_says_how_to_resume(
        tmp_path, capsys, monkeypatch):
    exp = registry.Experiment("demo-overflow", "none", "A test.", {"rounds": 4}, _overflowing)
    monkeypatch.setitem(registry._REGISTRY, exp.name, exp)
    out = tmp_path / "o"
    assert main(["run", exp.name, "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "OverflowError: math range error" in err
    assert f"--resume {out}" in err
    assert (out / "checkpoint.npz").is_file() and len(
        (out / "history.jsonl").read_text().splitlines()) == 5
