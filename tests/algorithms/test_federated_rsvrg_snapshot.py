"""DP-RSVRG with a released snapshot (issue 9): sensitivities, accounting, empirical audit.

The variant releases the snapshot gradient once per outer loop (sensitivity ``2 tau_0 / N``)
and, in each inner step, the mean over a minibatch of ``b`` records (without replacement) of
the per-sample gradient differences clipped jointly to ``tau_d`` (sensitivity ``2 tau_d / b``,
amplified by the subsampling). See the module docstring of ``rfed.algorithms.federated.local``.
"""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.accounting import certified_epsilon
from rfed.algorithms.federated.sampling import sample_minibatches
from rfed.manifolds import Sphere
from rfed.privacy import PrivacyBudget
from rfed.privacy.accountants import EventSpec
from rfed.privacy.audit import audit
from rfed.privacy.budget import certify
from rfed.privacy.mechanisms import gaussian_mechanism
from rfed.problems import SpherePCA

S2 = Sphere(2)
E0, E1 = np.eye(3)[0], np.eye(3)[1]


def _geodesic_pair(theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Snapshot e0 and the point at angle theta towards e1."""
    return E0.copy(), np.cos(theta) * E0 + np.sin(theta) * E1


def _problem(n_agents: int = 1, n: int = 8, seed: int = 0) -> SpherePCA:
    return SpherePCA(np.random.default_rng(seed).standard_normal((n_agents, n, 3)))


def _diff_mean(problem, x, snap, records, tau_d):
    """The variant's inner-step value on a batch ``records`` of shape ``(A, b, 3)``."""
    a, b = records.shape[:2]
    return DPRSVRG.difference_mean(problem, x, snap, {"z": records}, np.ones((a, b), bool),
                                   np.full(a, float(b)), tau_d)[0]


def test_inner_step_sensitivity_is_reached_by_an_adversarial_pair():
    # PCA: grad f_z(x) = -2 (z.x) P_x z. With x~ = e0 and x at angle theta towards e1:
    # z = t e1 gives the difference -c w and z = t e0 gives +c w (w the unit tangent of the
    # geodesic at x, c = 2 t^2 sin(theta) cos(theta)): once both are clipped to tau_d the
    # mean moves by exactly 2 tau_d / b
    snap, x = _geodesic_pair(0.3)
    rng = np.random.default_rng(1)
    b, tau_d, t = 5, 0.7, 10.0
    common = rng.standard_normal((b - 1, 3))
    d0 = np.concatenate([common, [t * E1]])[None]
    d1 = np.concatenate([common, [t * E0]])[None]
    p = _problem()
    v0 = _diff_mean(p, x[None], snap[None], d0, tau_d)
    v1 = _diff_mean(p, x[None], snap[None], d1, tau_d)
    moved = float(S2.norm(x, (v0 - v1)[0]))
    assert moved == pytest.approx(2.0 * tau_d / b, rel=1e-12)


def test_inner_step_never_moves_more_than_its_sensitivity():
    # random neighbouring batches (one record replaced by an arbitrary, often huge one) at
    # random point pairs: the clipped mean never moves more than 2 tau_d / b
    rng = np.random.default_rng(2)
    trials, b, tau_d = 4000, 3, 0.2
    snap = S2.random_point(rng, (trials,))
    x = S2.exp(snap, S2.proj(snap, rng.standard_normal((trials, 3))))
    recs = rng.standard_normal((trials, b, 3)) * rng.uniform(0.1, 30.0, (trials, 1, 1))
    other = recs.copy()
    other[:, 0] = rng.standard_normal((trials, 3)) * rng.uniform(0.1, 30.0, (trials, 1))
    p = _problem()
    v0 = _diff_mean(p, x, snap, recs, tau_d)
    v1 = _diff_mean(p, x, snap, other, tau_d)
    moved = S2.norm(x, v0 - v1)
    assert moved.max() <= 2.0 * tau_d / b * (1 + 1e-12)
    assert moved.max() > 0.9 * 2.0 * tau_d / b  # the bound is nearly attained at random too
    # every released difference is clipped: a single summand never exceeds tau_d
    single = _diff_mean(p, x, snap, recs[:, :1], tau_d)
    assert S2.norm(x, single).max() <= tau_d * (1 + 1e-12)


def test_snapshot_release_sensitivity_is_reached_and_not_exceeded():
    # the snapshot's full clipped mean: z = t(e0 + e1) and t(e0 - e1) have opposite gradients
    # at e0, so replacing one moves the mean of N summands clipped to tau_0 by 2 tau_0 / N
    n, tau0, t = 6, 0.5, 5.0
    rng = np.random.default_rng(3)
    common = rng.standard_normal((n - 1, 3))
    p = _problem()
    sums = []
    for canary in (t * (E0 + E1), t * (E0 - E1)):
        recs = np.concatenate([common, [canary]])[None]
        total, _ = p.clipped_grad_sum(E0[None], {"z": recs}, tau0)
        sums.append(total[0] / n)
    assert float(S2.norm(E0, sums[0] - sums[1])) == pytest.approx(2 * tau0 / n, rel=1e-12)


def test_plan_sensitivities_and_the_ledger_hold_both_release_kinds():
    p = _problem(n_agents=3, n=40)
    tr = DPRSVRG(steps=2, inner_steps=4, clip=0.3, clip_full=0.8, variant="released_snapshot",
                 batch_size=8, noise_multiplier=1.5)
    plan = tr.plan(p)
    np.testing.assert_allclose(plan.sensitivity, 2 * 0.3 / 8)
    np.testing.assert_allclose(plan.snapshot_sensitivity, 2 * 0.8 / 40)
    np.testing.assert_allclose(plan.sigma, 1.5 * 2 * 0.3 / 8)
    np.testing.assert_allclose(plan.snapshot_sigma, 1.5 * 2 * 0.8 / 40)
    assert plan.sampling == "without_replacement" and plan.steps == 8
    assert plan.snapshot_steps == 2
    alg = PriRFed(tr, None, 0.1)
    res = alg.run(p, 3, rng=0)
    spent = res.state.ledger.spent(1) if hasattr(res, "state") else None
    report = res.privacy
    assert report["certified"]["snapshot_releases_per_round"] == 2
    assert any("released snapshot" in a for a in report["assumptions"])
    if spent is not None:
        counts = {spec.sampling: c for spec, c in spent}
        assert counts == {"without_replacement": 3 * 8, "none": 3 * 2}


def test_certified_epsilon_is_the_independent_rdp_composition():
    # N = 40 records, b = 8, K = 2, m = 4, T = 5 rounds with full participation, z = 1.2:
    # per agent 5 * 2 = 10 full-batch Gaussians and 5 * 8 = 40 subsampled ones (replace-one)
    n, b, k, m, t, z, delta = 40, 8, 2, 4, 5, 1.2, 1e-5
    p = _problem(n_agents=2, n=n)
    tr = DPRSVRG(steps=k, inner_steps=m, clip=0.3, clip_full=0.8, variant="released_snapshot",
                 batch_size=b, noise_multiplier=z)
    alg = PriRFed(tr, None, 0.1, privacy_delta=delta)
    state = alg.init(p, S2.random_point(np.random.default_rng(0)), np.random.default_rng(0))
    for _ in range(t):
        state = alg.step(p, state)
    eps, method, _ = certified_epsilon(state.ledger, delta, "rdp")
    acc = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.GaussianDpEvent(z), k * t)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(n, b, dp_event.GaussianDpEvent(z)),
                k * m * t)
    assert method == "rdp"
    assert eps == pytest.approx(acc.get_epsilon(delta), rel=1e-6)
    # dropping either kind would certify less: both are in the ledger
    only_inner = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    only_inner.compose(dp_event.SampledWithoutReplacementDpEvent(
        n, b, dp_event.GaussianDpEvent(z)), k * m * t)
    assert eps > only_inner.get_epsilon(delta) * 1.01


