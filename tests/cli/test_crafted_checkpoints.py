"""``rfed run --resume DIR`` with a crafted checkpoint runs nothing and exits 2 with one line.

A results folder killed after a periodic checkpoint is given: a pickle whose loading would create
a marker file (as ``checkpoint.npz``, and as the ``checkpoint.pkl`` of earlier releases), the
lowest bit of one float of the saved iterate flipped, another run's checkpoint (same experiment
and settings, its own run id), and a ``config.json`` edited after the checkpoint. Each is refused
before any round runs: the marker is absent, the history is unchanged, no summary is written.
The untouched folder then resumes and finishes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rfed.cli import main
from rfed.experiments.registry import RunContext, run_experiment
from tests.test_state_files import crafted_pickle, flip_iterate_bit

NAME = "pca-synthetic"
TINY = {"rounds": 6, "repetitions": 1, "eval_every": 2, "epsilons": [8.0]}
# the saved iterate: the point of the unfinished run's state
ITERATE = ["current", "payload", "state", "x"]


class _Killed(BaseException):
    """Stands for SIGKILL right after a checkpoint."""


def _killed_run(out: Path, monkeypatch, name: str = NAME, overrides: dict | None = None
                ) -> None:
    """``out`` as a run killed after its first periodic checkpoint leaves it."""
    save = RunContext._save_checkpoint

    def save_then_die(ctx, payload):
        save(ctx, payload)
        if payload is not None:
            raise _Killed
    with monkeypatch.context() as m:
        m.setattr(RunContext, "_save_checkpoint", save_then_die)
        m.setattr(RunContext, "save_figure", lambda ctx, fig, name: None)
        with pytest.raises(_Killed):
            run_experiment(name, overrides=TINY if overrides is None else overrides,
                           out_dir=out, checkpoint_every=2, checkpoint_seconds=0)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Two killed runs of the same experiment and settings (each with its own run id)."""
    mp = pytest.MonkeyPatch()
    try:
        root = tmp_path_factory.mktemp("killed")
        _killed_run(root / "a", mp)
        _killed_run(root / "b", mp)
    finally:
        mp.undo()
    return root / "a", root / "b"


def _resume(folder: Path, capsys) -> tuple[int, str]:
    status = main(["run", "--resume", str(folder), "--no-progress"])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("case", ["pickle", "old-pickle", "bit", "bit-in-place", "foreign",
                                  "edited-config"])
def test_a_crafted_checkpoint_is_refused_and_nothing_runs(killed, tmp_path, capsys, case):
    folder = tmp_path / "run"
    shutil.copytree(killed[0], folder)
    head = folder / "checkpoint.npz"
    marker = tmp_path / "marker"
    if case == "pickle":
        head.write_bytes(crafted_pickle(marker))
        expected = f"'{head}' is a pickle (a checkpoint written by an earlier rfed)"
    elif case == "old-pickle":
        head.unlink()
        (folder / "checkpoint.pkl").write_bytes(crafted_pickle(marker))
        expected = (f"'{folder / 'checkpoint.pkl'}' is a checkpoint written by an earlier rfed "
                    "(a pickle); this format is no longer read")
    elif case in ("bit", "bit-in-place"):
        head.write_bytes(flip_iterate_bit(head.read_bytes(), ITERATE, case == "bit"))
        expected = f"'{head}' is damaged: checksum mismatch"
    elif case == "foreign":
        for name in ("checkpoint.npz", "checkpoint.log"):
            shutil.copy(killed[1] / name, folder / name)
        mine = json.loads((folder / "config.json").read_text())["run_id"]
        theirs = json.loads((killed[1] / "config.json").read_text())["run_id"]
        expected = (f"'{head}' was written by another run (its run_id is '{theirs}', this "
                    f"run's is '{mine}')")
    else:
        cfg = json.loads((folder / "config.json").read_text())
        cfg["config"]["rounds"] = 8
        (folder / "config.json").write_text(json.dumps(cfg))
        expected = f"'{head}' was written by another run (its config_sha256 is "
    history = (folder / "history.jsonl").read_bytes()
    status, err = _resume(folder, capsys)
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("rfed: error: cannot resume: "), err
    assert expected in err, err
    assert not marker.exists()
    assert (folder / "history.jsonl").read_bytes() == history      # no round ran
    assert not (folder / "summary.json").exists()


def test_the_untouched_folder_resumes(killed, tmp_path, capsys):
    folder = tmp_path / "run"
    shutil.copytree(killed[0], folder)
    status, err = _resume(folder, capsys)
    assert status == 0, err
    assert (folder / "summary.json").is_file() and not (folder / "checkpoint.npz").exists()


@pytest.mark.parametrize("text, expected", [
    ("{not json", "is damaged (not JSON: "),
    ("[1, 2]", "is damaged (a JSON list, not the object rfed writes)"),
    ('{"seed": 0, "run_id": "x", "config": {}}', "'experiment' must be a str, got missing"),
    ('{"experiment": "pca-synthetic", "seed": -1, "run_id": "x", "config": {}}',
     "'seed' must be an int >= 0, got -1"),
    ('{"experiment": "pca-synthetic", "seed": 0, "run_id": "x", "config": []}',
     "'config' must be an object, got []"),
])
def test_a_damaged_config_json_is_refused_in_one_line(killed, tmp_path, capsys, text, expected):
    folder = tmp_path / "run"
    shutil.copytree(killed[0], folder)
    (folder / "config.json").write_text(text)
    status, err = _resume(folder, capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert f"cannot resume: '{folder / 'config.json'}' " in err and expected in err, err
    assert "Traceback" not in err and "KeyError" not in err
