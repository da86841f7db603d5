"""Figure conventions applied by the shared plotting helpers (rfed.experiments.plotting)."""

import numpy as np

from rfed.experiments.plotting import (
    START_LABEL,
    as_percent,
    axis_label,
    certified_epsilon,
    finish_figure,
    new_figure,
    plot_curves,
)
from rfed.experiments.registry import RunContext


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
