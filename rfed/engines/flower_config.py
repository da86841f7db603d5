"""What crosses to a Flower federation: a PriRFed configuration, a problem's public facts, and
each SuperNode's own data file.

The Flower app (:mod:`rfed.engines.flower`) takes everything from its run config, a flat table
of strings and numbers. This module turns the rfed objects into that table and back:

* **the algorithm**: :func:`algorithm_spec` writes any :class:`~rfed.algorithms.federated.PriRFed`
  (trainer :class:`~rfed.algorithms.federated.DPRSGD` or
  :class:`~rfed.algorithms.federated.DPRSVRG` with all their fields, the budget, client-level
  DP, aggregation, output option, sampling) as a JSON object; :func:`algorithm_from_spec`
  rebuilds the same configuration. Only a constant step size crosses (a callable is code);
* **the problem**: a registered problem class (:data:`PROBLEMS`: :class:`SpherePCA`,
  :class:`KPCA`, :class:`SPDFrechetMean`, :class:`FrechetMean` on any manifold named like
  ``Sphere(3)``, :class:`HyperbolicPrediction`; more with :func:`register_problem`), its public
  constructor options, the trailing shapes of its data arrays and every agent's record count.
  These are public facts: the server builds from them a problem holding no agent's rows;
* **the rows**: each SuperNode reads the rows of the agents it owns from a file it holds
  (:func:`save_node_data` writes one, :func:`load_node_problem` reads it with
  ``allow_pickle=False`` and checks its checksum and its agreement with the run config's
  public facts). The server never sends data.

Nothing here runs code named in a config: problem classes, trainers and manifolds are looked up
in fixed registries.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.client_dp import ClientLevelDP
from rfed.manifolds import (
    SPD,
    Euclidean,
    Grassmann,
    Hyperboloid,
    Manifold,
    PoincareBall,
    Sphere,
    Stiefel,
)
from rfed.privacy import PrivacyBudget
from rfed.problems import KPCA, FrechetMean, HyperbolicPrediction, SPDFrechetMean, SpherePCA
from rfed.problems.base import Problem

__all__ = ["NODE_DATA_FORMAT", "PROBLEMS", "ProblemAdapter", "adapter_of",
           "algorithm_from_spec", "algorithm_spec", "load_node_problem", "manifold_from_name",
           "problem_facts", "public_problem", "register_problem", "save_node_data",
           "write_node_shards"]

#: Version tag of a SuperNode's data file.
NODE_DATA_FORMAT = "rfed-flower-node-data/1"


# ----------------------------------------------------------------------------- JSON values
def _plain(value: Any, where: str) -> Any:
    """``value`` as a JSON scalar (numpy scalars unwrapped); anything else is refused."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}: a run config holds finite numbers only")
        return value
    raise TypeError(f"{where} is a {type(value).__name__} ({value!r}); only numbers, strings, "
                    "booleans and None cross to a Flower federation")


#: Configuration dataclasses that may appear in an algorithm spec, by name.
_DATACLASSES: dict[str, type] = {"DPRSGD": DPRSGD, "DPRSVRG": DPRSVRG,
                                 "PrivacyBudget": PrivacyBudget, "ClientLevelDP": ClientLevelDP}


def _dataclass_spec(obj: Any, where: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    name = type(obj).__name__
    if _DATACLASSES.get(name) is not type(obj):
        raise TypeError(f"{where} is a {name}; a Flower run carries only "
                        f"{sorted(_DATACLASSES)}")
    fields = {}
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # checked: a known dataclass
        if not f.init:
            continue
        value = getattr(obj, f.name)
        fields[f.name] = (_dataclass_spec(value, f"{where}.{f.name}")
                          if dataclasses.is_dataclass(value) else
                          _plain(value, f"{where}.{f.name}"))
    return {"type": name, "fields": fields}


def _dataclass_from_spec(spec: Any, where: str) -> Any:
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or set(spec) != {"type", "fields"}:
        raise ValueError(f"run-config 'algorithm': {where} must be {{\"type\": ..., \"fields\": "
                         f"{{...}}}}, got {spec!r}")
    cls = _DATACLASSES.get(str(spec["type"]))
    if cls is None:
        raise ValueError(f"run-config 'algorithm': {where} has type {spec['type']!r}; expected "
                         f"one of {sorted(_DATACLASSES)}")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    fields = dict(spec["fields"])
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"run-config 'algorithm': {where} ({spec['type']}) has unknown fields "
                         f"{sorted(unknown)}; expected some of {sorted(known)}")
    for key, value in fields.items():
        if isinstance(value, Mapping):
            fields[key] = _dataclass_from_spec(value, f"{where}.{key}")
    return cls(**fields)


