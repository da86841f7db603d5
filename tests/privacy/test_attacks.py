"""The attack harness (rfed.privacy.attacks): image metrics against closed forms, gradient
inversion of DPDL's messages (recovers a record from an unnoised cross-gradient, fails at a
certified budget), membership inference and the bound a certificate implies on it."""

import math

import numpy as np
import pytest
import scipy.stats

from rfed.algorithms.decentralized import DPDL, DPDPSGD
from rfed.algorithms.decentralized import base as contract
from rfed.networks.comm import arc_list
from rfed.networks.graphs import complete, ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.privacy.attacks import (
    dp_membership_bound,
    dp_tpr_bound,
    gradient_matching_attack,
    invert_affine_gradient,
    loss_threshold_attack,
    mse,
    psnr,
    reconstruction_scores,
    ssim,
)
from rfed.problems.mlp import MLPClassifier, load_digits_split

# ---------------------------------------------------------------------- metrics
C1, C2 = 0.01 ** 2, 0.03 ** 2   # K1 = 0.01, K2 = 0.03, L = 1


def test_mse_and_psnr_closed_forms():
    zeros, ones = np.zeros((2, 8, 8)), np.ones((2, 8, 8))
    np.testing.assert_allclose(mse(zeros, ones), [1.0, 1.0])
    np.testing.assert_allclose(psnr(zeros, ones, 1.0), [0.0, 0.0])
    np.testing.assert_allclose(psnr(zeros, ones, 2.0), 20 * math.log10(2.0))   # 6.02 dB
    half = np.full((8, 8), 0.5)
    assert psnr(half, half + 0.1, 1.0) == pytest.approx(20.0)   # MSE 0.01
    assert psnr(half, half, 1.0) == np.inf


def test_ssim_closed_forms():
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 1, (3, 9, 9))
    np.testing.assert_allclose(ssim(img, img, 1.0), 1.0)
    # constant images a and b: sigma = 0, SSIM = (2ab + C1) / (a^2 + b^2 + C1) everywhere
    a, b = 0.2, 0.7
    got = ssim(np.full((9, 9), a), np.full((9, 9), b), 1.0)
    assert got == pytest.approx((2 * a * b + C1) / (a * a + b * b + C1), rel=1e-12)
    # one uniform window covering the image: the global formula with population moments
    x, y = rng.uniform(0, 1, (7, 7)), rng.uniform(0, 1, (7, 7))
    mx, my = x.mean(), y.mean()
    vx, vy, cxy = x.var(), y.var(), np.mean((x - mx) * (y - my))
    expect = ((2 * mx * my + C1) * (2 * cxy + C2)) / ((mx ** 2 + my ** 2 + C1) * (vx + vy + C2))
    assert ssim(x, y, 1.0, gaussian=False, win_size=7) == pytest.approx(expect, rel=1e-12)
    # symmetric, and lower for a noisier copy
    assert ssim(x, y, 1.0) == pytest.approx(ssim(y, x, 1.0), rel=1e-12)
    big = rng.uniform(0, 1, (20, 20))
    near, far = big + 0.05 * rng.standard_normal(big.shape), big + 0.3 * rng.standard_normal(
        big.shape)
    assert ssim(near, big, 1.0) > ssim(far, big, 1.0)


def test_ssim_gaussian_window_against_a_direct_loop():
    """Eqs. (13)-(17) of Wang et al. with the 11 x 11 Gaussian window (sigma 1.5), one window
    position at a time."""
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0, 1, (14, 13)), rng.uniform(0, 1, (14, 13))
    r = np.arange(11) - 5
    w = np.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * 1.5 ** 2))
    w /= w.sum()
    vals = []
    for i in range(14 - 10):
        for j in range(13 - 10):
            px, py = x[i:i + 11, j:j + 11], y[i:i + 11, j:j + 11]
            mx, my = np.sum(w * px), np.sum(w * py)
            vx, vy = np.sum(w * (px - mx) ** 2), np.sum(w * (py - my) ** 2)
            cxy = np.sum(w * (px - mx) * (py - my))
            vals.append(((2 * mx * my + C1) * (2 * cxy + C2))
                        / ((mx ** 2 + my ** 2 + C1) * (vx + vy + C2)))
    assert ssim(x, y, 1.0) == pytest.approx(np.mean(vals), rel=1e-10)


