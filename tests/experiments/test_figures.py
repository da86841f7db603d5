"""Figure conventions applied by the shared plotting helpers (rfed.experiments.plotting)."""

import contextlib
import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rfed.cli import main
from rfed.experiments.plotting import (
    AXIS_LABELS,
    LEGEND_CELL,
    MAX_PANELS_PER_ROW,
    START_LABEL,
    as_percent,
    axis_label,
    certified_epsilon,
    finish_figure,
    new_figure,
    plot_curves,
    range_without,
)
from rfed.experiments.registry import RunContext, get_experiment


def _records():
    rng = np.random.default_rng(0)
    return [{"setting": s, "repetition": r, "round": t,
             "excess_risk": abs(1.0 / (t + 1) + rng.normal(0, 0.8)) * (2 if s == "b" else 1),
             "test_accuracy": 0.1 + 0.04 * t}
            for s in ("a", "b", "non-private") for r in range(4) for t in range(20)]


def test_at_most_two_panels_per_row():
    fig, axes = new_figure(5)
    assert len(axes) == 5 and len(fig.axes) == 5
    rows = {round(ax.get_position().y0, 3) for ax in axes}
    cols = {round(ax.get_position().x0, 3) for ax in axes}
    assert len(rows) == 3 and len(cols) == 2


def test_axis_labels_in_words_and_accuracy_in_percent():
    assert axis_label("excess_risk") == "excess risk f(x) - f(x*)"
    assert axis_label("some_key") == "some key"
    np.testing.assert_allclose(as_percent("test_accuracy", np.array([0.1, 0.9])), [10, 90])
    np.testing.assert_allclose(as_percent("test_accuracy", np.array([10.0, 90.0])), [10, 90])
    fig = plot_curves(_records(), "round", ["excess_risk", "test_accuracy"], by="setting",
                      logy=[True, False])
    ax0, ax1 = fig.axes
    assert ax0.get_xlabel() == "communication round"
    assert ax1.get_ylabel() == "test accuracy (%)"
    assert np.isclose(ax1.get_lines()[0].get_ydata()[-1], 100 * (0.1 + 0.04 * 19))


def test_log_bands_are_mirrored_not_floored_to_tiny_values():
    fig = plot_curves(_records(), "round", "excess_risk", by="setting", logy=True)
    ax = fig.axes[0]
    curves = [ln for ln in ax.get_lines() if ln.get_label() in ("a", "b", "non-private")]
    lowest_mean = min(np.min(ln.get_ydata()) for ln in curves)
    bottom, _ = ax.get_ylim()
    assert bottom >= lowest_mean / 1.5 * 0.999          # no decades of empty band below
    for band in ax.collections:
        y = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert np.all(y > 0)
    # the non-private curve is black; a random-start line is drawn at the round-0 mean
    nonpriv = next(ln for ln in curves if ln.get_label() == "non-private")
    assert nonpriv.get_color() in ("k", "black", (0.0, 0.0, 0.0, 1.0))
    assert any(ln.get_label() == START_LABEL for ln in ax.get_lines())


def test_finish_figure_moves_the_legend_out_adds_epsilon_title_and_stand_in_mark():
    fig = plot_curves(_records(), "round", ["excess_risk", "test_accuracy"], by="setting",
                      logy=[True, False])
    privacy = {"a": {"epsilon_certified": 1.234}, "b": {"certified": {"epsilon_max": 5.0}},
               "non-private": {"epsilon_certified": float("inf")}}
    finish_figure(fig, title="demo: figure", privacy=privacy, stand_in=True)
    assert all(ax.get_legend() is None for ax in fig.axes)     # nothing over the data
    [legend] = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "a (certified eps 1.23)" in labels and "b (certified eps 5)" in labels
    assert "non-private" in labels
    # the legend sits below the panels
    fig.canvas.draw()
    box = legend.get_window_extent().transformed(fig.transFigure.inverted())
    assert box.y1 <= min(ax.get_position().y0 for ax in fig.axes)
    assert fig._suptitle is not None and fig._suptitle.get_text() == "demo: figure"
    assert any(t.get_text() == "STAND-IN data" for t in fig.texts)


