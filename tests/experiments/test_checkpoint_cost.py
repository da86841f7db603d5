"""Issue 13: cheap checkpoints that keep their guarantees.

A checkpoint appends what is new (completed runs, records) to ``checkpoint.log`` once and
replaces the small ``checkpoint.npz``; periodic checkpoints respect a wall-clock floor
(``checkpoint_seconds``). Asserted here, on a tiny DO-ADP experiment (10 algorithm runs):

* a run "killed" (an exception that no code catches, raised right after its k-th checkpoint)
  and resumed ends with the uninterrupted run's history, privacy report and summary, for kills
  early, in the middle and at the last checkpoint; also after a torn tail was appended to the
  log, and when such a resumed run is killed and resumed again;
* the log holds every completed run and every record exactly once, and ``checkpoint.npz``
  stays small however many runs completed (nothing finished is rewritten);
* floor 0 writes exactly the old checkpoints (every ``checkpoint_every`` rounds before the
  last, and one per run); a floor far above the run's length writes only the end-of-run ones;
  with a fake clock the periodic checkpoints are at most (clock time) / floor + 1; the history
  is the same whatever the floor;
* a damaged or missing log, an unknown layout and a checkpoint of an earlier release (a pickle,
  never unpickled) are refused with a clear error.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest

import rfed._io
import rfed.experiments.run_context as run_context
from rfed._io import write_at_end
from rfed.cli import main
from rfed.experiments.registry import (
    OutputDirError,
    RunContext,
    read_checkpoint,
    run_experiment,
)
from rfed.state import dumps_state, load_state, loads_state

NAME = "doadp-logreg"
# ten runs: Fig. 2(a)'s six settings, and the sweep's four at an epsilon other than eps_fig2a
# (at eps_fig2a the sweep reuses Fig. 2(a)'s runs)
TINY = {"n_agents": 8, "n_per_agent": 10, "dim": 5, "epochs": 1, "repetitions": 1,
        "eps_sweep": [0.5], "eval_every": 5, "baselines": False}
EVERY = 3


@pytest.fixture(scope="module", autouse=True)
def _no_figures():
    """The figures take most of a tiny run's time and are no part of a checkpoint."""
    import matplotlib.pyplot as plt

    mp = pytest.MonkeyPatch()
    mp.setattr(RunContext, "save_figure", lambda ctx, fig, name: plt.close(fig))
    yield
    mp.undo()


class _Killed(BaseException):
    """Stands for SIGKILL: nothing in rfed catches it (only cleanup runs)."""


def _run(out: Path | None, mode: str = "new", seconds: float = 0.0):
    return run_experiment(NAME, overrides=TINY, out_dir=out, mode=mode,
                          checkpoint_every=EVERY, checkpoint_seconds=seconds)