def test_metric_arguments_are_checked():
    with pytest.raises(ValueError, match="reconstruction"):
        mse(np.zeros((8, 8)), np.zeros((7, 8)))
    with pytest.raises(ValueError, match="data_range"):
        psnr(np.zeros((8, 8)), np.ones((8, 8)), 0.0)
    with pytest.raises(ValueError, match="win_size"):
        ssim(np.zeros((8, 8)), np.ones((8, 8)), 1.0, win_size=4)


# ---------------------------------------------------------------------- analytic inversion
def test_affine_inversion_recovers_one_record_exactly():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, 12)
    w, b, c = rng.standard_normal((12, 5)), rng.standard_normal(5), rng.standard_normal(5)
    # L = sum c tanh(x W + b): dL/dh = c (1 - tanh^2), dL/dW = x^T dL/dh, dL/db = dL/dh
    dh = c * (1 - np.tanh(x @ w + b) ** 2)
    gw, gb = np.outer(x, dh), dh
    np.testing.assert_allclose(invert_affine_gradient(gw, gb), x, rtol=1e-12)
    # clipping scales the whole gradient: the ratio is unchanged
    np.testing.assert_allclose(invert_affine_gradient(0.01 * gw, 0.01 * gb), x, rtol=1e-12)
    # a mean over two records is not one of them
    x2 = rng.uniform(0, 1, 12)
    dh2 = c * (1 - np.tanh(x2 @ w + b) ** 2)
    mix = invert_affine_gradient((gw + np.outer(x2, dh2)) / 2, (gb + dh2) / 2)
    assert np.abs(mix - x).max() > 1e-3
    with pytest.raises(ValueError, match="grad_bias"):
        invert_affine_gradient(gw, gb[:4])


# ---------------------------------------------------------------------- DPDL's messages
#: Stated levels: an unnoised cross-gradient is inverted to better than 40 dB; at the certified
#: budget the reconstruction is no better than the blank guess (all pixels 1/2) and below 10 dB.
RECOVERED_DB, FAILED_DB = 40.0, 10.0


@pytest.fixture(scope="module")
def dpdl_messages():
    """One DPDL round on digits (6 agents on a ring, minibatches of one record, an MLP with 16
    hidden units) at a certified budget eps = 8 (delta = 1e-5, 50 planned rounds): every
    cross-gradient an agent sends, before (no defence) and after the Gaussian mechanism, the
    model it was computed at, and the record it was computed on."""
    x_tr, y_tr, _, _ = load_digits_split(rng=0)
    n, q = 6, 100
    prob = MLPClassifier(x_tr[:n * q].reshape(n, q, 64), y_tr[:n * q].reshape(n, q), n_hidden=16)
    captured = []
    real = contract.gaussian_mechanism

    def spy(manifold, x, value, sigma, rng):
        out = real(manifold, x, value, sigma, rng)
        captured.append((x.copy(), value.copy(), out.copy()))
        return out

    mp = pytest.MonkeyPatch()
    mp.setattr(contract, "gaussian_mechanism", spy)
    try:
        alg = DPDL(Network(ring(n)), lr=0.05, batch_size=1, clip=2.0,
                   budget=PrivacyBudget(8.0, 1e-5), n_rounds=50)
        state = alg.init(prob, prob.initial_point(1), np.random.default_rng(0))
        idx = alg._minibatches(prob, state, np.arange(n))
        state = alg.step(prob, state)
    finally:
        mp.undo()
    models, clean, noisy = (np.concatenate(a) for a in zip(*captured, strict=True))
    m = arc_list(alg.weights)[0].size
    owners = arc_list(alg.weights)[0]          # data owner of each cross-gradient
    rec = prob.data["features"][owners, idx[owners, 0]]
    lab = prob.data["labels"][owners, idx[owners, 0]]
    return prob, models[:m], clean[:m], noisy[:m], rec, lab, alg.privacy(state)


def _analytic(prob, messages):
    w1, b1, _, _ = prob.unflatten(messages)
    return np.clip(invert_affine_gradient(w1, b1), 0.0, 1.0)   # the attacker knows the box