def test_accuracy_axes_drawn_by_hand_become_percent():
    fig, (ax,) = new_figure(1)
    ax.plot([0.2, 0.6], [0.5, 0.65], "o-", label="x")
    ax.scatter([0.4], [0.55], label="y")
    ax.set_ylabel("training accuracy")
    ax.legend()
    finish_figure(fig)
    assert ax.get_ylabel() == "training accuracy (%)"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [50, 65])
    np.testing.assert_allclose(ax.collections[0].get_offsets()[:, 1], [55])


def test_certified_epsilon_is_read_from_either_report_shape():
    assert certified_epsilon({"epsilon_certified": 2.0}) == 2.0
    assert certified_epsilon({"certified": {"delta": 1e-5, "epsilon_max": 3.0}}) == 3.0
    assert certified_epsilon({"paper": {"epsilon": 9.0}}) is None


def test_save_figure_finishes_and_writes_atomically(tmp_path):
    ctx = RunContext(seed=0, out_dir=tmp_path / "o")
    ctx.open("demo", {})
    ctx.stand_in = True
    ctx.log(setting="a", round=0, excess_risk=1.0)
    ctx.set_privacy("a", {"epsilon_certified": 0.5})
    fig = plot_curves(ctx.records, "round", "excess_risk", by="setting")
    path = ctx.save_figure(fig, "curves")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        ".rfed.lock", "config.json", "curves.png", "history.jsonl", "privacy.json"]


# ------------------------------------------------------------------------------------------
# Every experiment's figures, produced by the command line at a tiny size, checked against the
# figure rules of issue 12 (title; axis labels in words with units; legends off the data;
# certified epsilon in the legend; references; log axes without artefact decades; accuracy in
# percent; at most two panels per row; stand-ins marked; no citation numbers; no empty zoom).

# tiny settings: each experiment end to end in seconds (the four decentralized ones < 10 s of
# CPU each on this machine, measured with time.process_time)
FIG_TINY = {
    "pca-synthetic": {"rounds": 4, "repetitions": 2, "eval_every": 2, "epsilons": [8.0]},
    "prirfed-fig1": {"rounds": 4, "repetitions": 1, "eval_every": 2, "columns": [1, 2, 3],
                     "paper_epsilons": [0.15]},
    "prirfed-fig2": {"rounds": 2, "repetitions": 1, "eval_every": 1, "agents": [10, 12],
                     "local_steps": 1},
    "prirfed-fig3": {"n_samples": 200, "rounds": 2, "repetitions": 1, "eval_every": 1,
                     "agents": [10], "report_rounds": [1], "inner_steps": 2, "local_steps": 1},
    "prirfed-fig4": {"n_samples": 200, "rounds": 2, "repetitions": 1, "eval_every": 1,
                     "agents": [10], "report_rounds": [1], "inner_steps": 2, "local_steps": 1},
    "prirfed-fig5": {"rounds": 2, "repetitions": 1, "eval_every": 1, "inner_steps": 2,
                     "local_steps": 1},
    "prirfed-kpca": {"rounds": 4, "repetitions": 1, "eval_every": 2, "epsilons": [8.0]},
    "dpdgt-ieee14": {"iterations": 20, "mc_runs": 2, "thetas": [0.0, 0.01], "eval_every": 5},
    "doadp-digits": {"epochs": 1, "n_agents": 40, "epsilons": [1.0], "hidden": 4,
                     "eval_every": 2},
    "doadp-logreg": {"epochs": 1, "n_agents": 8, "n_per_agent": 8, "dim": 4, "repetitions": 1,
                     "eps_sweep": [1.0], "eval_every": 4, "baselines": False},
    "dpdda-svm": {"epochs": 1, "n_agents": 4, "n_per_agent": 6, "dim": 4, "n_active": [2],
                  "eps_sweep": [1.0], "eval_every": 4, "baseline": False},
    "dpdl-digits": {"rounds": 2, "n_agents": 4, "eval_every": 1, "epsilons": [4.0],
                    "topologies": ["complete"], "hidden": 4},
}

