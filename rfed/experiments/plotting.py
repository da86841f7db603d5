"""Plots of experiment histories: one curve per setting, mean with a band over repetitions.

matplotlib is imported lazily (inside the functions) with the non-interactive Agg backend, so
importing :mod:`rfed.experiments` costs nothing and plotting works on machines without a
display.

The input is a list of flat records, exactly what :meth:`RunContext.log` collects, e.g.::

    {"setting": "eps=0.15", "repetition": 3, "round": 40, "cost": -0.98, "excess_risk": 2e-3}

:func:`aggregate` groups them by a key (the curve) and an x key (the abscissa), averaging the y
values over everything else (the repetitions); :func:`plot_curves` draws the result.

Conventions every figure follows (applied here, so experiments get them by calling these
functions and saving through :meth:`RunContext.save_figure`, which calls :func:`finish_figure`):

* at most two panels per row (:func:`new_figure`);
* axis labels in words with units (:data:`AXIS_LABELS`, :func:`axis_label`); accuracies in
  percent (:func:`as_percent`);
* on log axes the band is drawn symmetric in log space where ``mean - std`` is not positive,
  and the axis is limited to the curves (no bands falling to 1e-6);
* every private curve has its own look: beyond ten curves a setting's colour says its family
  and its marker its budget (:func:`curve_styles`);
* the non-private curve is black (several: solid, dashed, dash-dot), the random start (the
  round-0 mean) a dotted grey line;
* one legend outside the data (below the panels), with the certified epsilon in each private
  entry (:func:`finish_figure` with the privacy reports);
* a title on every figure and a "STAND-IN data" mark where the data is a stand-in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["aggregate", "plot_curves", "new_figure", "finish_figure", "axis_label",
           "as_percent", "certified_epsilon", "epsilon_text", "AXIS_LABELS", "MAX_PANELS_PER_ROW",
           "START_LABEL", "LEGEND_CELL", "curve_styles"]

#: Panels per row of :func:`new_figure` (a paper's column fits two).
MAX_PANELS_PER_ROW = 2

#: Axis labels in words (with units) for the history keys the experiments log.
AXIS_LABELS = {
    "round": "communication round",
    "iteration": "iteration",
    "epoch": "epoch (passes over the local data)",
    "cost": "cost f(x)",
    "grad_norm": "Riemannian gradient norm |grad f(x)|",
    "excess_risk": "excess risk f(x) - f(x*)",
    "dist_to_ref": "distance to the solution d(x, x*)",
    "consensus_error": "consensus error (1/n) sum_i d(x_i, x_mean)^2",
    "test_accuracy": "test accuracy (%)",
    "accuracy": "training accuracy (%)",
    "train_accuracy": "training accuracy (%)",
    "bytes_sent": "bytes sent",
    "sq_error": "squared error |w - w*|^2 (MW^2)",
    "imbalance": "supply - demand (MW)",
    "dist_to_primate": "hyperbolic distance to 'primate'",
    "epsilon": "epsilon (certified)",
}

_START_KEYS = ("cost", "excess_risk", "dist_to_ref", "grad_norm", "dist_to_primate",
               "sq_error", "test_accuracy", "accuracy", "train_accuracy", "consensus_error",
               "imbalance")


_NON_PRIVATE_STYLES = ("-", "--", "-.")

#: Distinct colours of matplotlib's default cycle (``tab10``).
_CYCLE_LENGTH = 10

#: Markers telling apart the budgets of one family when colours go by family.
_BUDGET_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

# a setting's budget inside its label: "planned eps<=8", "eps=0.5", "eps 2"
_BUDGET = re.compile(r"\s*\b(?:planned\s+)?eps\s*(?:<=|=|\s)\s*[0-9][0-9.e+-]*")

#: Label of the start reference line (the round-0 mean: a random start, or the papers' x_0).
START_LABEL = "start (round 0)"

def axis_label(key: str) -> str:
    """``key`` in words with its unit (:data:`AXIS_LABELS`), else the key with spaces.

    Parameters
    ----------
    key : str
        A history key, e.g. ``'excess_risk'``.

    Returns
    -------
    str
    """
    return AXIS_LABELS.get(key, key.replace("_", " "))


def as_percent(key: str, values: np.ndarray) -> np.ndarray:
    """Accuracies in percent: a key containing ``accuracy`` whose values are all in [0, 1]
    is multiplied by 100 (values already in percent are kept).

    Parameters
    ----------
    key : str
    values : array_like

    Returns
    -------
    ndarray of float, shape of ``values``
    """
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if "accuracy" in key and finite.size and finite.min() >= 0.0 and finite.max() <= 1.0:
        return values * 100.0
    return values


def certified_epsilon(report: Any) -> float | None:
    """The certified epsilon of a privacy report as :meth:`RunContext.set_privacy` stores it.

    Looks for ``epsilon_certified`` at the top, then the first ``epsilon*`` number inside
    ``report["certified"]``; ``None`` when there is none.

    Parameters
    ----------
    report : mapping or None

    Returns
    -------
    float or None
    """
    if not isinstance(report, Mapping):
        return None
    value = report.get("epsilon_certified")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    cert = report.get("certified")
    if isinstance(cert, Mapping):
        for key, val in cert.items():
            if key.startswith("epsilon") and isinstance(val, (int, float)) \
                    and not isinstance(val, bool):
                return float(val)
    return None


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def new_figure(n_panels: int = 1, *, panel_size: tuple[float, float] = (4.6, 3.4)):
    """A figure with ``n_panels`` panels, at most two per row; returns ``(fig, axes)``.

    ``axes`` is a flat list of ``n_panels`` axes in reading order (an unused last cell of an
    odd count is removed).

    Parameters
    ----------
    n_panels : int
    panel_size : (float, float)
        Width and height of one panel, in inches.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : list of matplotlib.axes.Axes
    """
    plt = _pyplot()
    cols = min(n_panels, MAX_PANELS_PER_ROW)
    rows = -(-n_panels // cols)
    fig, grid = plt.subplots(
        rows, cols, figsize=(panel_size[0] * cols, panel_size[1] * rows), squeeze=False
    )
    axes = list(grid.ravel())
    for ax in axes[n_panels:]:
        fig.delaxes(ax)
    return fig, axes[:n_panels]


def aggregate(
    records: Sequence[Mapping[str, Any]],
    x: str,
    y: str,
    by: str | None = None,
    *,
    band: str = "std",
    where: Callable[..., bool] | None = None,
) -> dict[Any, dict[str, np.ndarray]]:
    """Mean and band of ``y`` against ``x`` for every value of ``by``.

    Parameters
    ----------
    records : sequence of mapping
        Flat records; those missing ``x`` or ``y`` (or with a non-finite ``y``) are skipped.
    x, y : str
        Keys of the abscissa and the ordinate.
    by : str, optional
        Key whose values make the curves (``None``: one curve).
    band : {"std", "minmax", "sem", "none"}
        Band around the mean: one standard deviation, the range, the standard error of the
        mean, or nothing.
    where : callable, optional
        Keep only records for which ``where(record)`` is true.

    Returns
    -------
    dict
        ``{curve: {"x": (n,), "mean": (n,), "lo": (n,), "hi": (n,), "count": (n,),
        "diverged": int}}``, curves in order of first appearance, ``x`` sorted; repetitions
        with a record marked ``diverged`` are excluded and counted in ``"diverged"``.
    """
    if band not in ("std", "minmax", "sem", "none"):
        raise ValueError(f"argument 'band' must be 'std', 'minmax', 'sem' or 'none', got {band!r}")
    # a repetition marked diverged (a record with a truthy "diverged") is left out of the
    # curves and counted: the divergence rule of Algorithm.run, said on the plot
    lost = {(rec.get(by) if by is not None else None, rec.get("repetition"))
            for rec in records if rec.get("diverged")}
    groups: dict[Any, dict[float, list[float]]] = {}
    for rec in records:
        if x not in rec or y not in rec or (where is not None and not where(rec)):
            continue
        if lost and (rec.get(by) if by is not None else None, rec.get("repetition")) in lost:
            continue
        val = rec[y]
        if val is None or not np.isfinite(val):
            continue
        key = rec.get(by) if by is not None else None
        groups.setdefault(key, {}).setdefault(float(rec[x]), []).append(float(val))
    out = {}
    for key, cols in groups.items():
        xs = np.array(sorted(cols))
        vals = [np.asarray(cols[v]) for v in xs]
        mean = np.array([v.mean() for v in vals])
        if band == "std":
            spread = np.array([v.std() for v in vals])
            lo, hi = mean - spread, mean + spread
        elif band == "sem":
            spread = np.array([v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0
                               for v in vals])
            lo, hi = mean - spread, mean + spread
        elif band == "minmax":
            lo = np.array([v.min() for v in vals])
            hi = np.array([v.max() for v in vals])
        else:
            lo = hi = mean
        out[key] = {"x": xs, "mean": mean, "lo": lo, "hi": hi,
                    "count": np.array([v.size for v in vals]),
                    "diverged": sum(1 for k, _ in lost if k == key)}
    return out


def curve_styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Colours and markers of the private curves of one panel, distinct for every curve.

    Up to ten private curves take matplotlib's default colour cycle, one colour each (an empty
    style here). Beyond ten the cycle would repeat, so two settings would look alike: then a
    curve's *family* (its label without the budget, e.g. ``"DPDL bipartite"`` of ``"DPDL
    bipartite planned eps<=8"``) sets its colour and its budget (its rank among the family's
    budgets, in order of appearance) sets its marker.

    Parameters
    ----------
    labels : sequence of str
        The private curves' labels, in drawing order (non-private curves excluded).

    Returns
    -------
    dict
        ``{label: matplotlib line keywords}``; empty dicts when ten colours suffice.

    Notes
    -----
    Where the families are more than ten, or one family has more budgets than there are
    markers, the curves instead take the colours in turn and the next marker after every ten,
    so each curve still has its own (colour, marker) pair.
    """
    labels = list(labels)
    if len(labels) <= _CYCLE_LENGTH:
        return {label: {} for label in labels}
    families: dict[str, list[str]] = {}
    for label in labels:
        families.setdefault(_BUDGET.sub("", label).strip(), []).append(label)
    widest = max(len(members) for members in families.values())
    if len(families) > _CYCLE_LENGTH or widest > len(_BUDGET_MARKERS):
        return {label: {"color": f"C{i % _CYCLE_LENGTH}", "ms": 4,
                        "marker": _BUDGET_MARKERS[i // _CYCLE_LENGTH % len(_BUDGET_MARKERS)]}
                for i, label in enumerate(labels)}
    styles = {}
    for colour, members in enumerate(families.values()):
        for rank, label in enumerate(members):
            styles[label] = {"color": f"C{colour}", "marker": _BUDGET_MARKERS[rank], "ms": 4}
    return styles


def plot_curves(
    records: Sequence[Mapping[str, Any]],
    x: str,
    y: str | Sequence[str],
    by: str | None = None,
    *,
    band: str = "std",
    where: Callable[..., bool] | None = None,
    logy: bool | Sequence[bool] = False,
    hlines: Mapping[str, float] | Sequence[Mapping[str, float] | None] | None = None,
    titles: str | Sequence[str] | None = None,
    ylabels: Sequence[str] | None = None,
    xlabel: str | None = None,
    suptitle: str | None = None,
    order: Sequence[Any] | None = None,
    axes: Sequence[Any] | None = None,
    start_line: bool = True,
    smooth: int = 1,
):
    """Plot ``y`` (one panel per key) against ``x``, one curve per value of ``by``.

    Each curve is the mean over the records sharing ``(by, x)`` (the repetitions), with a shaded
    band (see :func:`aggregate`).

    Parameters
    ----------
    records : sequence of mapping
        Flat history records (e.g. ``ctx.records``).
    x : str
        Abscissa key, e.g. ``"round"``.
    y : str or sequence of str
        Ordinate key(s); one panel each (e.g. ``["cost", "grad_norm"]``).
    by : str, optional
        Key whose values make the curves (e.g. ``"setting"``).
    band, where
        As in :func:`aggregate`.
    logy : bool or sequence of bool
        Log scale for the y axis (per panel). Non-positive values are not drawn on log axes.
    hlines : mapping or sequence of mapping, optional
        Horizontal reference lines ``{label: value}`` (per panel), e.g. the true optimum.
    titles, ylabels, xlabel, suptitle : str
        Labels; axis labels default to the keys in words (:func:`axis_label`). Accuracies are
        drawn in percent (:func:`as_percent`).
    order : sequence, optional
        Order of the curves (values of ``by``); others follow in order of appearance.
    axes : sequence of matplotlib axes, optional
        Draw into these instead of a new figure.
    start_line : bool
        Draw the random start (mean of the curves' first values) as a dotted line on panels
        of cost, excess risk, distances and gradient norm against rounds or epochs.
    smooth : int
        Window (in evaluations, odd) of a centred moving average of each curve and its band;
        the evaluations themselves are drawn as faint points and the panel's title says so.
        1 (the default) draws the evaluations as they are. For noisy single-repetition
        metrics such as the test accuracy of a private model.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ys = [y] if isinstance(y, str) else list(y)
    if not ys:
        raise ValueError("argument 'y' must name at least one key")
    n = len(ys)
    logys = [logy] * n if isinstance(logy, bool) else list(logy)
    if len(logys) != n:
        raise ValueError(f"argument 'logy' has {len(logys)} entries for {n} panels")
    if hlines is None or isinstance(hlines, Mapping):
        hl = [hlines] * n
    else:
        hl = list(hlines)
    if titles is None or isinstance(titles, str):
        ttl = [titles] * n
    else:
        ttl = list(titles)
    if axes is None:
        fig, axes = new_figure(n)
    else:
        axes = list(axes)
        fig = axes[0].figure
    if len(axes) != n:
        raise ValueError(f"argument 'axes' has {len(axes)} axes for {n} panels")
    if isinstance(smooth, bool) or not isinstance(smooth, (int, np.integer)) or smooth < 1 \
            or smooth % 2 == 0:
        raise ValueError(f"argument 'smooth' must be an odd int >= 1, got {smooth!r}")
    for i, (ax, key) in enumerate(zip(axes, ys, strict=False)):
        curves = aggregate(records, x, key, by, band=band, where=where)
        names = list(curves)
        if order is not None:
            names = [k for k in order if k in curves] + [k for k in names if k not in order]
        shown_lo, shown_hi, starts = [], [], []
        n_non_private = 0
        private_styles = curve_styles(
            [str(name) for name in names
             if name is not None and "non-private" not in str(name).lower()])
        for name in names:
            c = curves[name]
            xs = c["x"]
            mean, lo, hi = (as_percent(key, c[k]) for k in ("mean", "lo", "hi"))
            if xs.size:
                starts.append(mean[0])
            if logys[i]:
                keep = mean > 0
                xs, mean, lo, hi = xs[keep], mean[keep], lo[keep], hi[keep]
                # a std band reaching 0 would fall to 1e-6 on a log axis: mirror the upper
                # half in log space instead (the band stays symmetric on the plot)
                lo = np.where(lo > 0, lo, mean**2 / np.maximum(hi, mean))
            label = str(name) if name is not None else axis_label(key)
            if c["diverged"]:
                label += f" [{c['diverged']} repetition(s) diverged, excluded]"
            if "non-private" in label.lower():
                # black, and told apart by the line style when there are several
                style = {"color": "k", "lw": 1.8,
                         "ls": _NON_PRIVATE_STYLES[n_non_private % len(_NON_PRIVATE_STYLES)]}
                n_non_private += 1
            else:
                style = {"lw": 1.5, **private_styles.get(str(name), {})}
            raw = mean
            if smooth > 1 and xs.size > smooth:
                mean, lo, hi = (_moving_average(v, smooth) for v in (mean, lo, hi))
            elif xs.size <= 12 and "marker" not in style:
                style["marker"] = "o"
                style["ms"] = 3
            (line,) = ax.plot(xs, mean, label=label, **style)
            if mean is not raw:
                ax.plot(xs, raw, ls="none", marker=".", ms=3, alpha=0.35,
                        color=line.get_color())
            if xs.size:
                shown_lo.append(np.min(mean))
                shown_hi.append(np.max(mean))
            if band != "none" and np.any(hi > lo):
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        # a curve whose every repetition diverged has nothing to draw: the legend says so
        gone = _all_diverged(records, by, where, curves)
        for name, n_lost in gone.items():
            ax.plot([], [], ls="none", label=f"{name}: all {n_lost} repetition(s) diverged, "
                                             "not drawn")
        for label, value in (hl[i] or {}).items():
            ax.axhline(value, color="k", ls="--", lw=1.0, label=label)
        if start_line and key in _START_KEYS and x in ("round", "epoch", "iteration") \
                and starts and (not logys[i] or np.mean(starts) > 0):
            ax.axhline(float(np.mean(starts)), color="0.5", ls=":", lw=1.2,
                       label=START_LABEL)
        if logys[i]:
            ax.set_yscale("log")
            if shown_lo:
                # bands may reach far below the curves: stop the axis at 1/1.5 of the lowest
                # curve or reference (never lower the bottom matplotlib chose)
                floor = min(shown_lo + [v for v in (hl[i] or {}).values() if v > 0]) / 1.5
                if ax.get_ylim()[0] < floor:
                    ax.set_ylim(bottom=floor)
        ax.set_xlabel(xlabel or axis_label(x))
        ax.set_ylabel(ylabels[i] if ylabels is not None else axis_label(key))
        title = ttl[i]
        if smooth > 1:
            note = f"lines: moving average of {smooth} evaluations; dots: each evaluation"
            title = f"{title}\n({note})" if title else note
        if title:
            ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if names or hl[i] or gone:
            ax.legend(fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    fig.tight_layout()
    return fig


def _all_diverged(records: Sequence[Mapping[str, Any]], by: str | None,
                  where: Callable[..., bool] | None, drawn: Mapping[Any, Any]) -> dict[Any, int]:
    """The curves (values of ``by``) with a diverged repetition and nothing in ``drawn``, each
    with its number of diverged repetitions."""
    lost: dict[Any, set] = {}
    for rec in records:
        if rec.get("diverged") and (where is None or where(rec)):
            key = rec.get(by) if by is not None else None
            if key not in drawn:
                lost.setdefault(key, set()).add(rec.get("repetition"))
    return {key: len(reps) for key, reps in lost.items()}


def range_without(ax, leave_out: Callable[[str], bool], name: str) -> list[str]:
    """Fit the y-range of ``ax`` to its curves except those ``leave_out`` selects, and say so.

    A curve orders of magnitude away from the others (e.g. a paper's calibration that ends far
    above its start) would squash them into one band; here the range is set from the other
    lines and labelled scatter points (curves and reference lines; faint evaluation dots and
    bands are ignored), and a second title line names every left-out curve that leaves the
    range and where it ends. The left-out curves stay drawn and in the legend. Nothing changes
    when the left-out curves would at most double the range (in decades on a log axis).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A panel drawn by :func:`plot_curves` (or by hand), changed in place.
    leave_out : callable
        ``leave_out(label) -> bool`` for the labels of the curves not to fit the range to.
    name : str
        What the left-out curves are, in words, for the note (e.g. ``"the paper's Thm 1
        calibration"``).

    Returns
    -------
    list of str
        The labels of the left-out curves that leave the range (the note names them).
    """
    log = ax.get_yscale() == "log"
    kept: list[np.ndarray] = []
    out: list[tuple[str, np.ndarray]] = []
    drawn = [(str(line.get_label()), line.get_ydata()) for line in ax.get_lines()]
    # scatter plots: their points' y coordinates (bands and other collections are unlabelled)
    drawn += [(str(c.get_label()), np.asarray(c.get_offsets())[:, 1])
              for c in ax.collections
              if hasattr(c, "get_offsets") and np.asarray(c.get_offsets()).ndim == 2
              and not str(c.get_label()).startswith("_")]
    for label, ydata in drawn:
        y = np.asarray(ydata, dtype=float)
        y = y[np.isfinite(y) & (y > 0)] if log else y[np.isfinite(y)]
        if label.startswith("_") or not y.size:
            continue
        (out.append((label, y)) if leave_out(label) else kept.append(y))
    if not kept or not out:
        return []
    lo = min(float(y.min()) for y in kept)
    hi = max(float(y.max()) for y in kept)
    full_lo = min(lo, min(float(y.min()) for _, y in out))
    full_hi = max(hi, max(float(y.max()) for _, y in out))
    scale = np.log10 if log else (lambda v: v)
    if scale(full_hi) - scale(full_lo) <= 2.0 * max(scale(hi) - scale(lo), 1e-12):
        return []  # the left-out curves at most double the range: draw everything
    if log:
        bottom, top = lo / 1.5, hi * 1.5
    else:
        pad = 0.05 * (hi - lo) or 0.05 * max(abs(hi), 1e-12)
        bottom, top = lo - pad, hi + pad
    ax.set_ylim(bottom, top)
    leaving = [(label, y) for label, y in out if y.max() > top or y.min() < bottom]
    if leaving:
        ends = ", ".join(f"{y[-1]:.3g}" for _, y in leaving)
        title = ax.get_title()
        note = f"({name} is off this range: ends at {ends})"
        ax.set_title(f"{title}\n{note}" if title else note, fontsize=10)
    return [label for label, _ in leaving]


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average over ``window`` points (fewer at the ends), shape kept."""
    kernel = np.ones(window)
    total = np.convolve(values, kernel, mode="same")
    count = np.convolve(np.ones_like(values), kernel, mode="same")
    return total / count


def finish_figure(
    fig,
    *,
    title: str | None = None,
    privacy: Mapping[str, Any] | None = None,
    stand_in: bool | str = False,
) -> None:
    """Make ``fig`` fit for a paper before it is saved.

    * a title: ``title`` becomes the figure's title when it has none; titles and axis labels
      longer than their panel are wrapped onto two lines;
    * the certified epsilon in the legend: an entry whose label is a setting of ``privacy``
      (``{setting: report}``) gets ``(certified eps X)`` appended (``inf`` when the report
      certifies nothing);
    * the legends outside the data, the panels kept at most two per row: when every panel
      shows the same entries (or a subset of them), one legend below the panels; otherwise
      one legend below each row whose panels share their entries, else one below each panel
      (an extra grid row of axis-free legend cells, :data:`LEGEND_CELL`, sized to its text);
    * ``stand_in``: a "STAND-IN data" mark in the lower left corner (a string says what
      stands in for what: ``"STAND-IN data: <stand_in>"``).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, changed in place.
    title : str, optional
        The title given to a figure that has none.
    privacy : mapping, optional
        ``{setting label: privacy report}`` of the runs drawn.
    stand_in : bool or str, default False
        Whether (or what) stand-in data the figure shows.
    """
    axes = [ax for ax in fig.axes if ax.get_visible() and not _is_legend_cell(ax)]
    entries = []
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        if privacy:
            labels = [_with_epsilon(lab, privacy) for lab in labels]
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        entries.append((ax, handles, labels))
    labelled = [(ax, h, lab) for ax, h, lab in entries if lab]
    if labelled and _nested([lab for _, _, lab in labelled]):
        # the panels show the same curves (some add reference lines): one legend for all
        handles, labels = _union(labelled)
        fig.legend(handles, _wrap_all(labels, 70), loc="upper center",
                   bbox_to_anchor=(0.5, 0.0), ncol=2 if len(labels) > 2 else len(labels),
                   fontsize=8, frameon=False)
    elif labelled:
        _legend_rows(fig, axes, entries)
    for ax in axes:
        _accuracy_in_percent(ax)
        _plain_log_ticks(ax)
    if fig._suptitle is None and title:
        fig.suptitle(title, fontsize=11)
    _fit_texts(fig, axes)
    if stand_in:
        # the lower left corner is free in every layout (left of the x label, above the legend)
        text = "STAND-IN data" if stand_in is True else f"STAND-IN data: {stand_in}"
        fig.text(0.005, 0.005, text, ha="left", va="bottom", fontsize=8,
                 color="firebrick", weight="bold")


#: ``gid`` of the axis-free grid cells that hold legends (:func:`finish_figure`).
LEGEND_CELL = "rfed-legend-cell"


def _is_legend_cell(ax) -> bool:
    return ax.get_gid() == LEGEND_CELL


def _nested(label_lists: Sequence[Sequence[str]]) -> bool:
    """True when of every two label sets one contains the other."""
    sets = [set(lab) for lab in label_lists]
    return all(a <= b or b <= a for a in sets for b in sets)


def _union(entries) -> tuple[list, list[str]]:
    """Handles and labels of ``entries`` (``(ax, handles, labels)``), each label once."""
    handles, labels = [], []
    for _, hs, labs in entries:
        for h, lab in zip(hs, labs, strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def _wrap_all(labels: Sequence[str], width: int) -> list[str]:
    import textwrap

    return ["\n".join(textwrap.wrap(lab, width)) or lab for lab in labels]


def _legend_rows(fig, axes, entries) -> None:
    """Re-lay ``axes`` on their grid with a legend cell under each row (shared when the
    row's panels show the same entries, else one per panel); the figure grows to fit."""
    from matplotlib.gridspec import GridSpec

    specs = [ax.get_subplotspec() for ax in axes]
    if any(ss is None for ss in specs):
        raise ValueError("finish_figure: every panel must be a grid subplot (new_figure)")
    n_cols = max(ss.get_gridspec().ncols for ss in specs)
    cells: dict[int, list[tuple[int, Any, list, list[str]]]] = {}
    for (ax, handles, labels), ss in zip(entries, specs, strict=True):
        cells.setdefault(ss.rowspan.start, []).append((ss.colspan.start, ax, handles, labels))
    width, _ = fig.get_size_inches()
    panel_h = 3.2
    row_items = []
    for row in sorted(cells):
        items = sorted(cells[row], key=lambda it: it[0])
        with_labels = [(ax, h, lab) for _, ax, h, lab in items if lab]
        if len(items) > 1 and with_labels and _nested([lab for _, _, lab in with_labels]):
            handles, labels = _union(with_labels)
            legends = [(0, n_cols, handles, _wrap_all(labels, 60), 2 if len(labels) > 2 else 1)]
        else:
            legends = [(col, col + 1, h, _wrap_all(lab, 60 if n_cols == 1 else 48), 1)
                       for col, _, h, lab in items if lab]
        lines = max((sum(lab.count("\n") + 1 for lab in labs[i::ncol])
                     for _, _, _, labs, ncol in legends for i in range(ncol)), default=0)
        row_items.append((items, legends, 0.25 + 0.17 * lines))
    ratios = []
    for _, _, legend_h in row_items:
        ratios += [panel_h, legend_h]
    grid = GridSpec(2 * len(row_items), n_cols, figure=fig, height_ratios=ratios)
    for r, (items, legends, _) in enumerate(row_items):
        for col, ax, _, _ in items:
            ax.set_subplotspec(grid[2 * r, col])
        for c0, c1, handles, labels, ncol in legends:
            cell = fig.add_subplot(grid[2 * r + 1, c0:c1])
            cell.set_gid(LEGEND_CELL)
            cell.axis("off")
            cell.legend(handles, labels, loc="upper center", ncol=ncol, fontsize=7,
                        frameon=False, borderaxespad=0.0)
    fig.set_size_inches(width, sum(ratios) + 0.6)


def _fit_texts(fig, axes) -> None:
    """Lay the figure out; wrap every axis label, title and suptitle longer than its room
    (a panel's height or width, the figure's width) onto two lines, and lay out again."""
    import textwrap

    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    changed = False

    def fit(text, room: float, vertical: bool) -> None:
        nonlocal changed
        content = text.get_text()
        if not content or "\n" in content:
            return
        box = text.get_window_extent(renderer)
        size = box.height if vertical else box.width
        if size > 0.97 * room:
            text.set_text("\n".join(textwrap.wrap(content, max(12, len(content) // 2 + 4))))
            changed = True

    for ax in axes:
        box = ax.get_window_extent(renderer)
        fit(ax.yaxis.label, box.height, True)
        fit(ax.xaxis.label, box.width, False)
        fit(ax.title, box.width, False)
    if fig._suptitle is not None:
        fit(fig._suptitle, fig.bbox.width, False)
    if changed:
        fig.tight_layout()


def _accuracy_in_percent(ax) -> None:
    """An axis labelled accuracy with all its data in [0, 1] is rescaled to percent."""
    from matplotlib.collections import PathCollection, PolyCollection

    label = ax.get_ylabel()
    if "accuracy" not in label.lower() or "%" in label:
        return
    lines = [ln for ln in ax.get_lines() if len(ln.get_ydata())]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ln in lines]
    ys += [np.asarray(c.get_offsets(), dtype=float).reshape(-1, 2)[:, 1] for c in scatters]
    values = np.concatenate(ys) if ys else np.array([])
    values = values[np.isfinite(values)]
    if not values.size or values.min() < 0 or values.max() > 1:
        return
    for ln in lines:
        ln.set_ydata(np.asarray(ln.get_ydata(), dtype=float) * 100.0)
    for c in scatters:
        c.set_offsets(np.asarray(c.get_offsets(), dtype=float) * [1.0, 100.0])
    for band in bands:
        for path in band.get_paths():
            path.vertices = np.asarray(path.vertices, dtype=float) * [1.0, 100.0]
    ax.set_ylabel(f"{label} (%)")
    ax.relim()
    ax.autoscale_view()


def _plain_log_ticks(ax) -> None:
    """Over two decades or more, label only the powers of ten (no 6x10^0, 4x10^0 clutter)."""
    if ax.get_yscale() != "log":
        return
    from matplotlib.ticker import NullFormatter

    lo, hi = ax.get_ylim()
    if lo > 0 and hi / lo >= 100.0:
        ax.yaxis.set_minor_formatter(NullFormatter())


def epsilon_text(report: Any) -> str | None:
    """``"certified eps 2.36, replace-one, delta=1e-05"``: what a run spent, from its privacy
    report (the ledger's figure), with the neighbouring relation and delta; ``"non-private"``
    for a run without noise; ``None`` when the report certifies nothing.

    Parameters
    ----------
    report : mapping or None
        A run's privacy report.

    Returns
    -------
    str or None
        The legend text, ``"non-private"``, or ``None``.
    """
    if isinstance(report, Mapping) and report.get("private") is False:
        return "non-private"
    eps = certified_epsilon(report)
    if eps is None:
        return None
    if not np.isfinite(eps):
        return "non-private" if eps > 0 else None
    parts = [f"certified eps {eps:.3g}"]
    relation = _relation(report)
    if relation:
        parts.append(relation)
    delta = report.get("delta") if isinstance(report, Mapping) else None
    if isinstance(delta, (int, float)) and not isinstance(delta, bool):
        parts.append(f"delta={delta:.2g}")
    return ", ".join(parts)


def _relation(report: Mapping[str, Any]) -> str:
    """The neighbouring relation a report names (``replace-one``, ``add/remove``, DP-DGT's
    cost-function adjacency), or ``""``."""
    from rfed.experiments.tables import relation_of

    relation = str(report.get("neighboring") or "")
    return (relation_of(relation) or relation_of(str(report.get("accountant") or ""))
            or relation.replace("_", "-"))


def _with_epsilon(label: str, privacy: Mapping[str, Any]) -> str:
    """``label`` with what the run of the setting it names spent (the label itself, or the
    label followed by a note such as ``": mean of 10 runs"``) inserted after the setting:
    ``"(certified eps X, relation, delta=Y)"`` from its privacy report (the one certified
    epsilon of the curve; a label's ``planned eps<=`` names the budget, not the guarantee)."""
    if "certified eps" in label or "non-private" in label.lower():
        return label
    names = [k for k in privacy if isinstance(k, str)
             and (label == k or label.startswith(k + " ") or label.startswith(k + ":"))]
    if not names:
        return label
    setting = max(names, key=len)
    text = epsilon_text(privacy[setting])
    if text is None:
        return label
    return f"{setting} ({text}){label[len(setting):]}"