# ----------------------------------------------------------------------------- the algorithm
def algorithm_spec(alg: PriRFed) -> dict[str, Any]:
    """The complete configuration of ``alg`` as a JSON-able dict (the run config's
    ``algorithm``).

    Parameters
    ----------
    alg : PriRFed
        With a constant step size (a schedule is a Python callable: it does not cross).

    Returns
    -------
    dict
        ``trainer`` (``{"type": "DPRSGD" | "DPRSVRG", "fields": {...}}``, every field of the
        dataclass), ``budget`` and ``client_dp`` (likewise, or ``None``) and PriRFed's own
        arguments. :func:`algorithm_from_spec` rebuilds an equal configuration.
    """
    if not isinstance(alg, PriRFed):
        raise TypeError(f"argument 'alg' must be a PriRFed, got {type(alg).__name__}")
    if callable(alg.step_size):
        raise ValueError(f"{alg.name}: a step-size schedule is a Python callable and cannot "
                         "cross to a Flower federation; give a constant step size")
    if getattr(alg, "line_search", None) is not None:
        raise ValueError(f"{alg.name}: argument 'line_search' is not carried to a Flower "
                         "federation (run it in one process, or give a fixed step size)")
    return {
        "trainer": _dataclass_spec(alg.trainer, "trainer"),
        "n_sampled": _plain(alg.n_sampled, "n_sampled"),
        "step_size": float(alg.step_size),
        "aggregation": alg.aggregation,
        "output_option": int(alg.output_option),
        "budget": _dataclass_spec(alg.budget, "budget"),
        "n_rounds": _plain(alg.n_rounds, "n_rounds"),
        "delta_hat": float(alg.delta_hat),
        "privacy_delta": _plain(alg.privacy_delta, "privacy_delta"),
        # with a budget the relation is the budget's (PriRFed refuses a second one)
        "neighboring": None if alg.budget is not None else alg.neighboring,
        "client_dp": _dataclass_spec(alg.client_dp, "client_dp"),
    }


_ALGORITHM_KEYS = ("trainer", "n_sampled", "step_size", "aggregation", "output_option", "budget",
                   "n_rounds", "delta_hat", "privacy_delta", "neighboring", "client_dp")


