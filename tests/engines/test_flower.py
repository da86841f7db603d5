"""PriRFed on Flower: the run config carries any PriRFed configuration and problem, SuperNodes
read their own data files, the ServerApp validates every reply, a client releases only its
noised points, and a real secure deployment (TLS, SuperNode authentication) on loopback gives
the in-process run's final point and privacy report bit for bit."""

import dataclasses
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

flwr = pytest.importorskip("flwr", reason="flwr (Python >= 3.11, extra rfed[flower]) is not "
                                          "installed: the Flower engine cannot run")

import tomllib  # noqa: E402  (Python >= 3.11, as flwr)
from flwr.app import (  # noqa: E402
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    Metadata,
    RecordDict,
)

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed  # noqa: E402
from rfed.algorithms.federated.client_dp import ClientLevelDP  # noqa: E402
from rfed.datasets.synthetic import make_pca_synthetic, make_wishart_spd  # noqa: E402
from rfed.engines import flower, flower_config  # noqa: E402
from rfed.engines.flower_launch import (  # noqa: E402
    LoopbackFederation,
    _free_port,
    make_loopback_certificates,
    make_node_key,
)
from rfed.manifolds import Hyperboloid, Sphere  # noqa: E402
from rfed.privacy import PrivacyBudget  # noqa: E402
from rfed.problems import (  # noqa: E402
    KPCA,
    FrechetMean,
    HyperbolicPrediction,
    SPDFrechetMean,
    SpherePCA,
)

MALICIOUS = Path(__file__).with_name("flower_malicious")
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="process groups")


def _without_federation(report):
    return {k: v for k, v in report.items() if k != "federation"}


# ----------------------------------------------------------------------------- configuration
def test_app_package_declares_the_engine_and_its_default_config():
    meta = tomllib.loads((flower.APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert meta["components"] == {"serverapp": "rfed.engines.flower:server_app",
                                  "clientapp": "rfed.engines.flower:client_app"}
    assert meta["config"] == flower.DEFAULT_CONFIG
    assert isinstance(flower.server_app, flwr.serverapp.ServerApp)
    assert isinstance(flower.client_app, flwr.clientapp.ClientApp)
    with pytest.raises(ValueError, match="unknown run-config keys"):
        flower.algorithm_from_config({"n-agent": 3})
    with pytest.raises(ValueError, match="'trainer' must be"):
        flower.algorithm_from_config({"trainer": "sgd"})
    with pytest.raises(ValueError, match="run-config 'rounds' must be a int"):
        flower.algorithm_from_config({"rounds": 2.5})
    with pytest.raises(ValueError, match="flat keys \\['epsilon'\\] must then stay"):
        flower.algorithm_from_config({"algorithm": "{}", "epsilon": 3.0})
    with pytest.raises(ValueError, match="run-config 'problem' must be one of"):
        flower_config.public_problem(flower._config({"problem": "os.system"}))
    with pytest.raises(ValueError, match="manifold 'eval\\(1\\)' is not one of"):
        flower_config.manifold_from_name("eval(1)")


@pytest.mark.parametrize("overrides", [{"rounds": 2}, {"rounds": 2, "client-clip": 0.1}])
def test_in_process_reference_is_prirfed_run_with_the_same_seed(overrides):
    x, privacy = flower.run_in_process(overrides)
    cfg = {**flower.DEFAULT_CONFIG, **overrides}
    res = flower.algorithm_from_config(cfg).run(flower.demo_problem(), 2, rng=cfg["seed"],
                                                eval_every=2)
    np.testing.assert_array_equal(x, res.x)
    assert privacy == res.privacy


_ALGORITHMS = [
    PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=1.0), 3, 0.05,
            budget=PrivacyBudget(2.0, 1e-4), n_rounds=4),
    PriRFed(DPRSGD(steps=1, batch_size=0.25, clip=2.0, sampling="poisson"), None, 0.1,
            aggregation="karcher", output_option=2,
            budget=PrivacyBudget(1.0, 1e-5, neighboring="add_remove_one", method="rdp"),
            n_rounds=3),
    PriRFed(DPRSVRG(steps=2, inner_steps=3, clip=1.0, clip_full=0.5, paper_epsilon=0.2,
                    paper_delta=1e-4), 2, 0.05, privacy_delta=1e-5),
    PriRFed(DPRSVRG(steps=1, inner_steps=2, clip=0.25, clip_full=1.0,
                    variant="released_snapshot", batch_size=4, noise_multiplier=3.0), 2, 0.3),
    PriRFed(DPRSGD(steps=1, clip=1.0), 4, 0.1, budget=PrivacyBudget(3.0, 1e-4), n_rounds=5,
            client_dp=ClientLevelDP(0.5, budget=PrivacyBudget(2.0, 1e-5))),
    PriRFed(DPRSGD(steps=1, batch_size=0.5), 2, 0.1),
]


@pytest.mark.parametrize("alg", _ALGORITHMS, ids=lambda a: a.name)
def test_any_prirfed_configuration_crosses_the_run_config_unchanged(alg):
    spec = json.loads(json.dumps(flower_config.algorithm_spec(alg)))   # through JSON text
    back = flower.algorithm_from_config({"algorithm": json.dumps(spec)})
    mine = {k: v for k, v in vars(alg).items() if k != "_plans"}
    theirs = {k: v for k, v in vars(back).items() if k != "_plans"}
    assert mine == theirs   # every attribute, trainer/budget/client-DP dataclasses by value
    with pytest.raises(ValueError, match="step-size schedule"):
        flower_config.algorithm_spec(PriRFed(DPRSGD(), 1, lambda t: 0.1))


