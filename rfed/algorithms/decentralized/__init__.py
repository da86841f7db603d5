"""Decentralized private optimization over graphs, generic over the manifold.

* :class:`DOADP` (reading: ``docs/papers/doadp.md``) and its baseline :class:`NoisyDSGD`;
* :class:`DPDL` (reading: ``docs/papers/dpdl.md``) and its baseline :class:`DPDPSGD`;
* :class:`DPDDA` (reading: ``docs/papers/dpdda.md``; ``n_active = n`` is the
  full-participation baseline [19]);
* :class:`DPDGT` (reading: ``docs/papers/dpdgt.md``; Euclidean only) and its baseline
  :class:`NoisyDDGT`;
* the baselines the papers compare with: :class:`Muffliato` (Cyffers et al., NeurIPS 2022),
  :class:`DPDO` (Huang, Mitra, Vaidya, ICDCN 2015) and :class:`DPCGA` (Esfandiari et al.,
  ICML 2021, with rfed's calibration of its DP variant); see ``docs/guide/baselines.md``;
* helpers: :func:`sparsify` (DO-ADP's Top-k / rand-k) and :func:`calibration_weights` (DPDL's
  cosine-similarity calibration ``1 / (1 + e^S)``).

Every algorithm stacks the agents' points as ``(n_agents, *point_shape)``, talks through a
:class:`rfed.networks.Network`'s communicator (messages and bytes are counted), and reports the
agents' (Karcher) mean as its output and the consensus error in its history.

Privacy is budget-first: ``budget=PrivacyBudget(epsilon, delta)`` with the planned ``n_rounds``
calibrates the noise of the whole run so that it certifies ``(epsilon, delta)``; ``result.privacy``
(``alg.privacy(state)``) is the report dict every private rfed algorithm gives
(``epsilon_certified``, ``delta``, ``accountant``, ``neighboring``, ``level``, ``assumptions``,
``target_epsilon``, ``noise_multiplier``, ``epsilon_paper``, ``paper``, ``secure``,
``replayable_from_seed``, ``label``). The papers' calibrations (``sigma=``/``theta_xi=``,
``paper_epsilon=``) are reported as the paper's formula, not a guarantee, with the certified
epsilon beside them. See :mod:`rfed.algorithms.decentralized._privacy`.

References
----------
* Wei Huo, Changxin Liu, Kemi Ding, Karl Henrik Johansson and Ling Shi. Decentralized
  Optimization with Amplified Privacy via Efficient Communication. arXiv preprint
  arXiv:2506.07102, 2025.
* Yunsheng Yuan, Xue Xiao, Lina Wang and Feng Li. DPDL: Towards Differential Privacy
  Preservation in Decentralized Stochastic Learning on Non-IID Data. arXiv preprint
  arXiv:2606.04399, 2026.
* Changxin Liu, Karl H. Johansson and Yang Shi. Distributed Empirical Risk Minimization With
  Differential Privacy. Automatica 162, 111514, 2024. arXiv:2302.10520.
* Wei Huo, Xiaomeng Chen, Lingying Huang, Karl Henrik Johansson and Ling Shi. Differentially
  Private Dual Gradient Tracking for Distributed Resource Allocation. Automatica 182, 112521,
  2025. arXiv:2403.18275.
"""

from rfed.algorithms.decentralized.base import (
    DecentralizedAlgorithm,
    PrivateAlgorithm,
    PrivateGradient,
    PrivateState,
    merged_report,
)
from rfed.algorithms.decentralized.doadp import DOADP, NoisyDSGD, sparsify
from rfed.algorithms.decentralized.dpcga import DPCGA
from rfed.algorithms.decentralized.dpdda import DPDDA
from rfed.algorithms.decentralized.dpdgt import DPDGT, NoisyDDGT
from rfed.algorithms.decentralized.dpdl import DPDL, DPDPSGD, calibration_weights
from rfed.algorithms.decentralized.dpdo import DPDO
from rfed.algorithms.decentralized.muffliato import Muffliato

__all__ = [
    "DecentralizedAlgorithm",
    "PrivateAlgorithm",
    "PrivateGradient",
    "PrivateState",
    "merged_report",
    "DOADP",
    "DPCGA",
    "DPDDA",
    "DPDGT",
    "DPDL",
    "DPDO",
    "DPDPSGD",
    "Muffliato",
    "NoisyDDGT",
    "NoisyDSGD",
    "calibration_weights",
    "sparsify",
]
