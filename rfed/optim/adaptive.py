r"""Riemannian first-order optimizers: SGD with transported momentum, Adam and AMSGrad.

* Riemannian SGD: Bonnabel, "Stochastic gradient descent on Riemannian manifolds", IEEE Trans.
  Automatic Control 58(9), 2217-2229, 2013 (arXiv:1111.5280), :math:`x_{t+1} =
  \mathrm{Exp}_{x_t}(-\alpha_t m_t)`; with momentum, the momentum is carried to the new point
  by the manifold's transport.
* Riemannian Adam and AMSGrad: Becigneul and Ganea, "Riemannian Adaptive Optimization
  Methods", ICLR 2019 (arXiv:1810.00760), Algorithm 1 (RAMSGRAD; RADAM without the maximum),
  after Kingma and Ba, "Adam", ICLR 2015 (arXiv:1412.6980), and Reddi, Kale and Kumar, "On the
  convergence of Adam and beyond", ICLR 2018 (arXiv:1904.09237). On a product
  :math:`M_1 \times \dots \times M_n`, for each factor i:

  .. math::

     m_t^i = \beta_1 \tau_{t-1}^i + (1 - \beta_1) g_t^i, \quad
     v_t^i = \beta_2 v_{t-1}^i + (1 - \beta_2) \|g_t^i\|_{x_t^i}^2, \quad
     \hat v_t^i = \max(\hat v_{t-1}^i, v_t^i) \text{ (AMSGrad)},

  :math:`x_{t+1}^i = \mathrm{Exp}_{x_t^i}(-\alpha_t m_t^i / \sqrt{\hat v_t^i})` and
  :math:`\tau_t^i = \Gamma_{x_t^i \to x_{t+1}^i}(m_t^i)`, the momentum transported along the
  step. The second moment is a **scalar per factor** (the paper's adaptivity: one scale per
  factor of a :class:`~rfed.manifolds.Product` or :class:`~rfed.manifolds.FlatProduct`; one
  for a single manifold; geoopt's ``RiemannianAdam`` does the same on its spheres and
  Stiefel manifolds, through ``component_inner``). ``second_moment='elementwise'`` takes the
  squares of the gradient's ambient coordinates instead (what geoopt does on Euclidean
  parameters; not an intrinsic quantity on a curved manifold). ``bias_correction=True`` (the
  default, as Kingma and Ba and geoopt) divides :math:`m_t` by :math:`1 - \beta_1^t` and
  :math:`v_t` by :math:`1 - \beta_2^t`;
  ``bias_correction=False`` with ``eps=0`` is the paper's Algorithm 1 exactly. ``eps`` is
  added to :math:`\sqrt{\hat v_t}`.

Every optimizer is a manifold-agnostic rule with ``init(manifold, x) -> state`` and ``step(
manifold, x, grad, state, lr) -> (x_new, state)``, batched over the leading axes of ``x`` (one
state per row: the rows are independent problems, e.g. the agents of a federated round). The
same object serves as a non-private optimizer (:func:`minimize`) and as the local update rule
of the private trainers (``DPRSGD(local_optimizer=...)``), where it post-processes the
privatized gradients and leaves the privacy report unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed.manifolds import FlatProduct, Manifold, Product

__all__ = ["RiemannianSGD", "RiemannianAdam", "RiemannianAMSGrad", "OptimizerState",
           "minimize"]

SECOND_MOMENTS = ("factor", "elementwise")
TRANSPORTS = ("manifold", "projection")
RETRACTIONS = ("exp", "retract")


@dataclass
class OptimizerState:
    """The running state of one optimizer on a batch of points.

    Attributes
    ----------
    t : int
        Steps taken.
    momentum : tangent vector(s) at the current point (shape of ``x``), or None
    second : list of arrays, or None
        Per factor: shape ``(*batch,)`` (scalar second moment) or the factor's gradient shape
        (elementwise).
    second_max : list of arrays, or None
        AMSGrad's running maximum, same shapes.
    """

    t: int = 0
    momentum: Any = None
    second: list | None = None
    second_max: list | None = None


def _blocks(manifold: Manifold, a: Any) -> list[tuple[Manifold, np.ndarray]]:
    """The factors of a product with the matching blocks of ``a`` (the manifold itself for a
    single manifold)."""
    if isinstance(manifold, Product):
        return list(zip(manifold.manifolds, a, strict=True))
    if isinstance(manifold, FlatProduct):
        return list(zip(manifold.manifolds, manifold.split(a), strict=True))
    return [(manifold, np.asarray(a, dtype=float))]


def _join(manifold: Manifold, blocks: list) -> Any:
    if isinstance(manifold, Product):
        return tuple(blocks)
    if isinstance(manifold, FlatProduct):
        return manifold.join(blocks)
    return blocks[0]


def _check_positive(value: Any, name: str, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"argument '{name}' must be a finite float, got {value!r}")
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(f"argument '{name}' must be a finite float {'>=' if allow_zero else '>'}"
                         f" 0, got {value!r}")
    return float(value)


def _move(manifold: Manifold, x: Any, step: Any, retraction: str) -> Any:
    return manifold.exp(x, step) if retraction == "exp" else manifold.retract(x, step)


class _Rule:
    """Shared validation of the rules' options."""

    lr: float | None
    retraction: str
    transport: str

    def _lr(self, lr: float | None) -> float:
        value = self.lr if lr is None else lr
        if value is None:
            raise ValueError(f"{type(self).__name__}: no step size: give 'lr' to the optimizer "
                             "or to step()")
        return _check_positive(value, "lr")

    def _carry(self, manifold: Manifold, x: Any, x_new: Any, v: Any) -> Any:
        """Transport of ``v`` from x to x_new: the manifold's transport (parallel where the
        manifold has it) or the projection onto the new tangent space."""
        if self.transport == "projection":
            return manifold.proj(x_new, v)
        return manifold.transport(x, x_new, v)