def algorithm_from_spec(spec: Mapping[str, Any]) -> PriRFed:
    """The :class:`PriRFed` described by :func:`algorithm_spec`'s dict (checked key by key).

    Parameters
    ----------
    spec : mapping
        Exactly the keys :func:`algorithm_spec` writes; dataclasses as ``{"type", "fields"}``
        with ``type`` one of DPRSGD, DPRSVRG, PrivacyBudget, ClientLevelDP.

    Returns
    -------
    PriRFed
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"run-config 'algorithm' must be a JSON object, got {spec!r}")
    unknown = set(spec) - set(_ALGORITHM_KEYS)
    missing = set(_ALGORITHM_KEYS) - set(spec)
    if unknown or missing:
        raise ValueError(f"run-config 'algorithm' has unknown keys {sorted(unknown)} and lacks "
                         f"{sorted(missing)}; expected exactly {list(_ALGORITHM_KEYS)}")
    trainer = _dataclass_from_spec(spec["trainer"], "trainer")
    if not isinstance(trainer, (DPRSGD, DPRSVRG)):
        raise ValueError("run-config 'algorithm': 'trainer' must be a DPRSGD or DPRSVRG")
    return PriRFed(trainer, spec["n_sampled"], spec["step_size"],
                   aggregation=spec["aggregation"], output_option=spec["output_option"],
                   budget=_dataclass_from_spec(spec["budget"], "budget"),
                   n_rounds=spec["n_rounds"], delta_hat=spec["delta_hat"],
                   privacy_delta=spec["privacy_delta"], neighboring=spec["neighboring"],
                   client_dp=_dataclass_from_spec(spec["client_dp"], "client_dp"))


# ----------------------------------------------------------------------------- manifolds
_MANIFOLD_NAME = re.compile(r"^(Sphere|SPD|Hyperboloid|PoincareBall|Euclidean|Stiefel|Grassmann)"
                            r"\((\d+(?:, \d+)*)\)$")
_MANIFOLDS: dict[str, type] = {"Sphere": Sphere, "SPD": SPD, "Hyperboloid": Hyperboloid,
                               "PoincareBall": PoincareBall, "Euclidean": Euclidean,
                               "Stiefel": Stiefel, "Grassmann": Grassmann}


def manifold_from_name(name: str) -> Manifold:
    """The manifold whose ``repr`` is ``name`` (e.g. ``'Sphere(3)'``, ``'Stiefel(5, 2)'``).

    Parsed, never evaluated: only Sphere, SPD, Hyperboloid, PoincareBall, Euclidean, Stiefel
    and Grassmann, with integer arguments.

    Parameters
    ----------
    name : str

    Returns
    -------
    Manifold
    """
    match = _MANIFOLD_NAME.match(str(name))
    if match is None:
        raise ValueError(f"run-config 'problem-options': manifold {name!r} is not one of "
                         f"{sorted(_MANIFOLDS)} written as its repr, e.g. 'Sphere(3)'")
    return _MANIFOLDS[match.group(1)](*(int(v) for v in match.group(2).split(", ")))


# ----------------------------------------------------------------------------- problems
@dataclass(frozen=True)
class ProblemAdapter:
    """How a problem class crosses to a federation.

    Attributes
    ----------
    name : str
        The run config's ``problem``.
    cls : type
        The :class:`Problem` subclass (matched exactly, not by ``isinstance``).
    arrays : tuple of str
        The data arrays of a node's file, each of shape ``(A, n_max, ...)`` (the constructor's
        inputs, not arrays the class derives from them).
    rows : callable
        ``rows(problem) -> {name: array (n_agents, n_max, ...)}`` of a full problem.
    options : callable
        ``options(problem) -> dict``: the public constructor options (JSON scalars, lists).
    build : callable
        ``build(options, arrays, counts) -> problem`` on the given rows (``counts`` of shape
        ``(A,)``; ``A`` may be 0, the server's problem of public facts).
    """

    name: str
    cls: type
    arrays: tuple[str, ...]
    # the problem is typed Any: each adapter reads its own class's attributes
    rows: Callable[[Any], dict[str, np.ndarray]]
    options: Callable[[Any], dict[str, Any]]
    build: Callable[[dict[str, Any], dict[str, np.ndarray], np.ndarray], Any]


#: Registered problem classes, by the run config's ``problem`` name.
PROBLEMS: dict[str, ProblemAdapter] = {}


def register_problem(adapter: ProblemAdapter) -> None:
    """Make ``adapter.cls`` runnable on Flower.

    The ServerApp and every ClientApp must have registered it: do it in the module your Flower
    app's components import.

    Parameters
    ----------
    adapter : ProblemAdapter
        Replaces an adapter of the same name.
    """
    if not isinstance(adapter, ProblemAdapter):
        raise TypeError(f"argument 'adapter' must be a ProblemAdapter, got {adapter!r}")
    PROBLEMS[adapter.name] = adapter


def adapter_of(problem: Problem) -> ProblemAdapter:
    """The registered adapter of ``problem``'s exact class.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    ProblemAdapter
        ``ValueError`` if the class is not registered.
    """
    for adapter in PROBLEMS.values():
        if type(problem) is adapter.cls:
            return adapter
    raise ValueError(f"{type(problem).__name__} is not registered for Flower runs (registered: "
                     f"{sorted(PROBLEMS)}); register it with "
                     "rfed.engines.flower_config.register_problem")


def _kpca_build(o, a, counts):
    # the rows were already scaled to the norm bound by the full problem: scaling them again
    # could move their last bits, so the bound is set, not applied
    problem = KPCA(a["z"], int(o["k"]), o["manifold"], counts)
    if o["norm_bound"] is not None:
        problem.norm_bound = float(o["norm_bound"])
        problem.gradient_bound = problem.norm_bound**2
    return problem


register_problem(ProblemAdapter(
    "SpherePCA", SpherePCA, ("z",), lambda p: {"z": p.data["z"]},
    lambda p: {"norm_bound": p.norm_bound, "gradient_bound": p.gradient_bound},
    lambda o, a, counts: SpherePCA(a["z"], counts, o["gradient_bound"],
                                   norm_bound=o["norm_bound"])))
register_problem(ProblemAdapter(
    "KPCA", KPCA, ("z",), lambda p: {"z": p.data["z"]},
    lambda p: {"k": p.k, "manifold": type(p.manifold).__name__.lower(),
               "norm_bound": p.norm_bound},
    _kpca_build))
register_problem(ProblemAdapter(
    "SPDFrechetMean", SPDFrechetMean, ("points",), lambda p: {"points": p.data["a"]},
    lambda p: {"gradient_bound": p.gradient_bound,
               "evaluate_grad_norm": p.evaluate_grad_norm},
    lambda o, a, counts: SPDFrechetMean(a["points"], counts, o["gradient_bound"],
                                        o["evaluate_grad_norm"])))
register_problem(ProblemAdapter(
    "FrechetMean", FrechetMean, ("points",), lambda p: {"points": p.data["a"]},
    lambda p: {"manifold": repr(p.manifold), "gradient_bound": p.gradient_bound,
               "evaluate_grad_norm": p.evaluate_grad_norm},
    lambda o, a, counts: FrechetMean(manifold_from_name(o["manifold"]), a["points"], counts,
                                     o["gradient_bound"], o["evaluate_grad_norm"])))
register_problem(ProblemAdapter(
    "HyperbolicPrediction", HyperbolicPrediction, ("features", "targets"),
    lambda p: {"features": p.data["w"], "targets": p.data["y"]},
    lambda p: {"query": np.asarray(p.query, dtype=np.float64).tolist(), "gamma": p.gamma,
               "bandwidth": p.bandwidth, "kernel": p.kernel, "weights": p.weights,
               "diameter": p.diameter, "gradient_bound": p.gradient_bound},
    lambda o, a, counts: HyperbolicPrediction(
        a["features"], a["targets"], np.asarray(o["query"], dtype=float), counts,
        gamma=o["gamma"], bandwidth=o["bandwidth"], kernel=o["kernel"], weights=o["weights"],
        diameter=o["diameter"], gradient_bound=o["gradient_bound"])))


#: Public attributes a problem rebuilt from its options must share with the original.
_PUBLIC_FACTS = ("gradient_bound", "privacy_assumptions", "coupled_records",
                 "evaluate_grad_norm", "sorted_batches", "n_max", "smoothness", "norm_bound")


def _jsonable_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = {}
    for key, value in options.items():
        if isinstance(value, (list, tuple)):
            out[key] = [_plain(v, f"{where}[{key!r}]") for v in np.asarray(value).ravel()] \
                if np.ndim(value) == 1 else np.asarray(value, dtype=float).tolist()
        else:
            out[key] = _plain(value, f"{where}[{key!r}]")
    return out


def problem_facts(problem: Problem) -> dict[str, Any]:
    """The public facts of ``problem`` as run-config entries.

    Parameters
    ----------
    problem : Problem
        The whole problem of a registered class (not a shard).

    Returns
    -------
    dict
        ``problem`` (the registered name), ``problem-options`` (JSON of the public
        constructor options), ``problem-arrays`` (JSON ``{name: trailing shape}``), ``counts``
        (JSON list of every agent's record count) and ``n-max`` (the padding width of the
        arrays: shards built with it give the full problem's bits).

    The options are checked to rebuild ``problem``'s public facts (clip-relevant bounds,
    assumptions, coupling), so that a missing option fails here, not as a different report.
    """
    adapter = adapter_of(problem)
    if problem.is_shard:
        raise ValueError("argument 'problem' must be the whole problem, not a shard")
    options = _jsonable_options(adapter.options(problem), "problem options")
    rows = adapter.rows(problem)
    shapes = {name: list(rows[name].shape[2:]) for name in adapter.arrays}
    probe = adapter.build(json.loads(json.dumps(options)),
                          {name: rows[name][:1] for name in adapter.arrays}, problem.counts[:1])
    for fact in _PUBLIC_FACTS:
        mine, theirs = getattr(problem, fact, None), getattr(probe, fact, None)
        if not _same(mine, theirs):
            raise ValueError(f"{adapter.name}: the public option(s) do not rebuild its {fact!r} "
                             f"({theirs!r} instead of {mine!r}); fix its ProblemAdapter")
    if repr(probe.manifold) != repr(problem.manifold):
        raise ValueError(f"{adapter.name}: the options rebuild manifold {probe.manifold!r}, not "
                         f"{problem.manifold!r}")
    return {"problem": adapter.name, "problem-options": json.dumps(options, sort_keys=True),
            "problem-arrays": json.dumps(shapes, sort_keys=True),
            "counts": json.dumps([int(n) for n in problem.counts]),
            "n-max": int(problem.n_max)}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a == b
    return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))) \
        if isinstance(a, (tuple, list)) else a == b


def _json_value(c: Mapping[str, Any], key: str, kind: type) -> Any:
    text = c[key]
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise ValueError(f"run-config '{key}' is not valid JSON ({exc.msg} at character "
                         f"{exc.pos}): {text!r}") from None
    if not isinstance(value, kind):
        raise ValueError(f"run-config '{key}' must be a JSON {kind.__name__}, got {text!r}")
    return value


@dataclass(frozen=True)
class _Facts:
    adapter: ProblemAdapter
    options: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]
    counts: np.ndarray
    n_max: int


def _facts(c: Mapping[str, Any]) -> _Facts:
    """The problem's public facts read from the run config ``c`` (checked)."""
    adapter = PROBLEMS.get(str(c["problem"]))
    if adapter is None:
        raise ValueError(f"run-config 'problem' must be one of {sorted(PROBLEMS)}, got "
                         f"{c['problem']!r}")
    options = _json_value(c, "problem-options", dict)
    shapes = _json_value(c, "problem-arrays", dict)
    if set(shapes) != set(adapter.arrays) or not all(
            isinstance(s, list) and all(isinstance(d, int) and d >= 1 for d in s)
            for s in shapes.values()):
        raise ValueError(f"run-config 'problem-arrays' must give the trailing shape of each of "
                         f"{list(adapter.arrays)} (lists of ints >= 1), got "
                         f"{c['problem-arrays']!r}")
    counts = _json_value(c, "counts", list)
    if not counts or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                             for n in counts):
        raise ValueError(f"run-config 'counts' must list every agent's record count (ints >= "
                         f"1), got {c['counts']!r}")
    n_max = int(c["n-max"]) or max(counts)
    if n_max < max(counts):
        raise ValueError(f"run-config 'n-max' ({n_max}) must be at least the largest count "
                         f"({max(counts)}), or 0 for that count")
    return _Facts(adapter, options, {k: tuple(v) for k, v in shapes.items()},
                  np.asarray(counts, dtype=np.int64), n_max)


