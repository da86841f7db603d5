"""PriRFed on Flower (flwr 1.41, Message API): the server drives the rounds, clients train blocks.

PriRFed is Algorithm 1 of Z. Huang, W. Huang, P. Jawanpuria and B. Mishra, "Federated Learning
on Riemannian Manifolds with Differential Privacy" (arXiv preprint); rfed's implementation is
:class:`rfed.algorithms.federated.PriRFed`, whose round is four separately callable pieces
(:meth:`~PriRFed.select`, :meth:`~PriRFed.train_block`, :meth:`~PriRFed.aggregate`,
:meth:`~PriRFed.finish_round`). This module splits them across a federation:

* the ServerApp (:data:`server_app`) reads the whole configuration from the run config (the
  problem's public facts and any PriRFed configuration, :mod:`rfed.engines.flower_config`),
  asks every SuperNode which agents it holds (a ``query`` message), then every round selects
  the agents from the public stream ``(seed, round, 'agent-sampling')`` and sends each node
  owning some of them ``x``, the round and those agents;
* the ClientApp (:data:`client_app`) builds its shard from the node's OWN data file (the node
  config's ``data-file``, or ``data-dir`` holding ``<dataset>.npz``; the server never sends
  data), computes its own noise plan from the run config, checks the request against it and
  replies with its agents' points and the noise std and sensitivity it used;
* the server validates every reply (:func:`check_reply`), refuses and logs the bad ones, applies
  the round policy below, records the round in the ledger, aggregates on the manifold and writes
  the final point, the privacy report (with a ``federation`` section: the trust model, the
  checks, the refused replies) and the trace of the global iterates.

**What a reply must be** (:func:`check_reply`): from the node asked, for the round asked, for
exactly the agents asked (all owned by that node), with the noise std and sensitivity of the
server's plan, and points of shape ``(A, *point_shape)``, float64, finite, on the manifold within
:data:`REPLY_ATOL` (the manifold's relative violation), and no farther from ``x`` than the
local run's path can reach (:func:`displacement_bound`: steps x step size x (the clipped
direction's bound + the noise norm's tail at :data:`NOISE_TAIL` standard deviations above
``sqrt(dim)``, exceeded with probability below ``exp(-NOISE_TAIL^2 / 2)``); trainers without
clipping have no such bound). A client may instead declare that its local training diverged.

**Round policy** (:data:`ROUND_POLICY`): a refused reply's agents are dropped from that round's
aggregate: the tangent or Karcher mean is taken over the accepted agents with their data-size
weights renormalised over them (public counts); with client-level DP a refused client's update
counts as zero and the mean keeps the public denominator ``s`` (the sensitivity ``2C/s`` is
unchanged); no accepted reply leaves ``x`` as it was. Every selected agent is charged its
planned noisy steps whether accepted or not (the ledger never under-counts). A declared
divergence stops the run as in one process; the selected agents are charged for that round
(their replies were sent), which a run in one process, where nothing leaves the process, does
not do.

**Trust model** (:data:`TRUST_MODEL`): local DP. A client adds its noise itself, from the plan it
computes from the run config, and refuses a request outside that plan (a round it already
trained, agents the public selection did not pick, a round beyond the plan, a run whose
certified epsilon exceeds its node config's ``max-epsilon``); with ``local-randomness =
"node-secret"`` (the default) its minibatches and noise come from a key only the node knows, so
an honest client's record-level guarantee holds even against a malicious server. With
``"run-seed"`` (research: the results equal a run in one process bit for bit) they come from
the run's seed, which the server knows: the guarantee then holds only against parties without
the seed. A malicious client cannot lower any other client's record-level guarantee (each
client's noise and data are its own); it forfeits its own agents' guarantee (e.g. by omitting
its noise, which the server cannot observe) and can move the model within what the checks
allow.

Sharded data: the ServerApp holds the public facts only (agent counts, dimensions: a shard of no
agent, :func:`rfed.engines.flower_config.public_problem`). The in-process reference
(:func:`run_in_process`) runs the same configuration in one process.

The rounds themselves are :func:`serve` (server) and :func:`train_block` (client), which know
nothing of Flower's messages. With ``checkpoint = "NAME"`` in the run config, the server saves
its state (iterate, ledger, round, trace) after every round to NAME inside its directory
(:func:`server_path`); a ServerApp started again with the same configuration resumes from it
and ends as the uninterrupted run would; a file written by another configuration is refused.

Engines: :mod:`rfed.engines.flower_launch` starts a real SuperLink with SuperNodes on loopback
(TLS and SuperNode authentication; each SuperNode its own process with its own data directory)
or Flower's simulation engine; :func:`run_on_deployment` and :func:`run_in_simulation` run one
configuration on them; :mod:`rfed.engines.flower_runs` runs an experiment's PriRFed runs there
(``rfed run NAME --engine flower``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rfed._io import atomic_write_text
from rfed.algorithms.base import step_size_at
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.accounting import certified_epsilon, record_round
from rfed.algorithms.federated.client_dp import ClientLevelDP
from rfed.datasets.synthetic import make_pca_synthetic_agents
from rfed.engines.flower_config import (
    algorithm_from_spec,
    load_node_problem,
    problem_facts,
    public_problem,
)
from rfed.privacy import PrivacyBudget
from rfed.privacy.ledger import PrivacyLedger
from rfed.problems import SpherePCA
from rfed.problems.base import Problem
from rfed.state import StateBindingError, StateFileError, load_state, save_state

__all__ = ["APP_DIR", "DEFAULT_CONFIG", "NOISE_TAIL", "REPLY_ATOL", "ROUND_POLICY",
           "TRUST_MODEL", "BlockReply", "FederatedTrace", "algorithm_from_config",
           "charge_round", "check_reply", "client_app", "client_query", "client_train",
           "decode_train_reply", "demo_problem", "displacement_bound", "federation_report",
           "node_settings", "owned_agents", "run_in_process", "run_in_simulation",
           "run_on_deployment", "serve", "server_app", "server_path", "train_block",
           "write_result"]

_LOG = logging.getLogger("rfed.engines.flower")

#: The run config of the Flower app (``rfed/engines/flower_app/pyproject.toml`` holds the same):
#: the problem's public facts (the demo problem, :func:`demo_problem`), PriRFed's flat keys (or
#: the whole configuration as JSON in ``algorithm``), the run and the ServerApp's own keys.
DEFAULT_CONFIG: dict[str, Any] = {
    "problem": "SpherePCA", "problem-options": '{"gradient_bound": null, "norm_bound": null}',
    "problem-arrays": '{"z": [6]}', "counts": "[40, 40, 40, 40, 40, 40, 40, 40]",
    "n-max": 0, "dataset": "demo",
    "algorithm": "",
    "trainer": "dp-rsgd", "steps": 2, "inner-steps": 2, "batch-size": 0.5, "clip": 1.0,
    "n-sampled": 4, "step-size": 0.05, "aggregation": "tangent", "epsilon": 2.0,
    "delta": 1e-4, "client-clip": 0.0, "client-epsilon": 1.0, "client-delta": 1e-5,
    "rounds": 3, "seed": 7, "x0": "", "rng-state": "",
    "out": "", "checkpoint": "", "min-nodes": 1, "reply-timeout": 600.0,
}

#: Keys that do not change the run's arithmetic (a checkpoint may differ in them).
_RUN_LOCAL_KEYS = ("out", "checkpoint", "min-nodes", "reply-timeout")
#: PriRFed's flat keys, replaced as a whole by a non-empty ``algorithm``.
_FLAT_ALGORITHM_KEYS = ("trainer", "steps", "inner-steps", "batch-size", "clip", "n-sampled",
                        "step-size", "aggregation", "epsilon", "delta", "client-clip",
                        "client-epsilon", "client-delta")

#: Tolerance of the on-manifold check of a reply's points (the manifold's relative violation,
#: :meth:`rfed.manifolds.Manifold.point_violation`): honest local runs stay within 1e-12.
REPLY_ATOL = 1e-6
#: Standard deviations above ``sqrt(dim)`` at which :func:`displacement_bound` caps a noise norm:
#: a Gaussian vector's norm exceeds ``sigma (sqrt(dim) + t)`` with probability at most
#: ``exp(-t^2 / 2)`` (1e-347 here), so an honest reply is refused with no practical chance.
NOISE_TAIL = 40.0

#: The round policy, as stated in every Flower run's privacy report.
ROUND_POLICY = (
    "A refused reply's agents are dropped from the round's aggregate: the mean on the manifold "
    "is taken over the accepted agents with their public data-size weights renormalised over "
    "them (with client-level DP a refused client's update counts as zero and the public "
    "denominator s is kept); no accepted reply leaves x unchanged. Every selected agent is "
    "charged its planned noisy steps whether its reply was accepted or not. A client that "
    "declares a diverged local run stops the run, and that round is charged.")

#: The trust model, as stated in every Flower run's privacy report.
TRUST_MODEL = (
    "Local differential privacy: each client adds its noise itself, from the plan it computes "
    "from the run config, and refuses requests outside that plan (a round trained twice, "
    "agents not in the public selection, rounds beyond the plan, a certified epsilon above its "
    "node config's max-epsilon).",
    "A client's record-level guarantee holds against the server only if the client's "
    "randomness is secret from it: local-randomness = 'node-secret'. Clients using "
    "'run-seed' (replayable research runs) draw from the run's seed, which the server knows.",
    "A malicious client cannot lower another client's record-level guarantee; it forfeits its "
    "own agents' guarantee (omitting noise is not observable by the server) and can move the "
    "model within what the server's checks of the replies allow.",
    "The server checks each reply's sender, round, agents, noise std and sensitivity against "
    "its plan, the points' shape, dtype, finiteness, distance to the manifold and distance "
    "from x (the local run's reachable path length); a refused reply is named in the log and "
    "listed under 'refused'.",
)


# ----------------------------------------------------------------------------- configuration
def _config(run_config: dict[str, Any]) -> dict[str, Any]:
    """The run config with defaults filled in, each value checked against its key's type."""
    unknown = set(run_config) - set(DEFAULT_CONFIG)
    if unknown:
        raise ValueError(f"unknown run-config keys {sorted(unknown)}; expected some of "
                         f"{sorted(DEFAULT_CONFIG)}")
    c = {**DEFAULT_CONFIG, **run_config}
    for key, default in DEFAULT_CONFIG.items():
        value = c[key]
        if isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            kind = "finite number" if isinstance(default, float) else type(default).__name__
            raise ValueError(f"run-config '{key}' must be a {kind}, got {value!r}")
    for key, low in (("rounds", 1), ("seed", 0), ("min-nodes", 1), ("n-max", 0)):
        if c[key] < low:
            raise ValueError(f"run-config '{key}' must be an int >= {low}, got {c[key]!r}")
    if not c["reply-timeout"] > 0:
        raise ValueError(f"run-config 'reply-timeout' must be > 0 seconds, got "
                         f"{c['reply-timeout']!r}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", c["dataset"]):
        raise ValueError(f"run-config 'dataset' must be a plain file name stem (letters, digits, "
                         f"'.', '_', '-'), got {c['dataset']!r}")
    if c["algorithm"]:
        changed = [k for k in _FLAT_ALGORITHM_KEYS if c[k] != DEFAULT_CONFIG[k]]
        if changed:
            raise ValueError(f"run-config 'algorithm' gives the whole PriRFed configuration; "
                             f"the flat keys {changed} must then stay at their defaults")
    return c


