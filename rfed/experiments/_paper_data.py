"""Real-size data of the papers' experiments at ``--set scale=paper``, read offline.

Where a paper used MNIST (PriRFed Fig. 2, DO-ADP Table II, DPDL Table I), the paper scale reads
the user's MNIST IDX files when they are installed (``/usr/share/datasets/mnist/``,
``$RFED_DATA``; never downloaded) and Fashion-MNIST otherwise (MNIST's format and size: 60,000
training and 10,000 test images of 28 x 28 pixels, 10 classes; Debian's
``dataset-fashion-mnist``). The data set used is named in every summary.

Public data for choosing hyperparameters (a *declared public split*): the 10,000 test images
where the experiment does not test on them (PCA), else the first ``public_fraction`` of a fixed
permutation of the training images, removed from the private training set.
"""

from __future__ import annotations

import numpy as np

from rfed.datasets.mnist import (
    DatasetNotFoundError,
    load_fashion_mnist,
    load_mnist,
    mnist_available,
)

__all__ = ["load_paper_images", "certified_delta", "public_features", "paper_classification",
           "classification_data"]


def load_paper_images(data: str, data_path: str = ""
                      ) -> tuple[str, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The images of a paper-scale run.

    Parameters
    ----------
    data : {"mnist", "fashion-mnist"}
        ``"mnist"``: MNIST when its files are found, else Fashion-MNIST (its stand-in, said in
        the returned name); ``"fashion-mnist"``: Fashion-MNIST.
    data_path : str
        A folder to look in first ("" for the standard places).

    Returns
    -------
    name : str
        The data set read, e.g. ``"Fashion-MNIST (stand-in for MNIST: no MNIST files found)"``.
    train, test : tuple of ndarray
        ``(X, y)``: ``X`` float64 ``(n, 784)`` with pixels in [0, 1], ``y`` int64 ``(n,)``.

    Raises
    ------
    DatasetNotFoundError
        Neither data set is installed (one line saying how to install Fashion-MNIST).
    """
    path = data_path or None
    if data == "mnist" and mnist_available(path):
        (xtr, ytr), (xte, yte) = load_mnist(path, split="both", flatten=True)
        name = "MNIST"
    elif data in ("mnist", "fashion-mnist"):
        try:
            (xtr, ytr), (xte, yte) = load_fashion_mnist(path, split="both", flatten=True)
        except DatasetNotFoundError as exc:
            raise DatasetNotFoundError(f"the paper scale reads MNIST or Fashion-MNIST: {exc}") \
                from None
        name = ("Fashion-MNIST (stand-in for MNIST: no MNIST files found)" if data == "mnist"
                else "Fashion-MNIST")
    else:
        raise ValueError(f"setting 'data' must be 'mnist' or 'fashion-mnist' at the paper "
                         f"scale, got {data!r}")
    return (name, (np.asarray(xtr, dtype=np.float64), np.asarray(ytr, dtype=np.int64)),
            (np.asarray(xte, dtype=np.float64), np.asarray(yte, dtype=np.int64)))


def certified_delta(min_local_size: int, cap: float = 1e-5) -> float:
    """The delta of a certified budget: ``min(cap, 1 / (10 N))`` for the smallest local data
    set ``N`` (the records one agent's ledger accounts).

    Parameters
    ----------
    min_local_size : int
        Records of the smallest agent.
    cap : float
        The largest delta allowed (1e-5).

    Returns
    -------
    float
    """
    return min(float(cap), 1.0 / (10.0 * int(min_local_size)))


def public_features(x_public: np.ndarray, dim: int, radius: float):
    """A per-record feature map learned on PUBLIC images only: centre, project, whiten, bound.

    ``phi(a) = clip_1((radius / sqrt(dim)) Lambda^{-1/2} V^T (a - mu))`` with ``mu`` the public
    mean, ``V`` ``(d, dim)`` and ``Lambda`` the top-``dim`` eigenpairs of the public covariance,
    and ``clip_1`` rescaling a row of norm above 1 onto the unit sphere, so that ``||phi(a)||
    <= 1`` holds for every record (a public bound). On the public images the rms norm before the
    bound is ``radius``.

    Parameters
    ----------
    x_public : ndarray, shape ``(n, d)``
    dim : int
        In ``[1, d]``.
    radius : float
        > 0.

    Returns
    -------
    callable
        ``phi(X)``: ``(m, d) -> (m, dim)``.
    """
    if not 1 <= dim <= x_public.shape[1]:
        raise ValueError(f"setting 'pca_dim' must be in [1, {x_public.shape[1]}], got {dim!r}")
    if not radius > 0:
        raise ValueError(f"setting 'feature_radius' must be > 0, got {radius!r}")
    mean = x_public.mean(axis=0)
    centred = x_public - mean
    vals, vecs = np.linalg.eigh(centred.T @ centred / len(x_public))
    top = np.argsort(vals)[::-1][:dim]
    basis = vecs[:, top] / np.sqrt(np.maximum(vals[top], 1e-12)) * (radius / np.sqrt(dim))

    def phi(x: np.ndarray) -> np.ndarray:
        z = (x - mean) @ basis
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        return z / np.maximum(norms, 1.0)

    return phi


def paper_classification(data: str, data_path: str, public_fraction: float, dim: int,
                         radius: float, rng: np.random.Generator) -> dict:
    """Paper-scale classification data: the private training images, a declared public split
    (the first ``public_fraction`` of a fixed permutation of the training images, removed from
    the private set), the test images, all through :func:`public_features`.

    Returns
    -------
    dict
        ``name``, ``x_train``/``y_train`` (private), ``x_public``/``y_public``,
        ``x_test``/``y_test``, ``n_public``.
    """
    name, (xtr, ytr), (xte, yte) = load_paper_images(data, data_path)
    if not 0 < public_fraction < 1:
        raise ValueError(f"setting 'public_fraction' must be in (0, 1), got {public_fraction!r}")
    order = rng.permutation(len(ytr))
    n_pub = int(round(public_fraction * len(ytr)))
    pub, priv = order[:n_pub], order[n_pub:]
    phi = public_features(xtr[pub], dim, radius)
    return {"name": name, "x_train": phi(xtr[priv]), "y_train": ytr[priv],
            "x_public": phi(xtr[pub]), "y_public": ytr[pub], "x_test": phi(xte),
            "y_test": yte, "n_public": n_pub}


def classification_data(cfg: dict, ctx) -> dict:
    """The images of a classification experiment: scikit-learn's digits (``cfg['data'] ==
    'digits'``, the quick default) or :func:`paper_classification` (``'mnist'`` /
    ``'fashion-mnist'``, the paper scale).

    Parameters
    ----------
    cfg : dict
        The run's settings: ``data``, and for the paper scale ``data_path``,
        ``public_fraction``, ``pca_dim``, ``feature_radius``.
    ctx : RunContext
        Its streams 98 (digits' split) and 95 (the public split) are used.

    Returns
    -------
    dict
        ``x_train`` ``(n, p)``, ``y_train`` ``(n,)``, ``x_test``, ``y_test``, ``public``
        (``(x_public, y_public)`` or None for the digits) and ``name`` (the data set read).
    """
    if cfg["data"] == "digits":
        from rfed.problems.mlp import load_digits_split

        x_tr, y_tr, x_te, y_te = load_digits_split(rng=ctx.rng(98))
        return {"x_train": x_tr, "y_train": y_tr, "x_test": x_te, "y_test": y_te,
                "public": None, "name": "scikit-learn digits (stand-in for MNIST)"}
    data = paper_classification(cfg["data"], cfg["data_path"], cfg["public_fraction"],
                                cfg["pca_dim"], cfg["feature_radius"], ctx.rng(95))
    return {"x_train": data["x_train"], "y_train": data["y_train"], "x_test": data["x_test"],
            "y_test": data["y_test"], "public": (data["x_public"], data["y_public"]),
            "name": data["name"]}
