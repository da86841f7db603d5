"""PriRFed on Flower (flwr 1.41, Message API): the server drives the rounds, clients train blocks.

One round is PriRFed's pieces (:meth:`PriRFed.select`, :meth:`PriRFed.train_block`,
:meth:`PriRFed.aggregate`, :meth:`PriRFed.finish_round`) split across processes:

* the ServerApp (:data:`server_app`) selects the round's agents from the public stream
  ``(seed, round, 'agent-sampling')`` and sends each SuperNode that owns some of them ``x``,
  the round, the seed, those agents and the block it owns (:func:`owned_agents`: the agents
  split into contiguous blocks, one per node in node-id order, fixed for the run);
* the ClientApp (:data:`client_app`) trains its block with DP-RSGD / DP-RSVRG from the
  per-agent keyed streams and replies with the local points and, per agent, the noise std and
  the sensitivity it used;
* the server checks those against its own plan (a mismatch is an error: the ledger must hold
  what was released), records them in the ledger, aggregates on the manifold (tangent or
  Karcher mean, data-size weights) and writes the final point and privacy report.

Because every draw is keyed by ``(seed, agent, round)``, the run gives the in-process run's
final point and report whatever the number of SuperNodes.

The rounds themselves are :func:`serve` (server) and :func:`train_block` (client), which know
nothing of Flower's messages. With ``checkpoint = "PATH"`` in the run config, the server saves
its state (iterate, ledger, round) atomically after every round; a ServerApp started again with
the same configuration resumes from that file and ends as the uninterrupted run would, and a
file written by another configuration is refused.

With ``client-clip > 0`` the server adds client-level DP on the manifold
(:class:`~rfed.algorithms.federated.client_dp.ClientLevelDP`, budget ``client-epsilon``,
``client-delta``), its noise keyed by ``(seed, round)``; the report's ``client_level`` entry
accounts it.

Engines: :func:`run_on_deployment` starts a real SuperLink with SuperNodes on loopback (each
SuperNode its own process, as on separate machines); :func:`run_in_simulation` starts a SuperLink
with Flower's simulation engine (virtual SuperNodes whose ClientApps run in Ray actors; extra
``rfed[flower-sim]``). Both submit the app with ``flwr run``, wait for the ServerApp's result, and
raise with the run's log when the SuperLink reports the run failed.

The federation's problem is a synthetic PCA problem described by the run config
(:func:`problem_from_config`), each agent's rows drawn from a stream keyed by ``(data-seed,
agent)`` (:func:`rfed.datasets.make_pca_synthetic_agents`). Sharded data: a ClientApp generates
and holds only the rows of the block it owns (a shard, :meth:`rfed.problems.Problem.as_shard`,
which refuses any other agent); the ServerApp holds the public facts only (agent counts,
dimensions: a shard of no agent). The in-process reference (:func:`run_in_process`) draws every
agent's rows from the same keyed streams, so the engines are compared on the same data.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.client_dp import ClientLevelDP
from rfed.datasets.synthetic import make_pca_synthetic_agents
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA
from rfed.state import StateBindingError, StateFileError, load_state, save_state

__all__ = ["APP_DIR", "DEFAULT_CONFIG", "BlockReply", "algorithm_from_config", "client_app",
           "owned_agents", "problem_from_config", "run_in_process", "run_in_simulation",
           "run_on_deployment", "serve", "server_app", "train_block",
           "write_result"]

#: The run config of the Flower app (``rfed/engines/flower_app/pyproject.toml`` holds the same).
DEFAULT_CONFIG: dict[str, Any] = {
    "n-agents": 8, "n-per-agent": 40, "dim": 6, "eigengap": 0.3, "data-seed": 0,
    "trainer": "dp-rsgd", "steps": 2, "inner-steps": 2, "batch-size": 0.5, "clip": 1.0,
    "n-sampled": 4, "step-size": 0.05, "aggregation": "tangent", "epsilon": 2.0,
    "delta": 1e-4, "rounds": 3, "seed": 7, "out": "",
    "client-clip": 0.0, "client-epsilon": 1.0, "client-delta": 1e-5, "min-nodes": 1,
    "checkpoint": "",
}

#: Run-config keys that do not change the run's arithmetic (a checkpoint may differ in them).
_RUN_LOCAL_KEYS = ("out", "checkpoint", "min-nodes")


def _config(run_config: dict[str, Any]) -> dict[str, Any]:
    unknown = set(run_config) - set(DEFAULT_CONFIG)
    if unknown:
        raise ValueError(f"unknown run-config keys {sorted(unknown)}; expected some of "
                         f"{sorted(DEFAULT_CONFIG)}")
    return {**DEFAULT_CONFIG, **run_config}


def problem_from_config(run_config: dict[str, Any], agents=None) -> SpherePCA:
    """The synthetic PCA federation of the config, or the shard of it that ``agents`` hold.

    Parameters
    ----------
    run_config : dict
    agents : int array, optional
        ``None``: every agent (the in-process reference). Otherwise increasing global ids:
        only their rows are generated (keyed by ``(data-seed, agent)``, the same bits as in the
        full problem) and the result is a shard of the federation (the other agents' rows do
        not exist in this process); empty: the public facts only (the server's).
    """
    c = _config(run_config)
    n_agents, n_per = int(c["n-agents"]), int(c["n-per-agent"])
    ids = np.arange(n_agents) if agents is None else np.asarray(agents, dtype=np.int64)
    if ids.size and (ids.ndim != 1 or ids.min() < 0 or ids.max() >= n_agents):
        raise ValueError(f"argument 'agents' must be ids in 0..{n_agents - 1}, got {agents!r}")
    problem = SpherePCA(make_pca_synthetic_agents(ids, n_per, int(c["dim"]),
                                                  float(c["eigengap"]), int(c["data-seed"])))
    if agents is None:
        return problem
    return problem.as_shard(ids, np.full(n_agents, n_per))


def owned_agents(n_agents: int, nodes: list[int]) -> dict[int, np.ndarray]:
    """``{node: agents it owns}``: ``0 .. n_agents - 1`` in contiguous blocks, one per node in
    the order of ``nodes`` (sizes differing by at most one; empty past ``n_agents`` nodes)."""
    return dict(zip(nodes, np.array_split(np.arange(n_agents), len(nodes)), strict=True))


def algorithm_from_config(run_config: dict[str, Any]) -> PriRFed:
    """PriRFed with the config's trainer, budget and aggregation."""
    c = _config(run_config)
    if c["trainer"] == "dp-rsgd":
        trainer = DPRSGD(steps=int(c["steps"]), batch_size=float(c["batch-size"]),
                         clip=float(c["clip"]))
    elif c["trainer"] == "dp-rsvrg":
        trainer = DPRSVRG(steps=int(c["steps"]), inner_steps=int(c["inner-steps"]),
                          clip=float(c["clip"]))
    else:
        raise ValueError(f"run-config 'trainer' must be 'dp-rsgd' or 'dp-rsvrg', got "
                         f"{c['trainer']!r}")
    # client-level DP on the server (clip > 0 turns it on; rfed.algorithms.federated.client_dp)
    client_dp = None if float(c["client-clip"]) <= 0 else ClientLevelDP(
        float(c["client-clip"]),
        budget=PrivacyBudget(float(c["client-epsilon"]), float(c["client-delta"])))
    return PriRFed(trainer, n_sampled=int(c["n-sampled"]), step_size=float(c["step-size"]),
                   aggregation=str(c["aggregation"]), client_dp=client_dp,
                   budget=PrivacyBudget(float(c["epsilon"]), float(c["delta"])),
                   n_rounds=int(c["rounds"]))


def _start(problem, alg, c):
    rng = np.random.default_rng(int(c["seed"]))
    x0 = problem.manifold.random_point(rng)
    return alg.init(problem, x0, rng)


def _arithmetic_config(c: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in c.items() if k not in _RUN_LOCAL_KEYS}


#: The :mod:`rfed.state` kind of the ServerApp's checkpoint file.
_CHECKPOINT_KIND = "flower-server-checkpoint"


def _resume_or_start(problem, alg, c: dict[str, Any]):
    """The server's state and first round: from ``c['checkpoint']`` if that file exists.

    The ServerApp writes the checkpoint (atomically) after every round when the run config
    names one: an :mod:`rfed.state` file (checksummed, no pickle) bound to the run config's
    arithmetic keys. A ServerApp started again with the same config continues from it, and
    since every draw is keyed by (seed, agent, round) the run ends as an uninterrupted one
    would. A damaged file or one of another configuration is refused (one line naming it).
    """
    path = str(c["checkpoint"])
    if not path or not os.path.exists(path):
        return _start(problem, alg, c), 0
    try:
        saved = load_state(path, kind=_CHECKPOINT_KIND,
                           expect={"config": _arithmetic_config(c)})
        return saved["state"], int(saved["next_round"])
    except StateBindingError as exc:
        differ = sorted(k for k in set(exc.saved) | set(exc.expected)
                        if exc.saved.get(k) != exc.expected.get(k))
        raise ValueError(f"run-config 'checkpoint' = {path!r} was written by a run with another "
                         f"configuration (differing keys: {differ}); remove the file to start "
                         "afresh or resume with the same configuration") from None
    except StateFileError as exc:
        raise exc.within("run-config 'checkpoint'") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"run-config 'checkpoint': '{path}' is malformed ({exc!r})") from None


