"""Speed of one PriRFed round (PCA on a sphere) against per-agent loops and the data-stream floor.

Run on demand: ``python benchmarks/bench_prirfed.py [--quick] [--repeat 5] [--shape AxN]
[--batch full|half]`` (``--shape`` and ``--batch`` restrict the table to some settings, e.g.
``--shape 1000x50 --batch half --repeat 21`` for a tighter median of the one setting).

Settings: issue 4's 100 agents x 600 samples of dimension 784 (uniform [0, 1] pixels,
synthetic), and 1,000 agents x 50 samples of dimension 784; full participation, K = 3 DP-RSGD
local steps with clipping and tangent noise, full batch or the paper's ``b = N_i / 2``. Rows
(interleaved in one process, median CPU time ``time.process_time`` of ``repeat`` calls):

* ``rfed batched``: :meth:`PriRFed.step`, all agents in one array, with SpherePCA's structured
  clipped gradient sum from ``Z x`` and ``Z^T w`` (no per-sample gradient array);
* ``rfed batched, generic clipping``: the same round through the generic
  :meth:`Problem.clipped_grad_sum` (every per-sample gradient materialized and clipped by its
  Riemannian norm: what a problem without a structured override gets);
* ``per-agent loop``: a Python loop over agents making the same calls one agent at a time with
  the SAME structured clipping (``clipped_grad_sum`` on the agent's batch, tangent noise, exp;
  then the tangent mean): what a competent user writes;
* ``per-agent loop, generic (naive)``: the loop with per-sample gradients, norms and clipping;
* ``floor: K x (Z x, Z^T w)``: K passes over the data a round must read, as two batched
  ``einsum`` over all agents (full batch) or over half the samples (``b = N_i / 2``): the
  memory-bandwidth floor of any implementation. For ``b = N_i / 2`` it reads a CONTIGUOUS half
  (the first ``N_i / 2`` rows), which no random minibatch is, so it is printed but not counted
  as reachable;
* the floors of a uniformly random half (``b = N_i / 2`` only; the subsets drawn as rfed draws
  them, :func:`sample_minibatches`): ``floor: K x (Z x, Z^T w) over all rows``, the two passes
  over every row with the unselected ones weighted 0 (rfed's former masked minibatches);
  ``floor: K x (gather B, Z_B x, Z_B^T w)``, the half gathered in row order by one flat
  ``np.take`` into a buffer reused across the steps, then the two passes over it; and
  ``floor: same, in S blocks``, the same reads a block of agents at a time so that the
  second pass reads the cache (what rfed does; ``S`` each size of :data:`FLOOR_BLOCK_BYTES`,
  rfed's own among them). "Best floor" is the fastest of these;
* ``one-read floor (blocked) + noise``: the one-read-per-step floor, what a competent user's
  loop pays for a private round's data and noise: per block of agents holding about ``S`` of
  records, ``Z x`` then ``Z^T w`` while the block is cached (for ``b = N_i / 2`` a random half
  of each agent's rows weighted 1, the others 0), plus the step's ``A x d`` normals from one
  sequential numpy Generator; for ``b = N_i / 2`` also ``one-read floor (blocked gather) +
  noise`` (the half gathered per block). These take the two products with ``np.einsum``; the
  rows ``... , BLAS) + noise`` take them with ``np.matmul`` (OpenBLAS's ``gemv`` per agent:
  faster on cached blocks, different last bits). Each is timed for every block size ``S`` of
  :data:`FLOOR_BLOCK_BYTES` (a competent user tunes it to the machine's caches; the rows show
  how much it matters on the machine that runs them), and the
  line ``rfed / best one-read floor (with noise)`` (the fastest of all these rows, the
  strongest floor) is the ratio the performance guide quotes; the line after it names that
  row;
* ``part: K keyed noise draws``: the K tangent-noise draws of the round (``A x d`` standard
  normals per step from rfed's per-agent keyed streams), which no data floor counts; the
  closing line also prints rfed minus it over the best floor, and rfed over the best floor
  plus it;
* ``lean loop, rfed's bits (S)``: the same round as plain numpy calls (:func:`lean_round`: no
  problem, manifold, mechanism or trainer objects; rfed's arithmetic and keyed draws), checked
  to give rfed's new point bit for bit before it is timed, per block size ``S`` (those giving
  the same agents per block timed once): what rfed's results cost without rfed. The closing
  line ``best lean loop (rfed's bits) / best one-read floor`` separates what rfed's code costs
  (``rfed / best lean loop``) from what its arithmetic and keyed draws cost;
* ``lean loop, changed bits (S)``: the lean loop with rfed's bits given up where that pays
  (:func:`lean_round_changed`: per-agent keyed SFC64 normals, the clip factor in fewer
  operations, one tangent projection of gradient and noise together, the sphere's closed-form
  tangent mean), checked before timing to equal the lean loop to rounding when the noise is
  zero. ``part: K keyed noise draws, SFC64 per agent`` is its noise alone; ``lean loop,
  changed arithmetic (S)`` is the same loop with rfed's keyed Philox noise (its randomness
  kept, only its last bits changed). The closing lines ``best lean loop (changed ...) / best
  one-read floor`` are what a numpy round reaches if every run's last bits (and randomness)
  change once; each ratio times ``rfed / best lean loop`` estimates rfed's
  round with those bits.

The last column is time / rfed; the closing lines print rfed / floor. The last measured table
is ``benchmarks/results/bench_prirfed.txt`` (imported into ``docs/results/benchmarks/``).

``--rsvrg-step``: CPU time of ONE DP-RSVRG inner step (the paper's Alg. 3) in prirfed-fig2's
setting (digits on S^63, 10 agents of 179-180 records, K = 3, m = 33, one agent per run),
for ``R`` runs stacked as :class:`RepeatedRuns` stacks them (R = 1, 2, 10; fig2 runs 10).
Rows: ``DPRSVRG.train`` divided by its ``K m`` inner steps; ``lean loop``: the same local run
with the inner step written as plain numpy calls in one function (no manifold, problem or
mechanism objects; the same keyed draws), checked to give rfed's output bit for bit; and
``part: keyed noise draws``: the step's ``R`` draws of 64 normals each from the agents' own
streams, the floor of any implementation with these streams. Compare checkouts with
``PYTHONPATH=/path/to/checkout python benchmarks/bench_prirfed.py --rsvrg-step``.
"""

