"""Secure mode: SecureRandom, the discrete samplers against their pmf, the grid release, Mironov's
floating-point test, the secure tangent mechanism's moments, and the audit of the secure mechanism.

Secure runs cannot be seeded: statistical tests on SecureRandom use enough samples and a small
significance level (1e-6); the sampler cores are also tested with an injected seeded Generator.
"""

import math

import numpy as np
import pytest
from scipy import stats

import rfed.manifolds as M
from rfed.experiments.audits import audit_main
from rfed.manifolds.base import as_generator
from rfed.privacy import (
    CertifiedAccountant,
    LaplaceSchedule,
    gaussian_mechanism,
    gaussian_release,
    laplace_mechanism,
    laplace_noise,
    make_generator,
    release_sensitivity,
)
from rfed.privacy.audit import audit
from rfed.privacy.secure import (
    SecureModeError,
    SecureRandom,
    _bernoulli_exp_ratio,
    discrete_gaussian,
    discrete_laplace,
    grid_release,
)

ALPHA = 1e-6  # significance of every statistical test here


def _chisquare_p(samples, support, pmf):
    """Chi-square goodness-of-fit p-value; cells with expected count < 5 are merged."""
    n = samples.size
    expected = n * pmf
    keep = expected >= 5
    observed = np.array([np.sum(samples == v) for v in support[keep]])
    obs = np.append(observed, n - observed.sum())
    exp = np.append(expected[keep], n - expected[keep].sum())
    if exp[-1] < 1e-9:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


def _dgauss_pmf(sigma, support):
    wide = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)) / norm


def _dlap_pmf(t, support):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(support)


# ---------------------------------------------------------------------- SecureRandom
def test_secure_random_refuses_floating_point_noise():
    rng = SecureRandom()
    for draw in (lambda: rng.standard_normal(3), lambda: rng.normal(0, 1, 3),
                 lambda: rng.laplace(0, 1, 3), lambda: rng.exponential(size=3)):
        with pytest.raises(SecureModeError, match="floating-point noise is not allowed in "
                                                  "secure mode; use rfed.privacy.mechanisms"):
            draw()
    # a manifold's float tangent Gaussian cannot be reached with a secure source
    assert as_generator(rng) is rng
    with pytest.raises(SecureModeError):
        M.Sphere(2).tangent_gaussian(np.array([1.0, 0, 0]), 1.0, rng)
    with pytest.raises(SecureModeError):
        laplace_noise(3, 1.0, rng)


def test_secure_random_grid_and_make_generator():
    with pytest.raises(ValueError, match="'grid'"):
        SecureRandom(grid=0.3)
    with pytest.raises(ValueError, match="'grid'"):
        SecureRandom(grid=2.0)
    assert SecureRandom(2.0**-20).grid == 2.0**-20
    assert isinstance(make_generator(secure=True), SecureRandom)
    assert isinstance(make_generator(5), np.random.Generator)
    assert make_generator(5).integers(1000) == np.random.default_rng(5).integers(1000)
    with pytest.raises(ValueError, match="'seed'"):
        make_generator(5, secure=True)
    with pytest.raises(ValueError, match="'seed'"):
        make_generator()


def test_secure_integers_uniform_and_unbiased():
    rng = SecureRandom()
    x = rng.integers(0, 7, size=70_000)
    assert x.min() == 0 and x.max() == 6
    assert stats.chisquare(np.bincount(x, minlength=7)).pvalue > ALPHA
    # a range r = 1.5 * 2^62 where a plain "word mod r" gives [0, 2^62) half the mass, not 2/3
    r = 3 * 2**61
    y = rng.integers(0, r, size=40_000)
    frac = np.mean(y < 2**62)
    assert abs(frac - 2 / 3) < 6 * math.sqrt(2 / 9 / 40_000)
    # broadcasting of array bounds, endpoint, scalars
    z = rng.integers(np.array([0, 10]), np.array([[1, 11], [5, 12]]), size=None)
    assert z.shape == (2, 2) and np.all(z[0] == [0, 10]) and 0 <= z[1, 0] < 5 and 10 <= z[1, 1] < 12
    assert set(rng.integers(0, 1, size=50, endpoint=True).tolist()) <= {0, 1}
    assert isinstance(rng.integers(5), (int, np.integer))
    with pytest.raises(ValueError, match="low < high"):
        rng.integers(3, 3)