class RiemannianSGD(_Rule):
    r"""Riemannian SGD (Bonnabel 2013), with optional momentum transported along each step.

    :math:`m_t = \mu\,\Gamma(m_{t-1}) + g_t`, :math:`x_{t+1} = \mathrm{Exp}_{x_t}(-\alpha_t
    m_t)`; ``momentum=0`` is plain Riemannian SGD, :math:`x_{t+1} = \mathrm{Exp}_{x_t}(
    -\alpha_t g_t)`, bit for bit the trainers' default local step.

    Parameters
    ----------
    lr : float, optional
        Step size (a call's ``lr`` overrides it; the private trainers pass their round's).
    momentum : float
        :math:`\mu \in [0, 1)`.
    retraction : {'exp', 'retract'}
        The exponential map, or the manifold's retraction.
    transport : {'manifold', 'projection'}
        How the momentum is carried to the new point.
    """

    def __init__(self, lr: float | None = None, momentum: float = 0.0, *, retraction: str = "exp",
                 transport: str = "manifold"):
        self.lr = None if lr is None else _check_positive(lr, "lr")
        self.momentum = _check_positive(momentum, "momentum", allow_zero=True)
        if not self.momentum < 1.0:
            raise ValueError(f"argument 'momentum' must be in [0, 1), got {momentum!r}")
        if retraction not in RETRACTIONS:
            raise ValueError(f"argument 'retraction' must be one of {RETRACTIONS}, got "
                             f"{retraction!r}")
        if transport not in TRANSPORTS:
            raise ValueError(f"argument 'transport' must be one of {TRANSPORTS}, got "
                             f"{transport!r}")
        self.retraction, self.transport = retraction, transport

    def init(self, manifold: Manifold, x: Any) -> OptimizerState:
        """A fresh state (no momentum yet).

        Parameters
        ----------
        manifold : Manifold
            The parameters' manifold (a product is handled factor by factor).
        x : array or tuple of arrays
            The current point.

        Returns
        -------
        OptimizerState
        """
        return OptimizerState()

    def step(self, manifold: Manifold, x: Any, grad: Any, state: OptimizerState,
             lr: float | None = None) -> tuple[Any, OptimizerState]:
        """One step from ``x`` along the Riemannian gradient ``grad`` (tangent at x).

        Parameters
        ----------
        manifold : Manifold
            The parameters' manifold (a product is handled factor by factor).
        x : array or tuple of arrays
            The current point.
        grad : array or tuple of arrays
            Riemannian gradient at ``x``.
        state : OptimizerState
            The optimizer's state after the previous step.
        lr : float, optional
            Step size of this call (default: the optimizer's).

        Returns
        -------
        x_new, state
        """
        alpha = self._lr(lr)
        if self.momentum == 0.0:
            blocks = [(-alpha) * g for _, g in _blocks(manifold, grad)]
            state.t += 1
            return _move(manifold, x, _join(manifold, blocks), self.retraction), state
        if state.momentum is None:
            m_blocks = [np.array(g, dtype=float) for _, g in _blocks(manifold, grad)]
        else:
            m_blocks = [self.momentum * m + g for (_, m), (_, g) in
                        zip(_blocks(manifold, state.momentum), _blocks(manifold, grad),
                            strict=True)]
        m = _join(manifold, m_blocks)
        x_new = _move(manifold, x, _join(manifold, [(-alpha) * b for b in m_blocks]),
                      self.retraction)
        state.momentum = self._carry(manifold, x, x_new, m)
        state.t += 1
        return x_new, state