def public_problem(c: Mapping[str, Any]) -> Problem:
    """The server's problem: the run config's public facts, holding no agent's rows.

    Parameters
    ----------
    c : mapping
        The run config (defaults filled in).

    Returns
    -------
    Problem
        A shard of no agent (:meth:`Problem.as_shard`): counts, manifold, bounds only.
    """
    f = _facts(c)
    empty = {name: np.zeros((0, f.n_max) + f.shapes[name]) for name in f.adapter.arrays}
    try:
        problem = f.adapter.build(f.options, empty, np.zeros(0, dtype=np.int64))
    except (TypeError, KeyError) as exc:
        raise ValueError(f"run-config 'problem-options' do not fit {f.adapter.name}: "
                         f"{type(exc).__name__}: {exc}") from None
    return problem.as_shard(np.zeros(0, dtype=np.int64), f.counts)


# ----------------------------------------------------------------------------- node data
def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_node_data(path: str | Path, problem: str, agents: np.ndarray, counts: np.ndarray,
                   arrays: Mapping[str, np.ndarray]) -> None:
    """Write a SuperNode's data file: the rows of the agents it owns.

    Parameters
    ----------
    path : path
        An ``.npz`` file on the node (the node config's ``data-file``, or
        ``<data-dir>/<dataset>.npz``).
    problem : str
        The registered problem name (the run config's ``problem``).
    agents : int array, shape ``(A,)``
        Increasing global ids of the agents whose rows these are.
    counts : int array, shape ``(A,)``
        Their record counts.
    arrays : mapping of str to array
        The adapter's arrays (:attr:`ProblemAdapter.arrays`), each ``(A, n_max, ...)`` float64,
        rows past an agent's count being padding.

    The file holds plain arrays only (read with ``allow_pickle=False``) and a SHA-256 digest
    of them, so a corrupted or edited file is refused.
    """
    adapter = PROBLEMS.get(str(problem))
    if adapter is None:
        raise ValueError(f"argument 'problem' must be one of {sorted(PROBLEMS)}, got {problem!r}")
    agents = np.asarray(agents, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if set(arrays) != set(adapter.arrays):
        raise ValueError(f"argument 'arrays' must hold exactly {list(adapter.arrays)}, got "
                         f"{sorted(arrays)}")
    data = {"agents": agents, "counts": counts}
    data.update({f"array_{k}": np.ascontiguousarray(v, dtype=float) for k, v in arrays.items()})
    data["problem"] = np.array(adapter.name)
    data["format"] = np.array(NODE_DATA_FORMAT)
    data["sha256"] = np.array(_digest(data))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **data)  # type: ignore[arg-type]  # numpy's stub types the kwargs as bool
    tmp.replace(path)


