"""Replay with one record changed: every message that differs is a noised release in the ledger.

For every round ``t`` of a run on ``D`` (PriRFed's DP-RSGD and DP-RSVRG; DO-ADP, noisy DSGD,
DPDL, DP-DPSGD, DP-DDA), the round is replayed three times from the same state ``s_t`` (same
random streams) with every communicator call and every noise mechanism call instrumented:

1. on ``D``;
2. on ``D'``, ``D`` with one record of agent ``a`` replaced by another (a large record in
   another direction): some messages differ (the replay is not vacuous);
3. on ``D'`` with each mechanism's noisy output replaced by run 1's (the mechanism still draws,
   so the streams stay aligned): NO message differs, so every message that differed in run 2
   differed through the noisy releases alone (the sender's own release, or what it received of
   another's); and the releases' inputs differ from run 1's by ``Delta_i``, of which
   ``mu = sqrt(sum_i (|Delta_i| / sigma_i)^2)`` (a Gaussian composition) must not exceed the
   ``sqrt(sum count / z^2)`` of the events the ledger charged ``a`` in that round (its noise
   multipliers ``z`` refer to the sensitivity it records); the ledger's events are the same on
   ``D`` and ``D'``.

The same replay runs under ``mpiexec`` on 2 and 3 ranks (each rank instruments its own agents'
messages and releases; the sums are reduced), with the helpers of tests/engines. Run as a
script, ``--child OUT`` is the MPI side (rank 0 writes the results to ``OUT``).
"""

from __future__ import annotations

import copy
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP, DPDDA, DPDL, DPDPSGD, NoisyDSGD
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.manifolds import Euclidean
from rfed.networks.comm import arc_list
from rfed.networks.graphs import circulant, complete
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.problems.frechet import FrechetMean
from rfed.problems.linear import L2Regularizer, LogisticRegression

N_AGENTS, ROUNDS, SEED, CHANGED = 6, 4, 7, 2
MECHANISMS = ("gaussian_mechanism", "gaussian_release", "laplace_mechanism")
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------- problems and cases
def _logreg(changed: bool):
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((N_AGENTS, 3, 4)) / 2
    labels = rng.choice([-1.0, 1.0], (N_AGENTS, 3))
    if changed:   # another record: large, in another direction, the other label
        feats[CHANGED, 0] = 3.0 * np.array([1.0, -1.0, 1.0, -1.0]) * -np.sign(feats[CHANGED, 0])
        labels[CHANGED, 0] *= -1.0
    return LogisticRegression(feats, labels, L2Regularizer(0.05))


def _frechet(changed: bool):
    """Frechet mean on R^3 (gradient -2 (a - x)): the changed record is far away, so its
    clipped gradient has the full norm in another direction."""
    a = np.random.default_rng(2).standard_normal((N_AGENTS, 4, 3))
    if changed:
        a[CHANGED, 0] = 100.0 * np.array([1.0, -1.0, 0.5])
    return FrechetMean(Euclidean(3), a)


def cases(network):
    """(name, algorithm, problem(changed), x0); ``network(graph, weights)``."""
    g = circulant(N_AGENTS, 1)
    w = metropolis_hastings_weights(g)
    return [
        ("prirfed-dp-rsgd", PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=0.5,
                                           noise_multiplier=1.0), 3, 0.1), _frechet,
         np.zeros(3)),
        ("prirfed-dp-rsvrg", PriRFed(DPRSVRG(steps=1, inner_steps=2, clip=0.2, clip_full=0.5,
                                             noise_multiplier=1.0), 3, 0.1), _frechet,
         np.zeros(3)),
        ("doadp", DOADP(network(g, w), alpha=0.1, p=0.8, k=2, grad_bound=1.0,
                        noise_multiplier=1.0, batch_size=2), _logreg, np.zeros(4)),
        ("noisy-dsgd", NoisyDSGD(network(g, w), alpha=0.1, grad_bound=1.0,
                                 noise_multiplier=1.0, batch_size=2), _logreg, np.zeros(4)),
        ("dpdl", DPDL(network(g, w), lr=0.1, alpha=1.5, batch_size=3, clip=0.5,
                      noise_multiplier=1.0), _logreg, np.zeros(4)),
        ("dpdpsgd", DPDPSGD(network(g, w), lr=0.1, batch_size=3, clip=0.5,
                            noise_multiplier=1.0), _logreg, np.zeros(4)),
        ("dpdda", DPDDA(network(complete(N_AGENTS), None), n_active=4, schedule="general",
                        gamma=5.0, clip=1.0, noise_multiplier=1.0), _logreg, np.zeros(4)),
    ]


