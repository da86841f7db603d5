"""``run_mpi(resume_from=)`` and ``rfed run --resume DIR --engine mpi`` refuse crafted checkpoints
on every rank before any round: a pickle whose loading would create a marker file, a flipped bit
in one float of the saved iterate, and another run's checkpoint.

Run as a script under ``mpiexec`` (``--child OUT DIR``): 2 ranks run DO-ADP with a checkpoint
after round 2, rank 0 crafts the files from it, then every rank tries to resume from each; the
ranks' errors and round counts go to ``OUT`` (JSON).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_mpi_engine import ROOT, _mpiexec, needs_mpi

from tests.test_state_files import crafted_pickle, flip_iterate_bit

N_AGENTS, N_ROUNDS = 8, 4


def _case(comm_factory):
    from rfed.algorithms.decentralized import DOADP
    from rfed.datasets.synthetic import make_epsilon_like
    from rfed.networks.graphs import ring
    from rfed.networks.network import Network
    from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly

    x, y = make_epsilon_like(N_AGENTS * 6, 4, 3)
    f, lab = split_evenly(x, y, N_AGENTS, np.random.default_rng(3))
    prob = LogisticRegression(f, lab, L2Regularizer(0.1), feature_bound=1.0)
    alg = DOADP(Network(ring(N_AGENTS), communicator=comm_factory(N_AGENTS)), alpha=0.05,
                p=0.8, k=2, grad_bound=1.0, noise_multiplier=1.0)
    return alg, prob


def run_child(out: str, folder: str) -> None:
    from mpi4py import MPI

    from rfed.engines.mpi import MPICommunicator, run_mpi

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    work = Path(folder)
    good, foreign = work / "good.ckpt", work / "foreign.ckpt"
    for path, rounds in ((good, N_ROUNDS), (foreign, N_ROUNDS + 2)):
        alg, prob = _case(MPICommunicator)
        run_mpi(alg, prob, rounds, rng=np.random.default_rng(1), x0=np.zeros(4),
                checkpoint_every=2, checkpoint=path)
    marker = work / "marker"
    if rank == 0:
        (work / "pickle.ckpt").write_bytes(crafted_pickle(marker))
        data = good.read_bytes()
        # the saved iterate: every agent's point of the merged state
        (work / "bit.ckpt").write_bytes(flip_iterate_bit(data, ["saved", "state", "x"], True))
    world.Barrier()
    results = {}
    for name in ("good", "pickle", "bit", "foreign"):
        rounds = []
        alg, prob = _case(MPICommunicator)
        try:
            run_mpi(alg, prob, N_ROUNDS, rng=None, resume_from=work / f"{name}.ckpt",
                    callback=lambda t, state, rounds=rounds: rounds.append(t))
            error = None
        except ValueError as exc:
            error = str(exc)
        results[name] = {"error": error, "rounds": rounds, "marker": marker.exists()}
    # a checkpoint path whose folder does not exist: every rank refuses it before a round
    rounds = []
    alg, prob = _case(MPICommunicator)
    try:
        run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(1), x0=np.zeros(4),
                checkpoint_every=2, checkpoint=work / "no-such-folder" / "x.ckpt",
                callback=lambda t, state: rounds.append(t))
        error = None
    except ValueError as exc:
        error = str(exc)
    results["no folder"] = {"error": error, "rounds": rounds}
    gathered = world.gather(results, root=0)
    if rank == 0:
        Path(out).write_text(json.dumps(gathered))


def _launch(*args: str, ranks: int = 2) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", *args],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)


@needs_mpi
def test_run_mpi_refuses_crafted_checkpoints_on_every_rank(tmp_path):
    out = tmp_path / "out.json"
    proc = _launch(__file__, "--child", str(out), str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(out.read_text())
    assert len(ranks) == 2
    expected = {
        "pickle": "is a pickle (a checkpoint written by an earlier rfed); this format is no "
                  "longer read",
        "bit": "is damaged: checksum mismatch",
        "foreign": "was written by another run (its n_rounds is 6, this run's is 4)",
    }
    for results in ranks:
        assert results["good"] == {"error": None, "rounds": [3, 4], "marker": False}
        for name, text in expected.items():
            got = results[name]
            path = tmp_path / f"{name}.ckpt"
            assert got["error"] == f"argument 'resume_from': '{path}' {text}" or (
                got["error"].startswith(f"argument 'resume_from': '{path}' {text}")), got
            assert "\n" not in got["error"]
            assert got["rounds"] == [] and not got["marker"], name
        missing = tmp_path / "no-such-folder" / "x.ckpt"
        assert results["no folder"] == {
            "error": f"argument 'checkpoint': the folder of '{missing}' does not exist (create "
                     "it first)", "rounds": []}
    assert not (tmp_path / "marker").exists()


@needs_mpi
def test_the_mpi_cli_refuses_a_crafted_checkpoint(tmp_path):
    from tests.cli.test_crafted_checkpoints import _killed_run

    tiny = {"n_agents": 8, "n_per_agent": 10, "dim": 5, "epochs": 1, "repetitions": 1,
            "eps_sweep": [0.5], "eval_every": 5, "baselines": False}
    mp = pytest.MonkeyPatch()
    folder = tmp_path / "run"
    try:
        _killed_run(folder, mp, "doadp-logreg", tiny)
    finally:
        mp.undo()
    marker = tmp_path / "marker"
    head = folder / "checkpoint.npz"
    head.write_bytes(crafted_pickle(marker))
    history = (folder / "history.jsonl").read_bytes()
    proc = _launch("-m", "rfed", "run", "--resume", str(folder), "--engine", "mpi",
                   "--no-progress")
    assert not marker.exists()
    assert (folder / "history.jsonl").read_bytes() == history
    assert not (folder / "summary.json").exists()
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rfed: error:")]
    assert errors == [f"rfed: error: cannot resume: '{head}' is a pickle (a checkpoint written "
                      "by an earlier rfed); this format is no longer read, since loading a "
                      "pickle can run code"], proc.stderr


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        run_child(*sys.argv[2:4])
