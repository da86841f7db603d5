"""Hyperbolic structured prediction on the Lorentz model: PriRFed problem (6.3)."""

from __future__ import annotations

import warnings

import numpy as np

from rfed._checks import numeric_array
from rfed.manifolds.hyperboloid import Hyperboloid
from rfed.problems.base import Problem

__all__ = ["HyperbolicPrediction", "kernel_similarity", "kernel_weights"]

_KERNELS = ("paper", "conventional")


def kernel_weights(
    features: np.ndarray,
    query: np.ndarray,
    counts: np.ndarray,
    *,
    gamma: float,
    bandwidth: float,
    kernel: str = "paper",
) -> np.ndarray:
    r"""Each agent's kernel-ridge weights :math:`\alpha_i(w) = (K_i + \gamma I)^{-1} K_{i,w}`.

    PriRFed (Huang et al. 2024) problem (6.3), Sec. 6.3, computed locally by every agent from its
    own Gram matrix (batched over agents: one ``solve`` of shape ``(n_agents, n_max, n_max)``).

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, r)``
        The agents' inputs :math:`w_{i,j}`.
    query : array, shape ``(r,)``
        The test input :math:`w`.
    counts : int array, shape ``(n_agents,)``
        Valid rows per agent; padding rows get weight 0.
    gamma : float
        Ridge :math:`\gamma > 0`.
    bandwidth : float
        :math:`\bar v > 0`.
    kernel : {"paper", "conventional"}
        ``"paper"``: :math:`k(w, w') = \exp(-\|w - w'\|^2 / (2\bar v)^2)` exactly as printed
        (the default; :ref:`prirfed-hsp-constants`); ``"conventional"``: :math:`\exp(-\|w - w'\|^2 /
        (2\bar v^2))`.

    Returns
    -------
    array, shape ``(n_agents, n_max)``
    """
    if kernel not in _KERNELS:
        raise ValueError(f"argument 'kernel' must be one of {_KERNELS}, got {kernel!r}")
    if not gamma > 0 or not bandwidth > 0:
        raise ValueError(f"arguments 'gamma' and 'bandwidth' must be > 0, got {gamma}, {bandwidth}")
    scale = (2.0 * bandwidth) ** 2 if kernel == "paper" else 2.0 * bandwidth**2
    f = np.asarray(features, dtype=float)
    mask = np.arange(f.shape[1])[None, :] < np.asarray(counts)[:, None]
    sq = np.sum((f[:, :, None, :] - f[:, None, :, :]) ** 2, axis=-1)
    gram = np.exp(-sq / scale)
    pair = mask[:, :, None] & mask[:, None, :]
    eye = np.eye(f.shape[1])
    # padding rows/columns become identity rows: their weight solves to exactly 0
    gram = np.where(pair, gram, 0.0) + np.where(pair, gamma * eye, eye)
    kw = np.where(mask, np.exp(-np.sum((f - query) ** 2, axis=-1) / scale), 0.0)
    return np.linalg.solve(gram, kw[..., None])[..., 0]


_WEIGHTS = ("kernel_ridge", "kernel")


def kernel_similarity(features: np.ndarray, query: np.ndarray, *, bandwidth: float,
                      kernel: str = "paper") -> np.ndarray:
    r"""Per-record kernel values :math:`k(w_{i,j}, w)`, shape ``features.shape[:-1]``.

    Each value depends on its own record and the public query only (the per-record weights of
    ``HyperbolicPrediction(weights="kernel")``). ``kernel`` as in :func:`kernel_weights`.

    Parameters
    ----------
    features : array, shape ``(..., r)``
        The records' features.
    query : array, shape ``(r,)``
        The public test input ``w``.
    bandwidth : float
        ``vbar > 0``.
    kernel : {"paper", "conventional"}
        ``exp(-||w - w'||^2 / (2 vbar)^2)`` as printed, or ``exp(-||w - w'||^2 / (2 vbar^2))``.

    Returns
    -------
    ndarray, shape ``features.shape[:-1]``
        Values in ``(0, 1]``.
    """
    if kernel not in _KERNELS:
        raise ValueError(f"argument 'kernel' must be one of {_KERNELS}, got {kernel!r}")
    if not bandwidth > 0:
        raise ValueError(f"argument 'bandwidth' must be > 0, got {bandwidth}")
    scale = (2.0 * bandwidth) ** 2 if kernel == "paper" else 2.0 * bandwidth**2
    f = np.asarray(features, dtype=float)
    return np.exp(-np.sum((f - np.asarray(query, dtype=float)) ** 2, axis=-1) / scale)


