"""The PriRFed experiments and the generic plotting helper."""

import json

import numpy as np
import pytest

from rfed.experiments import get_experiment, list_experiments, run_experiment
from rfed.experiments.plotting import aggregate, plot_curves


def test_aggregate_mean_and_bands_over_repetitions():
    rng = np.random.default_rng(0)
    vals = rng.standard_normal((3, 4))  # repetitions x rounds
    recs = [{"setting": s, "repetition": r, "round": t, "cost": vals[r, t] + (s == "b")}
            for s in ("a", "b") for r in range(3) for t in range(4)]
    recs.append({"setting": "a", "round": 9, "cost": float("nan")})  # skipped
    out = aggregate(recs, "round", "cost", "setting")
    assert list(out) == ["a", "b"]
    np.testing.assert_allclose(out["a"]["mean"], vals.mean(0))
    np.testing.assert_allclose(out["b"]["hi"] - out["b"]["mean"], vals.std(0))
    mm = aggregate(recs, "round", "cost", "setting", band="minmax")
    np.testing.assert_allclose(mm["a"]["lo"], vals.min(0))
    assert np.array_equal(out["a"]["count"], [3, 3, 3, 3])
    with pytest.raises(ValueError, match="band"):
        aggregate(recs, "round", "cost", band="iqr")


def test_plot_curves_draws_one_line_per_setting_and_panel():
    recs = [{"setting": s, "round": t, "cost": -t, "grad_norm": 1.0 / (t + 1)}
            for s in ("x", "y", "z") for t in range(5)]
    fig = plot_curves(recs, "round", ["cost", "grad_norm"], by="setting", logy=[False, True],
                      hlines=[{"true value": -4.0}, None], start_line=False)
    ax0, ax1 = fig.axes[:2]
    assert len(ax0.get_lines()) == 4 and len(ax1.get_lines()) == 3
    assert ax1.get_yscale() == "log"
    np.testing.assert_allclose(ax0.get_lines()[0].get_ydata(), -np.arange(5))


def test_plot_curves_names_a_curve_whose_every_repetition_diverged():
    recs = [{"setting": "kept", "repetition": r, "round": t, "cost": 1.0 + t}
            for r in range(2) for t in range(3)]
    recs += [{"setting": "gone", "repetition": r, "round": 0, "cost": 5.0} for r in range(2)]
    recs += [{"setting": "gone", "repetition": r, "diverged": True} for r in range(2)]
    fig = plot_curves(recs, "round", "cost", by="setting", start_line=False)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "gone: all 2 repetition(s) diverged, not drawn" in labels
    assert [line.get_label() for line in fig.axes[0].get_lines() if line.get_xdata().size] \
        == ["kept"]


def test_registry_lists_the_paper_figures():
    names = {e.name for e in list_experiments()}
    assert {"pca-synthetic", "prirfed-fig1", "prirfed-fig2", "prirfed-fig3", "prirfed-fig4",
            "prirfed-fig5"} <= names
    for name in ("prirfed-fig2", "prirfed-fig4", "prirfed-fig5"):
        assert "STAND-IN" in get_experiment(name).description


