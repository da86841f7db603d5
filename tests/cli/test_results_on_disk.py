"""rfed run's output folder: refusal, overwrite, strict JSON, run id, bad --out, full disk,
nothing half-created, and the settings checks."""

import errno
import json
import math
import time
from pathlib import Path

import pytest

import rfed._io
from rfed._io import append_line, atomic_write_bytes, strict_json
from rfed.cli import main

FAST = ["--set", "rounds=6", "--set", "repetitions=1", "--set", "eval_every=3",
        "--no-progress"]


def _strict_load(text):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def _run(tmp_path, *extra, out="res"):
    return main(["run", *FAST, "--out", str(tmp_path / out), *extra])


def test_results_are_strict_json_and_every_record_has_run_id_and_seed(tmp_path, capsys):
    assert main(["run", *FAST, "--seed", "4", "--out", str(tmp_path / "res")]) == 0
    out = tmp_path / "res"
    cfg = _strict_load((out / "config.json").read_text())
    lines = (out / "history.jsonl").read_text().splitlines()
    assert lines and all(_strict_load(line)["run_id"] == cfg["run_id"] for line in lines)
    assert all(_strict_load(line)["seed"] == 4 for line in lines)
    summary = _strict_load((out / "summary.json").read_text())
    privacy = _strict_load((out / "privacy.json").read_text())
    assert summary["run_id"] == cfg["run_id"]
    # the non-private run's epsilon is infinite: null, with the reason beside it
    row = summary["summary"]["settings"]["non-private"]
    assert row["epsilon_certified"] is None and row["epsilon_certified_nonfinite"] == "inf"
    assert privacy
    header = (out / "history.csv").read_text().splitlines()[0].split(",")
    assert header[-2:] == ["run_id", "seed"]
    assert not list(out.glob(".*.tmp")) and not (out / "checkpoint.npz").exists()


def test_strict_json_maps_non_finite_numbers_to_null_with_a_reason():
    text = strict_json({"a": math.inf, "b": [1.0, -math.inf, math.nan], "c": {"d": math.nan}})
    assert _strict_load(text) == {
        "a": None, "a_nonfinite": "inf", "b": [1.0, None, None],
        "b_nonfinite": {"1": "-inf", "2": "nan"}, "c": {"d": None, "d_nonfinite": "nan"},
    }


def test_existing_output_folder_is_refused_unless_overwrite(tmp_path, capsys):
    assert _run(tmp_path) == 0
    (tmp_path / "res" / "stale.png").write_bytes(b"old")
    first = _strict_load((tmp_path / "res" / "config.json").read_text())["run_id"]
    before = (tmp_path / "res" / "history.jsonl").read_text()
    capsys.readouterr()
    assert _run(tmp_path) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--overwrite" in err and "--resume" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (tmp_path / "res" / "history.jsonl").read_text() == before   # untouched
    assert _run(tmp_path, "--overwrite") == 0
    assert not (tmp_path / "res" / "stale.png").exists()
    lines = (tmp_path / "res" / "history.jsonl").read_text().splitlines()
    assert len(lines) == len(before.splitlines())                      # not appended
    assert {_strict_load(x)["run_id"] for x in lines} != {first}


def test_overwrite_refuses_a_folder_that_is_not_an_rfed_results_folder(tmp_path, capsys):
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "thesis.tex").write_text("precious")
    assert _run(tmp_path, "--overwrite") == 2
    assert "no config.json" in capsys.readouterr().err
    assert (tmp_path / "res" / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("case", ["file", "under_file"])
def test_bad_out_is_one_line_and_exit_2(tmp_path, capsys, case):
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" if case == "file" else tmp_path / "f" / "sub"
    assert main(["run", *FAST, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rfed: error: ") and err.count("\n") == 1
    assert ("is a file" if case == "file" else "lies under a file") in err


def test_unwritable_out_is_one_line_and_nothing_is_left(tmp_path, capsys, monkeypatch):
    import tempfile

    def deny(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", deny)
    assert main(["run", *FAST, "--out", str(tmp_path / "a" / "b")]) == 2
    err = capsys.readouterr().err
    assert "cannot write to output folder" in err and "Permission denied" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "a").exists()        # the folders it created are removed


@pytest.mark.parametrize("fail_at", [1, 2, 8, 20, 26])  # a full run makes 26 writes
def test_full_disk_is_one_line_exit_1_and_nothing_half_written(tmp_path, capsys, monkeypatch,
                                                                fail_at):
    real = rfed._io._write_all
    calls = [0]

    def write(fd, data):
        calls[0] += 1
        if calls[0] >= fail_at:
            if len(data) > 1:              # a torn write: part of the bytes, then ENOSPC
                real(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(rfed._io, "_write_all", write)
    code = main(["run", *FAST, "--out", str(tmp_path / "res")])
    err = capsys.readouterr().err
    assert code in (1, 2) and "No space left on device" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    out = tmp_path / "res"
    if out.exists():
        assert not list(out.glob(".*.tmp"))
        for path in out.glob("*.json"):
            _strict_load(path.read_text())        # whole, never torn
        if (out / "history.jsonl").exists():
            for line in (out / "history.jsonl").read_text().splitlines():
                _strict_load(line)


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "t.json"
    atomic_write_bytes(target, b"old")

    def fail(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rfed._io, "_write_all", fail)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new content")
    with pytest.raises(OSError):
        append_line(tmp_path / "h.jsonl", "{}")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.jsonl", "t.json"]
    assert (tmp_path / "h.jsonl").read_bytes() == b""


def test_value_error_after_start_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "new" / "res"
    assert main(["run", *FAST, "--set", "epsilons=[-1.0]", "--out", str(out)]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("args, words", [
    (["--set", "repetitions=0"], "'repetitions' must be an int >= 1"),
    (["--set", "epsilons=[]"], "'epsilons' must not be empty"),
    (["--set", "step_size=foo"], "step_size"),
    (["--seed", "-1"], "--seed must be an int >= 0"),
    (["--set", "rounds=True"], "rounds"),
])
def test_bad_settings_are_named(tmp_path, capsys, args, words):
    out = tmp_path / "res"
    assert main(["run", "pca-synthetic", "--no-progress", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_lock_held_by_a_killed_but_unreaped_process_is_stale(tmp_path):
    """A rank killed with its job stays a zombie until someone reaps it; it writes nothing,
    so its lock must not block --resume (seen with a killed mpiexec job in CI)."""
    import subprocess
    import sys

    out = tmp_path / "res"
    out.mkdir()
    (out / "config.json").write_text("{}")
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{zombie.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.01)
        (out / ".rfed.lock").write_text(f"{zombie.pid}\n")
        assert _run(tmp_path, "--overwrite") == 0        # taken over, not refused
    finally:
        zombie.wait()


def test_a_live_run_locks_its_folder_and_a_stale_lock_is_taken_over(tmp_path, capsys):
    import subprocess
    import sys

    out = tmp_path / "res"
    out.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            (out / ".rfed.lock").write_text(f"{other.pid}\n")
            assert _run(tmp_path) == 2
            assert f"another rfed run (pid {other.pid}) is writing" in capsys.readouterr().err
        finally:
            other.kill()
    other.wait()
    # the process is gone: its lock is stale; an overwrite needs an rfed folder, so use a
    # fresh empty folder holding only the stale lock and run into it with --overwrite
    (out / "config.json").write_text("{}")
    assert _run(tmp_path, "--overwrite") == 0
    assert not (out / ".rfed.lock").exists()              # released at the end
