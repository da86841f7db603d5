"""Kill a run (SIGKILL, Ctrl-C as SIGINT, and SIGTERM as a batch time limit sends it) after its
first checkpoint, resume it with ``rfed run --resume DIR``, and compare bit for bit with an
uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rfed.experiments.registry import read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--set", "rounds=40", "--set", "repetitions=1", "--set", "eval_every=5",
        "--no-progress", "--checkpoint-every", "5", "--checkpoint-seconds", "0"]


def _rfed(*args, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return [sys.executable, "-m", "rfed.cli", *args], {"cwd": ROOT, "env": env, **kwargs}


def _records(folder):
    out = []
    for line in (folder / "history.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("run_id")
        out.append(rec)
    return out


def _summary(folder):
    s = json.loads((folder / "summary.json").read_text())
    s["summary"].pop("seconds")
    s.pop("run_id")
    return s


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("full") / "run"
    cmd, kw = _rfed("run", *ARGS, "--out", str(folder), stdout=subprocess.DEVNULL)
    subprocess.run(cmd, check=True, **kw)
    return folder


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_killed_run_resumes_bit_identical(tmp_path, uninterrupted, sig):
    folder = tmp_path / "run"
    cmd, kw = _rfed("run", *ARGS, "--out", str(folder), stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE)
    proc = subprocess.Popen(cmd, **kw)
    deadline = time.monotonic() + 120
    while not (folder / "checkpoint.npz").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.02)
    proc.send_signal(sig)
    code = proc.wait(timeout=120)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert code == {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130,
                    signal.SIGTERM: 143}[sig], err
    if sig != signal.SIGKILL:
        # Ctrl-C and SIGTERM end with the same line
        assert f"; continue with: rfed run pca-synthetic --resume {folder}" in err
        assert "Traceback" not in err
        assert ("terminated (SIGTERM)" in err) == (sig == signal.SIGTERM)
    # what a kill leaves is whole: every JSON file and history line parses
    for path in folder.glob("*.json"):
        json.loads(path.read_text())
    for line in (folder / "history.jsonl").read_text().splitlines():
        json.loads(line)
    ck = read_checkpoint(folder)
    assert ck["records"] and not (folder / "summary.json").exists()

    cmd, kw = _rfed("run", "--resume", str(folder), "--no-progress", capture_output=True,
                    text=True)
    done = subprocess.run(cmd, **kw)
    assert done.returncode == 0, done.stderr
    assert _records(folder) == _records(uninterrupted)
    assert (folder / "privacy.json").read_bytes() == (uninterrupted / "privacy.json").read_bytes()
    assert _summary(folder) == _summary(uninterrupted)
    run_id = json.loads((folder / "config.json").read_text())["run_id"]
    assert {json.loads(x)["run_id"] for x in (folder / "history.jsonl").read_text().splitlines()} \
        == {run_id}
    assert not (folder / "checkpoint.npz").exists()


def test_resume_refuses_a_finished_run_and_other_settings(uninterrupted, capsys):
    from rfed.cli import main

    assert main(["run", "--resume", str(uninterrupted), "--no-progress"]) == 2
    assert "has finished" in capsys.readouterr().err
    assert main(["run", "--resume", str(uninterrupted), "--set", "rounds=3"]) == 2
    assert "--set is not allowed" in capsys.readouterr().err
    assert main(["run", "dpdgt-ieee14", "--resume", str(uninterrupted)]) == 2
    assert "holds a run of 'pca-synthetic'" in capsys.readouterr().err