class HyperbolicPrediction(Problem):
    r"""Structured prediction on :math:`H^d`: a kernel-weighted Frechet mean of the targets.

    PriRFed (Huang et al. 2024) problem (6.3), Sec. 6.3:

    .. math:: f_{i,j}(x) = \alpha_{i,j}(w)\,\mathrm{dist}^2(x, y_{i,j}), \qquad
              \mathrm{grad} f_{i,j}(x) = -2\,\alpha_{i,j}(w)\,\mathrm{Log}_x(y_{i,j}),

    with the corrected sign (the paper prints ``+2 alpha Exp_x^{-1}(y)``;
    :ref:`prirfed-hsp-gradient`).

    **Weights and what is protected.** Two choices of :math:`\alpha_{i,j}`:

    * ``weights="kernel_ridge"`` (the paper's): :math:`\alpha_i(w) = (K_i + \gamma I)^{-1}
      K_{i,w}` from the agent's own Gram matrix (:func:`kernel_weights`). Every weight depends on
      ALL of the agent's records, so replacing one record changes every per-sample loss: the
      problem sets ``coupled_records = True`` and the private trainers then use the sensitivity
      of a clipped mean whose every summand may change (DP-RSGD ``2 tau`` per step instead of
      ``2 tau / b``, no minibatch amplification; see :mod:`rfed.algorithms.federated.local`).
      Record-level privacy holds (a record = one pair ``(w_{i,j}, y_{i,j})``), at ``b`` times the
      noise. The weights may be negative, so :math:`f_{i,j}` may be nonconvex, and there is no
      public gradient bound (``gradient_bound`` is ``None`` unless given).
    * ``weights="kernel"`` (an rfed variant, Nadaraya-Watson numerator):
      :math:`\alpha_{i,j} = k(w_{i,j}, w) \in (0, 1]`, which depends on record ``j`` and the
      public query only. Replacing one record changes that record's per-sample loss only, so the
      usual ``2 tau / b`` holds (``coupled_records = False``); with :math:`\alpha \le 1` the
      paper's :math:`L_f = \max|\alpha| M` becomes the public ``M`` for the diameter bound ``M``.

    Constants (Sec. 6.3; :ref:`prirfed-hsp-constants`), from public quantities only: with
    ``weights="kernel"``, ``gradient_bound`` is :math:`M` (``lipschitz="paper"``) or :math:`2M`
    (``"derived"``) and ``smoothness`` :math:`M / \tanh M`. Whatever the weights, the trainers clip
    every per-sample gradient to the public level they are given.

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, r)``
    targets : array, shape ``(n_agents, n_max, d + 1)``
        Points of :math:`H^d` (checked).
    query : array, shape ``(r,)``
        Test input :math:`w` whose structured output is predicted (public).
    counts : int array, shape ``(n_agents,)``, optional
    gamma, bandwidth : float
        Kernel ridge and bandwidth (paper: 1e-5 and 0.3).
    kernel : {"paper", "conventional"}
        See :func:`kernel_weights`.
    weights : {"kernel_ridge", "kernel"}
        See above.
    diameter : float
        :math:`M` (paper: 4), a public bound.
    lipschitz : {"paper", "derived"}
        Which public :math:`L_f` is the ``gradient_bound`` of ``weights="kernel"``.
    gradient_bound : float, optional
        Explicit public clipping level (overrides the above).
    """

    name = "hyperbolic-prediction"

    def __init__(
        self,
        features: np.ndarray,
        targets: np.ndarray,
        query: np.ndarray,
        counts: np.ndarray | None = None,
        *,
        gamma: float = 1e-5,
        bandwidth: float = 0.3,
        kernel: str = "paper",
        weights: str = "kernel_ridge",
        diameter: float = 4.0,
        lipschitz: str = "paper",
        gradient_bound: float | None = None,
    ):
        features = numeric_array(features, "features")
        targets = numeric_array(targets, "targets")
        query = numeric_array(query, "query")
        if features.ndim != 3:
            raise ValueError(
                f"HyperbolicPrediction: argument 'features' has shape {features.shape}; "
                "expected (n_agents, n_max, r)"
            )
        if targets.ndim != 3 or targets.shape[:2] != features.shape[:2] or targets.shape[2] < 2:
            raise ValueError(
                f"HyperbolicPrediction: argument 'targets' has shape {targets.shape}; expected "
                f"({features.shape[0]}, {features.shape[1]}, d + 1)"
            )
        if query.shape != features.shape[2:]:
            raise ValueError(
                f"HyperbolicPrediction: argument 'query' has shape {query.shape}; expected "
                f"{features.shape[2:]} (one feature vector)"
            )
        if not np.all(np.isfinite(query)):
            raise ValueError("HyperbolicPrediction: argument 'query' contains NaN or inf")
        if lipschitz not in ("paper", "derived"):
            raise ValueError(
                f"argument 'lipschitz' must be 'paper' or 'derived', got {lipschitz!r}"
            )
        if weights not in _WEIGHTS:
            raise ValueError(f"argument 'weights' must be one of {_WEIGHTS}, got {weights!r}")
        if not diameter > 0:
            raise ValueError(f"argument 'diameter' must be > 0, got {diameter}")
        manifold = Hyperboloid(targets.shape[-1] - 1)
        super().__init__(manifold, {"y": targets, "w": features}, counts=counts,
                         arg_names={"y": "targets", "w": "features"})
        manifold.check_point(targets[self.mask], "targets")
        if not self.mask.all():
            self.data["y"] = np.where(self.mask[..., None], targets, targets[:, :1])
        self.query = query
        # public constants of the weights (kept so that a shard can be rebuilt from them)
        self.gamma = float(gamma)
        self.bandwidth = float(bandwidth)
        self.kernel = kernel
        self.weights = weights
        if weights == "kernel_ridge":
            alpha = kernel_weights(features, query, self.counts, gamma=gamma,
                                   bandwidth=bandwidth, kernel=kernel)
        else:
            alpha = np.where(self.mask, kernel_similarity(features, query, bandwidth=bandwidth,
                                                          kernel=kernel), 0.0)
        self.data["alpha"] = alpha
        self.coupled_records = weights == "kernel_ridge"
        self.diameter = float(diameter)
        if gradient_bound is not None and not gradient_bound > 0:
            raise ValueError(f"argument 'gradient_bound' must be > 0, got {gradient_bound}")
        if gradient_bound is None and weights == "kernel":
            # |alpha| <= 1: L_f = max|alpha| M <= M (public), or 2 M as derived
            # (prirfed-hsp-constants)
            gradient_bound = diameter * (2.0 if lipschitz == "derived" else 1.0)
        self.gradient_bound = None if gradient_bound is None else float(gradient_bound)
        self.smoothness = diameter / np.tanh(diameter) if weights == "kernel" else None
        self.privacy_assumptions = (
            ("record = one (feature, target) pair; the query w, gamma, bandwidth and M are "
             "public; kernel-ridge weights couple the agent's records (sensitivity 2 tau per "
             "clipped mean)",) if self.coupled_records else
            ("record = one (feature, target) pair; the query w, bandwidth and M are public; "
             "each per-sample loss depends on its own record only",))

    def sample_loss(self, x, batch):
        d = self.manifold.dist(np.expand_dims(x, -2), batch["y"])
        return batch["alpha"] * d * d

    def sample_rgrad(self, x, batch):
        log = self.manifold.log(np.expand_dims(x, -2), batch["y"])
        return -2.0 * batch["alpha"][..., None] * log

    def pooled_weights(self) -> tuple[np.ndarray, np.ndarray]:
        r"""``(c, y)``: the pooled objective is :math:`\sum_k c_k \mathrm{dist}^2(x, y_k)`.

        Returns
        -------
        c : array, shape ``(n_samples,)``
        y : array, shape ``(n_samples, *point_shape)``
        """
        return self.data["alpha"][self.mask] / self.n_samples, self.data["y"][self.mask]

    def _compute_reference(self) -> np.ndarray:
        """pymanopt trust regions on the pooled objective (the paper's "true value").

        Started from the weighted tangent-mean estimate of the targets; the cost is written with
        autograd (Lorentz distance through ``arccosh``), the manifold handed to pymanopt by
        :func:`rfed.manifolds.interop.solve_reference`.
        """
        import autograd.numpy as anp

        from rfed.manifolds.interop import solve_reference

        c, y = self.pooled_weights()

        def cost(x):
            inner = anp.sum(y[:, 1:] * x[1:], axis=-1) - y[:, 0] * x[0]
            z = anp.maximum(-inner, 1.0 + 1e-15)
            return anp.sum(c * anp.arccosh(z) ** 2)

        x0 = self._initial_guess(c, y)
        with warnings.catch_warnings():
            # pymanopt's truncated CG takes sqrt of a Lorentz residual norm that rounding can make
            # slightly negative; the solution is checked by its gradient norm in the tests
            warnings.simplefilter("ignore", RuntimeWarning)
            return solve_reference(self.manifold, cost, x0, method="trust_regions")

    def _initial_guess(self, c, y):
        """The best target by cost: a start inside the basin of the weighted mean."""
        costs = np.sum(c[None, :] * self.manifold.dist(y[:, None], y[None, :]) ** 2, axis=1)
        return y[int(np.argmin(costs))]
