"""What the user reads of an experiment: its one-line summary, its tables (markdown, CSV).

Every experiment ends with one summary table (:func:`summary_row` builds its rows,
:func:`format_summary_table` prints them): its utility beside a reference, the certified epsilon
and the accountant that certified it, the paper's figure and how many repetitions diverged.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "SUMMARY_COLUMNS",
    "clean_text",
    "format_summary_table",
    "format_table",
    "summarise_repetitions",
    "summary_row",
]


_INTERNAL_REFS = [
    (re.compile(r"\s*\(seed \d{3}\)"), ""),           # "PriRFed (seed 004)": a paper's file id
    (re.compile(r",?\s*\bL\d+(?:-\d+)?\b"), ""),      # ", L447-460": line numbers of the paper
    (re.compile(r"\s*\blines? \d+(?:-\d+)?\b"), ""),
    (re.compile(r"\(\s*[,;]?\s*\)"), ""),
    (re.compile(r"\(\s*,\s*"), "("),
    (re.compile(r"\s+,"), ","),
]


def clean_text(text: str) -> str:
    """``text`` without internal references (``(seed 004)``, line numbers such as ``L447-460``)."""
    for pattern, repl in _INTERNAL_REFS:
        text = pattern.sub(repl, text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


_ABBREVIATIONS = re.compile(r"\b(?:Figs?|Secs?|Eqs?|Thms?|e\.g|i\.e|vs|cf|al|resp|approx)\.$")
_SHORT_MAX = 100


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` up to its first colon, bracket or semicolon, <= 100 chars."""
    text = " ".join(text.split())
    end = len(text)
    for match in re.finditer(r"[.!?](?=\s|$)", text):
        if not _ABBREVIATIONS.search(text[: match.end()]):
            end = match.start()
            break
    first = text[:end]
    for sep in (": ", " (", "; ", " ["):
        cut = first.find(sep)
        if cut > 20:
            first = first[:cut]
    if len(first) > _SHORT_MAX:
        first = first[: first.rfind(" ", 0, _SHORT_MAX - 3)] + "..."
    return first.rstrip(" ,;")

#: Columns of the one summary table every experiment prints (see :func:`summary_row`).
SUMMARY_COLUMNS = ("setting", "utility_name", "utility", "utility_std", "reference_name",
                   "reference", "epsilon", "delta", "accountant", "figure", "repetitions",
                   "diverged", "epsilon_paper")