def _problems():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(4, 9, 3))
    targets = Hyperboloid(2).random_point(rng, (4, 9))
    return {
        "SpherePCA": SpherePCA(make_pca_synthetic(4, 9, 6, 0.1, rng), norm_bound=3.0),
        "KPCA": KPCA(make_pca_synthetic(4, 9, 7, 0.1, rng), 2, "stiefel", norm_bound=2.0),
        "SPDFrechetMean": SPDFrechetMean(make_wishart_spd(36, 2, rng).reshape(4, 9, 2, 2),
                                         gradient_bound=1.0, evaluate_grad_norm=False),
        "FrechetMean": FrechetMean(Sphere(3), Sphere(3).random_point(rng, (4, 9)),
                                   counts=np.array([9, 5, 7, 9]), gradient_bound=2.0),
        "HyperbolicPrediction": HyperbolicPrediction(feats, targets, feats[0, 0],
                                                     weights="kernel"),
        "HyperbolicPrediction-ridge": HyperbolicPrediction(feats, targets, feats[1, 2]),
    }


@pytest.mark.parametrize("name", list(_problems()))
def test_each_node_rebuilds_its_shard_from_its_own_file_bit_for_bit(tmp_path, name):
    problem = _problems()[name]
    config = flower._config(flower_config.problem_facts(problem))
    blocks = [np.array([0, 1]), np.array([2]), np.array([3])]
    paths = [tmp_path / f"node-{i}.npz" for i in range(3)]
    flower_config.write_node_shards(problem, blocks, paths)
    for block, path in zip(blocks, paths, strict=True):
        shard = flower_config.load_node_problem(path, config)
        assert shard.is_shard and shard.agents.tolist() == block.tolist()
        full = problem.shard(block)
        assert shard._data.keys() == full._data.keys()
        for key in full._data:   # derived arrays (norms, Cholesky factors, weights) too
            np.testing.assert_array_equal(shard._data[key], full._data[key])
        for fact in ("gradient_bound", "privacy_assumptions", "coupled_records",
                     "evaluate_grad_norm", "n_max"):
            assert getattr(shard, fact) == getattr(problem, fact)
        np.testing.assert_array_equal(shard.counts, problem.counts)
    server = flower_config.public_problem(config)   # public facts only
    assert server.is_shard and server.agents.size == 0
    assert repr(server.manifold) == repr(problem.manifold)
    np.testing.assert_array_equal(server.agent_weights, problem.agent_weights)


def test_a_node_refuses_a_data_file_that_is_corrupt_foreign_or_disagrees_with_the_run(tmp_path):
    problem = _problems()["SpherePCA"]
    config = flower._config(flower_config.problem_facts(problem))
    path = tmp_path / "node.npz"
    flower_config.write_node_shards(problem, [np.array([1, 2])], [path])
    raw = bytearray(path.read_bytes())
    flipped = tmp_path / "flipped.npz"
    flower_config.save_node_data(flipped, "SpherePCA", [1, 2], problem.counts[[1, 2]],
                                 {"z": problem.data["z"][[1, 2]] * (1 + 2**-52)})
    good = dict(np.load(path, allow_pickle=False))
    bad = dict(np.load(flipped, allow_pickle=False))
    bad["sha256"] = good["sha256"]   # the digest of other arrays
    np.savez(flipped, **bad)
    pickled = tmp_path / "pickled.npz"
    pickled.write_bytes(b"\x80\x04\x95" + bytes(raw[:40]))
    cases = [
        (flipped, "is corrupted: its SHA-256 digest does not match"),
        (pickled, "is not a readable .npz file"),
        (tmp_path / "absent.npz", "does not exist"),
        (path, "record counts \\[9, 9\\] of agents \\[1, 2\\] differ from the run config"),
    ]
    for bad_path, message in cases[:3]:
        with pytest.raises(ValueError, match=f"node data file '{re.escape(str(bad_path))}' "
                                             f"{message}"):
            flower_config.load_node_problem(bad_path, config)
    with pytest.raises(ValueError, match=cases[3][1]):
        flower_config.load_node_problem(path, {**config, "counts": "[9, 8, 8, 9]"})
    with pytest.raises(ValueError, match="holds rows of a SpherePCA problem"):
        flower_config.load_node_problem(path, {**config, "problem": "KPCA",
                                               "problem-options": '{"k": 1}'})
    with pytest.raises(ValueError, match="array 'z' has shape \\(2, 9, 6\\), float64; the run "
                                         "config says \\(2, 9, 5\\)"):
        flower_config.load_node_problem(path, {**config, "problem-arrays": '{"z": [5]}'})