# figures without a non-private curve, and what stands for it
_REFERENCE_EXEMPT = {
    ("dpdgt-ieee14", "fig2_fig3_trajectories"): "the paper's w* and the demand are drawn",
    ("dpdgt-ieee14", "fig5_comparison"): "two noisy methods compared under the same noise",
    ("prirfed-fig1", "fig1_grad_norm"): "the optimum's gradient norm is 0, off the log axis; "
                                        "fig1_cost of the same run draws the optimum",
}


@dataclass
class _Produced:
    out: Path
    exit_code: int
    stdout: str
    figures: dict  # name -> matplotlib Figure, as saved


class _Runs(dict):
    """Each experiment run once, on first use, through ``rfed run``; its saved figures kept."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> _Produced:
        import matplotlib.pyplot as plt

        out = self.root / name
        figures: dict = {}
        original = RunContext.save_figure

        def keep(ctx, fig, fig_name):
            figures[fig_name] = fig
            return original(ctx, fig, fig_name)

        argv = ["run", name, "--out", str(out), "--no-progress"]
        for key, value in FIG_TINY[name].items():
            argv += ["--set", f"{key}={value!r}"]
        buf = io.StringIO()
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
            # save_figure finishes, writes and closes each figure: keep it open to inspect
            mp.setattr(RunContext, "save_figure", keep)
            mp.setattr(plt, "close", lambda fig=None: None)
            code = main(argv)
        self[name] = _Produced(out, code, buf.getvalue(), figures)
        return self[name]


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    runs = _Runs(tmp_path_factory.mktemp("figs"))
    yield runs
    import matplotlib.pyplot as plt

    for run in runs.values():
        for fig in run.figures.values():
            plt.close(fig)


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_gid() != LEGEND_CELL
            and ax.axison]


def _legends(fig):
    legends = list(fig.legends)
    legends += [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return legends


def _legend_texts(fig):
    return [t.get_text().replace("\n", " ") for lg in _legends(fig) for t in lg.get_texts()]


def _all_texts(fig):
    texts = [t.get_text() for t in fig.texts] + _legend_texts(fig)
    if fig._suptitle is not None:
        texts.append(fig._suptitle.get_text())
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.texts]
    return texts


@pytest.mark.parametrize("name", sorted(FIG_TINY))
def test_every_figure_and_console_table_follows_the_rules(name, produced):
    run = produced[name]
    assert run.exit_code == 0, run.stdout
    _check_console_table(name, run)
    assert run.figures, f"{name} saved no figure"
    privacy = json.loads((run.out / "privacy.json").read_text())
    stand_in = re.search(r"(?<!public )stand-in", get_experiment(name).description.lower())
    for fig_name, fig in run.figures.items():
        where = f"{name}/{fig_name}"
        renderer = fig.canvas.get_renderer()
        # a title
        assert fig._suptitle is not None and fig._suptitle.get_text().strip(), where
        panels = _panels(fig)
        assert panels, where
        # at most two panels per row
        lefts = {round(ax.get_position().x0, 2) for ax in panels}
        assert len(lefts) <= MAX_PANELS_PER_ROW, (where, lefts)
        for ax in panels:
            xl, yl = ax.get_xlabel().replace("\n", " "), ax.get_ylabel().replace("\n", " ")
            # axis labels in words, never a raw history key
            assert xl.strip() and yl.strip(), (where, xl, yl)
            assert xl not in AXIS_LABELS and yl not in AXIS_LABELS, (where, xl, yl)
            # accuracy in one unit: percent, values within [0, 100]
            if "accuracy" in yl.lower():
                assert "%" in yl, (where, yl)
                ys = np.concatenate([np.asarray(ln.get_ydata(), float)
                                     for ln in ax.get_lines()] or [np.zeros(1)])
                assert np.nanmax(ys) <= 100.0 + 1e-9, where
            # log axes stop near the curves: no band falling decades below them
            if ax.get_yscale() == "log":
                ys = np.concatenate([np.asarray(ln.get_ydata(), float)
                                     for ln in ax.get_lines()])
                ys = ys[np.isfinite(ys) & (ys > 0)]
                assert ax.get_ylim()[0] >= ys.min() / 10.0, (where, ax.get_ylim(), ys.min())
            # no legend inside a panel
            assert ax.get_legend() is None, where
        # legends off the data: no legend box meets a panel
        for legend in _legends(fig):
            box = legend.get_window_extent(renderer)
            for ax in panels:
                assert not box.overlaps(ax.get_window_extent(renderer)), (where, ax.get_title())
        texts = _legend_texts(fig)
        # the certified epsilon in the legend of every private setting
        for text in texts:
            if "non-private" not in text and any(text == s or text.startswith(s + " ")
                                                 for s in privacy):
                assert "eps" in text, (where, text)
        # references: the non-private run (or the optimum it reaches) and the start
        if (name, fig_name) not in _REFERENCE_EXEMPT:
            assert any("non-private" in t for t in texts), (where, texts)
        over_rounds = [ax for ax in panels if ax.get_xlabel() in (
            axis_label("round"), axis_label("epoch"))]
        if any(ax.get_ylabel() in {axis_label(k) for k in ("cost", "excess_risk")}
               for ax in over_rounds):
            assert START_LABEL in texts, where
        # no citation numbers used as labels
        assert not any(re.search(r"\[\d+\]", t) for t in _all_texts(fig)), where
        # stand-ins labelled on the figure (and only stand-ins)
        marked = any(t.get_text().startswith("STAND-IN data") for t in fig.texts)
        assert marked == bool(stand_in), where
        # a zoom panel shows something besides the truth, and stays inside the disk's box
        for ax in panels:
            if ax.get_title().startswith("zoom"):
                (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
                assert -1.03 <= x0 < x1 <= 1.03 and -1.03 <= y0 < y1 <= 1.03, where
                shown = [c for c in ax.collections if "best of runs" in str(c.get_label())
                         or "optimum" in str(c.get_label())]
                inside = [p for c in shown for p in np.asarray(c.get_offsets())
                          if x0 <= p[0] <= x1 and y0 <= p[1] <= y1]
                assert inside, where
    import matplotlib.pyplot as plt

    for fig in run.figures.values():
        plt.close(fig)


def _console_table(stdout: str) -> tuple[list[str], list[list[str]], list[str]]:
    """The summary table ``rfed run`` printed: its header cells, its rows' cells (split at the
    column spans of the dashes line) and the lines after it."""
    lines = stdout.splitlines()
    dash = next(i for i, line in enumerate(lines) if re.fullmatch(r"-+(  -+)+", line))
    spans = [m.span() for m in re.finditer(r"-+", lines[dash])]

    def cells(line):
        return [line[a:(spans[k + 1][0] if k + 1 < len(spans) else len(line))].strip()
                for k, (a, _) in enumerate(spans)]

    body = []
    for line in lines[dash + 1:]:
        if not line.strip() or line.startswith(("[", "note:")):
            break
        body.append(cells(line))
    return cells(lines[dash - 1]), body, lines[dash + 1 + len(body):]


def _check_console_table(name: str, run: _Produced) -> None:
    """The console table of an experiment, as ``rfed run`` printed it, against its
    summary_table.csv: setting, start, final value (mean +- std with n, or diverged), the
    reference, the certified epsilon with relation and delta ("non-private" for a run without
    noise, "diverged" where no run finished; never inf, nan or 0), the diverged count, a private
    result much worse than its start flagged, and one divergence line per setting.
    (Called by :func:`test_every_figure_and_console_table_follows_the_rules`, so that each
    experiment runs once per test worker.)"""
    head, body, after = _console_table(run.stdout)
    for column in ("setting", "start", "reference", "eps (certified)", "relation, delta",
                   "diverged"):
        assert any(h.startswith(column) for h in head), (name, column, head)
    assert any(h.startswith("final") for h in head), (name, head)
    col = {next((k for k in ("final", "reference") if h.startswith(k)), h): i
           for i, h in enumerate(head)}
    with open(run.out / "summary_table.csv", newline="") as fh:
        rows = {r["setting"]: r for r in csv.DictReader(fh)}
    assert [c[0] for c in body] == list(rows), name
    for cells in body:
        row, where = rows[cells[0]], (name, cells[0])
        reps, lost = int(row["repetitions"]), int(row["diverged"])
        final, eps = cells[col["final"]], cells[col["eps (certified)"]]
        assert cells[col["diverged"]] == f"{lost}/{reps}", where
        if lost == reps:
            assert final == eps == "diverged", where
            continue
        assert re.fullmatch(r"\S+( \+- \S+)? \(n=" + str(reps - lost) + r"\)", final), \
            (where, final)
        assert "nan" not in final and "nan" not in cells[col["reference"]], where
        private = row["epsilon"] not in ("", "inf")
        if not private:
            assert eps == "non-private" and cells[col["relation, delta"]] == "-", where
            continue
        assert re.fullmatch(r"[0-9.e+-]+( \[\d+\])?", eps) and float(eps.split()[0]) > 0, \
            (where, eps)
        assert re.fullmatch(r"[a-z].*, delta=[0-9.e+-]+", cells[col["relation, delta"]]), where
        # much worse than the start: twice its excess (lower is better) or half its accuracy
        start, end = float(row["start"] or "nan"), float(row["utility"])
        if np.isfinite(start) and abs(end - 2 * start) > 1e-3 * abs(start) \
                and abs(end - start / 2) > 1e-3 * abs(start):
            much = end < start / 2 if row["higher_is_better"] == "True" else end > 2 * start
            assert ("MUCH WORSE than start" in cells) == much, (where, start, end)
    # divergence: one line per setting with its count, never one line per repetition
    listed = [line.split(":")[0].strip() for line in after if re.match(r"  \S.*: \d+ diverged",
                                                                       line)]
    assert len(listed) == len(set(listed)), (name, listed)
    assert set(listed) == {s for s, r in rows.items() if int(r["diverged"])}, (name, listed)


def _strict_json(path: Path):
    def refuse(const):
        raise ValueError(f"{path.name}: non-standard JSON constant {const}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("name", ["doadp-digits", "doadp-logreg", "dpdda-svm", "dpdl-digits"])
def test_decentralized_experiment_end_to_end_from_the_command_line(name, produced):
    """The four decentralized experiments whose default-size tests are slow, end to end at a
    tiny size: outputs exist, every JSON is strict, the printed summary has a row per
    setting with its certified epsilon."""
    run = produced[name]
    assert run.exit_code == 0, run.stdout
    for file in ("config.json", "summary.json", "privacy.json", "history.jsonl",
                 "history.csv", "summary_table.csv", "summary_table.md"):
        assert (run.out / file).stat().st_size > 0, file
    assert list(run.out.glob("*.png"))
    for path in [*run.out.glob("*.json")]:
        _strict_json(path)
    for line in (run.out / "history.jsonl").read_text().splitlines():
        record = json.loads(line, parse_constant=lambda c: pytest.fail(f"history: {c}"))
        assert record["run_id"] and "seed" in record
    summary = _strict_json(run.out / "summary.json")
    with open(run.out / "summary_table.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    printed = run.stdout
    assert "eps (certified)" in printed and "delta" in printed
    for row in rows:
        assert row["setting"] in printed
        if "certified eps=" in row["setting"]:
            assert row["epsilon"] not in ("", None), row
    assert summary["experiment"] == name


def test_smoothing_is_a_centred_moving_average_and_the_evaluations_stay_visible():
    recs = [{"setting": "a", "round": t, "test_accuracy": v}
            for t, v in enumerate([0.1, 0.5, 0.2, 0.6, 0.3, 0.7, 0.4])]
    fig = plot_curves(recs, "round", "test_accuracy", by="setting", smooth=3, band="none",
                      start_line=False)
    ax = fig.axes[0]
    smooth, dots = ax.get_lines()
    # by hand: ends average two points, the inside three
    expected = 100 * np.array([0.3, 0.8 / 3, 1.3 / 3, 1.1 / 3, 1.6 / 3, 1.4 / 3, 0.55])
    np.testing.assert_allclose(smooth.get_ydata(), expected)
    np.testing.assert_allclose(dots.get_ydata(), 100 * np.array([0.1, 0.5, 0.2, 0.6, 0.3,
                                                                 0.7, 0.4]))
    assert "moving average of 3 evaluations" in ax.get_title()
    for bad in (0, 2, 1.5, True):
        with pytest.raises(ValueError, match="argument 'smooth'"):
            plot_curves(recs, "round", "test_accuracy", smooth=bad)


def _curve_looks(ax):
    """(colour, marker) of every private curve of a panel, by label."""
    import matplotlib.colors as mcolors
    return {line.get_label(): (mcolors.to_hex(line.get_color()), line.get_marker())
            for line in ax.get_lines()
            if not line.get_label().startswith("_") and "non-private" not in line.get_label()
            and line.get_label() != START_LABEL}


def test_more_curves_than_colours_keep_each_its_own_look():
    # 4 algorithms x 3 budgets: the 10-colour cycle alone would give the 11th and 12th curves
    # the colours of the 1st and 2nd
    algorithms, budgets = ("DPDL", "DP-DPSGD", "MUFFLIATO", "DP-CGA"), (2, 4, 8)
    settings = [f"{a} bipartite planned eps<={e}" for e in budgets for a in algorithms]
    recs = [{"setting": s, "round": t, "test_accuracy": 0.1 + 0.01 * t * (i + 1)}
            for i, s in enumerate(settings + ["DPDL bipartite non-private"]) for t in range(5)]
    looks = _curve_looks(plot_curves(recs, "round", "test_accuracy", by="setting").axes[0])
    assert set(looks) == set(settings)
    assert len(set(looks.values())) == len(settings)
    for a in algorithms:    # the colour says the algorithm, the marker the budget
        assert len({looks[f"{a} bipartite planned eps<={e}"][0] for e in budgets}) == 1
    for e in budgets:
        assert len({looks[f"{a} bipartite planned eps<={e}"][1] for a in algorithms}) == 1
    # twelve unrelated settings: no family to share a colour, still twelve looks
    plain = [f"setting {k}" for k in range(12)]
    recs = [{"setting": s, "round": t, "cost": 1.0 + k + t} for k, s in enumerate(plain)
            for t in range(5)]
    looks = _curve_looks(plot_curves(recs, "round", "cost", by="setting").axes[0])
    assert len(set(looks.values())) == 12


def test_dpdgt_fig4_noise_axes_are_logarithmic(produced):
    """The paper's noise levels span decades: both panels of DP-DGT's Fig. 4 put theta_0 on a
    log axis (theta_0 = 0, no noise, is the horizontal reference line)."""
    fig = produced["dpdgt-ieee14"].figures["fig4_accuracy_privacy"]
    assert [ax.get_xscale() for ax in _panels(fig)] == ["log", "log"]


def test_a_curve_far_off_the_others_does_not_set_the_range_and_is_named():
    # DO-ADP's paper calibration at eps 0.01 ends near 1e3 while the certified curves sit in
    # [0.085, 0.25]: fitted to all, the certified curves squash into one band
    recs = [{"setting": s, "round": t, "excess_risk": v}
            for t in range(5)
            for s, v in (("certified", 0.25 - 0.03 * t), ("non-private", 0.25 - 0.04 * t),
                         ("paper's Thm 1", 0.25 * 10.0**t))]
    far = lambda label: "paper's" in label  # noqa: E731
    ax = plot_curves(recs, "round", "excess_risk", by="setting", logy=True).axes[0]
    assert ax.get_ylim()[1] > 1e3                      # matplotlib fits every curve
    assert range_without(ax, far, "the paper's calibration") == ["paper's Thm 1"]
    bottom, top = ax.get_ylim()
    assert bottom == pytest.approx(0.09 / 1.5) and top == pytest.approx(0.25 * 1.5)
    assert "the paper's calibration is off this range: ends at 2.5e+03" in ax.get_title()
    assert "paper's Thm 1" in [line.get_label() for line in ax.get_lines()]  # still drawn
    # scatter points count like curves; a far point off a linear axis is named the same way
    fig, (lin,) = new_figure(1)
    lin.scatter([1, 2], [0.2, 0.3], label="kept")
    lin.scatter([3], [40.0], label="paper's point")
    assert range_without(lin, far, "the paper's point") == ["paper's point"]
    assert lin.get_ylim() == pytest.approx((0.195, 0.305))
    # a left-out curve that at most doubles the range changes nothing
    fig, (near,) = new_figure(1)
    near.plot([0, 1], [1.0, 2.0], label="kept")
    near.plot([0, 1], [1.0, 2.9], label="paper's curve")
    before = near.get_ylim()
    assert range_without(near, far, "the paper's curve") == []
    assert near.get_ylim() == before and near.get_title() == ""
