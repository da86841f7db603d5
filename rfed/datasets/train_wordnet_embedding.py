"""Train the Lorentz embedding of the WordNet mammal closure shipped with rfed.

Run ``python -m rfed.datasets.train_wordnet_embedding [--out PATH] [--seed S] [--epochs E]`` to
regenerate ``rfed/datasets/data/wordnet_mammals/mammal_lorentz_h2.npz``: Riemannian SGD on
:class:`rfed.manifolds.Hyperboloid` (2-d, as PriRFed's H^2 targets) with the settings of
:data:`SETTINGS`, seeded, about half a minute on one core. The file stores the points, the node
names, every training setting and the reconstruction metrics, so a rerun can be checked bit for
bit against it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from rfed.datasets.wordnet import (
    EMBEDDING_FILE,
    load_wordnet_mammals,
    reconstruction_metrics,
    train_lorentz_embedding,
)

__all__ = ["SETTINGS", "build_embedding", "main"]

#: Settings of the shipped embedding (passed to :func:`train_lorentz_embedding`).
SETTINGS = {
    "seed": 20180710,
    "dim": 2,
    "epochs": 300,
    "lr": 0.1,
    "batch_size": 256,
    "n_negatives": 10,
    "burn_in": 20,
    "burn_in_factor": 0.1,
    "init_scale": 1e-3,
    "max_norm": 15.0,
    "max_step": 0.5,
}


def build_embedding(settings: dict | None = None) -> tuple[np.ndarray, dict]:
    """Train on the mammal closure with ``settings`` (default :data:`SETTINGS`).

    Parameters
    ----------
    settings : dict, optional
        Training settings with the keys of :data:`SETTINGS` (used when omitted).

    Returns
    -------
    points : ndarray, shape ``(1182, dim + 1)``
    info : dict
        The settings plus ``mean_rank`` and ``map`` of the closure reconstruction.
    """
    cfg = dict(SETTINGS if settings is None else settings)
    data = load_wordnet_mammals()
    kwargs = {k: v for k, v in cfg.items() if k != "seed"}
    points = train_lorentz_embedding(data.n_nodes, data.closure, cfg["seed"], **kwargs)
    return points, {**cfg, **reconstruction_metrics(points, data.closure)}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: train and write the npz file.

    Parameters
    ----------
    argv : list of str, optional
        ``--out PATH``, ``--seed N``, ``--epochs N`` (``sys.argv[1:]`` when omitted).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=EMBEDDING_FILE)
    parser.add_argument("--seed", type=int, default=SETTINGS["seed"])
    parser.add_argument("--epochs", type=int, default=SETTINGS["epochs"])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    points, info = build_embedding({**SETTINGS, "seed": args.seed, "epochs": args.epochs})
    names = np.array(load_wordnet_mammals().names)
    np.savez_compressed(args.out, points=points, names=names, **info)
    print(
        f"wrote {args.out}: {len(points)} points, mean rank {info['mean_rank']:.2f},"
        f" MAP {info['map']:.3f}, {time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()