def test_secure_random_floats_permutations_choice_binomial():
    rng = SecureRandom()
    u = rng.random(50_000)
    assert np.all((u >= 0) & (u < 1)) and np.all(u * 2**53 == np.floor(u * 2**53))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert isinstance(rng.random(), float)
    # permutations of 3 items: 6 outcomes, uniform
    perms = np.array([rng.permutation(3) for _ in range(6000)])
    codes = perms[:, 0] * 3 + perms[:, 1]
    counts = np.array([np.sum(codes == c) for c in np.unique(codes)])
    assert counts.size == 6 and stats.chisquare(counts).pvalue > ALPHA
    c = rng.choice(10, size=4, replace=False)
    assert len(set(c.tolist())) == 4
    with pytest.raises(ValueError):
        rng.choice(3, size=4, replace=False)
    w = rng.choice(3, size=30_000, p=[0.2, 0.5, 0.3])
    assert stats.chisquare(np.bincount(w, minlength=3), 30_000 * np.array([0.2, 0.5, 0.3])
                           ).pvalue > ALPHA
    b = rng.binomial(200, 0.3, size=2000)
    assert abs(b.mean() - 60) < 6 * math.sqrt(200 * 0.21 / 2000)
    assert 0 <= rng.binomial(10, 0.5) <= 10
    arr = np.arange(8)
    rng.shuffle(arr)
    assert sorted(arr.tolist()) == list(range(8))
    d = rng.dirichlet(np.ones(4), size=5)
    assert d.shape == (5, 4) and np.allclose(d.sum(axis=1), 1.0)
    v = rng.uniform(-2.0, 3.0, size=1000)
    assert np.all((v >= -2) & (v < 3))
    assert len(rng.spawn(3)) == 3


# ---------------------------------------------------------------------- sampler cores
@pytest.mark.parametrize("num,den", [(0, 5), (1, 3), (2, 3), (1, 1), (7, 10)])
def test_bernoulli_exp_is_exp_of_minus_gamma(num, den):
    n = 40_000
    gen = np.random.default_rng(num * 100 + den)
    hits = _bernoulli_exp_ratio(np.full(n, num), np.full(n, den), gen).sum()
    assert stats.binomtest(int(hits), n, math.exp(-num / den)).pvalue > ALPHA


@pytest.mark.parametrize("t", [1, 3, 10])
def test_discrete_laplace_pmf_seeded(t):
    x = discrete_laplace(t, size=40_000, rng=np.random.default_rng(t))
    support = np.arange(-30 * t, 30 * t + 1)
    assert _chisquare_p(x, support, _dlap_pmf(t, support)) > ALPHA


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5, 7.3])
def test_discrete_gaussian_pmf_seeded(sigma):
    x = discrete_gaussian(sigma, size=40_000, rng=np.random.default_rng(int(10 * sigma)))
    support = np.arange(-int(12 * sigma) - 3, int(12 * sigma) + 4)
    assert _chisquare_p(x, support, _dgauss_pmf(sigma, support)) > ALPHA


def test_discrete_samplers_pmf_secure_source():
    rng = SecureRandom()
    support = np.arange(-40, 41)
    assert _chisquare_p(discrete_gaussian(2.0, 40_000, rng), support,
                        _dgauss_pmf(2.0, support)) > ALPHA
    assert _chisquare_p(discrete_laplace(2, 40_000, rng), support, _dlap_pmf(2, support)) > ALPHA
    # at the default grid a unit sigma is 2^40 grid steps: x / sigma is N(0, 1) (KS)
    big = 2.0**40
    z = discrete_gaussian(big, 30_000, rng) / big
    assert stats.kstest(z, "norm").pvalue > ALPHA


def test_discrete_samplers_per_entry_scales_and_bad_input():
    gen = np.random.default_rng(0)
    x = discrete_gaussian(np.array([0.0, 3.0]), size=(20_000, 2), rng=gen)
    assert np.all(x[:, 0] == 0) and abs(x[:, 1].std() - 3.0) < 0.1
    with pytest.raises(ValueError, match="'sigma'"):
        discrete_gaussian(-1.0, 3, gen)
    with pytest.raises(ValueError, match="'scale'"):
        discrete_laplace(1.5, 3, gen)
    with pytest.raises(ValueError, match="'sigma'"):
        discrete_gaussian(2.0**60, 3, gen)


# ---------------------------------------------------------------------- Mironov 2012
def _impossible_from_one(y):
    """Outputs y in (-1, 0.5) of the float mechanism that ``1 + L`` provably cannot produce.

    If fl(1 + L) = y with y in (-1, 0.5), then L lies in [-2, -0.5] (rounding is monotone and
    -1, 0.5 are floats), where 1 + L is exact (Sterbenz), so L = y - 1 must be a float. For y in
    (-1, 0.5), fl(y - 1) also lies in [-2, -0.5], so ``(y - 1) + 1 == y`` holds exactly iff y - 1 is
    representable. Outputs failing it are impossible from input 1, whatever the sampler.
    """
    region = (y > -1.0) & (y < 0.5)
    return region & ((y - 1.0) + 1.0 != y), region