from __future__ import annotations

import argparse
import ctypes

import numpy as np
from _timing import interleaved_medians

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed, tangent_mean
from rfed.algorithms.federated.local import _GATHER_BLOCK_BYTES
from rfed.algorithms.federated.sampling import sample_minibatches
from rfed.algorithms.federated.streams import AGENTS_PER_STREAM
from rfed.problems import Problem, SpherePCA
from rfed.randomness import AgentStreams, StackedStreams

#: Block sizes (bytes of records per block of agents) at which the blocked floors are timed;
#: the best floor is the fastest over them (rfed's own block size is one of them).
FLOOR_BLOCK_BYTES = tuple(sorted({2**19, 2**20, 2**21, 2**22, _GATHER_BLOCK_BYTES}))


def _size_label(n_bytes: int) -> str:
    return f"{n_bytes >> 20} MiB" if n_bytes >= 2**20 else f"{n_bytes >> 10} KiB"


class GenericPCA(SpherePCA):
    """SpherePCA without its structured clipping (the generic per-sample path)."""

    clipped_grad_sum = Problem.clipped_grad_sum
    sorted_batches = False


def loop_round(problem, plan, x, alpha, k_steps, batch, rng, structured: bool):
    """One round as a per-agent loop over the same manifold calls (structured or generic
    clipping)."""
    man = problem.manifold
    z_all, sq_all = problem.data["z"], problem.data["sq"]
    locals_ = np.empty((problem.n_agents, *x.shape))
    for a in range(problem.n_agents):
        xa = x.copy()
        for _ in range(k_steps):
            if batch is None:
                rows = slice(0, problem.counts[a])
                b = problem.counts[a]
            else:
                rows = rng.choice(problem.counts[a], size=batch, replace=False)
                b = batch
            if structured:
                total, _ = problem.clipped_grad_sum(
                    xa, {"z": z_all[a, rows], "sq": sq_all[a, rows]}, plan.clip)
                eta = total / b
            else:
                g = problem.sample_rgrad(xa, {"z": z_all[a, rows]})
                norms = man.norm(xa, g)
                scale = np.minimum(1.0, plan.clip / np.maximum(norms, 1e-300))
                eta = np.mean(scale[:, None] * g, axis=0)
            eta = eta + man.tangent_gaussian(xa, plan.sigma[a], rng)
            xa = man.exp(xa, -alpha * eta)
        locals_[a] = xa
    w = problem.counts / problem.counts.sum()
    return tangent_mean(man, x, locals_, w)


