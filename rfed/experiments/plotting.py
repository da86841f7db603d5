"""Plots of experiment histories: one curve per setting, mean with a band over repetitions.

matplotlib is imported lazily (inside the functions) with the non-interactive Agg backend, so
importing :mod:`rfed.experiments` costs nothing and plotting works on machines without a
display.

The input is a list of flat records, exactly what :meth:`RunContext.log` collects, e.g.::

    {"setting": "eps=0.15", "repetition": 3, "round": 40, "cost": -0.98, "excess_risk": 2e-3}

:func:`aggregate` groups them by a key (the curve) and an x key (the abscissa), averaging the y
values over everything else (the repetitions); :func:`plot_curves` draws the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["aggregate", "plot_curves", "new_figure"]


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def new_figure(n_panels: int = 1, *, panel_size: tuple[float, float] = (4.6, 3.4)):
    """A figure with ``n_panels`` side by side; returns ``(fig, axes)`` with axes a list."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        1, n_panels, figsize=(panel_size[0] * n_panels, panel_size[1]), squeeze=False
    )
    return fig, list(axes[0])


def aggregate(
    records: Sequence[Mapping[str, Any]],
    x: str,
    y: str,
    by: str | None = None,
    *,
    band: str = "std",
    where: Callable[[Mapping[str, Any]], bool] | None = None,
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
        ``{curve: {"x": (n,), "mean": (n,), "lo": (n,), "hi": (n,), "count": (n,)}}``,
        curves in order of first appearance, ``x`` sorted.
    """
    if band not in ("std", "minmax", "sem", "none"):
        raise ValueError(f"argument 'band' must be 'std', 'minmax', 'sem' or 'none', got {band!r}")
    groups: dict[Any, dict[float, list[float]]] = {}
    for rec in records:
        if x not in rec or y not in rec or (where is not None and not where(rec)):
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
                    "count": np.array([v.size for v in vals])}
    return out


def plot_curves(
    records: Sequence[Mapping[str, Any]],
    x: str,
    y: str | Sequence[str],
    by: str | None = None,
    *,
    band: str = "std",
    where: Callable[[Mapping[str, Any]], bool] | None = None,
    logy: bool | Sequence[bool] = False,
    hlines: Mapping[str, float] | Sequence[Mapping[str, float] | None] | None = None,
    titles: str | Sequence[str] | None = None,
    ylabels: Sequence[str] | None = None,
    xlabel: str | None = None,
    suptitle: str | None = None,
    order: Sequence[Any] | None = None,
    axes: Sequence[Any] | None = None,
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
        Labels; default to the keys.
    order : sequence, optional
        Order of the curves (values of ``by``); others follow in order of appearance.
    axes : sequence of matplotlib axes, optional
        Draw into these instead of a new figure.

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
    for i, (ax, key) in enumerate(zip(axes, ys, strict=False)):
        curves = aggregate(records, x, key, by, band=band, where=where)
        names = list(curves)
        if order is not None:
            names = [k for k in order if k in curves] + [k for k in names if k not in order]
        for name in names:
            c = curves[name]
            xs, mean, lo, hi = c["x"], c["mean"], c["lo"], c["hi"]
            if logys[i]:
                keep = mean > 0
                xs, mean = xs[keep], mean[keep]
                lo, hi = np.maximum(lo[keep], mean * 1e-3), hi[keep]
            label = str(name) if name is not None else key
            (line,) = ax.plot(xs, mean, label=label, lw=1.5)
            if band != "none" and np.any(hi > lo):
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        for label, value in (hl[i] or {}).items():
            ax.axhline(value, color="k", ls="--", lw=1.0, label=label)
        if logys[i]:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabels[i] if ylabels is not None else key)
        if ttl[i]:
            ax.set_title(ttl[i], fontsize=10)
        ax.grid(alpha=0.3)
        if names or hl[i]:
            ax.legend(fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    fig.tight_layout()
    return fig
