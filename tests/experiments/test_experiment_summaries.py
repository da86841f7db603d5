"""Issue 12 in the experiments: one summary table, the divergence rule, overflow-safe
reporting, figures written, and the last silent cases refused."""

from __future__ import annotations

import json
import math
import re

import mpmath
import numpy as np
import pytest

from rfed.experiments.plotting import aggregate
from rfed.experiments.registry import SUMMARY_COLUMNS, format_summary_table, run_experiment
from rfed.privacy.papers import prirfed_privacy

# tiny settings: each experiment end to end in seconds
TINY = {
    "pca-synthetic": {"rounds": 4, "repetitions": 2, "eval_every": 2, "epsilons": [8.0]},
    "prirfed-fig1": {"rounds": 4, "repetitions": 1, "eval_every": 2, "columns": [1],
                     "paper_epsilons": [0.15]},
    "prirfed-fig2": {"rounds": 2, "repetitions": 1, "eval_every": 1, "agents": [10],
                     "local_steps": 1},
    "prirfed-fig3": {"n_samples": 200, "rounds": 2, "repetitions": 1, "eval_every": 1,
                     "agents": [10], "report_rounds": [1], "inner_steps": 2, "local_steps": 1},
    "prirfed-fig4": {"n_samples": 200, "rounds": 2, "repetitions": 1, "eval_every": 1,
                     "agents": [10], "report_rounds": [1], "inner_steps": 2, "local_steps": 1},
    "prirfed-fig5": {"rounds": 2, "repetitions": 1, "eval_every": 1, "inner_steps": 2,
                     "local_steps": 1},
    "doadp-digits": {"epochs": 1, "n_agents": 8, "epsilons": [1.0], "hidden": 4},
    "doadp-logreg": {"epochs": 1, "n_agents": 8, "n_per_agent": 10, "dim": 5,
                     "repetitions": 1, "eps_sweep": [1.0], "eval_every": 5},
    "dpdda-svm": {"epochs": 1, "n_agents": 4, "n_per_agent": 10, "dim": 5, "n_active": [2],
                  "eps_sweep": [1.0], "eval_every": 5},
    "dpdgt-ieee14": {"iterations": 20, "mc_runs": 2, "thetas": [0.0, 0.01], "eval_every": 5},
    "dpdl-digits": {"rounds": 2, "n_agents": 4, "eval_every": 1, "epsilons": [4.0],
                    "topologies": ["complete"], "hidden": 4},
}


# the four decentralized experiments below take 10-25 s even at these sizes (2 shared cores):
# run with -m slow
_SLOW = {"doadp-digits", "doadp-logreg", "dpdda-svm", "dpdl-digits"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
                                  for n in sorted(TINY)])
def test_experiment_end_to_end_summary_table_and_figures(name, tmp_path):
    out = tmp_path / name
    summary, ctx = run_experiment(name, overrides=TINY[name], seed=0, out_dir=out, mode="new")
    rows = ctx.summary_rows
    assert rows, "the experiment must record its summary table"
    # every setting that logged records (sweeps to the side) has a row
    logged = {rec["setting"] for rec in ctx.records if "setting" in rec
              and not rec.get("sweep") and rec.get("kind") != "sweep"}
    shown = {r["setting"] for r in rows}
    missing = {s for s in logged if not any(row == s or row.endswith(": " + s) for row in shown)}
    assert not missing
    for r in rows:
        assert set(SUMMARY_COLUMNS) <= set(r)
        assert r["utility_name"]
        target = re.search(r"certified eps=([0-9.e+-]+) ", r["setting"])
        if target:
            # budget-first: the certified epsilon never exceeds the label
            eps = float(target.group(1))
            assert r["epsilon"] is not None and r["delta"] is not None and r["accountant"]
            assert 0 <= r["epsilon"] <= eps * (1 + 5e-3)   # labels round to 3 digits
        if "non-private" in r["setting"]:
            assert r["epsilon"] is None
        assert r["diverged"] <= (r["repetitions"] or 0)
    text = format_summary_table(rows)
    assert "eps (certified)" in text and "delta" in text and "Thm 4.2" not in text
    assert all(r["setting"] in text for r in rows)
    assert (out / "summary_table.csv").exists()
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.stat().st_size > 5_000 for p in pngs)
    json.loads((out / "summary.json").read_text())   # strict JSON


