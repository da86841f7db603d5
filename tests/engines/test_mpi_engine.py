"""The MPI engine gives bit-identical iterates and identical privacy reports on any number of
ranks, equal to the one-process run, for DO-ADP, DPDL (and DP-DPSGD), DP-DDA, DP-DGT (and
noisy DDGT) on 16-agent graphs, and for chunked Riemannian gossip; a run killed mid-way and
resumed from its checkpoint ends bit-identical to an uninterrupted one (tests launch
``mpiexec`` as a subprocess with a timeout).

Run as a script under ``mpiexec``: ``--child OUT`` runs every case with the MPI engine and rank 0
pickles the results to ``OUT``; ``--resume-child OUT CKPT PHASE`` runs the checkpoint cases
(``PHASE`` is ``kill``: save every 2 rounds and stop after round 5, the last case by SIGKILL of
rank ``size - 1``; or ``resume``: continue every case from its ``CKPT`` file).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL, DPDPSGD, NoisyDDGT
from rfed.datasets.synthetic import make_epsilon_like, make_pca_synthetic_agents
from rfed.manifolds import Sphere
from rfed.networks.comm import InProcessCommunicator
from rfed.networks.gossip import mix_tangent, riemannian_gossip
from rfed.networks.graphs import circulant, complete, exponential, star
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.base import Problem
from rfed.problems.dispatch import QuadraticResourceAllocation
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.problems.pca import SpherePCA
from rfed.state import load_state

N_AGENTS, N_ROUNDS, SEED = 16, 6, 2024
MPIEXEC = Path(sys.executable).with_name("mpiexec")
ROOT = Path(__file__).resolve().parents[2]


def _logreg():
    x, y = make_epsilon_like(16 * 12, 10, 3)
    f, lab = split_evenly(x, y, N_AGENTS, np.random.default_rng(3))
    return LogisticRegression(f, lab, L2Regularizer(0.1), feature_bound=1.0)


def _sphere_pca():
    z = np.random.default_rng(4).standard_normal((N_AGENTS, 10, 5)) * [3.0, 1, 1, 1, 1]
    return SpherePCA(z)


#: A case whose data each rank generates for its own agents only (keyed by (seed, agent)).
KEYED = "doadp-sphere-keyed"


def _keyed_pca(agents=None):
    """The keyed synthetic PCA problem: every agent's rows (``agents=None``) or a shard built
    from the rows of ``agents`` alone (the others are never generated)."""
    ids = np.arange(N_AGENTS) if agents is None else np.asarray(agents)
    prob = SpherePCA(make_pca_synthetic_agents(ids, 8, 6, 0.3, seed=11))
    return prob if agents is None else prob.as_shard(ids, np.full(N_AGENTS, 8))


def _dispatch():
    """16 generators with quadratic costs, boxes and demands (m = 2 resources)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(0.02, 0.1, (N_AGENTS, 2))
    b = rng.uniform(1.0, 3.0, (N_AGENTS, 2))
    hi = rng.uniform(40.0, 80.0, (N_AGENTS, 2))
    return QuadraticResourceAllocation(a, b, np.zeros_like(a), hi, 0.4 * hi)


def _graph():
    g = circulant(N_AGENTS, 2)
    return g, metropolis_hastings_weights(g)


