"""Certified-budget privacy-utility companions of the decentralized papers.

Three experiments, each sweeping the certified epsilon at ``delta = min(1e-5, 1 / (10 N))`` for
the smallest local data set ``N``, with non-private and zero-start references, repetitions
(mean and band), a privacy-utility plot and its table:

* ``utility-fmnist-classify``: decentralized DP-DPSGD and DPDL (DO-ADP and noisy DSGD on
  request) on Fashion-MNIST, multinomial logistic regression on public features: the
  scattering transform with a per-image GroupNorm (Tramer and Boneh, "Differentially Private
  Learning Needs Better Features (or Much More Data)", ICLR 2021, arXiv:2011.11660), IID and
  Dirichlet(0.25) splits over 10 agents, beside centralized DP-SGD
  (:class:`rfed.algorithms.centralized.DPSGD`) on the pooled private data at the same budget,
  under each neighbouring relation the trainers account; every trainer's step, clip, batch,
  epochs, momentum, feature dimension, tail averaging and its exponential decay are chosen on
  the declared public split (:mod:`rfed.experiments._classify`). ``features='pixels'`` runs the
  earlier pipeline on whitened pixels.
* ``utility-svm``: DP-DDA l1- and l2-SVM on a binary Fashion-MNIST task and on the paper-size
  ``epsilon`` stand-in (cached, memory-mapped float32, decaying spectrum ``eps_spectrum_decay``
  (:func:`rfed.datasets.make_epsilon_like`: the isotropic recipe carries too little signal per
  record for any budget here); a random subsample of ``eps_subsample`` rows, projected on the
  top ``eps_pca_dim`` directions of its PUBLIC split). A ``checks`` table records the
  must-show per panel (beats the start at the largest budget; monotone within the bands).
* ``utility-dpdgt``: DP-DGT's sweep over the certified epsilon of ITS relation (one generator's
  cost function changes, gradients at most ``adjacency_radius`` apart) on the IEEE-14 dispatch.

Hyperparameters are chosen on PUBLIC data only. A declared public split of the training set
(:func:`rfed.datasets.public_split`, ``public_fraction``) is never trained on privately; it gives
the feature maps learned from data (the public PCA of the scattering features; for pixels,
:func:`public_whitening`: centred on the public mean, projected on the top eigenvectors of the
public covariance, whitened, rows bounded to norm 1) and the trainers' hyperparameters: a
configuration runs on one half of the public split, split among the same number of agents, at
the noise of the private run at ``eps_tune``, and is scored by its accuracy on the other half.
Every classification run outputs the tail average of its per-round outputs
(:class:`rfed.algorithms.averaging.TailAveraged`), pure post-processing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT
from rfed.algorithms.private import certifies
from rfed.datasets import (
    binary_task,
    iid_partition,
    load_fashion_mnist,
    make_epsilon_like_cached,
    normalize_l2,
    public_split,
    stack_agents_padded,
)
from rfed.experiments._classify import (
    CENTRALIZED,
    Projections,
    PublicProxy,
    at_grid_edge,
    batch_and_rounds,
    coordinate_search,
    make_trainer,
    mix_toward_start,
    partition,
    scattering_data,
    sizes_problem,
    softmax_problem,
    start_point,
    tail_averaged,
)
from rfed.experiments._paper_data import certified_delta
from rfed.experiments.plotting import new_figure
from rfed.experiments.registry import RunContext, check_setting, register, summary_row
from rfed.networks.graphs import circulant, complete, ieee14_digraph
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import ieee14_problem
from rfed.problems.linear import HingeSVM, L1Regularizer, L2Regularizer

__all__: list[str] = []

#: The certified budgets every companion sweeps.
EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0]




# ---------------------------------------------------------------------- data
def _projection(x_public: np.ndarray, dim: int) -> np.ndarray | None:
    """Top-``dim`` eigenvectors ``(d, dim)`` of the public uncentred second moment (None: 0)."""
    if not dim:
        return None
    if not 1 <= dim <= x_public.shape[1]:
        raise ValueError(f"argument 'pca_dim' must be in [0, {x_public.shape[1]}], got {dim!r}")
    _, vecs = np.linalg.eigh(x_public.T @ x_public)
    return vecs[:, ::-1][:, :dim]


def public_whitening(x_public: np.ndarray, dim: int, radius: float
                     ) -> Callable[[np.ndarray], np.ndarray]:
    """A feature map learned on the PUBLIC split only: centre, project, whiten, bound.

    ``phi(a) = clip_1((radius / sqrt(dim)) Lambda^{-1/2} V^T (a - mu))`` with ``mu`` the public
    mean, ``V`` ``(d, dim)`` and ``Lambda`` the top-``dim`` eigenpairs of the public covariance,
    and ``clip_1`` rescaling a row of norm > 1 onto the unit sphere (a per-record map, so the
    public feature bound ``||phi(a)|| <= 1`` holds for every record). On the public split
    ``E ||Lambda^{-1/2} V^T (a - mu)||^2 = dim``, so ``radius`` is the rms row norm before
    the bound. Whitened features make the logistic loss better conditioned than the raw
    projection (whose first direction, the mean image, dominates), so the same number of noisy
    steps gets nearer the optimum; no private record is read.

    Parameters
    ----------
    x_public : array, shape ``(n_public, d)``
    dim : int
        ``1 <= dim <= d``.
    radius : float
        ``> 0``.

    Returns
    -------
    callable mapping ``(n, d)`` to ``(n, dim)``.
    """
    if not (isinstance(dim, (int, np.integer)) and 1 <= dim <= x_public.shape[1]):
        raise ValueError(f"argument 'pca_dim' must be in [1, {x_public.shape[1]}] with "
                         f"whiten_radius > 0, got {dim!r}")
    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"argument 'whiten_radius' must be a finite float > 0 (0 turns "
                         f"whitening off), got {radius!r}")
    mu = x_public.mean(axis=0)
    centred = x_public - mu
    vals, vecs = np.linalg.eigh(centred.T @ centred / len(centred))
    vals, vecs = vals[::-1][:dim], vecs[:, ::-1][:, :dim]
    if vals[-1] <= 1e-12 * vals[0]:
        raise ValueError(f"argument 'pca_dim': the public covariance has rank below {dim}; "
                         "choose a smaller pca_dim")
    transform = vecs * ((radius / np.sqrt(dim)) / np.sqrt(vals))

    def phi(a: np.ndarray) -> np.ndarray:
        h = (a - mu) @ transform
        norm = np.linalg.norm(h, axis=1, keepdims=True)
        return h / np.maximum(norm, 1.0)

    return phi


def _fmnist(cfg: dict, rng: np.random.Generator, binary: tuple[int, int] | None = None) -> dict:
    """Unit-normalised Fashion-MNIST, the declared public split, the public projection.

    Returns ``x_priv, y_priv, x_pub, y_pub, x_test, y_test`` (features projected when
    ``pca_dim`` > 0; rows of norm <= 1 either way) and ``n_public``.
    """
    (x_tr, y_tr), (x_te, y_te) = load_fashion_mnist(cfg.get("data_path") or None, split="both",
                                                    flatten=True)
    if binary is not None:
        x_tr, y_tr = binary_task(x_tr, y_tr, *binary)
        x_te, y_te = binary_task(x_te, y_te, *binary)
    x_tr = normalize_l2(x_tr).astype(np.float64)
    x_te = normalize_l2(x_te).astype(np.float64)
    split = public_split(x_tr, y_tr, cfg["public_fraction"], rng)
    x_priv, y_priv = split.x_private, split.y_private
    if cfg.get("n_train"):
        keep = np.sort(rng.permutation(len(y_priv))[: int(cfg["n_train"])])
        x_priv, y_priv = x_priv[keep], y_priv[keep]
    if cfg.get("n_test"):
        x_te, y_te = x_te[: int(cfg["n_test"])], y_te[: int(cfg["n_test"])]
    radius = float(cfg.get("whiten_radius") or 0.0)
    if radius:
        phi = public_whitening(split.x_public, int(cfg.get("pca_dim") or 0), radius)
        x_priv, x_pub, x_te = phi(x_priv), phi(split.x_public), phi(x_te)
    else:
        proj = _projection(split.x_public, int(cfg.get("pca_dim") or 0))
        if proj is not None:
            x_priv, x_pub, x_te = x_priv @ proj, split.x_public @ proj, x_te @ proj
        else:
            x_pub = split.x_public
    n_feat = int(cfg.get("random_features") or 0)
    if n_feat:
        weights = random_relu_weights(x_priv.shape[1], n_feat, float(cfg["feature_scale"]),
                                      int(cfg["feature_seed"]))
        x_priv, x_pub, x_te = (random_relu_features(a, weights) for a in (x_priv, x_pub, x_te))
    return {"x_priv": x_priv, "y_priv": y_priv, "x_pub": x_pub, "y_pub": split.y_public,
            "x_test": x_te, "y_test": y_te, "n_public": len(split.y_public),
            "nominal_private_size": int(cfg.get("n_train") or len(y_tr) - len(split.y_public))}


def random_relu_weights(dim: int, n_features: int, scale: float, seed: int) -> np.ndarray:
    """Data-independent weights ``W`` of shape ``(dim, n_features)``, entries N(0, scale^2).

    Drawn from ``numpy.random.default_rng(seed)`` alone: no record is read, so the feature map
    is public and costs no privacy.

    Parameters
    ----------
    dim : int
        The input dimension.
    n_features : int
        The number of features.
    scale : float
        The entries' standard deviation.
    seed : int
        The generator's seed.

    Returns
    -------
    ndarray, shape ``(dim, n_features)``
    """
    if not (isinstance(n_features, (int, np.integer)) and n_features >= 1):
        raise ValueError(f"argument 'random_features' must be an int >= 1, got {n_features!r}")
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"argument 'feature_scale' must be a finite float > 0, got {scale!r}")
    return scale * np.random.default_rng(seed).standard_normal((dim, n_features))


def random_relu_features(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``relu(x W) / ||relu(x W)||`` row by row, shape ``(n, n_features)``.

    Random ReLU features (Rahimi and Recht 2008's random-feature idea with the ReLU), each row
    rescaled to unit norm so that the public feature bound ``||phi(x)|| <= 1`` of the clipped
    gradients still holds (a row whose features are all zero stays zero).

    Parameters
    ----------
    x : ndarray, shape ``(n, dim)``
        The records.
    weights : ndarray, shape ``(dim, n_features)``
        From :func:`random_relu_weights`.

    Returns
    -------
    ndarray, shape ``(n, n_features)``
    """
    h = np.maximum(x @ weights, 0.0)
    norm = np.linalg.norm(h, axis=1, keepdims=True)
    return h / np.where(norm > 0, norm, 1.0)