def test_pca_synthetic_writes_history_privacy_table_and_plot(tmp_path):
    summary, ctx = run_experiment(
        "pca-synthetic", seed=1, out_dir=tmp_path,
        overrides={"rounds": 20, "repetitions": 2, "epsilons": "[0.3, 30.0]", "eval_every": 10},
    )
    for name in ("history.jsonl", "history.csv", "privacy.json", "final.csv", "final.md",
                 "summary.json", "pca_synthetic.png", "config.json"):
        assert (tmp_path / name).is_file(), name
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 2 * 3  # settings x repetitions x evaluated rounds (0, 10, 20)
    privacy = json.loads((tmp_path / "privacy.json").read_text())
    # budget-first labels name the planned whole-run budget (the certified epsilon is the
    # summary's column); the non-private reference names its algorithm
    lo = "DP-RSGD planned eps<=0.3, clip=median"
    hi = "DP-RSGD planned eps<=30, clip=median"
    assert set(privacy) == {lo, hi, "DP-RSGD non-private"}
    s = summary["settings"]
    for label, target in ((lo, 0.3), (hi, 30.0)):
        assert 0.9 * target <= s[label]["epsilon_certified"] <= target
        assert privacy[label]["target_epsilon"] == target and privacy[label]["paper"] is None
    assert s["DP-RSGD non-private"]["final_excess_risk_mean"] >= -1e-12
    assert np.isclose(summary["reference_cost"], -summary["lambda_max"])
    # the clip level is the median |z|^2 of a PUBLIC stand-in (same recipe, own seed), not of
    # the private records (issue 8 defect 2)
    from rfed.datasets.synthetic import make_pca_synthetic
    from rfed.experiments.registry import RunContext

    public = make_pca_synthetic(16, 70, 25, 1e-3, RunContext(seed=1).rng(7_777, 70))
    assert np.isclose(summary["clip_level"], np.median(np.sum(public**2, axis=-1)))
    z = make_pca_synthetic(16, 70, 25, 1e-3, RunContext(seed=1).rng(0))
    assert not np.isclose(summary["clip_level"], np.median(np.sum(z**2, axis=-1)))
    c = np.linalg.eigvalsh(np.einsum("anj,ank->jk", z, z) / z[..., 0].size)
    assert np.isclose(summary["random_start_excess_risk"], c[-1] - c.mean())


def test_spd_experiment_reports_early_rounds(tmp_path):
    summary, ctx = run_experiment(
        "prirfed-fig3", seed=0, out_dir=tmp_path,
        overrides={"n_samples": 400, "agents": "[4]", "rounds": 10, "repetitions": 2,
                   "eval_every": 5, "report_rounds": "[5]"},
    )
    labels = [s for s in summary["settings"] if not s.endswith("non-private")]
    # per method: a budget-first setting and the paper's calibration (and a non-private
    # reference of each, left out here)
    assert len(labels) == 4 and len(summary["settings"]) == 6
    for label in labels:
        assert label.startswith(("N=4 DP-RSGD ", "N=4 DP-RSVRG "))
        row = summary["settings"][label]
        if "paper's calibration (local eps=0.15)" in label:
            assert row["epsilon_paper"] is not None and row["target_epsilon"] is None
        else:
            assert row["target_epsilon"] == 1.0 and row["epsilon_certified"] <= 1.0
        at5 = [r["excess_risk"] for r in ctx.records
               if r.get("setting") == label and r.get("round") == 5]
        if row["diverged"]:  # DP-RSVRG at a certified eps = 1: sigma ~ 220 leaves SPD's range
            continue
        assert len(at5) == 2
        assert np.isclose(summary["settings"][label]["excess_risk_at_5_mean"], np.mean(at5))


def test_hyperbolic_experiment_small(tmp_path):
    summary, ctx = run_experiment(
        "prirfed-fig5", seed=0, out_dir=tmp_path,
        overrides={"rounds": 6, "repetitions": 1, "eval_every": 3},
    )
    assert (tmp_path / "fig6_poincare.png").is_file() and (tmp_path / "fig5.png").is_file()
    # (runs that left the Lorentz model's floating-point range log a 'diverged' record instead)
    assert all("dist_to_primate" in r for r in ctx.records if "diverged" not in r)
    assert any("dist_to_primate" in r for r in ctx.records)
    # the pooled optimum lands far nearer "primate" than a typical word of the embedding does
    from rfed.datasets.wordnet import wordnet_prediction_data
    from rfed.manifolds import Hyperboloid

    data = wordnet_prediction_data()
    typical = np.median(Hyperboloid(2).dist(data["targets"], data["test_target"]))
    assert summary["dist_reference_to_primate"] < 0.35 * typical


