"""Secure mode's discrete Gaussian is the exact discrete Gaussian, out to any distance.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
(arXiv:2004.00010), Algorithm 3 accepts a discrete-Laplace proposal ``y`` with probability
``exp(-gamma(y))``; a float ``exp(-gamma)`` is 0 beyond about 38.6 sigma, so outputs beyond 39
grid steps at sigma = 1 were impossible (and the tail between 8.5 and 38.6 sigma heavier than
the discrete Gaussian's). rfed draws ``Bernoulli(exp(-gamma))`` exactly (their Algorithm 1).

How the exactness is checked, each step in exact arithmetic (``fractions.Fraction``) or mpmath
at 60 digits, never with floats:

1. the primitives' acceptance probabilities under a MOCKED exact-bit source: every string of
   random words (2-bit words, ``_WORD_BITS`` shrunk for the test) or random integers is
   enumerated depth-first, each leaf weighted by its exact probability, and the unresolved
   mass (strings longer than the depth) bounds the error;
2. ``bernoulli_exp``'s composition of those primitives, with each primitive replaced by a
   branching stand-in of the exact probability step 1 established;
3. the sampler's law: proposal pmf times acceptance, normalised, against the exact discrete
   Gaussian pmf for every integer out to 60 sigma;
4. a statistical test of real outputs (chi-square against the exact pmf).
"""

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import rfed.privacy.secure as secure
from rfed.privacy.secure import SecureRandom, bernoulli_exp, discrete_gaussian


@pytest.fixture(autouse=True)
def _sixty_digits():
    """mpmath's precision is global: set it for each test (another module may change it)."""
    with mpmath.workdps(60):
        yield



class _NeedMore(Exception):
    """The code asked for a draw beyond the script: branch over its ``outcomes``."""

    def __init__(self, outcomes):
        self.outcomes = outcomes


class _ScriptedSource:
    """A random source replaying a script of uniform choices (one value per draw).

    ``bytes(8)`` is one word of ``secure._WORD_BITS`` bits (in the top bits of a little-endian
    64-bit word, as secure._uniform_words reads it); ``integers(0, high)`` with one entry is a
    uniform choice among ``high`` values. A draw past the end of the script raises
    :class:`_NeedMore` with the number of outcomes, so a depth-first search can enumerate them.
    """

    def __init__(self, script):
        self.script = list(script)
        self.used = 0

    def _next(self, outcomes):
        if self.used == len(self.script):
            raise _NeedMore(outcomes)
        value = self.script[self.used]
        self.used += 1
        return value

    def bytes(self, length):
        assert length == 8, "one word at a time (single-element calls)"
        w = self._next(2 ** secure._WORD_BITS)
        return (w << (64 - secure._WORD_BITS)).to_bytes(8, "little")

    def integers(self, low, high=None, size=None, **kwargs):
        if high is None:
            low, high = 0, low
        high = np.asarray(high).ravel()
        assert high.size == 1 and int(np.asarray(low)) == 0
        return np.array([self._next(int(high[0]))])


def _enumerate(draw, depth):
    """``(P(draw() is True) over the fully resolved strings, unresolved mass)``, exact.

    ``draw(source)`` runs the code under test on a scripted source; every string of choices
    up to ``depth`` draws is enumerated depth-first with its exact probability.
    """
    accepted, unresolved = Fraction(0), Fraction(0)
    stack = [((), Fraction(1))]
    while stack:
        script, weight = stack.pop()
        try:
            result = draw(_ScriptedSource(script))
        except _NeedMore as more:
            if len(script) >= depth:
                unresolved += weight
                continue
            for v in range(more.outcomes):
                stack.append((script + (v,), weight / more.outcomes))
            continue
        if result:
            accepted += weight
    return accepted, unresolved


# ---------------------------------------------------------------------- 1. primitives
@pytest.mark.parametrize("num,den", [
    (0, 5), (5, 5), (7, 5), (1, 3), (2, 7), (3**200, 2**320), (2**300 - 1, 2**300),
    (10**50 + 7, 3 * 10**50),
])
def test_bernoulli_rational_acceptance_is_exactly_num_over_den(num, den, monkeypatch):
    monkeypatch.setattr(secure, "_WORD_BITS", 2)

    def draw(src):
        return bool(secure._bernoulli_rational(np.array([num], dtype=object),
                                               np.array([den], dtype=object), src)[0])

    p, rest = _enumerate(draw, depth=14)
    x = min(Fraction(num, den), Fraction(1))
    assert p <= x <= p + rest
    assert rest <= Fraction(1, 4**14)