def algorithm_from_config(run_config: dict[str, Any]) -> PriRFed:
    """PriRFed of the run config.

    Parameters
    ----------
    run_config : dict
        Overrides of :data:`DEFAULT_CONFIG`: its ``algorithm`` JSON (any configuration,
        :func:`rfed.engines.flower_config.algorithm_spec`), else its flat keys (DP-RSGD or
        DP-RSVRG with a budget, client-level DP with ``client-clip > 0``).

    Returns
    -------
    PriRFed
    """
    c = _config(run_config)
    if c["algorithm"]:
        try:
            spec = json.loads(c["algorithm"])
        except json.JSONDecodeError as exc:
            raise ValueError(f"run-config 'algorithm' is not valid JSON ({exc.msg})") from None
        return algorithm_from_spec(spec)
    if c["trainer"] == "dp-rsgd":
        trainer: DPRSGD | DPRSVRG = DPRSGD(steps=int(c["steps"]),
                                           batch_size=float(c["batch-size"]),
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


def demo_problem(n_agents: int = 8, n_per_agent: int = 40, dim: int = 6, eigengap: float = 0.3,
                 data_seed: int = 0, agents: Sequence[int] | np.ndarray | None = None
                 ) -> SpherePCA:
    """The demonstration federation of :data:`DEFAULT_CONFIG`: synthetic PCA on the sphere.

    Agent ``i``'s rows come from a stream keyed by ``(data_seed, i)``
    (:func:`rfed.datasets.make_pca_synthetic_agents`), so the launchers can write each node's
    file from its agents alone.

    Parameters
    ----------
    n_agents, n_per_agent, dim, eigengap, data_seed
        The recipe (``dim`` is the ambient dimension: points on the sphere ``S^(dim - 1)``).
    agents : int array, optional
        Only these agents' rows, as the shard of the federation (``None``: every agent).

    Returns
    -------
    SpherePCA
        The whole problem, or the shard holding ``agents``.
    """
    ids = np.arange(n_agents) if agents is None else np.asarray(agents, dtype=np.int64)
    if ids.size and (ids.ndim != 1 or ids.min() < 0 or ids.max() >= n_agents):
        raise ValueError(f"argument 'agents' must be ids in 0..{n_agents - 1}, got {agents!r}")
    problem = SpherePCA(make_pca_synthetic_agents(ids, n_per_agent, dim, eigengap, data_seed))
    if agents is not None:
        problem.as_shard(ids, np.full(n_agents, n_per_agent))   # in place
    return problem


def owned_agents(n_agents: int, nodes: list[int]) -> dict[int, np.ndarray]:
    """Contiguous blocks of agents, one per node (the launchers write each node's file so).

    Parameters
    ----------
    n_agents : int
    nodes : list of int
        Node ids, in the order the blocks go to them.

    Returns
    -------
    dict
        ``{node: int array (A_node,)}``: ``0 .. n_agents - 1`` split in order, sizes differing by
        at most one (empty past ``n_agents`` nodes).
    """
    return dict(zip(nodes, np.array_split(np.arange(n_agents), len(nodes)), strict=True))


_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def _generator(c: dict[str, Any]) -> np.random.Generator:
    """The run's generator: ``rng-state`` (a numpy bit generator's JSON state) or ``seed``."""
    if not c["rng-state"]:
        return np.random.default_rng(int(c["seed"]))
    try:
        state = json.loads(c["rng-state"])
        name = state["bit_generator"]
    except (json.JSONDecodeError, TypeError, KeyError):
        raise ValueError(f"run-config 'rng-state' must be a numpy bit generator's state as "
                         f"JSON, got {c['rng-state'][:80]!r}") from None
    if name not in _BIT_GENERATORS:
        raise ValueError(f"run-config 'rng-state' names bit generator {name!r}; expected one of "
                         f"{list(_BIT_GENERATORS)}")
    bit_generator = getattr(np.random, name)()
    try:
        bit_generator.state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"run-config 'rng-state' is not a valid {name} state ({exc})") from None
    return np.random.Generator(bit_generator)


