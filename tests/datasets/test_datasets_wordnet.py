"""WordNet mammals: shipped files, eigenmap features, the Lorentz embedding trained by rfed."""

from importlib.resources import files

import numpy as np
import pytest
import scipy.linalg
from scipy.sparse.csgraph import laplacian

from rfed.datasets import (
    TEST_WORD,
    laplacian_eigenmap,
    load_wordnet_embedding,
    load_wordnet_mammals,
    reconstruction_metrics,
    train_lorentz_embedding,
    wordnet_prediction_data,
)
from rfed.datasets.wordnet import EMBEDDING_FILE
from rfed.manifolds import Hyperboloid


@pytest.fixture(scope="module")
def data():
    return load_wordnet_mammals()


def test_counts_and_structure(data):
    assert data.n_nodes == 1182
    assert data.closure.shape == (6542, 2)
    assert data.hypernyms.shape == (1182, 2)
    assert data.names[data.root] == "mammal.n.01"
    assert data.root not in set(data.closure[:, 0]) and data.root not in set(data.hypernyms[:, 0])
    assert "primate.n.02" in data.names and TEST_WORD == "primate.n.02"
    with pytest.raises(ValueError, match="name"):
        data.index("unicorn.n.01")


def test_closure_is_transitive_closure_of_hypernyms(data):
    n = data.n_nodes
    # reachability by repeated squaring of (I + A): the hierarchy is much shallower than 2^5
    m = np.eye(n)
    m[data.hypernyms[:, 0], data.hypernyms[:, 1]] = 1.0
    for _ in range(5):
        m = ((m @ m) > 0).astype(float)
    reach = (m > 0) & ~np.eye(n, dtype=bool)
    expected = {tuple(e) for e in np.argwhere(reach)}
    assert {tuple(e) for e in data.closure} == expected


def test_license_travels_with_the_data():
    folder = files("rfed.datasets") / "data" / "wordnet_mammals"
    text = (folder / "WORDNET_LICENSE").read_text()
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in text
    assert (folder / "mammal_closure.tsv").is_file() and (folder / "mammal_hypernyms.tsv").is_file()
    assert (folder / EMBEDDING_FILE.name).is_file()


def test_laplacian_eigenmap_solves_the_generalized_problem(data):
    v = laplacian_eigenmap(data.n_nodes, data.closure, 3)
    assert v.shape == (1182, 3)
    adj = np.zeros((1182, 1182))
    adj[data.closure[:, 0], data.closure[:, 1]] = 1
    adj = adj + adj.T
    deg = adj.sum(1)
    lap = np.diag(deg) - adj
    # D-orthonormal, D-orthogonal to the constant vector
    np.testing.assert_allclose(v.T @ (deg[:, None] * v), np.eye(3), atol=1e-8)
    np.testing.assert_allclose(deg @ v, 0.0, atol=1e-8)
    # eigenvalues: the 2nd..4th smallest of the normalized Laplacian (scipy's csgraph)
    lam_ref = scipy.linalg.eigh(laplacian(adj, normed=True), subset_by_index=[1, 3],
                                eigvals_only=True)
    lam = np.einsum("ij,ij->j", v, lap @ v)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-8)
    np.testing.assert_allclose(lap @ v, deg[:, None] * v * lam, atol=1e-8)
    s = laplacian_eigenmap(data.n_nodes, data.closure, 3, scale="std")
    np.testing.assert_allclose(s, v / v.std(0))
    with pytest.raises(ValueError, match="not connected"):
        laplacian_eigenmap(4, np.array([[0, 1], [2, 3]]), 1)
    with pytest.raises(ValueError, match="scale"):
        laplacian_eigenmap(4, np.array([[0, 1], [1, 2], [2, 3]]), 1, scale="l2")


