"""``rfed run NAME --engine mpi``: a 2-rank run of doadp-logreg at a tiny size writes, from rank 0
only, the same results as the one-process run; a 2-rank run killed mid-way resumes on 3 ranks
and ends with the same results files; experiments that cannot run on MPI are refused in one
line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rfed.cli import main
from rfed.experiments.registry import read_checkpoint

MPIEXEC = Path(sys.executable).with_name("mpiexec")
ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "n_agents=8", "--set", "n_per_agent=20", "--set", "dim=5", "--set", "epochs=1",
        "--set", "repetitions=1", "--set", "eps_sweep=[1.0]", "--set", "eval_every=10",
        "--set", "baselines=False"]   # noisy DSGD and DP-DDA: test_mpi_engine.py


def _mpiexec():
    return str(MPIEXEC) if MPIEXEC.exists() else shutil.which("mpiexec")


def _without_run_id(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    for r in rows:
        r.pop("run_id", None)
    return rows


@pytest.fixture(scope="module")
def inprocess(tmp_path_factory) -> Path:
    """The uninterrupted one-process run of doadp-logreg at the tiny size."""
    ref = tmp_path_factory.mktemp("inprocess") / "run"
    assert main(["run", "doadp-logreg", *TINY, "--out", str(ref), "--no-progress"]) == 0
    return ref


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")
def test_two_ranks_write_the_one_process_results_from_rank_0(tmp_path, inprocess):
    ref = inprocess
    work = tmp_path / "work"   # the ranks' working directory: nothing may appear in it
    work.mkdir()
    out = tmp_path / "mpi"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, "-m", "mpi4py", "-m", "rfed", "run",
         "doadp-logreg", *TINY, "--out", str(out), "--engine", "mpi", "--no-progress"],
        capture_output=True, text=True, timeout=180, env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(work.iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in ref.iterdir())
    # every round's metrics (iterates' cost, consensus, messages, bytes) and the privacy
    hist = _without_run_id(out / "history.jsonl")
    assert hist == _without_run_id(ref / "history.jsonl")
    # four DO-ADP configurations, the paper's and the non-private reference
    assert len({r["setting"] for r in hist}) == 6
    assert (out / "privacy.json").read_text() == (ref / "privacy.json").read_text()
    for table in ("table1_communication_and_fig2a.csv", "summary_table.csv"):
        assert (out / table).read_text() == (ref / table).read_text(), table
    # rank 0 alone prints the summary
    assert proc.stdout.count("doadp-logreg: done in") == 1


def _mpi_rfed(ranks: int, *args: str) -> list[str]:
    return [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "rfed", *args,
            "--engine", "mpi", "--no-progress"]


def _summary(folder: Path) -> dict:
    s = json.loads((folder / "summary.json").read_text())
    s["summary"].pop("seconds")
    s.pop("run_id")
    return s


def _killed_after_first_checkpoint(cmd: list[str], out: Path, cwd: Path) -> None:
    """Start ``cmd`` in a process group of its own and kill the whole group (for MPI: mpiexec
    and every rank, unannounced) once ``out`` holds a checkpoint."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=cwd, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.npz").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert not (out / "summary.json").exists()


