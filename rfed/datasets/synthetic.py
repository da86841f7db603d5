"""Synthetic data sets with the papers' recipes, all seeded and generated offline.

* :func:`make_pca_synthetic`: the PriRFed principal-eigenvector recipe (Sec. 6.1 of the
  paper, after Shamir's VR-PCA construction; :ref:`prirfed-synthetic-pca`), one data matrix per
  agent with a controlled eigengap;
  :func:`make_pca_synthetic_agents` draws the same recipe per agent from a stream keyed by
  ``(seed, agent)``, so a process generates only the agents it holds.
* :func:`make_wishart_spd`: Wishart SPD samples for the Frechet-mean experiment (PriRFed
  Sec. 6.2), optionally restricted to a geodesic ball around the identity
  (:ref:`prirfed-wishart`).
* :func:`make_epsilon_like` and :func:`make_rcv1_like`: stand-ins with the shape statistics of the
  LIBSVM ``epsilon`` (dense, 2,000 features, unit-norm rows) and ``rcv1.binary`` (sparse tf-idf,
  47,236 features, unit-norm rows) sets used by DO-ADP (Sec. VI-A of the paper) and DP-DDA (Sec.
  5.1, Table 2). Labels are in {-1, +1} as in both papers. The real files load with
  :func:`rfed.datasets.load_libsvm`.

Every function takes an explicit :class:`numpy.random.Generator` or an int seed; the same seed gives
the same bits.

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
* Ohad Shamir. A Stochastic PCA and SVD Algorithm with an Exponential Convergence Rate.
  Proceedings of the 32nd International Conference on Machine Learning (ICML), 2015.
  arXiv:1409.2848.
* Matthew Reimherr, Karthik Bharath and Carlos Soto. Differential Privacy over Riemannian
  Manifolds. Advances in Neural Information Processing Systems 34 (NeurIPS), 2021.
  arXiv:2111.02516.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike
from scipy.stats import beta

from rfed.datasets._validation import check_float, check_float_dtype, check_int
from rfed.manifolds import as_generator

__all__ = [
    "EPSILON_SHAPE",
    "RCV1_SHAPE",
    "RCV1_TRAIN_SHAPE",
    "haar_orthogonal",
    "make_epsilon_like",
    "make_pca_synthetic",
    "make_rcv1_like",
    "make_wishart_spd",
    "pca_spectrum",
    "random_orthonormal_columns",
]

#: (n_samples, n_features) of the LIBSVM ``epsilon_normalized`` training split (DO-ADP
#: Sec. VI-A, DP-DDA Table 2).
EPSILON_SHAPE = (400_000, 2_000)
#: (n_samples, n_features) of LIBSVM ``rcv1.binary`` test split, used as training set by DP-DDA.
RCV1_SHAPE = (677_399, 47_236)
#: (n_samples, n_features) of LIBSVM ``rcv1.binary`` training split (density about 0.16 %).
RCV1_TRAIN_SHAPE = (20_242, 47_236)


def random_orthonormal_columns(
    n_rows: int, n_cols: int, rng: np.random.Generator | int, size: tuple[int, ...] = ()
) -> np.ndarray:
    """Haar-distributed matrices with orthonormal columns.

    QR of a Gaussian matrix with the signs of ``diag(R)`` moved into ``Q``, which makes the law
    exactly Haar on the Stiefel manifold (Mezzadri 2007).

    Parameters
    ----------
    n_rows, n_cols : int
        Matrix shape, ``n_rows >= n_cols``.
    rng : numpy.random.Generator or int
    size : tuple of int
        Leading batch shape.

    Returns
    -------
    ndarray, shape ``(*size, n_rows, n_cols)``
    """
    n_rows = check_int(n_rows, "n_rows")
    n_cols = check_int(n_cols, "n_cols")
    if n_cols > n_rows:
        raise ValueError(f"argument 'n_cols' ({n_cols}) must not exceed 'n_rows' ({n_rows})")
    g = as_generator(rng).standard_normal((*size, n_rows, n_cols))
    q, r = np.linalg.qr(g)
    signs = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return q * signs[..., None, :]


def haar_orthogonal(
    n: int, rng: np.random.Generator | int, size: tuple[int, ...] = ()
) -> np.ndarray:
    """Haar-random orthogonal matrices, shape ``(*size, n, n)``.

    Parameters
    ----------
    n : int
        Matrix size.
    rng : numpy.random.Generator or int
    size : tuple of int
        Leading batch shape.

    Returns
    -------
    ndarray, shape ``(*size, n, n)``
    """
    return random_orthonormal_columns(n, n, rng, size)


def pca_spectrum(
    dim: int, eigengap: float, rng: np.random.Generator | int, n_agents: int = 1
) -> np.ndarray:
    """Diagonal of Sigma_i in the PriRFed PCA recipe (Sec. 6.1; :ref:`prirfed-synthetic-pca`).

    ``Sigma_i = diag{1, 1 - 1.1 nu, 1 - 1.2 nu, 1 - 1.3 nu, 1 - 1.4 nu, |y_1|/(d+1), ...}`` with
    ``y_k ~ N(0, 1)`` iid and ``d + 1 = dim``.

    Parameters
    ----------
    dim : int
        ``d + 1 >= 6``, the ambient dimension of the records.
    eigengap : float
        ``nu`` in ``(0, 1/1.4)``.
    rng : numpy.random.Generator or int
    n_agents : int
        One diagonal per agent (the ``y``'s are drawn per agent).

    Returns
    -------
    ndarray, shape ``(n_agents, dim)``
        Unsorted diagonal (the five structured entries first).
    """
    dim = check_int(dim, "dim", minimum=6)
    nu = check_float(eigengap, "eigengap", low=0.0, high=1.0 / 1.4, low_open=True, high_open=True)
    n_agents = check_int(n_agents, "n_agents")
    head = 1.0 - nu * np.array([0.0, 1.1, 1.2, 1.3, 1.4])
    tail = np.abs(as_generator(rng).standard_normal((n_agents, dim - 5))) / dim
    return np.concatenate([np.broadcast_to(head, (n_agents, 5)), tail], axis=1)


def make_pca_synthetic(
    n_agents: int = 16,
    n_per_agent: int = 70,
    dim: int = 25,
    eigengap: float = 1e-3,
    rng: np.random.Generator | int = 0,
    *,
    shared_basis: bool = False,
) -> np.ndarray:
    """Per-agent data for the leading-eigenvector problem (6.1) of PriRFed.

    Recipe of PriRFed Sec. 6.1, "Synthetic data" (after Han et al. 2024 and Shamir's VR-PCA):
    for each agent i, ``Z_i = U_i Sigma_i V_i`` with ``Sigma_i`` from :func:`pca_spectrum`,
    ``U_i`` an ``N_i x (d+1)`` Haar column-orthonormal matrix and ``V_i`` a Haar orthogonal
    ``(d+1) x (d+1)`` matrix. The rows of ``Z_i`` are the samples ``z_{i,j}``. So the singular
    values of ``Z_i`` are exactly the entries of ``Sigma_i`` and the local second-moment matrix
    ``Z_i^T Z_i = V_i^T Sigma_i^2 V_i`` has its top eigengap ``1 - (1 - 1.1 nu)^2``.

    Paper defaults: ``dim = d + 1 = 25``, ``eigengap = nu = 1e-3``, ``n_agents = N = 16`` and
    ``n_per_agent = N_i`` in {70, 100} (Fig. 1).

    Parameters
    ----------
    n_agents, n_per_agent : int
        ``N`` and ``N_i`` (``n_per_agent >= dim`` so that ``U_i`` exists).
    dim : int
        Ambient dimension ``d + 1`` (the sphere is ``S^d``).
    eigengap : float
        ``nu`` in (0, 1/1.4).
    rng : numpy.random.Generator or int
    shared_basis : bool
        The paper draws ``U_i``, ``V_i`` and the ``y``'s per agent
        (heterogeneous agents, the default). ``True`` shares one ``V`` across agents (the iid
        alternative: every agent then has the same principal direction ``V[0]``;
        :ref:`prirfed-synthetic-pca`).

    Returns
    -------
    ndarray, shape ``(n_agents, n_per_agent, dim)``
    """
    n_agents = check_int(n_agents, "n_agents")
    n_per_agent, dim = _check_pca_shape(n_per_agent, dim)
    gen = as_generator(rng)
    sigma = pca_spectrum(dim, eigengap, gen, n_agents)
    u = random_orthonormal_columns(n_per_agent, dim, gen, (n_agents,))
    v = haar_orthogonal(dim, gen, (1,) if shared_basis else (n_agents,))
    return (u * sigma[:, None, :]) @ v


def _check_pca_shape(n_per_agent: int, dim: int) -> tuple[int, int]:
    """``(n_per_agent, dim)`` of the PCA recipe, checked (``U_i`` needs ``N_i >= d``)."""
    dim = check_int(dim, "dim", minimum=6)
    n_per_agent = check_int(n_per_agent, "n_per_agent")
    if n_per_agent < dim:
        raise ValueError(
            f"argument 'n_per_agent' ({n_per_agent}) must be >= 'dim' ({dim}): U_i is an"
            " N_i x (d+1) matrix with orthonormal columns"
        )
    return n_per_agent, dim


def make_pca_synthetic_agents(
    agents, n_per_agent: int = 70, dim: int = 25, eigengap: float = 1e-3, seed: int = 0
) -> np.ndarray:
    """The rows of :func:`make_pca_synthetic`'s recipe for the listed agents only.

    Agent ``i``'s matrix ``Z_i = U_i Sigma_i V_i`` is drawn from its own generator, seeded by
    ``numpy.random.SeedSequence([seed, i])``: it is a function of ``(seed, i)`` alone, so a
    process holding a block of agents (a Flower client, an MPI rank) generates exactly the
    rows a process holding every agent would, and no other agent's. (Not the same numbers as
    :func:`make_pca_synthetic` with the same seed, which draws all agents from one stream.)

    Parameters
    ----------
    agents : int array, shape ``(A,)``
        Global agent ids (>= 0); may be empty.
    n_per_agent, dim, eigengap
        As in :func:`make_pca_synthetic`.
    seed : int
        >= 0.

    Returns
    -------
    ndarray, shape ``(A, n_per_agent, dim)``
    """
    ids = np.asarray(agents)
    if ids.ndim != 1 or (ids.size and (not np.issubdtype(ids.dtype, np.integer)
                                       or ids.min() < 0)):
        raise ValueError(f"argument 'agents' must be a 1-d array of int agent ids >= 0, got "
                         f"{agents!r}")
    seed = check_int(seed, "seed", minimum=0)
    n_per_agent, dim = _check_pca_shape(n_per_agent, dim)
    check_float(eigengap, "eigengap", low=0.0, high=1.0 / 1.4, low_open=True, high_open=True)
    out = np.empty((ids.size, n_per_agent, dim))
    # one independent stream per agent: a loop over the listed agents at load time only
    for row, agent in enumerate(ids.tolist()):
        gen = np.random.default_rng(np.random.SeedSequence([seed, agent]))
        sigma = pca_spectrum(dim, eigengap, gen, 1)[0]
        u = random_orthonormal_columns(n_per_agent, dim, gen)
        out[row] = (u * sigma) @ haar_orthogonal(dim, gen)
    return out


def make_wishart_spd(
    n_samples: int = 5000,
    n: int = 2,
    rng: np.random.Generator | int = 0,
    *,
    df: int | None = None,
    radius: float | None = 0.5,
    max_draws: int | None = None,
) -> np.ndarray:
    """Wishart SPD samples ``W(I_n / n, df)`` for the Frechet-mean problem (6.2) of PriRFed.

    PriRFed Sec. 6.2, "Synthetic data" ("following" Reimherr et al. 2021): samples from the
    Wishart law with scale ``I_n / n`` and ``df = n`` degrees of freedom, whose mean is ``df / n *
    I_n = I_n``, with matrix size ``n = 2`` and 5,000 samples. Each sample is ``G G^T`` with ``G``
    an ``n x df`` matrix of iid ``N(0, 1/n)`` entries.

    The paper's "diameter bound D_W = 1" is enforced as :ref:`prirfed-wishart` resolves
    it: rejection sampling until the affine-invariant distance ``d(Z, I) = ||log eig(Z)||_2 <=
    radius``. ``radius = 0.5 = D_W / 2`` (default) guarantees a data diameter <= 1; ``radius = 1.0``
    is the alternative reading; ``radius = None`` disables the rejection (plain Wishart samples).

    Parameters
    ----------
    n_samples : int
    n : int
        Matrix size (the manifold has dimension n(n+1)/2).
    rng : numpy.random.Generator or int
    df : int or None
        Degrees of freedom, ``>= n`` (default ``n``, as in the paper).
    radius : float or None
        Rejection radius around the identity in the affine-invariant metric.
    max_draws : int or None
        Cap on the total number of Wishart draws of the rejection sampler (default
        ``10_000 * n_samples + 1_000_000``). Each round draws a batch sized by the acceptance rate
        observed so far; the sampler stops with ``ValueError`` as soon as an upper
        ``1 - 1e-9`` confidence bound on the acceptance rate (Clopper-Pearson) shows that the
        missing samples cannot be drawn within the cap, so an unreachable radius fails in seconds
        instead of running for an hour. For reference, at
        ``df = n`` the acceptance rate is about 1.5 % for ``(n, radius) = (2, 0.5)``, 10 % for
        ``(2, 1.0)`` and 0.25 % for ``(3, 0.8)``; it is below 1e-5 for ``n = 9``.

    Returns
    -------
    ndarray, shape ``(n_samples, n, n)``, symmetric positive definite.

    Raises
    ------
    ValueError
        ``radius`` accepts too few draws to reach ``n_samples`` within ``max_draws``.
    """
    n_samples = check_int(n_samples, "n_samples")
    n = check_int(n, "n")
    df = n if df is None else check_int(df, "df", minimum=n)
    if radius is not None:
        radius = check_float(radius, "radius", low=0.0, low_open=True)
    max_draws = 10_000 * n_samples + 1_000_000 if max_draws is None else check_int(
        max_draws, "max_draws"
    )
    gen = as_generator(rng)
    sub_batch = 1 << 16  # draws held in memory at once (the stream does not depend on it)

    def draw(k: int) -> np.ndarray:
        g = gen.standard_normal((k, n, df)) / np.sqrt(n)
        w = g @ np.swapaxes(g, -1, -2)
        return 0.5 * (w + np.swapaxes(w, -1, -2))

    if radius is None:
        return draw(n_samples)
    kept: list[np.ndarray] = []
    n_drawn, n_accepted = 0, 0
    while n_drawn < max_draws:
        rate = max(n_accepted / n_drawn, 1e-3) if n_drawn else 0.5
        batch = min(int(np.ceil(1.2 * (n_samples - n_accepted) / rate)) + 16, max_draws - n_drawn)
        hopeless = False
        for start in range(0, batch, sub_batch):
            k = min(sub_batch, batch - start)
            w = draw(k)
            with np.errstate(divide="ignore", invalid="ignore"):  # singular draws: dist inf/NaN
                dist = np.linalg.norm(np.log(np.linalg.eigvalsh(w)), axis=-1)
            ok = w[dist <= radius]
            n_accepted += len(ok)
            kept.append(ok)
            n_drawn += k
            # stop early when even an optimistic acceptance rate (upper 1 - 1e-9 confidence
            # bound) cannot bring the missing samples within the remaining budget; a run that
            # goes on draws exactly what it would without this check
            rate_high = beta.ppf(1.0 - 1e-9, n_accepted + 1, n_drawn - n_accepted)
            if (n_samples - n_accepted) / rate_high > max_draws - n_drawn:
                hopeless = True
                break
        if n_accepted >= n_samples:
            return np.concatenate(kept)[:n_samples]
        if hopeless:
            break
    rate = n_accepted / n_drawn
    need = f"about {n_samples / rate:.3g} draws" if n_accepted else "more draws than that"
    raise ValueError(
        f"argument 'radius' ({radius}) accepted only {n_accepted} of {n_drawn} Wishart"
        f" W(I/{n}, {df}) draws (acceptance rate {rate:.3g}); {n_samples} samples need {need},"
        f" over max_draws={max_draws}: use a larger radius, radius=None, or a larger max_draws"
    )


def _linear_labels(scores: np.ndarray, label_noise: float, gen: np.random.Generator) -> np.ndarray:
    """Balanced {-1, +1} labels: sign around the median score, then flip a fraction at random."""
    y = np.where(scores > np.median(scores), 1.0, -1.0)
    flip = gen.random(y.shape) < label_noise
    return np.where(flip, -y, y)


def make_epsilon_like(
    n_samples: int = 4000,
    n_features: int = EPSILON_SHAPE[1],
    rng: np.random.Generator | int = 0,
    *,
    label_noise: float = 0.1,
    dtype: DTypeLike = np.float64,
    chunk_rows: int = 4096,
    spectrum_decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Dense stand-in for LIBSVM ``epsilon_normalized`` (labels in {-1, +1}).

    Shape statistics of the real set (DO-ADP Sec. VI-A, DP-DDA Table 2): 2,000 dense
    features, every row of unit Euclidean norm (so the hinge/logistic Lipschitz constant is 1),
    balanced +-1 labels. Construction: rows ``a_j ~ N(0, I_d)`` normalised to the unit sphere,
    labels ``sign(a_j^T w - median)`` for a Gaussian ``w``, then a fraction ``label_noise`` of
    labels flipped (the real set is not linearly separable; a linear model reaches about 90 %).

    ``spectrum_decay = s > 0`` draws anisotropic rows instead: ``a_j ~ N(0, diag(k^{-s}))``
    (feature ``k = 1..d`` has variance ``k^{-s}``) before the normalisation, and the labels'
    direction ``w ~ N(0, diag(k^{-s}))``, so that the label depends mostly on the high-variance
    directions, as the class signal of real feature sets sits mostly in their leading principal
    directions; the Bayes accuracy stays ``1 - label_noise``. Why: isotropic rows (``s = 0``)
    carry almost no signal per record, ``||E[b a]||`` is about ``sqrt(2/pi) (1 - 2 label_noise)
    / sqrt(d)`` (0.014 at ``d = 2000``), so a private learner, whose noise grows with the
    dimension, needs millions of records. Measured on 16,000 rows at ``d = 2000`` (seed 0):
    ``||mean(b a)||`` 0.016 at ``s = 0`` and 0.12 at ``s = 1``; a ridge classifier on the top 64
    directions of 1,000 of them reaches 53 % and 84 % on 4,000 held-out rows. The random stream
    is the same (the scales are not random), so ``s = 0`` gives the former bits.

    The full shape is ``n_samples = EPSILON_SHAPE[0] = 400_000`` (6.4 GB in float64; pass
    ``dtype=np.float32`` to halve it, or use :func:`rfed.datasets.make_epsilon_like_cached`, which
    streams the same rows to a memory-mapped file). The default is scaled down to 4,000 rows.

    Parameters
    ----------
    n_samples, n_features : int
    rng : numpy.random.Generator or int
    label_noise : float in [0, 0.5]
        Fraction of labels flipped.
    dtype : {numpy.float32, numpy.float64}
    chunk_rows : int
        Rows drawn at once in float64 (the result does not depend on it).
    spectrum_decay : float in [0, 4]
        ``s`` above; 0 (default) is the isotropic recipe.

    Returns
    -------
    X : ndarray, shape ``(n_samples, n_features)``
    y : ndarray, shape ``(n_samples,)``, values in {-1.0, +1.0}
    """
    n_samples = check_int(n_samples, "n_samples", minimum=2)
    n_features = check_int(n_features, "n_features")
    label_noise = check_float(label_noise, "label_noise", low=0.0, high=0.5)
    float_dtype = check_float_dtype(dtype)
    chunk_rows = check_int(chunk_rows, "chunk_rows")
    spectrum_decay = check_float(spectrum_decay, "spectrum_decay", low=0.0, high=4.0)
    gen = as_generator(rng)
    x = np.empty((n_samples, n_features), dtype=float_dtype)
    for start, rows in _epsilon_like_rows(n_samples, n_features, gen, float_dtype, chunk_rows,
                                          spectrum_decay):
        x[start : start + len(rows)] = rows
    w = _epsilon_like_direction(gen, n_features, spectrum_decay)
    return x, _linear_labels(x @ w.astype(float_dtype), label_noise, gen)


def _epsilon_like_scales(n_features: int, spectrum_decay: float) -> np.ndarray | None:
    """Column scales ``k^{-s/2}``, ``k = 1..d``, of the anisotropic recipe (None when ``s = 0``)."""
    if not spectrum_decay:
        return None
    return np.arange(1, n_features + 1, dtype=np.float64) ** (-0.5 * spectrum_decay)


def _epsilon_like_direction(gen: np.random.Generator, n_features: int,
                            spectrum_decay: float) -> np.ndarray:
    """The labels' direction ``w``: ``N(0, I)``, or ``N(0, diag(k^{-s}))`` when ``s > 0``."""
    w = gen.standard_normal(n_features)
    scales = _epsilon_like_scales(n_features, spectrum_decay)
    return w if scales is None else w * scales


def _epsilon_like_rows(
    n_samples: int,
    n_features: int,
    gen: np.random.Generator,
    dtype: np.dtype,
    chunk_rows: int,
    spectrum_decay: float = 0.0,
) -> Iterator[tuple[int, np.ndarray]]:
    """Rows of the epsilon stand-in, ``chunk_rows`` at a time: ``(first_row, rows)`` pairs.

    Each block is drawn as float64 ``N(0, 1)``, scaled column ``k`` by ``k^{-s/2}``
    (``s = spectrum_decay``, skipped when 0), cast to ``dtype`` and scaled to unit row norm in
    ``dtype``. The generator is consumed in row order, so the blocks are the same bits as one
    draw of the whole matrix (:func:`make_epsilon_like`) and only one float64 block is ever in
    memory. The labels' direction ``w`` is drawn from ``gen`` after the last row.
    """
    scales = _epsilon_like_scales(n_features, spectrum_decay)
    for start in range(0, n_samples, chunk_rows):
        rows = gen.standard_normal((min(chunk_rows, n_samples - start), n_features))
        if scales is not None:
            rows *= scales
        rows = rows.astype(dtype, copy=False)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        yield start, rows


def _tokens_for_unique(p: np.ndarray, mean_nnz: float) -> float:
    """Token count T with expected number of distinct Zipf terms sum_k 1-(1-p_k)^T = mean_nnz."""

    def distinct(t: float) -> float:
        return float(np.sum(-np.expm1(t * np.log1p(-p))))

    lo, hi = mean_nnz, 1e3 * mean_nnz
    if distinct(hi) < mean_nnz:
        raise ValueError(
            f"argument 'mean_nnz' ({mean_nnz}) is out of reach of this Zipf law: even"
            f" {hi:.3g} tokens per document give only {distinct(hi):.4g} distinct terms on average;"
            " lower mean_nnz or zipf_exponent"
        )
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if distinct(mid) < mean_nnz:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _rcv1_recipe(
    n_samples: int,
    n_features: int,
    gen: np.random.Generator,
    mean_nnz: float,
    zipf_exponent: float,
    chunk_rows: int,
) -> tuple[list[sp.csr_matrix], np.ndarray]:
    """Rows of the rcv1 stand-in, ``chunk_rows`` at a time, and its labels' scores (float64).

    The random stream is consumed in the same order whatever ``chunk_rows`` is (document lengths,
    vocabulary permutation, then the tokens row by row, then ``w``), and every value of a row
    depends only on that row and on the document frequencies, so the chunks concatenate to the
    same bits for any chunk size. Token counts are held as float32 (exact small integers) until
    the idf is known; only one chunk of tokens is in memory at a time.
    """
    p = 1.0 / np.arange(1, n_features + 1) ** zipf_exponent
    p /= p.sum()
    tokens = _tokens_for_unique(p, mean_nnz)
    doc_len_sd = 0.5
    lengths = np.maximum(
        1, np.rint(tokens * np.exp(doc_len_sd * gen.standard_normal(n_samples) - doc_len_sd**2 / 2))
    ).astype(np.int64)
    vocab = gen.permutation(n_features)
    cdf = np.cumsum(p)
    counts: list[sp.csr_matrix] = []
    doc_freq = np.zeros(n_features, dtype=np.int64)
    for start in range(0, n_samples, chunk_rows):
        ln = lengths[start : start + chunk_rows]
        # inverse-CDF draw of Zipf ranks (clip guards the last bin against cumsum rounding)
        rank = np.searchsorted(cdf, gen.random(ln.sum()), side="right")
        cols = vocab[np.minimum(rank, n_features - 1)]
        rows = np.repeat(np.arange(len(ln)), ln)
        tf = sp.coo_matrix(
            (np.ones(len(cols)), (rows, cols)), shape=(len(ln), n_features)
        ).tocsr()
        tf.sum_duplicates()
        doc_freq += np.bincount(tf.indices, minlength=n_features)
        tf.data = tf.data.astype(np.float32)
        counts.append(tf)
    idf = np.log(n_samples / np.maximum(doc_freq, 1))
    chunks: list[sp.csr_matrix] = []
    counts.reverse()
    while counts:  # pop each count block once used, so that blocks and results never all coexist
        tf = counts.pop()
        tf.data = (1.0 + np.log(tf.data.astype(np.float64))) * idf[tf.indices]
        tf.eliminate_zeros()
        norms = np.sqrt(np.asarray(tf.multiply(tf).sum(axis=1)).ravel())
        if np.any(norms == 0):
            raise ValueError(
                f"argument 'n_samples' ({n_samples}) is too small for this vocabulary: a document"
                " holds only terms that occur in every document (idf 0) and has no feature left;"
                " raise n_samples or n_features"
            )
        chunks.append(sp.csr_matrix(sp.diags(1.0 / norms) @ tf))
    w = gen.standard_normal(n_features)
    scores = np.concatenate([x @ w for x in chunks])
    return chunks, scores


def _check_rcv1_args(
    n_samples, n_features, mean_nnz, zipf_exponent, label_noise
) -> tuple[int, int, float, float, float]:
    n_samples = check_int(n_samples, "n_samples", minimum=2)
    n_features = check_int(n_features, "n_features", minimum=2)
    mean_nnz = check_float(mean_nnz, "mean_nnz", low=1.0, high=n_features / 2)
    zipf_exponent = check_float(zipf_exponent, "zipf_exponent", low=0.0, low_open=True)
    label_noise = check_float(label_noise, "label_noise", low=0.0, high=0.5)
    return n_samples, n_features, mean_nnz, zipf_exponent, label_noise


def make_rcv1_like(
    n_samples: int = 4000,
    n_features: int = RCV1_SHAPE[1],
    rng: np.random.Generator | int = 0,
    *,
    mean_nnz: float = 73.0,
    zipf_exponent: float = 1.0,
    label_noise: float = 0.05,
    chunk_rows: int = 8192,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Sparse tf-idf stand-in for LIBSVM ``rcv1.binary`` (labels in {-1, +1}).

    Shape statistics of the real set (DP-DDA Table 2): 47,236 features, about 73 non-zeros
    per row (density 0.16 %), non-negative "ltc" tf-idf values, unit-norm rows, roughly balanced
    +-1 labels. Construction: each document draws a log-normal number of tokens from a Zipf law
    over a randomly permuted vocabulary (the token count is calibrated so that the expected number
    of distinct terms is ``mean_nnz``); the term counts ``tf`` give values
    ``(1 + log tf) * log(n_samples / df)``, each row scaled to unit norm (terms present in every
    document get idf 0 and are dropped). Labels: sign of a Gaussian linear score around its
    median, with a fraction ``label_noise`` flipped.

    The paper's shape is ``n_samples = RCV1_SHAPE[0] = 677_399`` (the LIBSVM test split, about
    50 M non-zeros; the training split has ``RCV1_TRAIN_SHAPE[0] = 20_242`` rows); the default is
    scaled down to 4,000 rows with the full vocabulary. :func:`rfed.datasets.make_rcv1_like_cached`
    stores the same recipe in float32 on disk.

    Parameters
    ----------
    n_samples, n_features : int
    rng : numpy.random.Generator or int
    mean_nnz : float
        Expected number of distinct terms per document, in ``[1, n_features / 2]``.
    zipf_exponent : float > 0
    label_noise : float in [0, 0.5]
    chunk_rows : int
        Documents generated at once (bounds the token arrays in memory; the result does not
        depend on it).

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape ``(n_samples, n_features)``, float64
    y : ndarray, shape ``(n_samples,)``, values in {-1.0, +1.0}

    Raises
    ------
    ValueError
        Bad arguments, a ``mean_nnz`` the Zipf law cannot reach, or a document left with no
        feature (only possible for tiny ``n_samples``).
    """
    n_samples, n_features, mean_nnz, zipf_exponent, label_noise = _check_rcv1_args(
        n_samples, n_features, mean_nnz, zipf_exponent, label_noise
    )
    chunk_rows = check_int(chunk_rows, "chunk_rows")
    gen = as_generator(rng)
    chunks, scores = _rcv1_recipe(n_samples, n_features, gen, mean_nnz, zipf_exponent, chunk_rows)
    x = chunks[0] if len(chunks) == 1 else sp.csr_matrix(sp.vstack(chunks, format="csr"))
    return x, _linear_labels(scores, label_noise, gen)