def summary_row(
    setting: str,
    *,
    utility_name: str,
    utility: float | None,
    utility_std: float | None = None,
    reference: float | None = None,
    reference_name: str = "",
    epsilon: float | None = None,
    delta: float | None = None,
    accountant: str = "",
    figure: str = "",
    repetitions: int | None = None,
    diverged: int = 0,
    epsilon_paper: float | None = None,
) -> dict:
    """One row of the summary table.

    Parameters
    ----------
    setting : str
        The curve / configuration, e.g. ``"eps=0.15"``.
    utility_name : str
        What ``utility`` measures, in words with its unit, e.g. ``"excess risk"`` or
        ``"test accuracy (%)"``.
    utility, utility_std : float or None
        Mean and standard deviation over the repetitions that did not diverge.
    reference, reference_name : float, str
        The value to compare with and what it is (``"non-private"``, ``"true value"``).
    epsilon, delta : float or None
        The **certified** budget of the setting (``inf`` without noise; ``None`` for a
        non-private run).
    accountant : str
        The accountant that certified ``epsilon``, e.g. ``"dp-accounting RDP, replace-one"``.
    figure : str
        The paper's figure or table the row reproduces, where there is one.
    repetitions, diverged : int
        Repetitions run and how many of them diverged.
    epsilon_paper : float, optional
        The paper's closed-form epsilon, shown beside the certified one, labelled as the
        paper's (never as the guarantee).
    """
    return {"setting": str(setting), "utility_name": str(utility_name),
            "utility": _num(utility), "utility_std": _num(utility_std),
            "reference_name": str(reference_name), "reference": _num(reference),
            "epsilon": _num(epsilon), "delta": _num(delta), "accountant": str(accountant),
            "figure": str(figure), "repetitions": repetitions, "diverged": int(diverged),
            "epsilon_paper": _num(epsilon_paper)}


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def format_value(v: Any) -> str:
    """A table cell: ``-`` for ``None``, floats with 4 significant digits (``nan``, ``inf``)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return str(v)


def format_summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary table as text: every row (never truncated), accountants as footnotes.

    Columns: setting, utility (``mean +- std``; its name in the header when all rows share
    it), the reference value, certified epsilon and delta with a footnote naming the
    accountant, the paper's figure, and ``diverged/repetitions``.
    """
    if not rows:
        return "(no settings)\n"
    names = list(dict.fromkeys(r["utility_name"] for r in rows))
    refs = list(dict.fromkeys(r["reference_name"] for r in rows if r.get("reference_name")))
    accountants = list(dict.fromkeys(r["accountant"] for r in rows if r.get("accountant")))
    one_name = len(names) == 1
    head = ["setting", f"{names[0]} (mean +- std)" if one_name else "utility (mean +- std)"]
    if not one_name:
        head.insert(1, "utility")
    ref_head = f"reference: {refs[0]}" if len(refs) == 1 else "reference"
    figures = list(dict.fromkeys(r.get("figure") or "" for r in rows))
    one_figure = len(figures) == 1
    head += [ref_head, "eps (certified)", "delta", "figure", "diverged"]
    with_paper = any(r.get("epsilon_paper") is not None for r in rows)
    if with_paper:
        head.insert(head.index("delta") + 1, "eps (paper's formula)")
    body = []
    for r in rows:
        util = format_value(r.get("utility"))
        if r.get("utility_std") is not None:
            util += f" +- {format_value(r['utility_std'])}"
        eps = format_value(r.get("epsilon"))
        if r.get("accountant"):
            eps += f" [{accountants.index(r['accountant']) + 1}]"
        ref = format_value(r.get("reference"))
        if len(refs) > 1 and r.get("reference_name"):
            ref += f" ({r['reference_name']})"
        reps = r.get("repetitions")
        line = [r["setting"], util, ref, eps, format_value(r.get("delta")), r.get("figure") or "-",
                f"{r.get('diverged', 0)}/{reps}" if reps is not None else
                str(r.get("diverged", 0))]
        if with_paper:
            line.insert(5, format_value(r.get("epsilon_paper")))
        if one_figure:
            line.pop(-2)
        if not one_name:
            line.insert(1, r["utility_name"])
        body.append(line)
    if one_figure:
        head.remove("figure")
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ([f"paper's figure: {figures[0]}"] if one_figure and figures[0] else [])
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    out += [f"[{i + 1}] accountant: {a}" for i, a in enumerate(accountants)]
    return "\n".join(out) + "\n"


def summarise_repetitions(
    results: Sequence[Any], metrics: Sequence[str] = ("excess_risk", "cost")
) -> dict:
    """Final metrics over the repetitions that did not diverge, and the count of those that did.

    Parameters
    ----------
    results : sequence of RunResult
        One per repetition (see :class:`rfed.algorithms.base.RunResult`).
    metrics : sequence of str
        History keys to summarise at each kept run's last record.

    Returns
    -------
    dict
        ``repetitions``, ``diverged`` (count), ``diverged_rounds`` (list), ``kept`` (the
        results that did not diverge) and, per metric, ``<metric>_mean`` / ``<metric>_std``
        over the kept runs' final values (NaN when no run was kept or none recorded it).
    """
    kept = [r for r in results if not getattr(r, "diverged", False)]
    lost = [r for r in results if getattr(r, "diverged", False)]
    out: dict[str, Any] = {"repetitions": len(results), "diverged": len(lost),
                           "diverged_rounds": [r.diverged_round for r in lost], "kept": kept}
    for m in metrics:
        vals = np.array([r.history[-1][m] for r in kept if r.history and m in r.history[-1]],
                        dtype=float)
        out[f"{m}_mean"] = float(vals.mean()) if vals.size else float("nan")
        out[f"{m}_std"] = float(vals.std()) if vals.size else float("nan")
    return out


def csv_text(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    """``rows`` as CSV text with the columns ``keys`` (a header line first)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(keys))
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def format_table(rows: list[Mapping[str, Any]], keys: list[str] | None = None) -> str:
    """A markdown table of ``rows`` (floats with 4 significant digits; every row)."""
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(format_value(r.get(k, "")) if r.get(k, "") != "" else ""
                                for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"

