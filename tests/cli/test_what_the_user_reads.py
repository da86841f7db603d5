"""What the user reads: rfed list / show / run NAME --help / --version, the summary table,
summaries that exclude diverged repetitions, one progress bar, no BrokenPipeError."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed import __version__
from rfed.algorithms.base import RunResult
from rfed.cli import main
from rfed.experiments import list_experiments
from rfed.experiments.registry import (
    RunContext,
    clean_text,
    format_summary_table,
    summarise_repetitions,
    summary_row,
)

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"seed \d{3}|\bL\d{2,}\b|\blines? \d")


def test_list_is_one_short_line_per_experiment_without_internal_references(capsys):
    assert main(["list"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
    names = [e.name for e in list_experiments()]
    rows = [x for x in lines if x.split()[0] in names]
    assert [x.split()[0] for x in rows] == names          # one line each, in order
    assert all(len(x) <= 200 for x in rows)
    assert not any(INTERNAL.search(x) for x in lines)


def test_clean_text_strips_paper_file_ids_and_line_numbers():
    assert clean_text("PriRFed (seed 004), Fig. 1 (Sec. 6.1, L447-460)") == \
        "PriRFed, Fig. 1 (Sec. 6.1)"
    assert clean_text("DO-ADP (seed 000), Sec. VI-A") == "DO-ADP, Sec. VI-A"


def test_show_and_run_help_print_the_description_and_settings(capsys):
    exp = list_experiments()[0]
    for argv in (["show", exp.name], ["run", exp.name, "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "settings (--set KEY=VALUE):" in out
        assert all(k in out for k in exp.defaults)
        assert clean_text(exp.description)[:40].split()[0] in out
    assert main(["show", "nope"]) == 2
    assert "unknown experiment" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"rfed {__version__}"


def test_no_broken_pipe_error_when_piped_into_head():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(f"'{sys.executable}' -m rfed.cli list | head -n 1", shell=True,
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.stdout.count("\n") == 1
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr


def _result(final, diverged_round=None):
    return RunResult(x=np.zeros(1), history=[{"round": 0, "excess_risk": 9.0},
                                             {"round": 5, "excess_risk": final}],
                     diverged=diverged_round is not None, diverged_round=diverged_round)


def test_summarise_repetitions_excludes_and_counts_the_diverged():
    s = summarise_repetitions([_result(1.0), _result(np.nan, 3), _result(3.0)],
                              metrics=("excess_risk",))
    assert s["repetitions"] == 3 and s["diverged"] == 1 and s["diverged_rounds"] == [3]
    assert s["excess_risk_mean"] == 2.0 and s["excess_risk_std"] == 1.0
    assert len(s["kept"]) == 2
    none = summarise_repetitions([_result(1.0, 2)], metrics=("excess_risk",))
    assert np.isnan(none["excess_risk_mean"]) and none["diverged"] == 1


def test_summary_table_shows_every_row_with_utility_reference_budget_and_accountant():
    acc = "dp-accounting RDP, replace-one"
    rows = [summary_row(f"eps={e}", utility_name="excess risk", utility=1.0 / e,
                        utility_std=0.1, reference=0.5, reference_name="non-private",
                        epsilon=e, delta=1e-5, accountant=acc, figure="Fig. 1",
                        repetitions=3, diverged=int(e == 4))
            for e in range(1, 19)]
    rows.append(summary_row("non-private", utility_name="excess risk", utility=0.5,
                            epsilon=float("inf"), repetitions=3))
    ctx = RunContext(seed=0)
    text = ctx.summary_table(rows)
    lines = text.splitlines()
    assert "final excess risk" in lines[0] and "reference: non-private" in lines[0]
    assert any(x.startswith("eps=1 ") and "+- 0.1 (n=3)" in x for x in lines)   # mean +- std
    assert "eps (certified)" in lines[0] and "diverged" in lines[0]
    assert len([x for x in lines if x.startswith("eps=")]) == 18          # never truncated
    assert any(x.startswith("eps=4 ") and x.rstrip().endswith("1/3") for x in lines)
    assert f"[1] accountant: {acc}" in text and "inf" not in text   # "non-private", not inf
    assert any(x.startswith("non-private ") and "non-private" in x[12:] for x in lines)
    assert ctx.tables["summary_table"][0]["setting"] == "eps=1"
    assert format_summary_table([]) == "(no settings)\n"
    with pytest.raises(ValueError, match="summary_row"):
        ctx.summary_table([{"setting": "x"}])


def test_one_progress_bar_per_experiment_labelled_by_setting(capsys):
    ctx = RunContext(seed=0, progress=True)
    ctx.open("demo", {})
    first = ctx.progress_bar(10, setting="eps=0.1")
    first.update(10)
    second = ctx.progress_bar(5)
    ctx.log(setting="eps=0.3", round=1)
    assert second is first and first._bar.desc.startswith("demo [eps=0.3]")
    assert first._bar.total == 5
    ctx.finish({}, {})
    assert first._bar is None


def test_default_output_folder_is_ignored_by_git_and_named_in_the_readme():
    from rfed.cli import DEFAULT_OUT

    ignored = (ROOT / ".gitignore").read_text().split()
    assert f"/{DEFAULT_OUT}/" in ignored or f"{DEFAULT_OUT}/" in ignored
    assert f"`{DEFAULT_OUT}/NAME`" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("setting, message", [
    ("roundz=3", "has no setting 'roundz'; valid settings: "),
    ("rounds=foo", "setting 'rounds': cannot read 'foo' as an int (default 2000)"),
    ("n_agents=1.5", "setting 'n_agents' must be an int (default 16), got 1.5"),
    ("epsilons=[1.0, 'a']", "setting 'epsilons' holds numbers (default [2.0, 8.0, 32.0]), "
                            "got 'a'"),
    ("epsilons=[-1.0]", "setting 'epsilons' holds numbers > 0"),
    ("epsilons=[nan]", "setting 'epsilons': cannot read"),
    ("epsilons=[1e999]", "setting 'epsilons' holds numbers (default"),
    ("epsilons=[True]", "setting 'epsilons' holds numbers (default"),
    ("step_size=foo", "setting 'step_size'"),
    ("non_private=maybe", "setting 'non_private' must be true or false (also yes/no, on/off, "
                          "1/0), got 'maybe'"),
])
def test_set_typos_and_bad_values_name_the_setting_and_leave_nothing(setting, message,
                                                                     tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "pca-synthetic", "--set", setting, "--out", str(out),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("spelled, value", [
    ("false", False), ("False", False), ("no", False), ("off", False), ("0", False),
    ("true", True), ("TRUE", True), ("yes", True), ("on", True), ("1", True),
])
def test_a_boolean_setting_takes_the_usual_spellings(spelled, value):
    from rfed.experiments.registry import get_experiment

    assert get_experiment("pca-synthetic").config({"non_private": spelled})["non_private"] \
        is value


def test_set_list_settings_of_other_experiments(capsys, tmp_path):
    # int lists stay int, names stay names, a zero in the default allows zeros
    from rfed.experiments.registry import get_experiment

    assert get_experiment("dpdgt-ieee14").config({"thetas": "[0.0, 0.5]"})["thetas"] == [0.0, 0.5]
    with pytest.raises(ValueError, match="'thetas' holds numbers >= 0"):
        get_experiment("dpdgt-ieee14").config({"thetas": "[-0.1]"})
    with pytest.raises(ValueError, match="'agents' holds ints"):
        get_experiment("prirfed-fig3").config({"agents": "[20.5]"})
    with pytest.raises(ValueError, match="'topologies' holds names"):
        get_experiment("dpdl-digits").config({"topologies": "[1]"})
    assert get_experiment("prirfed-fig3").config({"agents": "30"})["agents"] == [30]
    # step tuning on the digits reads their declared public split, a fraction in (0, 1)
    with pytest.raises(ValueError, match="'digits_public_fraction' must be a fraction in"):
        get_experiment("prirfed-fig2").config({"digits_public_fraction": "1.5"})


def test_the_quick_size_note_says_private_runs_do_not_learn_only_when_none_did(capsys):
    from types import SimpleNamespace

    from rfed.cli import _print_scale_note

    def note(final):
        rows = [{"setting": "p", "utility": final, "start": 0.2, "epsilon": 1.0},
                {"setting": "np", "utility": 0.01, "start": 0.2, "epsilon": None}]
        _print_scale_note("doadp-logreg", SimpleNamespace(config={"scale": "quick"},
                                                          summary_rows=rows))
        return capsys.readouterr().out

    assert "not expected to learn" not in note(0.1)       # loss below its start: learned
    assert "not expected to learn" in note(0.3)           # worse than its start
    assert "--set scale=paper" in note(0.1)

    def note_with_reference(final, higher=False):
        start, ref = (10.0, 70.0) if higher else (0.2, 0.01)
        rows = [{"setting": "p", "utility": final, "start": start, "reference": ref,
                 "epsilon": 1.0, "higher_is_better": higher}]
        _print_scale_note("doadp-digits", SimpleNamespace(config={"scale": "quick"},
                                                          summary_rows=rows))
        return capsys.readouterr().out

    # a private setting counts as learning when it closes a quarter of the gap to the
    # non-private reference: (0.2 - 0.18) / (0.2 - 0.01) closes 11 %, (10 -> 16 of 70) 10 %
    assert "not expected to learn" in note_with_reference(0.18)
    assert "closes 11 % of the gap" in note_with_reference(0.18)
    assert "not expected to learn" not in note_with_reference(0.1)
    assert "closes 10 % of the gap" in note_with_reference(16.0, higher=True)
    assert "not expected to learn" not in note_with_reference(40.0, higher=True)