def test_run_config_paths_stay_inside_the_server_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("RFED_FLOWER_DIR", str(tmp_path / "server"))
    assert flower.server_path("runs/r1.json", "out") == (tmp_path / "server/runs/r1.json")
    (tmp_path / "server").mkdir(exist_ok=True)
    (tmp_path / "server" / "escape").symlink_to(tmp_path)
    for name in ("/etc/passwd", "../x.json", "runs/../../x", "", "a\\..\\b", ".hidden"):
        with pytest.raises(ValueError, match="run-config 'checkpoint' must be a relative path "
                                             "inside the server directory"):
            flower.server_path(name, "checkpoint")
    with pytest.raises(ValueError, match="resolves to .*, outside the server directory"):
        flower.server_path("escape/x.json", "out")


# ----------------------------------------------------------------------------- the server
def _node_states(problem, config, owned):
    """Each node's (shard, algorithm, initial state), built as a ClientApp builds them."""
    c = flower._config(config)
    out = {}
    for node, own in owned.items():
        shard = problem.shard(own)
        alg = flower.algorithm_from_config(c)
        out[node] = (shard, alg, flower._initial(shard, alg, c))
    return out


def _transport(problem, config, owned, *, tamper=None, crash_in_round=None):
    """Carries the blocks to ``train_block`` in this process; ``tamper(node, t, reply)``
    replaces a node's reply (a malicious client) when it returns something."""
    nodes = _node_states(problem, config, owned)

    def train_blocks(t, state, node_blocks):
        if t == crash_in_round:
            raise ConnectionError(f"SuperLink lost in round {t}")
        replies = []
        for node, block in node_blocks:
            reply = flower.train_block(*nodes[node], state.x, t, int(state.seed), block)
            changed = tamper(node, t, reply) if tamper else None
            replies.extend(changed if isinstance(changed, list) else
                           [(node, reply if changed is None else changed)])
        return replies
    return train_blocks


@pytest.mark.parametrize("nodes", [(5,), (2, 8, 3, 1)])
def test_sharded_clients_and_a_public_facts_server_give_the_in_process_run(nodes):
    config = {**flower.DEFAULT_CONFIG, "rounds": 3}
    full = flower.demo_problem()
    server = flower_config.public_problem(flower._config(config))
    alg = flower.algorithm_from_config(config)
    owned = flower.owned_agents(8, list(nodes))
    state, trace = flower.serve(server, alg, config, list(nodes),
                                _transport(full, config, owned))
    x_ref, privacy_ref = flower.run_in_process(config)
    np.testing.assert_array_equal(alg.output(server, state), x_ref)
    assert alg.privacy(state) == privacy_ref
    assert trace.refused == [] and len(trace.x) == 3
    np.testing.assert_array_equal(trace.x[-1], x_ref)


def test_any_problem_and_configuration_run_sharded_as_in_one_process():
    problem = _problems()["SPDFrechetMean"]
    alg = PriRFed(DPRSVRG(steps=1, inner_steps=2, clip=1.0), 2, 0.05,
                  budget=PrivacyBudget(4.0, 1e-4), n_rounds=3)
    rng = np.random.default_rng(11)
    x0 = problem.manifold.random_point(rng)
    config = {**flower_config.problem_facts(problem), "rounds": 3,
              "algorithm": json.dumps(flower_config.algorithm_spec(alg)),
              "x0": json.dumps(x0.tolist()), "rng-state": json.dumps(rng.bit_generator.state)}
    ref = alg.run(problem, 3, rng=rng, x0=x0, eval_every=3)
    server = flower_config.public_problem(flower._config(config))
    fresh = flower.algorithm_from_config(config)
    state, _ = flower.serve(server, fresh, config, [7, 9],
                            _transport(problem, config, {7: np.array([0, 1]),
                                                         9: np.array([2, 3])}))
    np.testing.assert_array_equal(fresh.output(server, state), ref.x)
    assert fresh.privacy(state) == ref.privacy


@pytest.mark.parametrize("overrides", [
    {"rounds": 4},
    {"rounds": 4, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5},
])
def test_a_server_that_dies_resumes_from_its_checkpoint_and_ends_as_one_run(tmp_path, overrides):
    config = {**flower.DEFAULT_CONFIG, **overrides, "checkpoint": str(tmp_path / "server.ckpt")}
    full = flower.demo_problem()
    owned = flower.owned_agents(8, [1, 2, 3])
    problem = flower_config.public_problem(flower._config(config))
    alg = flower.algorithm_from_config(config)
    with pytest.raises(ConnectionError, match="round 2"):
        flower.serve(problem, alg, config, [1, 2, 3],
                     _transport(full, config, owned, crash_in_round=2))
    # a new server process: fresh objects, the checkpoint file is all that survived
    alg = flower.algorithm_from_config(config)
    served = []
    honest = _transport(full, config, owned)

    def counting(t, state, node_blocks):
        served.append(t)
        return honest(t, state, node_blocks)

    state, trace = flower.serve(problem, alg, config, [1, 2, 3], counting)
    assert served == [2, 3] and len(trace.x) == 4
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(alg.output(problem, state), x_ref)
    assert alg.privacy(state) == privacy_ref


def test_a_checkpoint_of_another_configuration_is_refused(tmp_path):
    config = {**flower.DEFAULT_CONFIG, "rounds": 2, "checkpoint": str(tmp_path / "s.ckpt")}
    full = flower.demo_problem()
    problem = flower_config.public_problem(flower._config(config))
    owned = {1: np.arange(8)}
    flower.serve(problem, flower.algorithm_from_config(config), config, [1],
                 _transport(full, config, owned))
    other = {**config, "epsilon": 4.0}
    with pytest.raises(ValueError, match=r"another configuration \(differing keys: \['epsilon'\]"):
        flower.serve(problem, flower.algorithm_from_config(other), other, [1],
                     _transport(full, other, owned))


