"""Linear classifiers split across agents: l2-regularized logistic regression and l1/l2 SVM.

The decentralized papers use these Euclidean problems:

* DO-ADP (Sec. VI-A of the paper): logistic regression on ``epsilon``,
  ``f_i(x) = (1/q) sum_j log(1 + exp(-b_j a_j^T x)) + (1/(2q)) ||x||^2``, i.e. the pooled mean
  logistic loss plus ``(lambda/2)||x||^2`` with ``lambda = 1/q``.
* DP-DDA (Sec. 5, problem (26)-(27)): hinge-loss SVM ``(1/n) sum_i f_i(x) + h(x)`` with
  ``h = (mu/2)||x||^2`` (l2-SVM) or ``h = phi ||x||_1`` (l1-SVM), no intercept.

Each problem is *composite*: a data term (per-sample loss ``l(x, (a, b))``) plus a regularizer
``h`` shared by all agents. :meth:`LinearProblem.sample_loss` / :meth:`sample_rgrad` return the
per-sample loss of the full objective ``l + h`` (so the generic :class:`~rfed.problems.Problem`
machinery computes ``F = mean l + h``), while :meth:`sample_data_loss` / :meth:`sample_data_grad`
return the data term alone, which is what dual averaging needs (DP-DDA puts ``h`` in its prox step).

Reference optima are computed independently of rfed's algorithms with scipy on the pooled
objective: L-BFGS for the smooth logistic objective; for the SVMs, solvers that certify their
duality gap (a dual-feasible point and ``P(x) - D``, evaluated on all rows apart from the
solver):

* exact, for small sample counts: a linear program (HiGHS) for the l1-SVM (its dual, ``2d``
  rows whatever the sample count: :func:`l1_svm_reference`), and the l2-SVM's quadratic program
  by a smoothing continuation with an active-set polish (:func:`l2_svm_reference`);
* scalable, above :data:`SCALABLE_REFERENCE_SAMPLES` samples (DP-DDA's paper scale, 100,000
  rows at ``d = 2,000``): dual coordinate descent with shrinking for the l2-SVM
  (:func:`l2_svm_dual_cd`), after C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi and
  S. Sundararajan, "A Dual Coordinate Descent Method for Large-scale Linear SVM", Proceedings
  of the 25th International Conference on Machine Learning (ICML), 2008; and for the l1-SVM
  small linear programs over working sets of rows and features, warm-started over growing
  random subsets (:func:`l1_svm_working_set`), in the spirit of A. Dedieu, R. Mazumder and
  H. Wang, "Solving L1-regularized SVMs and related linear programs: revisiting the
  effectiveness of column and constraint generation", Journal of Machine Learning Research,
  2022, arXiv:1901.01585.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import scipy.optimize as sopt
import scipy.sparse as sp

from rfed._checks import held_out_samples, numeric_array
from rfed._einsum import einsum
from rfed.manifolds import Euclidean
from rfed.problems.base import Problem
from rfed.problems.outer_gradients import outer_clipped_sum

__all__ = [
    "L1Regularizer",
    "L2Regularizer",
    "LinearProblem",
    "LogisticRegression",
    "Regularizer",
    "HingeSVM",
    "SCALABLE_REFERENCE_SAMPLES",
    "l1_svm_reference",
    "l1_svm_working_set",
    "l2_svm_dual_cd",
    "l2_svm_reference",
    "split_evenly",
]


def split_evenly(features: np.ndarray, labels: np.ndarray, n_agents: int,
                 rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Stack ``(N, d)`` data into ``(n_agents, N // n_agents, d)`` (the papers' even split).

    Rows are shuffled first when ``rng`` is given ("randomly and evenly distributed", DO-ADP
    Sec. VI); the ``N mod n_agents`` remaining rows are dropped (:ref:`dpdda-unequal-shares`).

    Parameters
    ----------
    features : array, shape ``(N, d)``
    labels : array, shape ``(N,)``
    n_agents : int
        In ``[1, N]``.
    rng : numpy.random.Generator, optional
        Shuffles the rows first; ``None`` keeps their order.

    Returns
    -------
    features : ndarray, shape ``(n_agents, N // n_agents, d)``
    labels : ndarray, shape ``(n_agents, N // n_agents)``
    """
    features = numeric_array(features, "features")
    labels = numeric_array(labels, "labels")
    if features.ndim != 2 or labels.shape != (features.shape[0],):
        raise ValueError(
            f"arguments 'features' and 'labels' must have shapes (N, d) and (N,), got "
            f"{features.shape} and {labels.shape}"
        )
    if not isinstance(n_agents, (int, np.integer)) or not 1 <= n_agents <= features.shape[0]:
        raise ValueError(f"argument 'n_agents' must be an int in [1, {features.shape[0]}], "
                         f"got {n_agents!r}")
    q = features.shape[0] // n_agents
    order = np.arange(features.shape[0]) if rng is None else rng.permutation(features.shape[0])
    order = order[: n_agents * q]
    return (features[order].reshape(n_agents, q, -1), labels[order].reshape(n_agents, q))


class Regularizer:
    """A regularizer ``h`` shared by all agents, with the dual-averaging prox step it admits."""

    strength: float
    #: modulus of strong convexity of ``h`` (``mu`` in DP-DDA's Assumption 1).
    modulus: float

    def value(self, x: np.ndarray) -> np.ndarray:
        """``h(x)``, shape: the batch shape of ``x`` (``(*lead, d)``).

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Points.

        Returns
        -------
        array, shape ``lead``
        """
        raise NotImplementedError

    def subgrad(self, x: np.ndarray) -> np.ndarray:
        """A subgradient of ``h`` at ``x`` (same shape as ``x``).

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Points.

        Returns
        -------
        array, shape ``(*lead, d)``
        """
        raise NotImplementedError

    def dual_averaging_step(self, z: np.ndarray, c: float, g: float) -> np.ndarray:
        r"""``argmin_x <z, x> + c h(x) + (g/2)||x||^2`` (DP-DDA prox step (6); :ref:`dpdda-prox`).

        Parameters
        ----------
        z : array, shape ``(*lead, d)``
            Dual variables.
        c : float
            Weight of ``h`` (``iota A_{t+1}`` in DP-DDA).
        g : float
            Weight of ``d(x) = ||x||^2/2`` (``gamma_{t+1}``).

        Returns
        -------
        array, shape ``(*lead, d)``
            The minimizers.
        """
        raise NotImplementedError


