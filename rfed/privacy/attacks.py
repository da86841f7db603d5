r"""Empirical attacks on released messages and trained models: the audit's practical complements.

Two attacks of the privacy literature, on plain arrays and callables (this module imports
nothing from ``rfed.algorithms`` or ``rfed.experiments``):

**Gradient inversion** of a message an agent sends (a cross-gradient, a model update), as in
DPDL's Tables III-IV and Figs. 5-6 (Yuan et al.):

* :func:`invert_affine_gradient` -- the analytic inversion of an affine first layer
  ``h = x W + b``: for one record ``dL/dW = x^T (dL/dh)`` and ``dL/db = dL/dh``, so
  ``x = (dL/dW)[:, k] / (dL/db)[k]`` for every unit ``k`` (Phong, Aono, Hayashi, Wang, Moriai,
  "Privacy-Preserving Deep Learning via Additively Homomorphic Encryption", IEEE TIFS 2018,
  Sec. III; Geiping, Bauermeister, Droege, Moeller, "Inverting Gradients -- How easy is it to
  break privacy in federated learning?", NeurIPS 2020, arXiv:2003.14053, Prop. D.1). A scaling
  of the whole gradient (clipping) cancels in the ratio; for a minibatch mean the result is a
  mix of its records.
* :func:`gradient_matching_attack` -- the iterative inversion ("deep leakage from gradients":
  Zhu, Liu, Han, NeurIPS 2019, arXiv:1906.08935; with the cosine matching loss and the total
  variation prior of Geiping et al. 2020): a dummy record is optimised, with the label known,
  so that its gradient at the public model matches the observed message.
* :func:`mse`, :func:`psnr` and :func:`ssim` score a reconstruction; :func:`ssim` is the
  structural similarity of Wang, Bovik, Sheikh, Simoncelli, "Image Quality Assessment: From
  Error Visibility to Structural Similarity", IEEE TIP 13(4), 2004, eqs. (13)-(17) (Gaussian
  window 11 x 11 of standard deviation 1.5, ``K1 = 0.01``, ``K2 = 0.03``, the mean over the
  windows that fit in the image).

**Membership inference** on a trained model:

* :func:`loss_threshold_attack` -- Yeom, Giacomelli, Fredrikson, Jha, "Privacy Risk in Machine
  Learning: Analyzing the Connection to Overfitting", IEEE CSF 2018: guess "member" when the
  model's loss on the record is below a threshold. It reports the membership advantage
  ``TPR - FPR`` at the best threshold (Yeom et al.'s Definition 4), the ROC AUC, and the TPR at
  low FPR (the metric Carlini, Chien, Nasr, Song, Terzis, Tramer, "Membership Inference Attacks
  From First Principles", IEEE S&P 2022, argue for).
* :func:`dp_membership_bound` and :func:`dp_tpr_bound` -- the bound an ``(epsilon,
  delta)``-DP training run implies on any such test. A membership test distinguishes a model
  trained with the record from one trained with it replaced, two neighbouring data sets, so
  (Kairouz, Oh, Viswanath, "The Composition Theorem for Differential Privacy", ICML 2015,
  Thm. 2.1) its rates satisfy ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 -
  delta``, i.e.

  .. math:: \mathrm{TPR} \le \min\bigl(e^\epsilon \mathrm{FPR} + \delta,\;
            1 - e^{-\epsilon}(1 - \delta - \mathrm{FPR})\bigr),

  and the largest ``TPR - FPR`` over that region is reached where the two lines meet,
  ``FPR = (1 - delta) / (e^eps + 1)``:

  .. math:: \mathrm{TPR} - \mathrm{FPR} \le \frac{e^\epsilon - 1 + 2\delta}{e^\epsilon + 1}

  (for ``delta = 0`` this is Humphries et al.'s bound, tighter than Yeom et al.'s Theorem 1,
  ``e^eps - 1``). The bound concerns the record-level relation the training certifies
  (replace-one: a member against a fresh record in its place).

See ``docs/guide/attacks.md``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.optimize
import scipy.stats

from rfed.privacy._checks import check_delta, check_epsilon, check_int, check_real

__all__ = [
    "MembershipResult",
    "Reconstruction",
    "dp_membership_bound",
    "dp_tpr_bound",
    "gradient_matching_attack",
    "invert_affine_gradient",
    "loss_threshold_attack",
    "mse",
    "psnr",
    "reconstruction_scores",
    "ssim",
]


# ---------------------------------------------------------------------- image metrics
def _pair(x: Any, y: Any, name: str = "reconstruction") -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"argument '{name}' has shape {a.shape}; the reference has {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError(f"arguments '{name}' and 'reference' must be finite")
    return a, b


def mse(reconstruction: Any, reference: Any, ndim: int = 2) -> np.ndarray:
    """Mean squared error per image.

    Parameters
    ----------
    reconstruction, reference : arrays, shape ``(*batch, *image)``
    ndim : int
        Trailing axes forming one image (2 for ``(H, W)``, 1 for a flat record).

    Returns
    -------
    array, shape ``batch``
    """
    a, b = _pair(reconstruction, reference)
    axes = tuple(range(a.ndim - ndim, a.ndim))
    return np.mean((a - b) ** 2, axis=axes)


def psnr(reconstruction: Any, reference: Any, data_range: float, ndim: int = 2) -> np.ndarray:
    """Peak signal-to-noise ratio ``10 log10(data_range^2 / MSE)`` in dB per image (``inf``
    for an exact reconstruction).

    Parameters
    ----------
    reconstruction, reference : arrays, shape ``(*batch, *image)``
    data_range : float
        ``max - min`` of the pixel scale (1 for images in [0, 1], 2 for [-1, 1]).
    ndim : int
        Trailing axes forming one image.

    Returns
    -------
    array, shape ``batch``
    """
    rng = check_real(data_range, "data_range")
    if not rng > 0:
        raise ValueError(f"argument 'data_range' must be > 0, got {data_range!r}")
    err = mse(reconstruction, reference, ndim)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(rng ** 2 / err)


def _window(win_size: int, gaussian: bool, sigma: float) -> np.ndarray:
    if gaussian:
        r = np.arange(win_size) - (win_size - 1) / 2
        g = np.exp(-(r ** 2) / (2 * sigma ** 2))
        w = np.outer(g, g)
    else:
        w = np.ones((win_size, win_size))
    return w / w.sum()


def ssim(reconstruction: Any, reference: Any, data_range: float, *, gaussian: bool = True,
         win_size: int | None = None, sigma: float = 1.5, k1: float = 0.01,
         k2: float = 0.03) -> np.ndarray:
    r"""Mean structural similarity (Wang et al. 2004) per image.

    For every position of the window ``w`` (weights summing to one) that fits in the image,
    with ``mu_x = sum w x``, ``sigma_x^2 = sum w (x - mu_x)^2``,
    ``sigma_xy = sum w (x - mu_x)(y - mu_y)`` (eqs. (14)-(16)) and ``C_1 = (K_1 L)^2``,
    ``C_2 = (K_2 L)^2``:

    .. math:: \mathrm{SSIM} = \frac{(2\mu_x\mu_y + C_1)(2\sigma_{xy} + C_2)}
              {(\mu_x^2 + \mu_y^2 + C_1)(\sigma_x^2 + \sigma_y^2 + C_2)}

    (eq. (13)), averaged over the positions (eq. (17)).

    Parameters
    ----------
    reconstruction, reference : arrays, shape ``(*batch, H, W)``
    data_range : float
        ``L``, the dynamic range of the pixels.
    gaussian : bool
        The paper's circular Gaussian window (``True``) or a uniform one.
    win_size : int, optional
        Odd window side (default 11 for the Gaussian window, 7 for the uniform one); a window
        larger than the image is shrunk to the largest odd side that fits (e.g. 7 on 8 x 8
        digits).
    sigma : float
        Standard deviation of the Gaussian window (1.5).
    k1, k2 : float

    Returns
    -------
    array, shape ``batch``; 1 for identical images.
    """
    a, b = _pair(reconstruction, reference)
    if a.ndim < 2:
        raise ValueError(f"argument 'reconstruction' must have shape (*batch, H, W), got "
                         f"{a.shape}")
    rng = check_real(data_range, "data_range")
    if not rng > 0:
        raise ValueError(f"argument 'data_range' must be > 0, got {data_range!r}")
    side = min(a.shape[-2:])
    size = check_int(win_size if win_size is not None else (11 if gaussian else 7), "win_size")
    if size % 2 == 0:
        raise ValueError(f"argument 'win_size' must be odd, got {size}")
    size = min(size, side if side % 2 else side - 1)
    w = _window(size, gaussian, sigma)
    c1, c2 = (k1 * rng) ** 2, (k2 * rng) ** 2

    rows, cols = a.shape[-2] - size + 1, a.shape[-1] - size + 1

    def local(img: np.ndarray) -> np.ndarray:
        # weighted sums over every window that fits: shape (*batch, H - s + 1, W - s + 1)
        out = np.zeros(img.shape[:-2] + (rows, cols))
        for i in range(size):
            for j in range(size):
                out += w[i, j] * img[..., i:i + rows, j:j + cols]
        return out

    mu_a, mu_b = local(a), local(b)
    var_a = local(a * a) - mu_a ** 2
    var_b = local(b * b) - mu_b ** 2
    cov = local(a * b) - mu_a * mu_b
    ssim_map = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / (
        (mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return ssim_map.mean(axis=(-2, -1))


@dataclasses.dataclass(frozen=True)
class Reconstruction:
    """Scores of reconstructions against the true records (one entry per record).

    Attributes
    ----------
    mse, psnr, ssim : arrays, shape ``(n,)``
    data_range : float
    """

    mse: np.ndarray
    psnr: np.ndarray
    ssim: np.ndarray
    data_range: float

    def summary(self) -> dict[str, float]:
        """Means over the records (PSNR averaged in dB, as DPDL's tables).

        Returns
        -------
        dict of str to float
            ``mse``, ``psnr_db``, ``ssim``, ``n`` (records) and ``exact`` (records reconstructed
            exactly, infinite PSNR).
        """
        finite = np.where(np.isfinite(self.psnr), self.psnr, np.nan)
        return {"mse": float(np.mean(self.mse)),
                "psnr_db": (float(np.nanmean(finite)) if np.isfinite(finite).any()
                            else float("inf")),
                "ssim": float(np.mean(self.ssim)), "n": int(self.mse.size),
                "exact": int(np.sum(~np.isfinite(self.psnr)))}


def reconstruction_scores(reconstructions: Any, records: Any, image_shape: Sequence[int],
                          data_range: float) -> Reconstruction:
    """MSE, PSNR and SSIM of flat reconstructions ``(n, d)`` against flat records ``(n, d)``
    viewed as images of ``image_shape`` (e.g. ``(8, 8)``).

    Parameters
    ----------
    reconstructions, records : array_like, shape ``(n, d)``
        Reconstructed and true records, flattened, ``d = prod(image_shape)``.
    image_shape : sequence of int
        The image shape each row is viewed as.
    data_range : float
        Range of the pixel values (for PSNR and SSIM).

    Returns
    -------
    Reconstruction
        The scores per record.
    """
    a, b = _pair(reconstructions, records)
    shape = tuple(int(s) for s in image_shape)
    a = a.reshape((-1,) + shape)
    b = b.reshape((-1,) + shape)
    return Reconstruction(mse(a, b), psnr(a, b, data_range), ssim(a, b, data_range),
                          float(data_range))


# ---------------------------------------------------------------------- gradient inversion
def invert_affine_gradient(grad_weight: Any, grad_bias: Any, *, rtol: float = 1e-12
                           ) -> np.ndarray:
    """The input of an affine layer ``h = x W + b`` from the gradients of one record's loss.

    ``dL/dW = x^T (dL/dh)`` (shape ``(n_in, n_out)``) and ``dL/db = dL/dh``, so every unit
    ``k`` with ``dL/db_k != 0`` gives ``x = (dL/dW)[:, k] / (dL/db)_k``; the least-squares
    combination over the units, ``x = (dL/dW) (dL/db) / ||dL/db||^2``, is returned (exact for
    one record, whatever common factor scales both gradients, e.g. clipping; a noisy message
    gives a noisy estimate).

    Parameters
    ----------
    grad_weight : array, shape ``(*batch, n_in, n_out)``
    grad_bias : array, shape ``(*batch, n_out)``
    rtol : float
        Units with ``|dL/db_k| <= rtol max |dL/db|`` are ignored.

    Returns
    -------
    array, shape ``(*batch, n_in)`` (zeros where the bias gradient vanishes)
    """
    gw = np.asarray(grad_weight, dtype=float)
    gb = np.asarray(grad_bias, dtype=float)
    if gw.ndim < 2 or gw.shape[:-2] + gw.shape[-1:] != gb.shape:
        raise ValueError(f"arguments 'grad_weight' (*, n_in, n_out) and 'grad_bias' (*, n_out) "
                         f"do not match: {gw.shape} and {gb.shape}")
    keep = np.abs(gb) > rtol * np.max(np.abs(gb), axis=-1, keepdims=True)
    gb_kept = np.where(keep, gb, 0.0)
    denom = np.sum(gb_kept ** 2, axis=-1)
    num = np.einsum("...ik,...k->...i", gw, gb_kept)
    return np.where(denom[..., None] > 0, num / np.where(denom > 0, denom, 1.0)[..., None], 0.0)


def _total_variation(x: Any, shape: tuple[int, ...]) -> Any:
    import autograd.numpy as anp  # type: ignore[import-untyped]

    img = anp.reshape(x, shape)
    return (anp.sum(anp.abs(img[..., 1:, :] - img[..., :-1, :]))
            + anp.sum(anp.abs(img[..., :, 1:] - img[..., :, :-1])))


def gradient_matching_attack(gradient: Callable[[Any], Any], observed: Any, dim: int, *,
                             rng: np.random.Generator | int, bounds: tuple[float, float] = (0.0,
                                                                                           1.0),
                             loss: str = "cosine", tv_weight: float = 0.0,
                             image_shape: Sequence[int] | None = None, restarts: int = 4,
                             max_iter: int = 300) -> tuple[np.ndarray, float]:
    """Reconstruct a record whose gradient at the public model matches an observed message.

    Minimises, over a dummy record ``x'`` in the box ``bounds`` (L-BFGS-B, as deep leakage from
    gradients does), ``1 - cos(gradient(x'), observed)`` (``loss='cosine'``, Geiping et al.) or
    ``||gradient(x') - observed||^2`` (``'l2'``, Zhu et al.), plus ``tv_weight`` times the total
    variation of ``x'`` viewed as ``image_shape``, from ``restarts`` uniform random starts; the
    label is assumed known (folded into ``gradient``).

    Parameters
    ----------
    gradient : callable
        ``gradient(x) -> flat gradient`` of the loss of record ``x`` (shape ``(dim,)``) at the
        model the message was computed at, written with ``autograd.numpy`` (its derivative with
        respect to ``x`` is taken by autograd).
    observed : array, shape ``(p,)``
        The message (e.g. a cross-gradient, or a model difference divided by the step).
    dim : int
        Length of a record.
    rng : Generator or int
        Random starts.
    bounds : (float, float)
        Pixel box.
    loss : {'cosine', 'l2'}
    tv_weight : float
    image_shape : sequence of int, optional
        Required with ``tv_weight > 0``.
    restarts, max_iter : int

    Returns
    -------
    (x, objective) : the best reconstruction ``(dim,)`` and its matching objective.
    """
    import autograd  # type: ignore[import-untyped]
    import autograd.numpy as anp  # type: ignore[import-untyped]

    target = np.asarray(observed, dtype=float).ravel()
    if not np.isfinite(target).all():
        raise ValueError("argument 'observed' must be finite")
    dim = check_int(dim, "dim")
    restarts = check_int(restarts, "restarts")
    max_iter = check_int(max_iter, "max_iter")
    if loss not in ("cosine", "l2"):
        raise ValueError(f"argument 'loss' must be 'cosine' or 'l2', got {loss!r}")
    tv = check_real(tv_weight, "tv_weight")
    if tv < 0:
        raise ValueError(f"argument 'tv_weight' must be >= 0, got {tv_weight!r}")
    if tv > 0 and image_shape is None:
        raise ValueError("argument 'image_shape' is required with tv_weight > 0")
    shape = () if image_shape is None else tuple(int(s) for s in image_shape)
    lo, hi = (float(b) for b in bounds)
    if not lo < hi:
        raise ValueError(f"argument 'bounds' must be (low, high) with low < high, got {bounds!r}")
    t_norm = float(np.linalg.norm(target))
    if t_norm == 0:
        raise ValueError("argument 'observed' is the zero vector: nothing to match")

    def objective(x: Any) -> Any:
        g = anp.ravel(gradient(x))
        if loss == "cosine":
            val = 1.0 - anp.dot(g, target) / (anp.sqrt(anp.dot(g, g) + 1e-30) * t_norm)
        else:
            val = anp.sum((g - target) ** 2) / t_norm ** 2
        if tv > 0:
            val = val + tv * _total_variation(x, shape)
        return val

    value_and_grad = autograd.value_and_grad(objective)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    best_x, best_f = None, math.inf
    for _ in range(restarts):
        start = gen.uniform(lo, hi, dim)
        res = scipy.optimize.minimize(lambda v: tuple(np.asarray(o, float)
                                                      for o in value_and_grad(v)),
                                      start, jac=True, method="L-BFGS-B",
                                      bounds=[(lo, hi)] * dim, options={"maxiter": max_iter})
        if res.fun < best_f:
            best_x, best_f = np.asarray(res.x, dtype=float), float(res.fun)
    assert best_x is not None
    return best_x, best_f


# ---------------------------------------------------------------------- membership inference
def dp_tpr_bound(fpr: Any, epsilon: float, delta: float) -> np.ndarray:
    """The largest TPR an ``(epsilon, delta)``-DP mechanism allows a membership test at ``fpr``:
    ``min(1, e^eps fpr + delta, 1 - e^-eps (1 - delta - fpr))`` (Kairouz et al. 2015).

    Parameters
    ----------
    fpr : float or array in [0, 1]
    epsilon : float
    delta : float in [0, 1)

    Returns
    -------
    array of the shape of ``fpr``
    """
    eps = check_epsilon(epsilon)
    d = 0.0 if delta == 0 else check_delta(delta)
    f = np.asarray(fpr, dtype=float)
    if np.any((f < 0) | (f > 1)):
        raise ValueError("argument 'fpr' must lie in [0, 1]")
    return np.minimum.reduce([np.ones_like(f), math.exp(eps) * f + d,
                              1.0 - math.exp(-eps) * (1.0 - d - f)])


def dp_membership_bound(epsilon: float, delta: float) -> float:
    """``(e^eps - 1 + 2 delta) / (e^eps + 1)``: the largest membership advantage ``TPR - FPR``
    an ``(epsilon, delta)``-DP training run allows (see the module docstring).

    Parameters
    ----------
    epsilon : float
        The run's certified epsilon.
    delta : float
        Its delta.

    Returns
    -------
    float
        The largest advantage, in [0, 1].
    """
    eps = check_epsilon(epsilon)
    d = 0.0 if delta == 0 else check_delta(delta)
    a = math.exp(eps)
    return min(1.0, (a - 1.0 + 2.0 * d) / (a + 1.0))


@dataclasses.dataclass(frozen=True)
class MembershipResult:
    """A loss-threshold membership-inference attack's result.

    Attributes
    ----------
    advantage : float
        ``max_t TPR(t) - FPR(t)`` (guess "member" when ``loss <= t``).
    threshold : float
        The loss threshold reaching it.
    auc : float
        Area under the ROC curve (0.5: no better than chance).
    tpr_at_fpr : dict of float to float
        The largest TPR among thresholds with ``FPR <= f``.
    p_value : float
        Of the one-sided two-sample Kolmogorov-Smirnov test whose statistic is ``advantage``
        (null: members' losses are not stochastically smaller than non-members'): how likely
        an advantage this large is from a model that does not tell them apart.
    n_members, n_nonmembers : int
    """

    advantage: float
    threshold: float
    auc: float
    tpr_at_fpr: dict
    p_value: float
    n_members: int
    n_nonmembers: int

    def against(self, epsilon: float, delta: float) -> dict[str, Any]:
        """This result beside the bounds an ``(epsilon, delta)`` certificate implies.

        Parameters
        ----------
        epsilon, delta : float
            The certificate.

        Returns
        -------
        dict of str to float
            The measured advantage, AUC, p-value and true-positive rates, each beside the
            largest value the certificate allows (``advantage_bound``, ``tpr_bound_at_fpr_F``).
        """
        out: dict[str, Any] = {
            "advantage": self.advantage,
            "advantage_bound": dp_membership_bound(epsilon, delta),
            "auc": self.auc, "p_value": self.p_value, "epsilon": epsilon, "delta": delta,
            "n_members": self.n_members, "n_nonmembers": self.n_nonmembers}
        for f, tpr in self.tpr_at_fpr.items():
            out[f"tpr_at_fpr_{f:g}"] = tpr
            out[f"tpr_bound_at_fpr_{f:g}"] = float(dp_tpr_bound(f, epsilon, delta))
        return out


def loss_threshold_attack(member_losses: Any, nonmember_losses: Any,
                          fprs: Sequence[float] = (0.01, 0.1)) -> MembershipResult:
    """Yeom et al.'s loss-threshold membership inference over every threshold.

    Parameters
    ----------
    member_losses : array, shape ``(m,)``
        The model's losses on records it was trained on.
    nonmember_losses : array, shape ``(k,)``
        Its losses on records from the same distribution it was not trained on.
    fprs : sequence of float
        False positive rates at which the TPR is reported.

    Returns
    -------
    MembershipResult
    """
    mem = np.asarray(member_losses, dtype=float).ravel()
    non = np.asarray(nonmember_losses, dtype=float).ravel()
    if mem.size == 0 or non.size == 0:
        raise ValueError("arguments 'member_losses' and 'nonmember_losses' must be non-empty")
    if not (np.isfinite(mem).all() and np.isfinite(non).all()):
        raise ValueError("arguments 'member_losses' and 'nonmember_losses' must be finite")
    thresholds = np.unique(np.concatenate([mem, non]))
    # rates of the rule "loss <= t" at every distinct threshold, plus "nobody"
    tpr = np.concatenate([[0.0], np.searchsorted(np.sort(mem), thresholds, side="right")
                          / mem.size])
    fpr = np.concatenate([[0.0], np.searchsorted(np.sort(non), thresholds, side="right")
                          / non.size])
    gap = tpr - fpr
    best = int(np.argmax(gap))
    # Mann-Whitney: P(member loss < non-member loss) + P(tie) / 2
    order = scipy.stats.rankdata(np.concatenate([mem, non]))
    auc = (np.sum(order[mem.size:]) - non.size * (non.size + 1) / 2) / (mem.size * non.size)
    at = {}
    for f in fprs:
        f = check_real(f, "fprs")
        ok = fpr <= f + 1e-15
        at[float(f)] = float(tpr[ok].max())
    # max_t F_mem(t) - F_non(t) is the one-sided two-sample Kolmogorov-Smirnov statistic
    # the asymptotic p-value: the exact one is not computable for large samples
    p_value = scipy.stats.ks_2samp(mem, non, alternative="greater", method="asymp").pvalue
    return MembershipResult(float(gap[best]),
                            float(-np.inf if best == 0 else thresholds[best - 1]), float(auc),
                            at, float(p_value), int(mem.size), int(non.size))