def _initial(problem: Problem, alg: PriRFed, c: dict[str, Any]):
    """The run's first state, as :meth:`Algorithm.run` builds it: ``x0`` (run config's, or a
    random point of the generator), then :meth:`PriRFed.init` with the generator."""
    rng = _generator(c)
    if c["x0"]:
        try:
            x0 = np.asarray(json.loads(c["x0"]), dtype=float)
        except (json.JSONDecodeError, TypeError, ValueError):
            raise ValueError(f"run-config 'x0' must be a JSON array of numbers, got "
                             f"{c['x0'][:80]!r}") from None
        x0 = problem.manifold.check_point(x0, "x0 (run config)")
    else:
        x0 = problem.manifold.random_point(rng)
    return alg.init(problem, x0, rng)


def _arithmetic_config(c: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in c.items() if k not in _RUN_LOCAL_KEYS}


def run_in_process(run_config: dict[str, Any], data: Problem | None = None
                   ) -> tuple[np.ndarray, dict[str, Any]]:
    """The same run in one process (``PriRFed.step``).

    Parameters
    ----------
    run_config : dict
        Overrides of :data:`DEFAULT_CONFIG`.
    data : Problem, optional
        The whole problem (default: :func:`demo_problem`); its public facts must be the run
        config's.

    Returns
    -------
    x : array, shape ``point_shape``
        The final point.
    privacy : dict
        The privacy report.
    """
    c = _config(run_config)
    problem = demo_problem() if data is None else data
    _check_facts(problem, c)
    alg = algorithm_from_config(c)
    state = _initial(problem, alg, c)
    for _ in range(int(c["rounds"])):
        state = alg.step(problem, state)
    return alg.output(problem, state), alg.privacy(state)


def _check_facts(problem: Problem, c: dict[str, Any]) -> None:
    """``problem``'s public facts are the run config's (else ``ValueError`` naming the key)."""
    facts = problem_facts(problem)
    for key, value in facts.items():
        mine = c[key]
        if key == "n-max":
            same = (mine or max(json.loads(c["counts"]))) == value
        elif key == "problem":
            same = mine == value
        else:
            same = json.loads(mine) == json.loads(value)
        if not same:
            raise ValueError(f"run-config '{key}' is {mine!r}, but the data's is {value!r}")


# ----------------------------------------------------------------------------- server files
def server_path(name: str, key: str) -> Path:
    """The file ``name`` (a run config's ``out`` or ``checkpoint``) inside the server directory.

    The directory is ``RFED_FLOWER_DIR`` on the SuperLink's host (default
    ``$FLWR_HOME/rfed``, or ``~/.flwr/rfed``); the run config can only name a relative path
    inside it: absolute paths, ``..``, and anything resolving outside (a symbolic link) are
    refused with an error naming ``key``.

    Parameters
    ----------
    name : str
        The run config's value.
    key : str
        The run config's key, for the error message.

    Returns
    -------
    Path
        Resolved, inside the directory (its parent directories created).
    """
    root = Path(os.environ.get("RFED_FLOWER_DIR")
                or Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr") / "rfed")
    parts = Path(name).parts
    if (not name or Path(name).is_absolute() or "\\" in name or ".." in parts
            or not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) for p in parts)):
        raise ValueError(f"run-config '{key}' must be a relative path inside the server "
                         f"directory {root} (plain names joined by '/', no '..'), got {name!r}")
    root = root.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise ValueError(f"run-config '{key}' = {name!r} resolves to {path}, outside the server "
                         f"directory {root}")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _json_point(x: np.ndarray) -> list:
    """A point as nested lists, ``None`` where an entry is not finite (strict JSON)."""
    arr = np.asarray(x, dtype=float).astype(object)
    arr[~np.isfinite(np.asarray(x, dtype=float))] = None
    return arr.tolist()


def write_result(path: str | Path, x: np.ndarray, privacy: dict[str, Any], *,
                 n_nodes: int | None = None, trace: FederatedTrace | None = None) -> None:
    """``{"x", "privacy", "n_nodes", "trace"}`` as JSON (floats round-trip exactly), atomically.

    Parameters
    ----------
    path : path
        The result file (a ServerApp's ``out``, inside :func:`server_path`'s directory).
    x : array, shape ``point_shape``
    privacy : dict
    n_nodes : int, optional
        The number of SuperNodes the ServerApp trained on (``None`` in process).
    trace : FederatedTrace, optional
        The rounds' public record.
    """
    atomic_write_text(path, json.dumps({
        "x": _json_point(x), "privacy": privacy, "n_nodes": n_nodes,
        "trace": None if trace is None else trace.to_dict()}, default=_json_default))


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serializable: {type(v).__name__}")


# ----------------------------------------------------------------------------- replies
@dataclass(frozen=True)
class BlockReply:
    """What a client returns for its block (what it releases, nothing else).

    Attributes
    ----------
    agents : int array, shape ``(A,)``
    points : array, shape ``(A, *point_shape)``, or None
        The agents' local points (``None`` when the local run diverged).
    sigma, sensitivity : arrays, shape ``(A,)``
        The noise std and sensitivity the client used.
    round : int
        The round the client trained.
    diverged : bool
        The client's local training left the floating-point range (no points).
    randomness : str
        ``'node-secret'`` or ``'run-seed'``: where the client's noise came from (declared).
    """

    agents: np.ndarray
    points: np.ndarray | None
    sigma: np.ndarray
    sensitivity: np.ndarray
    round: int = -1
    diverged: bool = False
    randomness: str = "run-seed"


