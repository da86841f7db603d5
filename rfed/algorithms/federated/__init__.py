"""Federated private optimization on manifolds: PriRFed with DP-RSGD / DP-RSVRG local training.

Composable pieces: :mod:`~rfed.algorithms.federated.sampling` (agents and minibatches),
:mod:`~rfed.algorithms.federated.local` (batched local trainers),
:mod:`~rfed.algorithms.federated.aggregation` (tangent mean, Karcher mean),
:mod:`~rfed.algorithms.federated.accounting` (certified accounting, budget calibration, and the
paper's Theorem 4.2 beside) and :class:`PriRFed` (Algorithm 1) tying them together.
"""

from rfed.algorithms.federated.accounting import (
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
from rfed.algorithms.federated.local import (
    DPRSGD,
    DPRSVRG,
    SAMPLINGS,
    LocalPlan,
    LocalTrainer,
    paper_sigma,
)
from rfed.algorithms.federated.prirfed import PriRFed, PriRFedState
from rfed.algorithms.federated.sampling import batch_sizes, sample_agents, sample_minibatches

__all__ = [
    "DPRSGD",
    "DPRSVRG",
    "LocalPlan",
    "LocalTrainer",
    "PriRFed",
    "PriRFedState",
    "SAMPLINGS",
    "batch_sizes",
    "calibrate_plan",
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
