"""WordNet mammals: the hierarchy, Laplacian-eigenmap features and a Lorentz embedding.

The data (shipped in ``rfed/datasets/data/wordnet_mammals/`` with Princeton's WordNet 3.0 license,
``WORDNET_LICENSE``, which must travel with it) are the transitive closure of the mammal.n.01
subtree of WordNet 3.0 (hypernyms and instance hypernyms): 1,182 synsets, 6,542 closure edges
(child, ancestor) and 1,182 direct hypernym edges (child, parent). The PriRFed paper (Sec. 6.3)
reports "about 1180 nodes and 6540 edges".

PriRFed's hyperbolic structured prediction uses pairs ``(w_i, y_i)`` in R^3 x H^2: ``w_i`` from a
Laplacian eigenmap (Belkin and Niyogi 2003) "to dimension r = 3 of the adjacency matrix formed by
the edges" (:func:`laplacian_eigenmap`), ``y_i`` a pretrained 2-d hyperbolic embedding. The paper's
pretrained embedding (facebookresearch/poincare-embeddings) is not available offline, so
:func:`train_lorentz_embedding` trains one with rfed itself (Riemannian SGD on
:class:`rfed.manifolds.Hyperboloid`, after Nickel and Kiela 2018), and
:func:`load_wordnet_embedding` reads the copy shipped in the package (made by
``python -m rfed.datasets.train_wordnet_embedding``). The test word is "primate"
(:data:`TEST_WORD`, the synset ``primate.n.02``).

References
----------
* Maximilian Nickel and Douwe Kiela. Poincare Embeddings for Learning Hierarchical
  Representations. Advances in Neural Information Processing Systems 30 (NeurIPS), 2017.
  arXiv:1705.08039.
* Maximilian Nickel and Douwe Kiela. Learning Continuous Hierarchies in the Lorentz Model of
  Hyperbolic Geometry. Proceedings of the 35th International Conference on Machine Learning
  (ICML), 2018. arXiv:1806.03417.
* Mikhail Belkin and Partha Niyogi. Laplacian Eigenmaps for Dimensionality Reduction and Data
  Representation. Neural Computation 15(6), 2003.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh

from rfed.datasets._validation import check_choice, check_float, check_int
from rfed.manifolds import Hyperboloid, as_generator

__all__ = [
    "DATA_DIR",
    "EMBEDDING_FILE",
    "TEST_WORD",
    "WordNetMammals",
    "laplacian_eigenmap",
    "load_wordnet_embedding",
    "load_wordnet_mammals",
    "reconstruction_metrics",
    "train_lorentz_embedding",
    "wordnet_prediction_data",
]

#: Folder of the shipped WordNet files (closure, hypernyms, license, cached embedding).
DATA_DIR = Path(__file__).resolve().parent / "data" / "wordnet_mammals"
#: The cached Lorentz embedding written by ``python -m rfed.datasets.train_wordnet_embedding``.
EMBEDDING_FILE = DATA_DIR / "mammal_lorentz_h2.npz"
#: PriRFed's test word "primate" (WordNet 3.0 synset primate.n.02, the mammal order).
TEST_WORD = "primate.n.02"


def _read_pairs(path: Path) -> np.ndarray:
    rows = [
        line.rstrip("\n").split("\t")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    pairs = np.array(rows, dtype=object)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"{str(path)!r} is not a two-column tab-separated file")
    return pairs


@dataclass(frozen=True)
class WordNetMammals:
    """The mammal hierarchy as index arrays.

    Attributes
    ----------
    names : tuple of str, length ``n_nodes`` (1182)
        Synset names, sorted; index ``i`` is node ``i``.
    closure : ndarray of int64, shape ``(6542, 2)``
        Transitive-closure edges ``(child, ancestor)``.
    hypernyms : ndarray of int64, shape ``(1182, 2)``
        Direct hypernym edges ``(child, parent)``.
    """

    names: tuple[str, ...]
    closure: np.ndarray
    hypernyms: np.ndarray

    @property
    def n_nodes(self) -> int:
        """Number of synsets."""
        return len(self.names)

    def index(self, name: str) -> int:
        """Index of a synset name (``"primate.n.02"``); ``ValueError`` if absent.

        Parameters
        ----------
        name : str
            A synset name.

        Returns
        -------
        int
        """
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"argument 'name': {name!r} is not a mammal synset") from None

    @property
    def root(self) -> int:
        """Index of mammal.n.01, the only node without a parent."""
        return self.index("mammal.n.01")

    def depth(self) -> np.ndarray:
        """Number of closure ancestors of every node (0 for the root), shape ``(n_nodes,)``.

        Returns
        -------
        int array, shape ``(n_nodes,)``
        """
        return np.bincount(self.closure[:, 0], minlength=self.n_nodes)


def load_wordnet_mammals() -> WordNetMammals:
    """Read the shipped mammal closure and hypernym files.

    Returns
    -------
    WordNetMammals
        The 1,182 synsets with their closure and hypernym edges.
    """
    closure = _read_pairs(DATA_DIR / "mammal_closure.tsv")
    hyper = _read_pairs(DATA_DIR / "mammal_hypernyms.tsv")
    names = tuple(sorted(set(closure.ravel()) | set(hyper.ravel())))
    lookup = {n: i for i, n in enumerate(names)}
    to_idx = np.vectorize(lookup.__getitem__, otypes=[np.int64])
    c, h = to_idx(closure), to_idx(hyper)
    c.setflags(write=False)
    h.setflags(write=False)
    return WordNetMammals(names=names, closure=c, hypernyms=h)


def laplacian_eigenmap(
    n_nodes: int, edges: np.ndarray, r: int = 3, *, scale: str = "bn03"
) -> np.ndarray:
    """Laplacian eigenmap (Belkin and Niyogi 2003) of an undirected graph with 0/1 weights.

    Solves ``L v = lambda D v`` (``A`` the symmetrised adjacency of ``edges``, ``D`` its degree
    matrix, ``L = D - A``) and returns the eigenvectors of the ``r`` smallest non-trivial
    eigenvalues (the constant one, eigenvalue 0, is dropped), normalised by ``v^T D v = 1``.
    Each column's sign is fixed so that its entry of largest magnitude is positive (eigenvectors
    are defined up to sign; this makes the result deterministic).

    Parameters
    ----------
    n_nodes : int
    edges : int array, shape ``(n_edges, 2)``
        Undirected edges (direction and duplicates ignored).
    r : int
        Embedding dimension (PriRFed: 3).
    scale : {"bn03", "std", "max"}
        Column scale. ``"bn03"``: Belkin and Niyogi's ``v^T D v = 1`` (entries of order
        ``1/sqrt(sum of degrees)``, about 0.01 here); ``"std"``: unit standard deviation per
        column; ``"max"``: largest absolute entry 1 per column. The paper does not state the
        scale, yet it fixes what its RBF kernel width ``vbar = 0.3`` means.

    Returns
    -------
    ndarray, shape ``(n_nodes, r)``
    """
    n_nodes = check_int(n_nodes, "n_nodes", minimum=2)
    r = check_int(r, "r")
    check_choice(scale, "scale", ("bn03", "std", "max"))
    if r >= n_nodes - 1:
        raise ValueError(f"argument 'r' ({r}) must be smaller than 'n_nodes' - 1 ({n_nodes - 1})")
    edges = np.asarray(edges)
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"argument 'edges' must be an (n_edges, 2) int array, got {edges.shape}")
    if edges.size and (edges.min() < 0 or edges.max() >= n_nodes):
        raise ValueError(f"argument 'edges' has node indices outside [0, {n_nodes})")
    adj = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), (n_nodes, n_nodes))
    adj = (adj + adj.T).tocsr()
    adj.data[:] = 1.0  # 0/1 weights whatever the direction or multiplicity of an edge
    adj.setdiag(0.0)
    adj.eliminate_zeros()
    deg = np.asarray(adj.sum(axis=1)).ravel()
    if np.any(deg == 0):
        raise ValueError(
            f"argument 'edges' leaves node {int(np.argmin(deg))} isolated; the eigenmap needs every"
            " node to have an edge"
        )
    n_comp = connected_components(adj, directed=False)[0]
    if n_comp > 1:
        raise ValueError(f"argument 'edges': the graph is not connected ({n_comp} components)")
    # L v = lam D v  <=>  u = D^(1/2) v is an eigenvector of D^(-1/2) A D^(-1/2) with 1 - lam;
    # the r + 1 largest of the latter, by Lanczos, from a fixed start vector (deterministic)
    isq = 1.0 / np.sqrt(deg)
    norm_adj = sp.diags(isq) @ adj @ sp.diags(isq)
    start = np.linspace(1.0, 2.0, n_nodes)
    mu, u = eigsh(norm_adj, k=r + 1, which="LA", v0=start, tol=0.0)
    order = np.argsort(-mu)
    vecs = isq[:, None] * u[:, order[1:]]
    big = np.argmax(np.abs(vecs), axis=0)
    vecs = vecs * np.sign(vecs[big, np.arange(r)])
    if scale == "std":
        vecs = vecs / vecs.std(axis=0)
    elif scale == "max":
        vecs = vecs / np.abs(vecs).max(axis=0)
    return vecs


def _related_mask(n_nodes: int, edges: np.ndarray) -> np.ndarray:
    """Boolean matrix: i and j are related in either direction, or i == j."""
    rel = np.eye(n_nodes, dtype=bool)
    rel[edges[:, 0], edges[:, 1]] = True
    rel[edges[:, 1], edges[:, 0]] = True
    return rel


def train_lorentz_embedding(
    n_nodes: int,
    edges: np.ndarray,
    rng: np.random.Generator | int,
    *,
    dim: int = 2,
    epochs: int = 300,
    lr: float = 0.1,
    batch_size: int = 256,
    n_negatives: int = 10,
    burn_in: int = 20,
    burn_in_factor: float = 0.1,
    init_scale: float = 1e-3,
    max_norm: float = 15.0,
    max_step: float = 0.5,
) -> np.ndarray:
    """Hyperbolic embedding of a relation by Riemannian SGD on the Lorentz model.

    Nickel and Kiela (2017, 2018): for every edge ``(u, v)`` with negatives ``v'_1..v'_K`` drawn
    uniformly among nodes unrelated to ``u``, minimise the softmax loss
    ``-log( exp(-d(u, v)) / sum_{w in {v, v'_1..v'_K}} exp(-d(u, w)) )``. The Riemannian gradient
    of ``d(x, y)`` in ``x`` is ``-Log_x(y) / d(x, y)``; the gradients of a mini-batch are summed
    per node and each node moves by ``Exp_x(-lr * g)`` on :class:`rfed.manifolds.Hyperboloid`.
    The first ``burn_in`` epochs use ``lr * burn_in_factor`` (Nickel and Kiela's burn-in, which
    settles the angular layout before the points move outwards). Negatives that hit a related node
    (drawn with replacement, so possible) are masked out of the softmax rather than redrawn.

    Parameters
    ----------
    n_nodes : int
    edges : int array, shape ``(n_edges, 2)``
        Positive pairs, e.g. the closure ``(child, ancestor)`` edges.
    rng : numpy.random.Generator or int
    dim : int
        Hyperbolic dimension (PriRFed uses H^2).
    epochs, lr, batch_size, n_negatives, burn_in, burn_in_factor : training schedule
    init_scale : float
        Initial spatial coordinates uniform in ``[-init_scale, init_scale]``.
    max_norm : float
        Points are kept within this distance of the origin (a Riemannian step that would leave
        the ball is shortened), which bounds the coordinates (``cosh 15 ~ 1.6e6``) and keeps
        distances accurate in float64 (a cap of 8 costs reconstruction quality in 2-d).
    max_step : float
        Longest Riemannian step of one node in one mini-batch (the summed gradient of a hub node
        such as the root, which appears in many edges of a batch, would otherwise overshoot).

    Returns
    -------
    ndarray, shape ``(n_nodes, dim + 1)``, points on the hyperboloid.
    """
    n_nodes = check_int(n_nodes, "n_nodes", minimum=2)
    edges = np.asarray(edges)
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"argument 'edges' must be an (n_edges, 2) int array, got {edges.shape}")
    dim = check_int(dim, "dim")
    epochs = check_int(epochs, "epochs")
    lr = check_float(lr, "lr", low=0.0, low_open=True)
    batch_size = check_int(batch_size, "batch_size")
    n_negatives = check_int(n_negatives, "n_negatives")
    burn_in = check_int(burn_in, "burn_in", minimum=0)
    burn_in_factor = check_float(burn_in_factor, "burn_in_factor", low=0.0, low_open=True)
    init_scale = check_float(init_scale, "init_scale", low=0.0, low_open=True)
    max_norm = check_float(max_norm, "max_norm", low=0.0, low_open=True)
    max_step = check_float(max_step, "max_step", low=0.0, low_open=True)
    gen = as_generator(rng)
    man = Hyperboloid(dim)
    related = _related_mask(n_nodes, edges)
    origin = man.origin
    spatial = gen.uniform(-init_scale, init_scale, (n_nodes, dim))
    x = man.exp(origin, np.pad(spatial, ((0, 0), (1, 0))))
    for epoch in range(epochs):
        step = lr * (burn_in_factor if epoch < burn_in else 1.0)
        order = gen.permutation(len(edges))
        for start in range(0, len(edges), batch_size):
            batch = edges[order[start : start + batch_size]]
            u = batch[:, 0]
            others = np.concatenate(
                [batch[:, 1:], gen.integers(0, n_nodes, (len(batch), n_negatives))], axis=1
            )
            valid = np.ones(others.shape, dtype=bool)
            valid[:, 1:] = ~related[u[:, None], others[:, 1:]]
            xu = x[u][:, None, :]
            xo = x[others]
            d = man.dist(xu, xo)
            logits = np.where(valid, -d, -np.inf)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            # d loss / d d_k = 1[k = 0] - softmax_k   (loss = d_0 + logsumexp(-d))
            coef = -p
            coef[:, 0] += 1.0
            inv_d = np.where(d > 1e-12, 1.0 / np.maximum(d, 1e-12), 0.0)[..., None]
            g_u = -(coef[..., None] * man.log(xu, xo) * inv_d).sum(axis=1)
            g_o = -coef[..., None] * man.log(xo, xu) * inv_d
            idx = np.concatenate([u, others.ravel()])
            g = np.concatenate([g_u, g_o.reshape(-1, dim + 1)])
            grad = np.stack(
                [np.bincount(idx, weights=g[:, k], minlength=n_nodes) for k in range(dim + 1)],
                axis=1,
            )
            touched = np.unique(idx)
            # re-project: far from the origin, sums of Log vectors drift off T_x in rounding
            move = man.proj(x[touched], -step * grad[touched])
            # hub nodes (the root is in every closure edge of its subtree) collect many terms
            length = man.norm(x[touched], move)[:, None]
            move *= np.minimum(1.0, max_step / np.maximum(length, 1e-300))
            x[touched] = man.exp(x[touched], move)
        # keep every point inside the ball of radius max_norm around the origin
        r = man.dist(origin, x)
        far = r > max_norm
        if np.any(far):
            v = man.log(origin, x[far])
            x[far] = man.exp(origin, v * (max_norm / r[far])[:, None])
    return x


def reconstruction_metrics(points: np.ndarray, edges: np.ndarray) -> dict[str, float]:
    """Mean rank and mean average precision of reconstructing a relation from an embedding.

    Nickel and Kiela's reconstruction task: for every node u with related nodes ``P(u)`` (the
    second entries of its edges ``(u, v)``), rank all other nodes by hyperbolic distance to u.
    The rank of ``v in P(u)`` counts the nodes outside ``P(u)`` closer to u than v, plus one;
    the average precision of u is the usual AP of the ranking over all other nodes.

    Parameters
    ----------
    points : ndarray, shape ``(n_nodes, dim + 1)``, on the hyperboloid
    edges : int array, shape ``(n_edges, 2)``

    Returns
    -------
    dict with ``mean_rank`` (1 is perfect) and ``map`` (1 is perfect)
    """
    points = np.asarray(points, dtype=np.float64)
    edges = np.asarray(edges)
    n = len(points)
    man = Hyperboloid(points.shape[-1] - 1)
    dist = man.dist(points[:, None, :], points[None, :, :])
    np.fill_diagonal(dist, np.inf)
    pos = np.zeros((n, n), dtype=bool)
    pos[edges[:, 0], edges[:, 1]] = True
    np.fill_diagonal(pos, False)
    has = pos.any(axis=1)
    dist, pos = dist[has], pos[has]
    order = np.argsort(dist, axis=1, kind="stable")
    pos_sorted = np.take_along_axis(pos, order, axis=1)
    neg_before = np.cumsum(~pos_sorted, axis=1)
    ranks = neg_before[pos_sorted] + 1
    hits = np.cumsum(pos_sorted, axis=1)
    position = np.arange(1, n + 1)[None, :]
    precision = np.where(pos_sorted, hits / position, 0.0)
    ap = precision.sum(axis=1) / pos_sorted.sum(axis=1)
    return {"mean_rank": float(ranks.mean()), "map": float(ap.mean())}


def load_wordnet_embedding(path: str | os.PathLike | None = None) -> tuple[np.ndarray, dict]:
    """Read the cached Lorentz embedding of the mammal closure, in node order of
    :func:`load_wordnet_mammals`.

    Parameters
    ----------
    path : path, optional
        The npz file (default: the one shipped with rfed).

    Returns
    -------
    points : ndarray, shape ``(1182, 3)``, on H^2
    info : dict
        Training settings and reconstruction metrics stored with the file.
    """
    p = EMBEDDING_FILE if path is None else Path(path)
    if not p.is_file():
        raise ValueError(
            f"argument 'path': no embedding file {str(p)!r}; create it with"
            " `python -m rfed.datasets.train_wordnet_embedding`"
        )
    with np.load(p, allow_pickle=False) as f:
        points = np.array(f["points"])
        names = tuple(str(s) for s in f["names"])
        info = {k: f[k].item() for k in f.files if k not in ("points", "names")}
    if names != load_wordnet_mammals().names:
        raise ValueError(f"argument 'path': {str(p)!r} was trained on a different node list")
    return points, info


class PredictionData(TypedDict):
    """What :func:`wordnet_prediction_data` returns (the keys are described there)."""

    features: np.ndarray
    targets: np.ndarray
    test_feature: np.ndarray
    test_target: np.ndarray
    test_index: int
    names: tuple[str, ...]


def wordnet_prediction_data(
    *, r: int = 3, graph: str = "closure", scale: str = "std"
) -> PredictionData:
    """The (features, targets) pairs of PriRFed's hyperbolic structured prediction (Sec. 6.3).

    Features: :func:`laplacian_eigenmap` with ``r = 3`` of the adjacency formed by the closure
    edges (the paper: "the adjacency matrix formed by the edges", its 6,540 edges being the
    closure); ``graph="hypernym"`` uses the direct hypernym tree instead. The default column
    scale ``"std"`` (unit variance, an rfed choice: the paper gives none) puts the features on the
    scale where the paper's kernel width ``vbar = 0.3`` is meaningful; Belkin and Niyogi's (2003)
    own normalisation (``scale="bn03"``) makes every pair of words look alike at that width.
    Targets: the shipped Lorentz embedding (:func:`load_wordnet_embedding`). The test word is
    "primate".

    Parameters
    ----------
    r : int
        Number of Laplacian-eigenmap features.
    graph : {"closure", "hypernym"}
        The edges the adjacency is formed from.
    scale : {"std", "bn03", "max"}
        Column scaling of the features (see above).

    Returns
    -------
    dict with
        ``features`` (1181, r) and ``targets`` (1181, 3): the training pairs (test word removed);
        ``test_feature`` (r,) and ``test_target`` (3,): "primate";
        ``test_index``: its node index; ``names``: the 1,181 training synsets in order.
    """
    check_choice(graph, "graph", ("closure", "hypernym"))
    data = load_wordnet_mammals()
    edges = data.closure if graph == "closure" else data.hypernyms
    feats = laplacian_eigenmap(data.n_nodes, edges, r, scale=scale)
    points, _ = load_wordnet_embedding()
    t = data.index(TEST_WORD)
    keep = np.arange(data.n_nodes) != t
    return {
        "features": feats[keep],
        "targets": points[keep],
        "test_feature": feats[t],
        "test_target": points[t],
        "test_index": t,
        "names": tuple(n for i, n in enumerate(data.names) if i != t),
    }
