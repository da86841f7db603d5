"""Federated private optimization on manifolds: PriRFed with DP-RSGD / DP-RSVRG local training.

Composable pieces: :mod:`~rfed.algorithms.federated.sampling` (agents and minibatches),
:mod:`~rfed.algorithms.federated.local` (batched local trainers),
:mod:`~rfed.algorithms.federated.aggregation` (tangent mean, Karcher mean),
:mod:`~rfed.algorithms.federated.accounting` (certified accounting, budget calibration, and the
paper's Theorem 4.2 beside), :mod:`~rfed.algorithms.federated.streams` (per-agent keyed draws
for a block), :mod:`~rfed.algorithms.federated.client_dp` (client-level DP on the manifold) and
:class:`PriRFed` (Algorithm 1) tying them together; :class:`RepeatedRuns` advances several
independent runs of one PriRFed configuration as one batched computation.

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
"""

from rfed.algorithms.federated.accounting import (
    LocalRunRelease,
    calibrate_multipliers,
    calibrate_plan,
    certified_epsilon,
    planned_events,
    prirfed_privacy_report,
    record_round,
)
from rfed.algorithms.federated.aggregation import (
    data_size_weights,
    karcher_aggregate,
    tangent_mean,
)
from rfed.algorithms.federated.client_dp import (
    ClientLevelDP,
    ClientRelease,
    clip_updates,
    clipped_update_mean,
)
from rfed.algorithms.federated.local import (
    DPRSGD,
    DPRSVRG,
    SAMPLINGS,
    LocalPlan,
    LocalTrainer,
    paper_sigma,
)
from rfed.algorithms.federated.prirfed import PriRFed, PriRFedState
from rfed.algorithms.federated.repeated import RepeatedRuns, RepeatedState
from rfed.algorithms.federated.sampling import batch_sizes, sample_agents, sample_minibatches
from rfed.algorithms.federated.streams import AgentBlockGenerator

__all__ = [
    "AgentBlockGenerator",
    "ClientLevelDP",
    "ClientRelease",
    "DPRSGD",
    "DPRSVRG",
    "LocalPlan",
    "LocalRunRelease",
    "LocalTrainer",
    "PriRFed",
    "PriRFedState",
    "RepeatedRuns",
    "RepeatedState",
    "SAMPLINGS",
    "batch_sizes",
    "calibrate_plan",
    "calibrate_multipliers",
    "clip_updates",
    "clipped_update_mean",
    "certified_epsilon",
    "planned_events",
    "data_size_weights",
    "karcher_aggregate",
    "paper_sigma",
    "prirfed_privacy_report",
    "sample_agents",
    "record_round",
    "sample_minibatches",
    "tangent_mean",
]