def _noise_multiplier(alg: Any, problem, x0: np.ndarray) -> float:
    """The multiplier the budget-first calibration gives ``alg`` on ``problem`` (public facts:
    sizes, rounds, batch; no record is read)."""
    state = alg.init(problem, x0, np.random.default_rng(0))
    return float(state.ledger.noise_multiplier)


# ---------------------------------------------------------------------- plotting helpers
def _epsilon_axis_label(rows: list[dict], relation: Callable[[dict], str]) -> str:
    """The epsilon axis label naming the relation and delta of the certified rows.

    Parameters
    ----------
    rows : list of dict
        The plotted rows (``epsilon_certified``, ``delta`` and what ``relation`` reads).
    relation : callable
        ``relation(row) -> str``: the neighbouring relation of a row, as the reader says it.

    Returns
    -------
    str
        ``"certified epsilon, replace-one, delta = 1e-05 (whole run)"``, one relation-and-delta
        part per distinct pair, joined by ``"; "``.
    """
    pairs = dict.fromkeys((relation(r), float(r["delta"])) for r in rows
                          if r.get("epsilon_certified") is not None)
    named = "; ".join(f"{rel}, delta = {d:g}" for rel, d in pairs)
    return f"certified epsilon, {named} (whole run)" if named else "certified epsilon (whole run)"


def _privacy_utility_plot(ctx: RunContext, rows: list[dict], panels: list[str], key: str,
                          ylabel: str, title: str, name: str, refs: dict[str, dict],
                          relation: Callable[[dict], str], logy: bool = False) -> None:
    """Utility against certified epsilon, one curve per algorithm (mean and min-max band);
    ``relation(row)`` names a row's neighbouring relation on the epsilon axis."""
    fig, axes = new_figure(len(panels))
    for ax, panel in zip(axes, panels, strict=True):
        sub = [r for r in rows if r["panel"] == panel]
        for alg in dict.fromkeys(r["algorithm"] for r in sub):
            pts = sorted((r for r in sub if r["algorithm"] == alg),
                         key=lambda r: r["epsilon_certified"])
            e = np.array([r["epsilon_certified"] for r in pts])
            m = np.array([r[f"{key}_mean"] for r in pts])
            lo = np.array([r[f"{key}_min"] for r in pts])
            hi = np.array([r[f"{key}_max"] for r in pts])
            line, = ax.plot(e, m, "o-", label=alg)
            ax.fill_between(e, lo, hi, color=line.get_color(), alpha=0.2)
        # several non-private references in one panel are told apart by their dash pattern
        dashes = itertools.cycle(("--", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)),
                                  (0, (3, 1, 1, 1)), (0, (8, 2))))
        ticks = sorted({float(r["target_epsilon"]) for r in sub})
        # one budget: the y axis spans the private points and the non-private references
        # (a start far below is named in the legend with its value instead of squashing them)
        zoom = None
        if len(ticks) == 1 and sub and not logy:
            near = [r[f"{key}_min"] for r in sub] + [r[f"{key}_max"] for r in sub] + [
                v for lab, v in refs.get(panel, {}).items() if "non-private" in lab]
            span = max(near) - min(near)
            zoom = (min(near) - max(0.5, 0.5 * span), max(near) + max(0.5, 0.3 * span))
        for lab, ref in refs.get(panel, {}).items():
            nonprivate = "non-private" in lab
            if zoom is not None and not zoom[0] <= ref <= zoom[1]:
                lab = f"{lab}: {ref:.4g} (off the axis)"
            ax.axhline(ref, ls=next(dashes) if nonprivate else ":",
                       color="k" if nonprivate else "grey", lw=1, label=lab)
        ax.set_xscale("log")
        if zoom is not None:
            ax.set_ylim(*zoom)
            ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(_epsilon_axis_label(sub, relation))
        ax.set_ylabel(ylabel)
        ax.set_title(panel)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    ctx.save_figure(fig, name)


def _summarise(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()),
            "max": float(v.max())}


# ---------------------------------------------------------------------- classification
#: Publicly tuned hyperparameter grids of the trainers (the search starts in their middle).
#: The setting holding each trainer's grid of effective steps ``lr * clip``.
_STEP_KEYS = {"DP-DPSGD": "steps_dpdpsgd", "DPDL": "steps_dpdl", "DO-ADP": "steps_doadp",
              "noisy DSGD": "steps_dsgd", CENTRALIZED: "steps_dpsgd"}
_RELATIONS = {"replace_one": "replace-one", "add_remove_one": "add/remove"}


def _classify_data(cfg: dict, ctx: RunContext) -> dict:
    """The features of ``cfg['features']``: ``'scattering'`` (GroupNorm'd scattering
    coefficients, bound ``sqrt(D)``) or ``'pixels'`` (the unit-normalised images through the
    public whitening of :func:`_fmnist`, bound 1)."""
    if cfg["features"] == "scattering":
        return scattering_data(cfg, ctx.rng(900), progress=ctx.progress)
    if cfg["features"] == "pixels":
        data = _fmnist(cfg, ctx.rng(900))
        data["feature_bound"] = 1.0
        return data
    raise ValueError(f"setting 'features' must be 'scattering' or 'pixels', got "
                     f"{cfg['features']!r}")


def _grids(cfg: dict, name: str, dims: list[int]) -> dict[str, list]:
    """The public search grids of trainer ``name`` (axis order = search order).

    The step axis is the effective step ``lr * clip``: the noise is proportional to the clip,
    so at a fixed effective step the clip only sets which gradients are shortened (every one
    as it tends to 0), and the step and the clip are not two independent axes (the trainer's
    learning rate is ``step / clip``, :func:`rfed.experiments._classify.make_trainer`)."""
    # the public warm start's L2 strength is searched first: the step, clip and epochs that
    # suit a start near a good model differ from those of the zero start
    warm = ({"warm_start_l2": [float(v) for v in cfg["warm_start_l2s"]]}
            if cfg.get("public_warm_start", False) else {})
    return {**warm, "step": [float(v) for v in cfg[_STEP_KEYS[name]]],
            "clip": [float(v) for v in cfg["clips"]],
            "batch_fraction": [float(v) for v in cfg["batch_fractions"]],
            "epochs": [float(v) for v in cfg["epochs_grid"]],
            "momentum": [float(v) for v in cfg["momenta"]],
            "dim": dims,
            "tail_average": [float(v) for v in cfg["tail_averages"]],
            "ema_decay": [float(v) for v in cfg["ema_decays"]], **_mix_grid(cfg)}


def _mix_grid(cfg: dict) -> dict[str, list[float]]:
    """The ``warm_start_mix`` axis (searched last: a post-processing of the run's output), only
    when ``warm_start_mixes`` is other than ``[1.0]`` (the default: no axis, no column)."""
    mixes = [float(v) for v in cfg.get("warm_start_mixes", [1.0])]
    return {} if mixes == [1.0] else {"warm_start_mix": mixes}


def _hp_text(hp: dict) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in hp.items())


def _budget(eps: float, delta: float, relation: str, declared: np.ndarray) -> PrivacyBudget:
    """The budget of a run under ``relation``; under add/remove with the declared public local
    sizes ``declared`` (never the true ones)."""
    if relation == "add_remove_one":
        return PrivacyBudget(float(eps), delta, neighboring=relation,
                             public_sizes=tuple(int(v) for v in declared))
    return PrivacyBudget(float(eps), delta, neighboring=relation)