class L2Regularizer(Regularizer):
    """``h(x) = (strength / 2) ||x||^2`` (modulus ``strength``).

    Parameters
    ----------
    strength : float
        ``mu >= 0``; ``h`` is ``mu``-strongly convex (DP-DDA's ``h(x) = (mu/2)||x||^2``,
        as in scikit-learn's ``SGDClassifier(penalty="l2", alpha=mu)`` has the same term).
    """

    def __init__(self, strength: float):
        if not strength >= 0:
            raise ValueError(f"argument 'strength' must be >= 0, got {strength!r}")
        self.strength = float(strength)
        self.modulus = self.strength

    def value(self, x):
        return 0.5 * self.strength * np.sum(np.square(x), axis=-1)

    def subgrad(self, x):
        return self.strength * np.asarray(x, dtype=float)

    def dual_averaging_step(self, z, c, g):
        """Closed form ``x = -z / (mu c + g)`` of DP-DDA's prox step (6).

        Parameters
        ----------
        z : array, shape ``(*lead, d)``
            Dual variables.
        c : float
            Weight of ``h`` (``iota A_{t+1}`` in DP-DDA).
        g : float
            Weight of ``d(x) = ||x||^2/2`` (``gamma_{t+1}``).

        Returns
        -------
        array, shape ``(*lead, d)``
            The minimizers.
        """
        denom = self.strength * c + g
        if not denom > 0:
            raise ValueError(
                "dual averaging with an l2 regularizer needs mu * c + gamma > 0 (gamma_t = 0 is "
                f"allowed only when mu > 0); got mu={self.strength}, "
                f"c={c}, gamma={g}"
            )
        return -np.asarray(z, dtype=float) / denom

    def __repr__(self) -> str:
        return f"L2Regularizer({self.strength})"


class L1Regularizer(Regularizer):
    """``h(x) = strength * ||x||_1`` (modulus 0).

    Parameters
    ----------
    strength : float
        ``phi >= 0`` (DP-DDA's l1-SVM uses ``phi = 5e-4``).
    """

    def __init__(self, strength: float):
        if not strength >= 0:
            raise ValueError(f"argument 'strength' must be >= 0, got {strength!r}")
        self.strength = float(strength)
        self.modulus = 0.0

    def value(self, x):
        return self.strength * np.sum(np.abs(x), axis=-1)

    def subgrad(self, x):
        return self.strength * np.sign(x)

    def dual_averaging_step(self, z, c, g):
        """Soft threshold ``x = -(1/g) S_{phi c}(z)`` (DP-DDA's prox step (6)); needs ``g > 0``.

        Parameters
        ----------
        z : array, shape ``(*lead, d)``
            Dual variables.
        c : float
            Weight of ``h`` (``iota A_{t+1}`` in DP-DDA).
        g : float
            Weight of ``d(x) = ||x||^2/2`` (``gamma_{t+1}``).

        Returns
        -------
        array, shape ``(*lead, d)``
            The minimizers.
        """
        if not g > 0:
            raise ValueError(
                f"dual averaging with an l1 regularizer needs gamma > 0, "
                f"got gamma={g}"
            )
        z = np.asarray(z, dtype=float)
        return -np.sign(z) * np.maximum(np.abs(z) - self.strength * c, 0.0) / g

    def __repr__(self) -> str:
        return f"L1Regularizer({self.strength})"