def test_inversion_recovers_records_from_unnoised_messages_and_fails_at_a_budget(
        dpdl_messages):
    prob, _, clean, noisy, rec, _, rep = dpdl_messages
    # the noise certifies eps = 8 for the planned 50 rounds; the attacked round spent part
    assert rep["target_epsilon"] == 8.0 and 0 < rep["epsilon_certified"] <= 8.0
    eps = rep["epsilon_certified"]
    no_defence = reconstruction_scores(_analytic(prob, clean), rec, (8, 8), 1.0).summary()
    private = reconstruction_scores(_analytic(prob, noisy), rec, (8, 8), 1.0).summary()
    blank = reconstruction_scores(np.full(rec.shape, 0.5), rec, (8, 8), 1.0).summary()
    print(f"\n[attack] analytic inversion of {rec.shape[0]} cross-gradients: no defence "
          f"PSNR {no_defence['psnr_db']:.1f} dB SSIM {no_defence['ssim']:.3f}; budget eps 8 "
          f"({eps:.2f} spent by this round): PSNR {private['psnr_db']:.2f} dB SSIM "
          f"{private['ssim']:.3f}; blank guess PSNR {blank['psnr_db']:.2f} dB")
    assert no_defence["psnr_db"] > RECOVERED_DB and no_defence["ssim"] > 0.99
    assert private["psnr_db"] < min(FAILED_DB, blank["psnr_db"] + 1.0)
    assert private["ssim"] < 0.1


def _mlp_gradient(prob, theta, label):
    """``x -> flat gradient`` of the cross-entropy of (x, label) at ``theta``, written with
    autograd.numpy (the same parameter layout as MLPClassifier)."""
    import autograd.numpy as anp

    w1, b1, w2, b2 = prob.unflatten(theta)
    onehot = np.eye(prob.n_classes)[label]

    def grad(x):
        hid = anp.tanh(anp.dot(x, w1) + b1)
        logits = anp.dot(hid, w2) + b2
        p = anp.exp(logits - anp.max(logits))
        d = p / anp.sum(p) - onehot
        dh = anp.dot(w2, d) * (1 - hid ** 2)
        return anp.concatenate([anp.ravel(anp.outer(x, dh)), dh,
                                anp.ravel(anp.outer(hid, d)), d])

    return grad


def test_gradient_matching_attack_recovers_and_fails(dpdl_messages):
    """The iterative attack (deep leakage from gradients, cosine loss + TV prior) on two of
    the messages: the model's gradient formula is checked against rfed's first."""
    prob, models, clean, noisy, rec, lab, _ = dpdl_messages
    batch = {"features": rec[:1, None], "onehot": np.eye(10)[lab[:1, None]]}
    np.testing.assert_allclose(_mlp_gradient(prob, models[0], lab[0])(rec[0]),
                               prob.sample_rgrad(models[:1], batch)[0, 0], atol=1e-12)
    out = {}
    for name, msgs in (("clean", clean), ("noisy", noisy)):
        recs = [gradient_matching_attack(_mlp_gradient(prob, models[k], lab[k]), msgs[k], 64,
                                         rng=k, tv_weight=1e-4, image_shape=(8, 8),
                                         restarts=1, max_iter=150)[0] for k in range(2)]
        out[name] = reconstruction_scores(np.array(recs), rec[:2], (8, 8), 1.0).summary()
    print(f"\n[attack] gradient matching: no defence PSNR {out['clean']['psnr_db']:.1f} dB, "
          f"certified budget PSNR {out['noisy']['psnr_db']:.2f} dB")
    assert out["clean"]["psnr_db"] > 30.0
    assert out["noisy"]["psnr_db"] < FAILED_DB


# ---------------------------------------------------------------------- membership inference
def test_membership_bound_is_the_maximum_over_the_dp_region():
    for eps, delta in [(0.5, 0.0), (1.0, 1e-5), (3.0, 1e-3)]:
        grid = np.linspace(0, 1, 200_001)
        brute = float(np.max(dp_tpr_bound(grid, eps, delta) - grid))
        assert dp_membership_bound(eps, delta) == pytest.approx(brute, abs=1e-5)
    assert dp_membership_bound(1.0, 0.0) == pytest.approx(math.tanh(0.5))
    assert dp_tpr_bound(0.0, 1.0, 1e-5) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        dp_membership_bound(0.0, 1e-5)