def test_fig5_budget_first_dp_rsvrg_is_the_labelled_released_snapshot_variant():
    summary, ctx = run_experiment(
        "prirfed-fig5", seed=0,
        overrides={"rounds": 2, "repetitions": 1, "eval_every": 1, "epsilons": [8.0],
                   "paper_epsilons": [0.15]},
    )
    labels = list(ctx.privacy)
    released = [s for s in labels if "released snapshot (not the paper's)" in s]
    assert len(released) == 1 and "planned eps<=8" in released[0]
    report = ctx.privacy[released[0]]
    assert report["certified"]["snapshot_releases_per_round"] == 3  # K = 3 outer loops
    assert any("released snapshot" in a for a in report["assumptions"])
    assert 0.9 * 8.0 <= report["epsilon_certified"] <= 8.0
    # the paper's calibration keeps the paper's Alg. 3 (no snapshot release)
    paper = [s for s in labels if s.startswith("PriRFed-DP-RSVRG paper's calibration")]
    assert len(paper) == 1 and "local eps=0.15" in paper[0]
    assert ctx.privacy[paper[0]]["certified"]["snapshot_releases_per_round"] == 0
    with pytest.raises(ValueError, match="rsvrg_variant"):
        run_experiment("prirfed-fig5", overrides={"rsvrg_variant": "fast", "rounds": 1})


def test_poincare_figure_survives_a_run_beyond_the_log_maps_range():
    """A run whose final point has x_0 ~ 1e181 (seen at prirfed-fig5's paper scale) makes the
    Frechet mean's log maps overflow; the figure then marks the disk median, labelled so,
    instead of failing the whole run after its rounds."""
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from rfed.experiments.prirfed import _poincare_figure
    from rfed.manifolds import Hyperboloid

    man = Hyperboloid(2)

    def point(r, angle):  # (cosh r, sinh r u): geodesic distance r from the origin
        return np.array([np.cosh(r), np.sinh(r) * np.cos(angle), np.sinh(r) * np.sin(angle)])

    origin = point(0.0, 0.0)
    problem = SimpleNamespace(manifold=man, reference_point=lambda: point(0.5, 0.3))
    data = {"targets": np.stack([point(0.4 * k, k) for k in range(5)])}
    run = lambda x, diverged=False: SimpleNamespace(x=x, diverged=diverged)  # noqa: E731
    far = np.stack([point(418.0, 1.0), point(418.0, 2.0)])
    assert np.isfinite(far).all() and far[:, 0].min() > 1e180
    with pytest.raises(FloatingPointError):
        man.mean(far)
    results = {"near": [run(point(0.2, 0.1)), run(point(0.3, 0.2))],
               "far": [run(far[0]), run(far[1])],
               "gone": [run(origin, diverged=True)]}
    fig = _poincare_figure(problem, data, point(0.1, 0.0), results)
    labels = [h.get_label() for h in fig.axes[0].collections]
    assert any(lab.startswith("near: mean of 2/2") for lab in labels)
    assert any(lab.startswith("far: disk median of 2/2") for lab in labels)
    assert "gone (1/1 diverged)" in fig._suptitle.get_text()
    plt.close(fig)


def _fig5_seeing_steps(out_dir, overrides):
    """prirfed-fig5 run with ``overrides`` into ``out_dir``: (summary, context, every setting's
    (label, group, step size) as handed to ``run_settings``)."""
    import rfed.experiments.prirfed as prirfed_experiments

    seen = []
    original = prirfed_experiments.run_settings

    def spy(ctx, settings, **kwargs):
        seen.extend((st.label, st.group, st.algorithm.step_size) for st in settings)
        return original(ctx, settings, **kwargs)

    prirfed_experiments.run_settings = spy
    try:
        summary, ctx = run_experiment("prirfed-fig5", seed=0, out_dir=out_dir,
                                      overrides=overrides)
    finally:
        prirfed_experiments.run_settings = original
    return summary, ctx, seen