def test_floating_point_laplace_leaks_and_secure_laplace_does_not():
    n = 100_000
    y_float = laplace_mechanism(np.zeros(n), 1.0, np.random.default_rng(0))
    bad, region = _impossible_from_one(y_float)
    # the check never fires on outputs that input 1 did produce (it is sound)
    y_one = laplace_mechanism(np.ones(n), 1.0, np.random.default_rng(1))
    assert not np.any(_impossible_from_one(y_one)[0])
    # a large share of all outputs of 0 + Lap(1) identify the input
    assert bad.mean() > 0.25 and bad.sum() / region.sum() > 0.5

    rng = SecureRandom()
    y_secure = laplace_mechanism(np.zeros(n), 1.0, rng)
    assert not np.any(_impossible_from_one(y_secure)[0])
    # stronger: every output is a grid point and y - 1 is an exact grid integer, and the discrete
    # Laplace has support Z, so every output of input 0 is an output of input 1 (and conversely)
    steps = y_secure / rng.grid
    assert np.all(steps == np.round(steps))
    shift = (y_secure - 1.0) / rng.grid
    assert np.all(shift == np.round(shift)) and np.all(shift + 2**40 == steps)
    # same for the Gaussian release
    g = gaussian_release(np.zeros(n), 1.0, rng)
    assert not np.any(_impossible_from_one(g)[0])
    assert np.all(g / rng.grid == np.round(g / rng.grid))


def test_secure_laplace_scale_and_schedule_release():
    rng = SecureRandom()
    y = laplace_mechanism(np.full(50_000, 0.3), 2.0, rng)
    # discrete Laplace with t = 2^41 steps: variance ~ 2 scale^2
    assert abs(np.mean(y) - 0.3) < 6 * math.sqrt(8 / 50_000)
    assert abs(np.var(y) / 8.0 - 1) < 6 * math.sqrt(5 / 50_000)
    s = LaplaceSchedule(1.0, 0.5).release(2, np.zeros(4), rng)
    assert s.shape == (4,) and np.all(s / rng.grid == np.round(s / rng.grid))
    with pytest.raises(ValueError, match="'value'"):
        laplace_mechanism(np.array([np.nan]), 1.0, rng)


def test_grid_release_rounding_and_range():
    rng = SecureRandom(2.0**-10)
    v = np.array([0.1, -3.14159, 2.0**-11 * 3])
    out = grid_release(v, 0.0, rng)
    assert np.all(np.abs(out - v) <= rng.grid / 2) and np.all(out / rng.grid % 1 == 0)
    with pytest.raises(ValueError, match="too large"):
        grid_release(np.array([2.0**45]), 1.0, rng)
    with pytest.raises(TypeError, match="SecureRandom"):
        grid_release(v, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="broadcast"):
        gaussian_release(np.zeros(3), np.ones(2), rng)


# ---------------------------------------------------------------------- tangent mechanism
def _secure_cases():
    return {
        "Euclidean(4)": M.Euclidean(4),
        "Sphere(2)": M.Sphere(2),
        "SPD(3)": M.SPD(3),
        "Hyperboloid(2)": M.Hyperboloid(2),
        "PoincareBall(3)": M.PoincareBall(3),
        "Product(S2,SPD2)": M.Product(M.Sphere(2), M.SPD(2)),
        "FlatProduct(S2,SPD2)": M.Product(M.Sphere(2), M.SPD(2)).as_flat(),
    }


@pytest.mark.parametrize("name", list(_secure_cases()))
def test_secure_tangent_gaussian_moments(name):
    m = _secure_cases()[name]
    gen = np.random.default_rng(3)
    n, sigma = 6000, 0.7
    x1 = m.random_point(gen)
    tupled = isinstance(x1, tuple)
    xs = (tuple(np.broadcast_to(b, (n,) + b.shape) for b in x1) if tupled
          else np.broadcast_to(x1, (n,) + x1.shape))
    xi = gaussian_mechanism(m, x1, m.zero_vector(xs), sigma, SecureRandom())
    sq = m.norm(xs, xi) ** 2 / sigma**2  # chi^2_dim: mean dim, variance 2 dim
    assert abs(sq.mean() - m.dim) <= 6 * math.sqrt(2 * m.dim / n)
    a = m.random_tangent(x1, gen)
    proj = m.inner(xs, xi, a) ** 2 / (sigma**2 * m.norm(x1, a) ** 2)  # chi^2_1
    assert abs(proj.mean() - 1.0) <= 6 * math.sqrt(2 / n)
    assert np.all(m.is_tangent(xs, xi))