def _cases(network, comm_factory):
    """(name, algorithm, problem, x0) of every case; ``network(graph, weights)`` builds the
    networks, ``comm_factory`` is DP-DGT's communicator factory."""
    logreg = _logreg()
    g, w = _graph()
    return [
        ("doadp-budget-topk", DOADP(network(g, w), alpha=0.05, p=0.7, k=3, grad_bound=1.0,
                                    budget=PrivacyBudget(4.0, 1e-5), n_rounds=N_ROUNDS),
         logreg, np.zeros(10)),
        ("doadp-randk", DOADP(network(g, w), alpha=0.05, p=0.8, k=4, sparsifier="rand_k",
                              grad_bound=1.0, noise_multiplier=1.5, batch_size=2),
         logreg, np.zeros(10)),
        # on the sphere the consensus goes through gather_from_neighbors and Log per arc
        ("doadp-sphere", DOADP(network(g, w), alpha=0.05, p=0.8, k=2, grad_bound=1.0,
                               noise_multiplier=1.0), _sphere_pca(), np.eye(5)[0]),
        # the problem is replaced by a rank's as_shard in _mpi_cases
        (KEYED, DOADP(network(g, w), alpha=0.05, p=0.8, k=2, grad_bound=1.0,
                      noise_multiplier=1.0), _keyed_pca(), np.eye(6)[0]),
        # cross-gradients go back along the arcs (send_along_arcs); chunks of 7 pairs
        ("dpdl", DPDL(network(g, w), lr=0.2, alpha=2.0, batch_size=4, clip=0.5,
                      noise_multiplier=1.0, max_chunk_pairs=7), logreg, np.zeros(10)),
        ("dpdl-sphere", DPDL(network(g, w), lr=0.05, alpha=1.5, batch_size=3, clip=1.0,
                             noise_multiplier=1.0), _sphere_pca(), np.eye(5)[0]),
        ("dpdpsgd", DPDPSGD(network(g, w), lr=0.2, batch_size=4, clip=0.5,
                            noise_multiplier=1.0), logreg, np.zeros(10)),
        # a new random matching W^(t) every round, mixed with a senders restriction
        ("dpdda", DPDDA(network(complete(N_AGENTS), None), n_active=6, schedule="general",
                        gamma=5.0, noise_multiplier=1.0), logreg, np.zeros(10)),
        # push-pull on a directed graph: C is column-, R row-stochastic (not symmetric)
        ("dpdgt-budget", DPDGT(exponential(N_AGENTS, directed=True), alpha0=0.05,
                               budget=PrivacyBudget(2.0, 1e-5), n_rounds=N_ROUNDS,
                               communicator=comm_factory), _dispatch(), np.zeros(2)),
        ("ddgt", NoisyDDGT(exponential(N_AGENTS, directed=True), iota=0.05,
                           theta_xi=LaplaceSchedule(0.05, 0.99),
                           theta_zeta=LaplaceSchedule(0.05, 0.99), communicator=comm_factory),
         _dispatch(), np.zeros(2)),
    ]


def _chunked_gossip(comm) -> dict:
    """Three Riemannian gossip steps and a tangent mix on a star, in receiver chunks of at most
    4 arcs: the hub's rank has more chunks than the others (one halo exchange per call on
    every rank regardless)."""
    g = star(N_AGENTS)
    w = metropolis_hastings_weights(g)
    sphere = Sphere(4)
    x = sphere.random_point(np.random.default_rng(6), N_AGENTS)[comm.agents]
    noise = np.random.default_rng(7).standard_normal((N_AGENTS, 5))[comm.agents]
    u = sphere.proj(x, noise)
    for _ in range(3):
        y = riemannian_gossip(sphere, x, w, 0.5, comm=comm, max_chunk_arcs=4)
        u = mix_tangent(sphere, w, x, u, y, comm=comm, max_chunk_arcs=4)
        x = y
    return {"x": comm.all_rows(np.concatenate([x, u], axis=1)), "output": np.zeros(1),
            "privacy": None, "messages": comm.total_stats()}


def _report(alg, state):
    rep = alg.privacy(state)
    return rep if rep is None or isinstance(rep, dict) else rep.report()