def run_in_process(run_config: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """The same run in one process (``PriRFed.step``): final point and privacy report."""
    c = _config(run_config)
    problem, alg = problem_from_config(c), algorithm_from_config(c)
    state = _start(problem, alg, c)
    for _ in range(int(c["rounds"])):
        state = alg.step(problem, state)
    return alg.output(problem, state), alg.privacy(state)


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serializable: {type(v).__name__}")


def write_result(path: str | Path, x: np.ndarray, privacy: dict[str, Any], *,
                 n_nodes: int | None = None) -> None:
    """``{"x": [...], "privacy": {...}, "n_nodes": N}`` as JSON (floats round-trip exactly).

    ``n_nodes`` is the number of SuperNodes the ServerApp trained on (``None`` in process).
    """
    Path(path).write_text(json.dumps({"x": np.asarray(x).tolist(), "privacy": privacy,
                                      "n_nodes": n_nodes}, default=_json_default))


@dataclass(frozen=True)
class BlockReply:
    """What a client returns for its block: agents ``(m,)``, their local points
    ``(m, *point_shape)``, and per agent the noise std and sensitivity it used, plus the number
    of clipped gradients."""

    agents: np.ndarray
    points: np.ndarray
    sigma: np.ndarray
    sensitivity: np.ndarray
    n_clipped: int


def serve(problem, alg: PriRFed, run_config: dict[str, Any], nodes: list[int],
          train_blocks: Callable[[int, Any, list[tuple[int, np.ndarray]]], list[BlockReply]]):
    """The server's rounds, whatever carries the messages; returns the final state.

    Each round selects the agents from the public stream, gives each node the selected agents
    it owns (:func:`owned_agents`; nodes owning none are skipped) and calls
    ``train_blocks(round, state, [(node, block), ...])``;
    the replies' noise and sensitivity must be the server's plan (the ledger must hold what
    was released), and together they must cover the selected agents. The server aggregates on
    the manifold and, when ``run_config['checkpoint']`` names a file, saves its state there
    (atomically) after every round; started again with that file present, it resumes.
    """
    c = _config(run_config)
    if len(nodes) == 0:
        raise ValueError("argument 'nodes' must list at least one node id, got none")
    state, first_round = _resume_or_start(problem, alg, c)
    owned = owned_agents(problem.n_agents, list(nodes))
    for t in range(first_round, int(c["rounds"])):
        alg.check_round(state)
        agents = alg.select(problem, state)
        node_blocks = [(node, agents[np.isin(agents, own)]) for node, own in owned.items()]
        got = {}
        n_clipped = 0
        for reply in train_blocks(t, state, [(n, b) for n, b in node_blocks if b.size]):
            ids = reply.agents
            if not (np.array_equal(reply.sigma, state.plan.sigma[ids])
                    and np.array_equal(reply.sensitivity, state.plan.sensitivity[ids])):
                raise RuntimeError(f"round {t}: agents {ids.tolist()} report noise or "
                                   "sensitivity other than the server's plan")
            n_clipped += reply.n_clipped
            for a, p in zip(ids, reply.points, strict=True):
                got[int(a)] = p
        if sorted(got) != agents.tolist():
            raise RuntimeError(f"round {t}: replies cover agents {sorted(got)}, expected "
                               f"{agents.tolist()}")
        received = np.stack([got[int(a)] for a in agents])
        x_next = alg.aggregate(problem, state, agents, received)
        state = alg.finish_round(state, agents, x_next, n_clipped)
        if c["checkpoint"]:
            save_state(c["checkpoint"], {"next_round": t + 1, "state": state},
                       kind=_CHECKPOINT_KIND, bind={"config": _arithmetic_config(c)})
    return state


def train_block(problem, alg: PriRFed, state0, x: np.ndarray, round_: int, seed: int,
                agents: np.ndarray) -> BlockReply:
    """A client's work in one round: local training of its block of agents from ``x``.

    ``state0`` is the client's initial state (it holds the plan: noise and sensitivities);
    every draw comes from the agents' keyed streams ``(seed, agent, round)``.
    """
    state = replace(state0, x=x, round=round_, seed=seed)
    points, info = alg.train_block(problem, state, agents, round_)
    return BlockReply(agents, points, state.plan.sigma[agents], state.plan.sensitivity[agents],
                      int(info["n_clipped"]))


try:  # the apps exist only where flwr is installed (Python >= 3.11)
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
except ImportError:  # pragma: no cover - exercised where flwr is absent
    server_app = client_app = None
else:
    server_app = ServerApp()
    client_app = ClientApp()

    @server_app.main()
    def _server_main(grid: Grid, context: Context) -> None:
        c = _config(dict(context.run_config))
        # the server holds the public facts only: counts and dimensions, no agent's rows
        problem, alg = problem_from_config(c, agents=[]), algorithm_from_config(c)
        nodes = _wait_for_nodes(grid, int(c["min-nodes"]))
        owned = owned_agents(problem.n_agents, nodes)

        def train_on_nodes(t, state, node_blocks):
            messages = []
            for node, block in node_blocks:
                content = RecordDict({
                    "x": ArrayRecord({"x": Array(np.asarray(state.x, dtype=float))}),
                    "cfg": ConfigRecord({"round": t, "seed": int(state.seed),
                                         "agents": [int(a) for a in block],
                                         "owned": [int(a) for a in owned[node]]}),
                })
                messages.append(Message(content, node, "train", group_id=str(t)))
            replies = list(grid.send_and_receive(messages))
            if len(replies) != len(messages) or any(r.has_error() for r in replies):
                raise RuntimeError(f"round {t}: {len(replies)} of {len(messages)} replies, "
                                   "or a client failed")
            return [BlockReply(np.asarray(r.content["cfg"]["agents"], dtype=int),
                               r.content["points"]["points"].numpy(),
                               np.asarray(r.content["cfg"]["sigma"], dtype=float),
                               np.asarray(r.content["cfg"]["sensitivity"], dtype=float),
                               int(r.content["cfg"]["n-clipped"])) for r in replies]

        state = serve(problem, alg, c, nodes, train_on_nodes)
        if c["out"]:
            write_result(c["out"], alg.output(problem, state), alg.privacy(state),
                         n_nodes=len(nodes))

    def _wait_for_nodes(grid: Grid, min_nodes: int, timeout: float = 120.0) -> list[int]:
        """The connected SuperNodes' ids, sorted, once at least ``min_nodes`` are connected.

        SuperNodes of a deployment connect at their own pace; training on the first one to
        arrive would still give the same result (the blocks do not change the draws) but not
        use the federation that was asked for.
        """
        deadline = time.monotonic() + timeout
        while len(nodes := sorted(grid.get_node_ids())) < max(1, min_nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(nodes)} SuperNode(s) connected after {timeout:.0f} s; "
                                   f"the run config asks for min-nodes = {min_nodes}")
            time.sleep(0.5)
        return nodes

    _CLIENT_CACHE: dict[str, Any] = {}

    @client_app.train()
    def _client_train(msg: Message, context: Context) -> Message:
        c = _config(dict(context.run_config))
        cfg = msg.content["cfg"]
        # the node generates and holds the rows of the agents it owns, nothing else
        own = np.asarray(cfg["owned"], dtype=np.int64)
        key = json.dumps([c, own.tolist()], sort_keys=True)
        if key not in _CLIENT_CACHE:
            problem, alg = problem_from_config(c, agents=own), algorithm_from_config(c)
            _CLIENT_CACHE.clear()
            _CLIENT_CACHE[key] = (problem, alg, _start(problem, alg, c))
        problem, alg, state0 = _CLIENT_CACHE[key]
        out = train_block(problem, alg, state0, msg.content["x"]["x"].numpy(),
                          int(cfg["round"]), int(cfg["seed"]),
                          np.asarray(cfg["agents"], dtype=int))
        reply = RecordDict({
            "points": ArrayRecord({"points": Array(np.ascontiguousarray(out.points))}),
            "cfg": ConfigRecord({
                "agents": [int(a) for a in out.agents], "n-clipped": out.n_clipped,
                "sigma": [float(v) for v in out.sigma],
                "sensitivity": [float(v) for v in out.sensitivity],
            }),
        })
        return Message(reply, reply_to=msg)