@pytest.mark.slow  # 10-15 s: a bisection over without-replacement RDP curves
def test_budget_calibration_spends_the_budget_with_both_kinds():
    n, b, k, m, t = 40, 8, 2, 4, 6
    p = _problem(n_agents=2, n=n)
    tr = DPRSVRG(steps=k, inner_steps=m, clip=0.3, clip_full=0.8, variant="released_snapshot",
                 batch_size=b)
    alg = PriRFed(tr, None, 0.1, budget=PrivacyBudget(2.0, 1e-5, method="rdp"), n_rounds=t)
    res = alg.run(p, t, rng=0)
    z = res.privacy["noise_multiplier"]
    acc = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.GaussianDpEvent(z), k * t)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(n, b, dp_event.GaussianDpEvent(z)),
                k * m * t)
    indep = acc.get_epsilon(1e-5)
    assert 0.98 * 2.0 <= indep <= 2.0 * (1 + 1e-9)
    assert res.privacy["epsilon_certified"] == pytest.approx(indep, rel=1e-6)


def test_empirical_audit_of_an_inner_step_stays_below_the_certified_epsilon():
    # one inner step of one agent (N = 4 records, b = 2) on the adversarial pair of the first
    # test: statistic <release, w>_x, w the canary's clipped difference direction
    snap, x = _geodesic_pair(0.3)
    big, tau_d, n, b, z, delta = 10.0, 1.0, 4, 2, 0.8, 1e-5
    rng0 = np.random.default_rng(5)
    common = rng0.standard_normal((n - 1, 3))
    data = [np.concatenate([common, [big * E1]]), np.concatenate([common, [big * E0]])]
    p = _problem()
    sigma = z * 2.0 * tau_d / b
    w = S2.log(x, snap)
    w = w / S2.norm(x, w)

    def run_trials(neighbour, trials, rng, noise=sigma):
        idx, valid = sample_minibatches(np.full(trials, n), np.full(trials, b), rng)
        recs = data[neighbour][idx]
        xs = np.broadcast_to(x, (trials, 3))
        v, _ = DPRSVRG.difference_mean(p, xs, np.broadcast_to(snap, (trials, 3)), {"z": recs},
                                       valid, np.full(trials, float(b)), tau_d)
        out = gaussian_mechanism(S2, xs, v, noise, rng)
        return S2.inner(xs, out, np.broadcast_to(w, (trials, 3)))

    spec = EventSpec.make("gaussian", z, "without_replacement", dataset_size=n, sample_size=b)
    certified = certify([(spec, 1)], delta, "replace_one", "rdp").epsilon
    res = audit(run_trials, 20_000, delta, rng=np.random.default_rng(6))
    assert 0.0 < res.epsilon_lower < certified
    # the audit has power: noise 8 times too small is caught above the certified value
    weak = audit(lambda nb, tr, r: run_trials(nb, tr, r, sigma / 8), 20_000, delta,
                 rng=np.random.default_rng(7))
    assert weak.epsilon_lower > certified