# ---------------------------------------------------------------------- instrumentation
class _Recorder:
    """Records the messages of every communicator call and every mechanism call of a step;
    in ``forced`` mode each mechanism returns the given outputs (after drawing its noise, so
    the random streams stay aligned)."""

    def __init__(self, forced=None):
        self.messages: list[tuple[str, np.ndarray, np.ndarray]] = []   # (kind, senders, rows)
        self.releases: list[dict] = []
        self.forced = forced

    # communicator calls ------------------------------------------------------------
    def wrap_comm(self, monkeypatch, classes):
        rec = self
        for cls in classes:
            for name in ("mix", "mix_pairs", "gather_from_neighbors", "send_along_arcs",
                         "publish", "gather", "broadcast"):
                original = getattr(cls, name)
                monkeypatch.setattr(cls, name, self._spy(name, original), raising=True)
        return rec

    def _spy(self, kind, original):
        rec = self

        def spy(comm, *args, **kwargs):
            rec._message(comm, kind, args, kwargs)
            return original(comm, *args, **kwargs)
        return spy

    def _message(self, comm, kind, args, kwargs):
        agents = np.asarray(getattr(comm, "agents", np.arange(comm.n_agents)))

        def sent(mask_like):
            if mask_like is None:
                return np.ones(agents.size, dtype=bool)
            m = np.asarray(mask_like)
            if m.dtype == bool:
                return m[agents] if m.size == comm.n_agents else m
            return np.isin(agents, m)

        if kind in ("mix", "gather_from_neighbors"):
            if kwargs.get("copies"):
                return   # public copies: nothing is sent
            values = np.asarray(args[1])
            who, rows = agents, values
            keep = sent(kwargs.get("senders"))
        elif kind == "mix_pairs":
            pairs, values = np.asarray(args[0]), np.asarray(args[1])
            who, rows = agents, values
            keep = sent(kwargs.get("senders")) & np.isin(agents, pairs.ravel())
        elif kind == "publish":
            delta = np.asarray(args[2] if len(args) > 2 else kwargs["delta"])
            who, rows = agents, delta
            keep = sent(kwargs.get("senders"))
        elif kind == "send_along_arcs":
            _, senders, _ = arc_list(args[0])
            senders = senders[np.isin(senders, agents)]   # the arcs leaving this block
            who, rows = senders, np.asarray(args[1])
            keep = np.ones(senders.size, dtype=bool)
        elif kind == "gather":
            values = np.asarray(args[0])
            who, rows = agents, values
            keep = sent(args[1] if len(args) > 1 else kwargs.get("agents"))
        else:   # broadcast: the server's message to the agents
            value = np.asarray(args[0])
            who, rows = np.array([-1]), value[None]
            keep = np.ones(1, dtype=bool)
        self.messages.append((kind, np.asarray(who)[keep], np.array(rows[keep], dtype=float)))

    # mechanism calls ---------------------------------------------------------------
    def wrap_mechanisms(self, monkeypatch):
        """Wrap the mechanisms where the algorithms call them (their modules' names)."""
        for module in [m for n, m in sys.modules.items() if n.startswith("rfed.algorithms")]:
            for name in MECHANISMS:
                fn = getattr(module, name, None)
                if callable(fn):
                    monkeypatch.setattr(module, name, self._mech(name, fn))

    def _mech(self, name, fn):
        rec = self

        def spy(*args):
            if name == "gaussian_mechanism":
                manifold, x, value, sigma, _ = args
            else:
                (value, sigma, _), manifold, x = args, None, None
            out = fn(*args)
            i = len(rec.releases)
            rec.releases.append({"name": name, "manifold": manifold, "x": np.array(x),
                                 "value": np.array(value), "sigma": np.asarray(sigma, float),
                                 "out": np.array(out)})
            if rec.forced is not None:
                return np.array(rec.forced[i]["out"])
            return out
        return spy


def _ledger(state):
    led = state.ledger
    return getattr(led, "ledger", led)


def _spent(state, agent) -> dict:
    led = _ledger(state)
    if led is None or agent not in range(led.n_agents):
        return {}
    return dict(led.spent(agent))


def _step(alg, prob, state, monkeypatch, comm_classes, forced=None):
    rec = _Recorder(forced)
    with monkeypatch.context() as m:
        rec.wrap_comm(m, comm_classes)
        rec.wrap_mechanisms(m)
        new = alg.step(prob, state)
    return rec, new


def _copy(state):
    comm = getattr(state, "comm", None)
    return copy.deepcopy(state, {id(comm): comm} if comm is not None else {})