@dataclass
class FederatedTrace:
    """The public record of a federated run, kept by the server.

    Attributes
    ----------
    agents : list of list of int
        The agents selected in each round done.
    x : list of arrays
        The global iterate after each round done (what the server broadcasts next).
    refused : list of dict
        ``{"round", "node", "agents", "reason"}`` for every refused reply.
    diverged : dict or None
        ``{"round", "reason", "kind"}``: the run stopped there (``kind`` ``'training'``: a
        client declared it, ``'iterate'``: the aggregate is not finite).
    randomness : dict
        ``{node: 'node-secret' | 'run-seed'}`` as the nodes declared it.
    """

    agents: list = field(default_factory=list)
    x: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    diverged: dict | None = None
    randomness: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (non-finite entries of an iterate as ``None``).

        Returns
        -------
        dict
        """
        return {"agents": self.agents, "x": [_json_point(x) for x in self.x],
                "refused": self.refused, "diverged": self.diverged,
                "randomness": {str(k): v for k, v in self.randomness.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FederatedTrace:
        """Inverse of :meth:`to_dict` (``None`` entries read back as NaN).

        Parameters
        ----------
        d : dict
            As :meth:`to_dict` writes it.

        Returns
        -------
        FederatedTrace
        """
        return cls(agents=[list(a) for a in d["agents"]],
                   x=[np.array(x, dtype=float) for x in d["x"]],
                   refused=list(d["refused"]), diverged=d["diverged"],
                   randomness=dict(d["randomness"]))


def displacement_bound(problem: Problem, alg: PriRFed, plan: Any, agents: np.ndarray,
                       round_: int) -> np.ndarray | None:
    r"""Per agent, how far from ``x`` an honest local run of round ``round_`` can end.

    A local run is ``S`` steps ``x_{k+1} = Exp_{x_k}(-alpha eta_k)`` (``S`` = ``plan.steps``:
    ``K`` for DP-RSGD, ``K m`` for DP-RSVRG), so ``d(x, x_out) <= alpha sum_k |eta_k|`` (a
    geodesic is no longer than the broken geodesic; output option 2 stops earlier on it).
    ``|eta_k|`` is at most the clipped direction's bound ``G`` plus the noise norm, capped at
    ``sigma (sqrt(dim) + NOISE_TAIL)``: DP-RSGD ``G = tau`` (``tau N_i / b_i`` under Poisson
    sampling, whose batch may exceed its expected size ``b_i``); DP-RSVRG ``G = 2 tau_1 + tau_0``
    (Alg. 3 line 8: two clipped gradients and the clipped full gradient); its released-snapshot
    variant ``G = tau_d + tau_0`` plus the snapshot noise's norm.

    Parameters
    ----------
    problem : Problem
    alg : PriRFed
    plan : LocalPlan
    agents : int array, shape ``(A,)``
    round_ : int

    Returns
    -------
    array, shape ``(A,)``, or None
        ``None`` when the trainer does not clip (no bound holds) or is not DP-RSGD / DP-RSVRG.
    """
    if plan.clip is None:
        return None
    alpha = step_size_at(alg.step_size, round_)
    tail = math.sqrt(problem.manifold.dim) + NOISE_TAIL
    sigma = plan.sigma[agents]
    if isinstance(alg.trainer, DPRSGD):
        scale = (plan.counts[agents] / plan.sizes[agents] if plan.sampling == "poisson"
                 else np.ones(agents.size))
        per_step = plan.clip * np.maximum(scale, 1.0) + sigma * tail
    elif isinstance(alg.trainer, DPRSVRG):
        if plan.snapshot_steps:
            per_step = plan.clip + plan.clip_full + (plan.snapshot_sigma[agents] + sigma) * tail
        else:
            per_step = 2.0 * plan.clip + plan.clip_full + sigma * tail
    else:
        return None
    return plan.steps * alpha * per_step


def check_reply(problem: Problem, alg: PriRFed, state: Any, round_: int, block: np.ndarray,
                reply: BlockReply) -> str | None:
    """Why ``reply`` (to a request for ``block`` in round ``round_``) is refused, or ``None``.

    Checks, in order: the round; the agents (exactly ``block``, as int ids); the noise std and
    sensitivity (the server's plan, exactly); unless the client declares a diverged run, the
    points: a float64 array of shape ``(A, *point_shape)``, finite, on the manifold within
    :data:`REPLY_ATOL`, and within :func:`displacement_bound` of ``state.x`` (relative slack
    1e-6 for the rounding of the distance).

    Parameters
    ----------
    problem : Problem
        The server's (public facts).
    alg : PriRFed
    state : PriRFedState
        The server's state of the round (``x`` and the plan).
    round_ : int
    block : int array, shape ``(A,)``
        The agents asked.
    reply : BlockReply

    Returns
    -------
    str or None
        The reason, in words (it goes to the log and the report), or ``None`` if accepted.
    """
    if reply.round != round_:
        return f"a reply for round {reply.round}, asked round {round_}"
    agents = np.asarray(reply.agents)
    if not (agents.ndim == 1 and np.issubdtype(agents.dtype, np.integer)
            and np.array_equal(agents, block)):
        return f"agents {agents.tolist()}, asked {block.tolist()}"
    plan = state.plan
    for what, got, want in (("noise std", reply.sigma, plan.sigma[block]),
                            ("sensitivity", reply.sensitivity, plan.sensitivity[block])):
        got = np.asarray(got)
        if got.shape != want.shape or not np.array_equal(got, want):
            return (f"{what} {np.asarray(got).tolist()} other than the server's plan "
                    f"{want.tolist()}")
    if reply.diverged:
        return None
    points = reply.points
    man = problem.manifold
    shape = (block.size,) + tuple(man.point_shape)
    if not isinstance(points, np.ndarray) or points.dtype != np.float64:
        return (f"points of type {type(points).__name__}"
                f"{'' if not isinstance(points, np.ndarray) else ' ' + str(points.dtype)}, "
                "expected a float64 array")
    if points.shape != shape:
        return f"points of shape {points.shape}, expected {shape}"
    if not np.all(np.isfinite(points)):
        return f"{int(np.count_nonzero(~np.isfinite(points)))} non-finite point entries"
    try:
        return _check_points(problem, alg, state, round_, block, points)
    except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
        return f"points the manifold's geometry cannot evaluate ({type(exc).__name__}: {exc})"


def _check_points(problem: Problem, alg: PriRFed, state: Any, round_: int, block: np.ndarray,
                  points: np.ndarray) -> str | None:
    """:func:`check_reply`'s geometric checks of finite points of the right shape."""
    man = problem.manifold
    plan = state.plan
    off = ~man.belongs(points, atol=REPLY_ATOL)
    if np.any(off):
        worst = float(np.max(man.point_violation(points)))
        return (f"points of agents {block[off].tolist()} off the manifold {man} (violation "
                f"{worst:.3g} > {REPLY_ATOL:g})")
    bound = displacement_bound(problem, alg, plan, block, round_)
    if bound is not None:
        with np.errstate(all="ignore"):
            dist = np.asarray(man.dist(state.x, points), dtype=float)
        far = ~(dist <= bound * (1.0 + 1e-6))
        if np.any(far):
            return (f"points of agents {block[far].tolist()} at distance "
                    f"{[float(f'{d:.4g}') for d in dist[far]]} from x, beyond the local run's "
                    f"reach {[float(f'{b:.4g}') for b in bound[far]]}")
    return None


#: ``train_blocks(round, state, [(node, block), ...]) -> [(node, reply or error text), ...]``
Transport = Callable[[int, Any, list[tuple[int, np.ndarray]]], list[tuple[int, "BlockReply | str"]]]


def _sort_replies(problem, alg, state, t, node_blocks, replies):
    """The accepted points ``{agent: point}``, the refusals and a declared divergence."""
    asked = {int(node): block for node, block in node_blocks}
    by_node: dict[int, Any] = {}
    refused = []
    for node, reply in replies:
        node = int(node)
        if node not in asked:
            refused.append({"round": t, "node": node, "agents": [],
                            "reason": "a reply from a node that was not asked this round"})
        elif node in by_node:
            by_node[node] = "more than one reply to one request"
        else:
            by_node[node] = reply
    got: dict[int, np.ndarray] = {}
    diverged = None
    randomness = {}
    for node, block in asked.items():
        reply = by_node.get(node, "no reply")
        reason = reply if isinstance(reply, str) else check_reply(problem, alg, state, t,
                                                                  block, reply)
        if reason is not None:
            refused.append({"round": t, "node": node, "agents": block.tolist(),
                            "reason": reason})
            continue
        randomness[node] = reply.randomness
        if reply.diverged:
            diverged = {"round": t + 1, "kind": "training",
                        "reason": f"{alg.name}: the local run of agents {block.tolist()} left "
                                  f"the floating-point range in round {t + 1} (declared by "
                                  f"node {node}; the run diverged)"}
            continue
        for a, p in zip(block, reply.points, strict=True):
            got[int(a)] = p
    return got, refused, diverged, randomness


def _aggregate_accepted(problem: Problem, alg: PriRFed, state: Any, agents: np.ndarray,
                        got: dict[int, np.ndarray]) -> np.ndarray:
    """The round's aggregate under :data:`ROUND_POLICY`."""
    if alg.client_dp is not None:
        # a refused client's update Log_x(x) = 0; the public denominator s stays
        received = np.stack([got.get(int(a), state.x) for a in agents])
        return alg.aggregate(problem, state, agents, received)
    ok = np.array([a for a in agents if int(a) in got], dtype=agents.dtype)
    if ok.size == 0:
        return np.array(state.x, dtype=float)
    return alg.aggregate(problem, state, ok, np.stack([got[int(a)] for a in ok]))


def charge_round(alg: PriRFed, state: Any, agents: np.ndarray) -> None:
    """Charge ``agents`` round ``state.round`` in the ledgers without moving ``x`` (a round
    whose replies were sent but not aggregated: a declared divergence).

    Parameters
    ----------
    alg : PriRFed
    state : PriRFedState
        Its ledgers are updated in place.
    agents : int array, shape ``(A,)``
        The round's selected agents.
    """
    record_round(state.ledger, state.round, state.plan, agents)
    if alg.client_dp is not None:
        alg.client_dp.record(state.client_ledger, state.round, agents,
                             state.plan.extra["n_sampled"], state.client_noise_multiplier)


def serve(problem: Problem, alg: PriRFed, run_config: dict[str, Any], nodes: list[int],
          train_blocks: Transport, *, owned: dict[int, np.ndarray] | None = None,
          log: Callable[[str], None] | None = None) -> tuple[Any, FederatedTrace]:
    """The server's rounds, whatever carries the messages.

    Each round selects the agents from the public stream, gives each node the selected agents
    it owns (nodes owning none are skipped), calls ``train_blocks(round, state, [(node, block),
    ...])`` and checks every reply (:func:`check_reply`); refused replies are logged and the
    round follows :data:`ROUND_POLICY`. The server aggregates on the manifold and, when
    ``run_config['checkpoint']`` names a file, saves its state there after every round; started
    again with that file present, it resumes.

    Parameters
    ----------
    problem : Problem
        The public facts (a shard of no agent is enough).
    alg : PriRFed
    run_config : dict
    nodes : list of int
        The node ids.
    train_blocks : callable
        Returns ``[(node, reply), ...]``: the node that sent each reply (a Flower message's
        source) and the :class:`BlockReply`, or a text saying why there is none.
    owned : dict, optional
        ``{node: agents}`` (default :func:`owned_agents`): every agent exactly once.
    log : callable, optional
        Receives one line per refused reply (default: this module's logger).

    Returns
    -------
    state : PriRFedState
        The final state (before a diverged round, as :meth:`Algorithm.run` keeps it).
    trace : FederatedTrace
    """
    c = _config(run_config)
    if len(nodes) == 0:
        raise ValueError("argument 'nodes' must list at least one node id, got none")
    log = log or _LOG.warning
    owned = owned_agents(problem.n_agents, list(nodes)) if owned is None else owned
    held = np.sort(np.concatenate([np.asarray(v, dtype=np.int64) for v in owned.values()]))
    if not np.array_equal(held, np.arange(problem.n_agents)):
        raise ValueError(f"argument 'owned' must give every agent 0..{problem.n_agents - 1} to "
                         f"exactly one node, got {sorted(held.tolist())}")
    state, first_round, trace = _resume_or_start(problem, alg, c)
    for t in range(first_round, int(c["rounds"])):
        alg.check_round(state)
        agents = alg.select(problem, state)
        node_blocks = [(node, agents[np.isin(agents, own)]) for node, own in owned.items()]
        node_blocks = [(n, b) for n, b in node_blocks if b.size]
        got, refused, diverged, randomness = _sort_replies(
            problem, alg, state, t, node_blocks, train_blocks(t, state, node_blocks))
        trace.randomness.update(randomness)
        for r in refused:
            log(f"round {t}: refused the reply of node {r['node']} for agents {r['agents']}: "
                f"{r['reason']}")
        trace.refused.extend(refused)
        if diverged is not None:
            charge_round(alg, state, agents)
            trace.diverged = diverged
            break
        x_next = _aggregate_accepted(problem, alg, state, agents, got)
        before = state
        state = alg.finish_round(state, agents, x_next, 0)
        trace.agents.append(agents.tolist())
        trace.x.append(np.array(x_next, dtype=float))
        if not np.all(np.isfinite(x_next)):
            n_bad = int(np.size(x_next) - np.count_nonzero(np.isfinite(x_next)))
            trace.diverged = {"round": t + 1, "kind": "iterate",
                              "reason": f"{n_bad} non-finite iterate entries (NaN/inf)"}
            state = before   # as Algorithm.run keeps the last finite state (ledger charged)
            break
        if c["checkpoint"]:
            _save_checkpoint(c["checkpoint"], c, t + 1, state, trace)
    return state, trace


def federation_report(trace: FederatedTrace, owned: dict[int, np.ndarray]) -> dict[str, Any]:
    """The ``federation`` section of a Flower run's privacy report.

    Parameters
    ----------
    trace : FederatedTrace
    owned : dict
        ``{node: agents}`` of the run.

    Returns
    -------
    dict
        ``engine``, ``trust_model`` (:data:`TRUST_MODEL`), ``round_policy``, ``reply_checks``
        (the tolerances), ``nodes``, ``client_randomness`` (as declared), ``refused`` and
        ``diverged``.
    """
    return {"engine": "flower", "trust_model": list(TRUST_MODEL), "round_policy": ROUND_POLICY,
            "reply_checks": {"on_manifold_atol": REPLY_ATOL, "noise_tail_sigmas": NOISE_TAIL},
            "nodes": {str(n): [int(a) for a in v] for n, v in owned.items()},
            "client_randomness": {str(k): v for k, v in trace.randomness.items()},
            "refused": trace.refused, "diverged": trace.diverged}


# ----------------------------------------------------------------------------- checkpoints
#: The :mod:`rfed.state` kind of the ServerApp's checkpoint file.
_CHECKPOINT_KIND = "flower-server-checkpoint"


def _save_checkpoint(path: str, c: dict[str, Any], next_round: int, state: Any,
                     trace: FederatedTrace) -> None:
    """The server's state after round ``next_round - 1``: an :mod:`rfed.state` file (atomic,
    checksummed, no pickle) bound to the run config's arithmetic keys."""
    save_state(path, {"next_round": next_round, "state": state, "trace": trace.to_dict()},
               kind=_CHECKPOINT_KIND, bind={"config": _arithmetic_config(c)})


def _load_checkpoint(path: str, c: dict[str, Any]) -> tuple[Any, int, FederatedTrace]:
    """``(state, next round, trace)`` from the checkpoint at ``path``.

    A damaged file, one that is not an :mod:`rfed.state` file (e.g. an old pickle, which is
    never unpickled) or one written by another configuration is refused in one line naming it.
    """
    try:
        saved = load_state(path, kind=_CHECKPOINT_KIND,
                           expect={"config": _arithmetic_config(c)})
        return (saved["state"], int(saved["next_round"]),
                FederatedTrace.from_dict(saved["trace"]))
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


def _resume_or_start(problem: Problem, alg: PriRFed, c: dict[str, Any]):
    """The server's state, first round and trace: from ``c['checkpoint']`` if that file exists.

    The ServerApp writes the checkpoint (atomically) after every round when the run config
    names one; a ServerApp started again with the same config continues from it, and since
    every draw is keyed by (seed, agent, round) the run ends as an uninterrupted one would.
    """
    path = str(c["checkpoint"])
    if not path or not os.path.exists(path):
        return _initial(problem, alg, c), 0, FederatedTrace()
    return _load_checkpoint(path, c)


# ----------------------------------------------------------------------------- the client
def train_block(problem: Problem, alg: PriRFed, state0: Any, x: np.ndarray, round_: int,
                seed: int, agents: np.ndarray, *, local_seed: int | None = None) -> BlockReply:
    """A client's work in one round: local training of its block of agents from ``x``.

    The minibatches and noise come from the agents' keyed streams ``(local_seed, agent,
    round)``: ``local_seed`` is the node's secret key, or ``None`` for the run's ``seed``
    (replayable: the results of a run in one process). A local run that leaves the
    floating-point range gives a reply declaring it (no points).

    Parameters
    ----------
    problem : Problem
        The node's shard.
    alg : PriRFed
    state0 : PriRFedState
        The client's initial state (it holds the plan: noise and sensitivities).
    x : array, shape ``point_shape``
        The server's iterate.
    round_, seed : int
        The round and the run's seed.
    agents : int array, shape ``(A,)``
    local_seed : int, optional

    Returns
    -------
    BlockReply
    """
    state = replace(state0, x=np.asarray(x, dtype=float), round=round_,
                    seed=seed if local_seed is None else local_seed)
    agents = np.asarray(agents, dtype=np.int64)
    randomness = "run-seed" if local_seed is None else "node-secret"
    try:
        points, _ = alg.train_block(problem, state, agents, round_)
    except (FloatingPointError, np.linalg.LinAlgError):
        return BlockReply(agents, None, state0.plan.sigma[agents],
                          state0.plan.sensitivity[agents], round_, True, randomness)
    return BlockReply(agents, points, state0.plan.sigma[agents],
                      state0.plan.sensitivity[agents], round_, False, randomness)


def node_settings(node_config: dict[str, Any]) -> dict[str, Any]:
    """This SuperNode's settings (the node-config loader hook, module docstring).

    Parameters
    ----------
    node_config : dict
        The node config; a virtual SuperNode of Flower's simulation engine has only
        ``partition-id`` and ``num-partitions``, and then takes the JSON object in the
        environment variable ``RFED_FLOWER_SIM_NODE_CONFIG`` (``{partition-id}`` in a string
        replaced by the node's).

    Returns
    -------
    dict
        ``data-file`` or ``data-dir``, and optionally ``local-randomness``, ``max-epsilon``.
    """
    settings = dict(node_config)
    sim = os.environ.get("RFED_FLOWER_SIM_NODE_CONFIG")
    if sim and "data-file" not in settings and "data-dir" not in settings \
            and "partition-id" in settings:
        pid = str(int(settings["partition-id"]))
        for key, value in json.loads(sim).items():
            settings.setdefault(key, value.replace("{partition-id}", pid)
                                if isinstance(value, str) else value)
    return settings


def _node_data_path(node_config: dict[str, Any], c: dict[str, Any]) -> Path:
    """Where this SuperNode's rows are (the loader hook of the node config, module docstring)."""
    if "data-file" in node_config:
        return Path(str(node_config["data-file"]))
    if "data-dir" in node_config:
        return Path(str(node_config["data-dir"])) / f"{c['dataset']}.npz"
    raise ValueError("this SuperNode's node config names no data: start it with --node-config "
                     "'data-file=\"PATH.npz\"' or 'data-dir=\"DIR\"' (DIR holding "
                     f"{c['dataset']}.npz)")


def _planned_epsilon(problem: Problem, alg: PriRFed, state0: Any, rounds: int) -> float:
    """The certified epsilon the run will charge this node's agents (their public selection
    over the planned rounds), at the run's delta."""
    ledger = PrivacyLedger(problem.n_agents, "rdp", alg.neighboring)
    own = problem.agents
    for t in range(rounds):
        picked = alg.select(problem, state0, t)
        mine = picked[np.isin(picked, own)]
        if mine.size:
            record_round(ledger, t, state0.plan, mine)
    if not state0.plan.private:
        return math.inf
    return float(certified_epsilon(ledger, state0.delta, alg.method)[0])


_NODE_STATE = "rfed-node"


class _ClientGuard:
    """The checks an honest client makes before it releases anything (module docstring)."""

    def __init__(self, context: Any, c: dict[str, Any], key: str):
        self.context = context
        self.node_config = node_settings(dict(context.node_config))
        self.c = c
        self.key = key

    def _record(self) -> dict[str, Any]:
        from flwr.app import ConfigRecord

        state = self.context.state
        if _NODE_STATE not in state.config_records:
            state.config_records[_NODE_STATE] = ConfigRecord({"run": self.key, "trained": [],
                                                              "approved": ""})
        record = state.config_records[_NODE_STATE]
        if record["run"] != self.key:
            raise ValueError("the run config changed during the run; refusing to train")
        return record

    def check(self, problem: Problem, alg: PriRFed, state0: Any, t: int, seed: int,
              agents: np.ndarray, x: np.ndarray) -> None:
        """Raise ``ValueError`` when the request falls outside this node's plan."""
        rounds = int(self.c["rounds"])
        if seed != state0.seed:
            raise ValueError(f"the server's seed {seed} is not the run config's {state0.seed}")
        if not 0 <= t < rounds:
            raise ValueError(f"round {t} is outside the run's rounds 0..{rounds - 1}")
        expected = alg.select(problem, state0, t)
        expected = expected[np.isin(expected, problem.agents)]
        if not np.array_equal(agents, expected):
            raise ValueError(f"asked agents {agents.tolist()} in round {t}; the public "
                             f"selection picks {expected.tolist()} of this node's")
        problem.manifold.check_point(x, "x (from the server)")
        if np.shape(x) != tuple(problem.manifold.point_shape):
            raise ValueError(f"x from the server has shape {np.shape(x)}")
        record = self._record()
        if t in list(record["trained"]):
            raise ValueError(f"round {t} was already trained in this run; refusing to release "
                             "its agents twice")
        limit = self.node_config.get("max-epsilon")
        if limit is not None and record["approved"] != self.key:
            eps = _planned_epsilon(problem, alg, state0, rounds)
            if not eps <= float(limit):
                raise ValueError(f"the run would certify epsilon {eps:.4g} for this node's "
                                 f"agents, above the node config's max-epsilon {limit}")
            record["approved"] = self.key

    def trained(self, t: int) -> None:
        record = self._record()
        record["trained"] = [*list(record["trained"]), int(t)]

    def local_seed(self) -> int | None:
        mode = str(self.node_config.get("local-randomness", "node-secret"))
        if mode == "run-seed":
            return None
        if mode != "node-secret":
            raise ValueError(f"node config 'local-randomness' must be 'node-secret' or "
                             f"'run-seed', got {mode!r}")
        # a fresh secret key per reply: the server cannot reproduce the noise
        return secrets.randbits(63)


_CLIENT_CACHE: dict[str, Any] = {}


def _client_setup(context: Any):
    """``(config, problem, alg, state0, run key)`` of this node, built from its own file."""
    c = _config(dict(context.run_config))
    path = _node_data_path(node_settings(dict(context.node_config)), c)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"node data file '{path}' does not exist") from None
    run_key = json.dumps(_arithmetic_config(c), sort_keys=True)
    key = json.dumps([run_key, str(path), stat.st_mtime_ns, stat.st_size])
    if key not in _CLIENT_CACHE:
        problem = load_node_problem(path, c)
        alg = algorithm_from_config(c)
        _CLIENT_CACHE.clear()
        _CLIENT_CACHE[key] = (c, problem, alg, _initial(problem, alg, c))
    c, problem, alg, state0 = _CLIENT_CACHE[key]
    return c, problem, alg, state0, run_key


