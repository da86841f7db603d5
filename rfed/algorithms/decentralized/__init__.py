"""Decentralized private optimization over graphs, generic over the manifold.

* :class:`DOADP` (spec 000) and its baseline :class:`NoisyDSGD`;
* :class:`DPDL` (spec 001) and its baseline :class:`DPDPSGD`;
* :class:`DPDDA` (spec 002; ``n_active = n`` is the full-participation baseline [19]);
* :class:`DPDGT` (spec 003; Euclidean only) and its baseline :class:`NoisyDDGT`;
* helpers: :func:`sparsify` (DO-ADP's Top-k / rand-k) and :func:`calibration_weights` (DPDL's
  cosine-similarity calibration ``1 / (1 + e^S)``).

Every algorithm stacks the agents' points as ``(n_agents, *point_shape)``, talks through a
:class:`rfed.networks.Network`'s communicator (messages and bytes are counted), records its
privacy in a :class:`rfed.privacy.PrivacyLedger` with the paper's closed form beside it, and
reports the agents' (Karcher) mean as its output and the consensus error in its history.
"""

from rfed.algorithms.decentralized.doadp import DOADP, NoisyDSGD, sparsify
from rfed.algorithms.decentralized.dpdda import DPDDA
from rfed.algorithms.decentralized.dpdgt import DPDGT, NoisyDDGT
from rfed.algorithms.decentralized.dpdl import DPDL, DPDPSGD, calibration_weights

__all__ = [
    "DOADP",
    "DPDDA",
    "DPDGT",
    "DPDL",
    "DPDPSGD",
    "NoisyDDGT",
    "NoisyDSGD",
    "calibration_weights",
    "sparsify",
]