def test_loss_threshold_attack_on_gaussian_losses():
    """Equal-variance Gaussian losses shifted by mu: advantage 2 Phi(mu/2) - 1, AUC
    Phi(mu/sqrt 2) (to the sampling error of 20,000 draws each)."""
    rng = np.random.default_rng(3)
    mu = 1.0
    mem, non = rng.standard_normal(20_000), mu + rng.standard_normal(20_000)
    res = loss_threshold_attack(mem, non, fprs=(0.01, 0.1))
    assert res.advantage == pytest.approx(2 * scipy.stats.norm.cdf(mu / 2) - 1, abs=0.02)
    assert res.auc == pytest.approx(scipy.stats.norm.cdf(mu / math.sqrt(2)), abs=0.01)
    # TPR at FPR f: Phi(Phi^{-1}(f) + mu)
    assert res.tpr_at_fpr[0.1] == pytest.approx(
        scipy.stats.norm.cdf(scipy.stats.norm.ppf(0.1) + mu), abs=0.02)
    assert res.p_value < 1e-10
    same = loss_threshold_attack(rng.standard_normal(2000), rng.standard_normal(2000))
    assert same.advantage < 0.06 and same.p_value > 1e-3


@pytest.fixture(scope="module")
def digits_models():
    """An MLP on 4 agents x 25 digits, trained without noise until it overfits, and the same
    model trained with DP-DPSGD at a certified eps = 1 (delta = 1e-5)."""
    x_tr, y_tr, x_te, y_te = load_digits_split(rng=0)
    n, q = 4, 25
    prob = MLPClassifier(x_tr[:n * q].reshape(n, q, 64), y_tr[:n * q].reshape(n, q), n_hidden=32)
    x0 = prob.initial_point(1)
    overfit = DPDPSGD(Network(complete(n)), lr=0.5, beta=0.5, batch_size=q, clip=1e6).run(
        prob, 400, rng=0, x0=x0, eval_every=400, with_reference=False)
    private = DPDPSGD(Network(complete(n)), lr=0.5, beta=0.5, batch_size=5, clip=1.0,
                      budget=PrivacyBudget(1.0, 1e-5), n_rounds=200).run(
        prob, 200, rng=0, x0=x0, eval_every=200, with_reference=False)

    def losses(theta, feats, labels):
        return prob.sample_loss(theta, {"features": feats, "onehot": np.eye(10)[labels]})

    members = (prob.data["features"].reshape(-1, 64), prob.data["labels"].reshape(-1))
    return {name: (losses(run.x, *members), losses(run.x, x_te, y_te), run.privacy)
            for name, run in (("overfit", overfit), ("private", private))}


def test_membership_advantage_below_the_certified_bound_and_positive_when_overfit(
        digits_models):
    mem, non, rep = digits_models["private"]
    eps, delta = rep["epsilon_certified"], rep["delta"]
    private = loss_threshold_attack(mem, non).against(eps, delta)
    mem, non, _ = digits_models["overfit"]
    overfit = loss_threshold_attack(mem, non)
    print(f"\n[attack] membership advantage: private (certified eps {eps:.3f}) "
          f"{private['advantage']:.3f} <= bound {private['advantage_bound']:.3f}; "
          f"overfit non-private {overfit.advantage:.3f} (KS p = {overfit.p_value:.1e})")
    assert private["advantage"] <= private["advantage_bound"]
    for f in (0.01, 0.1):
        assert private[f"tpr_at_fpr_{f:g}"] <= private[f"tpr_bound_at_fpr_{f:g}"]
    assert overfit.advantage > 0.25 and overfit.p_value < 1e-6


def test_attacks_import_nothing_from_algorithms_or_experiments():
    """Imports flow manifolds <- privacy <- algorithms: the harness takes arrays and callables."""
    import subprocess
    import sys

    code = ("import sys, rfed.privacy.attacks; "
            "print(sorted(m for m in sys.modules if m.startswith(('rfed.algorithms', "
            "'rfed.experiments'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