def test_prirfed_privacy_in_log_space_matches_mpmath():
    # agents-per-round x epsilon = 800 > 709: math.expm1 would overflow
    n, s, eps, t = 200, 100, 8.0, 10
    mpmath.mp.dps = 50
    rho = mpmath.mpf(s) / n
    exact = mpmath.log(1 + rho * mpmath.expm1(s * eps))
    res = prirfed_privacy(n, s, eps, 1e-6, t, 1e-3)
    assert res.eps_tilde == pytest.approx(float(exact), rel=1e-12)
    assert res.eps_advanced == math.inf and res.branch == "sequential"
    assert res.epsilon == pytest.approx(t * float(exact), rel=1e-12)
    # below the overflow point the value is unchanged (PriRFed Table 1, N=100, s=5, T=50)
    assert prirfed_privacy(100, 5, 0.15, 1e-4, 50, 1e-3).epsilon == pytest.approx(1.58, abs=5e-3)


def test_100_agents_full_participation_eps8_finishes_and_writes(tmp_path):
    out = tmp_path / "run"
    summary, ctx = run_experiment(
        "prirfed-fig1", seed=0, out_dir=out, mode="new",
        overrides={"n_agents": 100, "paper_epsilons": [8.0], "epsilons": [1.0], "rounds": 2,
                   "repetitions": 1, "eval_every": 1, "columns": [1]})
    paper_rows = [r for r in ctx.summary_rows if r["epsilon_paper"] is not None]
    assert paper_rows and all(r["epsilon_paper"] >= 100 * 8.0 for r in paper_rows)
    assert (out / "history.jsonl").stat().st_size > 0
    assert (out / "summary_table.csv").exists() and list(out.glob("*.png"))


def test_aggregate_excludes_and_counts_diverged_repetitions():
    recs = [{"setting": "a", "repetition": r, "round": t, "cost": float(r + t)}
            for r in range(3) for t in range(3)]
    recs.append({"setting": "a", "repetition": 1, "diverged": True, "diverged_round": 2})
    curves = aggregate(recs, "round", "cost", "setting")
    assert curves["a"]["diverged"] == 1
    np.testing.assert_allclose(curves["a"]["mean"], [1.0, 2.0, 3.0])   # reps 0 and 2 only


def test_silent_cases_refused():
    from rfed.algorithms.decentralized import DOADP
    from rfed.algorithms.federated.aggregation import data_size_weights, tangent_mean
    from rfed.manifolds import Sphere
    from rfed.networks.graphs import complete
    from rfed.networks.network import Network

    man = Sphere(2)
    pts = np.eye(3)[:2]
    with pytest.raises(ValueError, match="'weights'"):
        tangent_mean(man, np.eye(3)[0], pts, np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="'weights'"):
        tangent_mean(man, np.eye(3)[0], pts, np.array([0.7, 0.7]))
    with pytest.raises(ValueError, match="'counts'"):
        data_size_weights(np.array([np.nan, 3.0]))
    with pytest.raises(ValueError, match="'alpha'"):
        DOADP(Network(complete(4)), alpha=0.0, beta=0.1, gamma=0.05)


def test_dpdl_batch_size_error_names_the_setting(tmp_path):
    with pytest.raises(ValueError, match="setting 'batch_size'") as err:
        run_experiment("dpdl-digits", seed=0, overrides={"batch_size": 100, "rounds": 1})
    assert "min_size" not in str(err.value)
