"""One-shot private Frechet mean of SPD matrices in the log-Euclidean chart.

Every agent maps its matrices to the tangent space at the identity with the matrix logarithm,
clips each logarithm to Frobenius norm ``C`` (a PUBLIC bound), and releases the mean of the clipped
logarithms plus symmetric Gaussian noise (in the orthonormal coordinates of the symmetric
matrices, where the L2 norm is the Frobenius norm). The server averages the releases weighted by
the public dataset sizes and maps back with the matrix exponential (Reimherr, Bharath and Soto
2021; Utpala et al. 2022 use this chart for private Frechet means).

Sensitivity of agent ``i``'s release (record level): replacing one record moves the mean of
``N_i`` clipped logarithms by at most ``2 C / N_i``. Under add/remove the true ``N_i`` is
private: the sum is divided by the declared public size ``N_i^pub`` (the budget's
``public_sizes``), which also weights the average, and adding or removing one record moves the
release by at most ``C / N_i^pub``.

The estimate is the log-Euclidean mean, not the affine-invariant Frechet mean that PriRFed's SPD
problem minimizes; the two coincide for commuting matrices and are close for concentrated data,
and the utility is measured with the problem's own (affine-invariant) cost.

References
----------
* Matthew Reimherr, Karthik Bharath and Carlos Soto. Differential Privacy over Riemannian
  Manifolds. Advances in Neural Information Processing Systems 34 (NeurIPS), 2021.
  arXiv:2111.02516.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rfed.algorithms.baselines.oneshot import (
    BaselineResult,
    calibrate_releases,
    finish,
    is_secure,
)
from rfed.algorithms.baselines.pca import sym_to_vec, vec_to_sym
from rfed.manifolds.base import as_generator
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.mechanisms import gaussian_release, release_sensitivity

__all__ = ["LogEuclideanPrivateMean", "spd_log", "spd_exp"]


def spd_log(p: np.ndarray) -> np.ndarray:
    """Matrix logarithm of SPD matrices, batched, by one symmetric eigendecomposition each.

    Parameters
    ----------
    p : ndarray, shape ``(..., n, n)``
        Symmetric positive definite.

    Returns
    -------
    ndarray, shape ``(..., n, n)``
    """
    w, v = np.linalg.eigh(p)
    if np.any(w <= 0):
        raise ValueError("argument 'p' must hold symmetric positive definite matrices")
    return np.einsum("...ij,...j,...kj->...ik", v, np.log(w), v)


def spd_exp(s: np.ndarray) -> np.ndarray:
    """Matrix exponential of symmetric matrices, batched.

    Parameters
    ----------
    s : ndarray, shape ``(..., n, n)``
        Symmetric.

    Returns
    -------
    ndarray, shape ``(..., n, n)``
    """
    w, v = np.linalg.eigh(s)
    return np.einsum("...ij,...j,...kj->...ik", v, np.exp(w), v)


class LogEuclideanPrivateMean:
    """Private SPD mean in the log-Euclidean chart, one release per agent.

    Parameters
    ----------
    budget : PrivacyBudget
    log_norm_bound : float
        PUBLIC bound ``C`` on the Frobenius norm of the records' matrix logarithms; each is
        clipped to it (enforced).
    """

    name = "Log-Euclidean private mean"

    def __init__(self, budget: PrivacyBudget, log_norm_bound: float):
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {budget!r}")
        c = float(log_norm_bound)
        if not (c > 0 and math.isfinite(c)):
            raise ValueError(
                "argument 'log_norm_bound' must be a finite public bound > 0, got "
                f"{log_norm_bound!r}"
            )
        self.budget = budget
        self.log_norm_bound = c

    def run(self, problem: Any, rng: Any) -> BaselineResult:
        """Release every agent's noisy clipped log-mean; return the exponential of their average.

        Parameters
        ----------
        problem : SPDFrechetMean-like
            Its ``data['a']`` ``(n_agents, n_max, n, n)``, the SPD records, and its counts.
        rng : numpy.random.Generator, int or SecureRandom

        Returns
        -------
        BaselineResult
            ``x`` (the estimate, shape ``(n, n)``), its ``cost``, the privacy report and
            diagnostics.
        """
        data = getattr(problem, "data", None)
        if not isinstance(data, dict) or "a" not in data:
            raise TypeError(
                "argument 'problem' must be an SPDFrechetMean-like problem with data['a'], got "
                f"{problem!r}"
            )
        mask = problem.mask
        # the true sizes under replace-one, the declared public ones under add/remove: the
        # normaliser, the noise and the weights never use a private count
        counts = self.budget.public_counts(np.asarray(problem.counts))
        n = data["a"].shape[-1]
        eye = np.broadcast_to(np.eye(n), data["a"].shape)
        logs = sym_to_vec(spd_log(np.where(mask[..., None, None], data["a"], eye)))
        norms = np.linalg.norm(logs, axis=-1, keepdims=True)
        over = (norms > self.log_norm_bound) & mask[..., None]
        logs = np.where(over, logs * (self.log_norm_bound / np.where(over, norms, 1.0)), logs)
        local_mean = np.sum(np.where(mask[..., None], logs, 0.0), axis=1) / counts[:, None]
        cal, _ = calibrate_releases(self.budget, 1, int(counts.min()), is_secure(rng))
        # after the arguments' checks (a bad delta is named before a missing seed)
        rng = rng if is_secure(rng) else as_generator(rng)
        factor = 2.0 if self.budget.neighboring == "replace_one" else 1.0
        sens = release_sensitivity(factor * self.log_norm_bound / counts, logs.shape[-1], rng)
        sigma = cal.noise_multiplier * np.asarray(sens)[:, None]
        released = gaussian_release(local_mean, sigma, rng)
        weights = counts / counts.sum()
        x = spd_exp(vec_to_sym(weights @ released, n))
        n_clipped = int(np.sum(over))
        assumptions = [
            f"matrix logarithms clipped to Frobenius norm {self.log_norm_bound:g} (public bound, "
            "enforced)",
            ("agents' dataset sizes are public under replace-one (normalisers and weights)"
             if self.budget.neighboring == "replace_one" else
             "agents' dataset sizes are private under add/remove: the declared public sizes are "
             "the normalisers and weights"),
        ]
        return finish(problem, x, cal, self.budget, assumptions, rng,
                      sigma_max=float(np.max(sigma)), n_clipped=n_clipped,
                      releases_per_agent=1)