def test_variant_arguments_are_checked():
    with pytest.raises(ValueError, match="variant"):
        DPRSVRG(variant="fast")
    with pytest.raises(ValueError, match="batch_size"):
        DPRSVRG(batch_size=4)  # the paper's variant picks one record
    with pytest.raises(ValueError, match="batch_size"):
        DPRSVRG(variant="released_snapshot", batch_size=0)
    p = _problem(n_agents=2, n=10)
    with pytest.raises(ValueError, match="noise_multiplier"):
        DPRSVRG(variant="released_snapshot", clip=1.0, sigma=0.5).plan(p)
    with pytest.raises(ValueError, match="noise_multiplier"):
        DPRSVRG(variant="released_snapshot", clip=1.0, paper_epsilon=1.0,
                paper_delta=1e-5).plan(p)
    with pytest.raises(ValueError, match="batch_size"):
        DPRSVRG(variant="released_snapshot", clip=1.0, batch_size=11).plan(p)
    assert DPRSVRG(variant="released_snapshot").name != DPRSGD().name


def test_released_snapshot_without_noise_matches_a_plain_svrg_loop():
    # non-private (no clip, no noise), b = N: every inner step is the exact SVRG direction
    # grad f(x_j) - Gamma grad f(x~) + Gamma grad f(x~) = grad f(x_j): full-batch gradient descent
    p = _problem(n_agents=1, n=12, seed=4)
    x0 = S2.random_point(np.random.default_rng(9))
    tr = DPRSVRG(steps=2, inner_steps=3, variant="released_snapshot", batch_size=12)
    alg = PriRFed(tr, None, 0.05)
    res = alg.run(p, 2, rng=0, x0=x0)
    x = x0
    for _ in range(2 * 2 * 3):
        x = S2.exp(x, -0.05 * p.grad(x))
    np.testing.assert_allclose(res.x, x, atol=1e-12)