def run_in_process() -> dict:
    out = {}
    cases = _cases(lambda g, w: Network(g, w), InProcessCommunicator)
    for name, alg, prob, x0 in cases:
        state = alg.init(prob, x0, np.random.default_rng(SEED))
        for _ in range(N_ROUNDS):
            state = alg.step(prob, state)
        out[name] = {"x": alg._output_points(state), "output": alg.output(prob, state),
                     "privacy": _report(alg, state), "messages": state.comm.total_stats(),
                     "metrics": alg.metrics(prob, state, name != KEYED)}
    out["gossip-chunks"] = _chunked_gossip(InProcessCommunicator(N_AGENTS))
    return out


def _mpi_cases():
    """The cases on this rank: each problem is the rank's shard (only its block's rows; the
    full problems are dropped once sharded), its reference computed before sharding."""
    from rfed.engines.mpi import MPICommunicator, _algorithm_comm, shard_for_rank

    shards = {}
    cases = []
    for name, alg, prob, x0 in _cases(
            lambda g, w: Network(g, w, communicator=MPICommunicator(N_AGENTS)),
            MPICommunicator):
        if name == KEYED:
            # generated for this rank's agents alone, no reference (it needs every agent)
            comm = _algorithm_comm(alg)
            cases.append((name, alg, shard_for_rank(_keyed_pca(comm.agents), comm), x0))
            continue
        if id(prob) not in shards:
            # public facts of the run, from every agent's data, before sharding
            if isinstance(prob, Problem):
                prob.reference_cost()
            elif isinstance(prob, QuadraticResourceAllocation):
                prob.optimum()
            shards[id(prob)] = shard_for_rank(prob, _algorithm_comm(alg))
        cases.append((name, alg, shards[id(prob)], x0))
    return cases


def _rows_held(prob, comm) -> list:
    """Every rank's data rows of ``prob``, and proof that the whole data is out of reach."""
    others = np.setdiff1d(np.arange(N_AGENTS), comm.agents)
    if isinstance(prob, QuadraticResourceAllocation):
        if others.size:
            with pytest.raises(ValueError, match=f"agent {others[0]} is not held here"):
                prob.demand_rows(others[:1])
        with pytest.raises(ValueError, match="'.a'"):
            prob.a  # noqa: B018 - the attribute access is the check
        return comm.comm.allgather({k: v.shape[0] for k, v in prob._rows.items()})
    if not isinstance(prob, Problem):
        return []
    if others.size:
        with pytest.raises(ValueError, match=f"agent {others[0]} is not held here"):
            prob.batch(others[:1], np.zeros((1, 1), int))
    with pytest.raises(ValueError, match="'.data'"):
        prob.data  # noqa: B018 - the attribute access is the check
    return comm.comm.allgather({k: v.shape[0] for k, v in prob._data.items()})


def run_child(path: str) -> None:
    from rfed.engines.mpi import MPICommunicator, _algorithm_comm, run_mpi

    out = {}
    for name, alg, prob, x0 in _mpi_cases():
        metrics = {}

        def last_round(t, state, alg=alg, prob=prob, metrics=metrics, name=name):
            if t == N_ROUNDS:   # a collective on every rank: the shards' reductions
                metrics.update(alg.metrics(prob, state, name != KEYED))

        rows = _rows_held(prob, _algorithm_comm(alg))
        res = run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0,
                      callback=last_round)
        if res is not None:
            out[name] = {"x": res["x"], "output": res["output"], "privacy": res["privacy"],
                         "messages": res["comm"], "metrics": metrics, "rows": rows}
    chunks = _chunked_gossip(MPICommunicator(N_AGENTS))
    # what `rfed run NAME --engine mpi` hands its settings: this rank's shard
    from mpi4py import MPI

    from rfed.engines.mpi import mpi_engine
    from rfed.experiments._decentralized import engine_problem

    with mpi_engine():
        mine = engine_problem(_sphere_pca())
    engine_rows = MPI.COMM_WORLD.allgather(mine._data["z"].shape[0] if mine.is_shard else None)
    if out:
        out["gossip-chunks"] = chunks
        out["_engine_problem_rows"] = engine_rows
        with open(path, "wb") as fh:
            pickle.dump(out, fh)


