"""Riemannian Adam/AMSGrad against an implementation of Becigneul and Ganea (ICLR 2019,
Algorithm 1) written here from the paper, with the same retraction and transport written here
too (the sphere's exponential and parallel transport in closed form; on Stiefel, Edelman, Arias
and Smith's exponential through scipy's expm and the projection transport); geoopt's
RiemannianAdam as a second opinion where torch is installed; and the optimizer as the local
rule of DP-RSGD leaving the privacy report unchanged."""

import re

import numpy as np
import pytest
from scipy.linalg import expm

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.manifolds import SPD, Product, Sphere, Stiefel
from rfed.optim import RiemannianAdam, RiemannianAMSGrad, RiemannianSGD, minimize
from rfed.privacy import PrivacyBudget
from rfed.problems import FrechetMean


# ---------------------------------------------------------------- the reference, from the paper
def sphere_exp(x, u):
    t = np.linalg.norm(u)
    return x if t == 0 else np.cos(t) * x + np.sin(t) * u / t


def sphere_transport(x, y, u):
    """Parallel transport along the minimizing geodesic (Absil et al. 2008, eq. 8.2-style)."""
    return u - (y @ u) / (1.0 + x @ y) * (x + y)


def stiefel_exp(x, u):
    p = x.shape[1]
    a = x.T @ u
    block = np.block([[a, -u.T @ u], [np.eye(p), a]])
    return np.hstack([x, u]) @ expm(block)[:, :p] @ expm(-a)


def stiefel_proj(x, v):
    s = x.T @ v
    return v - x @ (0.5 * (s + s.T))


def paper_radam(x, rgrad, exp, transport, lr, n_steps, b1, b2, eps, amsgrad, bias):
    """Algorithm 1 of Becigneul and Ganea (one factor), with optional bias correction."""
    tau = np.zeros_like(x)
    v = 0.0
    v_hat = 0.0
    out = [x]
    for t in range(1, n_steps + 1):
        g = rgrad(x)
        m = b1 * tau + (1 - b1) * g
        v = b2 * v + (1 - b2) * float(np.sum(g * g))
        v_hat = max(v_hat, v) if amsgrad else v
        c1 = 1 - b1**t if bias else 1.0
        c2 = 1 - b2**t if bias else 1.0
        x_new = exp(x, -lr * (m / c1) / (np.sqrt(v_hat / c2) + eps))
        tau = transport(x, x_new, m)
        x = x_new
        out.append(x)
    return np.array(out)


def _rayleigh(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    a = a + a.T
    return a, lambda x: 2 * (a @ x - (x @ a @ x) * x)  # grad of x^T A x on the sphere


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("bias, eps", [(True, 1e-8), (False, 0.0)])
def test_adam_on_the_sphere_matches_the_paper(amsgrad, bias, eps):
    m = Sphere(5)
    a, rgrad = _rayleigh(6, 0)
    x0 = m.random_point(1)
    ref = paper_radam(x0, rgrad, sphere_exp, sphere_transport, 0.05, 100, 0.9, 0.99, eps,
                      amsgrad, bias)
    opt = RiemannianAdam(0.05, (0.9, 0.99), eps, amsgrad=amsgrad, bias_correction=bias)
    traj = [x0]
    minimize(m, rgrad, x0, opt, 100, callback=lambda t, x: traj.append(x))
    np.testing.assert_allclose(np.array(traj), ref, rtol=0, atol=1e-10)
    assert np.max(np.abs(ref[-1] - ref[0])) > 0.1  # it moved


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_on_stiefel_matches_the_paper(amsgrad):
    m = Stiefel(6, 3)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 6))
    a = a + a.T
    nmat = np.diag([3.0, 2.0, 1.0])

    def rgrad(x):  # Brockett cost tr(X^T A X N)
        return stiefel_proj(x, 2 * a @ x @ nmat)

    x0 = m.random_point(rng)
    ref = paper_radam(x0, rgrad, stiefel_exp, lambda x, y, u: stiefel_proj(y, u), 0.02, 100,
                      0.9, 0.999, 1e-8, amsgrad, True)
    opt = RiemannianAdam(0.02, amsgrad=amsgrad)  # Stiefel's transport is the projection
    traj = [x0]
    minimize(m, rgrad, x0, opt, 100, callback=lambda t, x: traj.append(x))
    np.testing.assert_allclose(np.array(traj), ref, rtol=0, atol=1e-10)