def test_fig5_rsvrg_runs_at_its_own_step_chosen_on_public_words(tmp_path):
    """RSVRG (its non-private reference and the budget-first DP-RSVRG) runs at the step of
    'rsvrg_step_sizes' with the lowest mean public excess risk (the 'tuning' table); the
    paper's step stays for the labelled paper's-step settings, whose reference is RSVRG at that
    step."""
    import csv

    summary, ctx, seen = _fig5_seeing_steps(
        tmp_path, {"rounds": 3, "repetitions": 1, "eval_every": 3, "inner_steps": 2,
                   "local_steps": 2, "epsilons": [1.0, 8.0], "tune_repetitions": 2,
                   "rsvrg_step_sizes": [0.3, 0.01, 0.001]})
    with open(tmp_path / "tuning.csv") as fh:
        tuning = list(csv.DictReader(fh))
    assert [float(r["rsvrg_step_size"]) for r in tuning] == [0.3, 0.01, 0.001]
    assert {float(r["planned_epsilon"]) for r in tuning} == {8.0}
    scores = [float(r["public_mean_final_excess_risk"]) for r in tuning]
    chosen = [float(r["rsvrg_step_size"]) for r in tuning if r["chosen"] == "True"]
    assert chosen == [float(tuning[int(np.argmin(scores))]["rsvrg_step_size"])]
    assert summary["rsvrg_step_size"] == chosen[0]
    assert summary["rsvrg_step_at_grid_edge"] == (chosen[0] in (0.3, 0.001))
    steps = {label: (group, step) for label, group, step in seen}
    assert steps["PriRFed-RSVRG non-private"] == ("", chosen[0])
    assert steps["PriRFed-RSGD non-private"] == ("", 0.3)
    budget = [lab for lab in steps if "released snapshot" in lab]
    assert len(budget) == 2 and all(steps[lab] == ("", chosen[0]) for lab in budget)
    paper = [lab for lab in steps if lab.startswith("PriRFed-DP-RSVRG paper's calibration")]
    assert [steps[lab] for lab in paper] == [("paper's step 0.3", 0.3)]
    assert steps["PriRFed-RSVRG non-private, paper's step 0.3"] == ("paper's step 0.3", 0.3)
    # each private RSVRG row's reference is the non-private RSVRG at its own step
    rows = {r["setting"]: r for r in ctx.summary_rows}
    for lab in budget:
        assert rows[lab]["reference"] == rows["PriRFed-RSVRG non-private"]["utility"]
    ref = rows["PriRFed-RSVRG non-private, paper's step 0.3"]["utility"]
    got = rows[paper[0]]["reference"]
    assert got == ref or (np.isnan(got) and np.isnan(ref))
    # the paper's claim of Fig. 5, counted at each planned epsilon from the rows
    claim = {e["planned_epsilon"]: e for e in summary["rsvrg_vs_rsgd"]}
    assert sorted(claim) == [1.0, 8.0]
    for eps, e in claim.items():
        rsgd = rows[f"PriRFed-DP-RSGD planned eps<={eps:g}"]["utility"]
        rsvrg = rows[[lab for lab in budget if f"eps<={eps:g}" in lab][0]]["utility"]
        assert e["rsvrg_below_rsgd"] == bool(np.isfinite(rsvrg) and not rsvrg >= rsgd)
    held = sum(e["rsvrg_below_rsgd"] for e in claim.values())
    assert summary["rsvrg_vs_rsgd_claim"].startswith(
        f"the paper's claim (DP-RSVRG ends below DP-RSGD) holds at {held} of 2 ")
    # one step given: that step, no tuning
    summary, ctx = run_experiment(
        "prirfed-fig5", seed=0,
        overrides={"rounds": 1, "repetitions": 1, "eval_every": 1, "inner_steps": 2,
                   "local_steps": 2, "epsilons": [8.0], "rsvrg_step_sizes": [0.02]})
    assert summary["rsvrg_step_size"] == 0.02 and summary["rsvrg_step_chosen_on"] == "given"


