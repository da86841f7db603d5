"""Private classification on public features: the data, the public tuning and the trainers.

The machinery of ``utility-fmnist-classify`` (registered in
:mod:`rfed.experiments.utility_decentralized`): Fashion-MNIST as scattering coefficients
(:class:`rfed.datasets.Scattering2D`, ``J = 2``, ``L = 8``: 81 x 7 x 7 = 3,969 features) with a
per-image GroupNorm (:func:`rfed.datasets.group_norm`), the features of Tramer and Boneh
("Differentially Private Learning Needs Better Features (or Much More Data)", ICLR 2021,
arXiv:2011.11660), optionally projected on the top principal directions of the declared public
split; and the tuning of every private trainer's hyperparameters on that public split only.

Public tuning (:func:`coordinate_search`, :class:`PublicProxy`). The declared public split
(``public_fraction`` of the training images, never trained on privately) is halved: one half is
split among the same number of agents and trained on, the other half scores a configuration by
its validation accuracy. A private run's noise is calibrated from public numbers only (local
sizes, batch size, rounds, budget), so the public run can be given the private run's noise
exactly: the same number of rounds, a batch that is the same fraction of the (smaller) public
local data set, and the noise multiplier scaled so that the noise standard deviation on the
averaged clipped gradient, ``z * sensitivity / B``, is the private run's. (Only the minibatch
sampling noise differs: the public batch is smaller.) The search moves one hyperparameter at a
time over its grid (effective step ``lr * clip``, clip, batch fraction, epochs, momentum,
feature dimension, tail averaging, its exponential decay) from the middle of every grid,
keeping a change only if it raises the public score, for ``tune_sweeps`` passes; the
``tuning`` table records every configuration tried and whether the choice sits at the edge of
a grid that could have gone further (a domain bound, such as the whole local data set as batch,
is not such an edge).
With ``tune_folds = 2`` the halves also swap roles and a configuration's score is the mean of
the two (:mod:`rfed.experiments.utility_decentralized`).

Public warm start (:func:`public_warm_start`, setting ``public_warm_start``). The declared public
images are labelled, so a model fitted to them non-privately costs no privacy: with the setting
on, every run starts from the L2-regularised softmax regression fitted (L-BFGS) to the public
split's features and labels instead of the zero model, and the regularisation strength is one
more axis of the public search (``warm_start_l2s``). The public proxy of fold ``f`` starts from
the fit to its own training half (the only public images it may train on without touching its
validation half); the private runs start from the fit to the whole public split. Neither reads
a private record or a test image. With ``public_split_parts = 3`` the public split is cut in
thirds instead and a fold's warm start is fitted to a third of its own (``PublicProxy.warm_x``),
so that the public run trains on records new to its start, as the private run does; with
``warm_start_alone`` the search also scores the warm start alone
(:meth:`PublicProxy.warm_start_score`), and can report that no private phase beats it
(:mod:`rfed.experiments.utility_decentralized`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rfed.algorithms.averaging import TailAveraged
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.decentralized import DOADP, DPDL, DPDPSGD, NoisyDSGD
from rfed.datasets import (
    dirichlet_partition,
    group_norm,
    group_norm_bound,
    iid_partition,
    load_fashion_mnist,
    public_pca,
    public_split,
    scattering_features,
    stack_agents_padded,
)
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.problems.softmax import SoftmaxRegression

__all__ = [
    "CENTRALIZED",
    "DOMAIN_BOUNDS",
    "PublicProxy",
    "coordinate_search",
    "make_trainer",
    "mix_toward_start",
    "public_warm_start",
    "scattering_data",
]

#: The centralized companion's name in tables and figures.
CENTRALIZED = "DP-SGD (centralized, pooled)"

#: Grid values that are the end of their domain, not of a grid that could go further.
DOMAIN_BOUNDS: dict[str, tuple[float, ...]] = {
    "batch_fraction": (1.0,),   # the whole local data set
    "momentum": (0.0,),
    "tail_average": (0.0, 1.0),
    "ema_decay": (0.0,),        # a uniform tail mean
    "warm_start_l2": (0.0,),    # an unregularised public fit
    "warm_start_mix": (1.0,),   # the private run's own output, not moved toward its start
}


# ---------------------------------------------------------------------- data
def _group_norm_chunked(coeffs: np.ndarray, groups: int, rows: int = 4096) -> np.ndarray:
    """:func:`rfed.datasets.group_norm` of ``(n, K, h, w)`` float32 coefficients, ``rows``
    records at a time (per-record: the chunks do not change the result), float32 out."""
    out = np.empty((len(coeffs), int(np.prod(coeffs.shape[1:]))), dtype=np.float32)
    for lo in range(0, len(coeffs), rows):
        out[lo:lo + rows] = group_norm(coeffs[lo:lo + rows], groups)
    return out


def scattering_data(cfg: Mapping[str, Any], rng: np.random.Generator,
                    progress: bool = False) -> dict:
    """Fashion-MNIST as GroupNorm'd scattering features, with the declared public split.

    Parameters
    ----------
    cfg : mapping
        ``data_path``, ``scatter_J``, ``scatter_L``, ``groups``, ``public_fraction``,
        ``n_train``, ``n_test`` (0: all), ``cache_dir`` ('' : the default cache).
    rng : numpy.random.Generator
        Draws the public split (and the ``n_train`` subsample).
    progress : bool
        Progress bar while the scattering coefficients are computed (once; then cached).

    Returns
    -------
    dict
        ``x_priv, y_priv, x_pub, y_pub, x_test, y_test`` (float32 features, rows of norm at
        most ``feature_bound``), ``feature_bound`` (``sqrt(D)``, public), ``n_public``,
        ``nominal_private_size`` (public: the training file's count less the public split).
    """
    (x_tr, y_tr), (x_te, y_te) = load_fashion_mnist(cfg.get("data_path") or None, split="both")
    if cfg.get("n_test"):
        x_te, y_te = x_te[: int(cfg["n_test"])], y_te[: int(cfg["n_test"])]
    J, L, cache = int(cfg["scatter_J"]), int(cfg["scatter_L"]), cfg.get("cache_dir") or None
    f_tr, f_te = (_group_norm_chunked(scattering_features(x, J=J, L=L, progress=progress,
                                                          cache_dir=cache), int(cfg["groups"]))
                  for x in (x_tr, x_te))
    split = public_split(np.arange(len(y_tr)), y_tr, cfg["public_fraction"], rng)
    priv = split.private_index
    if cfg.get("n_train"):
        priv = np.sort(rng.permutation(priv)[: int(cfg["n_train"])])
    n_public = len(split.public_index)
    return {"x_priv": f_tr[priv], "y_priv": y_tr[priv], "x_pub": f_tr[split.public_index],
            "y_pub": y_tr[split.public_index], "x_test": f_te, "y_test": y_te,
            "feature_bound": group_norm_bound(f_tr.shape[1]), "n_public": n_public,
            # public: the benchmark's training-file count less the public split (or n_train)
            "nominal_private_size": int(cfg.get("n_train") or len(y_tr) - n_public)}


class Projections:
    """Projections on the top principal directions of the public features, for any ``dim``
    (one decomposition for the largest ``dim`` asked, then sliced); ``dim >= D``: the
    features as they are."""

    def __init__(self, x_public: np.ndarray, dims: Sequence[int] = ()):
        self.x_public = x_public
        self._largest = max([int(d) for d in dims if int(d) < x_public.shape[1]] or [0])
        self._basis: np.ndarray | None = None

    def matrix(self, dim: int) -> np.ndarray | None:
        """``(D, dim)`` float32 orthonormal columns, or None for all the features."""
        dim = int(dim)
        if dim >= self.x_public.shape[1]:
            return None
        if self._basis is None or self._basis.shape[1] < dim:
            self._basis = public_pca(self.x_public, max(dim, self._largest))[0].astype(
                np.float32)
        return self._basis[:, :dim]

    def apply(self, x: np.ndarray, dim: int) -> np.ndarray:
        """``x`` projected (an orthonormal map: row norms never grow)."""
        v = self.matrix(dim)
        return x if v is None else x @ v


# ---------------------------------------------------------------------- problems, trainers
def partition(labels: np.ndarray, n_agents: int, kind: str, alpha: float,
              rng: np.random.Generator) -> list[np.ndarray]:
    """IID (``kind='iid'``) or label-Dirichlet(``alpha``) (``'dirichlet'``) index parts."""
    if kind == "iid":
        return list(iid_partition(len(labels), n_agents, rng))
    if kind == "dirichlet":
        return dirichlet_partition(labels, n_agents, alpha, rng)
    raise ValueError(f"setting 'partitions' holds 'iid' or 'dirichlet', got {kind!r}")


def softmax_problem(x: np.ndarray, y: np.ndarray, parts: Sequence[np.ndarray],
                    n_classes: int, feature_bound: float) -> SoftmaxRegression:
    """Softmax regression on the agents' parts (float32 features kept in float32)."""
    feats, counts = stack_agents_padded(x, parts)
    labels, _ = stack_agents_padded(y, parts)
    return SoftmaxRegression(feats, labels, n_classes=n_classes, counts=counts,
                             feature_bound=feature_bound)


def sizes_problem(counts: np.ndarray, n_classes: int = 10) -> SoftmaxRegression:
    """A stand-in holding only the public local sizes ``counts`` (one zero feature per
    record): what a trainer's noise calibration reads, without the data."""
    counts = np.asarray(counts, dtype=np.int64)
    n_max = int(counts.max())
    return SoftmaxRegression(np.zeros((counts.size, n_max, 1), dtype=np.float32),
                             np.zeros((counts.size, n_max), dtype=np.int64), n_classes,
                             counts=counts)


def make_trainer(name: str, hp: Mapping[str, Any], batch: int, noise: Mapping[str, Any],
                 n_agents: int, cfg: Mapping[str, Any]):
    """One trainer with hyperparameters ``hp`` and local batch ``batch`` (the centralized
    companion: Poisson batches of ``n_agents * batch`` on the pooled data).

    ``hp['step']`` is the effective step ``lr * clip`` (the learning rate is ``step / clip``):
    the update is ``step`` times the mean of the gradients divided by the clip, and the noise
    too, so a change of clip at a fixed effective step only changes which gradients are
    shortened."""
    clip, mom = float(hp["clip"]), float(hp["momentum"])
    lr = float(hp["step"]) / clip
    graph = circulant(n_agents, int(cfg["graph_degree"]))
    if name == "DP-DPSGD":
        return DPDPSGD(Network(graph), lr=lr, beta=mom, batch_size=batch, clip=clip,
                       sampling=cfg["decentralized_sampling"], **noise)
    if name == "DPDL":
        return DPDL(Network(graph), lr=lr, beta=mom, batch_size=batch, clip=clip,
                    sampling=cfg["decentralized_sampling"], **noise)
    if name == "DO-ADP":
        return DOADP(Network(graph), alpha=lr, beta=mom, gamma=float(cfg["doadp_gamma"]), p=1.0,
                     grad_bound=clip, batch_size=batch, **noise)
    if name == "noisy DSGD":
        return NoisyDSGD(Network(graph), alpha=lr, grad_bound=clip, batch_size=batch, **noise)
    if name == CENTRALIZED:
        return DPSGD(step_size=lr, batch_size=batch * n_agents, clip=clip, momentum=mom,
                     sampling="poisson", **noise)
    raise ValueError(f"setting 'algorithms': unknown {name!r}; choose from DP-DPSGD, DPDL, "
                     f"DO-ADP, noisy DSGD, {CENTRALIZED}")


def public_warm_start(x_public: np.ndarray, y_public: np.ndarray, l2: float, maxiter: int,
                      feature_bound: float | None = None, n_classes: int = 10) -> np.ndarray:
    """The softmax regression fitted non-privately to labelled public records: a private run's
    start that costs no privacy.

    Minimises the mean cross-entropy plus ``(l2 / 2) ||W||_F^2`` over the public records by
    L-BFGS (:meth:`rfed.problems.softmax.SoftmaxRegression.reference_point`), from the zero
    model. Only the arguments are read: pass the declared public split, never a private
    record (the experiment's :func:`start_point` does).

    Parameters
    ----------
    x_public : array, shape ``(m, d)``
        The public features (after the public projection, if any).
    y_public : array of int, shape ``(m,)``
        Their labels.
    l2 : float
        The regularisation strength ``>= 0`` (setting ``warm_start_l2s``).
    maxiter : int
        The L-BFGS iteration cap (setting ``reference_maxiter``).
    feature_bound : float, optional
        The public feature bound of the private problem (rows longer are scaled onto it).
    n_classes : int

    Returns
    -------
    ndarray, shape ``(d * n_classes + n_classes,)``
        The flattened ``(W, b)``, in the layout of :class:`SoftmaxRegression`.
    """
    l2 = float(l2)
    if not (math.isfinite(l2) and l2 >= 0.0):
        raise ValueError(f"setting 'warm_start_l2s' holds L2 strengths >= 0, got {l2!r}")
    problem = SoftmaxRegression(np.asarray(x_public)[None], np.asarray(y_public)[None],
                                n_classes, l2=l2, feature_bound=feature_bound)
    problem.reference_maxiter = int(maxiter)
    return np.asarray(problem.reference_point(), dtype=float)


def start_point(data: Mapping[str, Any], projections: Projections, dim: int,
                hp: Mapping[str, Any], cfg: Mapping[str, Any]) -> np.ndarray:
    """The start of a private run at dimension ``dim``: the zero model, or with
    ``cfg['public_warm_start']`` the :func:`public_warm_start` fitted to the declared public
    split ``data['x_pub'], data['y_pub']`` at ``hp['warm_start_l2']``.

    Parameters
    ----------
    data : mapping
        :func:`scattering_data`'s dictionary (private, public and test arrays); only the
        public entries are read.
    projections : Projections
        The public projections.
    dim : int
        The feature dimension.
    hp : mapping
        The chosen hyperparameters.
    cfg : mapping
        The experiment's settings (``public_warm_start``, ``reference_maxiter``).

    Returns
    -------
    ndarray, shape ``(dim * 10 + 10,)``
    """
    if not cfg.get("public_warm_start", False):
        return np.zeros(int(dim) * 10 + 10)
    return public_warm_start(projections.apply(data["x_pub"], dim), data["y_pub"],
                             float(hp["warm_start_l2"]), int(cfg["reference_maxiter"]),
                             float(data["feature_bound"]))


def tail_averaged(alg, rounds: int, tail: float, ema_decay: float = 0.0):
    """``alg`` with the average of its last ``tail`` fraction of outputs as output: the uniform
    mean, or with ``ema_decay > 0`` the warm-started exponential moving average of
    :class:`rfed.algorithms.averaging.TailAveraged` (post-processing of released iterates: the
    privacy report is the wrapped run's). ``tail = 0``: the last output, whatever the decay.

    Parameters
    ----------
    alg : Algorithm
    rounds : int
        The rounds the run will take (public).
    tail : float
        The averaged fraction of the rounds, in ``[0, 1]`` (setting ``tail_averages``).
    ema_decay : float
        In ``[0, 1)`` (setting ``ema_decays``); 0: the uniform mean.

    Returns
    -------
    Algorithm
        ``alg`` itself when ``tail = 0``, else its :class:`TailAveraged` wrapper.
    """
    if not 0.0 <= tail <= 1.0:
        raise ValueError(f"setting 'tail_averages' holds fractions in [0, 1], got {tail!r}")
    if not 0.0 <= ema_decay < 1.0:
        raise ValueError(f"setting 'ema_decays' holds decays in [0, 1), got {ema_decay!r}")
    if tail == 0.0:
        return alg
    return TailAveraged(alg, average_from=int(round(rounds * (1.0 - tail))),
                        ema_decay=float(ema_decay))


def mix_toward_start(x: np.ndarray, x0: np.ndarray, mix: float) -> np.ndarray:
    """The output ``x0 + mix (x - x0)``: the private run's output ``x`` moved back toward its
    public start ``x0`` (setting ``warm_start_mixes``).

    The weight-space interpolation between a start and the model trained from it of Wortsman
    et al. (WiSE-FT, "Robust fine-tuning of zero-shot models", CVPR 2022, arXiv:2109.01903),
    here as a shrinkage of the private phase's noisy displacement: the displacement's noise
    shrinks by ``mix`` and so does its signal. A function of the released output and of the
    public start only, so it costs no privacy (post-processing).

    Parameters
    ----------
    x : ndarray
        The private run's output.
    x0 : ndarray
        Its start (public: the zero model or the public warm start).
    mix : float
        In ``(0, 1]``; 1 returns ``x`` itself.

    Returns
    -------
    ndarray
    """
    mix = float(mix)
    if not (math.isfinite(mix) and 0.0 < mix <= 1.0):
        raise ValueError(f"setting 'warm_start_mixes' holds fractions in (0, 1], got {mix!r}")
    if mix == 1.0:
        return x
    return x0 + mix * (np.asarray(x) - x0)


def local_batch(fraction: float, min_local: int) -> int:
    """The local batch ``round(fraction * min_local)``, at least 1."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"setting 'batch_fractions' holds fractions in (0, 1], got {fraction!r}")
    return max(1, min(int(min_local), int(round(fraction * min_local))))


def rounds_for(epochs: float, n_samples: int, n_agents: int, batch: int) -> int:
    """Rounds of ``epochs`` passes over the average local data set at local batch ``batch``."""
    return max(1, int(round(float(epochs) * n_samples / n_agents / batch)))


def batch_and_rounds(hp: Mapping[str, Any], sizes: np.ndarray, n_agents: int) -> tuple[int, int]:
    """The local batch and the rounds of a run with hyperparameters ``hp`` on local sizes
    ``sizes``: :func:`local_batch` of the smallest, :func:`rounds_for` of their sum.

    Parameters
    ----------
    hp : mapping
        ``batch_fraction`` and ``epochs``.
    sizes : int array, shape ``(n_agents,)``
        The local sizes the run may read (public: the declared ones under add/remove,
        :func:`rfed.experiments.utility_decentralized.planning_sizes`).
    n_agents : int

    Returns
    -------
    (int, int)
        ``(batch, rounds)``.
    """
    sizes = np.asarray(sizes)
    batch = local_batch(float(hp["batch_fraction"]), int(sizes.min()))
    return batch, rounds_for(hp["epochs"], int(sizes.sum()), n_agents, batch)


def noise_multiplier(alg, counts: np.ndarray) -> float:
    """The multiplier the budget-first calibration gives ``alg`` for local sizes ``counts``
    (public numbers: sizes, rounds, batch; no record is read)."""
    prob = sizes_problem(counts)
    state = alg.init(prob, np.zeros(prob.n_params), np.random.default_rng(0))
    return float(state.ledger.noise_multiplier)


# ---------------------------------------------------------------------- public tuning
@dataclasses.dataclass
class PublicProxy:
    """Scores a trainer's hyperparameters on the public split at the private run's noise.

    Attributes
    ----------
    train_x, train_y : arrays
        The public half trained on (features before projection).
    val_x, val_y : arrays
        The public half that scores.
    private_counts : array of int
        The local sizes of the private partition that the private run's batch, rounds and
        noise are planned from: the true sizes under replace-one, the declared public sizes
        under add/remove (where the true sizes are private;
        :func:`rfed.experiments.utility_decentralized.planning_sizes`).
    budget_noise : callable
        ``budget_noise(alg_factory_kwargs) -> dict`` giving the budget arguments of a private
        run of ``rounds`` rounds (``{'budget': ..., 'n_rounds': ...}``).
    warm_x, warm_y : arrays, optional
        The public part the warm start is fitted to (features before projection). None: the
        training part itself (the warm start has then seen every record the public run trains
        on, which a private run's records are not); a third part disjoint from both the
        training and the validation parts makes the public run's data new to its start, as a
        private run's are (setting ``public_split_parts = 3``).
    """

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    private_counts: np.ndarray
    n_agents: int
    cfg: Mapping[str, Any]
    projections: Projections
    feature_bound: float
    budget: Any
    repetitions: int
    rng: Callable[..., np.random.Generator]
    warm_x: np.ndarray | None = None
    warm_y: np.ndarray | None = None

    def __post_init__(self):
        parts = partition(self.train_y, self.n_agents, "iid", 1.0, self.rng(0))
        self._parts = parts
        self._problems: dict[int, SoftmaxRegression] = {}
        self._starts: dict[tuple[int, float], np.ndarray] = {}
        self._outputs: dict[tuple, list[np.ndarray] | None] = {}
        self.public_counts = np.array([len(p) for p in parts])

    def start(self, hp: Mapping[str, Any], dim: int) -> np.ndarray:
        """The public run's start: zero, or with ``cfg['public_warm_start']`` the
        :func:`public_warm_start` fitted to this fold's training half (cached)."""
        if not self.cfg.get("public_warm_start", False):
            return np.zeros(self.problem(dim).n_params)
        key = (int(dim), float(hp["warm_start_l2"]))
        if key not in self._starts:
            fit_x, fit_y = ((self.train_x, self.train_y)
                            if self.warm_x is None or self.warm_y is None
                            else (self.warm_x, self.warm_y))
            self._starts[key] = public_warm_start(
                self.projections.apply(fit_x, dim), fit_y, key[1],
                int(self.cfg["reference_maxiter"]), self.feature_bound)
        return self._starts[key]

    def warm_start_score(self, hp: Mapping[str, Any]) -> float:
        """The validation accuracy (%) of the warm start alone, with no private phase: the
        candidate that says the private run at this budget does not improve on its start.

        Parameters
        ----------
        hp : mapping
            ``warm_start_l2`` and ``dim``.

        Returns
        -------
        float
        """
        if not self.cfg.get("public_warm_start", False):
            raise ValueError("setting 'warm_start_alone' needs public_warm_start = true")
        dim = int(hp["dim"])
        x0 = self.start(hp, dim)
        return float(100.0 * self.problem(dim).accuracy(
            x0, self.projections.apply(self.val_x, dim), self.val_y))

    def problem(self, dim: int) -> SoftmaxRegression:
        """The public training problem at feature dimension ``dim`` (cached)."""
        if dim not in self._problems:
            x = self.projections.apply(self.train_x, dim)
            self._problems[dim] = softmax_problem(x, self.train_y, self._parts, 10,
                                                  self.feature_bound)
        return self._problems[dim]

    def plan(self, hp: Mapping[str, Any]) -> dict:
        """The private run's batch, rounds and noise multiplier, and the public run's batch and
        noise multiplier (same noise std on the averaged clipped gradient)."""
        batch, rounds = batch_and_rounds(hp, self.private_counts, self.n_agents)
        alg = make_trainer(self.name, hp, batch,
                           {"budget": self.budget, "n_rounds": rounds}, self.n_agents, self.cfg)
        z = noise_multiplier(alg, self.private_counts)
        pub_batch = local_batch(float(hp["batch_fraction"]), int(self.public_counts.min()))
        return {"batch": batch, "rounds": rounds, "noise_multiplier": z,
                "public_batch": pub_batch, "public_noise_multiplier": z * pub_batch / batch}

    def outputs(self, hp: Mapping[str, Any]) -> list[np.ndarray] | None:
        """The public runs' outputs at ``hp`` (one per repetition, before any
        ``warm_start_mix``; cached, so that the mix, a post-processing, is scored without
        training again); None if a run diverged."""
        key = tuple(sorted((k, v) for k, v in hp.items() if k != "warm_start_mix"))
        if key not in self._outputs:
            plan = self.plan(hp)
            dim = int(hp["dim"])
            problem = self.problem(dim)
            x0 = self.start(hp, dim)
            xs: list[np.ndarray] = []
            diverged = False
            for rep in range(self.repetitions):
                alg = tail_averaged(
                    make_trainer(self.name, hp, plan["public_batch"],
                                 {"noise_multiplier": plan["public_noise_multiplier"]},
                                 self.n_agents, self.cfg),
                    plan["rounds"], float(hp["tail_average"]), float(hp.get("ema_decay", 0.0)))
                res = alg.run(problem, plan["rounds"], rng=self.rng(1, rep),
                              x0=x0, eval_every=plan["rounds"],
                              with_reference=False)
                if res.diverged:
                    diverged = True
                    break
                xs.append(np.asarray(res.x))
            self._outputs[key] = None if diverged else xs
        return self._outputs[key]

    def score(self, hp: Mapping[str, Any]) -> tuple[float, dict]:
        """Mean public validation accuracy (%) over the repetitions, and the run plan; NaN if
        a run diverged. With ``hp['warm_start_mix']`` each output is first moved toward its
        start (:func:`mix_toward_start`)."""
        plan = self.plan(hp)
        dim = int(hp["dim"])
        xs = self.outputs(hp)
        if xs is None:
            return float("nan"), plan
        problem = self.problem(dim)
        val_x = self.projections.apply(self.val_x, dim)
        x0 = self.start(hp, dim)
        mix = float(hp.get("warm_start_mix", 1.0))
        accs = [100.0 * problem.accuracy(mix_toward_start(x, x0, mix), val_x, self.val_y)
                for x in xs]
        return float(np.mean(accs)), plan


def coordinate_search(score: Callable[[dict], tuple[float, dict]],
                      grids: Mapping[str, Sequence[Any]], sweeps: int = 2
                      ) -> tuple[dict, list[dict]]:
    """Maximise ``score`` over the grids one axis at a time, from the middle of every grid.

    Each pass tries every value of each axis in turn (the others at the current choice) and
    keeps a value only if its score is strictly higher (ties keep the current one); it stops
    after ``sweeps`` passes or a pass without a change. Every configuration is scored once.

    Parameters
    ----------
    score : callable
        ``score(hp) -> (value, info)``; NaN is never chosen.
    grids : mapping of str to sequence
        The values of each axis, in the order the axes are searched.
    sweeps : int

    Returns
    -------
    best : dict
        The chosen configuration.
    rows : list of dict
        Every configuration scored: its values, ``public_score`` and ``info``'s entries, in the
        order tried.
    """
    current = {k: list(v)[(len(v) - 1) // 2] for k, v in grids.items()}
    seen: dict[tuple, float] = {}
    rows: list[dict] = []

    def value(hp: dict) -> float:
        key = tuple(hp[k] for k in grids)
        if key not in seen:
            s, info = score(hp)
            seen[key] = s
            rows.append({**hp, "public_score": s, **info})
        return seen[key]

    best = value(current)
    for _ in range(max(1, int(sweeps))):
        changed = False
        for axis, values in grids.items():
            for v in values:
                cand = {**current, axis: v}
                s = value(cand)
                if math.isfinite(s) and (not math.isfinite(best) or s > best):
                    best, current, changed = s, cand, True
        if not changed:
            break
    return current, rows


def at_grid_edge(best: Mapping[str, Any], grids: Mapping[str, Sequence[Any]],
                 bounds: Mapping[str, Sequence[Any]] | None = None) -> list[str]:
    """The axes whose chosen value is the first or last of a grid of several values, other
    than a domain bound (:data:`DOMAIN_BOUNDS` and ``bounds``, e.g. every feature for the
    dimension)."""
    bounds = {**DOMAIN_BOUNDS, **(bounds or {})}
    edges = []
    for axis, values in grids.items():
        values = list(values)
        v = best[axis]
        if len(values) > 1 and v in (min(values), max(values)) \
                and v not in bounds.get(axis, ()):
            edges.append(axis)
    return edges
