"""A run killed while writing a checkpoint leaves its temporary file; it does not stay for good.

The temporary of an atomic write is named after its writer (``.TARGET.PID.XXXXXXXX.tmp``); a
resumed or overwritten results folder, and the next write of the same target by another process,
remove the temporaries of processes that are gone (and those of earlier releases, which had no
pid in the name, in a results folder this run has locked), never those of a live process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from rfed._io import atomic_write_bytes, process_gone, remove_stale_temporaries

ROOT = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert process_gone(proc.pid)
    return proc.pid


def test_only_the_temporaries_of_dead_processes_are_removed(tmp_path):
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            "dead": f".checkpoint.npz.{dead}.abcd1234.tmp",
            "live": f".checkpoint.npz.{live.pid}.abcd1234.tmp",
            "mine": f".checkpoint.npz.{os.getpid()}.abcd1234.tmp",
            "other-target": f".config.json.{dead}.abcd1234.tmp",
            "earlier-release": ".checkpoint.npz.k2j4_x9a.tmp",
            "user-file": "notes.tmp",
        }
        for name in names.values():
            (tmp_path / name).write_bytes(b"half")
        removed = remove_stale_temporaries(tmp_path, "checkpoint.npz", earlier_releases=False)
        assert [p.name for p in removed] == [names["dead"]]
        removed = {p.name for p in remove_stale_temporaries(tmp_path)}
        assert removed == {names["other-target"], names["earlier-release"]}
        assert {p.name for p in tmp_path.iterdir()} == {names["live"], names["mine"],
                                                         names["user-file"]}
    finally:
        live.kill()
        live.wait()


def test_the_first_write_of_a_target_removes_its_stale_temporaries(tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f".ck.npz.{dead}.zz99zz99.tmp"
    other = tmp_path / f".other.npz.{dead}.zz99zz99.tmp"
    stale.write_bytes(b"half")
    other.write_bytes(b"half")
    atomic_write_bytes(tmp_path / "ck.npz", b"whole")
    assert not stale.exists() and other.exists()
    assert (tmp_path / "ck.npz").read_bytes() == b"whole"


#: ``rfed run`` killed (SIGKILL) half-way through writing its second ``checkpoint.npz``.
_KILLED_WHILE_WRITING = r"""
import os, signal, sys
import rfed._io as io
write = io._write_all
seen = []
def dying(fd, data):
    name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    if name.startswith(".checkpoint.npz."):
        seen.append(name)
        if len(seen) == 2:
            os.write(fd, data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    return write(fd, data)
io._write_all = dying
from rfed.cli import main
sys.exit(main(sys.argv[1:]))
"""

ARGS = ["run", "pca-synthetic", "--set", "rounds=6", "--set", "repetitions=1", "--set",
        "eval_every=2", "--set", "epsilons=[8.0]", "--checkpoint-every", "2",
        "--checkpoint-seconds", "0", "--no-progress"]


def _history(folder: Path) -> list[dict]:
    out = []
    for line in (folder / "history.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("run_id")
        out.append(rec)
    return out


def test_a_run_killed_while_writing_its_checkpoint_resumes_without_the_temporary(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ref, out = tmp_path / "ref", tmp_path / "run"
    subprocess.run([sys.executable, "-m", "rfed", *ARGS, "--out", str(ref)], check=True,
                   env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    proc = subprocess.run([sys.executable, "-c", _KILLED_WHILE_WRITING, *ARGS, "--out",
                           str(out)], env=env, cwd=ROOT, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(".checkpoint.npz."), left
    done = subprocess.run([sys.executable, "-m", "rfed", "run", "--resume", str(out),
                           "--no-progress"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in ref.iterdir())
    assert _history(out) == _history(ref)
