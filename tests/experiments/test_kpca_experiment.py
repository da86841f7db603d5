"""The prirfed-kpca experiment: files, privacy per setting, convergence of the non-private run."""

import json

import pytest

from rfed.experiments import get_experiment, run_experiment


def test_registered_with_k5_and_synthetic_data():
    exp = get_experiment("prirfed-kpca")
    assert exp.defaults["k"] == 5 and exp.defaults["data"] == "synthetic"


def test_runs_private_and_non_private(tmp_path):
    summary, _ = run_experiment(
        "prirfed-kpca", seed=0, out_dir=tmp_path,
        overrides={"rounds": 60, "repetitions": 1, "epsilons": "[2, 16]", "eval_every": 20,
                   "n_agents": 6, "n_per_agent": 30, "dim": 12, "clip": "bound"},
    )
    for name in ("history.jsonl", "privacy.json", "final.csv", "summary.json", "kpca.png"):
        assert (tmp_path / name).is_file(), name
    privacy = json.loads((tmp_path / "privacy.json").read_text())
    labels = ["DP-RSGD planned eps<=2", "DP-RSGD planned eps<=16"]
    assert set(privacy) == {*labels, "DP-RSGD non-private"}
    settings = summary["settings"]
    for label, target in zip(labels, (2.0, 16.0), strict=True):
        # the finished run certifies its budget, and the noise is not wasted
        assert 0.9 * target <= settings[label]["epsilon_certified"] <= target
    # the closed-form optimum is the reference; the non-private run gets close to it
    assert summary["optimal_cost"] == pytest.approx(summary["reference_cost"], rel=1e-12)
    assert settings["DP-RSGD non-private"]["final_excess_risk_mean"] < 1e-3
    assert summary["clip_level"] == 1.0  # B^2 from the recipe's public bound B = 1


def test_bad_data_option(tmp_path):
    with pytest.raises(ValueError, match="setting 'data'"):
        run_experiment("prirfed-kpca", seed=0, out_dir=tmp_path,
                       overrides={"data": "fashion-mnist", "rounds": 1})


@pytest.mark.slow
def test_default_private_run_ends_better_than_its_start():
    """At the quick default size and the public 'median' clip, a certified eps-8 run learns
    (with clip B^2 = 1 at 70 samples per agent it ended worse than its random start)."""
    summary, ctx = run_experiment("prirfed-kpca", seed=0,
                                  overrides={"repetitions": 1, "epsilons": [8.0],
                                             "non_private": False, "rounds": 100,
                                             "eval_every": 20})
    assert summary["clip_rule"] == "median" and 0 < summary["clip_level"] < 1.0
    (row,) = ctx.summary_rows
    assert row["epsilon"] <= 8.0
    assert row["utility"] < 0.5 * row["start"]


def test_clip_setting_refuses_bad_values(tmp_path):
    with pytest.raises(ValueError, match="setting 'clip'"):
        run_experiment("prirfed-kpca", seed=0, out_dir=tmp_path, overrides={"clip": "tight"})