def test_batched_rows_are_independent_problems():
    m = Sphere(4)
    _, rgrad = _rayleigh(5, 3)
    x0 = m.random_point(4, (3,))
    batched = minimize(m, lambda x: np.stack([rgrad(r) for r in x]), x0,
                       RiemannianAMSGrad(0.05), 40)
    for i in range(3):
        single = minimize(m, rgrad, x0[i], RiemannianAMSGrad(0.05), 40)
        np.testing.assert_allclose(batched[i], single, atol=1e-13)


def test_per_factor_adaptivity_on_a_product():
    """The paper's product rule: each factor has its own second moment, so a run on
    S^3 x SPD(2) is the two runs on the factors."""
    s, spd = Sphere(3), SPD(2)
    prod = Product(s, spd)
    _, g_s = _rayleigh(4, 5)
    b = np.array([[2.0, 0.3], [0.3, 1.0]])

    def g_spd(p):  # Frechet gradient -2 Log_p(b)
        return -2.0 * spd.log(p, b)

    x0 = prod.random_point(6)
    both = minimize(prod, lambda x: (g_s(x[0]), g_spd(x[1])), x0, RiemannianAdam(0.05), 60)
    alone_s = minimize(s, g_s, x0[0], RiemannianAdam(0.05), 60)
    alone_spd = minimize(spd, g_spd, x0[1], RiemannianAdam(0.05), 60)
    np.testing.assert_allclose(both[0], alone_s, atol=1e-13)
    np.testing.assert_allclose(both[1], alone_spd, atol=1e-12)
    flat = prod.as_flat()
    both_flat = minimize(flat, lambda z: flat.join((g_s(flat.split(z)[0]),
                                                    g_spd(flat.split(z)[1]))),
                         flat.join(x0), RiemannianAdam(0.05), 60)
    np.testing.assert_allclose(both_flat, flat.join(both), atol=1e-12)
    assert spd.dist(both[1], b) < 0.1 * spd.dist(x0[1], b)


def test_optimizers_find_the_leading_eigenvector():
    m = Sphere(7)
    a, rgrad = _rayleigh(8, 9)
    top = np.linalg.eigh(a)[1][:, -1]
    for opt in (RiemannianSGD(0.02, momentum=0.5), RiemannianAdam(0.02),
                RiemannianAMSGrad(0.02)):
        # maximize x^T A x: descend along -grad
        x = minimize(m, lambda z: -rgrad(z), m.random_point(0), opt, 3000)
        assert min(np.linalg.norm(x - top), np.linalg.norm(x + top)) < 1e-4, opt


def test_sgd_without_momentum_is_the_plain_exponential_step():
    m = Sphere(3)
    x = m.random_point(0)
    g = m.tangent_gaussian(x, 1.0, 1)
    new, _ = RiemannianSGD().step(m, x, g, RiemannianSGD().init(m, x), 0.3)
    np.testing.assert_array_equal(new, m.exp(x, -0.3 * g))


@pytest.mark.parametrize("make, arg", [
    (lambda: RiemannianAdam(-1.0), "'lr'"),
    (lambda: RiemannianAdam(betas=(0.9, 1.0)), "'betas[1]'"),
    (lambda: RiemannianAdam(betas=0.9), "'betas'"),
    (lambda: RiemannianAdam(eps=np.nan), "'eps'"),
    (lambda: RiemannianAdam(second_moment="diag"), "'second_moment'"),
    (lambda: RiemannianAdam(transport="none"), "'transport'"),
    (lambda: RiemannianSGD(momentum=1.0), "'momentum'"),
    (lambda: DPRSGD(local_optimizer="adam"), "'local_optimizer'"),
])
def test_bad_arguments_are_named(make, arg):
    with pytest.raises(ValueError, match=re.escape(arg)):
        make()