@pytest.mark.parametrize("manifold_name", ["sphere", "euclidean"])
def test_first_inner_step_skipped_at_the_snapshot_gives_the_same_bits(manifold_name,
                                                                       monkeypatch):
    # the first inner step's iterate is the snapshot: on a manifold whose self-transport is
    # exact its difference mean is +0.0, and the trainer takes it without computing it; the
    # run must equal, bit for bit, the one that computes it (the flag switched off)
    from rfed.manifolds import Euclidean
    from rfed.problems import LogisticRegression

    rng = np.random.default_rng(2)
    problem: SpherePCA | LogisticRegression
    if manifold_name == "sphere":
        cls: type = Sphere
        problem = SpherePCA(rng.standard_normal((3, 20, 4)))
    else:
        cls = Euclidean
        problem = LogisticRegression(rng.standard_normal((3, 20, 4)),
                                     rng.choice([-1.0, 1.0], size=(3, 20)))
    snap = problem.manifold.random_point(np.random.default_rng(1), 3)
    batch = problem.batch(np.arange(3), np.tile(np.arange(5), (3, 1)))
    v, clipped = DPRSVRG.difference_mean(problem, snap, snap, batch, np.ones((3, 5), bool),
                                         np.full(3, 5.0), 0.3)
    assert problem.manifold.exact_self_transport
    assert np.all(v == 0) and not np.signbit(v).any() and not clipped.any()

    def run():
        tr = DPRSVRG(steps=2, inner_steps=3, clip=0.3, clip_full=0.8,
                     variant="released_snapshot", batch_size=5, noise_multiplier=0.7)
        res = PriRFed(tr, None, 0.1).run(problem, 3, rng=0)
        return res.x.tobytes(), [h["cost"] for h in res.history]

    fast = run()
    monkeypatch.setattr(cls, "exact_self_transport", False)
    assert run() == fast


def test_inner_steps_give_the_same_bits_in_blocks_of_any_size(monkeypatch):
    # the inner steps' difference means are computed a block of agents at a time; every agent's
    # values depend on its own rows only, so one agent per block equals all agents in one block
    from rfed.algorithms.federated import local

    problem = SpherePCA(np.random.default_rng(6).standard_normal((5, 30, 6)))

    def run():
        tr = DPRSVRG(steps=2, inner_steps=3, clip=0.3, clip_full=0.8,
                     variant="released_snapshot", batch_size=7, noise_multiplier=0.5)
        return PriRFed(tr, None, 0.1).run(problem, 2, rng=3).x.tobytes()

    monkeypatch.setattr(local, "_DIFFERENCE_BLOCK_BYTES", 1)
    one_agent = run()
    monkeypatch.setattr(local, "_DIFFERENCE_BLOCK_BYTES", 2**30)
    assert run() == one_agent