APP_DIR = Path(__file__).with_name("flower_app")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_on_deployment(run_config: dict[str, Any], n_supernodes: int = 2, *,
                      workdir: str | Path, timeout: float = 300.0,
                      port: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Run the Flower app on a local SuperLink with ``n_supernodes`` SuperNodes (loopback).

    Starts ``flower-superlink`` (insecure, loopback, runtime dependency installation off) and
    the SuperNodes as child processes, submits the run with ``flwr run``, waits for the
    result file and always stops every process it started (their process groups).

    Parameters
    ----------
    run_config : dict
        Overrides of :data:`DEFAULT_CONFIG` (``out`` is set here).
    n_supernodes : int
        SuperNodes started, each a separate process hosting a block of agents per round.
    workdir : path
        Holds ``FLWR_HOME``, the SuperLink's database, the logs and the result.
    timeout : float
        Seconds for the whole run.
    port : int, optional
        The SuperLink's port (default: ``FLWR_LOCAL_SUPERLINK_PORT`` or a free port).

    Returns
    -------
    x, privacy : the final point and the privacy report written by the ServerApp.
    """
    return _run_on_superlink(run_config, n_supernodes, simulation=False, workdir=workdir,
                             timeout=timeout, port=port)


def run_in_simulation(run_config: dict[str, Any], n_supernodes: int = 2, *,
                      workdir: str | Path, timeout: float = 300.0,
                      port: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Run the Flower app in Flower's simulation engine (Ray; extra ``rfed[flower-sim]``).

    Starts ``flower-superlink --simulation`` on loopback and submits the run with
    ``flwr run ... --federation-config num-supernodes=N``: the SuperLink runs the ServerApp and
    ``n_supernodes`` virtual SuperNodes whose ClientApps execute in Ray actors. Same app, same
    messages and same result as :func:`run_on_deployment`; parameters and return value as
    there.
    """
    try:
        import ray  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised where Ray is absent
        raise ImportError("Flower's simulation engine needs Ray: pip install "
                          "'rfed[flower-sim]' (flwr[simulation])") from exc
    return _run_on_superlink(run_config, n_supernodes, simulation=True, workdir=workdir,
                             timeout=timeout, port=port)


def _raise_if_run_failed(bindir: str, run_id: str, env: dict, workdir: Path) -> None:
    """Raise with the run's log if the SuperLink says the run ended without success."""
    ls = subprocess.run([f"{bindir}/flwr", "ls", "loopback", "--run-id", run_id, "--format",
                         "json"], env=env, cwd=workdir, capture_output=True, text=True,
                        timeout=60)
    try:
        runs = json.loads(ls.stdout).get("runs", [])
    except json.JSONDecodeError:
        return  # the SuperLink did not answer this time; the overall timeout still holds
    status = str(runs[0].get("status", "")) if runs else ""
    if status.startswith("finished") and not status.endswith("completed"):
        log = subprocess.run([f"{bindir}/flwr", "log", run_id, "loopback", "--show"], env=env,
                             cwd=workdir, capture_output=True, text=True, timeout=60)
        (workdir / "run.log").write_text(log.stdout + log.stderr)
        raise RuntimeError(f"Flower run {run_id} ended with status {status!r}; its log is in "
                           f"{workdir / 'run.log'}:\n{log.stdout[-3000:]}")


def _run_on_superlink(run_config: dict[str, Any], n_supernodes: int, *, simulation: bool,
                      workdir: str | Path, timeout: float,
                      port: int | None) -> tuple[np.ndarray, dict[str, Any]]:
    if isinstance(n_supernodes, bool) or not isinstance(n_supernodes, (int, np.integer)) \
            or n_supernodes < 1:
        raise ValueError(f"n_supernodes must be a positive integer, got {n_supernodes!r}")
    _config(run_config)  # unknown keys fail here, not after the processes have started
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "result.json"
    if out.exists():
        out.unlink()
    port = int(port or os.environ.get("FLWR_LOCAL_SUPERLINK_PORT") or _free_port())
    bindir = str(Path(sys.executable).parent)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, FLWR_HOME=str(workdir / "flwr-home"),
               FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
               PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    Path(env["FLWR_HOME"]).mkdir(exist_ok=True)
    (Path(env["FLWR_HOME"]) / "config.toml").write_text(
        f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n')
    procs: list[subprocess.Popen] = []

    def start(args: list[str], log: str) -> None:
        with open(workdir / log, "w") as fh:
            procs.append(subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                          start_new_session=True, cwd=workdir))

    deadline = time.monotonic() + timeout
    try:
        start([f"{bindir}/flower-superlink", "--insecure",
               "--disable-runtime-dependency-installation", "--port", str(port),
               "--database", str(workdir / "state.db")]
              + (["--simulation"] if simulation else []), "superlink.log")
        if not simulation:
            for i in range(n_supernodes):
                start([f"{bindir}/flower-supernode", "--insecure", "--superlink",
                       f"127.0.0.1:{port}", "--port", str(_free_port()),
                       "--node-config", f"partition-id={i}"], f"supernode-{i}.log")
        cfg = " ".join(f"{k}={json.dumps(v)}" for k, v in
                       {**run_config, "min-nodes": int(n_supernodes), "out": str(out)}.items())
        federation = (["--federation-config", f"num-supernodes={int(n_supernodes)}"]
                      if simulation else [])
        while True:  # until the SuperLink accepts the run (it takes a few seconds to start)
            sub = subprocess.run([f"{bindir}/flwr", "run", str(APP_DIR), "loopback",
                                  "--run-config", cfg, *federation], env=env, cwd=workdir,
                                 capture_output=True, text=True,
                                 timeout=max(1.0, deadline - time.monotonic()))
            (workdir / "flwr-run.log").write_text(sub.stdout + sub.stderr)
            if sub.returncode == 0 and "Successfully" in sub.stdout + sub.stderr:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"flwr run was not accepted: {sub.stdout}{sub.stderr}")
            time.sleep(1.0)
        run_id = re.search(r"Successfully started run (\d+)", sub.stdout + sub.stderr).group(1)
        next_status_check = time.monotonic() + 5.0
        while not out.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no result after {timeout} s; logs in {workdir}")
            if time.monotonic() > next_status_check:
                _raise_if_run_failed(bindir, run_id, env, workdir)
                next_status_check = time.monotonic() + 5.0
            time.sleep(0.5)
        time.sleep(0.2)  # the file is written in one call; let it be closed
        data = json.loads(out.read_text())
        return np.asarray(data["x"], dtype=float), data["privacy"]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