@pytest.mark.parametrize("num,den", [(0, 1), (1, 1), (1, 2), (1, 3), (1, 7)])
def test_bernoulli_exp_ratio_acceptance_is_exactly_exp(num, den):
    """CKS Algorithm 1 on int64 (the discrete Laplace's and the exp(-1) trials' primitive).

    ``num = 1``: one outcome of each draw continues the loop, so the enumeration stays linear
    in the depth (the branch taken for any ``num`` is the same code)."""
    def draw(src):
        return bool(secure._bernoulli_exp_ratio(np.array([num]), np.array([den]), src)[0])

    p, rest = _enumerate(draw, depth=18)
    target = mpmath.exp(-mpmath.mpf(num) / den)
    assert mpmath.mpf(p.numerator) / p.denominator <= target
    assert target <= mpmath.mpf((p + rest).numerator) / (p + rest).denominator
    assert rest < Fraction(1, 10**13)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_bernoulli_exp_int_acceptance_is_exactly_exp(k):
    """exp(-k): at least k successes of exact Bernoulli(exp(-1)) trials."""
    def draw(src):
        return bool(secure._bernoulli_exp_int(np.array([k], dtype=object), src)[0])

    p, rest = _enumerate(draw, depth=18)
    target = mpmath.exp(-k)
    lo = mpmath.mpf(p.numerator) / p.denominator
    assert lo <= target <= lo + mpmath.mpf(rest.numerator) / rest.denominator
    assert rest < Fraction(1, 10**4)


# ---------------------------------------------------------------------- 2. composition
def _acceptance_probability(gamma_num, gamma_den, monkeypatch, depth=40):
    """P(bernoulli_exp accepts) with each primitive replaced by a two-way branch of its exact
    probability (steps of test 1): ``(value, unresolved)`` in mpmath."""
    branches = {}

    def fake_exp_int(k, src):
        (kk,) = np.asarray(k, dtype=object).ravel()
        branches.setdefault(len(branches), mpmath.exp(-int(kk)))
        return np.array([src._next(2) == 0])

    def fake_rational(num, den, src):
        (n,), (d,) = np.asarray(num, dtype=object).ravel(), np.asarray(den, dtype=object).ravel()
        branches.setdefault(len(branches), mpmath.mpf(int(n)) / int(d))
        return np.array([src._next(2) == 0])

    monkeypatch.setattr(secure, "_bernoulli_exp_int", fake_exp_int)
    monkeypatch.setattr(secure, "_bernoulli_rational", fake_rational)
    accepted, unresolved = mpmath.mpf(0), mpmath.mpf(0)
    stack = [((), mpmath.mpf(1))]
    while stack:
        script, weight = stack.pop()
        branches.clear()
        try:
            result = bool(bernoulli_exp(np.array([gamma_num], dtype=object),
                                        np.array([gamma_den], dtype=object),
                                        _ScriptedSource(script))[0])
        except _NeedMore:
            if len(script) >= depth:
                unresolved += weight
                continue
            p_true = branches[len(script)]
            stack.append((script + (0,), weight * p_true))        # the primitive says True
            stack.append((script + (1,), weight * (1 - p_true)))  # ... or False
            continue
        if result:
            accepted += weight
    return accepted, unresolved


@pytest.mark.parametrize("gamma", [
    Fraction(0), Fraction(1, 3), Fraction(1), Fraction(22, 7), Fraction(10**40 + 1, 10**39),
    # gamma of y = 45 at sigma = 1 (t = 2): (45 - 1/2)^2 / 2, a float exp(-gamma) is 0 there
    Fraction(89, 2) ** 2 / 2,
    # y = 60 sigma at sigma = 1: still a positive, exact probability
    Fraction(119, 2) ** 2 / 2,
])
def test_bernoulli_exp_acceptance_is_exactly_exp_minus_gamma(gamma, monkeypatch):
    p, rest = _acceptance_probability(gamma.numerator, gamma.denominator, monkeypatch)
    target = mpmath.exp(-mpmath.mpf(gamma.numerator) / gamma.denominator)
    assert target > 0
    assert abs(p - target) <= rest + mpmath.mpf(10) ** -45 * target
    assert rest <= mpmath.mpf(10) ** -30 * max(target, mpmath.mpf(10) ** -1000)