def test_fig5_dp_rsgd_runs_at_a_step_chosen_per_planned_epsilon_on_public_words(tmp_path):
    """Each budget-first DP-RSGD runs at the step of 'rsgd_step_sizes' whose budget-first
    DP-RSGD at that planned epsilon ends lowest on public words (the 'tuning_rsgd' table, one
    search per epsilon); where that step is not the paper's, the paper's step runs too,
    labelled, with the non-private RSGD (at the paper's step) as its reference; the paper's
    calibration keeps the paper's step."""
    import csv

    grid = [0.3, 0.03, 0.003]
    summary, ctx, seen = _fig5_seeing_steps(
        tmp_path, {"rounds": 3, "repetitions": 1, "eval_every": 3, "inner_steps": 2,
                   "local_steps": 2, "epsilons": [1.0, 8.0], "tune_repetitions": 2,
                   "rsvrg_step_sizes": [0.01], "rsgd_step_sizes": grid})
    assert not (tmp_path / "tuning.csv").exists()   # RSVRG's step given
    with open(tmp_path / "tuning_rsgd.csv") as fh:
        tuning = list(csv.DictReader(fh))
    assert [(float(r["planned_epsilon"]), float(r["rsgd_step_size"])) for r in tuning] == [
        (e, a) for e in (1.0, 8.0) for a in grid]
    steps = {label: (group, step) for label, group, step in seen}
    rows = {r["setting"]: r for r in ctx.summary_rows}
    for eps in (1.0, 8.0):
        search = [r for r in tuning if float(r["planned_epsilon"]) == eps]
        scores = [float(r["public_mean_final_excess_risk"]) for r in search]
        best = float(search[int(np.argmin(scores))]["rsgd_step_size"])
        assert [float(r["rsgd_step_size"]) for r in search if r["chosen"] == "True"] == [best]
        label = f"PriRFed-DP-RSGD planned eps<={eps:g}"
        assert steps[label] == ("", best)
        assert {"planned_epsilon": eps, "step_size": best} in summary["rsgd_step_sizes"]
        at_paper = f"PriRFed-DP-RSGD paper's step 0.3, planned eps<={eps:g}"
        if best == 0.3:
            assert at_paper not in steps
        else:
            assert steps[at_paper] == ("", 0.3)
            assert rows[at_paper]["reference"] == rows["PriRFed-RSGD non-private"]["utility"]
            assert rows[at_paper]["epsilon"] == pytest.approx(eps, rel=1e-3)
    assert summary["rsgd_step_at_grid_edge"] == any(
        e["step_size"] in (0.3, 0.003) for e in summary["rsgd_step_sizes"])
    assert steps["PriRFed-RSGD non-private"] == ("", 0.3)
    paper = [lab for lab in steps if lab.startswith("PriRFed-DP-RSGD paper's calibration")]
    assert [steps[lab] for lab in paper] == [("", 0.3)]
    # one step given: that step at every epsilon, no search, no paper's-step copies
    summary, ctx = run_experiment(
        "prirfed-fig5", seed=0,
        overrides={"rounds": 1, "repetitions": 1, "eval_every": 1, "inner_steps": 2,
                   "local_steps": 2, "epsilons": [1.0, 8.0], "rsvrg_step_sizes": [0.02],
                   "rsgd_step_sizes": [0.3]})
    assert summary["rsgd_step_chosen_on"] == "given"
    assert [e["step_size"] for e in summary["rsgd_step_sizes"]] == [0.3, 0.3]
    assert not any("paper's step" in r["setting"] and "DP-RSGD" in r["setting"]
                   for r in ctx.summary_rows)