def write_node_shards(problem: Problem, blocks: list[np.ndarray], paths: list[str | Path]
                      ) -> None:
    """Write the shard of each block of ``problem``'s agents to the matching path (a
    simulation of a federation on one machine: each node's file holds its agents only).

    Parameters
    ----------
    problem : Problem
        The whole problem.
    blocks : list of int arrays
        Increasing global ids, one array per node.
    paths : list of paths
        One ``.npz`` per block (:func:`save_node_data`).
    """
    adapter = adapter_of(problem)
    rows = adapter.rows(problem)
    for block, path in zip(blocks, paths, strict=True):
        block = np.asarray(block, dtype=np.int64)
        save_node_data(path, adapter.name, block, problem.counts[block],
                       {k: rows[k][block] for k in adapter.arrays})


def load_node_problem(path: str | Path, c: Mapping[str, Any]) -> Problem:
    """A SuperNode's shard: its rows read from ``path``, checked against the run config ``c``.

    Parameters
    ----------
    path : path
        The node's data file (:func:`save_node_data`).
    c : mapping
        The run config (defaults filled in).

    Refused with a one-line ``ValueError`` naming the file: not an rfed node-data file, a
    checksum that does not match, another problem class, agents outside the federation, counts
    or array shapes that differ from the run config's public facts.

    Returns
    -------
    Problem
        A shard (:meth:`Problem.as_shard`) holding only the file's agents.
    """
    f = _facts(c)
    where = f"node data file '{path}'"
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise ValueError(f"{where} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where} is not a readable .npz file ({exc})") from None
    if str(data.get("format", "")) != NODE_DATA_FORMAT:
        raise ValueError(f"{where} is not an rfed node-data file (format "
                         f"{str(data.get('format', 'missing'))!r}, expected {NODE_DATA_FORMAT!r})")
    stored = str(data.pop("sha256", ""))
    if stored != _digest(data):
        raise ValueError(f"{where} is corrupted: its SHA-256 digest does not match its arrays")
    if str(data["problem"]) != f.adapter.name:
        raise ValueError(f"{where} holds rows of a {str(data['problem'])} problem; the run "
                         f"config's 'problem' is {f.adapter.name}")
    agents, counts = data["agents"], data["counts"]
    n = f.counts.size
    if agents.ndim != 1 or agents.size == 0 or np.any(np.diff(agents) <= 0) \
            or agents.min() < 0 or agents.max() >= n:
        raise ValueError(f"{where}: 'agents' must be increasing ids in 0..{n - 1}, got "
                         f"{agents.tolist()}")
    if not np.array_equal(counts, f.counts[agents]):
        raise ValueError(f"{where}: record counts {counts.tolist()} of agents "
                         f"{agents.tolist()} differ from the run config's public 'counts' "
                         f"{f.counts[agents].tolist()}")
    arrays = {}
    for name in f.adapter.arrays:
        a = data.get(f"array_{name}")
        want = (agents.size, f.n_max) + f.shapes[name]
        if a is None or a.shape != want or a.dtype != np.float64:
            raise ValueError(f"{where}: array {name!r} has "
                             f"{'no entry' if a is None else f'shape {a.shape}, {a.dtype}'}; "
                             f"the run config says {want}, float64")
        arrays[name] = a
    return f.adapter.build(f.options, arrays, counts).as_shard(agents, f.counts)