#: The checkpoint cases; the last is SIGKILLed, the others crash (all ranks raise) mid-run.
RESUME_CASES = ("doadp-budget-topk", "dpdda", "dpdgt-budget", "dpdl")


class _Crash(Exception):
    pass


def run_resume_child(path: str, ckpt: str, phase: str) -> None:
    """Every case of RESUME_CASES, one checkpoint file each (``ckpt`` + name)."""
    from mpi4py import MPI

    from rfed.engines.mpi import run_mpi

    world = MPI.COMM_WORLD

    def crash_after_5(t, state):
        if t == 5:
            raise _Crash

    def kill_after_5(t, state):
        if t == 5 and world.Get_rank() == world.Get_size() - 1:
            os.kill(os.getpid(), signal.SIGKILL)   # the job dies mid-run, unannounced

    out = {}
    cases = {c[0]: c for c in _mpi_cases()}
    for name in RESUME_CASES:
        _, alg, prob, x0 = cases[name]
        file = f"{ckpt}.{name}"
        if phase == "kill":
            try:
                run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0,
                        checkpoint_every=2, checkpoint=file,
                        callback=kill_after_5 if name == RESUME_CASES[-1] else crash_after_5)
            except _Crash:
                continue
        res = run_mpi(alg, prob, N_ROUNDS, rng=None, resume_from=file)
        if res is not None:
            out[name] = {"x": res["x"], "output": res["output"], "privacy": res["privacy"],
                         "messages": res["comm"], "engine_bytes": res["engine_bytes"]}
    if out:
        with open(path, "wb") as fh:
            pickle.dump(out, fh)


def _mpiexec():
    return str(MPIEXEC) if MPIEXEC.exists() else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")


def _launch(ranks: int, *args: str, check: bool = True,
            script: str = __file__) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py",
                           script, *args], capture_output=True, text=True, timeout=120,
                          env=env)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def reference():
    return run_in_process()


def _assert_same(got: dict, reference: dict, names) -> None:
    assert set(got) == set(names)
    for name in names:
        ref = reference[name]
        np.testing.assert_array_equal(got[name]["x"], ref["x"], err_msg=name)
        np.testing.assert_array_equal(got[name]["output"], ref["output"], err_msg=name)
        assert got[name]["privacy"] == ref["privacy"], name
        assert got[name]["messages"] == ref["messages"], name
        if "metrics" in got[name]:
            # cost, gradient norm, excess risk, distance: reductions over the shards
            assert got[name]["metrics"] == ref["metrics"], name


@needs_mpi
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_mpi_runs_are_bit_identical_to_one_process(reference, ranks, tmp_path):
    """Every rank runs on its shard (its block's rows only) and gives the one-process bits,
    logged metrics included."""
    from rfed.engines.mpi import block_bounds

    out = tmp_path / "out.pkl"
    _launch(ranks, "--child", str(out))
    got = pickle.loads(out.read_bytes())
    engine_rows = got.pop("_engine_problem_rows")
    _assert_same(got, reference, list(reference))
    blocks = np.diff(block_bounds(N_AGENTS, ranks)).tolist()
    # experiments under --engine mpi: a shard per rank (one rank keeps the problem itself)
    assert engine_rows == ([None] if ranks == 1 else blocks)
    for name, res in got.items():
        if name == "gossip-chunks":
            continue
        assert [min(r.values()) for r in res["rows"]] == blocks, name
        assert [max(r.values()) for r in res["rows"]] == blocks, name