def _attack(kind):
    """A tampering of one node's reply: ``(node, t, reply) -> reply or [(node, reply), ...]``."""
    def tamper(node, t, r):
        if node != 3:
            return None
        if kind == "nan":
            return dataclasses.replace(r, points=np.full_like(r.points, np.nan))
        if kind == "huge":
            return dataclasses.replace(r, points=r.points * 1e150)
        if kind == "off-manifold":
            return dataclasses.replace(r, points=r.points * 1.5)
        if kind == "no-noise":
            return dataclasses.replace(r, sigma=np.zeros_like(r.sigma))
        if kind == "sensitivity":
            return dataclasses.replace(r, sensitivity=r.sensitivity / 2)
        if kind == "other-agents":
            return dataclasses.replace(r, agents=r.agents - 1)
        if kind == "float-agents":
            return dataclasses.replace(r, agents=r.agents.astype(float))
        if kind == "old-round":
            return dataclasses.replace(r, round=t - 1)
        if kind == "shape":
            return dataclasses.replace(r, points=r.points[..., :-1])
        if kind == "float32":
            return dataclasses.replace(r, points=r.points.astype(np.float32))
        if kind == "twice":
            return [(node, r), (node, r)]
        if kind == "stranger":
            return [(node, r), (99, r)]
        if kind == "silent":
            return []
        if kind == "client-error":
            return "the client failed: ZeroDivisionError"
        raise AssertionError(kind)
    return tamper


_REASONS = {
    "nan": "non-finite point entries", "huge": "off the manifold Sphere\\(5\\)",
    "off-manifold": "off the manifold Sphere\\(5\\) \\(violation 0.5 > 1e-06\\)",
    "no-noise": "noise std \\[0.0, 0.0\\] other than the server's plan",
    "sensitivity": "sensitivity .* other than the server's plan",
    "other-agents": "agents \\[5, 6, 7\\], asked \\[6, 7\\]|agents \\[.*\\], asked \\[.*\\]",
    "float-agents": "agents \\[6.0, 7.0\\], asked \\[6, 7\\]|asked",
    "old-round": "a reply for round -?\\d+, asked round \\d+",
    "shape": "points of shape \\(\\d, 5\\), expected \\(\\d, 6\\)",
    "float32": "float32, expected a float64 array", "twice": "more than one reply",
    "stranger": "a reply from a node that was not asked", "silent": "no reply",
    "client-error": "the client failed: ZeroDivisionError",
}


@pytest.mark.parametrize("kind", list(_REASONS))
def test_a_bad_reply_is_refused_named_and_dropped_from_the_round(kind):
    config = {**flower.DEFAULT_CONFIG, "rounds": 1, "n-sampled": 8}
    full = flower.demo_problem()
    owned = flower.owned_agents(8, [1, 2, 3])   # node 3 holds agents 6 and 7
    server = flower_config.public_problem(flower._config(config))
    alg = flower.algorithm_from_config(config)
    logged = []
    state, trace = flower.serve(server, alg, config, [1, 2, 3],
                                _transport(full, config, owned, tamper=_attack(kind)),
                                log=logged.append)
    refusal = [r for r in trace.refused if r["node"] in (3, 99)]
    assert len(refusal) == 1 and len(trace.refused) == 1
    assert re.search(_REASONS[kind], refusal[0]["reason"]), refusal[0]["reason"]
    assert refusal[0]["node"] == 99 or refusal[0]["agents"] == [6, 7]
    assert len(logged) == 1 and f"node {refusal[0]['node']}" in logged[0]
    # the policy, computed here from the honest replies: the tangent mean of nodes 1 and 2's
    # agents with their data-size weights renormalised over them
    start = flower._initial(server, alg, flower._config(config))
    honest = _transport(full, config, owned)(0, start, [(1, np.arange(3)), (2, np.arange(3, 6))])
    kept = np.concatenate([r.points for _, r in honest])
    expected = alg.aggregate(server, start, np.arange(6), kept)
    if kind == "stranger":   # node 3's own reply was fine: everyone aggregated
        expected = flower.run_in_process(config)[0]
    np.testing.assert_array_equal(alg.output(server, state), expected)
    # every selected agent is charged, accepted or not: the honest run's report
    assert alg.privacy(state) == flower.run_in_process(config)[1]


def test_a_point_on_the_manifold_but_beyond_the_local_runs_reach_is_refused():
    problem = _problems()["SPDFrechetMean"]
    alg = PriRFed(DPRSGD(steps=1, batch_size=0.5, clip=1.0), None, 0.05,
                  budget=PrivacyBudget(4.0, 1e-4), n_rounds=1)
    config = {**flower_config.problem_facts(problem), "rounds": 1,
              "algorithm": json.dumps(flower_config.algorithm_spec(alg))}

    def huge(node, t, r):   # 1e150 * SPD is SPD: only the reach refuses it
        return dataclasses.replace(r, points=r.points * 1e150) if node == 2 else None
    owned = {1: np.array([0, 1]), 2: np.array([2, 3])}
    server = flower_config.public_problem(flower._config(config))
    state, trace = flower.serve(server, alg, config, [1, 2],
                                _transport(problem, config, owned, tamper=huge), log=len)
    assert len(trace.refused) == 1
    assert re.search(r"points of agents \[2, 3\] at distance \[\d+.*\] from x, beyond the "
                     r"local run's reach \[.*\]", trace.refused[0]["reason"])
    start = flower._initial(server, alg, flower._config(config))
    (_, honest), = _transport(problem, config, owned)(0, start, [(1, owned[1])])
    np.testing.assert_array_equal(state.x, alg.aggregate(server, start, owned[1],
                                                         honest.points))