def test_secure_tangent_mechanism_value_and_per_agent_sigma():
    m = M.Sphere(3)
    gen = np.random.default_rng(0)
    x = m.random_point(gen, size=(2,))
    v = m.random_tangent(x, gen)
    out = gaussian_mechanism(m, x, v, np.array([0.0, 1.0]), SecureRandom())
    # sigma 0: the value up to grid rounding of its coordinates
    assert m.norm(x[0], out[0] - v[0]) <= 2.0**-40 * math.sqrt(m.dim) * 1.01
    assert not np.allclose(out[1], v[1])
    with pytest.raises(ValueError, match="'sigma'"):
        gaussian_mechanism(m, x, v, np.ones(3), SecureRandom())


def test_release_sensitivity():
    gen = np.random.default_rng(0)
    assert release_sensitivity(0.5, 10, gen) == 0.5
    rng = SecureRandom(2.0**-20)
    assert release_sensitivity(0.5, 16, rng) == 0.5 + 4 * 2.0**-20
    assert release_sensitivity(0.5, 16, rng, norm="l1") == 0.5 + 16 * 2.0**-20
    assert np.allclose(release_sensitivity(np.array([1.0, 2.0]), 4, rng), [1 + 2**-19, 2 + 2**-19])
    with pytest.raises(ValueError, match="'norm'"):
        release_sensitivity(1.0, 4, rng, norm="linf")
    with pytest.raises(ValueError, match="'sensitivity'"):
        release_sensitivity(-1.0, 4, rng)


def test_rounding_sensitivity_bound_holds_for_worst_case_neighbours():
    # the rounded values of two inputs at L2 distance Delta are at most Delta + grid sqrt(dim) apart
    rng = SecureRandom(2.0**-8)
    gen = np.random.default_rng(5)
    dim, delta = 9, 0.01
    v = gen.uniform(-1, 1, (20_000, dim))
    d = gen.standard_normal((20_000, dim))
    w = v + delta * d / np.linalg.norm(d, axis=1, keepdims=True)
    gap = np.linalg.norm(grid_release(v, 0.0, rng) - grid_release(w, 0.0, rng), axis=1)
    assert gap.max() <= release_sensitivity(delta, dim, rng)
    # and it is attained: inputs just below and just above half a grid step in every coordinate
    # round to 0 and to one grid step, so an input gap of ~0 becomes grid * sqrt(dim)
    below = np.full((1, dim), rng.grid / 2 * (1 - 1e-6))
    above = np.full((1, dim), rng.grid / 2 * (1 + 1e-6))
    gap = np.linalg.norm(grid_release(below, 0.0, rng) - grid_release(above, 0.0, rng))
    assert gap == pytest.approx(rng.grid * math.sqrt(dim), rel=1e-12)
    assert gap <= release_sensitivity(np.linalg.norm(above - below), dim, rng)


# ---------------------------------------------------------------------- audit of secure mode
def test_audit_secure_gaussian_below_certified_and_catches_broken_variant():
    sigma, delta = 2.0, 1e-5
    rng = SecureRandom()
    sens = release_sensitivity(1.0, 1, rng)
    acc = CertifiedAccountant("rdp", "add_remove_one")  # RDP: what CKS's bound covers
    acc.add_gaussian(sigma / sens, sampling="none")
    certified = acc.epsilon(delta)

    def trials(factor):
        return lambda b, n, r: gaussian_release(np.full(n, float(b)), sigma / factor, r)

    ok = audit(trials(1.0), 40_000, delta, rng=rng)
    assert ok.epsilon_lower < certified
    broken = audit(trials(4.0), 40_000, delta, rng=rng)
    assert broken.epsilon_lower > certified


def test_audit_main_secure_dp_rsgd(capsys):
    assert audit_main(["dp-rsgd-onestep", "--secure", "--trials", "20000"]) == 0
    assert "not replayable" in capsys.readouterr().out
    assert audit_main(["dp-rsgd-onestep", "--secure", "--trials", "20000",
                       "--noise-factor", "4"]) == 1


def test_prirfed_runs_in_secure_mode_with_a_public_start():
    # end to end: agent sampling, minibatches and the tangent noise all from the OS CSPRNG
    from rfed.algorithms.federated import DPRSGD, PriRFed
    from rfed.datasets import make_pca_synthetic
    from rfed.problems import SpherePCA

    problem = SpherePCA(make_pca_synthetic(n_agents=4, n_per_agent=20, dim=6, rng=0))
    alg = PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=1.0, sigma=0.05), n_sampled=2,
                  step_size=0.5)
    x0 = problem.manifold.random_point(np.random.default_rng(0))  # public, seeded
    res = alg.run(problem, n_rounds=3, rng=SecureRandom(), eval_every=3, x0=x0)
    assert np.isfinite(res.history[-1]["cost"])
    # without x0 the data-independent start comes from a generator seeded with OS entropy
    res = alg.run(problem, n_rounds=1, rng=SecureRandom())
    assert res.privacy["secure"] and not res.privacy["replayable_from_seed"]