def _mu_squared(releases0, releases1) -> tuple[float, bool]:
    """``sum_i (|Delta_i| / sigma_i)^2`` over the release rows, and whether the calls match."""
    if len(releases0) != len(releases1):
        return np.inf, False
    total = 0.0
    for r0, r1 in zip(releases0, releases1, strict=True):
        if r0["name"] != r1["name"] or r0["value"].shape != r1["value"].shape:
            return np.inf, False
        diff = r1["value"] - r0["value"]
        if r0["name"] == "gaussian_mechanism":
            man = r0["manifold"]
            k = len(man.point_shape)
            lead = diff.shape[: diff.ndim - k]
            norms = np.asarray(man.norm(np.broadcast_to(r0["x"], diff.shape), diff)).reshape(
                lead)
        else:
            norms = np.sqrt(np.sum(diff.reshape(diff.shape[0], -1) ** 2, axis=1)) \
                if diff.ndim else np.abs(diff)
        sigma = np.broadcast_to(r0["sigma"], norms.shape)
        moved = norms > 0
        if np.any(moved & (sigma == 0)):
            return np.inf, True
        total += float(np.sum((norms[moved] / sigma[moved]) ** 2))
    return total, True


def _ledger_mu_squared(before: dict, after: dict) -> float:
    total = 0.0
    for spec, count in after.items():
        added = count - before.get(spec, 0)
        if added:
            assert spec.mechanism == "gaussian"
            total += added / spec.noise_multiplier**2
    return total


def replay_round(alg, prob0, prob1, state, monkeypatch, comm_classes, agents_here):
    """The three replays of one round from ``state``; returns ``(checks, next state)`` with
    ``checks``: ``differing`` (message rows that differ on ``D'``), ``forced_diff`` (message
    entries differing with the outputs forced), ``matched`` (the mechanism calls line up),
    ``mu2`` / ``ledger_mu2`` (this process's share) and ``same_events``."""
    before = _spent(state, CHANGED) if CHANGED in agents_here else {}
    rec0, new0 = _step(alg, prob0, _copy(state), monkeypatch, comm_classes)
    rec1, new1 = _step(alg, prob1, _copy(state), monkeypatch, comm_classes)
    recf, _ = _step(alg, prob1, _copy(state), monkeypatch, comm_classes, forced=rec0.releases)
    differing = forced_diff = 0
    assert [m[0] for m in rec0.messages] == [m[0] for m in rec1.messages]
    for (_, _, rows0), (_, _, rows1), (_, _, rowsf) in zip(
            rec0.messages, rec1.messages, recf.messages, strict=True):
        differing += int(np.sum(np.any((rows0 != rows1).reshape(rows0.shape[0], -1), axis=1)))
        forced_diff += int(np.sum(rowsf != rows0))
    mu2, matched = _mu_squared(rec0.releases, recf.releases)
    ledger_mu2 = 0.0
    same_events = True
    if CHANGED in agents_here:
        after0, after1 = _spent(new0, CHANGED), _spent(new1, CHANGED)
        same_events = after0 == after1
        ledger_mu2 = _ledger_mu_squared(before, after0)
    checks = {"differing": differing, "forced_diff": forced_diff,
              "matched": matched, "mu2": mu2, "ledger_mu2": ledger_mu2,
              "same_events": same_events}
    return checks, new0


def _check(name, totals):
    assert totals["forced_diff"] == 0, (name, "a message depends on data beside the releases")
    assert totals["matched"] and totals["same_events"], name
    assert totals["mu2"] <= totals["ledger_mu2"] * (1 + 1e-9) + 1e-300, (name, totals)


# ---------------------------------------------------------------------- in-process
@pytest.mark.parametrize("index", range(7), ids=[c[0] for c in cases(Network)])
def test_in_process_replay_every_differing_message_is_a_recorded_release(index, monkeypatch):
    from rfed.networks.comm import InProcessCommunicator

    name, alg, make, x0 = cases(lambda g, w: Network(g, w))[index]
    prob0, prob1 = make(False), make(True)
    x0 = prob0.manifold.random_point(np.random.default_rng(3)) if x0 is None else x0
    state = alg.init(prob0, x0, np.random.default_rng(SEED))
    seen = {"differing": 0, "ledger_mu2": 0.0}
    for _ in range(ROUNDS):
        checks, state = replay_round(alg, prob0, prob1, state, monkeypatch,
                                     [InProcessCommunicator], np.arange(N_AGENTS))
        _check(name, checks)
        seen["differing"] += checks["differing"]
        seen["ledger_mu2"] += checks["ledger_mu2"]
    # the replay is not vacuous: the changed record reached the messages and the ledger
    assert seen["differing"] > 0 and seen["ledger_mu2"] > 0, (name, seen)