def test_reconstruction_metrics_hand_example():
    man = Hyperboloid(1)
    t = np.array([0.0, 1.0, 3.0])
    pts = np.stack([np.cosh(t), np.sinh(t)], axis=1)
    # node 0: its positive 1 (distance 1) is closer than node 2 (distance 3): rank 1, AP 1
    assert reconstruction_metrics(pts, np.array([[0, 1]])) == {"mean_rank": 1.0, "map": 1.0}
    # positive 2 lies behind the non-positive 1: rank 2, AP 1/2
    assert reconstruction_metrics(pts, np.array([[0, 2]])) == {"mean_rank": 2.0, "map": 0.5}
    assert man.dist(pts[0], pts[2]) == pytest.approx(3.0)


def test_short_training_run_beats_random_by_far(data):
    man = Hyperboloid(2)
    x = train_lorentz_embedding(data.n_nodes, data.closure, 0, epochs=30, lr=0.3, burn_in=10)
    assert x.shape == (1182, 3)
    assert man.point_violation(x).max() < 1e-8
    got = reconstruction_metrics(x, data.closure)
    rand = reconstruction_metrics(man.random_point(1, data.n_nodes), data.closure)
    # a random embedding ranks a true ancestor near the middle of ~1000 unrelated nodes
    assert rand["mean_rank"] > 300
    assert got["mean_rank"] < rand["mean_rank"] / 10
    assert got["map"] > 10 * rand["map"]
    # hierarchy: ancestors lie closer to the origin than their descendants
    r = man.dist(man.origin, x)
    assert np.mean(r[data.closure[:, 1]] < r[data.closure[:, 0]]) > 0.9


def test_training_is_reproducible(data):
    a = train_lorentz_embedding(data.n_nodes, data.closure, 3, epochs=2)
    b = train_lorentz_embedding(data.n_nodes, data.closure, np.random.default_rng(3), epochs=2)
    c = train_lorentz_embedding(data.n_nodes, data.closure, 4, epochs=2)
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_shipped_embedding(data):
    man = Hyperboloid(2)
    x, info = load_wordnet_embedding()
    assert x.shape == (1182, 3)
    assert man.point_violation(x).max() < 1e-8
    got = reconstruction_metrics(x, data.closure)
    assert got["mean_rank"] == pytest.approx(info["mean_rank"])
    assert got["map"] == pytest.approx(info["map"])
    assert got["mean_rank"] < 10 and got["map"] > 0.5
    r = man.dist(man.origin, x)
    assert np.mean(r[data.closure[:, 1]] < r[data.closure[:, 0]]) > 0.95
    assert np.argmin(r) == data.root


def test_prediction_data(data):
    p = wordnet_prediction_data()
    assert p["features"].shape == (1181, 3) and p["targets"].shape == (1181, 3)
    assert TEST_WORD not in p["names"] and len(p["names"]) == 1181
    assert data.names[p["test_index"]] == TEST_WORD
    x, _ = load_wordnet_embedding()
    np.testing.assert_array_equal(p["test_target"], x[p["test_index"]])
    np.testing.assert_allclose(np.concatenate([p["features"], p["test_feature"][None]]).std(0), 1.0)


@pytest.mark.slow
def test_shipped_embedding_is_reproduced_by_the_script(data):
    from rfed.datasets.train_wordnet_embedding import SETTINGS, build_embedding

    # SGD over 300 epochs amplifies rounding differences (another numpy, a rewritten Exp), so
    # the retrained points need not match bit for bit; their quality must
    x, info = build_embedding()
    shipped, shipped_info = load_wordnet_embedding()
    assert {k: shipped_info[k] for k in SETTINGS} == SETTINGS
    assert info["mean_rank"] < 1.25 * shipped_info["mean_rank"]
    assert info["map"] > shipped_info["map"] - 0.1
    r = Hyperboloid(2).dist(Hyperboloid(2).origin, x)
    assert np.mean(r[data.closure[:, 1]] < r[data.closure[:, 0]]) > 0.95
