"""utility-hyperbolic (rfed.experiments.utility_hyperbolic): WordNet hyperbolic prediction sweep."""

import csv
from pathlib import Path

import numpy as np
import pytest

from rfed.experiments.registry import RunContext, get_experiment, run_experiment
from rfed.experiments.utility_hyperbolic import hyperbolic_problems


def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _config(**overrides) -> dict:
    return {**get_experiment("utility-hyperbolic").defaults, **overrides}


def test_public_split_is_disjoint_from_the_private_words(tmp_path):
    ctx = RunContext(seed=0, out_dir=tmp_path)
    problem, public, data = hyperbolic_problems(_config(n_agents=4, per_agent=50), ctx)
    assert problem.data["y"].shape == public.data["y"].shape == (4, 50, 3)
    priv = {tuple(np.round(p, 9)) for p in problem.data["y"].reshape(-1, 3)}
    pub = {tuple(np.round(p, 9)) for p in public.data["y"].reshape(-1, 3)}
    assert len(priv) == 200                       # 200 distinct private words
    assert not priv & pub                          # never trained on privately
    assert data["n_public"] == round(0.2 * 1181)
    # per-record kernel weights in (0, 1]: record-level sensitivity, public gradient bound M
    a = problem.data["alpha"]
    assert np.all((a > 0) & (a <= 1)) and not problem.coupled_records


def test_bad_settings_name_the_setting(tmp_path):
    ctx = RunContext(seed=0, out_dir=tmp_path)
    with pytest.raises(ValueError, match="public_fraction"):
        hyperbolic_problems(_config(public_fraction=1.5), ctx)
    with pytest.raises(ValueError, match="per_agent"):
        hyperbolic_problems(_config(n_agents=8, per_agent=500), ctx)


def test_tiny_sweep_writes_tables_and_learns_at_eps_8(tmp_path):
    out = tmp_path / "hyp"
    targets = [0.5, 8.0]
    summary, _ = run_experiment(
        "utility-hyperbolic", seed=0, out_dir=out,
        overrides={"n_agents": 4, "per_agent": 100, "epsilons": targets, "repetitions": 3,
                   "tune_repetitions": 1, "rsgd_rounds": [10], "rsgd_steps": [0.15],
                   "clips": [8.0]})
    assert (out / "privacy_utility.png").stat().st_size > 10_000
    rows = _read_csv(out / "utility.csv")
    assert [r["method"] for r in rows[:2]] == ["random start", "non-private optimum"]
    got = {float(r["target_epsilon"]): r for r in rows[2:]}
    assert set(got) == set(targets)
    for target, r in got.items():
        assert 0.9 * target <= float(r["epsilon_certified"]) <= target * (1 + 1e-9)
        assert float(r["delta"]) == 1e-5          # min(1e-5, 1 / (10 * 100))
    # the non-private optimum is a minimum: no private run is below it
    f_star = float(rows[1]["cost_mean"])
    assert all(float(r["cost_mean"]) >= f_star - 1e-9 for r in rows[2:])
    # every private curve improves on its random start at eps 8 (measured 0.9 at this size)
    assert summary["gap_closed"]["PriRFed DP-RSGD"]["8"] > 0.5
    assert summary["n_private_words"] == 400


@pytest.mark.slow
def test_full_size(tmp_path):
    summary, _ = run_experiment("utility-hyperbolic", seed=0, out_dir=tmp_path / "hyp")
    assert summary["gap_closed"]["PriRFed DP-RSGD"]["8"] > 0.5
    assert all(summary["monotone_within_bands"].values())
