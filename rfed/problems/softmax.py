"""Multinomial logistic (softmax) regression split across agents.

The model for the privacy-utility experiments on Fashion-MNIST: ``C`` classes, parameters one
flat vector ``x = [vec(W), b]`` in ``Euclidean(d_in C + C)`` with ``W`` of shape ``(d_in, C)``
(row-major) and the bias ``b`` of shape ``(C,)``. The per-sample loss is the cross-entropy

.. math:: l(x; a, y) = \\log \\sum_c e^{z_c} - z_y, \\qquad z = W^T a + b,

plus ``(lam / 2) ||W||^2`` (the bias is not regularized). Its per-sample gradient is
``[a (p - e_y)^T, p - e_y]`` with ``p = softmax(z)``, of norm
``||p - e_y|| sqrt(||a||^2 + 1) <= sqrt(2) sqrt(R^2 + 1)`` for rows of norm at most ``R``
(``||p - e_y||^2 = sum_c p_c^2 - 2 p_y + 1 <= 2``). That number is :attr:`public_gradient_bound`
when ``feature_bound = R`` is given (a public assertion about the data domain, enforced by scaling
longer rows onto the sphere of radius ``R``); privately trained models clip to a public level of
their own anyway.

Clipped gradient sums (:meth:`SoftmaxRegression.clipped_grad_sum`) never materialize the
per-sample gradients: the norms above are closed form, and the clipped sum is
``A^T (s * (P - Y))`` for the clip factors ``s`` (with ``lam > 0`` the regularizer's shared term
is added in closed form too: :mod:`rfed.problems.outer_gradients`). A batch of ``B`` records
then costs ``O(B (d_in + C))`` memory beyond its features instead of ``O(B d_in C)`` (at 3,969
scattering features, 10 classes and ``B = 819``: 26 MB instead of 260 MB per agent).

Precision: features given in float32 are stored in float32 (half the memory of a large feature
matrix) and the logits are computed in float32 (a relative 1e-7, far below any DP noise); the
residuals, the norms, the clip factors and the clipped sum ``A^T (s * R)`` are float64, so the
released sum is the exact clipped sum up to float64 rounding as for float64 features. Any
other feature dtype is converted to float64.

The reference optimum is computed independently of rfed's algorithms by scipy's L-BFGS on the
pooled objective.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize as sopt

from rfed._checks import held_out_samples, numeric_array
from rfed.manifolds import Euclidean
from rfed.problems.base import Problem
from rfed.problems.outer_gradients import outer_clipped_sum, row_sq_norms

__all__ = ["SoftmaxRegression"]


def _as_features(features: np.ndarray) -> np.ndarray:
    """Float32 features as they are, anything else as float64."""
    a = np.asarray(features)
    return a if a.dtype == np.float32 else a.astype(float, copy=False)


def _softmax(z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis (``out=z``: computed in place, the same floats)."""
    e = np.subtract(z, z.max(axis=-1, keepdims=True), out=out)
    np.exp(e, out=e)
    e /= e.sum(axis=-1, keepdims=True)
    return e


