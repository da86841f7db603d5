"""What the user reads of an experiment: its one-line summary, its tables (markdown, CSV).

Every experiment ends with one summary table, a row per setting. A row (:func:`summary_row`)
holds the setting, the utility at the start and at the end (mean and standard deviation over the
repetitions that did not diverge), the non-private reference of the same algorithm, the certified
epsilon the run spent with its delta, neighbouring relation and accountant, the paper's figure and
how many repetitions diverged. :func:`format_summary_table` prints it for the console
(``rfed run``), every row, never truncated:

* the final value reads ``mean +- std (n=K)``, or ``value (n=1)``; a setting whose every
  repetition diverged reads ``diverged`` (never a number or ``nan``);
* a non-private row reads ``non-private`` in the epsilon column (never ``inf``), and a setting
  whose every repetition diverged reads ``diverged`` there too (never ``0``), as does a
  reference whose every repetition diverged (never ``nan``);
* the epsilon column is the run's certified epsilon, the relation and delta beside it and the
  accountant as a footnote;
* a private row that ends worse than its start is flagged in the last column, more loudly when
  it ends much worse (twice the start's excess, or half its accuracy).
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
    "MUCH_WORSE_FACTOR",
    "SUMMARY_COLUMNS",
    "choose_best",
    "clean_text",
    "format_summary_table",
    "format_table",
    "gap_closed",
    "relation_of",
    "summarise_repetitions",
    "summary_row",
    "worse_than_start",
]


_INTERNAL_REFS = [
    (re.compile(r"\s*\(seed \d{3}\)"), ""),           # a paper's file id in parentheses
    (re.compile(r",?\s*\bL\d+(?:-\d+)?\b"), ""),      # line numbers of a paper's text
    (re.compile(r"\s*\blines? \d+(?:-\d+)?\b"), ""),
    (re.compile(r"\(\s*[,;]?\s*\)"), ""),
    (re.compile(r"\(\s*,\s*"), "("),
    (re.compile(r"\s+,"), ","),
]


def clean_text(text: str) -> str:
    """``text`` without internal references (a paper's file id, line numbers of its text).

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
    for pattern, repl in _INTERNAL_REFS:
        text = pattern.sub(repl, text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


_ABBREVIATIONS = re.compile(r"\b(?:Figs?|Secs?|Eqs?|Thms?|e\.g|i\.e|vs|cf|al|resp|approx)\.$")
_SHORT_MAX = 100


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` up to its first colon, bracket or semicolon, <= 100 chars.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
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
                   "diverged", "epsilon_paper", "start", "higher_is_better", "relation")

#: A private result is flagged "much worse than its start" past this factor: a loss-like
#: utility above ``factor x start``, an accuracy-like one below ``start / factor``.
MUCH_WORSE_FACTOR = 2.0


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
    start: float | None = None,
    higher_is_better: bool | None = None,
    relation: str = "",
) -> dict:
    """One row of the summary table.

    Parameters
    ----------
    setting : str
        The curve / configuration, e.g. ``"DP-RSGD, planned eps<=1"``.
    utility_name : str
        What ``utility`` measures, in words with its unit, e.g. ``"excess risk"`` or
        ``"test accuracy (%)"``.
    utility, utility_std : float or None
        Mean and standard deviation of the final value over the repetitions that did not
        diverge (``None``/NaN when every repetition diverged).
    reference, reference_name : float, str
        The value to compare with and what it is (``"non-private"``: the same algorithm
        without noise; ``"true value"``).
    epsilon, delta : float or None
        The **certified** budget the run spent (its ledger), ``None`` (or ``inf``) for a
        non-private run.
    accountant : str
        The accountant that certified ``epsilon``, e.g. ``"dp-accounting RDP, replace-one"``.
    figure : str
        The paper's figure or table the row reproduces, where there is one.
    repetitions, diverged : int
        Repetitions run and how many of them diverged.
    epsilon_paper : float, optional
        The paper's closed-form epsilon, shown beside the certified one, labelled as the
        paper's (never as the guarantee).
    start : float, optional
        The utility at the start (round 0, mean over the repetitions).
    higher_is_better : bool, optional
        Whether a larger utility is better (default: when ``utility_name`` names an accuracy
        or a gap closed).
    relation : str
        The neighbouring relation of ``epsilon`` (default: read from ``accountant``).

    Returns
    -------
    dict
        The row, with every key of :data:`SUMMARY_COLUMNS`.
    """
    if higher_is_better is None:
        name = str(utility_name).lower()
        higher_is_better = "accuracy" in name or "gap closed" in name
    private = epsilon is not None and not (isinstance(epsilon, float) and math.isinf(epsilon))
    return {"setting": str(setting), "utility_name": str(utility_name),
            "utility": _num(utility), "utility_std": _num(utility_std),
            "reference_name": str(reference_name), "reference": _num(reference),
            "epsilon": _num(epsilon), "delta": _num(delta), "accountant": str(accountant),
            "figure": str(figure), "repetitions": repetitions, "diverged": int(diverged),
            "epsilon_paper": _num(epsilon_paper), "start": _num(start),
            "higher_is_better": bool(higher_is_better),
            "relation": (str(relation) or relation_of(str(accountant))) if private else ""}


def relation_of(accountant: str) -> str:
    """The neighbouring relation an accountant's description states (``""`` if none).

    Parameters
    ----------
    accountant : str
        The accountant's description in a privacy report.

    Returns
    -------
    str
        The relation, e.g. ``"replace-one"``.
    """
    text = accountant.lower()
    if "cost function" in text or "cost-function" in text or "adjacency" in text:
        # DP-DGT's relation: one agent's cost function changes, gradients within an l1 radius
        radius = re.search(r"(?:<=|radius)\s*([0-9.eE+-]+)", accountant)
        return "cost-function" + (f" (l1 radius {radius.group(1)})" if radius else "")
    if "add_remove" in text or "add/remove" in text or "add-remove" in text:
        return "add/remove"
    if "replace_one" in text or "replace-one" in text:
        return "replace-one"
    return ""


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def format_value(v: Any) -> str:
    """A table cell: ``-`` for ``None``, floats with 4 significant digits (``nan``, ``inf``).

    Parameters
    ----------
    v : object
        The value.

    Returns
    -------
    str
    """
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


def _private(row: Mapping[str, Any]) -> bool:
    eps = row.get("epsilon")
    return eps is not None and math.isfinite(float(eps))


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(float(v))


def gap_closed(row: Mapping[str, Any]) -> float | None:
    """The fraction of the gap from a summary row's start to its non-private reference that its
    final value closes.

    Parameters
    ----------
    row : mapping
        A :func:`summary_row` (``start``, ``utility``, ``reference``).

    Returns
    -------
    float or None
        1: as good as the reference, 0: no better than the start, negative: worse; ``None``
        without a finite start, final value and reference, or when start and reference
        coincide.
    """
    start, final, ref = (row.get(k) for k in ("start", "utility", "reference"))
    if not (_finite(start) and _finite(final) and _finite(ref)):
        return None
    start, final, ref = float(start), float(final), float(ref)  # type: ignore[arg-type]
    if ref == start:
        return None
    return (final - start) / (ref - start)


def worse_than_start(row: Mapping[str, Any]) -> str:
    """``"much worse"``, ``"worse"`` or ``""``: how a row's final value compares with its start.

    Only finite values compare; equal values are not worse.

    Parameters
    ----------
    row : mapping
        A summary row.

    Returns
    -------
    str
    """
    if not (_finite(row.get("utility")) and _finite(row.get("start"))):
        return ""
    final, start = float(row["utility"]), float(row["start"])
    if row.get("higher_is_better"):
        if final >= start:
            return ""
        return "much worse" if start > 0 and final < start / MUCH_WORSE_FACTOR else "worse"
    if final <= start:
        return ""
    return "much worse" if start >= 0 and final > MUCH_WORSE_FACTOR * start else "worse"


def _final_cell(row: Mapping[str, Any]) -> str:
    reps = row.get("repetitions")
    lost = int(row.get("diverged") or 0)
    kept = (reps - lost) if reps is not None else None
    if reps is not None and kept == 0:
        return "diverged"
    util = row.get("utility")
    if not _finite(util):
        return "diverged" if lost else format_value(util)
    text = format_value(util)
    if kept is not None and kept > 1 and row.get("utility_std") is not None:
        text += f" +- {format_value(row['utility_std'])}"
    if kept is not None:
        text += f" (n={kept})"
    return text


def format_summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary table as text: every row (never truncated), accountants as footnotes.

    Columns: setting; the utility at the start; its final value (``mean +- std (n=K)``, ``value
    (n=1)``, or ``diverged``; its name in the header when all rows share it); the non-private
    reference; the certified epsilon the run spent (``non-private`` for a run without noise)
    with the relation and delta beside it and a footnote naming the accountant; the paper's
    epsilon formula where a row has one; the paper's figure when the rows differ;
    ``diverged/repetitions``; and a note flagging a private row worse than its start.

    Parameters
    ----------
    rows : sequence of mapping
        The summary rows.

    Returns
    -------
    str
    """
    if not rows:
        return "(no settings)\n"
    names = list(dict.fromkeys(r["utility_name"] for r in rows))
    refs = list(dict.fromkeys(r["reference_name"] for r in rows if r.get("reference_name")))
    accountants = list(dict.fromkeys(r["accountant"] for r in rows
                                     if r.get("accountant") and _private(r)
                                     and _final_cell(r) != "diverged"))
    one_name = len(names) == 1
    figures = list(dict.fromkeys(r.get("figure") or "" for r in rows))
    one_figure = len(figures) == 1
    with_start = any(r.get("start") is not None for r in rows)
    with_paper = any(r.get("epsilon_paper") is not None for r in rows)
    head = ["setting"]
    if not one_name:
        head.append("utility")
    if with_start:
        head.append("start")
    head.append(f"final {names[0]}" if one_name else "final")
    head.append(f"reference: {refs[0]}" if len(refs) == 1 else "reference")
    head += ["eps (certified)", "relation, delta"]
    if with_paper:
        head.append("eps (paper's formula)")
    if not one_figure:
        head.append("figure")
    head += ["diverged", "note"]
    body = []
    notes = False
    for r in rows:
        line = [r["setting"]]
        if not one_name:
            line.append(r["utility_name"])
        if with_start:
            line.append(format_value(r.get("start")))
        line.append(_final_cell(r))
        # a reference whose every run diverged has no value: it reads "diverged", never nan
        ref = ("diverged" if r.get("reference") is not None and not _finite(r.get("reference"))
               else format_value(r.get("reference")))
        if len(refs) > 1 and r.get("reference_name") and r.get("reference") is not None:
            ref += f" ({r['reference_name']})"
        line.append(ref)
        if _final_cell(r) == "diverged":
            # no run finished: its ledger's figure (what it spent before failing) is no result
            line += ["diverged", "-"]
        elif _private(r):
            eps = format_value(r["epsilon"])
            if r.get("accountant") in accountants:
                eps += f" [{accountants.index(r['accountant']) + 1}]"
            relation = r.get("relation") or relation_of(str(r.get("accountant") or ""))
            line += [eps, f"{relation or '?'}, delta={format_value(r.get('delta'))}"]
        else:
            line += ["non-private", "-"]
        if with_paper:
            line.append(format_value(r.get("epsilon_paper")) if _private(r) else "-")
        if not one_figure:
            line.append(r.get("figure") or "-")
        reps = r.get("repetitions")
        line.append(f"{r.get('diverged', 0)}/{reps}" if reps is not None else
                    str(r.get("diverged", 0)))
        worse = worse_than_start(r) if _private(r) else ""
        note = {"much worse": "MUCH WORSE than start", "worse": "worse than start"}.get(worse, "")
        notes = notes or bool(note)
        line.append(note)
        body.append(line)
    if not notes:
        head.pop()
        body = [b[:-1] for b in body]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ([f"paper's figure: {figures[0]}"] if one_figure and figures[0] else [])
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    out += [f"[{i + 1}] accountant: {a}" for i, a in enumerate(accountants)]
    if notes:
        out.append(f"note: 'MUCH WORSE than start' = a private final value past "
                   f"{MUCH_WORSE_FACTOR:g}x its start's (an accuracy below 1/"
                   f"{MUCH_WORSE_FACTOR:g} of it)")
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
    """``rows`` as CSV text with the columns ``keys`` (a header line first).

    Parameters
    ----------
    rows : sequence of mapping
        The rows.
    keys : sequence of str
        The columns, in order.

    Returns
    -------
    str
    """
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(keys))
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def format_table(rows: Sequence[Mapping[str, Any]], keys: list[str] | None = None) -> str:
    """A markdown table of ``rows`` (floats with 4 significant digits; every row).

    Parameters
    ----------
    rows : sequence of mapping
        The rows.
    keys : list of str, optional
        The columns; all keys of the rows, in order of appearance, when ``None``.

    Returns
    -------
    str
    """
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(format_value(r.get(k, "")) if r.get(k, "") != "" else ""
                                for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"



def choose_best(rows: Sequence[dict[str, Any]], score: str, keys: Sequence[str], *,
                higher_is_better: bool = False) -> dict[str, Any]:
    """Mark the choice of a tuning table: the first row with the best ``score`` wins.

    Every row gets ``row["chosen"]``: ``True`` for the rows whose ``keys`` equal the winner's,
    ``False`` otherwise. The first row with a strictly better score than all before it wins,
    so a later tie never displaces an earlier row and a NaN never wins unless it comes first.

    Parameters
    ----------
    rows : sequence of dict
        The tuning rows of one search, in the order they were run (changed in place).
    score : str
        The column holding each row's public score.
    keys : sequence of str
        The columns naming the hyperparameters of a row (e.g. ``["alpha"]``).
    higher_is_better : bool, default False
        ``True`` for accuracies, ``False`` for costs and excess risks.

    Returns
    -------
    dict
        The winning row.
    """
    if not rows:
        raise ValueError("argument 'rows' holds no tuning row to choose from")
    best = rows[0]
    for row in rows[1:]:
        if (row[score] > best[score]) if higher_is_better else (row[score] < best[score]):
            best = row
    chosen = tuple(best[k] for k in keys)
    for row in rows:
        row["chosen"] = tuple(row[k] for k in keys) == chosen
    return best