class RiemannianAdam(_Rule):
    r"""Riemannian Adam / AMSGrad (Becigneul and Ganea 2019, Algorithm 1; module docstring).

    Parameters
    ----------
    lr : float, optional
        Step size :math:`\alpha` (a call's ``lr`` overrides it).
    betas : (float, float)
        :math:`(\beta_1, \beta_2)`, each in [0, 1).
    eps : float
        Added to :math:`\sqrt{\hat v}` (0: the paper's Algorithm 1).
    amsgrad : bool
        Normalize by the running maximum of the second moment (RAMSGRAD).
    bias_correction : bool
        Kingma and Ba's :math:`1 - \beta^t` corrections (geoopt's default); False: the paper.
    second_moment : {'factor', 'elementwise'}
        One scalar per factor of a product (the paper) or the elementwise squares of the
        gradient's ambient coordinates.
    retraction : {'exp', 'retract'}
    transport : {'manifold', 'projection'}
        How the momentum is carried along the step: the manifold's transport (parallel
        transport where ``has_parallel_transport``) or the projection onto the new tangent space
        (geoopt's ``retr_transp`` on its spheres and Stiefel manifolds).
    """

    def __init__(self, lr: float | None = None, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, *, amsgrad: bool = False, bias_correction: bool = True,
                 second_moment: str = "factor", retraction: str = "exp",
                 transport: str = "manifold"):
        self.lr = None if lr is None else _check_positive(lr, "lr")
        try:
            b1, b2 = betas
        except (TypeError, ValueError):
            raise ValueError(f"argument 'betas' must be a pair of floats in [0, 1), got "
                             f"{betas!r}") from None
        for name, b in (("betas[0]", b1), ("betas[1]", b2)):
            _check_positive(b, name, allow_zero=True)
            if not b < 1.0:
                raise ValueError(f"argument '{name}' must be in [0, 1), got {b!r}")
        self.betas = (float(b1), float(b2))
        self.eps = _check_positive(eps, "eps", allow_zero=True)
        for name, flag in (("amsgrad", amsgrad), ("bias_correction", bias_correction)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ValueError(f"argument '{name}' must be a bool, got {flag!r}")
        self.amsgrad, self.bias_correction = bool(amsgrad), bool(bias_correction)
        for name, value, choices in (("second_moment", second_moment, SECOND_MOMENTS),
                                     ("retraction", retraction, RETRACTIONS),
                                     ("transport", transport, TRANSPORTS)):
            if value not in choices:
                raise ValueError(f"argument '{name}' must be one of {choices}, got {value!r}")
        self.second_moment, self.retraction, self.transport = second_moment, retraction, transport

    def init(self, manifold: Manifold, x: Any) -> OptimizerState:
        """A fresh state: zero moments.

        Parameters
        ----------
        manifold : Manifold
            The parameters' manifold (a product is handled factor by factor).
        x : array or tuple of arrays
            The current point.

        Returns
        -------
        OptimizerState
        """
        return OptimizerState()

    def _squares(self, manifold: Manifold, x: Any, grad: Any) -> list[np.ndarray]:
        """Per factor: the squared Riemannian norm of the gradient block (``(*batch,)``), or
        its elementwise squares."""
        if self.second_moment == "elementwise":
            return [np.square(g) for _, g in _blocks(manifold, grad)]
        return [np.square(m.norm(xi, g)) for (m, xi), (_, g) in
                zip(_blocks(manifold, x), _blocks(manifold, grad), strict=True)]

    def step(self, manifold: Manifold, x: Any, grad: Any, state: OptimizerState,
             lr: float | None = None) -> tuple[Any, OptimizerState]:
        """One step from ``x`` along the Riemannian gradient ``grad`` (tangent at x).

        Parameters
        ----------
        manifold : Manifold
            The parameters' manifold (a product is handled factor by factor).
        x : array or tuple of arrays
            The current point.
        grad : array or tuple of arrays
            Riemannian gradient at ``x``.
        state : OptimizerState
            The optimizer's state after the previous step.
        lr : float, optional
            Step size of this call (default: the optimizer's).

        Returns
        -------
        x_new, state
        """
        alpha = self._lr(lr)
        b1, b2 = self.betas
        g_blocks = [np.asarray(g, dtype=float) for _, g in _blocks(manifold, grad)]
        sq = self._squares(manifold, x, grad)
        if state.momentum is None:
            m_blocks = [(1.0 - b1) * g for g in g_blocks]
            v = [(1.0 - b2) * s for s in sq]
        else:
            m_blocks = [b1 * m + (1.0 - b1) * g for (_, m), g in
                        zip(_blocks(manifold, state.momentum), g_blocks, strict=True)]
            assert state.second is not None
            v = [b2 * vi + (1.0 - b2) * s for vi, s in zip(state.second, sq, strict=True)]
        t = state.t + 1
        if self.amsgrad:
            v_hat = v if state.second_max is None else [
                np.maximum(a, b) for a, b in zip(state.second_max, v, strict=True)]
            state.second_max = v_hat
        else:
            v_hat = v
        c1 = 1.0 - b1**t if self.bias_correction else 1.0
        c2 = 1.0 - b2**t if self.bias_correction else 1.0
        steps = []
        for (fac, _), m, vh in zip(_blocks(manifold, x), m_blocks, v_hat, strict=True):
            denom = np.sqrt(vh / c2) + self.eps
            if self.second_moment == "factor":
                denom = denom.reshape(np.shape(denom) + (1,) * len(fac.point_shape))
            steps.append((-alpha / c1) * m / denom)
        x_new = _move(manifold, x, _join(manifold, steps), self.retraction)
        state.momentum = self._carry(manifold, x, x_new, _join(manifold, m_blocks))
        state.second = v
        state.t = t
        return x_new, state


def RiemannianAMSGrad(lr: float | None = None, betas: tuple[float, float] = (0.9, 0.999),
                      eps: float = 1e-8, **kwargs: Any) -> RiemannianAdam:
    """Riemannian AMSGrad: :class:`RiemannianAdam` with ``amsgrad=True`` (Becigneul and Ganea
    2019, RAMSGRAD).

    Parameters
    ----------
    lr, betas, eps
        As in :class:`RiemannianAdam`.
    **kwargs
        Further options of :class:`RiemannianAdam` (not ``amsgrad``).

    Returns
    -------
    RiemannianAdam
        The optimizer, with ``amsgrad=True``.
    """
    return RiemannianAdam(lr, betas, eps, amsgrad=True, **kwargs)


def minimize(manifold: Manifold, rgrad: Callable[[Any], Any], x0: Any, optimizer: Any,
             n_steps: int, *, lr: float | None = None,
             callback: Callable[[int, Any], None] | None = None) -> Any:
    """Run ``optimizer`` for ``n_steps`` steps from ``x0`` (non-private optimization).

    Parameters
    ----------
    manifold : Manifold
    rgrad : callable
        ``x -> Riemannian gradient at x`` (e.g. ``lambda x: manifold.egrad2rgrad(x, egrad(x))``).
    x0 : point (batched or not)
    optimizer : RiemannianSGD or RiemannianAdam
    n_steps : int
    lr : float, optional
        Overrides the optimizer's step size.
    callback : callable, optional
        ``callback(t, x)`` after each step.

    Returns
    -------
    The last point.
    """
    if not isinstance(n_steps, (int, np.integer)) or isinstance(n_steps, bool) or n_steps < 0:
        raise ValueError(f"argument 'n_steps' must be an int >= 0, got {n_steps!r}")
    x = x0
    state = optimizer.init(manifold, x)
    for t in range(int(n_steps)):
        x, state = optimizer.step(manifold, x, rgrad(x), state, lr)
        if callback is not None:
            callback(t + 1, x)
    return x