def test_missing_step_size_is_named():
    m = Sphere(2)
    x = m.random_point(0)
    with pytest.raises(ValueError, match="'lr'"):
        RiemannianAdam().step(m, x, m.zero_vector(x), RiemannianAdam().init(m, x))


# ---------------------------------------------------------------- geoopt, a second opinion
@pytest.mark.parametrize("which", ["sphere", "stiefel"])
def test_geoopt_riemannian_adam_agrees(which):
    torch = pytest.importorskip("torch")
    geoopt = pytest.importorskip("geoopt")
    torch.set_num_threads(1)
    rng = np.random.default_rng(11)
    if which == "sphere":
        m, gm = Sphere(5), geoopt.SphereExact()
        a = rng.standard_normal((6, 6))
        a = a + a.T
        x0 = m.random_point(rng)

        def egrad(x):
            return 2 * a @ x
    else:
        m, gm = Stiefel(6, 3), geoopt.EuclideanStiefelExact()
        a = rng.standard_normal((6, 6))
        a = a + a.T
        nmat = np.diag([3.0, 2.0, 1.0])
        x0 = m.random_point(rng)

        def egrad(x):
            return 2 * a @ x @ nmat
    param = geoopt.ManifoldParameter(torch.tensor(x0.copy()), manifold=gm)
    opt_t = geoopt.optim.RiemannianAdam([param], lr=0.02, amsgrad=True)
    theirs = []
    for _ in range(100):
        opt_t.zero_grad()
        param.grad = torch.tensor(egrad(param.detach().numpy()))
        opt_t.step()
        theirs.append(param.detach().numpy().copy())
    # geoopt: second moment from component_inner, the full inner product on a sphere or a
    # Stiefel manifold (the paper's scalar); momentum carried by the projection
    ours_opt = RiemannianAMSGrad(0.02, transport="projection")
    ours = []
    minimize(m, lambda x: m.egrad2rgrad(x, egrad(x)), x0, ours_opt, 100,
             callback=lambda t, x: ours.append(x))
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=0, atol=1e-10)


# ---------------------------------------------------------------- private trainers
def _frechet_problem():
    s = Sphere(4)
    rng = np.random.default_rng(0)
    c = s.random_point(rng)
    cs = np.broadcast_to(c, (4, 20, 5))
    return FrechetMean(s, s.exp(cs, s.tangent_gaussian(cs, 0.4, rng))), c


@pytest.mark.parametrize("rule", [RiemannianAdam(), RiemannianAMSGrad(),
                                  RiemannianSGD(momentum=0.8)])
def test_local_rule_leaves_the_privacy_report_unchanged(rule):
    """DP-RSGD's privatized step fed to an adaptive rule is post-processing: the same noise,
    the same ledger, the same certified epsilon as plain DP-RSGD."""
    prob, c = _frechet_problem()
    budget = PrivacyBudget(2.0, 1e-5)

    def run(local_optimizer):
        alg = PriRFed(DPRSGD(steps=3, batch_size=5, clip=1.0, local_optimizer=local_optimizer),
                      n_sampled=2, step_size=0.05, budget=budget, n_rounds=20)
        return alg.run(prob, 20, rng=4, x0=c, eval_every=20, with_reference=False)

    plain, adaptive = run(None), run(rule)
    assert adaptive.privacy == plain.privacy
    assert plain.privacy["epsilon_certified"] <= 2.0 + 1e-9
    np.testing.assert_array_equal(adaptive.state.plan.sigma, plain.state.plan.sigma)
    assert adaptive.state.ledger.to_dict() == plain.state.ledger.to_dict()
    assert not np.array_equal(adaptive.x, plain.x)  # the rule did change the iterates


def test_default_local_rule_is_bit_identical_to_plain_dp_rsgd():
    prob, c = _frechet_problem()

    def run(**kw):
        alg = PriRFed(DPRSGD(steps=2, batch_size=5, clip=1.0, noise_multiplier=1.0, **kw),
                      n_sampled=2, step_size=0.1)
        return alg.run(prob, 10, rng=2, x0=c, eval_every=10, with_reference=False).x

    np.testing.assert_array_equal(run(), run(local_optimizer=RiemannianSGD()))
