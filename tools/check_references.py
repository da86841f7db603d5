"""List every reference to a document that lives outside the repository.

rfed's user-facing text (docstrings, comments, CLI output, documentation) may cite a paper's
equation, section or algorithm, or a page of the repository's own ``docs/``; it may not point at
working notes a reader does not have. This script finds the kinds of reference that do:

========================  ===============================================================
kind                      examples
========================  ===============================================================
``spec``                  ``spec 000``, ``spec pitfall 11``, ``the spec's resolution``,
                          ``spec section 5.2``
``specs-path``            ``specs/004_prirfed.md``, ``anchors_manifolds.md``
``seed``                  ``seed 004``, ``(seed 004)`` (a paper's file id)
``pitfall``               ``P20``, ``pitfall P2``, ``P12-P13``
``line``                  ``paper L486``, ``[L48]``, ``L233-239`` (a line of a paper's text dump)
``issue``                 ``issue 11``, ``issue #9`` (the project's tracker)
``citation-key``          ``[HMJG24 Sec 5.1]`` (a key of a paper's own bibliography)
========================  ===============================================================

It scans the comments and string literals (docstrings included) of every Python file under
``rfed/`` and, with ``--cli``, the output of ``rfed list`` and ``rfed show NAME`` for every
experiment. Each hit is printed as ``path:line: kind: text``; the exit status is 1 when there is
any, 0 otherwise. Use it to sweep the package: ``python tools/check_references.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (kind, pattern): each pattern matches one reference in free text.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("specs-path", re.compile(r"\bspecs/[\w./-]*|\banchors_\w+\.md\b|\bengines\.md\b")),
    ("spec", re.compile(
        r"\b[Ss]pecs?(?:'s)?\s+(?:\d{3}\b|pitfall|P\d+|sections?\b|sec\.|§|\d+\.\d+|"
        r"\d\b|resolution|reading|reports|estimates|infers|suggests|default|derived|"
        r"checked|says)"
        r"|\b(?:the|its|a) spec(?:'s)?\b(?!\w)"
        r"|\bspec-derived\b|\bSpec\s+``")),
    ("seed", re.compile(r"\bseed 00\d\b")),
    ("pitfall", re.compile(r"(?<![\w.$\\/-])P\d{1,2}(?:-P\d{1,2})?\b(?![\w.]*\()"
                           r"|\bpitfalls?\s+(?:P?\d+)")),
    ("line", re.compile(r"\bpaper L\d+|\[L\d{1,4}(?:-L?\d+)?\]|(?<![\w.])L\d{2,4}(?:-L?\d+)?\b")),
    # the project's tracker; a public one named with its project ("Open MPI issue #14452") is
    # a citation like any other
    ("issue", re.compile(r"(?<!MPI )(?<!numpy )(?<!scipy )(?<!Flower )(?<!flwr )(?<!pymanopt )"
                         r"(?<!geomstats )(?<!geoopt )(?<!Opacus )(?<!accounting )"
                         r"(?:\b[Ii]ssue #?\d+\b|\b[Ii]ssues? \d+(?:,\s*\d+)*\b)")),
    ("citation-key", re.compile(r"\[[A-Z]{2,5}\+?\d{2}\b")),
]


@dataclass(frozen=True)
class Hit:
    """One reference found."""

    where: str
    line: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.kind}: {self.text}"


def find_in_text(text: str, where: str, first_line: int = 1) -> list[Hit]:
    """Every reference in ``text``; line numbers count from ``first_line``.

    Line breaks with their indentation count as one space, so a reference wrapped over two
    lines of a docstring is found (and one qualified on the previous line is recognised).
    """
    flat, line_of = [], []
    line, pending_space = first_line, False
    for ch in text:
        if ch == "\n":
            line += 1
            pending_space = True
            continue
        if pending_space:
            if ch in " \t":
                continue
            flat.append(" ")
            line_of.append(line)
            pending_space = False
        flat.append(ch)
        line_of.append(line)
    joined = "".join(flat)
    hits = []
    taken: list[tuple[int, int]] = []  # one hit per span: "spec P7" is not also "P7"
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(joined):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append(match.span())
            hits.append(Hit(where, line_of[match.start()], kind, match.group(0)))
    return sorted(hits, key=lambda h: h.line)


def find_in_python(path: Path) -> list[Hit]:
    """Every reference in the comments and string literals of one Python file."""
    hits = []
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    with path.open("rb") as handle:
        for tok in tokenize.tokenize(handle.readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING) or \
                    tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                hits += find_in_text(tok.string, rel, tok.start[0])
    return hits


def find_in_package(package: Path = ROOT / "rfed") -> list[Hit]:
    """Every reference in the package's Python files, sorted by file and line."""
    hits: list[Hit] = []
    for path in sorted(package.rglob("*.py")):
        hits += find_in_python(path)
    return hits


def cli_outputs() -> dict[str, str]:
    """What the user reads from the CLI: ``rfed list``, and ``rfed show NAME`` per experiment."""
    from rfed.cli import main
    from rfed.experiments import list_experiments

    commands = [["list"]] + [["show", e.name] for e in list_experiments()]
    outputs = {}
    for argv in commands:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(argv)
        if code != 0:
            raise RuntimeError(f"rfed {' '.join(argv)} exited with {code}")
        outputs["rfed " + " ".join(argv)] = buffer.getvalue()
    return outputs


def find_in_cli() -> list[Hit]:
    """Every reference in the CLI's output."""
    hits = []
    for command, text in cli_outputs().items():
        hits += find_in_text(text, f"<{command}>")
    return hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", action="store_true",
                        help="also scan the output of 'rfed list' and 'rfed show NAME'")
    parser.add_argument("--only-cli", action="store_true", help="scan the CLI output only")
    parser.add_argument("--summary", action="store_true",
                        help="print the number of references per kind and file only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    hits = [] if args.only_cli else find_in_package()
    if args.cli or args.only_cli:
        hits += find_in_cli()
    if args.summary:
        per_file: dict[str, int] = {}
        per_kind: dict[str, int] = {}
        for hit in hits:
            per_file[hit.where] = per_file.get(hit.where, 0) + 1
            per_kind[hit.kind] = per_kind.get(hit.kind, 0) + 1
        for where, count in sorted(per_file.items(), key=lambda kv: -kv[1]):
            print(f"{count:5d}  {where}")
        print("per kind: " + ", ".join(f"{k} {v}" for k, v in sorted(per_kind.items())))
    else:
        for hit in hits:
            print(hit)
    print(f"{len(hits)} reference(s) to documents outside the repository", file=sys.stderr)
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
