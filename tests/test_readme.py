"""Every ```python and ```bash block of README.md runs (or is skipped with a stated reason).

* python blocks run each in a fresh namespace, in a temporary folder; a number in a trailing
  comment of a top-level expression or assignment (``x = f()  # 0.7226``) must be the value
  computed, to the digits shown;
* bash blocks run their ``rfed ...`` lines through :func:`rfed.cli.main` with small settings
  appended (fewer rounds and repetitions); a block preceded by
  ``<!-- readme-test: skip (reason) -->`` is skipped with that reason;
* ``text`` blocks are synopses and are not run.
"""

import ast
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"((?:<!--[^\n]*-->\n)*)```(\w+)\n(.*?)```", re.S)
_SKIP = re.compile(r"<!-- readme-test: skip \((.+?)\) -->")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?")

#: Small values for the settings that make a run long (only those an experiment has).
SMALL = {"rounds": 4, "iterations": 4, "repetitions": 1, "mc_runs": 1, "eval_every": 2,
         "epochs": 1}


def _blocks():
    out = []
    text = README.read_text(encoding="utf-8")
    for match in _BLOCK.finditer(text):
        markers, lang, body = match.groups()
        line = text[: match.start(2)].count("\n") + 1
        skip = _SKIP.search(markers)
        out.append(pytest.param(lang, body, skip.group(1) if skip else None,
                                id=f"{lang}-line{line}"))
    return out


BLOCKS = _blocks()


def test_readme_has_blocks_of_each_kind():
    langs = [p.values[0] for p in BLOCKS]
    assert langs.count("python") >= 4 and langs.count("bash") >= 3
    assert set(langs) <= {"python", "bash", "text"}, "a block in a language the test ignores"


def _check_comment(source_lines, stmt, value):
    comment = source_lines[stmt.end_lineno - 1].partition("#")[2]
    match = _NUMBER.search(comment)
    if not match or isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        return
    shown = match.group(0).replace("_", "")
    decimals = len(shown.split(".")[1].split("e")[0]) if "." in shown else 0
    expected = float(shown)
    scale = 10.0 ** int(shown.split("e")[1]) if "e" in shown else 1.0
    assert abs(float(value) - expected) <= 0.5 * 10.0**-decimals * scale * (1 + 1e-9), (
        f"README line '{source_lines[stmt.end_lineno - 1].strip()}': computed {value!r}"
    )


@pytest.mark.parametrize("lang, body, skip", BLOCKS)
def test_readme_block(lang, body, skip, tmp_path, monkeypatch, capsys):
    if skip:
        pytest.skip(skip)
    monkeypatch.chdir(tmp_path)
    if lang == "python":
        tree = ast.parse(body)
        lines = body.splitlines()
        namespace: dict = {"__name__": "__readme__"}
        for stmt in tree.body:
            if isinstance(stmt, ast.Expr):
                value = eval(compile(ast.Expression(stmt.value), "README", "eval"), namespace)
            else:
                exec(compile(ast.Module([stmt], []), "README", "exec"), namespace)
                value = None
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    value = namespace[stmt.targets[0].id]
            _check_comment(lines, stmt, value)
    elif lang == "bash":
        from rfed.cli import main
        from rfed.experiments import get_experiment

        for raw in body.splitlines():
            line = raw.split("#")[0].strip()
            if not line:
                continue
            argv = shlex.split(line)
            assert argv[0] == "rfed", f"README bash line without a skip reason: {line}"
            args = argv[1:]
            if args[0] == "run":
                exp = get_experiment(args[1])
                for key, value in SMALL.items():
                    if key in exp.defaults:
                        args += ["--set", f"{key}={value}"]
                args.append("--no-progress")
            code = main(args)
            out = capsys.readouterr()
            assert code == 0, f"{line}: exit {code}: {out.err}"
            if args[0] == "run":
                assert "done in" in out.out