def _folds_score(proxies: list[PublicProxy]) -> Callable[[dict], tuple[float, dict]]:
    """The public score averaged over the folds (NaN if any fold's run diverged); the plan is
    the first fold's (every fold has the same private plan)."""
    if len(proxies) == 1:
        return proxies[0].score

    def score(hp: dict) -> tuple[float, dict]:
        scored = [p.score(hp) for p in proxies]
        return float(np.mean([s for s, _ in scored])), scored[0][1]
    return score


def _check_public_folds(cfg: dict) -> tuple[int, int]:
    """The settings ``public_split_parts``, ``tune_folds`` and ``warm_start_alone`` checked
    (before any data is read); returns the parts and the folds."""
    parts = cfg["public_split_parts"]
    check_setting(cfg, "public_split_parts", parts in (2, 3) and not isinstance(parts, bool),
                  "2 (halves) or 3 (thirds: warm start, training, validation)")
    check_setting(cfg, "warm_start_alone", isinstance(cfg["warm_start_alone"], bool),
                  "true or false")
    if parts == 3 and not cfg.get("public_warm_start", False):
        raise ValueError("setting 'public_split_parts' = 3 fits the warm start to one third: "
                         "it needs public_warm_start = true")
    if cfg["warm_start_alone"] and not cfg.get("public_warm_start", False):
        raise ValueError("setting 'warm_start_alone' scores the public warm start alone: it "
                         "needs public_warm_start = true")
    folds = cfg["tune_folds"]
    if folds not in range(1, parts + 1) or isinstance(folds, bool):
        raise ValueError(f"setting 'tune_folds' must be 1 (train on the first public part, "
                         f"score on the next) to {parts} (every rotation of the "
                         f"{parts} parts), got {cfg['tune_folds']!r}")
    return int(parts), int(folds)