class SoftmaxRegression(Problem):
    """Softmax regression ``(W, b)`` flattened in ``Euclidean(d_in * n_classes + n_classes)``.

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, d_in)``
        Kept in float32 if given in float32 (see the module docstring), else float64.
    labels : array of int, shape ``(n_agents, n_max)``, values in ``0..n_classes-1``
    n_classes : int
    l2 : float
        ``lam >= 0`` of the regularizer ``(lam / 2) ||W||_F^2``.
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (padded layouts of non-IID partitions).
    feature_bound : float, optional
        A PUBLIC bound ``R`` on the feature rows' norm (e.g. 1 for unit-normalised images),
        ENFORCED by scaling longer rows onto the sphere of radius ``R`` (a per-record map).

    Attributes
    ----------
    public_gradient_bound : float or None
        The data term's per-sample gradient bound ``sqrt(2 (R^2 + 1))`` (the regularizer's
        gradient ``lam W`` is not bounded by it; ``lam = 0`` in the private experiments), or
        None without ``feature_bound``.
    """

    name = "softmax"
    #: Iteration cap of the L-BFGS reference solver (:meth:`reference_point`).
    reference_maxiter: int = 1000

    def __init__(self, features: np.ndarray, labels: np.ndarray, n_classes: int = 10,
                 l2: float = 0.0, counts: np.ndarray | None = None,
                 feature_bound: float | None = None):
        features = _as_features(numeric_array(features, "features", dtype=None))
        labels = numeric_array(labels, "labels", dtype=None)
        if features.ndim != 3:
            raise ValueError(f"argument 'features' must have shape (n_agents, n_max, d_in), got "
                             f"{features.shape}")
        if labels.shape != features.shape[:2] or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"argument 'labels' must be integers of shape {features.shape[:2]}, "
                             f"got shape {labels.shape} and dtype {labels.dtype}")
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) \
                or n_classes < 2:
            raise ValueError(f"argument 'n_classes' must be an int >= 2, got {n_classes!r}")
        if labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(f"argument 'labels' must lie in [0, {n_classes - 1}], got range "
                             f"[{labels.min()}, {labels.max()}]")
        if not (np.isfinite(l2) and l2 >= 0):
            raise ValueError(f"argument 'l2' must be a finite number >= 0, got {l2!r}")
        self.public_gradient_bound = None
        if feature_bound is not None:
            bound = float(feature_bound)
            if not (np.isfinite(bound) and bound > 0):
                raise ValueError(f"argument 'feature_bound' must be a finite number > 0, got "
                                 f"{feature_bound!r}")
            if features.dtype == np.float64:
                norms = np.linalg.norm(features, axis=-1, keepdims=True)
                features = features * np.minimum(1.0, bound / np.maximum(norms, 1e-300))
            else:
                # float32 rows stay float32; a longer row is scaled a relative 1e-6 inside the
                # sphere, so that float32 rounding cannot leave it above the bound
                norms = np.sqrt(row_sq_norms(features))[..., None]
                longer = norms > bound
                if longer.any():
                    factor = np.minimum(1.0, bound * (1.0 - 1e-6) / np.maximum(norms, 1e-300))
                    features = np.where(longer, features * factor.astype(np.float32), features)
            self.public_gradient_bound = float(np.sqrt(2.0 * (bound ** 2 + 1.0)))
        self.n_in = features.shape[-1]
        self.n_classes = int(n_classes)
        self.l2 = float(l2)
        onehot = np.eye(self.n_classes)[labels]
        super().__init__(Euclidean(self.n_in * self.n_classes + self.n_classes),
                         {"features": features, "labels": labels, "onehot": onehot},
                         counts=counts, gradient_bound=self.public_gradient_bound,
                         arg_names={"features": "features", "labels": "labels",
                                    "onehot": "labels"})

    @property
    def n_params(self) -> int:
        """``d = d_in * n_classes + n_classes``."""
        return self.n_in * self.n_classes + self.n_classes

    def unflatten(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``W`` ``(*lead, d_in, C)`` and ``b`` ``(*lead, C)`` of ``x`` ``(*lead, d)``.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Flat parameters.

        Returns
        -------
        W : array, shape ``(*lead, d_in, C)``
        b : array, shape ``(*lead, C)``
        """
        x = np.asarray(x, dtype=float)
        k = self.n_in * self.n_classes
        return x[..., :k].reshape(x.shape[:-1] + (self.n_in, self.n_classes)), x[..., k:]

    def logits(self, x: np.ndarray, features: np.ndarray) -> np.ndarray:
        """``z = W^T a + b`` for ``x`` ``(*lead, d)``, ``features`` ``(*lead, b, d_in)``:
        shape ``(*lead, b, C)``, float64 (the product in float32 for float32 features).

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Flat parameters.
        features : array, shape ``(*lead, b, d_in)``
            Samples.

        Returns
        -------
        array, shape ``(*lead, b, C)``
        """
        w, b = self.unflatten(x)
        features = np.asarray(features)
        if features.dtype == np.float32:
            return np.matmul(features, w.astype(np.float32)) + b[..., None, :]
        return np.matmul(features, w) + b[..., None, :]

    def _residual(self, x, batch):
        """``p - e_y`` per sample, ``(*lead, b, C)``."""
        return _softmax(self.logits(x, batch["features"])) - batch["onehot"]

    def sample_loss(self, x, batch):
        z = self.logits(x, batch["features"])
        m = z.max(axis=-1, keepdims=True)
        lse = m[..., 0] + np.log(np.sum(np.exp(z - m), axis=-1))
        w, _ = self.unflatten(x)
        reg = 0.5 * self.l2 * np.sum(w * w, axis=(-2, -1))
        return lse - np.sum(z * batch["onehot"], axis=-1) + reg[..., None]

    def sample_rgrad(self, x, batch):
        r = self._residual(x, batch)                      # (*lead, b, C)
        a = batch["features"]                              # (*lead, b, d_in)
        gw = a[..., :, None] * r[..., None, :]             # (*lead, b, d_in, C)
        lead_b = r.shape[:-1]
        g = np.concatenate([gw.reshape(lead_b + (-1,)), r], axis=-1)
        if self.l2:
            w, _ = self.unflatten(x)
            reg = np.concatenate([self.l2 * w.reshape(w.shape[:-2] + (-1,)),
                                  np.zeros(w.shape[:-2] + (self.n_classes,))], axis=-1)
            g = g + reg[..., None, :]
        return g

    #: :meth:`clipped_grad_sum` takes the rows' squared norms from its caller
    #: (``feature_sq_norms=``; as ``LinearProblem.takes_feature_sq_norms``).
    takes_feature_sq_norms = True

    def clipped_grad_sum(self, x, batch, bound, mask=None, *, feature_sq_norms=None):
        """Closed-form clipped sum: no per-sample gradient is materialized.

        The per-sample gradient ``[a (p - e_y)^T + lam W, p - e_y]`` is an outer product plus
        the regularizer's shared term, so its norm and the clipped sum are closed form
        (:func:`rfed.problems.outer_gradients.outer_clipped_sum`); equal to clipping the
        materialised gradients (:meth:`Problem.clipped_grad_sum`) up to rounding.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
        batch : mapping of str to array, each of shape ``(*lead, b, ...)``
        bound : float or None
            Clipping level tau; ``None`` sums the raw gradients.
        mask : bool array, shape ``(*lead, b)``, optional
            Samples to include (padding rows are ``False``).
        feature_sq_norms : array, shape ``(*lead, b)``, optional
            ``||a_j||^2`` of the batch's rows (:func:`~rfed.problems.outer_gradients.row_sq_norms`
            of ``batch['features']``, e.g. gathered from the data set's, computed once);
            computed here otherwise.

        Returns
        -------
        total : array, shape ``(*lead, d)``
        n_clipped : int array, shape ``lead``
            How many included samples had ``||g_j||_x > bound``.
        """
        x = np.asarray(x, dtype=float)
        a = batch["features"]
        z = self.logits(x, a)                              # (*lead, b, C), a fresh array
        if not self.l2:
            r = _softmax(z, out=z)
            r -= batch["onehot"]
            return outer_clipped_sum(a, r, bound, mask, bias=True,
                                     feature_sq_norms=feature_sq_norms)
        r = _softmax(z) - batch["onehot"]
        w, b = self.unflatten(x)
        shared = np.concatenate([self.l2 * w.reshape(w.shape[:-2] + (-1,)),
                                 np.zeros(w.shape[:-2] + (self.n_classes,))], axis=-1)
        # S_W^T a_j = lam W^T a_j = lam (z_j - b): the logits already hold the product
        return outer_clipped_sum(a, r, bound, mask, bias=True, shared=shared,
                                 feature_sq_norms=feature_sq_norms,
                                 shared_dot_features=self.l2 * (z - b[..., None, :]))

    def local_grad(self, x, agents=None):
        # the full local gradients without materializing per-sample gradients
        agents, data, mask = self._all(agents)
        x = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        total, _ = self.clipped_grad_sum(x, data, None, mask)
        return total / self.counts[agents][:, None]

    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """All valid samples: features ``(N, d_in)`` and integer labels ``(N,)``.

        Returns
        -------
        features : array, shape ``(N, d_in)``
        labels : int array, shape ``(N,)``
        """
        return self.data["features"][self.mask], self.data["labels"][self.mask]

    def predict(self, x: np.ndarray, features: np.ndarray) -> np.ndarray:
        """Predicted classes of ``features`` ``(N, d_in)`` at one point ``x``: ``(N,)``.

        Parameters
        ----------
        x : array, shape ``(d,)``
            One point.
        features : array, shape ``(N, d_in)``
            Samples.

        Returns
        -------
        int array, shape ``(N,)``
        """
        return np.argmax(self.logits(x, _as_features(features)), axis=-1)

    def accuracy(self, x: np.ndarray, features: np.ndarray | None = None,
                 labels: np.ndarray | None = None) -> float:
        """Fraction of correct predictions at one point ``x`` (pooled training set by default).

        Ties of the argmax go to the lowest class index, so the zero model predicts class 0
        everywhere: its accuracy is the share of class 0 (chance level, 10 % on balanced data).

        Parameters
        ----------
        x : array, shape ``(d,)``
            One point.
        features : array, shape ``(N, d_in)``, optional
            Samples (default: the pooled training set).
        labels : int array, shape ``(N,)``, optional
            Their classes.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``x``, ``features`` or ``labels`` of another shape (naming the argument).
        """
        if features is None:
            features, labels = self.pooled()
        else:
            x, features, labels = held_out_samples(x, features, labels,
                                                   self.manifold.point_shape, self.n_in)
        return float(np.mean(self.predict(x, features) == np.asarray(labels)))

    def _compute_reference(self) -> np.ndarray:
        a, y = self.pooled()
        onehot = np.eye(self.n_classes)[y]
        n = len(y)
        k = self.n_in * self.n_classes
        # float32 features: the products in float32 (no float64 copy of the pooled matrix);
        # the solver's own arithmetic stays float64
        dt = a.dtype

        def fun(x):
            w = x[:k].reshape(self.n_in, self.n_classes)
            z = (a @ w.astype(dt, copy=False)).astype(float, copy=False) + x[k:]
            m = z.max(axis=1, keepdims=True)
            e = np.exp(z - m)
            s = e.sum(axis=1, keepdims=True)
            f = np.mean(m[:, 0] + np.log(s[:, 0]) - np.sum(z * onehot, axis=1))
            r = (e / s - onehot) / n
            f += 0.5 * self.l2 * np.sum(w * w)
            gw = (a.T @ r.astype(dt, copy=False)).astype(float, copy=False)
            g = np.concatenate([(gw + self.l2 * w).ravel(), r.sum(axis=0)])
            return f, g

        res = sopt.minimize(fun, np.zeros(self.n_params), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-7, "ftol": 1e-12,
                                     "maxiter": self.reference_maxiter})
        return res.x

    def initial_point(self) -> np.ndarray:
        """The zero model (a public start; chance-level predictions).

        Returns
        -------
        array, shape ``(n_params,)``
        """
        return np.zeros(self.n_params)
