"""Communication networks for decentralized algorithms: graphs, mixing matrices, gossip.

* :mod:`~rfed.networks.graphs` -- the sparse :class:`Graph` (``adjacency[i, j] = 1`` iff
  ``i`` receives from ``j``) and constructors: :func:`ring`, :func:`circulant` (DO-ADP's k-hop
  ring), :func:`complete` (a :class:`CompleteGraph`, whose arcs are listed only when read),
  :func:`complete_bipartite` / :func:`two_hub_bipartite` /
  :func:`dpdl_bipartite` (DPDL's two readings), :func:`star`, :func:`erdos_renyi`,
  :func:`exponential`, :func:`random_regular`, :func:`graph_from_edges`,
  :func:`digraph_from_edges`, :func:`ieee14_digraph` (DP-DGT); connectivity checks that name
  the cut-off nodes.
* :mod:`~rfed.networks.mixing` -- weights (Metropolis-Hastings, Laplacian, uniform, lazy,
  row-stochastic R and column-stochastic C for push-pull, the CGA two-hub weights), checks that
  name the offending row or column, the spectral constants of the four decentralized papers,
  and DP-DDA's node samplers and random gossip matrices (:class:`RandomGossip`,
  :func:`greedy_matching`).
* :mod:`~rfed.networks.comm` -- the one communication interface (:class:`Communicator`,
  :class:`InProcessCommunicator`) with message and byte accounting.
* :mod:`~rfed.networks.engine` -- the engine in use (in one process unless set otherwise:
  :func:`~rfed.networks.engine.use_engine`), which gives every network its communicator.
* :mod:`~rfed.networks.gossip` -- Riemannian gossip batched over arcs (exactly ``W @ X`` on
  Euclidean space), tangent-space mixing with transport, consensus error.
* :class:`Network` -- graph + weights + communicator.

All matrices are ``scipy.sparse.csr_matrix``; a round costs O(arcs) (a dense frozen matrix of
256 agents or more is multiplied by BLAS or, on a complete graph with equal weights, in
O(n d): ``docs/guide/scale.md``).
"""

from rfed.networks.comm import (
    CommStats,
    Communicator,
    InProcessCommunicator,
    NeighborValues,
    arc_list,
    as_csr_weights,
    dense_payload_bytes,
    freeze_weights,
    reverse_arcs,
    segment_sum,
    sparse_payload_bytes,
)
from rfed.networks.gossip import (
    consensus_direction,
    consensus_error,
    mix_tangent,
    riemannian_gossip,
)
from rfed.networks.graphs import (
    IEEE14_EDGES,
    CompleteGraph,
    Graph,
    circulant,
    complete,
    complete_bipartite,
    digraph_from_edges,
    dpdl_bipartite,
    erdos_renyi,
    exponential,
    graph_from_edges,
    ieee14_digraph,
    random_regular,
    ring,
    star,
    two_hub_bipartite,
)
from rfed.networks.mixing import (
    DOADPConstants,
    DPDLConstants,
    GossipRound,
    PushPullConstants,
    RandomGossip,
    check_column_stochastic,
    check_doubly_stochastic,
    check_nonnegative,
    check_row_stochastic,
    check_support,
    check_symmetric,
    column_stochastic_weights,
    dda_beta,
    doadp_constants,
    dpdl_constants,
    greedy_matching,
    identity_gap_norm,
    lambda2_modulus,
    laplacian_weights,
    lazy_weights,
    left_perron_vector,
    metropolis_hastings_weights,
    push_pull_constants,
    right_perron_vector,
    row_stochastic_weights,
    second_singular_value,
    spectral_gap,
    two_hub_weights,
    uniform_weights,
)
from rfed.networks.network import Network

__all__ = [
    # graphs
    "CompleteGraph",
    "Graph",
    "IEEE14_EDGES",
    "circulant",
    "complete",
    "complete_bipartite",
    "digraph_from_edges",
    "dpdl_bipartite",
    "erdos_renyi",
    "exponential",
    "graph_from_edges",
    "ieee14_digraph",
    "random_regular",
    "ring",
    "star",
    "two_hub_bipartite",
    # mixing
    "DOADPConstants",
    "DPDLConstants",
    "GossipRound",
    "PushPullConstants",
    "RandomGossip",
    "check_column_stochastic",
    "check_doubly_stochastic",
    "check_nonnegative",
    "check_row_stochastic",
    "check_support",
    "check_symmetric",
    "column_stochastic_weights",
    "dda_beta",
    "doadp_constants",
    "dpdl_constants",
    "greedy_matching",
    "identity_gap_norm",
    "lambda2_modulus",
    "laplacian_weights",
    "lazy_weights",
    "left_perron_vector",
    "metropolis_hastings_weights",
    "push_pull_constants",
    "right_perron_vector",
    "row_stochastic_weights",
    "second_singular_value",
    "spectral_gap",
    "two_hub_weights",
    "uniform_weights",
    # communication
    "CommStats",
    "Communicator",
    "InProcessCommunicator",
    "NeighborValues",
    "arc_list",
    "as_csr_weights",
    "freeze_weights",
    "dense_payload_bytes",
    "reverse_arcs",
    "segment_sum",
    "sparse_payload_bytes",
    # gossip
    "consensus_direction",
    "consensus_error",
    "mix_tangent",
    "riemannian_gossip",
    # network
    "Network",
]
