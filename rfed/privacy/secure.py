r"""Secure mode: OS CSPRNG randomness and discrete noise on a grid (no floating-point leak).

Why. A textbook floating-point mechanism ``value + noise`` leaks through the set of floats it can
output (Mironov, CCS 2012): most outputs of ``0 + Lap(1)`` cannot be produced by ``1 + Lap(1)``,
so one output can identify the input. Seeded generators (PCG64) are replayable by design and not
cryptographic. Secure mode replaces both:

* :class:`SecureRandom`, a stand-in for :class:`numpy.random.Generator` drawing every bit from
  the operating system's CSPRNG (:func:`os.urandom`). It implements the uniform, integer and
  combinatorial draws rfed makes (``random``, ``integers``, ``choice``, ``permutation``,
  ``shuffle``, ``binomial``, ``uniform``, ``dirichlet``, ``bytes``, ``spawn``) and **refuses** the
  floating-point noise draws (``standard_normal``, ``normal``, ``laplace``, ...) with
  :class:`SecureModeError`, so that no noise path can bypass the safe mechanisms silently. It has
  no seed and cannot be replayed.
* The discrete Gaussian and discrete Laplace samplers of Canonne, Kamath and Steinke (NeurIPS
  2020, "The discrete Gaussian for differential privacy", Algorithms 1-3), vectorized over
  samples (a Python loop runs over rejection *rounds*, never over samples). The mechanisms in
  :mod:`rfed.privacy.mechanisms` use them on the grid ``grid * Z``.

The release on the grid (:func:`grid_release`)
----------------------------------------------
``k = rint(value / grid)`` (an exact integer), ``y = (k + X) * grid`` with ``X`` an integer
sample of the discrete Gaussian (or Laplace) with scale ``sigma / grid``. ``grid`` is a power of
two, so ``value / grid`` and ``(k + X) * grid`` are exact floating-point operations while
``|k + X| < 2**53`` (checked). Hence:

* every output is a grid point, computed without rounding error;
* the noise has support on all of ``Z`` (every candidate integer has positive probability, see
  below), so for neighbouring inputs with ``k`` and ``k'`` every grid point is reachable from both
  and the privacy loss of an output is ``log p(y/grid - k) / p(y/grid - k')`` exactly as in the
  discrete analysis: no output is impossible for one input and possible for the other;
* rounding moves each coordinate by at most ``grid / 2``, so the integer shift ``k - k'`` has
  L2 norm at most ``(Delta_2 + grid sqrt(dim)) / grid`` and L1 norm at most
  ``(Delta_1 + grid dim) / grid``; with that inflated sensitivity, the discrete Gaussian's Renyi
  divergence is at most the continuous Gaussian's, ``alpha Delta^2 / (2 sigma^2)`` (CKS 2020,
  concentrated-DP bound for the discrete Gaussian; independent coordinates add up), and the
  discrete Laplace's privacy loss is at most ``Delta_1 / scale``, so an RDP accountant treats
  the release as a Gaussian (Laplace) event of that sensitivity
  (:func:`rfed.privacy.mechanisms.release_sensitivity`). The PLD accountant models the
  continuous Gaussian's loss distribution, which the RDP comparison does not cover: account
  secure Gaussian releases with ``method='rdp'``.

What is exact and what is floating point
----------------------------------------
* Uniform integers (:meth:`SecureRandom.integers`) are exact: rejection sampling on 64-bit words
  (no modulo bias).
* ``Bernoulli(exp(-n/d))`` for integers ``0 <= n <= d`` is exact (CKS Algorithm 1: the parity of
  the stopping time of Bernoulli(gamma/K) trials, each an exact integer comparison).
* The discrete Laplace sampler with integer scale ``t`` (CKS Algorithm 2 with ``s = 1``) is exact:
  integer arithmetic only, unbounded support.
* The discrete Gaussian (CKS Algorithm 3) proposes from the exact discrete Laplace with
  ``t = floor(sigma) + 1`` and accepts ``Y`` with probability
  ``exp(-gamma)``, ``gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2)``. ``sigma`` is a float, hence
  an exact dyadic rational, so ``gamma`` is an exact rational, and the acceptance is the exact
  ``Bernoulli(exp(-gamma))`` of CKS Algorithm 1 (:func:`bernoulli_exp`, Python integers only):
  every integer has its exact discrete-Gaussian probability, out to any distance (a float
  ``exp(-gamma)`` underflows to zero beyond about 38.6 sigma, which would make such outputs
  impossible under one input and possible under its neighbour).
* The discrete Laplace scale for :func:`grid_release` with ``mechanism='laplace'`` is
  ``ceil(scale / grid)`` grid steps (rounded up: more noise, never less).

References
----------
* Clement L. Canonne, Gautam Kamath and Thomas Steinke. The Discrete Gaussian for Differential
  Privacy. Advances in Neural Information Processing Systems 33 (NeurIPS), 2020.
  arXiv:2004.00010.
* Ilya Mironov. On Significance of the Least Significant Bits for Differential Privacy.
  Proceedings of the 2012 ACM Conference on Computer and Communications Security (CCS), 2012.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any, TypeGuard

import numpy as np

from rfed.privacy._checks import check_int, check_positive

__all__ = [
    "SecureModeError",
    "SecureRandom",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "grid_release",
    "is_secure",
    "make_generator",
]

#: Largest magnitude of an integer that float64 represents exactly (and the grid arithmetic needs).
_EXACT = 2**53
#: Largest noise scale in grid units the int64 samplers accept (leaves room for the tails).
_MAX_SCALE = 2**50

_FLOAT_NOISE_MESSAGE = (
    "floating-point noise is not allowed in secure mode; use rfed.privacy.mechanisms "
    "(gaussian_mechanism, gaussian_release, laplace_mechanism), which add discrete noise on a grid"
)


class SecureModeError(RuntimeError):
    """A floating-point noise draw was requested from a :class:`SecureRandom`."""


def _size_tuple(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


class SecureRandom:
    """OS-CSPRNG stand-in for :class:`numpy.random.Generator` (not seedable, not replayable).

    Parameters
    ----------
    grid : float
        The grid spacing of the discrete mechanisms that use this generator; a power of two in
        ``[2**-60, 1]`` so that grid arithmetic is exact in float64.

    Notes
    -----
    Every draw reads fresh bytes from :func:`os.urandom`. Methods follow numpy's signatures for
    the arguments rfed uses; unsupported arguments raise ``TypeError``. Floating-point *noise*
    draws raise :class:`SecureModeError`.
    """

    #: Duck-typing marker read by :func:`rfed.manifolds.base.as_generator` (which cannot import
    #: rfed.privacy) and :func:`is_secure`.
    is_secure_random = True

    def __init__(self, grid: float = 2.0**-40):
        grid = check_positive(grid, "grid")
        mantissa, _ = math.frexp(grid)
        if mantissa != 0.5 or not 2.0**-60 <= grid <= 1.0:
            raise ValueError(
                f"argument 'grid' must be a power of two in [2**-60, 1] (exact grid arithmetic), "
                f"got {grid!r}"
            )
        self.grid = float(grid)

    def __repr__(self) -> str:
        return f"SecureRandom(grid=2**{int(math.log2(self.grid))})"

    # ------------------------------------------------------------------ raw bits
    def _words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words from the OS CSPRNG."""
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy() if n else np.zeros(
            0, dtype=np.uint64)

    def bytes(self, length: int) -> bytes:
        """``length`` random bytes.

        Parameters
        ----------
        length : int
            Number of bytes, >= 0.

        Returns
        -------
        bytes
        """
        return os.urandom(check_int(length, "length", minimum=0))

    def spawn(self, n_children: int) -> list[SecureRandom]:
        """Independent child generators (every draw is fresh OS randomness anyway).

        Parameters
        ----------
        n_children : int
            Number of generators.

        Returns
        -------
        list of SecureRandom
        """
        return [SecureRandom(self.grid) for _ in range(check_int(n_children, "n_children", 0))]

    # ------------------------------------------------------------------ uniform
    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None):
        """Uniform floats on ``[0, 1)``: ``k * 2**-53`` with ``k`` uniform in ``[0, 2**53)``.

        Parameters
        ----------
        size : int or tuple of int, optional
            Output shape (``None``: one value).
        dtype : float64
            The only dtype supported.
        out : None
            Not supported.

        Returns
        -------
        float or ndarray of float64, shape ``size``
        """
        if np.dtype(dtype) != np.float64 or out is not None:
            raise TypeError("SecureRandom.random supports only dtype=float64 and out=None")
        shape = _size_tuple(size)
        n = math.prod(shape)
        vals = (self._words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return float(vals[0]) if size is None else vals.reshape(shape)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None):
        """Uniform floats on ``[low, high)`` (``low + (high - low) * random()``).

        Parameters
        ----------
        low, high : float or array_like
            Bounds (broadcast).
        size : int or tuple of int, optional
            Output shape (``None``: one value).

        Returns
        -------
        float or ndarray of float64
        """
        low = np.asarray(low, dtype=float)
        high = np.asarray(high, dtype=float)
        shape = np.broadcast_shapes(low.shape, high.shape) if size is None else _size_tuple(size)
        out = low + (high - low) * self.random(shape)
        return float(out) if size is None and out.ndim == 0 else out

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False):
        """Uniform integers in ``[low, high)`` (``[low, high]`` with ``endpoint``); broadcast.

        Exact: a 64-bit word ``w`` is accepted when ``w >= 2**64 mod r`` (``r`` the range) and
        mapped to ``low + w mod r``; the accepted words are a multiple of ``r`` in number, so no
        value is favoured. Rejected entries are redrawn (a loop over rounds, not entries).

        Parameters
        ----------
        low, high : int or array_like
            Bounds; ``high=None`` draws from ``[0, low)``.
        size : int or tuple of int, optional
            Output shape (``None``: one value).
        dtype : integer dtype
            Output dtype.
        endpoint : bool
            Include ``high``.

        Returns
        -------
        int or ndarray
        """
        if high is None:
            low, high = 0, low
        low_a = np.asarray(low, dtype=np.int64)
        high_a = np.asarray(high, dtype=np.int64) + (1 if endpoint else 0)
        shape = (np.broadcast_shapes(low_a.shape, high_a.shape) if size is None
                 else _size_tuple(size))
        low_b = np.broadcast_to(low_a, shape).ravel()
        span = np.broadcast_to(high_a, shape).ravel() - low_b
        if np.any(span < 1):
            raise ValueError("arguments 'low' and 'high' must satisfy low < high")
        r = span.astype(np.uint64)
        threshold = (np.uint64(0) - r) % r  # 2**64 mod r
        out = np.empty(r.size, dtype=np.uint64)
        pending = np.arange(r.size)
        while pending.size:
            w = self._words(pending.size)
            ok = w >= threshold[pending]
            idx = pending[ok]
            out[idx] = w[ok] % r[idx]
            pending = pending[~ok]
        vals = (out.astype(np.int64) + low_b).astype(dtype, copy=False)
        return vals.reshape(shape)[()] if size is None and not shape else vals.reshape(shape)

    # ------------------------------------------------------------------ combinatorial
    def _keys(self, n: int) -> np.ndarray:
        # uniform 64-bit sort keys; ties (probability < n^2 2^-65) would favour the lower index
        return self._words(n)

    def permutation(self, x: Any):
        """A uniformly random permutation of ``range(x)`` or of the first axis of ``x``.

        Parameters
        ----------
        x : int or array_like
            ``range(x)`` or the array whose first axis is permuted.

        Returns
        -------
        ndarray
        """
        if isinstance(x, (int, np.integer)):
            return np.argsort(self._keys(int(x)), kind="stable")
        arr = np.asarray(x)
        if arr.ndim == 0:
            raise ValueError("argument 'x' must be an int or an array with at least one axis")
        return arr[np.argsort(self._keys(arr.shape[0]), kind="stable")]

    def shuffle(self, x: np.ndarray) -> None:
        """Shuffle the first axis of ``x`` in place.

        Parameters
        ----------
        x : ndarray
            Shuffled in place along its first axis.
        """
        x[...] = self.permutation(np.array(x, copy=True))

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None,
               axis: int = 0, shuffle: bool = True):
        """Random sample from ``range(a)`` or the first axis of ``a`` (numpy's semantics).

        Without replacement: the first ``size`` entries of a uniform random permutation. With
        weights ``p``: inverse CDF of a 53-bit uniform (``p`` in floating point, for public
        choices only).

        Parameters
        ----------
        a : int or array_like
            ``range(a)`` or the array sampled along ``axis``.
        size : int or tuple of int, optional
            Output shape (``None``: one value).
        replace : bool
            Sample with replacement.
        p : array_like, optional
            Probabilities of the entries (uniform by default).
        axis : int
            Axis of ``a`` sampled.
        shuffle : bool
            Shuffle a sample drawn without replacement.

        Returns
        -------
        scalar or ndarray
        """
        if axis != 0:
            raise TypeError("SecureRandom.choice supports only axis=0")
        pop = np.arange(int(a)) if isinstance(a, (int, np.integer)) else np.asarray(a)
        n = pop.shape[0]
        shape = _size_tuple(size)
        m = math.prod(shape)
        if p is not None:
            p = np.asarray(p, dtype=float)
            if p.shape != (n,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
                raise ValueError("argument 'p' must be a probability vector of length len(a)")
            if not replace:
                raise TypeError("SecureRandom.choice: weighted sampling without replacement is "
                                "not supported")
            cdf = np.cumsum(p)
            idx = np.minimum(np.searchsorted(cdf / cdf[-1], self.random(m), side="right"), n - 1)
        elif replace:
            idx = self.integers(0, n, size=m)
        else:
            if m > n:
                raise ValueError(f"cannot take a sample of {m} > {n} without replacement")
            idx = np.argsort(self._keys(n), kind="stable")[:m]
        out = pop[idx]
        if size is None:
            return out[0]
        return out.reshape(shape + pop.shape[1:])

    def binomial(self, n: Any, p: Any, size: Any = None):
        """Binomial counts: the number of 53-bit uniforms below ``p`` out of ``n`` (exact law up
        to ``p``'s binary rounding at 2**-53); vectorized over ``n * size`` draws.

        Parameters
        ----------
        n : int or array_like
            Trials, >= 0.
        p : float or array_like
            Success probabilities in [0, 1].
        size : int or tuple of int, optional
            Output shape (``None``: one value).

        Returns
        -------
        int or ndarray of int64
        """
        n_a = np.asarray(n, dtype=np.int64)
        p_a = np.asarray(p, dtype=float)
        if np.any(n_a < 0) or np.any((p_a < 0) | (p_a > 1)) or np.any(np.isnan(p_a)):
            raise ValueError("arguments must satisfy n >= 0 and 0 <= p <= 1")
        shape = np.broadcast_shapes(n_a.shape, p_a.shape) if size is None else _size_tuple(size)
        n_b = np.broadcast_to(n_a, shape).ravel()
        p_b = np.broadcast_to(p_a, shape).ravel()
        total = int(n_b.sum())
        if total > 50_000_000:
            raise ValueError("SecureRandom.binomial: n too large for exact counting (> 5e7 draws)")
        owner = np.repeat(np.arange(n_b.size), n_b)
        hits = self.random(total) < p_b[owner]
        counts = np.bincount(owner[hits], minlength=n_b.size).astype(np.int64)
        return int(counts[0]) if size is None and not shape else counts.reshape(shape)

    def dirichlet(self, alpha: Any, size: Any = None):
        """Dirichlet draws from normalized Gamma variates by inversion (scipy's ``gammaincinv``
        on 53-bit uniforms; floating point, meant for public data partitioning only).

        Parameters
        ----------
        alpha : array_like, shape ``(k,)``
            Concentration parameters, > 0.
        size : int or tuple of int, optional
            Batch shape.

        Returns
        -------
        ndarray, shape ``(*size, k)``
        """
        from scipy.special import gammaincinv

        alpha = np.asarray(alpha, dtype=float)
        if alpha.ndim != 1 or np.any(alpha <= 0):
            raise ValueError("argument 'alpha' must be a 1-d array of positive numbers")
        shape = _size_tuple(size) + alpha.shape
        u = self.random(shape)
        g = gammaincinv(np.broadcast_to(alpha, shape), np.maximum(u, 2.0**-54))
        return g / g.sum(axis=-1, keepdims=True)

    # ------------------------------------------------------------------ refused
    def _refuse(self, *args: Any, **kwargs: Any):
        raise SecureModeError(_FLOAT_NOISE_MESSAGE)

    standard_normal = normal = laplace = exponential = standard_exponential = _refuse
    gamma = standard_gamma = logistic = gumbel = lognormal = standard_t = _refuse
    multivariate_normal = standard_cauchy = _refuse


def is_secure(rng: Any) -> TypeGuard[SecureRandom]:
    """True for a :class:`SecureRandom` (secure mode).

    Parameters
    ----------
    rng : object
        A generator.

    Returns
    -------
    bool
    """
    return isinstance(rng, SecureRandom)


def make_generator(seed: int | None = None, *, secure: bool = False) -> Any:
    """The run's generator: ``SecureRandom()`` in secure mode, else ``default_rng(seed)``.

    Seeded runs are for research: they can be replayed from their seed, and their noise is
    floating point. Secure runs cannot be replayed (no seed).

    Parameters
    ----------
    seed : int, optional
        Required unless ``secure`` (rfed never falls back to unseeded randomness silently);
        refused with ``secure=True``.
    secure : bool

    Returns
    -------
    numpy.random.Generator or SecureRandom
        The generator.
    """
    if secure:
        if seed is not None:
            raise ValueError("argument 'seed' must be None with secure=True: secure mode draws "
                             "from the OS CSPRNG and cannot be replayed")
        return SecureRandom()
    if seed is None:
        raise ValueError("argument 'seed' is required unless secure=True (seeded runs are "
                         "replayable research runs)")
    return np.random.default_rng(check_int(seed, "seed", minimum=0))


# ---------------------------------------------------------------------- samplers (CKS 2020)
def _bernoulli_exp_ratio(num: np.ndarray, den: np.ndarray, rng: Any) -> np.ndarray:
    """Exact ``Bernoulli(exp(-num/den))`` for integer arrays ``0 <= num <= den`` (CKS Alg. 1).

    Draw ``A_K ~ Bernoulli(gamma / K)`` for ``K = 1, 2, ...`` until the first ``A_K = 0``; return
    whether that ``K`` is odd. ``P(K odd) = sum_j (-gamma)^j / j! = exp(-gamma)``. Each
    ``A_K`` is the exact integer comparison ``integers(0, den * K) < num``.
    """
    num = np.asarray(num, dtype=np.int64).ravel()
    den = np.asarray(den, dtype=np.int64).ravel()
    out = np.empty(num.size, dtype=bool)
    pending = np.arange(num.size)
    k = 1
    while pending.size:
        if np.any(den[pending] > np.iinfo(np.int64).max // (k + 1)):
            raise OverflowError("Bernoulli(exp(-gamma)) sampler: den * K overflows int64")
        a = rng.integers(0, den[pending] * k) < num[pending]
        stop = pending[~a]
        out[stop] = k % 2 == 1
        pending = pending[a]
        k += 1
    return out


#: Bits of the uniform compared per round by :func:`_bernoulli_rational` (a module constant so
#: that a test can shrink it and enumerate every bit string exactly).
_WORD_BITS = 64


def _uniform_words(n: int, rng: Any) -> np.ndarray:
    """``n`` independent uniform integers in ``[0, 2**_WORD_BITS)`` (Python ints, object
    array) from ``rng.bytes`` (a SecureRandom or a numpy Generator)."""
    words = np.frombuffer(rng.bytes(8 * n), dtype=np.uint64) if n else np.zeros(0, np.uint64)
    if _WORD_BITS < 64:
        words = words >> np.uint64(64 - _WORD_BITS)
    return words.astype(object)


def _bernoulli_rational(num: np.ndarray, den: np.ndarray, rng: Any) -> np.ndarray:
    """Exact ``Bernoulli(num / den)`` for arrays of Python ints ``0 <= num``, ``0 < den``.

    Compares a uniform real ``U`` in [0, 1), drawn lazily ``_WORD_BITS`` bits at a time, with
    the binary expansion of ``x = min(num / den, 1)`` (its digits by exact long division):
    ``U < x`` is decided at the first word where the two differ (a tie, probability
    ``2**-_WORD_BITS`` per word, draws the next word). ``P(U < x) = x`` exactly, whatever the
    size of the integers (no float is involved).

    Returns
    -------
    bool array, shape ``(len(num),)``
    """
    num = np.asarray(num, dtype=object).ravel()
    den = np.asarray(den, dtype=object).ravel()
    out = num >= den  # x = 1: always
    pending = np.flatnonzero(~out & (num > 0))  # x = 0: never (out stays False)
    rem = num[pending]
    d = den[pending]
    while pending.size:
        shifted = rem * (1 << _WORD_BITS)
        digit = shifted // d                       # the next word of x's expansion
        rem = shifted - digit * d
        word = _uniform_words(pending.size, rng)   # the next word of U
        out[pending[word < digit]] = True
        tie = word == digit
        pending, rem, d = pending[tie], rem[tie], d[tie]
    return out.astype(bool)


def bernoulli_exp(gamma_num: np.ndarray, gamma_den: np.ndarray, rng: Any) -> np.ndarray:
    """Exact ``Bernoulli(exp(-gamma))`` for rational ``gamma = gamma_num / gamma_den >= 0``.

    Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS
    2020 (arXiv:2004.00010), Algorithm 1: with ``k = floor(gamma)`` and ``r = gamma - k``,
    ``exp(-gamma) = exp(-1)^k exp(-r)``; ``k`` exact ``Bernoulli(exp(-1))`` trials must all
    succeed (:func:`_bernoulli_exp_int`), and ``Bernoulli(exp(-r))`` for ``r`` in [0, 1) is
    the parity of the first ``K`` with ``A_K = 0``, ``A_K ~ Bernoulli(r / K)``
    (``P(K odd) = sum_j (-r)^j / j! = exp(-r)``), each ``A_K`` drawn by
    :func:`_bernoulli_rational`. Integer arithmetic only: any ``gamma`` (a far tail included)
    has its exact, positive probability.

    Parameters
    ----------
    gamma_num, gamma_den : arrays of Python ints, shape ``(n,)``
        ``gamma_num >= 0``, ``gamma_den > 0``.
    rng : SecureRandom or numpy.random.Generator
        Any source with ``bytes`` and an exact ``integers``.

    Returns
    -------
    bool array, shape ``(n,)``
    """
    gnum = np.asarray(gamma_num, dtype=object).ravel()
    gden = np.asarray(gamma_den, dtype=object).ravel()
    whole = gnum // gden
    rest = gnum - whole * gden
    out = np.zeros(gnum.size, dtype=bool)
    # exp(-1)^k, then exp(-r) for the survivors
    alive = np.flatnonzero(_bernoulli_exp_int(whole, rng))
    # exp(-r), r in [0, 1): the parity of the stopping time K
    k = 1
    while alive.size:
        a = _bernoulli_rational(rest[alive], gden[alive] * k, rng)
        out[alive[~a]] = k % 2 == 1
        alive = alive[a]
        k += 1
    return out


def _bernoulli_exp_int(k: np.ndarray, rng: Any) -> np.ndarray:
    """Exact ``Bernoulli(exp(-k))`` for integers ``k >= 0`` (object or int array): ``k``
    exact ``Bernoulli(exp(-1))`` trials all succeed (CKS Algorithm 1, stopping at the first
    failure; a loop over trial rounds, not samples)."""
    k = np.asarray(k, dtype=object).ravel()
    out = np.ones(k.size, dtype=bool)
    done = np.zeros(k.size, dtype=object)
    alive = np.flatnonzero(k > 0)
    while alive.size:
        ones = np.ones(alive.size, dtype=np.int64)
        ok = _bernoulli_exp_ratio(ones, ones, rng)
        out[alive[~ok]] = False
        alive = alive[ok]
        done[alive] += 1
        alive = alive[done[alive] < k[alive]]
    return out


def _geometric_exp1(n: int, rng: Any) -> np.ndarray:
    """``V`` = number of ``Bernoulli(exp(-1))`` successes before the first failure (exact)."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ones = np.ones(active.size, dtype=np.int64)
        success = _bernoulli_exp_ratio(ones, ones, rng)
        v[active[success]] += 1
        active = active[success]
    return v


def _check_scale(scale: Any, name: str, limit: float = _MAX_SCALE) -> np.ndarray:
    arr = np.asarray(scale, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"argument '{name}' must be finite and >= 0 everywhere")
    if np.any(arr > limit):
        raise ValueError(f"argument '{name}' must be at most {limit:.3g} grid steps; use a "
                         "coarser grid")
    return arr


def discrete_laplace(scale: Any, size: Any = None, rng: Any = None) -> np.ndarray:
    r"""Exact discrete Laplace samples: :math:`P(X = x) \propto \exp(-|x| / t)`, ``x`` in Z.

    CKS 2020 Algorithm 2 with ``s = 1``, vectorized: ``U`` uniform on ``{0..t-1}`` kept with
    probability ``exp(-U/t)``, ``V`` geometric (``P(V = v) \propto e^{-v}``), ``X = U + t V``,
    a fair sign, and ``-0`` rejected.

    Parameters
    ----------
    scale : int or int array
        ``t >= 1`` (integers: the scale in grid units); broadcast to ``size``. Zero gives 0.
    size : int or tuple, optional
        Output shape (default: the shape of ``scale``).
    rng : SecureRandom or numpy.random.Generator
        Any source with an exact ``integers`` method (a seeded Generator for reproducible tests).

    Returns
    -------
    int64 array
    """
    if rng is None:
        raise TypeError("argument 'rng' must be a SecureRandom or numpy.random.Generator")
    t_arr = _check_scale(scale, "scale", limit=2 * _MAX_SCALE)
    if np.any(t_arr != np.floor(t_arr)):
        raise ValueError("argument 'scale' must hold integers (the scale in grid units)")
    shape = t_arr.shape if size is None else _size_tuple(size)
    t = np.broadcast_to(t_arr.astype(np.int64), shape).ravel()
    out = np.zeros(t.size, dtype=np.int64)
    pending = np.flatnonzero(t > 0)
    while pending.size:
        tp = t[pending]
        u = rng.integers(0, tp)
        keep = _bernoulli_exp_ratio(u, tp, rng)
        x = u + tp * _geometric_exp1(pending.size, rng)
        negative = rng.integers(0, 2, size=pending.size) == 1
        ok = keep & ~(negative & (x == 0))
        out[pending[ok]] = np.where(negative[ok], -x[ok], x[ok])
        pending = pending[~ok]
    return out.reshape(shape)


def discrete_gaussian(sigma: Any, size: Any = None, rng: Any = None) -> np.ndarray:
    r"""Discrete Gaussian samples: :math:`P(X = x) \propto \exp(-x^2 / (2\sigma^2))`, ``x`` in Z.

    CKS 2020 Algorithm 3, vectorized: propose ``Y`` from the exact discrete Laplace with
    ``t = floor(sigma) + 1`` and accept with probability
    ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``, drawn exactly in rational arithmetic
    (:func:`bernoulli_exp`): the law is the exact discrete Gaussian.

    Parameters
    ----------
    sigma : float or array
        ``>= 0`` in grid units (at most 2**50); broadcast to ``size``. Zero gives 0.
    size : int or tuple, optional
    rng : SecureRandom or numpy.random.Generator

    Returns
    -------
    int64 array
    """
    if rng is None:
        raise TypeError("argument 'rng' must be a SecureRandom or numpy.random.Generator")
    s_arr = _check_scale(sigma, "sigma")
    shape = s_arr.shape if size is None else _size_tuple(size)
    s = np.broadcast_to(s_arr, shape).ravel()
    out = np.zeros(s.size, dtype=np.int64)
    pending = np.flatnonzero(s > 0)
    # each distinct sigma's exact rationals (a float is a dyadic rational): sigma^2 = sn / sd
    # and t = floor(sigma) + 1, shared by its samples through ``which``
    values, which = np.unique(s, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    fractions = [Fraction(float(v)) ** 2 for v in values]
    sn = np.array([f.numerator for f in fractions] + [0], dtype=object)
    sd = np.array([f.denominator for f in fractions] + [1], dtype=object)
    t_int = np.array([math.floor(v) + 1 for v in values] + [1], dtype=object)
    while pending.size:
        sp = s[pending]
        t = np.floor(sp) + 1.0
        y = discrete_laplace(t, rng=rng)
        ok = _accept_discrete_gaussian(y, which[pending], sn, sd, t_int, rng)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out.reshape(shape)


def _accept_discrete_gaussian(y: np.ndarray, which: np.ndarray, sn: np.ndarray, sd: np.ndarray,
                              t: np.ndarray, rng: Any) -> np.ndarray:
    """CKS 2020 Algorithm 3's acceptance of the proposals ``y``, exactly.

    ``gamma = (|y| - sigma^2/t)^2 / (2 sigma^2)`` with ``sigma^2 = sn / sd`` is the rational
    ``(|y| t sd - sn)^2 / (2 t^2 sd sn)``, and ``Bernoulli(exp(-gamma))`` is drawn by
    :func:`bernoulli_exp`.

    Parameters
    ----------
    y : int64 array, shape ``(n,)``
        The discrete Laplace proposals (scale ``t``).
    which : int array, shape ``(n,)``
        Each proposal's sigma, an index into ``sn``, ``sd`` and ``t`` (object arrays of Python
        ints).
    """
    ay = np.abs(y).astype(object)
    snw, sdw, tw = sn[which], sd[which], t[which]
    gamma_num = (ay * tw * sdw - snw) ** 2
    gamma_den = 2 * tw * tw * sdw * snw
    return bernoulli_exp(gamma_num, gamma_den, rng)


def grid_release(value: Any, scale: Any, rng: SecureRandom, mechanism: str = "gaussian",
                 name: str = "value") -> np.ndarray:
    """``(rint(value / grid) + X) * grid`` with discrete noise ``X`` of scale ``scale / grid``.

    Parameters
    ----------
    value : float array
        Finite; ``|value| / grid < 2**53`` with room for the noise.
    scale : float or array
        Gaussian: ``sigma``; Laplace: the scale ``b`` (rounded up to whole grid steps);
        broadcastable to ``value``; ``>= 0``.
    rng : SecureRandom
        Supplies the grid and the randomness.
    mechanism : {'gaussian', 'laplace'}
    name : str
        Argument name for error messages.

    Returns
    -------
    float array, shape of ``value``, every entry an exact multiple of ``rng.grid``.
    """
    if not is_secure(rng):
        raise TypeError(f"argument 'rng' must be a SecureRandom, got {type(rng).__name__}")
    grid = rng.grid
    value = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"argument '{name}' contains NaN or inf")
    scale = np.asarray(scale, dtype=float)
    try:
        scale = np.broadcast_to(scale, value.shape)
    except ValueError:
        raise ValueError(f"the noise scale of shape {scale.shape} must broadcast to argument "
                         f"'{name}' of shape {value.shape}") from None
    k = np.rint(value / grid)
    if np.any(np.abs(k) >= _EXACT // 2):
        raise ValueError(f"argument '{name}' is too large for the grid {grid!r} (|value| / grid "
                         "must stay below 2**52); use a coarser grid")
    if mechanism == "gaussian":
        noise = discrete_gaussian(scale / grid, rng=rng)
    elif mechanism == "laplace":
        noise = discrete_laplace(np.ceil(scale / grid), rng=rng)
    else:
        raise ValueError(f"argument 'mechanism' must be 'gaussian' or 'laplace', got {mechanism!r}")
    total = k.astype(np.int64) + noise
    if np.any(np.abs(total) >= _EXACT):
        raise OverflowError("grid release left the range of exact float64 integers (2**53); "
                            "use a coarser grid")
    return total.astype(np.float64) * grid
