"""dpdda-svm's reference optimum: its certified duality gap is recorded, checked against the
run's smallest excess risk by a stated rule, and a gap too large is flagged on the console."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rfed.problems.linear as linear
from rfed.cli import main
from rfed.experiments.dpdda import _REFERENCE_GAP_FRACTION, _reference_gap_check

_TINY = ["--set", "n_per_agent=10", "--set", "dim=5", "--set", "epochs=1", "--set",
         "eps_sweep=[1.0]", "--set", "eval_every=40", "--set", "n_active=[4]", "--set",
         "baseline=false"]


def test_the_rule_holds_fails_and_says_so():
    assert _REFERENCE_GAP_FRACTION == 0.01
    ok = _reference_gap_check(1e-6, [0.5, 2e-3, float("nan")])
    assert ok["holds"] and ok["smallest_excess_risk"] == 2e-3
    assert ok["allowed_gap"] == pytest.approx(2e-5) and ok["line"].startswith("holds")
    bad = _reference_gap_check(1e-4, [0.5, 2e-3])
    assert not bad["holds"] and bad["line"].startswith("FAILS")
    # a reported excess risk at or below 0 is not resolved by any positive gap
    assert not _reference_gap_check(1e-12, [0.3, -1e-13])["holds"]
    assert _reference_gap_check(0.0, [0.3, 0.0])["holds"]
    unset = _reference_gap_check(None, [0.3])
    assert not unset["holds"] and unset["line"].startswith("NOT CHECKED")
    assert not _reference_gap_check(0.0, [float("nan")])["holds"]


@pytest.mark.parametrize("scalable", [pytest.param(False, marks=pytest.mark.slow), True])
def test_a_run_records_the_gap_and_prints_the_verdict(tmp_path, capsys, monkeypatch, scalable):
    if scalable:   # the paper scale's solvers, on the tiny run's 40 rows
        monkeypatch.setattr(linear, "SCALABLE_REFERENCE_SAMPLES", 10)
    out_dir = tmp_path / "run"
    assert main(["run", "dpdda-svm", *_TINY, "--out", str(out_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    summary = json.loads((out_dir / "summary.json").read_text())["summary"]
    solvers = {"l2": "l2_svm_dual_cd" if scalable else "l2_svm_reference",
               "l1": "l1_svm_working_set" if scalable else "l1_svm_reference"}
    for reg, solver in solvers.items():
        part = summary[reg]
        assert part["f_star_solver"] == solver
        assert 0.0 <= part["f_star_certified_gap"] <= 1e-9 * max(1.0, part["f_star"])
        check = part["f_star_check"]
        reported = [json.loads(line)["excess_risk"] for line in
                    (out_dir / "history.jsonl").read_text().splitlines()
                    if json.loads(line).get("reg") == reg
                    and "excess_risk" in json.loads(line)]
        assert check["smallest_excess_risk"] <= min(reported)
        assert check["holds"] is True
        assert f"reference_optimum_{reg}: {reg}-SVM F* = " in out
        assert f"by {solver}, holds: certified gap" in out


def test_a_gap_too_large_is_flagged_on_the_console(tmp_path, capsys, monkeypatch):
    # a reference solver whose certificate is loose (gap 0.5, as a broken or truncated solve
    # would give): the run keeps its results and the console says FAILS for both SVMs
    def loose(c_rows, weight):
        return np.zeros(c_rows.shape[1]), 0.5

    monkeypatch.setattr(linear, "l1_svm_reference", loose)
    monkeypatch.setattr(linear, "l2_svm_reference", loose)
    out_dir = tmp_path / "run"
    assert main(["run", "dpdda-svm", *_TINY, "--out", str(out_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    summary = json.loads((out_dir / "summary.json").read_text())["summary"]
    for reg in ("l2", "l1"):
        assert summary[reg]["f_star_check"]["holds"] is False
        assert f"reference_optimum_{reg}: {reg}-SVM F* = " in out
    assert out.count(", FAILS: certified gap 0.5 above the rule's bound") == 2