def client_query(msg: Any, context: Any) -> Any:
    """The ClientApp's ``query``: the agents this node holds (from its own file).

    Parameters
    ----------
    msg : flwr.app.Message
    context : flwr.app.Context

    Returns
    -------
    flwr.app.Message
        ``cfg.agents``: the global ids.
    """
    from flwr.app import ConfigRecord, Message, RecordDict

    _, problem, _, _, _ = _client_setup(context)
    return Message(RecordDict({"cfg": ConfigRecord({
        "agents": [int(a) for a in problem.agents]})}), reply_to=msg)


def client_train(msg: Any, context: Any) -> Any:
    """The ClientApp's ``train``: check the request, train, reply with the release only.

    Parameters
    ----------
    msg : flwr.app.Message
        ``x`` (``ArrayRecord``) and ``cfg`` (``round``, ``seed``, ``agents``).
    context : flwr.app.Context
        The run config and this node's node config.

    Returns
    -------
    flwr.app.Message
        ``points`` (``(A, *point_shape)``, absent after a diverged local run) and ``cfg``:
        ``round``, ``agents``, ``sigma``, ``sensitivity``, ``status`` and ``randomness``;
        nothing else computed from the records.

    Raises
    ------
    ValueError
        A request outside this node's plan (Flower sends the server an error reply).
    """
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict

    c, problem, alg, state0, run_key = _client_setup(context)
    cfg = msg.content["cfg"]
    t, seed = int(cfg["round"]), int(cfg["seed"])
    agents = np.asarray(cfg["agents"], dtype=np.int64)
    x = msg.content["x"]["x"].numpy()
    guard = _ClientGuard(context, c, run_key)
    guard.check(problem, alg, state0, t, seed, agents, x)
    out = train_block(problem, alg, state0, x, t, seed, agents, local_seed=guard.local_seed())
    guard.trained(t)
    content = RecordDict({"cfg": ConfigRecord({
        "round": int(out.round), "agents": [int(a) for a in out.agents],
        "sigma": [float(v) for v in out.sigma],
        "sensitivity": [float(v) for v in out.sensitivity],
        "status": "diverged" if out.diverged else "ok", "randomness": out.randomness})})
    if out.points is not None:
        content["points"] = ArrayRecord({"points": Array(np.ascontiguousarray(out.points))})
    return Message(content, reply_to=msg)


