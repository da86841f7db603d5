"""The rfed command line, end to end in a temporary directory."""

import json

import pytest

from rfed.cli import main
from rfed.privacy import OUTSIDE_THE_GUARANTEE


def test_rfed_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "pca-synthetic" in out and "prirfed-fig3" in out


def test_rfed_run_default_writes_results_and_prints_summary(tmp_path, capsys):
    out_dir = tmp_path / "res"
    code = main(["run", "--set", "rounds=10", "--set", "repetitions=1", "--set",
                 "eval_every=5", "--out", str(out_dir), "--no-progress", "--seed", "3"])
    assert code == 0
    out = capsys.readouterr().out
    assert "pca-synthetic" in out and "eps (certified)" in out and "accountant" in out
    # the default settings are budget-first, labelled by their planned budget (the certified
    # epsilon is the table's column)
    assert "planned eps<=2" in out and "reference (true value) cost" in out
    assert OUTSIDE_THE_GUARANTEE in out  # the logged metrics are not covered: said where seen
    cfg = json.loads((out_dir / "config.json").read_text())
    assert cfg["seed"] == 3 and cfg["config"]["rounds"] == 10
    assert (out_dir / "pca_synthetic.png").stat().st_size > 0
    assert (out_dir / "summary.json").is_file()


def test_rfed_run_errors_exit_2_without_traceback(tmp_path, capsys):
    assert main(["run", "no-such-experiment", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment" in err and "Traceback" not in err
    assert main(["run", "pca-synthetic", "--set", "rounds"]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["run", "pca-synthetic", "--set", "nope=1"]) == 2
    assert "no setting 'nope'" in capsys.readouterr().err
    assert main(["run", "pca-synthetic", "--set", "rounds=abc"]) == 2
    assert main(["run", "pca-synthetic", "--set", "epsilons=[-1.0]", "--no-progress",
                 "--out", str(tmp_path / "x")]) == 2
    assert "epsilon" in capsys.readouterr().err


def test_rfed_run_prints_its_header_only_once_the_run_starts(tmp_path, capsys):
    """A refused folder prints the refusal only (the header 'rfed run NAME (seed S) -> OUT'
    was printed first, as if the run had started); a run that starts prints it first."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", "pca-synthetic", "--out", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "rfed: error:" in captured.err
    assert main(["run", "pca-synthetic", "--resume", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "rfed: error:" in captured.err


def test_run_experiment_refuses_an_on_start_that_is_not_callable():
    from rfed.experiments.registry import run_experiment

    with pytest.raises(TypeError, match=r"argument 'on_start' must be callable"):
        run_experiment("pca-synthetic", on_start="print")


@pytest.mark.parametrize("engine", [[], ["--engine", "inprocess"], ["--engine", "mpi"]])
def test_rfed_run_refuses_supernodes_without_a_flower_engine(tmp_path, capsys, engine):
    """--supernodes means nothing outside the Flower engines: refused in one line before the
    run (it was ignored silently), naming the option and the engine."""
    assert main(["run", "pca-synthetic", "--supernodes", "3", "--out", str(tmp_path / "r"),
                 *engine]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "--supernodes applies to --engine flower / flower-sim only" in err
    assert f"--engine {engine[1] if engine else 'inprocess'}" in err
    assert len(err.splitlines()) == 1 and captured.out == ""
    assert not (tmp_path / "r").exists()


def test_rfed_run_decentralized_prints_privacy_table(tmp_path, capsys):
    code = main(["run", "dpdgt-ieee14", "--set", "iterations=60", "--set", "mc_runs=1",
                 "--set", "thetas=[0.0, 0.05]", "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "privacy.json").read_text())
    eps_paper = report["theta0=0.05"]["paper"]["epsilon_eq38"]
    assert "eps (certified)" in out and "eps (paper's formula)" in out  # one summary table
    assert f"{eps_paper:.4g}" in out
    assert "accountant: " in out and "cost function" in out  # DP-DGT's relation (issue 8)
    assert "final_generation:" in out and "| generator_bus |" in out
    assert OUTSIDE_THE_GUARANTEE in out