@needs_mpi
def test_killed_mpi_run_resumes_bit_identically(reference, tmp_path):
    """3 ranks, checkpoints every 2 rounds; the job dies after round 5 (the last case's rank 2
    is SIGKILLed; the cases before it crash on every rank); a new job resumes each case from
    its round-4 checkpoint and ends as the uninterrupted run (iterates, privacy report and
    message counts)."""
    out, ckpt = tmp_path / "out.pkl", tmp_path / "ckpt"
    proc = _launch(3, "--resume-child", str(out), str(ckpt), "kill", check=False)
    assert proc.returncode != 0  # killed
    for name in RESUME_CASES:
        payload = load_state(f"{ckpt}.{name}", kind="mpi-checkpoint")
        assert payload["round"] == 4 and payload["n_ranks"] == 3, name
    _launch(3, "--resume-child", str(out), str(ckpt), "resume")
    _assert_same(pickle.loads(out.read_bytes()), reference, RESUME_CASES)


def test_cases_are_private_and_move(reference):
    """The compared runs are not trivial: noise is on, agents disagree, iterates left x0."""
    for name, ref in reference.items():
        if name == "gossip-chunks":
            continue
        assert ref["privacy"]["epsilon_certified"] > 0, name
        assert np.ptp(ref["x"], axis=0).max() > 1e-3, name
        assert ref["messages"]["messages"] > 0, name


def test_mpi_engine_without_mpiexec_is_one_rank():
    """``python script.py`` without mpiexec is a 1-rank job: the engine holds every agent and
    serves every call like the in-process engine (counts included)."""
    from rfed.engines.mpi import MPICommunicator

    g, w = _graph()
    comm, ref = MPICommunicator(N_AGENTS), InProcessCommunicator(N_AGENTS)
    v = np.random.default_rng(0).standard_normal((N_AGENTS, 3))
    np.testing.assert_array_equal(comm.mix(w, v), ref.mix(w, v))
    arcs = np.random.default_rng(1).standard_normal((w.nnz - N_AGENTS, 2))
    a, b = comm.send_along_arcs(w, arcs), ref.send_along_arcs(w, arcs)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.arc_ids, b.arc_ids)
    np.testing.assert_array_equal(comm.gather(v, [3, 1]), ref.gather(v, [3, 1]))
    np.testing.assert_array_equal(comm.broadcast(v[0], [2, 5]), ref.broadcast(v[0], [2, 5]))
    senders = np.arange(N_AGENTS) % 2 == 0
    a = comm.gather_from_neighbors(w, v, senders=senders)
    b = ref.gather_from_neighbors(w, v, senders=senders)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.senders, b.senders)
    assert comm.total_stats() == ref.total_stats()
    with pytest.raises(ValueError, match="does not send this round"):
        comm.mix(w, v, senders=senders)
    with pytest.raises(ValueError, match="arc_values"):
        comm.send_along_arcs(w, arcs[:-1])


def test_shards_for_a_rank_and_for_an_experiment():
    """One rank (no mpiexec) holds every agent: ``run_mpi``'s shard holds all rows with a
    reducer; a shard of other agents is refused; experiments keep the problem itself."""
    from rfed.engines.mpi import MPICommunicator, mpi_engine, shard_for_rank
    from rfed.experiments._decentralized import engine_problem

    prob = _sphere_pca()
    comm = MPICommunicator(N_AGENTS)
    mine = shard_for_rank(prob, comm)
    assert mine.is_shard and mine._data["z"].shape[0] == N_AGENTS
    x = np.eye(5)[1]
    assert mine.cost(x) == prob.cost(x)
    np.testing.assert_array_equal(mine.grad(x), prob.grad(x))
    with pytest.raises(ValueError, match="rank 0 runs agents 0..15"):
        shard_for_rank(prob.shard(np.arange(4)), comm)
    dispatch = _dispatch()
    held = shard_for_rank(dispatch, comm)
    assert held.is_shard and held._rows["a"].shape[0] == N_AGENTS
    assert engine_problem(prob) is prob
    with mpi_engine():
        assert engine_problem(prob) is prob   # a 1-rank job: nothing to shard


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        run_child(sys.argv[2])
    elif sys.argv[1:2] == ["--resume-child"]:
        run_resume_child(*sys.argv[2:5])