def decode_train_reply(reply: Any) -> tuple[int, BlockReply | str]:
    """The server's reading of a ``train`` reply.

    Parameters
    ----------
    reply : flwr.app.Message

    Returns
    -------
    node : int
        The sender (Flower's authenticated source node id).
    reply : BlockReply or str
        The reply, or why it is unusable (an error reply, a malformed content).
    """
    node = int(reply.metadata.src_node_id)
    if reply.has_error():
        return node, f"the client failed: {reply.error.reason}"
    try:
        cfg = reply.content["cfg"]
        status = str(cfg["status"])
        if status not in ("ok", "diverged"):
            return node, f"unknown status {status!r}"
        points = (None if status == "diverged"
                  else reply.content["points"]["points"].numpy())
        agents = np.asarray(cfg["agents"])
        return node, BlockReply(
            agents if agents.size else agents.astype(np.int64), points,
            np.asarray(cfg["sigma"], dtype=float), np.asarray(cfg["sensitivity"], dtype=float),
            int(cfg["round"]), status == "diverged", str(cfg["randomness"]))
    except (KeyError, TypeError, ValueError) as exc:
        return node, f"a malformed reply ({type(exc).__name__}: {exc})"


try:  # the apps exist only where flwr is installed (Python >= 3.11)
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.common.logger import log as _flwr_log
    from flwr.serverapp import Grid, ServerApp