def test_with_client_level_dp_a_refused_client_counts_as_a_zero_update():
    config = {**flower.DEFAULT_CONFIG, "rounds": 1, "n-sampled": 8, "client-clip": 0.1}
    full = flower.demo_problem()
    owned = flower.owned_agents(8, [1, 2, 3])
    server = flower_config.public_problem(flower._config(config))
    alg = flower.algorithm_from_config(config)
    state, trace = flower.serve(server, alg, config, [1, 2, 3],
                                _transport(full, config, owned, tamper=_attack("nan")), log=len)
    start = flower._initial(server, alg, flower._config(config))
    honest = _transport(full, config, owned)(0, start, list(owned.items()))
    points = np.concatenate([r.points for _, r in honest])
    points[6:] = start.x   # Log_x(x) = 0: the refused client's update
    expected = alg.aggregate(server, start, np.arange(8), points)   # denominator s = 8
    np.testing.assert_array_equal(state.x, expected)
    assert len(trace.refused) == 1


# ----------------------------------------------------------------------------- the client
def _message(content, node=1):
    """A ``train`` instruction as the SuperLink delivers it (server node 0 to ``node``)."""
    return Message(content=content, metadata=Metadata(
        run_id=1, message_id="m", src_node_id=0, dst_node_id=node, reply_to_message_id="",
        group_id="0", created_at=time.time(), ttl=600.0, message_type="train"))


def _context(config, data_file, **node_config):
    return Context(run_id=1, node_id=1, node_config={"data-file": str(data_file),
                                                     "local-randomness": "run-seed",
                                                     **node_config},
                   state=RecordDict(), run_config=dict(config))


def _request(x, t, seed, agents):
    return _message(RecordDict({
        "x": ArrayRecord({"x": Array(np.asarray(x, dtype=float))}),
        "cfg": ConfigRecord({"round": t, "seed": seed, "agents": [int(a) for a in agents]})}))


def _client_request_in_round(config, data_file, t, **node_config):
    """A context of a node holding agents 0..3 and the honest request of round ``t``."""
    context = _context(config, data_file, **node_config)
    _, problem, alg, state0, _ = flower._client_setup(context)
    picked = alg.select(problem, state0, t)
    return context, state0, picked[picked < 4]


@pytest.fixture
def node_file(tmp_path):
    path = tmp_path / "node.npz"
    flower_config.write_node_shards(flower.demo_problem(), [np.arange(4)], [path])
    return path


def test_a_client_replies_with_its_noised_points_only_and_no_clip_count(node_file):
    config = {**flower.DEFAULT_CONFIG, "rounds": 3, "n-sampled": 8}
    context, state0, agents = _client_request_in_round(config, node_file, 0)
    reply = flower.client_train(_request(state0.x, 0, state0.seed, agents), context)
    assert set(reply.content.keys()) == {"cfg", "points"}
    assert set(reply.content["cfg"].keys()) == {"round", "agents", "sigma", "sensitivity",
                                                "status", "randomness"}
    assert "n-clipped" not in reply.content["cfg"]
    assert set(reply.content["points"].keys()) == {"points"}
    node, decoded = flower.decode_train_reply(reply)
    assert decoded.agents.tolist() == agents.tolist() and decoded.round == 0
    np.testing.assert_array_equal(decoded.sigma, state0.plan.sigma[agents])


def test_a_client_refuses_requests_outside_its_plan(node_file):
    config = {**flower.DEFAULT_CONFIG, "rounds": 3}
    context, state0, agents = _client_request_in_round(config, node_file, 1)
    _, _, later = _client_request_in_round(config, node_file, 2)
    x = state0.x
    flower.client_train(_request(x, 1, state0.seed, agents), context)
    cases = [
        (_request(x, 1, state0.seed, agents), "round 1 was already trained in this run"),
        (_request(x, 3, state0.seed, agents), "round 3 is outside the run's rounds 0..2"),
        (_request(x, 2, state0.seed, [a for a in range(4) if a not in later]),
         "the public selection picks"),
        (_request(x, 2, state0.seed + 1, later), "the server's seed .* is not the run"),
        (_request(x * 2, 2, state0.seed, later), "is not on the manifold"),
    ]
    for request, message in cases:
        with pytest.raises(ValueError, match=message):
            flower.client_train(request, context)
    strict, state0, agents = _client_request_in_round(config, node_file, 0, **{"max-epsilon": 1.0})
    with pytest.raises(ValueError, match="would certify epsilon [0-9.]+ for this node's agents, "
                                         "above the node config's max-epsilon 1.0"):
        flower.client_train(_request(state0.x, 0, state0.seed, agents), strict)
    ok, state0, agents = _client_request_in_round(config, node_file, 0, **{"max-epsilon": 2.0})
    flower.client_train(_request(state0.x, 0, state0.seed, agents), ok)