class LinearProblem(Problem):
    """A linear model ``x in R^d`` with per-sample data loss plus a shared regularizer.

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, d)``
    labels : array, shape ``(n_agents, n_max)``, values in {-1, +1}
    regularizer : Regularizer, optional
    counts : array of int, shape ``(n_agents,)``, optional
    feature_bound : float, optional
        A PUBLIC bound ``R`` on the feature rows' norm, asserted by the user about the data
        domain (e.g. 1 for unit-normalised rows). It is ENFORCED: rows longer than ``R`` are
        scaled onto the sphere of radius ``R`` (a per-record map, so record adjacency is
        preserved). The per-sample data-loss (sub)gradient then has norm ``<= R`` (``|dl/dm|
        <= 1`` for the logistic and hinge losses): :attr:`public_gradient_bound`, the Lipschitz
        bound private algorithms may use.

    Attributes
    ----------
    public_gradient_bound : float or None
        ``feature_bound`` (public), or None.
    gradient_bound : float or None
        ``public_gradient_bound`` when given; otherwise the largest row norm of the data
        (data-derived: for step sizes of non-private runs only, never for a privacy
        calibration).
    """

    def __init__(self, features: np.ndarray, labels: np.ndarray,
                 regularizer: Regularizer | None = None, counts: np.ndarray | None = None,
                 feature_bound: float | None = None):
        features = numeric_array(features, "features")
        labels = numeric_array(labels, "labels")
        if features.ndim != 3:
            raise ValueError(f"argument 'features' must have shape (n_agents, n_max, d), got "
                             f"{features.shape}")
        if labels.shape != features.shape[:2]:
            raise ValueError(f"argument 'labels' must have shape {features.shape[:2]}, got "
                             f"{labels.shape}")
        if not np.all(np.isin(labels, (-1.0, 1.0))):
            raise ValueError("argument 'labels' must take values in {-1, +1}")
        self.regularizer = regularizer if regularizer is not None else L2Regularizer(0.0)
        if not isinstance(self.regularizer, Regularizer):
            raise TypeError(f"argument 'regularizer' must be a Regularizer, got {regularizer!r}")
        self.public_gradient_bound = None
        if feature_bound is not None:
            try:
                bound = float(feature_bound)
            except (TypeError, ValueError):
                bound = float("nan")
            if not (np.isfinite(bound) and bound > 0):
                raise ValueError(f"argument 'feature_bound' must be a finite number > 0, got "
                                 f"{feature_bound!r}")
            norms = np.linalg.norm(features, axis=-1, keepdims=True)
            features = features * np.minimum(1.0, bound / np.maximum(norms, 1e-300))
            self.public_gradient_bound = bound
        grad_bound: float | None
        if self.public_gradient_bound is not None:
            grad_bound = self.public_gradient_bound
        else:
            row_norm = float(np.max(np.linalg.norm(features, axis=-1), initial=0.0))
            grad_bound = row_norm if row_norm > 0 else None
        super().__init__(Euclidean(features.shape[-1]), {"features": features, "labels": labels},
                         counts=counts, gradient_bound=grad_bound,
                         arg_names={"features": "features", "labels": "labels"})
        self.dim = features.shape[-1]
        # the closed-form clipped sum holds for the per-sample gradient c_j a_j + s written
        # here; a subclass with a gradient of its own gets the generic path (chosen once)
        cls = type(self)
        self._outer_gradients = (cls.sample_data_grad is LinearProblem.sample_data_grad
                                 and cls.sample_rgrad is LinearProblem.sample_rgrad)
        #: Whether :meth:`clipped_grad_sum` takes the rows' squared norms from its caller
        #: (``feature_sq_norms=``): a caller that keeps them for a fixed data set (centralized
        #: DP-SGD's pooled records) computes them once instead of once per batch.
        self.takes_feature_sq_norms = self._outer_gradients

    # data term ---------------------------------------------------------------

    def _margins(self, x, batch):
        return batch["labels"] * einsum("...bd,...d->...b", batch["features"], x)

    def sample_data_loss(self, x: np.ndarray, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Per-sample data loss (no regularizer), shape ``(*lead, b)``.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            The points (one per leading index).
        batch : mapping of str to array
            ``features`` ``(*lead, b, d)`` and ``labels`` ``(*lead, b)``.

        Returns
        -------
        array, shape ``(*lead, b)``
        """
        raise NotImplementedError

    def _dloss_dmargin(self, margins: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def sample_data_grad(self, x: np.ndarray, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Per-sample (sub)gradient of the data loss, shape ``(*lead, b, d)``.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            The points (one per leading index).
        batch : mapping of str to array
            ``features`` ``(*lead, b, d)`` and ``labels`` ``(*lead, b)``.

        Returns
        -------
        array, shape ``(*lead, b, d)``
        """
        coef = self._dloss_dmargin(self._margins(x, batch)) * batch["labels"]
        return coef[..., None] * batch["features"]

    # full objective ------------------------------------------------------------
    def sample_loss(self, x, batch):
        return self.sample_data_loss(x, batch) + self.regularizer.value(x)[..., None]

    def sample_rgrad(self, x, batch):
        data = self.sample_data_grad(x, batch)
        reg = self.regularizer.subgrad(x)[..., None, :]
        if (type(self).sample_data_grad is LinearProblem.sample_data_grad
                and type(data) is np.ndarray and np.result_type(data, reg) == data.dtype
                and np.broadcast_shapes(data.shape, reg.shape) == data.shape):
            # the same sum into the fresh product's array (no third array of the batch's size)
            data += reg
            return data
        return data + reg

    def clipped_grad_sum(self, x, batch, bound, mask=None, *, feature_sq_norms=None):
        """Closed-form clipped sum: no per-sample gradient is materialized.

        The per-sample gradient ``c_j a_j + s`` (``c_j = l'(b_j a_j^T x) b_j``, ``s`` the
        regularizer's subgradient, shared) has the norm
        ``sqrt(c_j^2 ||a_j||^2 + 2 c_j a_j^T s + ||s||^2)`` and the clipped sum is
        ``A^T (f * c) + (sum f) s`` for the clip factors ``f``
        (:func:`rfed.problems.outer_gradients.outer_clipped_sum`); equal to clipping the
        materialised gradients (:meth:`Problem.clipped_grad_sum`) up to rounding. A subclass
        that writes its own :meth:`sample_data_grad` or :meth:`sample_rgrad` gets the generic
        path.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
        batch : mapping of str to array
            ``features`` ``(*lead, b, d)`` and ``labels`` ``(*lead, b)``.
        bound : float or None
            Clipping level tau; ``None`` sums the raw gradients.
        mask : bool array, shape ``(*lead, b)``, optional
            Samples to include (padding rows are ``False``).
        feature_sq_norms : array, shape ``(*lead, b)``, optional
            ``||a_j||^2`` of the batch's rows (:func:`~rfed.problems.outer_gradients.row_sq_norms`
            of ``batch['features']``, e.g. gathered from the data set's, computed once);
            computed here otherwise. Used when ``takes_feature_sq_norms`` is true.

        Returns
        -------
        total : array, shape ``(*lead, d)``
        n_clipped : int array, shape ``lead``
            How many included samples had ``||g_j|| > bound``.
        """
        if not self._outer_gradients:
            return super().clipped_grad_sum(x, batch, bound, mask)
        x = np.asarray(x, dtype=float)
        a = batch["features"]
        # one point: the matrix-vector product the stacked form takes per point
        ax = a @ x if x.ndim == 1 else np.matmul(a, x[..., None])[..., 0]
        margins = batch["labels"] * ax
        coef = self._dloss_dmargin(margins) * batch["labels"]          # (*lead, b)
        shared = None
        if self.regularizer.strength:
            shared = np.broadcast_to(self.regularizer.subgrad(x), x.shape)
        return outer_clipped_sum(a, coef[..., None], bound, mask, shared=shared,
                                 feature_sq_norms=feature_sq_norms)

    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """All valid samples: features ``(N, d)`` and labels ``(N,)``.

        Returns
        -------
        features : array, shape ``(N, d)``
        labels : array, shape ``(N,)``
        """
        return self.data["features"][self.mask], self.data["labels"][self.mask]

    def accuracy(self, x: np.ndarray, features: np.ndarray | None = None,
                 labels: np.ndarray | None = None) -> float:
        """Fraction of samples with ``sign(a^T x) == b`` (the pooled training set by default;
        on a shard with a reducer, the agents' correct counts summed over the processes: the
        same bits, as the counts are exact).

        Parameters
        ----------
        x : array, shape ``(d,)``
            One point.
        features : array, shape ``(N, d)``, optional
            Samples (default: the pooled training set).
        labels : array, shape ``(N,)``, optional
            Their labels in {-1, +1}.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``x``, ``features`` or ``labels`` of another shape (naming the argument).
        """
        if features is not None:
            x, features, labels = held_out_samples(x, features, labels,
                                                   self.manifold.point_shape, self.dim)
        if features is None and self.is_shard:
            data, mask = self.agent_data(self.agents)
            right = np.where(data["features"] @ x >= 0, 1.0, -1.0) == data["labels"]
            correct = np.sum(right & mask, axis=1).astype(float)
            return float(self._reducer_for("accuracy(x)").agent_sum(correct) / self.n_samples)
        if features is None:
            features, labels = self._pooled_view()
        return float(np.mean(np.where(features @ x >= 0, 1.0, -1.0) == labels))

    def _pooled_view(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pooled` without its copy when no agent has padding rows: the data's own
        arrays reshaped to ``(N, d)`` and ``(N,)`` (the same rows in the same order and
        layout, so a product with them has the copy's bits; at 100,000 x 2,000 the copy costs
        ten times the product)."""
        feats, labels = self.data["features"], self.data["labels"]
        if self.mask.all() and feats.flags.c_contiguous and labels.flags.c_contiguous:
            return feats.reshape(-1, feats.shape[-1]), labels.reshape(-1)
        return self.pooled()


class LogisticRegression(LinearProblem):
    r"""Logistic regression ``l(x; a, b) = log(1 + exp(-b a^T x))`` plus ``h`` (DO-ADP Sec. VI-A).

    With ``regularizer = L2Regularizer(1/q)`` this is DO-ADP's objective exactly. The reference
    optimum is computed by scipy's L-BFGS on the pooled objective with ``gtol = 1e-12`` (smooth
    regularizers only).

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, d)``
    labels : array, shape ``(n_agents, n_max)``, values in {-1, +1}
    regularizer : Regularizer, optional
        Default: none (``L2Regularizer(0)``).
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (the rest is padding).
    feature_bound : float, optional
        A PUBLIC bound on the rows' norm, enforced by scaling longer rows onto it; the
        per-sample gradient norm is then at most ``feature_bound`` (see :class:`LinearProblem`).
    """

    name = "logistic"

    def sample_data_loss(self, x, batch):
        return np.logaddexp(0.0, -self._margins(x, batch))

    def _dloss_dmargin(self, margins):
        # d/dm log(1 + e^{-m}) = -sigmoid(-m), written stably for large |m|
        return -0.5 * (1.0 - np.tanh(0.5 * margins))

    def smoothness(self) -> float:
        """Lipschitz constant of the per-sample gradient: ``max ||a||^2 / 4 + mu``.

        Returns
        -------
        float
        """
        # the bound is None only when every feature row is zero: the data term is then constant
        bound = 0.0 if self.gradient_bound is None else self.gradient_bound
        return bound**2 / 4 + self.regularizer.modulus

    def _compute_reference(self) -> np.ndarray:
        if isinstance(self.regularizer, L1Regularizer) and self.regularizer.strength > 0:
            raise NotImplementedError("the l1-regularized logistic reference is not implemented")
        a, b = self.pooled()
        ab = a * b[:, None]
        mu = self.regularizer.strength

        def fun(x):
            m = ab @ x
            f = np.mean(np.logaddexp(0.0, -m)) + 0.5 * mu * x @ x
            g = -(ab.T @ (0.5 * (1.0 - np.tanh(0.5 * m)))) / len(m) + mu * x
            return f, g

        res = sopt.minimize(fun, np.zeros(a.shape[1]), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20000,
                                     "maxcor": 30})
        return res.x


def _svm_reference_input(margins_matrix: np.ndarray, weight: float, name: str) -> np.ndarray:
    """The rows ``b_j a_j`` as a float ``(N, d)`` array, and a check of the regularizer weight."""
    c_rows = np.asarray(margins_matrix, dtype=float)
    if c_rows.ndim != 2 or c_rows.shape[0] < 1:
        raise ValueError(f"argument 'margins_matrix' must have shape (N, d), got {c_rows.shape}")
    if not (np.isfinite(weight) and weight > 0):
        raise ValueError(f"argument '{name}' must be a finite number > 0, got {weight!r}")
    return c_rows


def l1_svm_reference(margins_matrix: np.ndarray, phi: float, tol: float = 1e-9
                     ) -> tuple[np.ndarray, float]:
    r"""Exact l1-SVM optimum by the DUAL linear program, with a certified duality gap.

    Primal (``C`` the rows ``c_j = b_j a_j``, ``N`` of them, dimension ``d``):
    ``P(x) = (1/N) sum_j max(0, 1 - c_j^T x) + phi ||x||_1``. Its LP dual is

    ``max_beta sum_j beta_j``  s.t. ``0 <= beta_j <= 1/N``, ``-phi <= (C^T beta)_k <= phi``,

    a program with ``2d`` inequality rows and ``N`` bounded columns, so the simplex basis has
    ``2d`` rows however large ``N`` is (the primal form with one slack per sample has an
    ``N``-row basis: minutes at ``N = 5,000``, ``d = 2,000``). HiGHS solves it; the primal
    ``x = u - v`` is read off the multipliers of the two constraint blocks (the LP's strong
    duality). The gap is certified independently of the solver: ``beta`` is clipped to its box
    and scaled into ``||C^T beta||_inf <= phi``, which makes it dual feasible exactly, so
    ``sum beta <= P* <= P(x)``.

    Parameters
    ----------
    margins_matrix : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    phi : float
        ``> 0``.
    tol : float
        Largest accepted certified gap ``P(x) - sum beta`` (absolute).

    Returns
    -------
    x : ndarray, shape ``(d,)``
    gap : float
        The certified duality gap, ``>= P(x) - P*``.
    """
    c_rows = _svm_reference_input(margins_matrix, phi, "phi")
    n, d = c_rows.shape
    ct = c_rows.T
    res = sopt.linprog(-np.ones(n), A_ub=np.vstack([ct, -ct]), b_ub=np.full(2 * d, phi),
                       bounds=(0.0, 1.0 / n), method="highs",
                       options={"primal_feasibility_tolerance": 1e-10,
                                "dual_feasibility_tolerance": 1e-10})
    if res.status != 0:
        raise RuntimeError(f"l1-SVM reference LP failed: {res.message}")
    mult = -res.ineqlin.marginals  # >= 0: multipliers of C^T beta <= phi, -C^T beta <= phi
    x = mult[:d] - mult[d:]
    beta = np.clip(res.x, 0.0, 1.0 / n)
    worst = np.max(np.abs(ct @ beta))
    if worst > phi:
        beta = beta * (phi / worst)
    primal = float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + phi * np.abs(x).sum())
    gap = primal - float(beta.sum())
    if gap > tol * max(1.0, abs(primal)):
        raise RuntimeError(f"l1-SVM reference: certified duality gap {gap:.3g} above "
                           f"{tol:g} (relative); the LP solve was inexact")
    return x, max(gap, 0.0)


def l2_svm_reference(margins_matrix: np.ndarray, mu: float, tol: float = 1e-9
                     ) -> tuple[np.ndarray, float]:
    r"""l2-SVM optimum by smoothing continuation in the primal, with a certified duality gap.

    Primal (``C`` the rows ``c_j = b_j a_j``, ``N`` of them, dimension ``d``):
    ``P(x) = (1/N) sum_j max(0, 1 - c_j^T x) + (mu/2) ||x||^2``; dual
    ``D(alpha) = (1/N) sum alpha_j - (1/(2 mu)) ||(1/N) C^T alpha||^2`` over ``0 <= alpha <= 1``,
    with ``D(alpha) <= P* <= P(x)`` for every such ``alpha`` and every ``x``. The hinge is
    replaced by its quadratic smoothing of width ``s`` (``(1 - m)^2 / (2 s)`` on
    ``1 - s < m < 1``; it is below the hinge by at most ``s/2``), and the smooth, ``mu``-strongly
    convex ``d``-dimensional problem is minimised by L-BFGS for ``s = 10^-1, 10^-2, ...``,
    warm-started, until the gap ``P(x) - D(alpha)`` at ``alpha_j = -h_s'(m_j) in [0, 1]`` (the
    smoothed loss' slope, dual feasible) is at most ``tol``. Each step costs two products with
    ``C`` (``N d`` operations), unlike a dual solve over ``N`` box-constrained variables, whose
    conditioning worsens with ``N`` (minutes at ``N = 15,000``).

    The continuation alone may stall above ``tol``: at widths near ``1e-7`` L-BFGS stops on
    rounding, and where it stops depends on the summation order of the products with ``C`` (the
    BLAS threads), so the same data could pass on two threads and fail on one. When no width
    certifies ``tol``, each iterate is polished by its active set (:func:`_l2_svm_polish`): the
    samples inside the width's band are taken on the margin, those below it as violating, and
    the optimality conditions restricted to that guess are solved exactly; the dual point so
    found certifies its own primal point ``x = C^T alpha / (N mu)`` to rounding error once the
    guess is the optimum's (a few widths in), whatever the summation order.

    Parameters
    ----------
    margins_matrix : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    mu : float
        ``> 0``.
    tol : float
        Largest accepted certified gap, relative to ``max(1, P(x))``.

    Returns
    -------
    x : ndarray, shape ``(d,)``
    gap : float
        The certified duality gap, ``>= P(x) - P*``.
    """
    c_rows = _svm_reference_input(margins_matrix, mu, "mu")
    n, d = c_rows.shape

    def primal(x):
        return float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + 0.5 * mu * x @ x)

    def dual(alpha):
        v = c_rows.T @ alpha / n
        return float(alpha.mean() - v @ v / (2 * mu))

    x, width, gap = np.zeros(d), 0.1, np.inf
    tried = []
    for _ in range(14):
        def smoothed(x, width=width):
            slack = 1.0 - c_rows @ x
            alpha = np.clip(slack / width, 0.0, 1.0)  # -h_s'(m), in [0, 1]
            loss = np.where(slack >= width, slack - 0.5 * width, 0.5 * alpha * slack)
            return (float(loss.mean() + 0.5 * mu * x @ x),
                    -(c_rows.T @ alpha) / n + mu * x)

        x = sopt.minimize(smoothed, x, jac=True, method="L-BFGS-B",
                          options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 20000,
                                   "maxcor": 30}).x
        alpha = np.clip((1.0 - c_rows @ x) / width, 0.0, 1.0)
        value = primal(x)
        gap = value - dual(alpha)
        if gap <= tol * max(1.0, value):
            return x, max(gap, 0.0)
        tried.append((gap, width, x))
        width /= 10.0
    # the continuation stalled on rounding: polish its iterates, the most accurate first
    for _, band, guess in sorted(tried, key=lambda item: item[0]):
        x, alpha = _l2_svm_polish(c_rows, mu, guess, band)
        value = primal(x)
        polished = value - dual(alpha)
        if polished <= tol * max(1.0, value):
            return x, max(polished, 0.0)
        gap = min(gap, polished)
    raise RuntimeError(f"l2-SVM reference: certified duality gap {gap:.3g} above {tol:g} "
                       "(relative) after the smoothing continuation and its active-set polish")


def _l2_svm_polish(c_rows: np.ndarray, mu: float, x: np.ndarray, band: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    r"""The l2-SVM's exact optimum for the active set guessed from ``x``: ``(x, alpha)``.

    The optimum has ``alpha_j = 1`` where ``m_j = c_j^T x < 1``, ``alpha_j = 0`` where
    ``m_j > 1`` and ``m_j = 1`` on the margin set ``E`` (``alpha_E`` in ``[0, 1]``), with
    ``x = C^T alpha / (N mu)``. Guessing ``E = {|m_j - 1| < band}`` and ``L = {m_j <= 1 - band}``
    from ``x``, ``c_E^T x = 1`` is the linear system
    ``(C_E C_E^T / (N mu)) alpha_E = 1 - C_E g / mu`` with ``g = (1/N) sum_L c_j`` (least
    squares if ``C_E`` has dependent rows). ``alpha_E`` is clipped to ``[0, 1]``, so the
    returned ``alpha`` is dual feasible and ``x = C^T alpha / (N mu)`` is its primal point:
    the gap they certify is exact for whatever guess, and zero up to rounding for the right
    one.

    Parameters
    ----------
    c_rows : array, shape ``(N, d)``
    mu : float
    x : array, shape ``(d,)``
        The point whose margins give the guess.
    band : float
        Half-width of the margin band.

    Returns
    -------
    x : ndarray, shape ``(d,)``
    alpha : ndarray, shape ``(N,)``, in ``[0, 1]``
    """
    n = c_rows.shape[0]
    margins = c_rows @ x
    on_margin = np.abs(margins - 1.0) < band
    violating = margins <= 1.0 - band
    alpha = violating.astype(float)
    c_e = c_rows[on_margin]
    if c_e.shape[0]:
        g = c_rows[violating].sum(axis=0) / n
        lhs = c_e @ c_e.T / (n * mu)
        alpha[on_margin] = np.clip(np.linalg.lstsq(lhs, 1.0 - c_e @ g / mu, rcond=None)[0],
                                   0.0, 1.0)
    return c_rows.T @ alpha / (n * mu), alpha


#: Above this many pooled samples, :class:`HingeSVM` computes its reference optimum with the
#: scalable solvers (:func:`l2_svm_dual_cd`, :func:`l1_svm_working_set`); at or below it, with
#: the exact small-size ones (:func:`l2_svm_reference`, :func:`l1_svm_reference`). Both certify
#: their duality gap; a test keeps the two families equal to it on small data.
SCALABLE_REFERENCE_SAMPLES = 5000


def _l2_svm_certificate(c_rows: np.ndarray, mu: float, alpha: np.ndarray
                        ) -> tuple[np.ndarray, float, float]:
    r"""The l2-SVM's primal point of a dual point, and the gap they certify.

    ``alpha`` is clipped to the box ``[0, 1]`` (so it is dual feasible whatever the solver
    returned), ``x = C^T alpha / (N mu)`` and ``gap = P(x) - D(alpha)``, both evaluated here on
    all ``N`` rows, independently of how ``alpha`` was found.

    Parameters
    ----------
    c_rows : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    mu : float
    alpha : array, shape ``(N,)``

    Returns
    -------
    x : ndarray, shape ``(d,)``
    primal : float
        ``P(x)``.
    gap : float
        ``P(x) - D(alpha) >= P(x) - P*``.
    """
    n = c_rows.shape[0]
    alpha = np.clip(alpha, 0.0, 1.0)
    v = c_rows.T @ alpha / n
    x = v / mu
    primal = float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + 0.5 * mu * x @ x)
    dual = float(alpha.mean() - v @ v / (2 * mu))
    return x, primal, primal - dual


def l2_svm_dual_cd(margins_matrix: np.ndarray, mu: float, tol: float = 1e-9,
                   rng: np.random.Generator | int = 0, max_epochs: int = 2000
                   ) -> tuple[np.ndarray, float]:
    r"""l2-SVM optimum by dual coordinate descent with shrinking, with a certified duality gap.

    The method of Hsieh, Chang, Lin, Keerthi and Sundararajan (ICML 2008, Algorithm 3) for the
    hinge loss, in this module's scaling: the dual
    ``D(alpha) = (1/N) sum alpha_j - (1/(2 mu)) ||(1/N) C^T alpha||^2`` over ``0 <= alpha <= 1``
    (``C`` the rows ``c_j = b_j a_j``) is maximised one coordinate at a time, in a fresh random
    order each pass, by the exact clipped Newton step
    ``alpha_j <- clip(alpha_j - (c_j^T w - 1) N mu / ||c_j||^2, 0, 1)`` while
    ``w = C^T alpha / (N mu)`` is kept up to date (``2 d`` operations per step). Shrinking:
    a coordinate at a bound whose projected gradient passed the previous pass' extreme is left
    out of the following passes. The stopping rule is the certified gap, not the projected
    gradient: every ``N`` steps (and whenever the shrunk problem's projected gradients vanish)
    :func:`_l2_svm_certificate` re-forms ``x = C^T alpha / (N mu)`` from ``alpha`` on all rows
    and evaluates ``P(x) - D(alpha)``; shrinking never affects the certificate, and a shrunk
    problem that is solved without certifying is un-shrunk.

    Parameters
    ----------
    margins_matrix : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    mu : float
        ``> 0``.
    tol : float
        Largest accepted certified gap, relative to ``max(1, P(x))``; ``> 0``.
    rng : numpy.random.Generator or int
        The pass orders' randomness (an int seeds a generator).
    max_epochs : int
        At most this many multiples of ``N`` coordinate steps; ``>= 1``.

    Returns
    -------
    x : ndarray, shape ``(d,)``
    gap : float
        The certified duality gap, ``>= P(x) - P*``.

    Raises
    ------
    RuntimeError
        When ``max_epochs`` ends above ``tol``.
    """
    c_rows = _svm_reference_input(margins_matrix, mu, "mu")
    tol = _positive(tol, "tol")
    max_epochs = _count(max_epochs, "max_epochs")
    rng = np.random.default_rng(rng)
    n = c_rows.shape[0]
    sq_norms = np.einsum("ij,ij->i", c_rows, c_rows)
    scale = n * mu
    # a zero row's alpha_j enters D linearly only: its optimum is 1 (its hinge is 1 whatever x)
    alpha = (sq_norms == 0).astype(float)
    w = np.zeros(c_rows.shape[1])
    everything = np.flatnonzero(sq_norms > 0)   # a zero row's alpha does not enter D
    active = everything
    grad_hi, grad_lo = np.inf, -np.inf           # previous pass' projected gradient extremes
    steps, since_check, gap = 0, 0, np.inf
    while True:
        order = active[rng.permutation(active.size)]
        keep, hi, lo = _l2_dual_cd_pass(c_rows, sq_norms, scale, alpha, w, order, grad_hi,
                                        grad_lo)
        steps += order.size
        since_check += order.size
        active = order[keep]
        solved = not (hi - lo > 1e-12 * max(1.0, abs(hi), abs(lo)))
        grad_hi = hi if hi > 0 else np.inf
        grad_lo = lo if lo < 0 else -np.inf
        if since_check >= n or solved or steps >= max_epochs * n:
            since_check = 0
            x, primal, gap = _l2_svm_certificate(c_rows, mu, alpha)
            if gap <= tol * max(1.0, primal):
                return x, max(gap, 0.0)
            w = x.copy()                        # re-synchronised with alpha
            if steps >= max_epochs * n:
                break
            if solved:                          # the shrunk problem is done: un-shrink
                active, grad_hi, grad_lo = everything, np.inf, -np.inf
    raise RuntimeError(f"l2-SVM reference (dual coordinate descent): certified duality gap "
                       f"{gap:.3g} above {tol:g} (relative) after max_epochs={max_epochs}")


def _l2_dual_cd_pass(c_rows: np.ndarray, sq_norms: np.ndarray, scale: float, alpha: np.ndarray,
                     w: np.ndarray, order: np.ndarray, grad_hi: float, grad_lo: float
                     ) -> tuple[np.ndarray, float, float]:
    r"""One pass of :func:`l2_svm_dual_cd` over the rows ``order``, updating ``alpha`` and ``w``
    in place (Hsieh et al. 2008, Algorithm 3's inner loop).

    Parameters
    ----------
    c_rows : array, shape ``(N, d)``
    sq_norms : array, shape ``(N,)``
        ``||c_j||^2``.
    scale : float
        ``N mu``: ``w = C^T alpha / scale``.
    alpha : array, shape ``(N,)``
        Updated in place.
    w : array, shape ``(d,)``
        Updated in place.
    order : array of int
        The rows of this pass, in order.
    grad_hi, grad_lo : float
        The previous pass' largest and smallest projected gradients (shrinking thresholds).

    Returns
    -------
    keep : ndarray of bool, shape ``order.shape``
        False for the rows shrunk away.
    hi, lo : float
        This pass' largest and smallest projected gradients.
    """
    keep = np.ones(order.size, dtype=bool)
    hi, lo = -np.inf, np.inf
    for k, j in enumerate(order.tolist()):
        row = c_rows[j]
        grad = float(row @ w) - 1.0         # d(-N D)/d alpha_j
        a_j = alpha[j]
        if a_j == 0.0:
            if grad > grad_hi:
                keep[k] = False
                continue
            projected = min(grad, 0.0)
        elif a_j == 1.0:
            if grad < grad_lo:
                keep[k] = False
                continue
            projected = max(grad, 0.0)
        else:
            projected = grad
        hi, lo = max(hi, projected), min(lo, projected)
        if projected != 0.0:
            new = min(max(a_j - grad * scale / sq_norms[j], 0.0), 1.0)
            w += ((new - a_j) / scale) * row
            alpha[j] = new
    return keep, hi, lo


def _l1_svm_certificate(c_rows: np.ndarray, phi: float, x: np.ndarray, beta: np.ndarray
                        ) -> tuple[float, float, np.ndarray, np.ndarray]:
    r"""The l1-SVM's duality gap certified by ``(x, beta)``, evaluated on all rows.

    ``beta`` is clipped to its box ``[0, 1/N]`` and scaled into ``||C^T beta||_inf <= phi``,
    which makes it feasible for the dual LP ``max sum beta`` whatever the solver returned, so
    ``sum beta <= P* <= P(x)``.

    Parameters
    ----------
    c_rows : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    phi : float
    x : array, shape ``(d,)``
    beta : array, shape ``(N,)``

    Returns
    -------
    primal : float
        ``P(x)``.
    gap : float
        ``P(x) - sum beta >= P(x) - P*`` for the feasible ``beta``.
    margins : ndarray, shape ``(N,)``
        ``C x``.
    correlations : ndarray, shape ``(d,)``
        ``C^T beta`` of the clipped, unscaled ``beta`` (the dual constraints' values).
    """
    n = c_rows.shape[0]
    beta = np.clip(beta, 0.0, 1.0 / n)
    correlations = c_rows.T @ beta
    worst = np.max(np.abs(correlations))
    if worst > phi:
        beta = beta * (phi / worst)
    margins = c_rows @ x
    primal = float(np.mean(np.maximum(0.0, 1.0 - margins)) + phi * np.abs(x).sum())
    return primal, primal - float(beta.sum()), margins, correlations


def _l1_restricted_lp(c_free: np.ndarray, n_phi: float, linear: np.ndarray, lower: np.ndarray,
                      upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The l1-SVM restricted to a working set, as a linear program (HiGHS), times ``N``.

    ``min_x  sum_{j free} max(0, 1 - c_j^T x) - linear^T x + N phi ||x||_1`` over the kept
    features' box ``lower <= x <= upper``, with ``x = u - v`` (``u, v >= 0``) and one slack per
    free row.

    Parameters
    ----------
    c_free : array, shape ``(F, K)``
        The free rows restricted to the kept features.
    n_phi : float
        ``N phi``.
    linear : array, shape ``(K,)``
        ``sum_j c_j`` over the rows fixed below the margin (their hinge is ``1 - c_j^T x``).
    lower, upper : array, shape ``(K,)``
        The box (``-inf`` / ``inf`` allowed).

    Returns
    -------
    x : ndarray, shape ``(K,)``
    beta : ndarray, shape ``(F,)``
        The free rows' multipliers, in ``[0, 1]`` (``N`` times the dual LP's ``beta``).
    """
    n_free, k = c_free.shape
    cost = np.concatenate([n_phi - linear, n_phi + linear, np.ones(n_free)])
    bounds = np.column_stack([
        np.concatenate([np.maximum(0.0, lower), np.maximum(0.0, -upper), np.zeros(n_free)]),
        np.concatenate([np.maximum(0.0, upper), np.maximum(0.0, -lower),
                        np.full(n_free, np.inf)])])
    a_ub = None
    if n_free:
        c_sparse = sp.csr_matrix(c_free)
        a_ub = sp.hstack([-c_sparse, c_sparse, -sp.identity(n_free)], format="csr")
    res = sopt.linprog(cost, A_ub=a_ub, b_ub=-np.ones(n_free) if n_free else None,
                       bounds=bounds, method="highs",
                       options={"primal_feasibility_tolerance": 1e-10,
                                "dual_feasibility_tolerance": 1e-10})
    if res.status != 0:
        raise RuntimeError(f"l1-SVM reference: a working-set LP failed: {res.message}")
    beta = (np.clip(-res.ineqlin.marginals, 0.0, 1.0) if n_free else np.zeros(0))
    return res.x[:k] - res.x[k:2 * k], beta


def _l1_svm_stage(c_rows: np.ndarray, phi: float, x0: np.ndarray | None, tol: float,
                  max_iter: int) -> tuple[np.ndarray, float, float]:
    r"""One size of :func:`l1_svm_working_set`: the working-set iteration from ``x0``.

    Parameters
    ----------
    c_rows : array, shape ``(N, d)``
    phi : float
    x0 : array, shape ``(d,)``, or None
        The previous size's solution (None: all rows free, no trust region).
    tol : float
    max_iter : int

    Returns
    -------
    x : ndarray, shape ``(d,)``
        The certified point, or the best one after ``max_iter`` iterations.
    primal : float
        ``P(x)``.
    gap : float
        Its certified gap (``inf`` when none of the iterates reached ``tol``: the best one has
        no certificate of its own then, its gap is the last computed).
    """
    n, d = c_rows.shape
    band = _L1_BAND
    if x0 is None:
        free = np.arange(n)
        below = np.zeros(n, dtype=bool)
        kept = np.argsort(-np.abs(c_rows.sum(axis=0)), kind="stable")[:min(d, _L1_FEATURES)]
        radius = np.inf
        best_x, best_primal = np.zeros(d), 1.0         # P(0) = 1
    else:
        margins = c_rows @ x0
        free = np.flatnonzero(np.abs(margins - 1.0) <= band)
        below = margins < 1.0 - band
        kept = np.flatnonzero(x0)
        if kept.size == 0:
            kept = np.argsort(-np.abs(c_rows.sum(axis=0)), kind="stable")[:min(d, _L1_FEATURES)]
        radius = max(float(np.max(np.abs(x0))), 1e-3) * _L1_FIRST_RADIUS
        best_x = x0
        best_primal = float(np.mean(np.maximum(0.0, 1.0 - margins)) + phi * np.abs(x0).sum())
    gap = np.inf
    for _ in range(max_iter):
        below[free] = False
        linear = below.astype(float) @ c_rows
        centre = best_x[kept]
        x_kept, beta_free = _l1_restricted_lp(c_rows[np.ix_(free, kept)], n * phi,
                                              linear[kept], centre - radius, centre + radius)
        x = np.zeros(d)
        x[kept] = x_kept
        beta = below.astype(float)
        beta[free] = beta_free
        primal, gap, margins, correlations = _l1_svm_certificate(c_rows, phi, x, beta / n)
        if gap <= tol * max(1.0, primal):
            return x, primal, max(gap, 0.0)
        if x0 is None:     # the first size: every row stays free, the LP is bounded
            best_x, best_primal = x, primal
        elif primal < best_primal:
            if np.max(np.abs(x_kept - centre), initial=0.0) >= radius * (1 - 1e-9):
                radius *= 2.0                          # the step stopped at the region's edge
            best_x, best_primal = x, primal
            # free rows at a bound and clearly off the margin are fixed on their side
            at_bound = (beta_free >= 1.0 - 1e-12) | (beta_free <= 1e-12)
            off = at_bound & (np.abs(margins[free] - 1.0) > band)
            below[free[off & (margins[free] < 1.0)]] = True
            free = free[~off]
        else:
            radius /= 4.0
        # rows whose fixed side the new point contradicts become free (none on the first size)
        above = ~below
        above[free] = False
        wrong = np.flatnonzero((below & (margins > 1.0)) | (above & (margins < 1.0)))
        if wrong.size > max(_L1_JOIN, free.size):   # the most contradicted first
            wrong = wrong[np.argsort(-np.abs(margins[wrong] - 1.0), kind="stable")
                          [:max(_L1_JOIN, free.size)]]
        free = np.union1d(free, wrong)
        # features whose dual constraint |(C^T beta)_k| <= N phi is violated join, worst first
        outside = np.ones(d, dtype=bool)
        outside[kept] = False
        violated = np.flatnonzero(outside & (np.abs(correlations) > phi * (1 + 1e-12)))
        if violated.size:
            worst = violated[np.argsort(-np.abs(correlations[violated]), kind="stable")]
            kept = np.union1d(kept, worst[:max(_L1_FEATURES // 2, kept.size)])
    return best_x, best_primal, gap


#: Half-width of the margin band whose rows a working set starts with (l1 working set).
_L1_BAND = 1e-2
#: The first trust region's half-width, relative to the warm start's largest coordinate.
_L1_FIRST_RADIUS = 0.25
#: At most this many rows (or as many as are free) join the free rows in one iteration.
_L1_JOIN = 1000
#: Features of the first working set (largest ``|sum_j c_jk|``), and the most added at once.
_L1_FEATURES = 200


def l1_svm_working_set(margins_matrix: np.ndarray, phi: float, tol: float = 1e-9,
                       rng: np.random.Generator | int = 0, max_iter: int = 200,
                       first_rows: int = 300, growth: int = 5) -> tuple[np.ndarray, float]:
    r"""l1-SVM optimum by working sets of rows and features, with a certified duality gap.

    The same problem as :func:`l1_svm_reference`,
    ``P(x) = (1/N) sum_j max(0, 1 - c_j^T x) + phi ||x||_1``, solved as a sequence of small
    linear programs, in the spirit of the column-and-constraint generation of Dedieu, Mazumder
    and Wang, "Solving L1-regularized SVMs and related linear programs: revisiting the
    effectiveness of column and constraint generation" (JMLR 2022, arXiv:1901.01585). At the
    optimum only the rows on the margin (``c_j^T x = 1``) and the nonzero features enter the
    basis (a few hundred at ``N = 100,000``, ``d = 2,000``); every other row is below the margin
    (its hinge is the linear ``1 - c_j^T x``, dual ``beta_j = 1/N``) or above it (hinge 0,
    ``beta_j = 0``).
    So each iteration solves, by HiGHS, the problem restricted to

    * the kept features (the others held at 0),
    * the free rows, whose hinges stay exact, with the rows fixed below the margin summed
      into one linear term and the rows fixed above it dropped,
    * a box (trust region) around the best point so far, doubled when a step that improved
      ``P`` stopped on its edge, quartered when a step did not improve ``P`` (the linear term
      of the fixed rows is unbounded below without it),

    then prices all ``N`` rows and ``d`` features at the new point: rows whose fixed side the
    point contradicts become free; free rows at a bound and more than ``0.01`` off the margin
    are fixed; features whose dual constraint ``|(C^T beta)_k| <= phi`` is violated join.
    The first working set comes from the same iteration on ``first_rows`` rows drawn at random
    (all rows free), its solution warm-starting ``growth`` times more rows, and so on up to
    ``N``. The stopping rule is the gap certified by :func:`_l1_svm_certificate` on all rows:
    the LP's ``beta`` (``1/N`` on the rows fixed below) clipped to its box and scaled into
    ``||C^T beta||_inf <= phi``, so the dual is feasible whatever the LPs returned; the gap is
    zero up to rounding once the working sets are the optimum's.

    Parameters
    ----------
    margins_matrix : array, shape ``(N, d)``
        The rows ``b_j a_j``.
    phi : float
        ``> 0``.
    tol : float
        Largest accepted certified gap, relative to ``max(1, P(x))``; ``> 0``.
    rng : numpy.random.Generator or int
        Draws the rows of the smaller sizes (an int seeds a generator).
    max_iter : int
        Iterations per size, ``>= 1``.
    first_rows : int
        Rows of the first size, ``>= 1``.
    growth : int
        Each size has this many times the rows of the previous one, ``>= 2``.

    Returns
    -------
    x : ndarray, shape ``(d,)``
    gap : float
        The certified duality gap, ``>= P(x) - P*``.

    Raises
    ------
    RuntimeError
        When the last size ends ``max_iter`` iterations above ``tol``.
    """
    c_rows = _svm_reference_input(margins_matrix, phi, "phi")
    tol = _positive(tol, "tol")
    max_iter = _count(max_iter, "max_iter")
    first_rows = _count(first_rows, "first_rows")
    growth = _count(growth, "growth", least=2)
    rng = np.random.default_rng(rng)
    n = c_rows.shape[0]
    order = rng.permutation(n)
    size = min(n, first_rows)
    x: np.ndarray | None = None
    while True:
        # a smaller size's rows are a copy (at most N / growth of them); the last is all rows
        rows = c_rows if size == n else c_rows[np.sort(order[:size])]
        x, primal, gap = _l1_svm_stage(rows, phi, x, tol, max_iter)
        if size == n:
            break
        size = min(n, size * growth)
    if not gap <= tol * max(1.0, primal):
        raise RuntimeError(f"l1-SVM reference (working sets): certified duality gap {gap:.3g} "
                           f"above {tol:g} (relative) after max_iter={max_iter} iterations")
    return x, gap


def _positive(value: float, name: str) -> float:
    """``value`` as a finite float ``> 0``, or a ValueError naming ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"argument '{name}' must be a finite number > 0, got {value!r}")
    return number


def _count(value: int, name: str, least: int = 1) -> int:
    """``value`` as an int ``>= least``, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"argument '{name}' must be an integer >= {least}, got {value!r}")
    return int(value)


class HingeSVM(LinearProblem):
    r"""Hinge-loss SVM ``l(x; a, b) = max(0, 1 - b a^T x)`` plus ``h`` (DP-DDA eqs. (26)-(27)).

    Subgradient of one sample: ``-b a`` when ``b a^T x < 1``, else 0. The
    per-sample Lipschitz constant is ``max ||a||`` (1 for unit-norm rows; :ref:`dpdda-lipschitz`).

    Reference optimum (independent of rfed, on the pooled objective with ``N`` samples), with
    its duality gap certified ``<= 1e-9`` (relative to ``max(1, F)``) and kept as
    :attr:`reference_gap`:

    * l1 (``h = phi ||x||_1``): up to :data:`SCALABLE_REFERENCE_SAMPLES` samples, the linear
      program of :func:`l1_svm_reference`, solved by HiGHS in its dual form; above, the
      working-set LPs of :func:`l1_svm_working_set`;
    * l2 (``h = (mu/2)||x||^2``): up to :data:`SCALABLE_REFERENCE_SAMPLES` samples,
      :func:`l2_svm_reference`, a smoothing continuation in the primal; above, the dual
      coordinate descent of :func:`l2_svm_dual_cd`; both certified by the QP dual
      ``max (1/N) sum alpha - (1/(2 mu)) ||(1/N) sum alpha_j b_j a_j||^2``, ``0 <= alpha <= 1``.

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, d)``
    labels : array, shape ``(n_agents, n_max)``, values in {-1, +1}
    regularizer : Regularizer, optional
        :class:`L2Regularizer` or :class:`L1Regularizer` (default: none).
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (the rest is padding).
    feature_bound : float, optional
        A PUBLIC bound on the rows' norm, enforced by scaling longer rows onto it; the
        per-sample subgradient norm is then at most ``feature_bound`` (see
        :class:`LinearProblem`).
    """

    name = "svm"
    #: The certified duality gap of the computed reference (``>= F(x*) - F*``, absolute);
    #: None until :meth:`reference_point` computes it, or when set by :meth:`set_reference`.
    reference_gap: float | None = None
    #: The name of the solver that computed the reference (None until then).
    reference_solver: str | None = None

    def set_reference(self, point: np.ndarray) -> None:
        """Use ``point`` as the reference solution (no certified gap: :attr:`reference_gap`
        becomes None).

        Parameters
        ----------
        point : array, shape ``(d,)``
            The reference solution.
        """
        super().set_reference(point)
        self.reference_gap = self.reference_solver = None

    def sample_data_loss(self, x, batch):
        return np.maximum(0.0, 1.0 - self._margins(x, batch))

    def _dloss_dmargin(self, margins):
        return np.where(margins < 1.0, -1.0, 0.0)

    def _compute_reference(self) -> np.ndarray:
        c_rows, labels = self.pooled()
        c_rows *= labels[:, None]   # pooled() is a copy: the rows b_j a_j in place, one array
        reg = self.regularizer
        scalable = c_rows.shape[0] > SCALABLE_REFERENCE_SAMPLES
        solver: Callable[[np.ndarray, float], tuple[np.ndarray, float]]
        if isinstance(reg, L1Regularizer):
            solver = l1_svm_working_set if scalable else l1_svm_reference
        elif not reg.strength > 0:
            raise ValueError("the SVM reference needs a regularizer with strength > 0")
        else:
            solver = l2_svm_dual_cd if scalable else l2_svm_reference
        x, gap = solver(c_rows, reg.strength)
        self.reference_gap, self.reference_solver = gap, solver.__name__
        return x