def _assert_same_results(out: Path, ref: Path) -> None:
    """Every results file of ``out`` equals ``ref``'s (the run id and the seconds aside)."""
    assert _without_run_id(out / "history.jsonl") == _without_run_id(ref / "history.jsonl")
    assert _summary(out) == _summary(ref)
    # (a kill during an atomic write may leave its hidden temporary: not a results file)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        sorted(p.name for p in ref.iterdir())
    for path in ref.iterdir():
        if path.suffix in (".csv", ".md") and path.name != "history.csv" or \
                path.name == "privacy.json":
            assert (out / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")
def test_killed_mpi_run_resumes_on_another_rank_count(tmp_path, inprocess, capsys):
    """2 ranks checkpoint every 3 rounds; the whole job (mpiexec's process group) is killed
    after the first checkpoint; 3 ranks resume it with --resume; every results file equals the
    uninterrupted one-process run's (the run id and the seconds aside). The checkpoint holds
    the merged blocks, and an in-process --resume of it is refused in one line."""
    from rfed.engines.mpi import SavedBlocks

    out = tmp_path / "mpi"
    _killed_after_first_checkpoint(_mpi_rfed(2, "run", "doadp-logreg", *TINY, "--out", str(out),
                                             "--checkpoint-every", "3",
                                             "--checkpoint-seconds", "0"), out, tmp_path)
    ck = read_checkpoint(out)
    states = [r.state for r, _ in ck["completed"]]
    if ck["current"] is not None:
        states.append(ck["current"]["payload"]["state"])
    assert states and all(isinstance(s, SavedBlocks) and s.n_ranks == 2 for s in states)
    assert main(["run", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "checkpointed on the MPI engine" in err and err.count("\n") == 1

    done = subprocess.run(_mpi_rfed(3, "run", "--resume", str(out)), capture_output=True,
                          text=True, timeout=180, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_same_results(out, inprocess)


@pytest.mark.slow
@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")
def test_run_killed_in_one_process_resumes_on_mpi(tmp_path, inprocess):
    """A one-process run killed after its first checkpoint resumes on 2 ranks (its whole
    states are split into the ranks' blocks) and ends with the uninterrupted run's files."""
    out = tmp_path / "run"
    _killed_after_first_checkpoint(
        [sys.executable, "-m", "rfed", "run", "doadp-logreg", *TINY, "--out", str(out),
         "--no-progress", "--checkpoint-every", "3", "--checkpoint-seconds", "0"], out,
        tmp_path)
    done = subprocess.run(_mpi_rfed(2, "run", "--resume", str(out)), capture_output=True,
                          text=True, timeout=180, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_same_results(out, inprocess)


@pytest.mark.parametrize("argv, message", [
    (["run", "pca-synthetic", "--engine", "mpi"], "cannot run on the MPI engine"),
    (["run", "doadp-logreg", "--engine", "mpi", "--secure"], "--secure cannot be used"),
])
def test_what_mpi_cannot_run_is_a_one_line_error(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


# the other decentralized experiments at tiny sizes (their metrics gather every agent's rows)
_OTHER_TINY = {
    "dpdl-digits": {"rounds": 2, "n_agents": 4, "eval_every": 1, "epsilons": [4.0],
                    "topologies": ["complete"], "hidden": 4},
    "dpdda-svm": {"epochs": 1, "n_agents": 4, "n_per_agent": 6, "dim": 4, "n_active": [2],
                  "eps_sweep": [1.0], "eval_every": 4, "baseline": False},
    "doadp-digits": {"epochs": 1, "n_agents": 40, "epsilons": [1.0], "hidden": 4,
                     "eval_every": 2},
}


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")
@pytest.mark.parametrize("name", [
    "dpdl-digits",
    pytest.param("dpdda-svm", marks=pytest.mark.slow),
    pytest.param("doadp-digits", marks=pytest.mark.slow),
])
def test_three_ranks_give_the_one_process_tables(name, tmp_path, capsys):
    sets = [a for k, v in _OTHER_TINY[name].items() for a in ("--set", f"{k}={v!r}")]
    ref = tmp_path / "inprocess"
    assert main(["run", name, *sets, "--out", str(ref), "--no-progress"]) == 0
    capsys.readouterr()
    out = tmp_path / "mpi"
    proc = subprocess.run(
        [_mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py", "-m", "rfed", "run", name,
         *sets, "--out", str(out), "--engine", "mpi", "--no-progress"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _without_run_id(out / "history.jsonl") == _without_run_id(ref / "history.jsonl")
    assert (out / "privacy.json").read_text() == (ref / "privacy.json").read_text()
    tables = sorted(p.name for p in ref.glob("*.csv") if p.name != "history.csv")
    assert tables and sorted(p.name for p in out.glob("*.csv") if p.name != "history.csv") == tables
    for table in tables:
        assert (out / table).read_text() == (ref / table).read_text(), table
