"""Measured numbers quoted in the documentation, each tied to the results file it comes from.

A page quotes a measured number with the ``measured`` role, the value as printed followed by its
source in angle brackets::

    {measured}`19.9 <dpdl-digits[DPDL bipartite certified eps=4].utility>`

A source is one of

``NAME[ROW].COLUMN``
    the ``COLUMN`` of the one row of ``docs/results/NAME/summary_table.csv`` whose ``setting``
    contains ``ROW`` (the uniform table every experiment writes);
``NAME/TABLE[ROW].COLUMN``
    the same in ``docs/results/NAME/TABLE.csv`` (``NAME`` may name a subfolder,
    ``NAME/SUB/TABLE``; the first column identifies the row: every column's text is searched,
    so ``ROW`` may name several cells joined by ``&``; when several rows contain them, the
    one row whose cells equal them is meant);
``NAME:KEY/KEY/...``
    a value of ``docs/results/NAME/summary.json`` under its ``summary`` object;
``bench:FILE:REGEX``
    the first group of ``REGEX`` in the benchmark output ``docs/results/benchmarks/FILE``.

The printed value shows its precision: ``19.9`` is correct when the source rounds to it at one
decimal, ``2.8e-3`` when it rounds to two significant digits of that exponent. A trailing ``%``
multiplies a fraction by 100 first (``79% <...>`` quotes 0.79). :func:`check_pages` compares
every quote with its source; :func:`rewrite_pages` prints every quote again from its source,
in the same format; both are what ``docs/generate_results.py check`` and ``write`` run, and the
Sphinx role warns (so ``-W`` fails the build) on a quote that differs from its source.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
RESULTS = DOCS / "results"

#: ``{measured}`VALUE <SOURCE>``` in MyST markdown.
ROLE = re.compile(r"\{measured\}`(?P<value>[^<`]*?)\s*<(?P<source>[^>`]+)>`")
_NUMBER = re.compile(r"^(?P<num>[-+]?(?:\d[\d,]*)(?:\.\d+)?(?:[eE][-+]?\d+)?)(?P<pct>%?)$")


class QuoteError(ValueError):
    """A quote whose source cannot be read, or whose value cannot be parsed."""


@dataclass(frozen=True)
class Quote:
    """One quoted number on a page."""

    page: Path
    line: int
    value: str
    source: str

    def __str__(self) -> str:
        rel = self.page.relative_to(DOCS.parent) if self.page.is_relative_to(DOCS.parent) \
            else self.page
        return f"{rel}:{self.line}: {self.value} <{self.source}>"


def _table(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        raise QuoteError(f"no results table {path.relative_to(DOCS.parent)}")
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _row(rows: list[dict[str, str]], selector: str, where: str) -> dict[str, str]:
    parts = [p.strip() for p in selector.split("&")]
    first = next(iter(rows[0])) if rows else "setting"

    def matches(row):
        if "&" not in selector:
            return parts[0] in row.get(first, "")
        return all(any(p == cell or p in cell for cell in row.values()) for p in parts)

    found = [r for r in rows if matches(r)]
    if len(found) > 1 and "&" in selector:
        # several rows hold the parts inside longer cells (0.3 in 0.35...): the one row whose
        # cells equal every part names itself
        exact = [r for r in found if all(p in r.values() for p in parts)]
        found = exact if len(exact) == 1 else found
    if len(found) != 1:
        raise QuoteError(f"{where}: {len(found)} rows match [{selector}] (need exactly one)")
    return found[0]


def resolve(source: str, results: Path = RESULTS) -> float:
    """The number a source names (see the module docstring for the forms)."""
    if source.startswith("bench:"):
        _, name, pattern = source.split(":", 2)
        path = results / "benchmarks" / name
        if not path.exists():
            raise QuoteError(f"no benchmark output {path.relative_to(DOCS.parent)}")
        match = re.search(pattern, path.read_text(encoding="utf-8"))
        if match is None:
            raise QuoteError(f"{source}: the pattern matches nothing in {name}")
        return float(match.group(1).replace(",", ""))
    table_form = re.fullmatch(r"(?P<name>[\w./-]+?)(?:/(?P<table>[\w.-]+))?\[(?P<row>[^\]]+)\]"
                              r"\.(?P<column>[\w ()%.-]+)", source)
    if table_form is None and ":" in source:
        name, keys = source.split(":", 1)
        file = results / name / "summary.json"
        if not file.exists():
            raise QuoteError(f"no results file {file.relative_to(DOCS.parent)}")
        node = json.loads(file.read_text(encoding="utf-8"))["summary"]
        for key in keys.split("/"):
            key = key.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(key)]
            elif key in node:
                node = node[key]
            else:
                raise QuoteError(f"{source}: no key {key!r} (keys: {', '.join(node)})")
        if not isinstance(node, (int, float)) or isinstance(node, bool):
            raise QuoteError(f"{source}: not a number: {node!r}")
        return float(node)
    match = table_form
    if match is None:
        raise QuoteError(f"cannot read the source {source!r}")
    table = match["table"] or "summary_table"
    rows = _table(results / match["name"] / f"{table}.csv")
    row = _row(rows, match["row"], source)
    if match["column"] not in row:
        raise QuoteError(f"{source}: no column {match['column']!r} (columns: {', '.join(row)})")
    try:
        return float(row[match["column"]])
    except ValueError:
        raise QuoteError(f"{source}: not a number: {row[match['column']]!r}") from None


def _parse(value: str) -> tuple[float, int, int | None, bool]:
    """(number, decimals shown, exponent or None, percent) of a printed value."""
    match = _NUMBER.match(value.strip())
    if match is None:
        raise QuoteError(f"cannot read the quoted value {value!r}")
    text = match["num"].replace(",", "")
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(text), decimals, (int(exponent) if exponent else None), bool(match["pct"])


def agrees(value: str, actual: float) -> bool:
    """The printed ``value`` is ``actual`` rounded to the precision ``value`` shows."""
    number, decimals, exponent, percent = _parse(value)
    if percent:
        actual *= 100
    if not math.isfinite(actual):
        return False
    scale = 10.0 ** exponent if exponent is not None else 1.0
    return abs(actual - number) <= 0.5 * 10.0 ** -decimals * scale * (1 + 1e-9)


def reprint(value: str, actual: float) -> str:
    """``actual`` printed in the format of ``value`` (decimals, exponent, separators, %)."""
    number, decimals, exponent, percent = _parse(value)
    if percent:
        actual *= 100
    if exponent is not None:
        # the same significant digits, with the exponent the value now needs
        mantissa, _, power = f"{actual:.{decimals}e}".partition("e")
        sign = "+" if "e+" in value.lower() else ""
        text = f"{mantissa}e{int(power):{sign}d}"
    elif "," in value:
        text = f"{actual:,.{decimals}f}"
    else:
        text = f"{actual:.{decimals}f}"
    return text + ("%" if percent else "")


def quotes(page: Path) -> list[Quote]:
    """Every quote on one page, in order."""
    found = []
    for lineno, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        for match in ROLE.finditer(line):
            found.append(Quote(page, lineno, match["value"].strip(), match["source"].strip()))
    return found


def pages(docs: Path = DOCS) -> list[Path]:
    """The documentation's markdown pages (generated and build folders excluded)."""
    skip = {"_build", "api", "tutorials", "_pending"}
    return sorted(p for p in docs.rglob("*.md")
                  if not skip.intersection(p.relative_to(docs).parts[:1]))


def check_pages(docs: Path = DOCS, results: Path = RESULTS) -> list[str]:
    """One line per quote that differs from its source or cannot be read; empty when all agree."""
    problems = []
    for page in pages(docs):
        for quote in quotes(page):
            try:
                actual = resolve(quote.source, results)
                if not agrees(quote.value, actual):
                    problems.append(f"{quote}: the source says {actual!r}")
            except QuoteError as err:
                problems.append(f"{quote}: {err}")
    return problems


def rewrite_pages(docs: Path = DOCS, results: Path = RESULTS) -> list[Path]:
    """Print every quote again from its source; return the pages that changed."""
    changed = []
    for page in pages(docs):
        text = page.read_text(encoding="utf-8")

        def again(match):
            actual = resolve(match["source"].strip(), results)
            return f"{{measured}}`{reprint(match['value'].strip(), actual)} <{match['source']}>`"

        new = ROLE.sub(again, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed
