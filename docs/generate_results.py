"""The documentation's measured numbers: import results, print them into the pages, check them.

Every measured number the documentation quotes comes from a results file committed under
``docs/results/``, written by a command that the page names:

* ``docs/results/NAME/`` holds what ``rfed run NAME`` wrote (``summary.json``, the ``*.csv``
  tables, one figure) and ``provenance.json`` (the command, the commit, the date, the
  versions); ``results.md`` beside them is generated from them;
* ``docs/results/benchmarks/FILE.txt`` holds the table a benchmark script printed.

Commands (from the repository root)::

    python docs/generate_results.py import NAME RUN_DIR [--command "rfed run NAME"] [--into F]
    python docs/generate_results.py import-bench FILE.txt --command "python benchmarks/X.py" \
        [--commit C]
    python docs/generate_results.py write     # results.md fragments and every quoted number
    python docs/generate_results.py check     # exit 1 if any quote or fragment differs

``check`` is what the test suite runs (``tests/docs/test_docs_numbers.py``); the Sphinx build
also fails on a quote that differs from its source.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
RESULTS = DOCS / "results"
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))

import measured  # noqa: E402

#: The figures shown for each experiment (its first PNG otherwise).
FIGURES = {
    "dpdgt-ieee14": ("fig4_accuracy_privacy.png",),
    "dpdl-digits": ("fig_bipartite.png",),
    "dpdl-digits-paper-ring": ("fig_ring-N10-ad0.25.png", "fig_ring-N30-ad0.25.png"),
    "prirfed-fig5": ("fig5.png", "fig6_poincare.png"),
    "dpdda-svm": ("fig1_l2_convergence.png", "fig2_l2_privacy_utility.png",
                  "fig3_l1_convergence.png"),
}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _provenance(command: str, commit: str | None = None) -> dict:
    import numpy

    import rfed

    if commit is None:
        dirty = bool(_git("status", "--porcelain", "--", "rfed"))
        commit = _git("rev-parse", "HEAD") + (" (with uncommitted changes under rfed/)"
                                              if dirty else "")
    else:
        commit = _git("rev-parse", commit)
    return {
        "command": command,
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "rfed": rfed.__version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "machine": platform.machine(),
    }


def import_run(name: str, run_dir: Path, command: str | None,
               commit: str | None = None, into: str | None = None) -> Path:
    """Copy what ``rfed run NAME`` wrote in ``run_dir`` into ``docs/results/NAME`` (or into
    ``docs/results/INTO``, e.g. one of the experiment's named scales beside its paper-scale
    results, or ``NAME/SUB``, a second run of the same experiment that the pages quote as
    ``NAME/SUB:...``).

    The folder's files are replaced; its subfolders (results imported there by hand, e.g. a
    second grid of the same experiment) are kept.
    """
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    if summary.get("experiment") != name:
        raise SystemExit(f"{run_dir}/summary.json is for {summary.get('experiment')!r}, "
                         f"not {name!r}")
    folder = name if into is None else into
    parts = folder.split("/")
    if (not folder or "\\" in folder or len(parts) > 2
            or any(not part or part.startswith(".") for part in parts)):
        raise SystemExit(f"--into must name a folder under docs/results, or a subfolder of one "
                         f"(FOLDER/SUB, e.g. {name}/second-grid), got {folder!r}")
    out = RESULTS / folder
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if not old.is_dir():
            old.unlink()
    for path in sorted(run_dir.iterdir()):
        if path.name in ("summary.json", "config.json", "privacy.json") or \
                (path.suffix == ".csv" and path.name != "history.csv"):
            shutil.copy2(path, out / path.name)
    pngs = sorted(run_dir.glob("*.png"))
    figures = [run_dir / f for f in FIGURES[folder]] if folder in FIGURES else pngs[:1]
    for figure in figures:
        shutil.copy2(figure, out / figure.name)
    seed = summary.get("seed", 0)
    command = command or f"rfed run {name}" + (f" --seed {seed}" if seed else "")
    (out / "provenance.json").write_text(json.dumps(_provenance(command, commit), indent=1) + "\n",
                                         encoding="utf-8")
    return out


def import_bench(path: Path, command: str, commit: str | None = None) -> Path:
    """Copy a benchmark's printed table into ``docs/results/benchmarks`` with its command and
    the commit whose code ran it (``commit``; default HEAD at import time)."""
    out = RESULTS / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8")
    prov = _provenance(command, commit)
    header = "".join(f"# {k}: {v}\n" for k, v in prov.items())
    (out / path.name).write_text(header + text, encoding="utf-8")
    return out / path.name


def relation(accountant: str) -> str:
    """The neighbouring relation an accountant string states."""
    if "relation:" in accountant:
        return accountant.split("relation:", 1)[1].split(";")[0].strip()
    if "adjacency" in accountant:  # e.g. "cost-function adjacency, radius 0.01" (DP-DGT's)
        return accountant
    if "add_remove" in accountant or "add/remove" in accountant:
        return "add/remove"
    if "replace_one" in accountant or "replace-one" in accountant:
        return "replace-one"
    return ""


def _num(text: str) -> str:
    if text in ("", None):
        return "-"
    try:
        value = float(text)
    except ValueError:
        return text
    return f"{value:.4g}"


def fragment(name: str) -> str:
    """``results.md`` of one experiment: its table, figure and provenance, from its files."""
    folder = RESULTS / name
    prov = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    with (folder / "summary_table.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    out = [f"<!-- generated by docs/generate_results.py from docs/results/{name}/; "
           "do not edit -->", ""]
    if rows:
        utility = rows[0]["utility_name"].replace("|", "\\|")
        with_start = any(row.get("start") not in ("", None) for row in rows)
        out += [f"| setting | {'start | ' if with_start else ''}{utility} | reference | "
                "certified epsilon | delta | relation | diverged |",
                "|---|" + ("---|" if with_start else "") + "---|---|---|---|---|---|"]
        for row in rows:
            std = row.get("utility_std", "")
            reps = row.get("repetitions", "")
            div = row.get("diverged", "")
            # the console's rules (rfed.experiments.tables): a setting whose every repetition
            # diverged reads "diverged" in the value and epsilon columns, never nan or 0
            all_diverged = reps not in ("", None) and div not in ("", None) \
                and int(div) >= int(reps) > 0
            value = _num(row["utility"]) + (f" ± {_num(std)}" if std not in ("", None)
                                            and reps not in ("1", "") else "")
            if all_diverged:
                value = "diverged"
            if reps:
                value += f" (n={reps})"
            # a reference whose every run diverged reads "diverged" too, never nan
            ref_value = "diverged" if row.get("reference") == "nan" else _num(row["reference"])
            ref = f"{ref_value} ({row['reference_name']})" if row.get("reference") else "-"
            private = row["epsilon"] not in ("", "inf")
            eps = _num(row["epsilon"]) if private else "non-private"
            rel = relation(row.get("accountant", "")) if private else "-"
            delta = _num(row["delta"]) if private else "-"
            if all_diverged:
                eps, delta, rel = "diverged", "-", "-"
            div = f"{div}/{reps}" if reps and div != "" else (div or "-")
            start = [_num(row.get("start", ""))] if with_start else []
            cells = [row["setting"], *start, value, ref, eps, delta, rel, div]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    pngs = sorted(folder.glob("*.png"))
    for png in pngs:
        out += [f"![{name}: {png.stem}]({png.name})", ""]
    commit = prov["commit"]
    out += [f"Written by `{prov['command']}` at commit `{commit[:12]}{commit[40:]}` "
            f"({prov['date']}, rfed {prov['rfed']}, Python {prov['python']}, numpy "
            f"{prov['numpy']}); files: `docs/results/{name}/`.", ""]
    return "\n".join(out)


BIBLIOGRAPHY = DOCS / "bibliography.md"


def bibliography() -> str:
    """``docs/bibliography.md``, from :mod:`rfed.bibliography` (one labelled entry per work)."""
    from rfed.bibliography import METHODS, PAPERS

    out = ["<!-- generated by docs/generate_results.py from rfed/bibliography.py; "
           "do not edit -->",
           "", "(bibliography)=", "# Bibliography", "",
           "Every work rfed implements, reproduces or compares against. `rfed show NAME` prints "
           "the entries of an experiment; the module docstring of each algorithm cites its "
           "paper.", "",
           "## The five papers", ""]

    def entry(ref):
        text = f"{ref.author_text}. *{ref.title}.* "
        if ref.venue == "arXiv preprint" and ref.arxiv:
            link = f"[arXiv:{ref.arxiv}](https://arxiv.org/abs/{ref.arxiv})"
            text += f"arXiv preprint {link}, {ref.year}."
        else:
            text += f"{ref.venue}, {ref.year}."
            if ref.arxiv:
                text += f" [arXiv:{ref.arxiv}](https://arxiv.org/abs/{ref.arxiv})."
        surnames = [a.split()[-1] for a in ref.authors]
        short = (surnames[0] if len(surnames) == 1 else " and ".join(surnames)
                 if len(surnames) == 2 else f"{surnames[0]} et al.")
        head = f"{short} {ref.year}" + (f" ({ref.names[0]})" if ref.names else "")
        return [f"(bib-{ref.key})=", f"### {head}", "", text, ""]

    for ref in PAPERS.values():
        out += entry(ref)
    out += ["## Methods, tools and data", ""]
    for ref in METHODS.values():
        out += entry(ref)
    return "\n".join(out)


def experiments() -> list[str]:
    return sorted(p.name for p in RESULTS.iterdir()
                  if p.is_dir() and (p / "summary.json").exists())


def write() -> list[Path]:
    """Regenerate every fragment and every quoted number; return what changed."""
    changed = []
    for name in experiments():
        path = RESULTS / name / "results.md"
        text = fragment(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    text = bibliography()
    if not BIBLIOGRAPHY.exists() or BIBLIOGRAPHY.read_text(encoding="utf-8") != text:
        BIBLIOGRAPHY.write_text(text, encoding="utf-8")
        changed.append(BIBLIOGRAPHY)
    changed += measured.rewrite_pages(DOCS, RESULTS)
    return changed


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check() -> list[str]:
    """Every difference between a page or fragment and its source; empty when none."""
    problems = []
    for name in experiments():
        path = RESULTS / name / "results.md"
        if not path.exists():
            problems.append(f"{_rel(path)}: missing (run 'write')")
        elif path.read_text(encoding="utf-8") != fragment(name):
            problems.append(f"{_rel(path)}: differs from its results files "
                            "(edited by hand? run 'write')")
    if not BIBLIOGRAPHY.exists() or BIBLIOGRAPHY.read_text(encoding="utf-8") != bibliography():
        problems.append(f"{_rel(BIBLIOGRAPHY)}: differs from rfed/bibliography.py "
                        "(run 'write')")
    problems += measured.check_pages(DOCS, RESULTS)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    imp = sub.add_parser("import", help="copy an rfed run's results into docs/results/NAME")
    imp.add_argument("name")
    imp.add_argument("run_dir", type=Path)
    imp.add_argument("--command", default=None, help="the command that wrote RUN_DIR "
                     "(default: rfed run NAME)")
    imp.add_argument("--commit", default=None, help="the commit whose code wrote RUN_DIR "
                     "(default: HEAD)")
    imp.add_argument("--into", default=None, metavar="FOLDER",
                     help="import into docs/results/FOLDER instead of docs/results/NAME "
                     "(e.g. NAME-paper-ring for a named scale beside the paper scale's)")
    bench = sub.add_parser("import-bench", help="copy a benchmark's output")
    bench.add_argument("file", type=Path)
    bench.add_argument("--command", required=True)
    bench.add_argument("--commit", default=None, help="the commit whose code ran the benchmark "
                       "(default: HEAD)")
    sub.add_parser("write", help="regenerate the fragments and every quoted number")
    sub.add_parser("check", help="exit 1 if a quote or fragment differs from its source")
    args = parser.parse_args(argv)
    if args.action == "import":
        print(import_run(args.name, args.run_dir, args.command, args.commit, args.into))
    elif args.action == "import-bench":
        print(import_bench(args.file, args.command, args.commit))
    elif args.action == "write":
        for path in write():
            print(f"wrote {_rel(path)}")
    else:
        problems = check()
        for line in problems:
            print(line)
        n_quotes = sum(len(measured.quotes(p)) for p in measured.pages(DOCS))
        print(f"{n_quotes} quoted numbers, {len(experiments())} results folders: "
              f"{len(problems)} difference(s)", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