except ImportError:  # pragma: no cover - exercised where flwr is absent
    server_app = client_app = None
else:
    server_app = ServerApp()
    client_app = ClientApp()

    @server_app.main()
    def _server_main(grid: Grid, context: Context) -> None:
        c = _config(dict(context.run_config))
        out = server_path(c["out"], "out") if c["out"] else None
        if c["checkpoint"]:
            c["checkpoint"] = str(server_path(c["checkpoint"], "checkpoint"))
        # the server holds the public facts only: counts and dimensions, no agent's rows
        problem, alg = public_problem(c), algorithm_from_config(c)
        nodes = _wait_for_nodes(grid, int(c["min-nodes"]))
        owned = _query_owners(grid, nodes, problem.n_agents, float(c["reply-timeout"]))

        def train_on_nodes(t, state, node_blocks):
            messages = []
            for node, block in node_blocks:
                content = RecordDict({
                    "x": ArrayRecord({"x": Array(np.asarray(state.x, dtype=float))}),
                    "cfg": ConfigRecord({"round": t, "seed": int(state.seed),
                                         "agents": [int(a) for a in block]}),
                })
                messages.append(Message(content, node, "train", group_id=str(t)))
            replies = grid.send_and_receive(messages, timeout=float(c["reply-timeout"]))
            return [decode_train_reply(r) for r in replies]

        state, trace = serve(problem, alg, c, list(owned), train_on_nodes, owned=owned,
                             log=lambda line: _flwr_log(logging.WARNING, line))
        if out is not None:
            report = alg.privacy(state)
            report["federation"] = federation_report(trace, owned)
            write_result(out, alg.output(problem, state), report, n_nodes=len(owned),
                         trace=trace)

    def _wait_for_nodes(grid: Grid, min_nodes: int, timeout: float = 120.0) -> list[int]:
        """The connected SuperNodes' ids, sorted, once at least ``min_nodes`` are connected."""
        import time

        deadline = time.monotonic() + timeout
        while len(nodes := sorted(grid.get_node_ids())) < max(1, min_nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(nodes)} SuperNode(s) connected after {timeout:.0f} s; "
                                   f"the run config asks for min-nodes = {min_nodes}")
            time.sleep(0.5)
        return nodes

    def _query_owners(grid: Grid, nodes: list[int], n_agents: int, timeout: float
                      ) -> dict[int, np.ndarray]:
        """``{node: agents}`` as each node's own file says; every agent held exactly once."""
        messages = [Message(RecordDict({"cfg": ConfigRecord({})}), node, "query")
                    for node in nodes]
        owned: dict[int, np.ndarray] = {}
        left_out: dict[int, str] = {}
        for r in grid.send_and_receive(messages, timeout=timeout):
            node = int(r.metadata.src_node_id)
            try:
                if r.has_error():
                    raise ValueError(r.error.reason)
                agents = np.asarray(r.content["cfg"]["agents"], dtype=np.int64).reshape(-1)
            except (KeyError, TypeError, ValueError) as exc:
                # a node without this data set is not part of this run
                left_out[node] = str(exc)
                _flwr_log(logging.WARNING, f"SuperNode {node} is left out of this run: {exc}")
                continue
            owned[node] = agents
        for node in sorted(set(nodes) - set(owned) - set(left_out)):
            left_out[node] = f"no answer within {timeout:.0f} s"
        held = np.concatenate([np.zeros(0, dtype=np.int64), *owned.values()])
        missing = sorted(set(range(n_agents)) - set(held.tolist()))
        twice = sorted({int(a) for a in held if np.count_nonzero(held == a) > 1})
        outside = sorted({int(a) for a in held if not 0 <= a < n_agents})
        if missing or twice or outside:
            raise RuntimeError(f"the SuperNodes' data files do not split the {n_agents} agents: "
                               f"missing {missing}, held twice {twice}, unknown {outside}; "
                               f"nodes: { {n: v.tolist() for n, v in owned.items()} }; left out: "
                               f"{left_out}")
        return {n: v for n, v in sorted(owned.items()) if v.size}

    client_app.train()(client_train)
    client_app.query()(client_query)