def _replay_totals(index, monkeypatch):
    from rfed.networks.comm import InProcessCommunicator

    name, alg, make, x0 = cases(lambda g, w: Network(g, w))[index]
    prob0, prob1 = make(False), make(True)
    x0 = prob0.manifold.random_point(np.random.default_rng(3)) if x0 is None else x0
    state = alg.init(prob0, x0, np.random.default_rng(SEED))
    totals = {"forced_diff": 0, "mu2": 0.0, "ledger_mu2": 0.0}
    for _ in range(ROUNDS):
        checks, state = replay_round(alg, prob0, prob1, state, monkeypatch,
                                     [InProcessCommunicator], np.arange(N_AGENTS))
        for key in totals:
            totals[key] += checks[key]
    return totals


@pytest.mark.parametrize("index", [0, 2], ids=["prirfed-dp-rsgd", "doadp"])
def test_replay_catches_noise_four_times_smaller_than_recorded(index, monkeypatch):
    """The trainer (PriRFed) or the round (DO-ADP) noises with a quarter of the std that the
    ledger's events record."""
    from rfed.algorithms.federated.local import LocalTrainer

    release, init = LocalTrainer._release, DOADP.init

    def quarter_release(self, problem, x, value, sigma, rng, noisy=None):
        return release(self, problem, x, value, np.asarray(sigma) / 4.0, rng, noisy)

    def quarter_init(self, problem, x0, rng):
        state = init(self, problem, x0, rng)
        state.noise_std = state.noise_std / 4.0
        return state

    monkeypatch.setattr(LocalTrainer, "_release", quarter_release)
    monkeypatch.setattr(DOADP, "init", quarter_init)
    totals = _replay_totals(index, monkeypatch)
    assert totals["mu2"] > totals["ledger_mu2"], totals


def test_replay_catches_a_message_that_carries_data_beside_the_releases(monkeypatch):
    """DO-ADP whose published update also carries 1e-12 times an exact statistic of the data
    (its gradient at 0): with the releases forced, the messages still differ."""
    import rfed.algorithms.decentralized.doadp as doadp_module

    current = {}
    sparsify = doadp_module.sparsify
    step = DOADP.step

    def leaky_sparsify(*args, **kwargs):
        return sparsify(*args, **kwargs) + 1e-12 * current["cost"]

    def remember(self, problem, state):
        current["cost"] = float(np.sum(problem.grad(np.zeros(4))))
        return step(self, problem, state)

    monkeypatch.setattr(doadp_module, "sparsify", leaky_sparsify)
    monkeypatch.setattr(DOADP, "step", remember)
    assert _replay_totals(2, monkeypatch)["forced_diff"] > 0


# ---------------------------------------------------------------------- MPI
def run_child(path: str) -> None:
    from mpi4py import MPI

    from rfed.engines.mpi import MPICommunicator, _algorithm_comm, shard_for_rank

    world = MPI.COMM_WORLD
    out = {}
    mp = pytest.MonkeyPatch()
    try:
        for name, alg, make, x0 in cases(
                lambda g, w: Network(g, w, communicator=MPICommunicator(N_AGENTS))):
            if name.startswith("prirfed"):
                continue   # PriRFed's engines are the in-process one and Flower
            comm = _algorithm_comm(alg)
            prob0, prob1 = (shard_for_rank(make(c), comm) for c in (False, True))
            state = alg.init(prob0, x0, np.random.default_rng(SEED))
            totals = {"differing": 0, "forced_diff": 0, "matched": True,
                      "mu2": 0.0, "ledger_mu2": 0.0, "same_events": True}
            for _ in range(ROUNDS):
                checks, state = replay_round(alg, prob0, prob1, state, mp, [MPICommunicator],
                                             np.asarray(comm.agents))
                for key in ("differing", "forced_diff", "mu2", "ledger_mu2"):
                    totals[key] += world.allreduce(checks[key])
                for key in ("matched", "same_events"):
                    totals[key] = totals[key] and all(world.allgather(checks[key]))
            out[name] = totals
    finally:
        mp.undo()
    if world.Get_rank() == 0:
        with open(path, "wb") as fh:
            pickle.dump(out, fh)


def _mpiexec():
    local = Path(sys.executable).with_name("mpiexec")
    return str(local) if local.exists() else shutil.which("mpiexec")


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install 'rfed[mpi]')")
@pytest.mark.parametrize("ranks", [2, 3])
def test_mpi_replay_every_differing_message_is_a_recorded_release(ranks, tmp_path):
    out = tmp_path / "out.pkl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py",
                           __file__, "--child", str(out)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = pickle.loads(out.read_bytes())
    assert set(got) == {c[0] for c in cases(Network) if not c[0].startswith("prirfed")}
    for name, totals in got.items():
        _check(name, totals)
        assert totals["differing"] > 0 and totals["ledger_mu2"] > 0, (name, totals)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        run_child(sys.argv[2])