def test_node_secret_randomness_releases_other_noise_with_the_same_plan(node_file):
    config = {**flower.DEFAULT_CONFIG, "rounds": 3, "n-sampled": 8}
    replies = {}
    for mode in ("run-seed", "node-secret", "node-secret"):
        context, state0, agents = _client_request_in_round(config, node_file, 0,
                                                           **{"local-randomness": mode})
        replies.setdefault(mode, []).append(flower.decode_train_reply(
            flower.client_train(_request(state0.x, 0, state0.seed, agents), context))[1])
    seeded, secret, again = replies["run-seed"][0], *replies["node-secret"]
    assert secret.randomness == "node-secret" and seeded.randomness == "run-seed"
    np.testing.assert_array_equal(secret.sigma, seeded.sigma)
    assert not np.array_equal(secret.points, seeded.points)
    assert not np.array_equal(secret.points, again.points)   # a fresh key per reply


def test_replay_with_one_record_changed_every_reply_difference_is_a_noised_ledger_event(
        tmp_path):
    """Two neighbouring federations (one record of agent 2 scaled by 50), the same seed: every
    field of every ClientApp reply that differs is a point row of an agent charged, in that
    round, a ledger event with noise std = the reply's sigma > 0; nothing else differs. The
    count of clipped gradients (what the ClientApp used to send) would differ."""
    config = {**flower.DEFAULT_CONFIG, "rounds": 6, "n-sampled": 3}
    full = flower.demo_problem()
    z = full.data["z"].copy()
    z[2, 5] *= 50.0
    neighbour = SpherePCA(z)
    files = {}
    for name, problem in (("d", full), ("d2", neighbour)):
        files[name] = tmp_path / f"{name}.npz"
        flower_config.write_node_shards(problem, [np.arange(4)], [files[name]])
    alg = flower.algorithm_from_config(config)
    server = flower_config.public_problem(flower._config(config))
    state = flower._initial(server, alg, flower._config(config))
    contexts = {name: _context(config, path) for name, path in files.items()}
    clipped_differs = False
    for t in range(int(config["rounds"])):
        agents = alg.select(server, state)
        mine = agents[agents < 4]
        if mine.size == 0:
            state = alg.finish_round(state, agents, state.x, 0)
            continue
        replies = {name: flower.client_train(_request(state.x, t, state.seed, mine), ctx)
                   for name, ctx in contexts.items()}
        a, b = replies["d"].content, replies["d2"].content
        assert dict(a["cfg"]) == dict(b["cfg"])   # agents, round, sigma, sensitivity, status
        pa, pb = a["points"]["points"].numpy(), b["points"]["points"].numpy()
        state_before = state
        state = alg.finish_round(state, agents, state.x, 0)   # the ledger of the round
        events = [h for h in state.ledger.history if h["first_round"] <= t <= h["last_round"]]
        for row in np.flatnonzero(np.any(pa != pb, axis=1)):
            agent = int(mine[row])
            assert agent == 2   # only the changed record's agent
            covering = [h for h in events if agent in h["agents"]]
            z_event = float(re.search(r"gaussian\(z=([0-9.e+-]+)\)", covering[0]["event"])[1])
            sigma = float(a["cfg"]["sigma"][row])
            assert sigma > 0 and z_event == pytest.approx(
                sigma / float(a["cfg"]["sensitivity"][row]), rel=1e-5)
        # the old reply field: the clipped count of the block, computed from the private rows
        counts = {}
        for name, path in files.items():
            shard = flower_config.load_node_problem(path, flower._config(config))
            st = dataclasses.replace(state_before, round=t)
            counts[name] = alg.train_block(shard, st, mine, t)[1]["n_clipped"]
        clipped_differs |= counts["d"] != counts["d2"]
    assert clipped_differs   # the count the ClientApp used to send would leak the record