APP_DIR = Path(__file__).with_name("flower_app")


def run_on_deployment(run_config: dict[str, Any], n_supernodes: int = 2, *,
                      workdir: str | Path, data: Problem | None = None, insecure: bool = False,
                      timeout: float = 300.0, port: int | None = None
                      ) -> tuple[np.ndarray, dict[str, Any]]:
    """Run the Flower app on a local SuperLink with ``n_supernodes`` SuperNodes (loopback).

    A :class:`rfed.engines.flower_launch.LoopbackFederation` (TLS with a CA made for the run,
    SuperNode authentication, each SuperNode its own process with its own data file holding a
    contiguous block of agents) for this one run.

    Parameters
    ----------
    run_config : dict
        Overrides of :data:`DEFAULT_CONFIG` (``out`` is set here).
    n_supernodes : int
        SuperNodes started, each a separate process holding a block of agents.
    workdir : path
        Holds ``FLWR_HOME``, the certificates, the nodes' data, the logs and the result.
    data : Problem, optional
        The whole problem whose shards the nodes' files hold (default :func:`demo_problem`).
    insecure : bool
        Local test switch: plain HTTP and no SuperNode authentication.
    timeout : float
        Seconds for the whole run.
    port : int, optional
        The SuperLink's port (default: a free port).

    Returns
    -------
    x, privacy : the final point and the privacy report written by the ServerApp.
    """
    from rfed.engines.flower_launch import LoopbackFederation

    with LoopbackFederation(n_supernodes, workdir=workdir, insecure=insecure, timeout=timeout,
                            port=port, validate=run_config) as federation:
        result = federation.run(run_config, demo_problem() if data is None else data)
    return result.x, result.privacy


def run_in_simulation(run_config: dict[str, Any], n_supernodes: int = 2, *,
                      workdir: str | Path, data: Problem | None = None,
                      timeout: float = 300.0, port: int | None = None
                      ) -> tuple[np.ndarray, dict[str, Any]]:
    """Run the Flower app in Flower's simulation engine (Ray; extra ``rfed[flower-sim]``).

    ``flower-superlink --simulation``: the SuperLink runs the ServerApp and ``n_supernodes``
    virtual SuperNodes whose ClientApps execute in Ray actors, each reading its data from
    ``nodes/node-<partition-id>`` of the work directory (:func:`node_settings`). Same app,
    messages and result as :func:`run_on_deployment`; parameters and return value as there.

    Parameters
    ----------
    run_config : dict
    n_supernodes : int
    workdir : str or Path
    data : Problem, optional
    timeout : float
        Seconds.
    port : int, optional

    Returns
    -------
    x : ndarray, shape ``point_shape``
    privacy : dict
    """
    from rfed.engines.flower_launch import LoopbackFederation

    with LoopbackFederation(n_supernodes, workdir=workdir, simulation=True, timeout=timeout,
                            port=port, validate=run_config) as federation:
        result = federation.run(run_config, demo_problem() if data is None else data)
    return result.x, result.privacy