def _results(folder: Path) -> dict:
    """What a user reads: every history line (run id aside), the privacy report, the summary."""
    lines = []
    for line in (folder / "history.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("run_id")
        lines.append(rec)
    summary = json.loads((folder / "summary.json").read_text())
    summary.pop("run_id")
    summary["summary"].pop("seconds")
    return {"history": lines, "privacy": (folder / "privacy.json").read_text(),
            "summary": summary}


class _Counting:
    """Wraps ``RunContext._save_checkpoint``: counts the checkpoints written, records the
    size of each ``checkpoint.npz``, and raises :class:`_Killed` after the ``kill_after``-th."""

    def __init__(self, monkeypatch, kill_after: int | None = None):
        self.periodic = self.end = 0
        self.sizes: list[int] = []
        self.end_sizes: list[int] = []   # checkpoint.npz after each end-of-run checkpoint
        self.kill_after = kill_after
        original = RunContext._save_checkpoint
        counter = self

        def save(ctx, payload):
            original(ctx, payload)
            if payload is None:
                counter.end += 1
                counter.end_sizes.append((ctx.out_dir / "checkpoint.npz").stat().st_size)
            else:
                counter.periodic += 1
            counter.sizes.append((ctx.out_dir / "checkpoint.npz").stat().st_size)
            if counter.kill_after is not None and len(counter.sizes) == counter.kill_after:
                raise _Killed

        monkeypatch.setattr(RunContext, "_save_checkpoint", save)


def _kill_after(monkeypatch, k: int, out: Path, mode: str = "new") -> None:
    with monkeypatch.context() as m:
        _Counting(m, kill_after=k)
        with pytest.raises(_Killed):
            _run(out, mode)
    assert (out / "checkpoint.npz").is_file() and not (out / "summary.json").exists()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference folder, and how many checkpoints (periodic, end) it wrote with floor 0."""
    out = tmp_path_factory.mktemp("full") / "run"
    mp = pytest.MonkeyPatch()
    try:
        counter = _Counting(mp)
        started = []
        start_run = RunContext.start_run

        def record_start(ctx, algorithm, problem, n_rounds, eval_every):
            started.append(n_rounds)
            return start_run(ctx, algorithm, problem, n_rounds, eval_every)

        mp.setattr(RunContext, "start_run", record_start)
        _run(out)
    finally:
        mp.undo()
    assert not (out / "checkpoint.npz").exists() and not (out / "checkpoint.log").exists()
    return out, counter, started


def test_floor_zero_writes_the_old_checkpoints(uninterrupted):
    _, counter, n_rounds = uninterrupted
    # every EVERY rounds before a run's last round, and once at the end of each run
    assert counter.periodic == sum((n - 1) // EVERY for n in n_rounds) > 0
    assert counter.end == len(n_rounds) == 10


def test_the_checkpoint_does_not_grow_with_the_completed_runs(uninterrupted):
    # the completed runs live in the log, written once: between runs checkpoint.npz holds only
    # the log's length and checksum (format 1 held every completed run: 64 KB by the end here)
    _, counter, _ = uninterrupted
    # (the counts it holds gain a digit now and then)
    assert len(counter.end_sizes) == 10 and max(counter.end_sizes) - min(counter.end_sizes) < 8
    assert max(counter.end_sizes) < 1000


@pytest.mark.parametrize("k", [1, 17, "last"])
def test_a_killed_run_resumes_bit_identical(tmp_path, monkeypatch, uninterrupted, k):
    ref, counter, _ = uninterrupted
    k = len(counter.sizes) if k == "last" else k
    out = tmp_path / "run"
    _kill_after(monkeypatch, k, out)
    ck = read_checkpoint(out)
    assert len(ck["records"]) == ck["log"]["n_records"] > 0
    _run(out, "resume")
    assert _results(out) == _results(ref)
    assert not (out / "checkpoint.npz").exists() and not (out / "checkpoint.log").exists()


def test_the_log_holds_each_run_and_record_once(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _kill_after(monkeypatch, 40, out)
    ck = read_checkpoint(out)
    size = ck["log"]["size"]
    data = (out / "checkpoint.log").read_bytes()
    assert len(data) == size
    frames, pos = [], 0
    while pos < size:   # each frame: its length (8 bytes, little-endian), then a state file
        n = int.from_bytes(data[pos:pos + 8], "little")
        frames.append(loads_state(data[pos + 8:pos + 8 + n], kind="experiment-checkpoint-log",
                                  expect={"run_id": ck["run_id"]}))
        pos += 8 + n
    assert len(frames) > 5
    # the frames are disjoint slices: concatenated they are the records and runs, once each
    assert [r for f in frames for r in f["records"]] == ck["records"]
    runs = [entry for f in frames for entry in f["completed"]]
    assert len(runs) == len(ck["completed"]) == ck["log"]["n_completed"] >= 2
    lines = (out / "history.jsonl").read_text().splitlines()
    assert len(lines) >= len(ck["records"])


def test_a_torn_log_tail_is_ignored(tmp_path, monkeypatch, uninterrupted):
    ref = uninterrupted[0]
    out = tmp_path / "run"
    _kill_after(monkeypatch, 25, out)
    with open(out / "checkpoint.log", "ab") as fh:   # a kill in the middle of an append
        fh.write(b"\x80\x05torn")
    _kill_after(monkeypatch, 6, out, mode="resume")     # appends after cutting the tail
    _run(out, "resume")
    assert _results(out) == _results(ref)


class _Marker:
    """Unpickling it creates the file ``path`` (what a crafted pickle could do: run code)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_checkpoint_of_an_earlier_release_is_refused_and_never_unpickled(tmp_path,
                                                                           monkeypatch):
    out = tmp_path / "run"
    _kill_after(monkeypatch, 30, out)
    marker = tmp_path / "marker"
    # layout 2 of the previous release: a pickle; this one would create the marker
    (out / "checkpoint.pkl").write_bytes(pickle.dumps({"format": 2, "x": _Marker(marker)}))
    (out / "checkpoint.npz").unlink()
    with pytest.raises(OutputDirError, match=r"checkpoint.pkl' is a checkpoint written by an "
                                             r"earlier rfed \(a pickle\); this format is no "
                                             r"longer read"):
        _run(out, "resume")
    assert not marker.exists()
    # a pickle under the new name is refused too, unread
    (out / "checkpoint.pkl").rename(out / "checkpoint.npz")
    with pytest.raises(OutputDirError, match=r"checkpoint.npz' is a pickle .* no longer read"):
        _run(out, "resume")
    assert not marker.exists()


def test_a_floor_longer_than_the_run_leaves_only_the_end_of_run_checkpoints(
        tmp_path, monkeypatch, uninterrupted):
    ref, _, n_rounds = uninterrupted
    counter = _Counting(monkeypatch)
    _run(tmp_path / "run", seconds=1e9)
    assert counter.periodic == 0 and counter.end == len(n_rounds)
    assert _results(tmp_path / "run") == _results(ref)


def test_the_floor_bounds_the_periodic_checkpoints_by_the_clock(tmp_path, monkeypatch,
                                                                uninterrupted):
    ref, floor0, _ = uninterrupted
    now = [0.0]

    def clock():   # one second passes at every look at the clock
        now[0] += 1.0
        return now[0]

    monkeypatch.setattr(run_context, "_clock", clock)
    counter = _Counting(monkeypatch)
    floor = 2.0
    _run(tmp_path / "run", seconds=floor)
    assert 0 < counter.periodic <= now[0] / floor + 1
    assert counter.periodic < floor0.periodic / 2
    assert _results(tmp_path / "run") == _results(ref)


def test_a_damaged_log_or_unknown_format_is_refused_clearly(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _kill_after(monkeypatch, 20, out)
    log = out / "checkpoint.log"
    good = log.read_bytes()
    log.write_bytes(good[:10] + bytes([good[10] ^ 1]) + good[11:])
    with pytest.raises(OutputDirError, match="cannot resume: .*damaged .checksum mismatch"):
        _run(out, "resume")
    log.write_bytes(good[: len(good) // 2])
    with pytest.raises(OutputDirError, match="fewer than the"):
        _run(out, "resume")
    log.unlink()
    with pytest.raises(OutputDirError, match="checkpoint.log' is missing"):
        _run(out, "resume")
    log.write_bytes(good)
    head = out / "checkpoint.npz"
    ck = load_state(head, kind="experiment-checkpoint")
    bind = json.loads(_member(head, "state.json"))["bind"]
    head.write_bytes(dumps_state({**ck, "format": 99}, kind="experiment-checkpoint", bind=bind))
    with pytest.raises(OutputDirError, match=r"layout 99; it reads layout 3"):
        _run(out, "resume")
    head.write_bytes(b"not a checkpoint")
    with pytest.raises(OutputDirError, match="checkpoint.npz' is not an rfed state file"):
        _run(out, "resume")


def _member(path: Path, name: str) -> bytes:
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, True, "5"])
def test_a_bad_floor_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="'checkpoint_seconds' must be a finite number >= 0"):
        RunContext(seed=0, checkpoint_seconds=bad)


def test_the_cli_floor_flag(tmp_path, capsys):
    assert main(["run", "--checkpoint-seconds", "-2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--checkpoint-seconds must be a finite number >= 0" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_write_at_end_keeps_the_prefix_and_cuts_a_failed_write(tmp_path, monkeypatch):
    path = tmp_path / "log"
    assert write_at_end(path, b"abc", 0) == 3
    path.write_bytes(b"abcTORN")                # a torn tail after the recorded 3 bytes
    assert write_at_end(path, b"de", 3) == 5
    assert path.read_bytes() == b"abcde"
    with pytest.raises(ValueError, match="'size'.*fewer than 9"):
        write_at_end(path, b"x", 9)

    def full_disk(fd, data):
        import os
        os.write(fd, data[:1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rfed._io, "_write_all", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_at_end(path, b"fgh", 5)
    assert path.read_bytes() == b"abcde"