# ---------------------------------------------------------------------- 3. the sampler's law
def _dlap_pmf(t, y):
    """Discrete Laplace of scale t (CKS Algorithm 2's output), exact in mpmath."""
    e = mpmath.exp(-mpmath.mpf(1) / t)
    return (1 - e) / (1 + e) * mpmath.exp(-mpmath.mpf(abs(y)) / t)


@pytest.mark.parametrize("sigma", [1.0, 0.375, pytest.param(2.5, marks=pytest.mark.slow)])
def test_sampler_law_is_the_exact_discrete_gaussian_out_to_60_sigma(sigma, monkeypatch):
    """P(output = y) = proposal(y) acceptance(y) / sum_z proposal(z) acceptance(z), with the
    acceptance the routine's own (gamma computed by _accept_discrete_gaussian from sigma),
    equals exp(-y^2 / (2 sigma^2)) / sum_z exp(-z^2 / (2 sigma^2)) for every |y| <= 60 sigma."""
    t = int(np.floor(sigma)) + 1
    f = Fraction(sigma) ** 2
    sn = np.array([f.numerator], dtype=object)
    sd = np.array([f.denominator], dtype=object)
    tt = np.array([t], dtype=object)
    captured = []
    real = secure.bernoulli_exp

    def capture(num, den, src):   # the rational gamma the sampler asks Bernoulli(exp(-.)) of
        captured.append((int(np.asarray(num).ravel()[0]), int(np.asarray(den).ravel()[0])))
        return np.zeros(1, dtype=bool)

    reach = int(np.ceil(60 * sigma))
    gammas = []
    monkeypatch.setattr(secure, "bernoulli_exp", capture)
    for y in range(0, reach + 1):
        captured.clear()
        secure._accept_discrete_gaussian(np.array([y]), np.array([0]), sn, sd, tt, None)
        gammas.append(captured[0])
    monkeypatch.setattr(secure, "bernoulli_exp", real)
    acc = {y: _acceptance_probability(gnum, gden, monkeypatch)
           for y, (gnum, gden) in enumerate(gammas)}
    s2 = mpmath.mpf(f.numerator) / f.denominator
    # the far tails beyond 60 sigma of both laws are below 1e-700: the sums are exact to that
    z_dg = sum(mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) * (1 if y == 0 else 2)
               for y in range(reach + 1))
    z_alg = sum(_dlap_pmf(t, y) * acc[y][0] * (1 if y == 0 else 2) for y in range(reach + 1))
    for y in range(reach + 1):
        exact = mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) / z_dg
        sampled = _dlap_pmf(t, y) * acc[y][0] / z_alg
        assert sampled > 0, y
        assert abs(sampled / exact - 1) < mpmath.mpf(10) ** -25, (y, sampled, exact)


def test_an_output_beyond_39_steps_is_possible(monkeypatch):
    """At sigma = 1, a proposal of 45 is accepted on the bit strings that accept it (a float
    exp(-gamma) = 0 made that impossible): force the proposal and the favourable primitive
    outcomes, and the sampler returns 45."""
    monkeypatch.setattr(secure, "discrete_laplace", lambda t, size=None, rng=None:
                        np.full(np.shape(t), 45, dtype=np.int64))
    monkeypatch.setattr(secure, "_bernoulli_exp_int",
                        lambda k, rng: np.ones(np.size(k), dtype=bool))
    monkeypatch.setattr(secure, "_bernoulli_rational",   # A_1 = 0: K = 1, odd: accept
                        lambda num, den, rng: np.zeros(np.size(num), dtype=bool))
    assert discrete_gaussian(1.0, 3, np.random.default_rng(0)).tolist() == [45, 45, 45]


# ---------------------------------------------------------------------- 4. statistics
def test_secure_outputs_follow_the_exact_pmf():
    sigma, n = 1.5, 30_000
    x = discrete_gaussian(sigma, n, SecureRandom())
    support = np.arange(-6, 7)
    pmf = np.array([float(mpmath.exp(-mpmath.mpf(int(y) ** 2) / (2 * sigma**2)))
                    for y in support])
    tail = float(sum(mpmath.exp(-mpmath.mpf(y * y) / (2 * sigma**2)) for y in range(7, 200)))
    total = pmf.sum() + 2 * tail
    probs = np.append(pmf / total, 2 * tail / total)
    counts = np.append([np.sum(x == y) for y in support], np.sum(np.abs(x) > 6))
    # pool the cells with fewer than 5 expected counts into the last one
    keep = probs * n >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * n
    assert stats.chisquare(obs, exp).pvalue > 1e-4