def floor_passes(z: np.ndarray, x: np.ndarray, k_steps: int, half: bool) -> None:
    """The data reads of a round: K times ``Z x`` then ``Z^T w`` for every agent at once."""
    zz = z[:, : z.shape[1] // 2] if half else z
    for _ in range(k_steps):
        w = np.einsum("and,d->an", zz, x)
        np.einsum("and,an->ad", zz, w)


def _products(zb: np.ndarray, x: np.ndarray, weights: np.ndarray | None, blas: bool) -> None:
    """``w = Z x`` (times ``weights``) then ``Z^T w`` for a block ``zb`` ``(A, n, d)``:
    ``np.einsum``, or ``np.matmul`` (BLAS) when ``blas``."""
    if blas:
        w = zb @ x
        if weights is not None:
            w *= weights
        np.matmul(w[:, None, :], zb)
        return
    w = np.einsum("and,d->an", zb, x)
    if weights is not None:
        w *= weights
    np.einsum("and,an->ad", zb, w)


def floor_one_read(z: np.ndarray, x: np.ndarray, k_steps: int, half: bool,
                   rng: np.random.Generator, block_bytes: int, blas: bool = False) -> None:
    """The one-read-per-step floor: what a competent user's loop pays for a private round's
    data and noise. K times: per block of agents holding about ``block_bytes`` of records,
    ``Z x`` then ``Z^T w`` while the block is in the cache (each record read from memory once
    per step; for ``half``, a uniformly random half of each agent's rows weighted 1, the others
    0), and the step's ``A x d`` Gaussian noise from one sequential numpy Generator (the
    cheapest normals numpy draws). ``blas``: the products by ``np.matmul``."""
    n_agents, n_per, dim = z.shape
    per_block = max(1, block_bytes // (n_per * dim * 8))
    counts = np.full(n_agents, n_per)
    for _ in range(k_steps):
        weights = None
        if half:
            weights = np.zeros((n_agents, n_per))
            np.put_along_axis(weights, _sorted_half(counts, rng), 1.0, axis=1)
        for start in range(0, n_agents, per_block):
            _products(z[start:start + per_block], x,
                      None if weights is None else weights[start:start + per_block], blas)
        rng.standard_normal((n_agents, dim))


def floor_one_read_gather(z: np.ndarray, x: np.ndarray, k_steps: int,
                          rng: np.random.Generator, block_bytes: int, blas: bool = False
                          ) -> None:
    """The one-read floor of a random half by gathering (``floor_random_batch`` in blocks)
    plus the step's ``A x d`` normals from one sequential numpy Generator (``blas``: the
    products by ``np.matmul``)."""
    for _ in range(k_steps):
        floor_random_batch(z, x, 1, rng, block_bytes, blas)
        rng.standard_normal(z.shape[::2])


def _sorted_half(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random half of each agent's rows, drawn as rfed draws them
    (:func:`sample_minibatches`), each row of the result sorted, shape ``(A, N / 2)``."""
    idx, _ = sample_minibatches(counts, counts // 2, rng)
    return np.sort(idx, axis=1)


def floor_random_batch(z: np.ndarray, x: np.ndarray, k_steps: int,
                       rng: np.random.Generator, block_bytes: int | None,
                       blas: bool = False) -> None:
    """K times: a uniformly random half of each agent's rows, gathered in row order by one flat
    ``np.take`` into a buffer reused across the steps, then ``Z_B x`` and ``Z_B^T w``.

    ``block_bytes=None`` gathers every agent's half at once; otherwise a block of agents
    holding about ``block_bytes`` of gathered rows at a time, so that the two products read the
    block from the cache (rfed's rule, ``rfed.algorithms.federated.local``). ``blas``: the
    products by ``np.matmul``.
    """
    n_agents, n_per, dim = z.shape
    b = n_per // 2
    counts = np.full(n_agents, n_per)
    per_block = n_agents if block_bytes is None else max(1, block_bytes // (b * dim * 8))
    buf = np.empty((min(per_block, n_agents) * b, dim))
    flat_rows = z.reshape(-1, dim)
    for _ in range(k_steps):
        flat = (np.arange(n_agents)[:, None] * n_per + _sorted_half(counts, rng))
        for start in range(0, n_agents, per_block):
            stop = min(n_agents, start + per_block)
            rows = flat[start:stop].reshape(-1)
            # mode 'clip' writes into buf directly (the indices are valid); 'raise' buffers
            zb = np.take(flat_rows, rows, axis=0, out=buf[: rows.size], mode="clip")
            _products(zb.reshape(stop - start, b, dim), x, None, blas)


class _StepGather:
    """A step's records per block of agents holding about ``block_bytes`` of them, as rfed's
    in-order gather reads them: with ``half``, each agent's ``b = N / 2`` rows of smallest keys
    (sorted), gathered by one flat ``np.take`` into a buffer reused across blocks and steps;
    else each block's rows in place. Shared by :func:`lean_round` and
    :func:`lean_round_changed`."""

    def __init__(self, problem: SpherePCA, half: bool, block_bytes: int):
        self.z, self.sq, self.half = problem.data["z"], problem.data["sq"], half
        n_agents, self.n_per, dim = self.z.shape
        self.b = self.n_per // 2 if half else self.n_per
        self.per_block = max(1, block_bytes // (self.b * dim * 8))
        self.z_flat, self.sq_flat = self.z.reshape(-1, dim), self.sq.reshape(-1)
        self.buf = np.empty((min(self.per_block, n_agents) * self.b, dim))

    def steps(self, streams: StackedStreams, rnd: int, k_steps: int):
        """Per step ``(keys, noise_purpose)``: the minibatch keys drawn from ``streams`` (half
        batches; else ``None``) and the purpose of the step's noise draw, numbered as rfed's
        DP-RSGD numbers its draws (``local#0``, ``local#1``, ... in drawing order)."""
        calls = 0
        for _ in range(k_steps):
            keys = None
            if self.half:
                keys = streams.draw(rnd, f"local#{calls}", (self.n_per,), "uniform")
                calls += 1
            yield keys, f"local#{calls}"
            calls += 1

    def blocks(self, keys: np.ndarray | None):
        """``(start, stop, z (stop - start, b, d), sq (stop - start, b))`` per block; ``keys``
        ``(A, N)``: the minibatch keys of a half batch (``None``: every row)."""
        n_agents, b, dim = self.z.shape[0], self.b, self.z.shape[2]
        flat = None
        if keys is not None:
            flat = np.arange(n_agents)[:, None] * self.n_per + np.sort(
                np.argpartition(keys, b - 1, axis=1)[:, :b], axis=1)
        for start in range(0, n_agents, self.per_block):
            stop = min(n_agents, start + self.per_block)
            if flat is None:
                yield start, stop, self.z[start:stop], self.sq[start:stop]
                continue
            rows = flat[start:stop].reshape(-1)
            z = np.take(self.z_flat, rows, axis=0, out=self.buf[: rows.size],
                        mode="clip").reshape(stop - start, b, dim)
            yield start, stop, z, self.sq_flat[rows].reshape(stop - start, b)


def lean_round(problem: SpherePCA, plan, x0: np.ndarray, seed: int, rnd: int,
               step_size: float, k_steps: int, half: bool, block_bytes: int,
               sigma: np.ndarray | None = None) -> np.ndarray:
    """One PriRFed round (every agent, K DP-RSGD steps, tangent-mean aggregation) written as
    plain numpy calls with rfed's arithmetic and keyed draws, so that its output is rfed's bit
    for bit (checked before timing): what a competent user writes who wants rfed's results
    without its objects. Every agent holds the same ``N`` records; ``half``: ``b = N / 2``.

    Per step: the minibatch keys from the agents' streams and each agent's ``b`` smallest
    (sorted, the rows rfed's in-order gather reads), then per block of agents holding about
    ``block_bytes`` of rows the gather (``half``), ``a = Z x``, the clip scales and
    ``-2 (Z^T (c a) - (sum c a^2) x)`` (SpherePCA's formula), the mean over the public ``b``,
    the keyed normals projected on each tangent space and scaled by ``sigma``, and the closed
    form of the sphere's exponential map with its norm check (``Sphere.exp``); finally rfed's
    :func:`tangent_mean`, the same call as the per-agent loop's. ``sigma``: the agents' noise
    scales instead of the plan's (e.g. zeros, to compare with :func:`lean_round_changed`).
    """
    n_agents, n_per, dim = problem.data["z"].shape
    agents = np.arange(n_agents)
    streams = StackedStreams([seed], [agents], agents_per_stream=AGENTS_PER_STREAM)
    sigma = (plan.sigma[agents] if sigma is None else sigma)[:, None]
    size, tau = float(plan.sizes[0]), plan.clip
    gather = _StepGather(problem, half, block_bytes)
    x = np.broadcast_to(x0, (n_agents, dim))
    for keys, noise_purpose in gather.steps(streams, rnd, k_steps):
        total = np.empty((n_agents, dim))
        for start, stop, z, sq in gather.blocks(keys):
            xb = x[start:stop]
            a = np.matmul(z, xb[..., None])[..., 0]
            work = np.multiply(a, a)
            np.subtract(sq, work, out=work)
            np.maximum(work, 0.0, out=work)
            np.sqrt(work, out=work)
            norms = np.abs(a)
            norms *= 2.0
            norms *= work
            ca = np.divide(tau, np.fmax(norms, tau, out=work), out=work)
            ca *= a
            part = np.matmul(ca[..., None, :], z, out=total[start:stop, None, :])[..., 0, :]
            part -= np.multiply(a, ca, out=a).sum(-1)[..., None] * xb
            part *= -2.0
        total /= size
        if not (np.isfinite(total).all() and np.isfinite(x).all()):
            raise FloatingPointError("diverged")
        eta = streams.draw(rnd, noise_purpose, (dim,), "normal")
        eta -= np.einsum("...i,...i->...", x, eta)[..., None] * x
        eta *= sigma
        eta += total
        eta *= -step_size
        t = np.sqrt(np.einsum("...i,...i->...", eta, eta))
        y = eta * (np.sin(t) / t)[..., None]
        y += np.cos(t)[..., None] * x
        norm_sq = np.einsum("...i,...i->...", y, y)
        strayed = np.abs(norm_sq - 1.0) > 8 * np.finfo(float).eps
        if strayed.any():
            y *= np.where(strayed, 1.0 / np.sqrt(norm_sq), 1.0)[..., None]
        x = y
    return tangent_mean(problem.manifold, x0, x, problem.counts / problem.counts.sum())


def _splitmix64(words: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on each word (uint64, wrapping): 53-bit keys spread over
    all 64 bits (an SFC64 state with zero top bits starts with correlated outputs)."""
    z = words.copy()
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


class KeyedSFC64Normals:
    """Per-agent keyed standard normals from numpy's SFC64 (its fastest bit generator), one
    key per agent: each agent's SFC64 state ``(a, b, c, 1)`` is three 53-bit words from the
    agent's own keyed Philox stream (rfed's :class:`StackedStreams`, kind ``'uniform'``, times
    ``2^53``) mixed over 64 bits by :func:`_splitmix64`, written into one cached generator
    through ``ctypes`` (the layout of numpy's ``sfc64_state`` is checked against the
    generator's ``state`` first), then the agent's ``d`` normals by numpy's ziggurat. A row
    depends only on (seed, agent, round, purpose), not on which other agents draw. What rfed's
    per-agent noise would cost with a faster keyed generator: NOT rfed's streams (a different
    generator changes every run's bits)."""

    class _State(ctypes.Structure):
        _fields_ = [("s", ctypes.c_uint64 * 4), ("has_uint32", ctypes.c_int),
                    ("uinteger", ctypes.c_uint32)]

    def __init__(self, seeds, blocks):
        self.keys = StackedStreams(seeds, blocks, agents_per_stream=1)
        self.bits = np.random.SFC64(0)
        self.gen = np.random.Generator(self.bits)
        self.state = ctypes.cast(self.bits.ctypes.state_address,
                                 ctypes.POINTER(self._State)).contents
        self.state.s[0], self.state.s[1], self.state.s[2], self.state.s[3] = 5, 6, 7, 1
        if [int(v) for v in self.bits.state["state"]["state"]] != [5, 6, 7, 1]:
            raise AssertionError("numpy's sfc64_state is not laid out as this benchmark assumes")

    def draw(self, rnd: int, purpose: str, dim: int) -> np.ndarray:
        """Standard normals ``(agents, dim)``: row i from agent i's own key."""
        words = _splitmix64((self.keys.draw(rnd, purpose, (3,), "uniform")
                             * 2.0**53).astype(np.uint64))
        out = np.empty((words.shape[0], dim))
        s, fill = self.state.s, self.gen.standard_normal
        for row, (a, b, c) in zip(out, words.tolist(), strict=True):
            s[0], s[1], s[2], s[3] = a, b, c, 1
            self.state.has_uint32 = 0
            fill(out=row)
        return out


def lean_round_changed(problem: SpherePCA, plan, x0: np.ndarray, seed: int, rnd: int,
                       step_size: float, k_steps: int, half: bool, block_bytes: int,
                       sigma: np.ndarray | None = None, sfc64: bool = True) -> np.ndarray:
    r"""The round of :func:`lean_round` with its bits given up where that pays: what numpy
    reaches if every run's randomness and last bits change once.

    Against :func:`lean_round`: the tangent noise from :class:`KeyedSFC64Normals` (one key per
    agent; the minibatch keys are rfed's); the clip factor in fewer operations,
    :math:`c\,a = a\,(\tau/2) / \max(|a| \sqrt{s - a^2}, \tau/2)` (the same factor), with
    :math:`-2/b` folded in; each block's EUCLIDEAN sum :math:`-\frac{2}{b} Z^T (c\,a)` only,
    and one tangent projection per step of the gradient and the noise together
    (:math:`P_x(-\frac2b Z^T c a) = -\frac2b(Z^T c a - \langle a, c a\rangle x)`, the
    Riemannian sum); the finiteness check on the step's norm; the sphere's closed-form
    tangent mean (one product with the agents' points). With ``sigma = 0`` it equals
    :func:`lean_round` to rounding (checked before timing). ``sfc64=False``: the noise from
    rfed's keyed Philox streams, as :func:`lean_round` draws it (only the arithmetic changed:
    every run's last bits, not its randomness)."""
    n_agents, n_per, dim = problem.data["z"].shape
    agents = np.arange(n_agents)
    streams = StackedStreams([seed], [agents], agents_per_stream=AGENTS_PER_STREAM)
    normals = KeyedSFC64Normals([seed], [agents]) if sfc64 else None
    sigma = (plan.sigma[agents] if sigma is None else sigma)[:, None]
    size, half_tau = float(plan.sizes[0]), plan.clip / 2.0
    factor, floor_sq = -2.0 / size * half_tau, half_tau * half_tau
    gather = _StepGather(problem, half, block_bytes)
    x = np.broadcast_to(x0, (n_agents, dim))
    for keys, noise_purpose in gather.steps(streams, rnd, k_steps):
        total = np.empty((n_agents, dim))
        for start, stop, z, sq in gather.blocks(keys):
            a = np.matmul(z, x[start:stop, :, None])[..., 0]
            a_sq = a * a
            work = np.subtract(sq, a_sq)
            work *= a_sq
            np.sqrt(np.maximum(work, floor_sq, out=work), out=work)
            ca = np.divide(a, work, out=work)
            ca *= factor
            np.matmul(ca[..., None, :], z, out=total[start:stop, None, :])
        eta = (normals.draw(rnd, noise_purpose, dim) if normals is not None
               else streams.draw(rnd, noise_purpose, (dim,), "normal"))
        eta *= sigma
        eta += total
        eta -= np.einsum("ij,ij->i", x, eta)[:, None] * x
        t = np.sqrt(np.einsum("ij,ij->i", eta, eta)) * step_size
        if not np.isfinite(t).all():
            raise FloatingPointError("diverged")
        y = eta * (-step_size * np.sin(t) / np.where(t > 0, t, 1.0))[:, None]
        y += np.cos(t)[:, None] * x
        norm_sq = np.einsum("ij,ij->i", y, y)
        strayed = np.abs(norm_sq - 1.0) > 8 * np.finfo(float).eps
        if strayed.any():
            y *= np.where(strayed, 1.0 / np.sqrt(norm_sq), 1.0)[:, None]
        x = y
    # tangent mean on the sphere: sum_i w_i theta_i / sin(theta_i) (x_i - cos(theta_i) x0)
    weights = problem.counts / problem.counts.sum()
    cos = np.clip(x @ x0, -1.0, 1.0)
    theta = np.arccos(cos)
    coef = weights * np.where(theta > 1e-8, theta / np.sin(np.maximum(theta, 1e-300)), 1.0)
    step = coef @ x - (coef * cos).sum() * x0
    norm = float(np.linalg.norm(step))
    if norm == 0.0:
        return x0.copy()
    return np.cos(norm) * x0 + (np.sin(norm) / norm) * step


def noise_draws(n_agents: int, dim: int, k_steps: int, sfc64: bool = False) -> None:
    """K keyed tangent-noise draws of the round, ``(A, dim - 1)`` standard normals each, from the
    per-agent streams rfed uses (not data reads: the part of a round no data floor counts);
    ``sfc64``: from :class:`KeyedSFC64Normals` instead (one key per agent, another generator)."""
    agents = np.arange(n_agents)
    if sfc64:
        normals = KeyedSFC64Normals([1], [agents])
        for k in range(k_steps):
            normals.draw(0, f"local#{k}", dim - 1)
        return
    streams = AgentStreams(1, agents_per_stream=AGENTS_PER_STREAM)
    for k in range(k_steps):
        streams.normal(agents, 0, f"local#{k}", (dim - 1,))


def _fig2_problem() -> SpherePCA:
    from rfed.datasets import iid_partition, load_digits_images
    from rfed.datasets.partition import stack_agents

    images, _ = load_digits_images()
    parts = iid_partition(images.shape[0], 10, np.random.default_rng(0))
    return SpherePCA(stack_agents(images, parts), norm_bound=8.0)


def lean_rsvrg(problem, trainer, plan, x, agents, sigma, step, seeds, blocks, rnd):
    """DP-RSVRG's local run with each inner step written as plain numpy calls, drawing the
    keyed noise from the same streams in the same order (so the output is rfed's, bit for bit).
    The outer work per snapshot (full clipped gradient, the picks and their snapshot terms) is
    rfed's own (not per-step)."""
    streams = StackedStreams(seeds, blocks, agents_per_stream=AGENTS_PER_STREAM)
    einsum = np.einsum
    counts = problem.counts[agents]
    data, mask = problem.agent_data(agents)
    tau0, tau1, m = plan.clip_full, plan.clip, trainer.inner_steps
    calls = 0
    snap = x
    for _ in range(trainer.steps):
        total, _ = problem.clipped_grad_sum(snap, data, tau0, mask)
        g_full = total / counts[:, None]
        u = streams.draw(rnd, f"local#{calls}", (m,), "uniform")
        calls += 1
        idx = np.minimum(np.floor(u * counts[:, None]).astype(np.int64), counts[:, None] - 1)
        picks = problem.batch(agents, idx)
        at_snap, _ = problem.clipped_grad_sum(
            snap[:, None], {key: v[:, :, None] for key, v in picks.items()}, tau1)
        snap_terms = at_snap - g_full[:, None]
        z_all, sq_all = picks["z"], picks["sq"]
        xj = snap
        for j in range(m):
            # clipped single-record gradient at xj (SpherePCA.clipped_grad_sum's formula)
            z = z_all[:, j : j + 1]
            a = np.matmul(z, xj[..., None])[..., 0]
            norms = 2.0 * np.abs(a) * np.sqrt(np.maximum(sq_all[:, j : j + 1] - a * a, 0.0))
            over = norms > tau1
            ca = np.where(over, tau1 / np.where(over, norms, 1.0), 1.0) * a
            g1 = np.matmul(ca[..., None, :], z)[..., 0, :]
            g1 -= (ca * a).sum(-1)[..., None] * xj
            g1 *= -2.0
            # parallel transport of the snapshot term from snap to xj (Sphere.transport)
            v = snap_terms[:, j]
            w = xj - snap
            c = einsum("...i,...i->...", snap, w)
            w = w - c[..., None] * snap
            w -= einsum("...i,...i->...", snap, w)[..., None] * snap
            wn = np.sqrt(einsum("...i,...i->...", w, w))
            e = w / np.where(wn > 0, wn, 1.0)[..., None]
            eu = einsum("...i,...i->...", e, v)[..., None]
            eta = g1 - (v - eu * ((-c)[..., None] * e + wn[..., None] * snap))
            if not (np.isfinite(eta).all() and np.isfinite(xj).all()):
                raise FloatingPointError("diverged")
            # tangent Gaussian at xj from the keyed streams (Sphere.tangent_gaussian)
            noise = streams.draw(rnd, f"local#{calls}", xj.shape[1:], "normal")
            calls += 1
            noise -= einsum("...i,...i->...", xj, noise)[..., None] * xj
            noise *= sigma[..., None]
            eta = eta + noise
            # exp (Sphere.exp's operations)
            s = -step * eta
            t = np.sqrt(einsum("...i,...i->...", s, s))
            sinc_t = np.divide(np.sin(t), t, out=np.ones_like(t), where=t > 0)
            y = s * sinc_t[..., None]
            y += np.cos(t)[..., None] * xj
            norm_sq = einsum("...i,...i->...", y, y)
            strayed = np.abs(norm_sq - 1.0) > 8 * np.finfo(float).eps
            if np.any(strayed):
                y *= np.where(strayed, 1.0 / np.sqrt(norm_sq), 1.0)[..., None]
            xj = y
        snap = xj
    return snap


def rsvrg_step(repeat: int) -> None:
    """``--rsvrg-step`` (module docstring)."""
    from rfed.algorithms.federated.streams import AgentBlockGenerator

    problem = _fig2_problem()
    m = (10 * 10) // 3
    trainer = DPRSVRG(steps=3, inner_steps=m, clip=128.0, clip_full=128.0,
                      noise_multiplier=3.0)
    plan = trainer.plan(problem)
    x0 = problem.manifold.random_point(np.random.default_rng(1))
    steps = trainer.steps * m
    print(f"one DP-RSVRG inner step, prirfed-fig2's setting (Sphere(63), m = {m}, K = 3); "
          f"median CPU us per inner step of {repeat} interleaved local runs")
    print(f"{'runs R':<7} {'method':<34} {'us / step':>10} {'time / rfed':>12}")
    for n_runs in (1, 2, 10):
        blocks = [np.array([(3 + 7 * r) % 10]) for r in range(n_runs)]
        agents = np.concatenate(blocks)
        seeds = [11 + r for r in range(n_runs)]
        x = np.repeat(x0[None], n_runs, axis=0)
        sigma = plan.sigma[agents]

        def rfed(rnd=5, seeds=seeds, blocks=blocks, agents=agents, x=x, sigma=sigma):
            rng = AgentBlockGenerator.stacked(seeds, blocks, rnd, "local")
            return trainer.train(problem, plan, x, agents, 0.1, rng, 1, sigma=sigma)[0]

        def lean(seeds=seeds, blocks=blocks, agents=agents, x=x, sigma=sigma):
            return lean_rsvrg(problem, trainer, plan, x, agents, sigma, 0.1, seeds, blocks, 5)

        def draws(seeds=seeds, blocks=blocks):
            streams = StackedStreams(seeds, blocks, agents_per_stream=AGENTS_PER_STREAM)
            for c in range(steps):
                streams.draw(5, f"local#{c}", (problem.manifold.dim + 1,), "normal")

        if not np.array_equal(rfed(), lean()):
            raise AssertionError("the lean loop does not reproduce rfed's local run")
        times = interleaved_medians({"rfed DPRSVRG.train": rfed, "lean loop (same bits)": lean,
                                     "part: keyed noise draws": draws}, repeat)
        ref = times["rfed DPRSVRG.train"]
        for label, t in times.items():
            print(f"{n_runs:<7} {label:<34} {t / steps * 1e6:>10.1f} {t / ref:>12.2f}")
    print("(a noise draw is 64 normals per run, from the agent's own stream)")


def _shape(text: str) -> tuple[int, int]:
    """``--shape AxN``: A agents of N records each (N even, for the half batches)."""
    try:
        n_agents, n_per = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected A agents x N records as AxN (e.g. 1000x50), got {text!r}") from None
    if n_agents < 1 or n_per < 2 or n_per % 2:
        raise argparse.ArgumentTypeError(
            f"expected A >= 1 agents and an even N >= 2 records, got {text!r}")
    return n_agents, n_per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 agents x 600 and 100 agents x 50 instead")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shape", action="append", type=_shape, metavar="AxN",
                        help="only this setting, A agents x N records (repeatable; default "
                             "both of the chosen size's)")
    parser.add_argument("--batch", action="append", choices=("full", "half"),
                        help="only this batch (repeatable; default both)")
    parser.add_argument("--rsvrg-step", action="store_true",
                        help="one DP-RSVRG inner step in prirfed-fig2's setting instead")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"argument --repeat: expected a positive number of calls, got {args.repeat}")
    if args.rsvrg_step:
        rsvrg_step(args.repeat)
        return
    dim, k_steps = 784, 3
    shapes = [(10, 600), (100, 50)] if args.quick else [(100, 600), (1000, 50)]
    if args.shape:
        shapes = args.shape
    batches = [(label, value) for name, label, value in (("full", "full", None),
                                                         ("half", "N_i/2", 0.5))
               if not args.batch or name in args.batch]
    print(f"PriRFed round, Sphere({dim - 1}) PCA, K = {k_steps} DP-RSGD steps (eps 0.15, "
          f"delta 1e-4); median CPU time of {args.repeat} interleaved calls")
    print(f"{'agents x samples':<18} {'batch':<10} {'method':<56} {'seconds':>9} "
          f"{'time / rfed':>12}")
    for n_agents, n_per in shapes:
        rng = np.random.default_rng(0)
        z = rng.random((n_agents, n_per, dim))
        fast = SpherePCA(z)
        generic = GenericPCA(z)
        x0 = fast.manifold.random_point(rng)
        for batch_label, batch in batches:
            fns = {}
            for label, prob in (("rfed batched", fast),
                                ("rfed batched, generic clipping", generic)):
                # public clip: pixels in [0, 1] give ||z||^2 <= dim, the paper's 2 max|z|^2
                alg = PriRFed(DPRSGD(steps=k_steps, batch_size=batch, clip=2.0 * dim,
                                     paper_epsilon=0.15, paper_delta=1e-4),
                              n_sampled=None, step_size=0.1)
                state = alg.init(prob, x0, np.random.default_rng(1))
                fns[label] = lambda alg=alg, prob=prob, state=state: alg.step(prob, state)
                if prob is fast:
                    fast_alg, fast_state = alg, state
            plan = DPRSGD(steps=k_steps, batch_size=batch, clip=2.0 * dim, paper_epsilon=0.15,
                          paper_delta=1e-4).plan(fast)
            b = None if batch is None else n_per // 2
            for label, structured in (("per-agent loop", True),
                                      ("per-agent loop, generic (naive)", False)):
                fns[label] = (lambda plan=plan, b=b, s=structured, p=fast, x=x0: loop_round(
                    p, plan, x, 0.1, k_steps, b, np.random.default_rng(2), s))
            fns["floor: K x (Z x, Z^T w)"] = (
                lambda half=batch is not None, z=z, x=x0: floor_passes(z, x, k_steps, half))
            if batch is not None:
                fns["floor: K x (Z x, Z^T w) over all rows"] = (
                    lambda z=z, x=x0: floor_passes(z, x, k_steps, False))
                fns["floor: K x (gather B, Z_B x, Z_B^T w)"] = (
                    lambda z=z, x=x0: floor_random_batch(z, x, k_steps,
                                                         np.random.default_rng(3), None))
                for size in FLOOR_BLOCK_BYTES:
                    fns[f"floor: same, in {_size_label(size)} blocks"] = (
                        lambda z=z, x=x0, size=size: floor_random_batch(
                            z, x, k_steps, np.random.default_rng(3), size))
            for blas, tag in ((False, ""), (True, ", BLAS")):
                for size in FLOOR_BLOCK_BYTES:
                    where = f", {_size_label(size)}"
                    fns[f"one-read floor (blocked{tag}{where}) + noise"] = (
                        lambda half=batch is not None, z=z, x=x0, blas=blas, size=size:
                        floor_one_read(z, x, k_steps, half, np.random.default_rng(4), size,
                                       blas))
                    if batch is not None:
                        fns[f"one-read floor (blocked gather{tag}{where}) + noise"] = (
                            lambda z=z, x=x0, blas=blas, size=size: floor_one_read_gather(
                                z, x, k_steps, np.random.default_rng(4), size, blas))
            expected = fast_alg.step(fast, fast_state).x
            # block sizes giving the same agents per block time the same loop: the smallest
            rows_b = n_per // 2 if batch is not None else n_per
            by_agents = {max(1, size // (rows_b * dim * 8)): size
                         for size in sorted(FLOOR_BLOCK_BYTES, reverse=True)}
            for size in sorted(by_agents.values()):
                def lean(size=size, half=batch is not None, st=fast_state, alg=fast_alg,
                         prob=fast, sigma=None):
                    return lean_round(prob, st.plan, st.x, st.seed, st.round,
                                      alg._alpha(st.round), k_steps, half, size, sigma)
                if not np.array_equal(lean(), expected):
                    raise AssertionError("the lean loop does not reproduce rfed's round")
                fns[f"lean loop, rfed's bits ({_size_label(size)})"] = lean

                for label, sfc64 in (("changed arithmetic", False), ("changed bits", True)):
                    def changed(size=size, half=batch is not None, st=fast_state, alg=fast_alg,
                                prob=fast, sigma=None, sfc64=sfc64):
                        return lean_round_changed(prob, st.plan, st.x, st.seed, st.round,
                                                  alg._alpha(st.round), k_steps, half, size,
                                                  sigma, sfc64)
                    zero = np.zeros(n_agents)
                    gap = np.abs(changed(sigma=zero) - lean(sigma=zero)).max()
                    if not gap <= 1e-12:
                        raise AssertionError(f"without noise the {label} loop is {gap:.1e} "
                                             "from rfed's arithmetic (expected rounding)")
                    fns[f"lean loop, {label} ({_size_label(size)})"] = changed
            fns["part: K keyed noise draws"] = (
                lambda n=n_agents: noise_draws(n, dim, k_steps))
            fns["part: K keyed noise draws, SFC64 per agent"] = (
                lambda n=n_agents: noise_draws(n, dim, k_steps, sfc64=True))
            times = interleaved_medians(fns, args.repeat)
            ref = times["rfed batched"]
            for label, t in times.items():
                print(f"{f'{n_agents} x {n_per}':<18} {batch_label:<10} {label:<56} {t:>9.4f} "
                      f"{t / ref:>12.2f}")
            for label, t in times.items():
                if label.startswith("floor"):
                    print(f"{'':<18} {batch_label:<10} rfed / {label} = {ref / t:.2f}")
            # the floors a random minibatch can reach (the contiguous half is no random subset)
            reachable = [t for label, t in times.items() if label.startswith("floor")
                         and (batch is None or label != "floor: K x (Z x, Z^T w)")]
            best_label, one_read = min(
                ((label, t) for label, t in times.items() if label.startswith("one-read")),
                key=lambda item: item[1])
            print(f"{'':<18} {batch_label:<10} rfed / best one-read floor (with noise) = "
                  f"{ref / one_read:.2f}")
            print(f"{'':<18} {batch_label:<10} best one-read floor: {best_label}")
            rfed_size = [t for label, t in times.items() if label.startswith("one-read")
                         and f", {_size_label(_GATHER_BLOCK_BYTES)})" in label]
            print(f"{'':<18} {batch_label:<10} rfed / best one-read floor in rfed's "
                  f"{_size_label(_GATHER_BLOCK_BYTES)} blocks = {ref / min(rfed_size):.2f}")
            lean_label, lean_time = min(
                ((label, t) for label, t in times.items()
                 if label.startswith("lean loop, rfed's bits")), key=lambda item: item[1])
            print(f"{'':<18} {batch_label:<10} best lean loop (rfed's bits) / best one-read "
                  f"floor = {lean_time / one_read:.2f}; rfed / best lean loop = "
                  f"{ref / lean_time:.2f} ({lean_label})")
            for kind in ("changed arithmetic", "changed bits"):
                changed_label, changed_time = min(
                    ((label, t) for label, t in times.items()
                     if label.startswith(f"lean loop, {kind}")), key=lambda item: item[1])
                print(f"{'':<18} {batch_label:<10} best lean loop ({kind}) / best one-read "
                      f"floor = {changed_time / one_read:.2f} ({changed_label}); times rfed / "
                      f"best lean loop (rfed's bits) = "
                      f"{changed_time / one_read * ref / lean_time:.2f}")
            noise = times["part: K keyed noise draws"]
            print(f"{'':<18} {batch_label:<10} rfed / best floor = {ref / min(reachable):.2f}; "
                  f"(rfed - noise draws) / best floor = {(ref - noise) / min(reachable):.2f}; "
                  f"rfed / (best floor + noise draws) = {ref / (min(reachable) + noise):.2f}")


if __name__ == "__main__":
    main()
