"""The prirfed-kpca experiment: files, privacy per setting, convergence of the non-private run."""

import json

import numpy as np
import pytest

from rfed.experiments import get_experiment, run_experiment


def test_registered_with_k5_and_synthetic_data():
    exp = get_experiment("prirfed-kpca")
    assert exp.defaults["k"] == 5 and exp.defaults["data"] == "synthetic"


def test_runs_private_and_non_private(tmp_path):
    summary, _ = run_experiment(
        "prirfed-kpca", seed=0, out_dir=tmp_path,
        overrides={"rounds": 60, "repetitions": 1, "sigmas": "[0.05, 0.2]", "eval_every": 20,
                   "n_agents": 6, "n_per_agent": 30, "dim": 12},
    )
    for name in ("history.jsonl", "privacy.json", "final.csv", "summary.json", "kpca.png"):
        assert (tmp_path / name).is_file(), name
    privacy = json.loads((tmp_path / "privacy.json").read_text())
    assert set(privacy) == {"sigma=0.05", "sigma=0.2", "non-private"}
    settings = summary["settings"]
    eps_lo, eps_hi = (settings[k]["epsilon_certified"] for k in ("sigma=0.2", "sigma=0.05"))
    assert 0 < eps_lo < eps_hi < np.inf  # more noise, less privacy spent
    # the closed-form optimum is the reference; the non-private run gets close to it
    assert summary["optimal_cost"] == pytest.approx(summary["reference_cost"], rel=1e-12)
    assert settings["non-private"]["final_excess_risk_mean"] < 1e-3
    assert summary["clip_level"] == 1.0  # B^2 from the recipe's public bound B = 1


def test_bad_data_option(tmp_path):
    with pytest.raises(ValueError, match="setting 'data'"):
        run_experiment("prirfed-kpca", seed=0, out_dir=tmp_path,
                       overrides={"data": "fashion-mnist", "rounds": 1})
