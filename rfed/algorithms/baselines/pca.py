"""Private PCA baselines: federated Analyze Gauss and the federated noisy power method.

Both estimate the leading eigenvector of the pooled second-moment matrix
:math:`C = \\sum_{\\text{all}} z z^T / \\sum_i N_i` of a :class:`rfed.problems.SpherePCA` problem,
the quantity PriRFed's PCA experiments estimate, so the utilities compare directly
(``problem.cost(x) = -x^T C x``).

Sensitivities (record level; every record's norm is clipped to the PUBLIC bound ``B``):

* Analyze Gauss releases :math:`A_i = \\sum_j z_j z_j^T` in orthonormal coordinates of the
  symmetric matrices (diagonal, and off-diagonal entries times :math:`\\sqrt 2`), where the L2
  norm is the Frobenius norm. Replacing ``z`` by ``z'`` moves it by
  :math:`\\|z z^T - z' z'^T\\|_F = (\\|z\\|^4 + \\|z'\\|^4 - 2 (z^T z')^2)^{1/2} \\le \\sqrt 2 B^2`;
  adding or removing one record by :math:`\\|z\\|^2 \\le B^2`.
* The noisy power method releases :math:`A_i x_t` for a public unit vector :math:`x_t` each
  iteration: the difference :math:`(z z^T - z' z'^T) x_t` has norm at most the operator norm of
  :math:`z z^T - z' z'^T`, whose eigenvalues are
  :math:`\\pm((\\|z\\|^2 + \\|z'\\|^2)^2 / 4 - (z^T z')^2)^{1/2} + (\\|z\\|^2 - \\|z'\\|^2) / 2`,
  at most :math:`B^2` in magnitude; the same :math:`B^2` under add/remove.

References
----------
* Cynthia Dwork, Kunal Talwar, Abhradeep Thakurta and Li Zhang. Analyze Gauss: Optimal Bounds
  for Privacy-Preserving Principal Component Analysis. Proceedings of the 46th ACM Symposium on
  Theory of Computing (STOC), 2014.
* Moritz Hardt and Eric Price. The Noisy Power Method: A Meta Algorithm with Applications.
  Advances in Neural Information Processing Systems 27 (NeurIPS), 2014. arXiv:1311.2495.
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any

import numpy as np
import scipy.linalg

from rfed.algorithms.baselines.oneshot import (
    BaselineResult,
    calibrate_releases,
    clip_scales,
    finish,
    is_secure,
)
from rfed.manifolds.base import as_generator
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.mechanisms import gaussian_release, release_sensitivity

__all__ = ["AnalyzeGauss", "NoisyPowerMethod", "sym_to_vec", "vec_to_sym"]


def sym_to_vec(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Orthonormal coordinates of symmetric matrices, shape ``(..., n, n) -> (..., n(n+1)/2)``.

    Diagonal entries, then the upper off-diagonal entries times :math:`\\sqrt 2`, so the vector's
    L2 norm is the matrix's Frobenius norm.

    Parameters
    ----------
    a : ndarray, shape ``(..., n, n)``
        Symmetric.
    out : float array, shape ``(..., n (n + 1) / 2)``, optional
        Where the coordinates are written (default a fresh array).

    Returns
    -------
    ndarray, shape ``(..., n (n + 1) / 2)``
    """
    n = a.shape[-1]
    diag, upper = _sym_indices(n)
    # flat positions taken from the (..., n * n) rows: one gather each instead of the paired
    # fancy index (the same entries, the same products by sqrt 2)
    flat = a.reshape(a.shape[:-2] + (n * n,))
    if out is None:
        out = np.empty(a.shape[:-2] + (n * (n + 1) // 2,), dtype=np.result_type(a, 1.0))
    np.take(flat, diag, axis=-1, out=out[..., :n])
    np.multiply(math.sqrt(2.0), np.take(flat, upper, axis=-1), out=out[..., n:])
    return out


@functools.lru_cache(maxsize=8)
def _sym_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices into ``(n, n)`` of the diagonal and of the upper off-diagonal entries (row
    by row, :func:`numpy.triu_indices` order)."""
    iu = np.triu_indices(n, 1)
    return np.arange(n) * (n + 1), iu[0] * n + iu[1]


def vec_to_sym(v: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`sym_to_vec`.

    Parameters
    ----------
    v : ndarray, shape ``(..., n (n + 1) / 2)``
    n : int

    Returns
    -------
    ndarray, shape ``(..., n, n)``
    """
    out = np.zeros(v.shape[:-1] + (n, n))
    idx = np.arange(n)
    out[..., idx, idx] = v[..., :n]
    iu = np.triu_indices(n, 1)
    off = v[..., n:] / math.sqrt(2.0)
    out[..., iu[0], iu[1]] = off
    out[..., iu[1], iu[0]] = off
    return out


def _check_budget(budget: Any) -> PrivacyBudget:
    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {budget!r}")
    return budget


def _check_bound(norm_bound: Any) -> float:
    b = float(norm_bound)
    if not (b > 0 and math.isfinite(b)):
        raise ValueError(
            f"argument 'norm_bound' must be a finite public bound > 0 on the records' norms, "
            f"got {norm_bound!r}"
        )
    return b


#: Per problem, what the baselines computed from its records and may reuse: the clipped
#: records and the agents' second-moment coordinates, per norm bound. Keyed weakly (dropped with
#: the problem) and tied to the records' array (a problem given new records recomputes them);
#: like the problem's own reference cache, it assumes the records are not modified in place.
_RECORDS_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _records_cache(problem: Any, records: np.ndarray) -> dict:
    """The cache entry of ``problem``, fresh when its records' array changed."""
    entry = _RECORDS_CACHE.get(problem)
    if entry is None or entry["records"] is not records:
        entry = {"records": records}
        _RECORDS_CACHE[problem] = entry
    return entry


class _ClippedRecords:
    """The records of a SpherePCA-like problem, padding zeroed and rows clipped to a norm
    bound by :func:`clip_rows`, served one agent at a time.

    Only the rows that clipping or padding changes are stored (a few per agent: unit-normalised
    images of norm 1 + 2^-52); an agent's block is its records with those rows replaced, the
    values of ``clip_rows(np.where(mask, records, 0), bound)`` (``1.0 * z == z`` exactly). No
    clipped copy of the records is kept (hundreds of MiB on Fashion-MNIST).
    """

    def __init__(self, records: np.ndarray, mask: np.ndarray, bound: float):
        self.records = records
        self.shape = records.shape
        #: per agent, the rows replaced and their values (None: the agent's records as they are)
        self.patches: list[tuple[np.ndarray, np.ndarray] | None] = []
        self.n_clipped = 0
        for agent in range(records.shape[0]):
            # an agent without padding: its records as they are (np.where would copy them whole)
            rows = (records[agent] if mask[agent].all() else
                    np.where(mask[agent][:, None], records[agent], 0.0))
            scale, clipped = clip_scales(rows, bound)
            changed = np.flatnonzero((scale[:, 0] != 1.0) | ~mask[agent])
            self.patches.append(None if changed.size == 0 else
                                (changed, rows[changed] * scale[changed]))
            self.n_clipped += clipped
        self._block = np.empty(records.shape[1:], dtype=np.result_type(records, 1.0))

    def agent(self, agent: int) -> np.ndarray:
        """Agent ``agent``'s clipped records, shape ``(n_max, d + 1)``: a view of the records,
        or a buffer overwritten by the next call (read it before)."""
        patch = self.patches[agent]
        if patch is None:
            return self.records[agent]
        np.copyto(self._block, self.records[agent])
        self._block[patch[0]] = patch[1]
        return self._block

    def stacked(self) -> np.ndarray:
        """Every agent's clipped records, shape ``(n_agents, n_max, d + 1)`` (a fresh array)."""
        out = np.empty(self.shape, dtype=self._block.dtype)
        for agent in range(self.shape[0]):
            out[agent] = self.agent(agent)
        return out


def _clipped_pca_data(problem: Any, budget: PrivacyBudget, bound: float
                      ) -> tuple[_ClippedRecords, np.ndarray]:
    """The records (padding zeroed) clipped by :func:`clip_rows`, per agent, and the dataset
    sizes the baseline may use: the true ones under replace-one, the budget's declared public
    sizes under add/remove. One agent at a time: the same values as the calls on the stacked
    records, without their stacked temporaries (the masked copy, the squares of the norms, the
    scaled copy: each hundreds of MiB on Fashion-MNIST, faulted in by the kernel). Computed
    once per problem and bound (a tuning sweep runs the baselines on the same problem at every
    budget and repetition).

    Returns
    -------
    z : _ClippedRecords
        Agent ``i``'s records, padding zeroed and rows clipped to norm ``bound``, are
        ``z.agent(i)``, shape ``(n_max, d + 1)``; ``z.n_clipped`` rows were clipped.
    counts : int array, shape ``(n_agents,)``
    """
    data = getattr(problem, "data", None)
    if not isinstance(data, dict) or "z" not in data:
        raise TypeError(
            f"argument 'problem' must be a SpherePCA-like problem with data['z'], got {problem!r}"
        )
    entry = _records_cache(problem, data["z"])
    if ("clipped", bound) not in entry:
        entry["clipped", bound] = _ClippedRecords(data["z"], problem.mask, bound)
    return entry["clipped", bound], budget.public_counts(np.asarray(problem.counts))


def _agent_moments(problem: Any, z: _ClippedRecords, bound: float) -> np.ndarray:
    """``sym_to_vec(z_i^T z_i)`` of every agent's clipped records ``z_i``, shape
    ``(n_agents, d (d + 1) / 2)``: computed once per problem and bound (read-only).

    One agent at a time, its ``(d, d)`` product by BLAS (einsum would not use BLAS here: 8x
    slower at d = 784). Stacked, the agents' matrices are hundreds of MiB.
    """
    entry = _records_cache(problem, problem.data["z"])
    if ("moments", bound) not in entry:
        n_agents, _, dim = z.shape
        moments = np.empty((n_agents, dim * (dim + 1) // 2))
        for agent in range(n_agents):
            zi = z.agent(agent)
            sym_to_vec(zi.T @ zi, out=moments[agent])
        moments.flags.writeable = False
        entry["moments", bound] = moments
    return entry["moments", bound]


def _sizes_assumption(budget: PrivacyBudget, use: str) -> str:
    """The report's line on the local dataset sizes under the budget's relation."""
    if budget.neighboring == "replace_one":
        return f"agents' dataset sizes are public under replace-one ({use})"
    return ("agents' dataset sizes are private under add/remove: the declared public sizes "
            f"stand in for them ({use})")


def _top_eigenvector(a: np.ndarray) -> np.ndarray:
    """Unit eigenvector of the largest eigenvalue of the symmetric ``a``, sign fixed.

    Only that eigenpair is computed (LAPACK's subset driver: about 4x faster than the full
    decomposition at d = 784).
    """
    n = a.shape[-1]
    _, vecs = scipy.linalg.eigh(a, subset_by_index=[n - 1, n - 1])
    v = vecs[:, 0]
    return v * np.sign(v[np.argmax(np.abs(v))])


class AnalyzeGauss:
    """Federated Analyze Gauss: one noisy second-moment matrix per agent, summed by the server.

    Parameters
    ----------
    budget : PrivacyBudget
        The whole run's budget (one release per agent).
    norm_bound : float
        PUBLIC bound ``B`` on the records' norms; records are clipped to it (enforced).
    """

    name = "Analyze Gauss"

    def __init__(self, budget: PrivacyBudget, norm_bound: float = 1.0):
        self.budget = _check_budget(budget)
        self.norm_bound = _check_bound(norm_bound)

    def sensitivity(self) -> float:
        """The L2 sensitivity of one agent's release of ``A_i`` under the budget's relation.

        Returns
        -------
        float
        """
        factor = math.sqrt(2.0) if self.budget.neighboring == "replace_one" else 1.0
        return factor * self.norm_bound**2

    def run(self, problem: Any, rng: Any) -> BaselineResult:
        """Release every agent's noisy ``A_i`` and return the top eigenvector of their sum.

        Parameters
        ----------
        problem : SpherePCA-like
            Its ``data['z']`` ``(n_agents, n_max, d)``, the records, and its (public) counts.
        rng : numpy.random.Generator, int or SecureRandom

        Returns
        -------
        BaselineResult
            ``x`` (the estimate, shape ``(d,)``), its ``cost``, the privacy report and diagnostics.
        """
        z, counts = _clipped_pca_data(problem, self.budget, self.norm_bound)
        dim = z.shape[-1]
        cal, _ = calibrate_releases(self.budget, 1, int(counts.min()), is_secure(rng))
        # after the arguments' checks (a bad delta is named before a missing seed)
        rng = rng if is_secure(rng) else as_generator(rng)
        n_coords = dim * (dim + 1) // 2
        sens = release_sensitivity(self.sensitivity(), n_coords, rng)
        sigma = cal.noise_multiplier * sens
        # one agent at a time: its release, added to the sum in agent order (the order of a
        # sum over the stacked releases)
        total_vec: np.ndarray | None = None
        for moments in _agent_moments(problem, z, self.norm_bound):
            released = gaussian_release(moments, sigma, rng)
            if total_vec is None:
                total_vec = np.array(released, dtype=float)
            else:
                total_vec += released
        assert total_vec is not None  # a problem has at least one agent
        total = vec_to_sym(total_vec, dim) / counts.sum()
        x = _top_eigenvector(total)
        assumptions = [
            f"record norms clipped to the public bound {self.norm_bound:g} (enforced)",
            _sizes_assumption(self.budget, "the server divides by their sum (post-processing)"),
        ]
        return finish(problem, x, cal, self.budget, assumptions, rng,
                      sigma=float(sigma), n_clipped=z.n_clipped, releases_per_agent=1)


class NoisyPowerMethod:
    """Federated noisy power method (Hardt and Price 2014) for the leading eigenvector.

    Each iteration the server broadcasts the unit vector :math:`x_t`; agent ``i`` releases
    :math:`A_i x_t + g_i`, :math:`g_i \\sim N(0, \\sigma^2 I)`; the server sets
    :math:`x_{t+1} = \\sum_i (A_i x_t + g_i) / \\|\\cdot\\|`.

    Parameters
    ----------
    budget : PrivacyBudget
        The whole run's budget (``n_iters`` releases per agent).
    n_iters : int
        Iterations ``T``.
    norm_bound : float
        PUBLIC bound on the records' norms; records are clipped to it (enforced).
    """

    name = "Noisy power method"

    def __init__(self, budget: PrivacyBudget, n_iters: int = 10, norm_bound: float = 1.0):
        self.budget = _check_budget(budget)
        if isinstance(n_iters, bool) or not isinstance(n_iters, (int, np.integer)) or n_iters < 1:
            raise ValueError(f"argument 'n_iters' must be an int >= 1, got {n_iters!r}")
        self.n_iters = int(n_iters)
        self.norm_bound = _check_bound(norm_bound)

    def sensitivity(self) -> float:
        """The L2 sensitivity of one agent's release of ``A_i x``.

        Returns
        -------
        float
        """
        return self.norm_bound**2

    def run(self, problem: Any, rng: Any, x0: np.ndarray | None = None) -> BaselineResult:
        """Run ``n_iters`` noisy power iterations from ``x0`` (default: a random unit vector).

        Parameters
        ----------
        problem : SpherePCA-like
            Its ``data['z']`` ``(n_agents, n_max, d)``, the records, and its (public) counts.
        rng : numpy.random.Generator, int or SecureRandom
        x0 : ndarray, shape ``(d,)``, optional

        Returns
        -------
        BaselineResult
            ``x`` (the estimate, shape ``(d,)``), its ``cost``, the privacy report and diagnostics.
        """
        z, counts = _clipped_pca_data(problem, self.budget, self.norm_bound)
        dim = z.shape[-1]
        cal, _ = calibrate_releases(self.budget, self.n_iters, int(counts.min()),
                                    is_secure(rng))
        # after the arguments' checks (a bad delta is named before a missing seed)
        rng = rng if is_secure(rng) else as_generator(rng)
        sigma = cal.noise_multiplier * release_sensitivity(self.sensitivity(), dim, rng)
        if x0 is None:
            # a data-independent random start (almost surely not orthogonal to the answer)
            x0 = rng.random(dim) - 0.5
        x = np.asarray(x0, dtype=float) / np.linalg.norm(x0)
        local = np.empty((z.shape[0], dim))
        for _ in range(self.n_iters):
            # A_i x = z_i^T (z_i x), one agent at a time (the values of the contractions over
            # the stacked records, "anj,j->an" then "anj,an->aj")
            for agent in range(z.shape[0]):
                zi = z.agent(agent)
                np.einsum("nj,n->j", zi, np.einsum("nj,j->n", zi, x), out=local[agent])
            y = gaussian_release(local, sigma, rng).sum(axis=0)
            x = y / np.linalg.norm(y)
        x = x * np.sign(x[np.argmax(np.abs(x))])
        assumptions = [
            f"record norms clipped to the public bound {self.norm_bound:g} (enforced)",
            "the starting vector is data-independent",
            _sizes_assumption(self.budget, "only the default delta uses them"),
        ]
        return finish(problem, x, cal, self.budget, assumptions, rng,
                      sigma=float(sigma), n_clipped=z.n_clipped,
                      releases_per_agent=self.n_iters)