def _public_folds(cfg: dict, n_public: int, n_declared: int
                  ) -> tuple[int, list[tuple[slice | None, slice, slice]], str]:
    """The public tuning folds: how many, each fold's (warm-start part, training part,
    validation part) of the public split, and the ``chosen_on`` text of the tuning table.

    ``public_split_parts = 2``: halves; fold 0 trains on the first and scores on the second,
    fold 1 the other way round; the warm start (if any) is fitted to the training half.
    ``public_split_parts = 3``: thirds; fold ``f`` fits the warm start to third ``f``, trains
    on third ``f + 1`` and scores on third ``f + 2`` (mod 3), so that the public run, like a
    private run, trains on records its start has not seen.
    """
    parts, folds = _check_public_folds(cfg)
    cut = [i * n_public // parts for i in range(parts + 1)]
    pieces = [slice(cut[i], cut[i + 1]) for i in range(parts)]
    if parts == 2:
        roles: list[tuple[slice | None, slice, slice]] = [(None, pieces[0], pieces[1]),
                                                          (None, pieces[1], pieces[0])]
        text = (f"public split ({n_declared} images): {cut[1]} train / {n_public - cut[1]} "
                f"validation" + (", both ways (2 folds)" if folds == 2 else ""))
    else:
        roles = [(pieces[f], pieces[(f + 1) % 3], pieces[(f + 2) % 3]) for f in range(3)]
        text = (f"public split ({n_declared} images) in thirds: warm start / train / "
                f"validation ({cut[1]}, {cut[2] - cut[1]}, {n_public - cut[2]})"
                + (f", {folds} rotations ({folds} folds)" if folds > 1 else ""))
    return int(folds), roles, text


def public_search(proxies: list[PublicProxy], grids: dict[str, list], sweeps: int,
                  warm_start_alone: bool) -> dict[str, Any]:
    """The public search of one trainer: the coordinate search of its private configurations
    over ``grids`` (scores averaged over the folds' ``proxies``) and, with
    ``warm_start_alone``, the warm start alone (no private phase) as one more candidate.

    The warm start alone is scored on each fold's validation part at every warm-start L2
    strength and feature dimension of the grids (averaged over the folds). It is preferred
    only if its best score is strictly above the best private configuration's (a tie keeps
    the private phase, as a tie keeps the current value in the search).

    Parameters
    ----------
    proxies : list of PublicProxy
        One per fold.
    grids : dict of str to list
        The search grids (:func:`_grids`); with ``warm_start_alone`` they hold
        ``warm_start_l2`` and ``dim``.
    sweeps : int
        Passes of :func:`rfed.experiments._classify.coordinate_search`.
    warm_start_alone : bool
        Score the warm start alone as a candidate.

    Returns
    -------
    dict
        ``best`` (the best private configuration), ``rows`` (every private configuration
        scored), ``best_score``, ``alone_rows`` (the warm start alone at each L2 strength and
        dimension: ``warm_start_l2``, ``dim``, ``public_score``; empty without
        ``warm_start_alone``), ``alone_best`` (the best of them or None) and
        ``prefers_warm_start_alone``.
    """
    best, rows = coordinate_search(_folds_score(proxies), grids, sweeps)
    best_score = next(r["public_score"] for r in rows if all(r[k] == best[k] for k in grids))
    alone_rows = []
    if warm_start_alone:
        for l2 in grids["warm_start_l2"]:
            for dim in grids["dim"]:
                hp = {"warm_start_l2": l2, "dim": dim}
                alone_rows.append({**hp, "public_score": float(np.mean(
                    [p.warm_start_score(hp) for p in proxies]))})
    alone_best = max(alone_rows, key=lambda r: r["public_score"], default=None)
    prefers = alone_best is not None and (
        not math.isfinite(best_score) or alone_best["public_score"] > best_score)
    return {"best": best, "rows": rows, "best_score": best_score, "alone_rows": alone_rows,
            "alone_best": alone_best, "prefers_warm_start_alone": bool(prefers)}


def declared_sizes(nominal_total: int, n_agents: int) -> np.ndarray:
    """Public nominal local sizes: ``nominal_total`` split as evenly as possible.

    Parameters
    ----------
    nominal_total : int
        The public total number of records.
    n_agents : int
        The number of agents.

    Returns
    -------
    ndarray of int, shape ``(n_agents,)``
    """
    base, extra = divmod(int(nominal_total), int(n_agents))
    return np.array([base + (1 if i < extra else 0) for i in range(int(n_agents))])


def planning_sizes(relation: str | None, counts: np.ndarray, declared: np.ndarray
                   ) -> np.ndarray:
    """The local sizes a run's batch and rounds are computed from.

    Under add/remove the true local sizes are private (one record more or less changes
    them), so a batch or a round count read from them would release a function of private
    data that no accountant charges: the declared public sizes are used. Under replace-one
    the true sizes are public, and a non-private run (``relation=None``) spends nothing.

    Parameters
    ----------
    relation : {'replace_one', 'add_remove_one'} or None
        The run's neighbouring relation; None for a non-private run.
    counts : int array, shape ``(n_agents,)``
        The true local sizes.
    declared : int array, shape ``(n_agents,)``
        The declared public local sizes (:func:`declared_sizes`).

    Returns
    -------
    int array, shape ``(n_agents,)``
    """
    if relation not in (None, "replace_one", "add_remove_one"):
        raise ValueError(f"setting 'relations' holds 'replace_one' or 'add_remove_one', got "
                         f"{relation!r}")
    return np.asarray(declared if relation == "add_remove_one" else counts)


def _supports(name: str, relation: str, counts: np.ndarray, declared: np.ndarray,
              cfg: dict) -> str | None:
    """Why trainer ``name`` cannot run under ``relation`` (None: it can), asked of the trainer
    itself: its constructor and calibration refuse what they cannot account, and the relation
    its account certifies must be the one asked."""
    hp = {"step": 1.0, "clip": 1.0, "momentum": 0.0}
    # the probe samples whole local data sets in one round: the same refusals as any batch,
    # and a calibration that is cheap (a small batch at one round asks the PLD for a tiny
    # noise multiplier, whose discretisation is slow)
    batch = int(min(counts.min(), declared.min()))
    try:
        alg = make_trainer(name, hp, batch, {"budget": _budget(1.0, 1e-5, relation, declared),
                                             "n_rounds": 1}, len(counts), cfg)
        problem = sizes_problem(counts)
        state = alg.init(problem, np.zeros(problem.n_params), np.random.default_rng(0))
    except ValueError as exc:
        return str(exc)
    accounted = getattr(state.ledger, "neighboring", relation)
    if accounted != relation:
        return f"{name} certifies {accounted} only"
    return None


@register(
    "utility-fmnist-classify",
    paper="DO-ADP, DPDL: certified-budget companion; Tramer and Boneh features",
    summary="Fashion-MNIST on scattering features: decentralized vs centralized DP-SGD",
    requires=("fashion-mnist",),
    description=(
        "Multinomial logistic regression on Fashion-MNIST (needs the real files: apt-get "
        "install dataset-fashion-mnist) through public features: the scattering transform "
        "(J = 2, L = 8: 81 x 7 x 7 = 3,969 coefficients per image, computed once and cached "
        "on disk with a checksum) with a per-image GroupNorm of 'groups' groups (Tramer and "
        "Boneh 2021's ScatterNet features; per-record maps, so they cost no privacy), "
        "optionally projected on the top 'dim' principal directions of the declared public "
        "split. features = 'pixels' gives the earlier pipeline (unit-normalised pixels, public "
        "PCA whitened to pca_dim, whiten_radius). 90 % of the training images are private and "
        "split among n_agents = 10 agents (IID and Dirichlet(0.25)) on a circulant graph of "
        "degree graph_degree; the decentralized trainers (DP-DPSGD, DPDL; DO-ADP and noisy "
        "DSGD on request) add their noise locally, with no trusted aggregator (DP-DPSGD and "
        "DPDL on Poisson minibatches, decentralized_sampling, certified by PLD); centralized "
        "DP-SGD on the pooled private data (Poisson batches of n_agents x the local batch) is "
        "the companion a trusted curator could run. Every private run is budget-first at each "
        "certified epsilon (record level; relations: replace-one, rfed's default, and "
        "add/remove where the trainer accounts it), delta = min(1e-5, 1/(10 N)). Test accuracy "
        "on the 10,000 test images, beside the non-private L-BFGS solution (at most "
        "reference_maxiter iterations on the pooled private data), each trainer's "
        "non-private run (nonprivate_runs) and the zero start. Hyperparameters (effective "
        "step lr x clip, clip, batch fraction of the smallest local data set, epochs, "
        "momentum, feature dimension, tail averaging and its exponential decay ema_decays) are "
        "chosen per trainer on the PUBLIC split only (10 % of the training images: one half "
        "trained on by the same number of agents, the other half scores; tune_folds = 2 also "
        "the other way round, averaging the two scores), at the private run's "
        "noise at eps_tune (same rounds, same noise std on the averaged clipped gradient), by "
        "coordinate search over the grids (the 'tuning' table lists every configuration and "
        "flags a choice at a grid's edge); never on the private data or the test images. "
        "public_warm_start = true starts every run from the softmax regression fitted "
        "non-privately (L-BFGS, reference_maxiter iterations) to the LABELLED public split "
        "(disjoint from the private records and the test images, so it costs no privacy) "
        "instead of the zero model, its L2 strength searched on the public split over "
        "warm_start_l2s (each public fold starts from the fit to its own training half). "
        "public_split_parts = 3 cuts the public split in thirds instead (the warm start "
        "fitted to one, the public run trained on the next, scored on the last; tune_folds "
        "up to 3 rotations), so that the public run trains on records its start has not "
        "seen, as the private run does; warm_start_alone = true also scores the warm start "
        "alone (no private phase, at every warm_start_l2s and dims) on the same validation "
        "parts, and the tuning table chooses it when it beats every private configuration: "
        "the public search then reports that private training at this budget does not "
        "improve on the public start (summary.json: public_choice; the private runs are "
        "still made, at the best private configuration, for the table). warm_start_mixes "
        "(with public_warm_start; default [1.0], no axis) is one more axis of the public "
        "search, searched last: the output is moved back toward the public start, x0 + mix "
        "(x - x0) (the weight-space interpolation of WiSE-FT, Wortsman et al. 2022; "
        "post-processing of the "
        "released output and the public start, so it costs no privacy), shrinking the noise "
        "the private phase adds to its start."
    ),
    defaults={
        "data_path": "", "features": "scattering", "n_agents": 10,
        "partitions": ["iid", "dirichlet"], "dirichlet_alpha": 0.25,
        "epsilons": [1.0, 3.0, 8.0], "repetitions": 2, "relations": ["replace_one"],
        "public_fraction": 0.1, "n_train": 0, "n_test": 0,
        "scatter_J": 2, "scatter_L": 8, "groups": 27, "cache_dir": "",
        "graph_degree": 2, "doadp_gamma": 0.5, "decentralized_sampling": "poisson",
        "algorithms": ["DP-DPSGD", CENTRALIZED],
        # the grids of the documented runs (docs/guide/features-and-utility.md), wide enough
        # that every choice they made is interior or the end of its domain
        "steps_dpdpsgd": [0.8, 1.6, 3.2, 6.4, 12.8], "steps_dpdl": [1.6, 3.2, 6.4],
        "steps_doadp": [0.05, 0.1, 0.2, 0.4], "steps_dsgd": [0.05, 0.1, 0.2, 0.4, 0.8],
        "steps_dpsgd": [0.8, 1.6, 3.2, 6.4, 12.8],
        "clips": [0.05, 0.2, 0.8, 3.2], "batch_fractions": [0.125, 0.25, 0.5, 1.0],
        "epochs_grid": [20.0, 40.0, 80.0, 160.0], "momenta": [0.0, 0.5, 0.75, 0.9],
        "dims": [0], "tail_averages": [0.0, 0.25, 0.5, 0.75], "ema_decays": [0.0],
        "tune_folds": 1, "public_split_parts": 2, "warm_start_alone": False,
        "public_warm_start": False,
        "warm_start_l2s": [0.003, 0.01, 0.03, 0.1], "warm_start_mixes": [1.0],
        "tune_sweeps": 2, "tune_repetitions": 2, "eps_tune": 3.0,
        "reference_maxiter": 100, "nonprivate_runs": True,
        "target_epsilon": 3.0, "target_accuracy": 87.0, "centralized_target_accuracy": 88.5,
        "target_accuracy_add_remove": 88.7, "centralized_target_accuracy_add_remove": 89.5,
        "pca_dim": 64, "whiten_radius": 1.28, "random_features": 0, "feature_scale": 4.0,
        "feature_seed": 12345,
        "eps_comm": 3.0,
        "comm_configs": [[1.0, 1.0], [0.8, 1.0], [1.0, 0.3], [0.8, 0.3], [1.0, 0.1]],
    },
)
def utility_fmnist_classify(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-fmnist-classify``: Fashion-MNIST on scattering features,
    decentralized against centralized DP-SGD.

    A certified-budget companion of DO-ADP and DPDL (features after Tramer and Boneh). See
    ``docs/guide/features-and-utility.md`` and ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-fmnist-classify`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    cfg = dict(config)
    n = int(cfg["n_agents"])
    if n < 2:
        raise ValueError(f"setting 'n_agents' must be an int >= 2, got {n!r}")
    unknown = set(cfg["algorithms"]) - set(_STEP_KEYS)
    if unknown:
        raise ValueError(f"setting 'algorithms': unknown {sorted(unknown)}; choose from "
                         f"{sorted(_STEP_KEYS)}")
    bad = set(cfg["relations"]) - set(_RELATIONS)
    if bad:
        raise ValueError(f"setting 'relations' holds 'replace_one' or 'add_remove_one', got "
                         f"{sorted(bad)}")
    check_setting(cfg, "public_warm_start", isinstance(cfg["public_warm_start"], bool),
                  "true or false")
    l2s = cfg["warm_start_l2s"]
    check_setting(cfg, "warm_start_l2s", isinstance(l2s, list) and len(l2s) > 0 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        and v >= 0 for v in l2s), "a non-empty list of L2 strengths >= 0")
    mixes = cfg["warm_start_mixes"]
    check_setting(cfg, "warm_start_mixes", isinstance(mixes, list) and len(mixes) > 0 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        and 0 < v <= 1 for v in mixes), "a non-empty list of fractions in (0, 1]")
    if [float(v) for v in mixes] != [1.0] and not cfg["public_warm_start"]:
        raise ValueError("setting 'warm_start_mixes' moves the output toward the public warm "
                         "start: it needs public_warm_start = true")
    _check_public_folds(cfg)
    data = _classify_data(cfg, ctx)
    bound = float(data["feature_bound"])
    n_feat = int(data["x_priv"].shape[1])
    dims = (sorted({n_feat if int(d) <= 0 else min(int(d), n_feat) for d in cfg["dims"]})
            if cfg["features"] == "scattering" else [n_feat])
    proj = Projections(data["x_pub"], dims)
    xt, yt = data["x_test"], data["y_test"]
    eps_list = sorted(float(e) for e in cfg["epsilons"])
    reps = int(cfg["repetitions"])
    # the private split among the agents: the partition reads labels and the seed only
    parts = {kind: partition(data["y_priv"], n, kind, float(cfg["dirichlet_alpha"]),
                             ctx.rng(910 + k))
             for k, kind in enumerate(cfg["partitions"])}
    counts = {kind: np.array([len(p) for p in ps]) for kind, ps in parts.items()}
    relations = list(dict.fromkeys(cfg["relations"]))
    # under add/remove the true sizes are private: every agent declares the nominal public
    # size (the benchmark's private image count split evenly, whatever the partition)
    declared = declared_sizes(data["nominal_private_size"], n)
    q_min = min(int(c.min()) for c in counts.values())
    # min(1e-5, 1 / (10 N)) of the sizes each relation may read
    delta_of = {"replace_one": certified_delta(q_min),
                "add_remove_one": certified_delta(int(declared.min()))}
    delta = delta_of[relations[0]]
    # --- hyperparameters on the public split, at the noise of the first partition's private
    # run at eps_tune under the first relation
    tune_kind = cfg["partitions"][0]
    tuning, chosen, public_choice = [], {}, {}
    folds, roles, chosen_on = _public_folds(cfg, len(data["y_pub"]), data["n_public"])
    alone = bool(cfg["warm_start_alone"])
    for mi, name in enumerate(cfg["algorithms"]):
        # fold f warm-starts on roles[f][0] (None: its training part), trains on roles[f][1]
        # and scores on roles[f][2]
        proxies = [PublicProxy(
            name, data["x_pub"][train], data["y_pub"][train],
            data["x_pub"][val], data["y_pub"][val],
            planning_sizes(relations[0], counts[tune_kind], declared), n,
            cfg, proj, bound, _budget(cfg["eps_tune"], delta, relations[0], declared),
            int(cfg["tune_repetitions"]),
            lambda *s, mi=mi, f=f: ctx.rng(920 + f, mi, *s),
            warm_x=None if warm is None else data["x_pub"][warm],
            warm_y=None if warm is None else data["y_pub"][warm])
            for f, (warm, train, val) in enumerate(roles[:folds])]
        grids = _grids(cfg, name, dims)
        search = public_search(proxies, grids, int(cfg["tune_sweeps"]), alone)
        best, rows, best_score = search["best"], search["rows"], search["best_score"]
        alone_rows, alone_best = search["alone_rows"], search["alone_best"]
        prefers_alone = search["prefers_warm_start_alone"]
        edges = at_grid_edge(best, grids, {"dim": (n_feat,)})
        chosen[name] = best
        public_choice[name] = {
            "private_phase": not prefers_alone,
            "public_score_with_private_phase": best_score,
            **({"public_score_warm_start_alone": alone_best["public_score"],
                "warm_start_alone": _hp_text({k: alone_best[k] for k in ("warm_start_l2",
                                                                         "dim")})}
               if alone_best is not None else {})}
        phase = {"private_phase": True} if alone else {}
        for row in rows:
            is_best = all(row[k] == best[k] for k in grids) and not prefers_alone
            tuning.append({"algorithm": name, **phase, **{k: row[k] for k in grids},
                           "public_validation_accuracy": row["public_score"],
                           "rounds": row["rounds"], "local_batch": row["batch"],
                           "noise_multiplier": row["noise_multiplier"],
                           "public_batch": row["public_batch"],
                           "public_noise_multiplier": row["public_noise_multiplier"],
                           "eps_tune": cfg["eps_tune"], "relation": relations[0],
                           "chosen": is_best,
                           "at_grid_edge": ", ".join(edges) if is_best else "",
                           "chosen_on": chosen_on})
        for row in alone_rows:
            tuning.append({"algorithm": name, "private_phase": False,
                           "warm_start_l2": row["warm_start_l2"], "dim": row["dim"],
                           "public_validation_accuracy": row["public_score"],
                           "eps_tune": cfg["eps_tune"], "relation": relations[0],
                           "chosen": prefers_alone and row is alone_best,
                           "at_grid_edge": "", "chosen_on": chosen_on})
        ctx.log(setting=f"tuning {name}", algorithm=name, chosen=_hp_text(best),
                at_grid_edge=", ".join(edges),
                public_choice=("the warm start alone (no private phase)" if prefers_alone
                               else "the private phase"))
    ctx.save_table("tuning", tuning)
    # --- the sweep: per partition, per feature dimension in use, per trainer
    rows = []
    reference_rows: list[dict[str, Any]] = []
    refs: dict[str, dict[str, float]] = {}
    x0_of: dict[tuple[int, float], np.ndarray] = {}
    for k, kind in enumerate(cfg["partitions"]):
        refs[kind] = {}
        for dim in sorted({int(chosen[name]["dim"]) for name in cfg["algorithms"]}):
            problem = softmax_problem(proj.apply(data["x_priv"], dim), data["y_priv"],
                                      parts[kind], 10, bound)
            problem.reference_maxiter = int(cfg["reference_maxiter"])
            xt_d = proj.apply(xt, dim)
            opt = 100.0 * problem.accuracy(problem.reference_point(), xt_d, yt)
            start = 100.0 * problem.accuracy(np.zeros(problem.n_params), xt_d, yt)
            refs[kind][f"non-private L-BFGS, dim {dim}"] = opt
            refs[kind]["zero start (chance)"] = start
            # the public warm starts in use at this dimension (a fit to the public split only)
            warm = {}
            for name in cfg["algorithms"]:
                hp = chosen[name]
                if int(hp["dim"]) == dim and cfg["public_warm_start"]:
                    l2 = float(hp["warm_start_l2"])
                    if (dim, l2) not in x0_of:
                        x0_of[dim, l2] = start_point(data, proj, dim, hp, cfg)
                    warm[l2] = 100.0 * problem.accuracy(x0_of[dim, l2], xt_d, yt)
                    refs[kind][f"public warm start, dim {dim}, l2 {l2:g}"] = warm[l2]
            # with the warm start off, the table keeps the columns it always had
            warm_cols = ({"public_warm_start_test_accuracy": max(warm.values()),
                          "public_warm_start_l2": ", ".join(f"{v:g}" for v in warm)}
                         if warm else {})
            reference_rows.append({"partition": kind, "dim": dim,
                                   "nonprivate_optimum_test_accuracy": opt,
                                   "zero_start_test_accuracy": start, **warm_cols,
                                   "min_local_size": int(problem.counts.min()),
                                   "max_local_size": int(problem.counts.max()), "delta": delta})
            for mi, name in enumerate(cfg["algorithms"]):
                hp = chosen[name]
                if int(hp["dim"]) != dim:
                    continue
                # each relation's batch and rounds from the sizes it may read
                plans = {rel: batch_and_rounds(hp, planning_sizes(rel, problem.counts, declared),
                                               n)
                         for rel in [None, *relations]}
                x0 = (x0_of[dim, float(hp["warm_start_l2"])] if cfg["public_warm_start"]
                      else np.zeros(problem.n_params))
                settings = ([(None, None)] if cfg["nonprivate_runs"] else []) + [
                    (rel, eps) for rel in relations for eps in eps_list]
                refusals = {rel: _supports(name, rel,
                                           planning_sizes(rel, problem.counts, declared),
                                           declared, cfg)
                            for rel in relations}
                for si, (rel, eps) in enumerate(settings):
                    batch, rounds = plans[rel]
                    if rel is not None:
                        why = refusals[rel]
                        if why is not None:
                            rows.append({"panel": kind, "partition": kind, "algorithm": name,
                                         "relation": rel, "target_epsilon": eps,
                                         "epsilon_certified": None, "refused": why})
                            continue
                    noise = ({} if rel is None or eps is None else
                             {"budget": _budget(eps, delta_of[rel], rel, declared),
                              "n_rounds": rounds})
                    accs, reports, diverged = [], [], 0
                    for rep in range(1 if rel is None else reps):
                        alg = tail_averaged(make_trainer(name, hp, batch, noise, n, cfg),
                                            rounds, hp["tail_average"], hp["ema_decay"])
                        res = alg.run(problem, rounds, rng=ctx.rng(k, mi, si, rep), x0=x0,
                                      eval_every=rounds, with_reference=False)
                        if res.diverged:
                            diverged += 1
                            continue
                        x_out = mix_toward_start(res.x, x0, float(hp.get("warm_start_mix",
                                                                          1.0)))
                        acc = 100.0 * problem.accuracy(x_out, xt_d, yt)
                        accs.append(acc)
                        reports.append(res.privacy)
                        ctx.log(setting=f"{kind} {name} {rel} eps={eps}", partition=kind,
                                algorithm=name, relation=rel, repetition=rep, round=rounds,
                                test_accuracy=acc, epsilon_target=eps)
                    label = (f"{kind} {name} non-private" if rel is None else
                             f"{kind} {name} {_RELATIONS[rel]} certified eps={eps:g}")
                    if reports and certifies(reports[0]):
                        ctx.set_privacy(label, reports[0])
                    stats = _summarise(accs) if accs else dict.fromkeys(
                        ("mean", "std", "min", "max"), float("nan"))
                    eps_cert = (max(r["epsilon_certified"] for r in reports)
                                if reports and certifies(reports[0]) else None)
                    rows.append({
                        "panel": kind, "partition": kind, "algorithm": name, "relation": rel,
                        "hyperparameters": _hp_text(hp), "local_batch": batch,
                        "rounds": rounds, "target_epsilon": eps, "epsilon_certified": eps_cert,
                        "delta": delta_of[rel] if rel is not None else None,
                        "noise_multiplier": (reports[0]["noise_multiplier"]
                                             if eps_cert is not None else 0.0),
                        "accuracy_mean": stats["mean"], "accuracy_std": stats["std"],
                        "accuracy_min": stats["min"], "accuracy_max": stats["max"],
                        "repetitions": len(accs), "diverged": diverged, "refused": ""})
                    if rel is None:
                        refs[kind][f"non-private {name}"] = stats["mean"]
            del problem
    ctx.save_table("privacy_utility", rows)
    ctx.save_table("references", reference_rows)
    private = [dict(r, algorithm=f"{r['algorithm']} ({_RELATIONS[r['relation']]})")
               for r in rows if r.get("epsilon_certified") is not None]
    feats = (f"scattering J={cfg['scatter_J']} + GroupNorm({cfg['groups']})"
             if cfg["features"] == "scattering" else f"pixels, whitened pca_dim={cfg['pca_dim']}")
    _privacy_utility_plot(
        ctx, private, list(cfg["partitions"]), "accuracy", "test accuracy (%)",
        f"Fashion-MNIST softmax regression on {feats}, {n} agents, delta={delta:g}",
        "privacy_utility", {kind: {lab: v for lab, v in r.items()
                                   if "non-private" in lab or "zero" in lab
                                   or "warm start" in lab}
                            for kind, r in refs.items()},
        relation=lambda r: _RELATIONS[r["relation"]])
    comm_rows = _doadp_communication(cfg, ctx, chosen, data, proj, parts, bound, delta) \
        if "DO-ADP" in cfg["algorithms"] else []
    ctx.summary_table([summary_row(
        f"{r['partition']} {r['algorithm']} {_RELATIONS[r['relation']]} "
        f"target eps={r['target_epsilon']:g}",
        utility_name="test accuracy (%)", utility=r["accuracy_mean"],
        utility_std=r["accuracy_std"],
        reference=max(v for lab, v in refs[r["partition"]].items() if "L-BFGS" in lab),
        reference_name="non-private optimum", epsilon=r["epsilon_certified"], delta=r["delta"],
        accountant=f"dp-accounting, record-level; relation: {_RELATIONS[r['relation']]}",
        repetitions=r["repetitions"], diverged=r["diverged"]) for r in rows
        if r.get("epsilon_certified") is not None])
    targets = _classify_targets(cfg, rows)
    return {"delta": delta, "delta_by_relation": {r: delta_of[r] for r in relations},
            "declared_public_sizes": declared.tolist(),
            "hyperparameters": {k: _hp_text(v) for k, v in chosen.items()},
            "public_choice": public_choice,
            "references": reference_rows, "privacy_utility": rows, "communication": comm_rows,
            "targets": targets, "target": targets.get("decentralized replace_one")}


def _classify_targets(cfg: dict, rows: list[dict]) -> dict:
    """The must-show numbers at ``target_epsilon`` on the first partition: the best
    decentralized trainer and the centralized companion, per relation, against their
    targets (``target_accuracy``, ``centralized_target_accuracy`` and their ``_add_remove``
    versions)."""
    out = {}
    kind = cfg["partitions"][0]
    at = [r for r in rows if r.get("epsilon_certified") is not None and r["partition"] == kind
          and abs(r["target_epsilon"] - float(cfg["target_epsilon"])) < 1e-12]
    for rel in dict.fromkeys(r["relation"] for r in at):
        suffix = "" if rel == "replace_one" else "_add_remove"
        for who, pick, goal in (("decentralized", lambda a: a != CENTRALIZED,
                                 cfg[f"target_accuracy{suffix}"]),
                                ("centralized", lambda a: a == CENTRALIZED,
                                 cfg[f"centralized_target_accuracy{suffix}"])):
            cand = [r for r in at if r["relation"] == rel and pick(r["algorithm"])]
            if not cand:
                continue
            best = max(cand, key=lambda r: r["accuracy_mean"])
            out[f"{who} {rel}"] = {
                "algorithm": best["algorithm"], "partition": kind,
                "epsilon_certified": best["epsilon_certified"],
                "accuracy": best["accuracy_mean"], "accuracy_std": best["accuracy_std"],
                "target_accuracy": float(goal),
                "reached": bool(best["accuracy_mean"] >= float(goal)),
                "shortfall": max(0.0, float(goal) - best["accuracy_mean"])}
    return out


def _doadp_communication(cfg, ctx, chosen, data, proj, parts, bound, delta) -> list[dict]:
    """DO-ADP's communication-accuracy trade-off at ``eps_comm`` (first partition)."""
    n = int(cfg["n_agents"])
    kind = cfg["partitions"][0]
    hp = chosen["DO-ADP"]
    dim = int(hp["dim"])
    problem = softmax_problem(proj.apply(data["x_priv"], dim), data["y_priv"], parts[kind], 10,
                              bound)
    xt_d = proj.apply(data["x_test"], dim)
    batch, rounds = batch_and_rounds(hp, problem.counts, n)  # replace-one: public sizes
    graph = circulant(n, cfg["graph_degree"])
    comm_rows = []
    for ci, (p, ratio) in enumerate(cfg["comm_configs"]):
        accs, sent, eps_c = [], [], None
        for rep in range(int(cfg["repetitions"])):
            alg = DOADP(Network(graph), alpha=hp["step"] / hp["clip"], beta=hp["momentum"],
                        gamma=cfg["doadp_gamma"], p=float(p), k_ratio=float(ratio),
                        grad_bound=hp["clip"], batch_size=batch,
                        budget=PrivacyBudget(cfg["eps_comm"], delta), n_rounds=rounds)
            res = tail_averaged(alg, rounds, hp["tail_average"], hp["ema_decay"]).run(
                problem, rounds, rng=ctx.rng(950, ci, rep), x0=np.zeros(problem.n_params),
                eval_every=rounds, with_reference=False)
            if res.diverged:
                continue
            accs.append(100.0 * problem.accuracy(res.x, xt_d, data["y_test"]))
            sent.append(res.history[-1]["bytes_sent"])
            eps_c = res.privacy["epsilon_certified"]
        st = _summarise(accs) if accs else dict.fromkeys(("mean", "std"), float("nan"))
        comm_rows.append({"partition": kind, "p": p, "k_ratio": ratio,
                          "comm_rate_pk_over_d": p * ratio,
                          "bytes_sent_mean": float(np.mean(sent)) if sent else float("nan"),
                          "accuracy_mean": st["mean"], "accuracy_std": st["std"],
                          "epsilon_certified": eps_c, "target_epsilon": cfg["eps_comm"],
                          "delta": delta, "repetitions": len(accs)})
    ctx.save_table("doadp_communication_accuracy", comm_rows)
    fig, axes = new_figure(1)
    axes[0].errorbar([r["bytes_sent_mean"] for r in comm_rows],
                     [r["accuracy_mean"] for r in comm_rows],
                     [r["accuracy_std"] for r in comm_rows], fmt="o")
    # labels alternate above and below their points: neighbours in bytes sit close
    for i, r in enumerate(sorted(comm_rows, key=lambda r: r["bytes_sent_mean"])):
        axes[0].annotate(f"p={r['p']:g}, k/d={r['k_ratio']:g}",
                         (r["bytes_sent_mean"], r["accuracy_mean"]), fontsize=7,
                         xytext=(0, 8 if i % 2 == 0 else -14), textcoords="offset points",
                         ha="center")
    axes[0].set_xscale("log")
    axes[0].margins(x=0.12, y=0.15)
    axes[0].set_xlabel("bytes sent (whole run)")
    axes[0].set_ylabel("test accuracy (%)")
    axes[0].set_title(f"DO-ADP at certified eps={cfg['eps_comm']:g} ({kind} split)")
    fig.suptitle("DO-ADP on Fashion-MNIST: test accuracy against communication at one "
                 "certified budget", fontsize=9)
    ctx.save_figure(fig, "doadp_communication_accuracy")
    return comm_rows


# ---------------------------------------------------------------------- SVM
def _svm_sets(cfg: dict, ctx: RunContext) -> dict[str, dict]:
    """``{name: {x_priv, y_priv, x_pub, y_pub, x_test, y_test, note}}`` with +-1 labels."""
    out = {}
    for name in cfg["datasets"]:
        if name == "fmnist-binary":
            d = _fmnist(cfg, ctx.rng(800), binary=tuple(cfg["classes"]))
            d["note"] = (f"Fashion-MNIST class {cfg['classes'][0]} (+1) vs {cfg['classes'][1]} "
                         f"(-1), unit-normalised, pca_dim={cfg['pca_dim']}")
            out[name] = d
        elif name == "epsilon-standin":
            decay = float(cfg["eps_spectrum_decay"])
            x, y = make_epsilon_like_cached(cfg["eps_rows"], cfg["eps_features"],
                                            seed=int(cfg["eps_seed"]), spectrum_decay=decay)
            # a public random subsample: the 2 shared cores cannot train on 400,000 rows
            idx = np.sort(ctx.rng(801).permutation(x.shape[0])[: cfg["eps_subsample"]])
            xs = np.asarray(x[idx], dtype=np.float64)
            ys = np.asarray(y[idx], dtype=np.float64)
            n_test = len(ys) // 5
            split = public_split(xs[n_test:], ys[n_test:], cfg["public_fraction"],
                                 ctx.rng(802))
            # the noise of a private run grows with sqrt(dimension): project on the top
            # directions of the PUBLIC second moment (orthonormal, so row norms stay <= 1)
            proj = _projection(split.x_public, int(cfg["eps_pca_dim"]))
            x_priv, x_pub, x_test = split.x_private, split.x_public, xs[:n_test]
            if proj is not None:
                x_priv, x_pub, x_test = x_priv @ proj, x_pub @ proj, x_test @ proj
            out[name] = {"x_priv": x_priv, "y_priv": split.y_private,
                         "x_pub": x_pub, "y_pub": split.y_public,
                         "x_test": x_test, "y_test": ys[:n_test],
                         "n_public": len(split.y_public),
                         "note": (f"paper-size 'epsilon' stand-in ({x.shape[0]} x "
                                  f"{x.shape[1]}, spectrum_decay={decay:g}, cached float32 "
                                  f"memmap), random subsample of {len(ys)} rows ({n_test} "
                                  f"test), public projection to {cfg['eps_pca_dim']} dims")}
        else:
            raise ValueError(f"argument 'datasets': unknown {name!r}; choose 'fmnist-binary' "
                             "or 'epsilon-standin'")
    return out


def _svm_problem(x, y, n: int, reg: str, strength: float, rng) -> HingeSVM:
    parts = list(iid_partition(len(y), n, rng))
    feats, _ = stack_agents_padded(x, parts)
    labels, _ = stack_agents_padded(y, parts)
    regularizer = L2Regularizer(strength) if reg == "l2" else L1Regularizer(strength)
    return HingeSVM(feats, labels, regularizer, feature_bound=1.0)


def _svm_checks(panel: str, rows: list[dict], refs: dict) -> dict:
    """The checks one panel must pass, from its measured rows.

    ``accuracy_improves_at_largest_eps``: at the largest budget the mean test accuracy beats the
    zero start's; ``excess_risk_improves_at_largest_eps``: the mean excess risk of the
    regularized objective is below the start's (with a weak l2 regularizer it can stay above
    it while the accuracy is far above chance: the prox ``x = -z / (mu iota A + gamma)``
    scales the summed noise by ``1 / mu``, and a long noisy ``x`` pays in ``(mu/2)||x||^2``
    and in the hinge on misclassified rows; hence ``mu`` is tuned). ``monotone_means``: the mean
    accuracy never drops as epsilon grows. ``monotone_within_bands``: it never drops beyond
    the bands, i.e. the band ``[min, max]`` over repetitions at each budget reaches the band
    of the next smaller budget (``max_k+1 >= min_k``).
    """
    ordered = sorted(rows, key=lambda r: r["target_epsilon"])
    top = ordered[-1]
    pairs = list(zip(ordered, ordered[1:], strict=False))
    return {"panel": panel, "largest_epsilon": top["target_epsilon"],
            "accuracy_at_largest_eps": top["accuracy_mean"],
            "zero_start_accuracy": refs["zero start"],
            "excess_risk_at_largest_eps": top["excess_risk_mean"],
            "excess_risk_start": top["excess_risk_start"],
            "accuracy_improves_at_largest_eps": bool(top["accuracy_mean"] > refs["zero start"]),
            "excess_risk_improves_at_largest_eps": bool(top["excess_risk_mean"]
                                                        < top["excess_risk_start"]),
            "monotone_means": all(b["accuracy_mean"] >= a["accuracy_mean"] for a, b in pairs),
            "monotone_within_bands": all(b["accuracy_max"] >= a["accuracy_min"]
                                         for a, b in pairs)}


@register(
    "utility-svm",
    paper="DP-DDA: certified-budget companion",
    summary="DP-DDA l1/l2-SVM vs certified eps, binary Fashion-MNIST and 'epsilon' stand-in",
    requires=("fashion-mnist",),
    description=(
        "DP-DDA (node sampling iota = n_active / n_agents, complete graph) on hinge-loss SVMs "
        "with l2 (mu) and l1 (phi) regularizers: a binary Fashion-MNIST task (needs the real "
        "files: apt-get install dataset-fashion-mnist) and the paper-size 'epsilon' stand-in "
        "(cached float32 memmap, decaying spectrum, subsampled rows projected on the top "
        "directions of the public split). Every private run budget-first at the "
        "certified epsilon (record level, replace-one, delta = min(1e-5, 1/(10 N))). Test "
        "accuracy; non-private optimum (LP / QP solver) and the zero start as references. "
        "The regularization strength (mus_l2, phis_l1) and the dual-averaging step gamma "
        "(gammas_l2, gammas_l1) are chosen jointly on the public split (half trains, half "
        "validates) at eps_tune: a private run's noise enters x through 1 / (mu iota A + "
        "gamma), so the l2-SVM's mu that suits the non-private problem (1e-3) lets the noise "
        "dominate its objective. The 'checks' table tests, per panel, that the largest budget "
        "beats the zero start and that the accuracy does not drop as epsilon grows."
    ),
    defaults={
        "data_path": "", "datasets": ["fmnist-binary", "epsilon-standin"], "classes": [0, 6],
        "n_agents": 20, "n_active": 4, "epochs": 3, "epsilons": EPSILONS, "repetitions": 3,
        "pca_dim": 64, "public_fraction": 0.05, "n_train": 0, "n_test": 0,
        "mus_l2": [1e-3, 1e-2, 1e-1], "phis_l1": [1e-4], "gammas_l2": [1.0, 10.0, 100.0],
        "gammas_l1": [0.03, 0.1, 1.0],
        "eps_tune": 2.0, "eps_rows": 400_000, "eps_features": 2000, "eps_seed": 0,
        "eps_subsample": 20_000, "eps_spectrum_decay": 1.0, "eps_pca_dim": 64,
        "regularizers": ["l2", "l1"],
    },
)
def utility_svm(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-svm``: DP-DDA l1/l2-SVM utility against the certified epsilon.

    A certified-budget companion of DP-DDA, on binary Fashion-MNIST and the 'epsilon'
    stand-in. See ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-svm`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    cfg = dict(config)
    n, na = int(cfg["n_agents"]), int(cfg["n_active"])
    eps_list = sorted(float(e) for e in cfg["epsilons"])
    reps = int(cfg["repetitions"])
    rows, tuning, refs, notes = [], [], {}, {}
    for di, (dname, data) in enumerate(_svm_sets(cfg, ctx).items()):
        notes[dname] = data["note"]
        xt, yt = data["x_test"], data["y_test"]
        half = len(data["y_pub"]) // 2
        for reg in cfg["regularizers"]:
            strengths = [float(v) for v in cfg["mus_l2" if reg == "l2" else "phis_l1"]]
            schedule = "strongly_convex" if reg == "l2" else "general"
            # sizes, rounds and the calibration read the partition only, not the regularizer
            sized = _svm_problem(data["x_priv"], data["y_priv"], n, reg, strengths[0],
                                 ctx.rng(810, di))
            q = int(sized.counts.min())
            delta = certified_delta(q)
            rounds = int(round(cfg["epochs"] * q * n / na))
            x0 = np.zeros(data["x_priv"].shape[1])

            def make(gamma, noise, schedule=schedule):
                return DPDDA(Network(complete(n)), n_active=na, schedule=schedule, gamma=gamma,
                             clip=1.0, **noise)

            panel = f"{dname} {reg}-SVM"
            z = _noise_multiplier(make(1.0, {"budget": PrivacyBudget(cfg["eps_tune"], delta),
                                             "n_rounds": rounds}), sized, x0)
            # the regularization strength and the step, jointly on the public split: a
            # private run's noise enters x through 1 / (strength iota A + gamma), so a weak
            # regularizer that suits the non-private problem lets the noise dominate
            best, panel_tuning = None, []
            gammas = [float(g) for g in cfg[f"gammas_{reg}"]]
            for si, strength in enumerate(strengths):
                pub = _svm_problem(data["x_pub"][:half], data["y_pub"][:half], n, reg, strength,
                                   ctx.rng(811, di))
                for gi, gamma in enumerate(gammas):
                    res = make(gamma, {"noise_multiplier": z}).run(
                        pub, rounds, rng=ctx.rng(820, di, si, gi), x0=x0, eval_every=rounds,
                        with_reference=False)
                    acc = (float("nan") if res.diverged else
                           100 * pub.accuracy(res.x, data["x_pub"][half:], data["y_pub"][half:]))
                    panel_tuning.append({"panel": panel, "strength": strength, "gamma": gamma,
                                         "noise_multiplier": z, "eps_tune": cfg["eps_tune"],
                                         "public_validation_accuracy": acc})
                    if np.isfinite(acc) and (best is None or acc > best[2]):
                        best = (strength, gamma, acc)
            strength, gamma = (strengths[0], gammas[0]) if best is None else best[:2]
            for row in panel_tuning:
                row["chosen"] = row["strength"] == strength and row["gamma"] == gamma
                row["at_grid_edge"] = bool(row["chosen"] and (
                    (len(strengths) > 1 and strength in (min(strengths), max(strengths)))
                    or (len(gammas) > 1 and gamma in (min(gammas), max(gammas)))))
            tuning.extend(panel_tuning)
            problem = (sized if strength == strengths[0] else _svm_problem(
                data["x_priv"], data["y_priv"], n, reg, strength, ctx.rng(810, di)))
            refs[panel] = {"non-private optimum": 100 * problem.accuracy(
                problem.reference_point(), xt, yt),
                "zero start": 100 * problem.accuracy(x0, xt, yt)}
            for ei, eps in enumerate([None, *eps_list]):
                noise = ({} if eps is None else
                         {"budget": PrivacyBudget(eps, delta), "n_rounds": rounds})
                accs, risks, reports = [], [], []
                for rep in range(1 if eps is None else reps):
                    res = make(gamma, noise).run(problem, rounds, rng=ctx.rng(830, di, ei, rep),
                                                 x0=x0, eval_every=rounds, with_reference=True)
                    if res.diverged:
                        continue
                    accs.append(100 * problem.accuracy(res.x, xt, yt))
                    risks.append(res.history[-1]["excess_risk"])
                    reports.append(res.privacy)
                    ctx.log(setting=f"{panel} eps={eps}", repetition=rep, test_accuracy=accs[-1],
                            excess_risk=risks[-1])
                if eps is None:
                    refs[panel]["non-private DP-DDA"] = float(np.mean(accs))
                    continue
                st = _summarise(accs)
                ctx.set_privacy(f"{panel} certified eps={eps:g}", reports[0])
                rows.append({"panel": panel, "algorithm": f"DP-DDA iota={na / n:g}",
                             "regularization": strength, "gamma": gamma, "rounds": rounds,
                             "target_epsilon": eps,
                             "epsilon_certified": max(r["epsilon_certified"] for r in reports),
                             "delta": delta, "noise_multiplier": reports[0]["noise_multiplier"],
                             "accuracy_mean": st["mean"], "accuracy_std": st["std"],
                             "accuracy_min": st["min"], "accuracy_max": st["max"],
                             "excess_risk_mean": float(np.mean(risks)),
                             "excess_risk_start": float(problem.cost(x0)
                                                        - problem.reference_cost()),
                             "repetitions": len(accs)})
    ctx.save_table("tuning", tuning)
    ctx.save_table("privacy_utility", rows)
    panels = list(dict.fromkeys(r["panel"] for r in rows))
    checks = [_svm_checks(p, [r for r in rows if r["panel"] == p], refs[p]) for p in panels]
    ctx.save_table("checks", checks)
    _privacy_utility_plot(ctx, rows, panels, "accuracy", "test accuracy (%)",
                          "DP-DDA SVMs: " + "; ".join(notes.values()), "privacy_utility", refs,
                          relation=lambda r: "replace-one")
    ctx.summary_table([summary_row(
        f"{r['panel']} target eps={r['target_epsilon']:g}", utility_name="test accuracy (%)",
        utility=r["accuracy_mean"], utility_std=r["accuracy_std"],
        reference=refs[r["panel"]]["non-private optimum"], reference_name="non-private optimum",
        epsilon=r["epsilon_certified"], delta=r["delta"],
        accountant="dp-accounting, record-level replace-one", repetitions=r["repetitions"])
        for r in rows])
    return {"privacy_utility": rows, "references": refs, "data": notes, "checks": checks}


# ---------------------------------------------------------------------- DP-DGT
def _check_utility_dpdgt(cfg: dict) -> None:
    for key in ("q", "q_theta"):
        check_setting(cfg, key, 0 < cfg[key] <= 1, "a decay rate in (0, 1]")
    for key in ("alpha0", "gamma", "phi"):
        check_setting(cfg, key, cfg[key] >= 0, "a number >= 0")
    check_setting(cfg, "adjacency_radius", cfg["adjacency_radius"] > 0, "a number > 0")

@register(
    "utility-dpdgt",
    paper="DP-DGT: certified-budget companion",
    summary="DP-DGT on the IEEE-14 dispatch vs certified eps of its cost-function relation",
    description=(
        "DP-DGT (Sec. 6.1 step sizes) on the IEEE 14-bus economic dispatch, budget-first at each "
        "certified epsilon of the paper's relation (one generator's cost function changes, "
        "gradients at most adjacency_radius apart in l1; not record-level DP), theta0 "
        "calibrated for the planned iterations. Utility ||w_K - w*||^2 (Monte Carlo mean and "
        "min-max band); the noise-free run and the start w_0 as references. The Laplace noise "
        "makes the error heavy-tailed, so the default averages 40 Monte Carlo runs per budget "
        "(10 runs gave means that were not monotone in epsilon)."
    ),
    defaults={"iterations": 800, "alpha0": 0.015, "q": 0.991, "gamma": 0.8, "phi": 0.7,
              "q_theta": 0.995, "adjacency_radius": 0.01, "epsilons": EPSILONS,
              "mc_runs": 40, "delta": 1e-5},
    validate=_check_utility_dpdgt,
)
def utility_dpdgt(config: dict, ctx: RunContext) -> dict:
    """Experiment ``utility-dpdgt``: DP-DGT on the IEEE-14 dispatch against the certified
    epsilon of its cost-function relation.

    A certified-budget companion of DP-DGT Sec. 6. See ``docs/guide/experiments.md`` and
    ``docs/papers/dpdgt.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show utility-dpdgt`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    cfg = dict(config)
    problem = ieee14_problem()
    graph = ieee14_digraph("paper")
    k_iter, radius, delta = int(cfg["iterations"]), cfg["adjacency_radius"], cfg["delta"]
    common = {"alpha0": cfg["alpha0"], "q": cfg["q"], "gamma": cfg["gamma"], "phi": cfg["phi"]}
    zero = LaplaceSchedule(0.0, cfg["q_theta"])
    nonpriv = DPDGT(graph, theta_xi=zero, theta_zeta=zero, adjacency_radius=radius,
                    track_privacy=False, **common).run(problem, k_iter, rng=ctx.rng(700),
                                                       eval_every=k_iter)
    err_np = nonpriv.history[-1]["sq_error"]
    err_start = nonpriv.history[0]["sq_error"]
    rows = []
    for ei, eps in enumerate(sorted(float(e) for e in cfg["epsilons"])):
        errs, reports = [], []
        for rep in range(int(cfg["mc_runs"])):
            res = DPDGT(graph, budget=PrivacyBudget(eps, delta), n_rounds=k_iter,
                        q_theta=cfg["q_theta"], adjacency_radius=radius, **common).run(
                problem, k_iter, rng=ctx.rng(710, ei, rep), eval_every=k_iter)
            if res.diverged:
                continue
            errs.append(res.history[-1]["sq_error"])
            reports.append(res.privacy)
            ctx.log(setting=f"certified eps={eps:g}", repetition=rep, sq_error=errs[-1])
        ctx.set_privacy(f"DP-DGT certified eps={eps:g}", reports[0])
        st = _summarise(errs)
        rows.append({"panel": "IEEE-14", "algorithm": "DP-DGT", "target_epsilon": eps,
                     "epsilon_certified": max(r["epsilon_certified"] for r in reports),
                     "delta": delta, "adjacency_radius": radius,
                     "relation": reports[0]["neighboring"],
                     "theta0": float(res.state.theta_xi.theta0),
                     "sq_error_mean": st["mean"], "sq_error_std": st["std"],
                     "sq_error_min": st["min"], "sq_error_max": st["max"],
                     "mc_runs": len(errs)})
    ctx.save_table("privacy_utility", rows)
    _privacy_utility_plot(
        ctx, rows, ["IEEE-14"], "sq_error", "||w_K - w*||^2 (MW^2)",
        f"DP-DGT, IEEE-14 dispatch, cost-function adjacency radius {radius:g}, delta={delta:g}",
        "privacy_utility",
        {"IEEE-14": {"non-private (noise-free) run": err_np, "start w_0": err_start}},
        relation=lambda r: f"cost-function adjacency (radius {r['adjacency_radius']:g})",
        logy=True)
    ctx.summary_table([summary_row(
        f"DP-DGT target eps={r['target_epsilon']:g}", utility_name="||w_K - w*||^2 (MW^2)",
        utility=r["sq_error_mean"], utility_std=r["sq_error_std"], reference=err_np,
        reference_name="noise-free run", epsilon=r["epsilon_certified"], delta=delta,
        accountant=f"cost-function adjacency, radius {radius:g}", repetitions=r["mc_runs"])
        for r in rows])
    return {"privacy_utility": rows, "nonprivate_sq_error": err_np, "start_sq_error": err_start}