# ----------------------------------------------------------------------------- deployments
def test_loopback_certificates_chain_to_their_ca_and_name_the_loopback_address(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    paths = make_loopback_certificates(tmp_path / "tls")
    ca = x509.load_pem_x509_certificate(paths["ca"].read_bytes())
    cert = x509.load_pem_x509_certificate(paths["cert"].read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert oct(paths["key"].stat().st_mode & 0o777) == "0o600"
    private, public = make_node_key(tmp_path / "keys", "n0")
    key = serialization.load_ssh_private_key(private.read_bytes(), password=None)
    assert isinstance(key.curve, ec.SECP384R1)
    assert serialization.load_ssh_public_key(public.read_bytes()).public_numbers() == \
        key.public_key().public_numbers()


def test_superlink_runs_refuse_bad_arguments_before_starting_anything(tmp_path):
    with pytest.raises(ValueError, match="n_supernodes must be a positive integer"):
        flower.run_on_deployment({}, 0, workdir=tmp_path)
    with pytest.raises(ValueError, match="unknown run-config keys"):
        flower.run_in_simulation({"round": 2}, 2, workdir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def secure_federation(tmp_path_factory):
    """A SuperLink with TLS and SuperNode authentication and 2 SuperNodes on loopback, node 1
    running the malicious ClientApp of tests/engines/flower_malicious (honest unless the run's
    seed is its attack seed), plus a SuperNode whose key was never registered."""
    workdir = tmp_path_factory.mktemp("secure-federation")
    federation = LoopbackFederation(
        2, workdir=workdir, timeout=500,
        node_env={1: {"PYTHONPATH": f"{MALICIOUS}{os.pathsep}{{PYTHONPATH}}"}})
    with federation:
        private, _ = make_node_key(workdir / "rogue", "rogue")   # not registered
        rogue_log = workdir / "rogue.log"
        with open(rogue_log, "w") as fh:
            rogue = subprocess.Popen(
                [f"{federation.bindir}/flower-supernode", "--root-certificates",
                 str(federation.tls["ca"]), "--auth-supernode-private-key", str(private),
                 "--superlink", federation.address, "--port", str(_free_port()), "--node-config",
                 f'data-dir="{workdir}"'], env=federation.env, stdout=fh,
                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield federation, rogue_log
        finally:
            os.killpg(rogue.pid, 15)
            rogue.wait(timeout=20)


@posix_only
def test_secure_deployment_with_nodes_reading_their_own_files_gives_the_in_process_run(
        secure_federation):
    federation, rogue_log = secure_federation
    # each node's file, written here: node 0 holds the even agents, node 1 the odd ones
    full = flower.demo_problem()
    blocks = [np.arange(0, 8, 2), np.arange(1, 8, 2)]
    for i, block in enumerate(blocks):
        flower_config.save_node_data(federation.node_dir(i) / "interleaved.npz", "SpherePCA",
                                     block, full.counts[block], {"z": full.data["z"][block]})
    config = {**flower.DEFAULT_CONFIG, "rounds": 2, "dataset": "interleaved"}
    result = federation.run(config)
    x_ref, privacy_ref = flower.run_in_process(config)
    np.testing.assert_array_equal(result.x, x_ref)
    assert _without_federation(result.privacy) == privacy_ref
    assert privacy_ref["epsilon_certified"] <= config["epsilon"]
    fed = result.privacy["federation"]
    # the nodes own what their files hold; the rogue node is not among them
    assert sorted(fed["nodes"].values()) == [b.tolist() for b in blocks]
    assert fed["refused"] == [] and set(fed["client_randomness"].values()) == {"run-seed"}
    # the SuperLink speaks TLS with the federation's CA only, and never started insecure
    with socket.create_connection(("127.0.0.1", federation.port), timeout=10) as raw:
        ctx = ssl.create_default_context(cafile=str(federation.tls["ca"]))
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert ("IP Address", "127.0.0.1") in tls.getpeercert()["subjectAltName"]
    with socket.create_connection(("127.0.0.1", federation.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")
    assert "insecure" not in (federation.workdir / "superlink.log").read_text().lower()
    assert "SuperNode ID" not in rogue_log.read_text()


@posix_only
def test_a_malicious_client_is_refused_by_the_real_server_app(secure_federation):
    federation, _ = secure_federation
    config = {**flower.DEFAULT_CONFIG, "rounds": 4, "n-sampled": 8, "seed": 666}
    result = federation.run(config, flower.demo_problem())
    fed = result.privacy["federation"]
    node = {tuple(v): int(n) for n, v in fed["nodes"].items()}[(4, 5, 6, 7)]   # node 1's
    reasons = ["non-finite point entries", "off the manifold Sphere\\(5\\) \\(violation 1e\\+150",
               "off the manifold Sphere\\(5\\) \\(violation 0.5", "noise std \\[0.0, 0.0, 0.0, "
               "0.0\\] other than the server's plan"]
    assert [r["round"] for r in fed["refused"]] == [0, 1, 2, 3]
    for refusal, reason in zip(fed["refused"], reasons, strict=True):
        assert refusal["node"] == node and refusal["agents"] == [4, 5, 6, 7]
        assert re.search(reason, refusal["reason"]), refusal["reason"]
    log = federation.log_of(result.run_id)
    assert log.count(f"refused the reply of node {node} for agents [4, 5, 6, 7]") == 4
    # the policy in one process: the same rounds with node 1's replies dropped
    full = flower.demo_problem()
    owned = flower.owned_agents(8, [0, 1])
    server = flower_config.public_problem(flower._config(config))
    alg = flower.algorithm_from_config(config)
    state, _ = flower.serve(server, alg, config, [0, 1],
                            _transport(full, config, owned, tamper=lambda n, t, r: "dropped"
                                       if n == 1 else None), log=len)
    np.testing.assert_array_equal(result.x, alg.output(server, state))
    # every selected agent charged as planned: the honest run's report
    assert _without_federation(result.privacy) == flower.run_in_process(config)[1]


@posix_only
def test_a_run_that_fails_on_the_superlink_raises_its_error_instead_of_waiting(
        secure_federation):
    federation, _ = secure_federation
    # client-level DP needs the tangent aggregation: the ServerApp raises at start-up
    bad = {"rounds": 2, "aggregation": "karcher", "client-clip": 0.1}
    with pytest.raises(RuntimeError, match="use aggregation='tangent'"):
        federation.run(bad, flower.demo_problem())
    assert (federation.workdir / "run.log").exists()


@posix_only
@pytest.mark.slow
@pytest.mark.parametrize("overrides,n_nodes", [
    ({"rounds": 2, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5}, 3),
    ({"rounds": 2, "client-clip": 0.1, "client-epsilon": 2.0}, 2),
])
def test_superlink_with_supernodes_gives_the_in_process_run(tmp_path, overrides, n_nodes):
    x, privacy = flower.run_on_deployment(overrides, n_nodes, workdir=tmp_path, timeout=600)
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(x, x_ref)
    assert _without_federation(privacy) == privacy_ref
    if "client-clip" in overrides:
        assert privacy["client_level"]["epsilon_certified"] <= overrides["client-epsilon"]


@posix_only
@pytest.mark.slow
def test_simulation_engine_gives_the_in_process_run(tmp_path):
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray "
                                      "(extra rfed[flower-sim])")
    overrides = {"rounds": 2, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5}
    x, privacy = flower.run_in_simulation(overrides, 3, workdir=tmp_path, timeout=600)
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(x, x_ref)
    assert _without_federation(privacy) == privacy_ref


# ----------------------------------------------------------------------------- experiments
def test_rfed_run_refuses_what_the_flower_engine_cannot_do(capsys):
    from rfed.cli import main

    for args, message in [
        (["run", "dpdl-digits", "--engine", "flower"], "cannot run on the Flower engine"),
        (["run", "prirfed-fig3", "--engine", "flower", "--secure"], "--secure cannot be used"),
        (["run", "prirfed-fig3", "--engine", "flower-sim", "--supernodes", "0"],
         "--supernodes must be an int >= 1"),
    ]:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def _results(folder):
    """history.csv rows, privacy.json without its federation sections, the final table."""
    import csv

    rows = list(csv.DictReader(open(folder / "history.csv")))
    privacy = {k: _without_federation(v)
               for k, v in json.loads((folder / "privacy.json").read_text()).items()}
    return rows, privacy, (folder / "final.csv").read_text()


@posix_only
@pytest.mark.slow
def test_rfed_run_prirfed_fig3_on_flower_gives_the_in_process_results(tmp_path):
    """``rfed run prirfed-fig3 --engine flower`` (SPD(2), DP-RSGD and DP-RSVRG, budget and the
    paper's calibration) writes the in-process results: every history value and table entry
    equal to the last bit, the privacy reports equal; only n_clipped is absent."""
    from rfed.cli import main

    args = ["run", "prirfed-fig3", "--set", "rounds=2", "--set", "repetitions=1",
            "--set", "agents=[5]", "--set", "n_samples=100", "--set", "epsilons=[8.0]",
            "--set", "inner_steps=3", "--set", "eval_every=1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "inprocess")]) == 0
    assert main([*args, "--out", str(tmp_path / "flower"), "--engine", "flower",
                 "--supernodes", "3"]) == 0
    rows, privacy, final = _results(tmp_path / "inprocess")
    rows_f, privacy_f, final_f = _results(tmp_path / "flower")
    assert len(rows) == len(rows_f) == 12 and "n_clipped" not in rows_f[0]
    assert [{k: v for k, v in r.items() if k not in ("n_clipped", "run_id")} for r in rows] \
        == [{k: v for k, v in r.items() if k != "run_id"} for r in rows_f]
    assert privacy == privacy_f and final == final_f
    fed = json.loads((tmp_path / "flower" / "privacy.json").read_text())
    assert all(v["federation"]["refused"] == [] for v in fed.values())


class _Recorder:
    """An engine's run hook keeping every finished run's final point."""

    def __init__(self, inner, points):
        self.inner, self.points, self.secure = inner, points, False

    def start_run(self, *args):
        return self.inner.start_run(*args)

    def end_run(self, result):
        self.points.append(np.array(result.x))
        self.inner.end_run(result)


@posix_only
@pytest.mark.slow
def test_prirfed_fig1_on_the_simulation_engine_ends_at_the_in_process_points(tmp_path):
    """prirfed-fig1 (the sphere S^24) on Flower's simulation engine: every run's final point
    equal bit for bit to the run in one process."""
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray")
    from rfed.engines import Engine, use_engine
    from rfed.engines.flower_runs import FlowerEngine, FlowerRunHook
    from rfed.experiments.registry import run_experiment

    overrides = {"columns": [2], "rounds": 3, "repetitions": 1, "eval_every": 1,
                 "epsilons": [2.0], "paper_epsilons": [0.3]}
    in_process, on_flower = [], []

    class Recording(Engine):
        def run_hook(self, hook):
            return _Recorder(hook, in_process)

    with use_engine(Recording()):
        summary, _ = run_experiment("prirfed-fig1", overrides=overrides)

    class RecordingFlower(FlowerRunHook):
        def end_run(self, result):
            on_flower.append(np.array(result.x))
            super().end_run(result)

    class RecordingFlowerEngine(FlowerEngine):
        def run_hook(self, hook):
            return RecordingFlower(hook, self.federation)

    with LoopbackFederation(2, workdir=tmp_path, simulation=True, timeout=900) as federation, \
            use_engine(RecordingFlowerEngine(federation)):
        summary_f, _ = run_experiment("prirfed-fig1", overrides=overrides)
    assert len(in_process) == len(on_flower) == 2
    for a, b in zip(in_process, on_flower, strict=True):
        np.testing.assert_array_equal(a, b)
    assert summary["settings"] == summary_f["settings"]
