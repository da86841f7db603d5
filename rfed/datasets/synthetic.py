"""Synthetic data sets with the papers' recipes, all seeded and generated offline.

* :func:`make_pca_synthetic`: the PriRFed principal-eigenvector recipe (spec 004 section 5.1,
  after Shamir's VR-PCA construction), one data matrix per agent with a controlled eigengap.
* :func:`make_wishart_spd`: Wishart SPD samples for the Frechet-mean experiment (spec 004
  section 5.2), optionally restricted to a geodesic ball around the identity (pitfall 14).
* :func:`make_epsilon_like` and :func:`make_rcv1_like`: stand-ins with the shape statistics of the
  LIBSVM ``epsilon`` (dense, 2,000 features, unit-norm rows) and ``rcv1.binary`` (sparse tf-idf,
  47,236 features, unit-norm rows) sets used by DO-ADP (spec 000 section 5.1) and DP-DDA (spec 002
  section 5.1). Labels are in {-1, +1} as in both papers. The real files load with
  :func:`rfed.datasets.load_libsvm`.

Every function takes an explicit :class:`numpy.random.Generator` or an int seed; the same seed gives
the same bits.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.stats import beta

from rfed.datasets._validation import check_float, check_int
from rfed.manifolds import as_generator

__all__ = [
    "EPSILON_SHAPE",
    "RCV1_SHAPE",
    "haar_orthogonal",
    "make_epsilon_like",
    "make_pca_synthetic",
    "make_rcv1_like",
    "make_wishart_spd",
    "pca_spectrum",
    "random_orthonormal_columns",
]

#: (n_samples, n_features) of the LIBSVM ``epsilon_normalized`` training split (spec 000 / 002).
EPSILON_SHAPE = (400_000, 2_000)
#: (n_samples, n_features) of LIBSVM ``rcv1.binary`` test split, used as training set by DP-DDA.
RCV1_SHAPE = (677_399, 47_236)


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
    """Haar-random orthogonal matrices, shape ``(*size, n, n)``."""
    return random_orthonormal_columns(n, n, rng, size)


def pca_spectrum(
    dim: int, eigengap: float, rng: np.random.Generator | int, n_agents: int = 1
) -> np.ndarray:
    """Diagonal of Sigma_i in the PriRFed PCA recipe (spec 004 section 5.1, step 2).

    ``Sigma_i = diag{1, 1 - 1.1 nu, 1 - 1.2 nu, 1 - 1.3 nu, 1 - 1.4 nu, |y_1|/(d+1), ...}`` with
    ``y_k ~ N(0, 1)`` iid and ``d + 1 = dim``.

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

    Recipe of spec 004 section 5.1 (paper L447-449, after [HMJG24 Sec 5.1] / Shamir's VR-PCA):
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
        Spec 004 pitfall 15: the paper draws ``U_i``, ``V_i`` and the ``y``'s per agent
        (heterogeneous agents, the default). ``True`` shares one ``V`` across agents (the iid
        alternative: every agent then has the same principal direction ``V[0]``).

    Returns
    -------
    ndarray, shape ``(n_agents, n_per_agent, dim)``
    """
    n_agents = check_int(n_agents, "n_agents")
    dim = check_int(dim, "dim", minimum=6)
    n_per_agent = check_int(n_per_agent, "n_per_agent")
    if n_per_agent < dim:
        raise ValueError(
            f"argument 'n_per_agent' ({n_per_agent}) must be >= 'dim' ({dim}): U_i is an"
            " N_i x (d+1) matrix with orthonormal columns"
        )
    gen = as_generator(rng)
    sigma = pca_spectrum(dim, eigengap, gen, n_agents)
    u = random_orthonormal_columns(n_per_agent, dim, gen, (n_agents,))
    v = haar_orthogonal(dim, gen, (1,) if shared_basis else (n_agents,))
    return (u * sigma[:, None, :]) @ v


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

    Spec 004 section 5.2 (paper L488-500, "following [RBS21]"): samples from the Wishart law with
    scale ``I_n / n`` and ``df = n`` degrees of freedom, whose mean is ``df / n * I_n = I_n``,
    with matrix size ``n = 2`` and 5,000 samples. Each sample is ``G G^T`` with ``G`` an
    ``n x df`` matrix of iid ``N(0, 1/n)`` entries.

    The paper's "diameter bound D_W = 1" is enforced as spec 004 pitfall 14 resolves it: rejection
    sampling until the affine-invariant distance ``d(Z, I) = ||log eig(Z)||_2 <= radius``.
    ``radius = 0.5 = D_W / 2`` (default) guarantees a data diameter <= 1; ``radius = 1.0`` is the
    alternative reading; ``radius = None`` disables the rejection (plain Wishart samples).

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
            # bound) cannot bring the missing samples within the remaining budget; this only
            # ends hopeless runs, it never changes the samples of a run that succeeds
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
    dtype: type = np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Dense stand-in for LIBSVM ``epsilon_normalized`` (labels in {-1, +1}).

    Shape statistics of the real set (spec 000 section 5.1, spec 002 section 5.1): 2,000 dense
    features, every row of unit Euclidean norm (so the hinge/logistic Lipschitz constant is 1),
    balanced +-1 labels. Construction: rows ``a_j ~ N(0, I_d)`` normalised to the unit sphere,
    labels ``sign(a_j^T w - median)`` for a Gaussian ``w``, then a fraction ``label_noise`` of
    labels flipped (the real set is not linearly separable; a linear model reaches about 90 %).

    The full shape is ``n_samples = EPSILON_SHAPE[0] = 400_000`` (6.4 GB in float64; pass
    ``dtype=np.float32`` to halve it). The default is scaled down to 4,000 rows.

    Returns
    -------
    X : ndarray, shape ``(n_samples, n_features)``
    y : ndarray, shape ``(n_samples,)``, values in {-1.0, +1.0}
    """
    n_samples = check_int(n_samples, "n_samples", minimum=2)
    n_features = check_int(n_features, "n_features")
    label_noise = check_float(label_noise, "label_noise", low=0.0, high=0.5)
    gen = as_generator(rng)
    x = gen.standard_normal((n_samples, n_features)).astype(dtype, copy=False)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = gen.standard_normal(n_features)
    return x, _linear_labels(x @ w.astype(dtype), label_noise, gen)


def _tokens_for_unique(p: np.ndarray, mean_nnz: float) -> float:
    """Token count T with expected number of distinct Zipf terms sum_k 1-(1-p_k)^T = mean_nnz."""
    lo, hi = mean_nnz, 1e3 * mean_nnz
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if np.sum(-np.expm1(mid * np.log1p(-p))) < mean_nnz:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def make_rcv1_like(
    n_samples: int = 4000,
    n_features: int = RCV1_SHAPE[1],
    rng: np.random.Generator | int = 0,
    *,
    mean_nnz: float = 73.0,
    zipf_exponent: float = 1.0,
    label_noise: float = 0.05,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Sparse tf-idf stand-in for LIBSVM ``rcv1.binary`` (labels in {-1, +1}).

    Shape statistics of the real set (spec 002 section 5.1): 47,236 features, about 73 non-zeros
    per row (density 0.16 %), non-negative "ltc" tf-idf values, unit-norm rows, roughly balanced
    +-1 labels. Construction: each document draws a log-normal number of tokens from a Zipf law
    over a randomly permuted vocabulary (the token count is calibrated so that the expected number
    of distinct terms is ``mean_nnz``); the term counts ``tf`` give values
    ``(1 + log tf) * log(n_samples / df)``, each row scaled to unit norm (terms present in every
    document get idf 0 and are dropped). Labels: sign of a Gaussian linear score around its
    median, with a fraction ``label_noise`` flipped.

    The full shape is ``n_samples = RCV1_SHAPE[0] = 677_399`` (about 50 M non-zeros); the default
    is scaled down to 4,000 rows with the full vocabulary.

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape ``(n_samples, n_features)``
    y : ndarray, shape ``(n_samples,)``, values in {-1.0, +1.0}
    """
    n_samples = check_int(n_samples, "n_samples", minimum=2)
    n_features = check_int(n_features, "n_features", minimum=2)
    mean_nnz = check_float(mean_nnz, "mean_nnz", low=1.0, high=n_features / 2)
    zipf_exponent = check_float(zipf_exponent, "zipf_exponent", low=0.0, low_open=True)
    label_noise = check_float(label_noise, "label_noise", low=0.0, high=0.5)
    gen = as_generator(rng)

    p = 1.0 / np.arange(1, n_features + 1) ** zipf_exponent
    p /= p.sum()
    tokens = _tokens_for_unique(p, mean_nnz)
    doc_len_sd = 0.5
    lengths = np.maximum(
        1, np.rint(tokens * np.exp(doc_len_sd * gen.standard_normal(n_samples) - doc_len_sd**2 / 2))
    ).astype(np.int64)
    vocab = gen.permutation(n_features)
    # inverse-CDF draw of Zipf ranks (clip guards the last bin against cumsum rounding)
    rank = np.searchsorted(np.cumsum(p), gen.random(lengths.sum()), side="right")
    cols = vocab[np.minimum(rank, n_features - 1)]
    rows = np.repeat(np.arange(n_samples), lengths)
    tf = sp.coo_matrix((np.ones(len(cols)), (rows, cols)), shape=(n_samples, n_features)).tocsr()
    tf.sum_duplicates()
    doc_freq = np.bincount(tf.indices, minlength=n_features)
    idf = np.log(n_samples / np.maximum(doc_freq, 1))
    tf.data = (1.0 + np.log(tf.data)) * idf[tf.indices]
    tf.eliminate_zeros()
    norms = np.sqrt(np.asarray(tf.multiply(tf).sum(axis=1)).ravel())
    x = sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ tf
    x = sp.csr_matrix(x)
    w = gen.standard_normal(n_features)
    return x, _linear_labels(x @ w, label_noise, gen)
