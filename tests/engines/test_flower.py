"""PriRFed on Flower: the app's config, and a real SuperLink with SuperNodes on loopback giving
the in-process run's final point and privacy report bit for bit (same seed)."""

import json
import sys

import numpy as np
import pytest

flwr = pytest.importorskip("flwr", reason="flwr (Python >= 3.11, extra rfed[flower]) is not "
                                          "installed: the Flower engine cannot run")

import tomllib  # noqa: E402  (Python >= 3.11, as flwr)

from rfed.engines import flower  # noqa: E402


def test_app_package_declares_the_engine_and_its_default_config():
    meta = tomllib.loads((flower.APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert meta["components"] == {"serverapp": "rfed.engines.flower:server_app",
                                  "clientapp": "rfed.engines.flower:client_app"}
    assert meta["config"] == flower.DEFAULT_CONFIG
    assert isinstance(flower.server_app, flwr.serverapp.ServerApp)
    assert isinstance(flower.client_app, flwr.clientapp.ClientApp)
    with pytest.raises(ValueError, match="unknown run-config keys"):
        flower.problem_from_config({"n-agent": 3})
    with pytest.raises(ValueError, match="'trainer' must be"):
        flower.algorithm_from_config({"trainer": "sgd"})


@pytest.mark.parametrize("overrides", [{"rounds": 2}, {"rounds": 2, "client-clip": 0.1}])
def test_in_process_reference_is_prirfed_run_with_the_same_seed(overrides):
    x, privacy = flower.run_in_process(overrides)
    cfg = {**flower.DEFAULT_CONFIG, **overrides}
    res = flower.algorithm_from_config(cfg).run(flower.problem_from_config(cfg), 2,
                                                rng=cfg["seed"], eval_every=2)
    np.testing.assert_array_equal(x, res.x)
    assert privacy == res.privacy


def _check_same_as_in_process(tmp_path, overrides, n_nodes, x, privacy):
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(x, x_ref)
    assert privacy == privacy_ref
    assert json.loads((tmp_path / "result.json").read_text())["n_nodes"] == n_nodes
    assert privacy["epsilon_certified"] <= flower.DEFAULT_CONFIG["epsilon"]
    if "client-clip" in overrides:
        assert privacy["client_level"]["epsilon_certified"] <= overrides["client-epsilon"]


_DEPLOYMENT_CASES = [
    ({"rounds": 2}, 2),
    pytest.param({"rounds": 2, "trainer": "dp-rsvrg", "aggregation": "karcher",
                  "n-sampled": 5}, 3, marks=pytest.mark.slow),
    pytest.param({"rounds": 2, "client-clip": 0.1, "client-epsilon": 2.0}, 2,
                 marks=pytest.mark.slow),
]


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
@pytest.mark.parametrize("overrides,n_nodes", _DEPLOYMENT_CASES)
def test_superlink_with_supernodes_gives_the_in_process_run(tmp_path, overrides, n_nodes):
    x, privacy = flower.run_on_deployment(overrides, n_nodes, workdir=tmp_path, timeout=400)
    _check_same_as_in_process(tmp_path, overrides, n_nodes, x, privacy)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
@pytest.mark.parametrize("overrides,n_nodes", [
    ({"rounds": 2, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5}, 3),
])
def test_simulation_engine_gives_the_in_process_run(tmp_path, overrides, n_nodes):
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray "
                                      "(extra rfed[flower-sim])")
    x, privacy = flower.run_in_simulation(overrides, n_nodes, workdir=tmp_path, timeout=400)
    _check_same_as_in_process(tmp_path, overrides, n_nodes, x, privacy)


def test_superlink_runs_refuse_bad_arguments_before_starting_anything(tmp_path):
    with pytest.raises(ValueError, match="n_supernodes must be a positive integer"):
        flower.run_on_deployment({}, 0, workdir=tmp_path)
    with pytest.raises(ValueError, match="unknown run-config keys"):
        flower.run_in_simulation({"round": 2}, 2, workdir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
def test_a_run_that_fails_on_the_superlink_raises_its_error_instead_of_waiting(tmp_path):
    # client-level DP needs the tangent aggregation: the ServerApp raises at start-up
    bad = {"rounds": 2, "aggregation": "karcher", "client-clip": 0.1}
    with pytest.raises(RuntimeError, match="use aggregation='tangent'"):
        flower.run_on_deployment(bad, 1, workdir=tmp_path, timeout=200)
    assert (tmp_path / "run.log").exists()


def _in_process_transport(problem, alg, config, crash_in_round=None, nodes=(1, 2, 3)):
    """Carries the server's blocks to ``train_block`` in this process: one client per node,
    holding the shard of the agents it owns (built as a ClientApp builds it)."""
    c = flower._config(config)
    clients = {}
    for node, own in flower.owned_agents(int(c["n-agents"]), list(nodes)).items():
        shard, client_alg = flower.problem_from_config(c, agents=own), \
            flower.algorithm_from_config(c)
        clients[node] = (shard, client_alg, flower._start(shard, client_alg, c))

    def train_blocks(t, state, node_blocks):
        if t == crash_in_round:
            raise ConnectionError(f"SuperLink lost in round {t}")
        return [flower.train_block(*clients[node], state.x, t, int(state.seed), block)
                for node, block in node_blocks]
    return train_blocks


def test_clients_hold_their_agents_rows_and_the_server_public_facts_only():
    full = flower.problem_from_config({})
    n, per, dim = (flower.DEFAULT_CONFIG[k] for k in ("n-agents", "n-per-agent", "dim"))
    assert full._data["z"].shape == (n, per, dim)
    owned = flower.owned_agents(n, [4, 7, 9])
    assert [b.tolist() for b in owned.values()] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    for block in owned.values():
        client = flower.problem_from_config({}, agents=block)
        assert client.is_shard and client._data["z"].shape == (block.size, per, dim)
        # the keyed generator gives the full problem's rows for the block, and only those
        np.testing.assert_array_equal(client.agent_data(block)[0]["z"], full._data["z"][block])
        other = np.setdiff1d(np.arange(n), block)[0]
        with pytest.raises(ValueError, match=f"agent {other} is not held here"):
            client.batch(np.array([other]), np.zeros((1, 1), dtype=int))
        np.testing.assert_array_equal(client.counts, full.counts)
    server = flower.problem_from_config({}, agents=[])
    assert server._data["z"].shape == (0, per, dim) and server.n_agents == n
    np.testing.assert_array_equal(server.agent_weights, full.agent_weights)
    with pytest.raises(ValueError, match="holding no agent's rows"):
        server.data  # noqa: B018 - the attribute access is the check


@pytest.mark.parametrize("nodes", [(5,), (2, 8, 3, 1)])
def test_sharded_clients_and_a_public_facts_server_give_the_in_process_run(nodes):
    config = {**flower.DEFAULT_CONFIG, "rounds": 3}
    server = flower.problem_from_config(config, agents=[])
    alg = flower.algorithm_from_config(config)
    state = flower.serve(server, alg, config, list(nodes),
                         _in_process_transport(server, alg, config, nodes=nodes))
    x_ref, privacy_ref = flower.run_in_process(config)
    np.testing.assert_array_equal(alg.output(server, state), x_ref)
    assert alg.privacy(state) == privacy_ref


@pytest.mark.parametrize("overrides", [
    {"rounds": 4},
    {"rounds": 4, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5},
])
def test_a_server_that_dies_resumes_from_its_checkpoint_and_ends_as_one_run(tmp_path, overrides):
    config = {**flower.DEFAULT_CONFIG, **overrides, "checkpoint": str(tmp_path / "server.ckpt")}
    problem, alg = flower.problem_from_config(config), flower.algorithm_from_config(config)
    with pytest.raises(ConnectionError, match="round 2"):
        flower.serve(problem, alg, config, [1, 2, 3],
                     _in_process_transport(problem, alg, config, crash_in_round=2))
    # a new server process: fresh objects, the checkpoint file is all that survived
    problem, alg = flower.problem_from_config(config), flower.algorithm_from_config(config)
    served = []

    def counting(t, state, node_blocks):
        served.append(t)
        return _in_process_transport(problem, alg, config)(t, state, node_blocks)

    state = flower.serve(problem, alg, config, [1, 2, 3], counting)
    assert served == [2, 3]
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(alg.output(problem, state), x_ref)
    assert alg.privacy(state) == privacy_ref


def test_a_checkpoint_of_another_configuration_is_refused(tmp_path):
    config = {**flower.DEFAULT_CONFIG, "rounds": 2, "checkpoint": str(tmp_path / "s.ckpt")}
    problem, alg = flower.problem_from_config(config), flower.algorithm_from_config(config)
    flower.serve(problem, alg, config, [1], _in_process_transport(problem, alg, config, nodes=[1]))
    other = {**config, "epsilon": 4.0}
    problem, alg = flower.problem_from_config(other), flower.algorithm_from_config(other)
    with pytest.raises(ValueError, match=r"another configuration \(differing keys: \['epsilon'\]"):
        flower.serve(problem, alg, other, [1],
                     _in_process_transport(problem, alg, other, nodes=[1]))


def test_replies_with_noise_other_than_the_plan_are_refused():
    config = {**flower.DEFAULT_CONFIG, "rounds": 1}
    problem, alg = flower.problem_from_config(config), flower.algorithm_from_config(config)
    honest = _in_process_transport(problem, alg, config, nodes=[1, 2])

    def quieter(t, state, node_blocks):
        return [flower.BlockReply(r.agents, r.points, r.sigma / 2, r.sensitivity, r.n_clipped)
                for r in honest(t, state, node_blocks)]
    with pytest.raises(RuntimeError, match="other than the server's plan"):
        flower.serve(problem, alg, config, [1, 2], quieter)
    with pytest.raises(ValueError, match="argument 'nodes'"):
        flower.serve(problem, alg, config, [], honest)
