"""Private baselines a user would pick instead of the papers' algorithms, at the same budget.

* :class:`AnalyzeGauss` -- federated Analyze Gauss (Dwork, Talwar, Thakurta and Zhang 2014):
  every agent releases its noisy second-moment matrix once; the server sums them and takes the
  top eigenvector.
* :class:`NoisyPowerMethod` -- federated noisy power method (Hardt and Price 2014): every agent
  releases ``A_i x + noise`` each iteration; the server sums and normalizes.
* :class:`LogEuclideanPrivateMean` -- one-shot private Frechet mean of SPD matrices in the
  log-Euclidean chart (Reimherr, Bharath and Soto 2021; Utpala et al. 2022): every agent releases
  the noisy clipped mean of its matrix logarithms; the server averages and maps back.

All three are budget-first: the user gives a :class:`rfed.privacy.PrivacyBudget` and a PUBLIC
bound on the data (enforced by clipping); the noise is calibrated with the certified accountant,
and every release goes through :mod:`rfed.privacy.mechanisms` (so secure mode works). Each agent's
releases read only its own records, so the run is (epsilon, delta)-DP for every agent's dataset
(record level, parallel composition across agents).
"""

from rfed.algorithms.baselines.oneshot import BaselineResult
from rfed.algorithms.baselines.pca import AnalyzeGauss, NoisyPowerMethod
from rfed.algorithms.baselines.spd_mean import LogEuclideanPrivateMean

__all__ = ["AnalyzeGauss", "BaselineResult", "LogEuclideanPrivateMean", "NoisyPowerMethod"]
