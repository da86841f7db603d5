"""The certified-budget privacy-utility companions (issue 9) on a fake tiny Fashion-MNIST.

The fake IDX files are written here (class-dependent bright blocks plus noise, so a linear model
can learn them); the real files are used only by the ``slow`` full-size tests.
"""

import csv
import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

import rfed.datasets.mnist as mnist_mod
import rfed.experiments.utility_decentralized as ud
from rfed.datasets import DatasetNotFoundError, fashion_mnist_available
from rfed.experiments._classify import CENTRALIZED, Projections, partition, start_point
from rfed.experiments.registry import get_experiment, run_experiment
from rfed.experiments.utility_decentralized import (
    certified_delta,
    public_whitening,
    random_relu_features,
    random_relu_weights,
)

DPDGT_W_STAR = np.array([76.7398, 85.6530, 59.1311, 68.9863, 70.4898])


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.asarray(array, dtype=np.uint8).tobytes()


def _fake_fmnist(folder: Path, n_train: int, n_test: int, seed: int = 0) -> None:
    """Learnable fake Fashion-MNIST: class c lights up rows 2c..2c+3 of the image."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for c in range(10):
            images[labels == c, 2 * c: 2 * c + 4, :] = 230
        (folder / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images)))
        (folder / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(labels)))


@pytest.fixture
def fake_data(monkeypatch, tmp_path):
    """Only the fake files are found (no $RFED_DATA, no system folder)."""
    monkeypatch.delenv("RFED_DATA", raising=False)
    for which in ("fashion-mnist", "mnist"):
        title, sub, _, how = mnist_mod._SOURCES[which]
        monkeypatch.setitem(mnist_mod._SOURCES, which, (title, sub, tmp_path / "nowhere", how))
    folder = tmp_path / "fmnist"
    _fake_fmnist(folder, 1200, 300)
    return folder


def test_public_whitening_moments_and_bound():
    rng = np.random.default_rng(0)
    # anisotropic public data: the map must whiten it exactly (closed form: identity covariance
    # times radius^2 / dim, zero mean) while no row exceeds norm 1
    x_pub = rng.standard_normal((500, 12)) * np.geomspace(3.0, 0.1, 12) + 2.0
    dim, radius = 6, 0.2
    phi = public_whitening(x_pub, dim, radius)
    f = phi(x_pub)
    assert f.shape == (500, dim)
    assert np.linalg.norm(f, axis=1).max() < 1.0  # small radius: nothing clipped
    np.testing.assert_allclose(f.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(f.T @ f / len(f), radius ** 2 / dim * np.eye(dim), atol=1e-12)
    # a large radius clips rows onto the unit sphere, direction kept
    big = public_whitening(x_pub, dim, 50.0)(x_pub)
    np.testing.assert_allclose(np.linalg.norm(big, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(big, f / np.linalg.norm(f, axis=1, keepdims=True), rtol=1e-9)
    with pytest.raises(ValueError, match="whiten_radius"):
        public_whitening(x_pub, dim, -1.0)
    with pytest.raises(ValueError, match="pca_dim"):
        public_whitening(x_pub, 13, 1.0)
    with pytest.raises(ValueError, match="pca_dim"):
        public_whitening(np.repeat(x_pub[:3], 10, axis=0), dim, 1.0)  # rank 2 < 6


def test_registered_and_delta_rule():
    for name in ("utility-fmnist-classify", "utility-svm", "utility-dpdgt"):
        assert get_experiment(name).paper
    # rfed list marks the experiments whose default command needs the real files
    assert get_experiment("utility-fmnist-classify").requires == ("fashion-mnist",)
    assert get_experiment("utility-svm").requires == ("fashion-mnist",)
    assert get_experiment("utility-dpdgt").requires == ()
    assert certified_delta(1000) == 1e-5
    assert certified_delta(5000) == 1e-5
    assert certified_delta(20_000) == pytest.approx(5e-6)  # 1 / (10 N) is smaller


def test_missing_fashion_mnist_stops_with_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.delenv("RFED_DATA", raising=False)
    for which in ("fashion-mnist", "mnist"):
        title, sub, _, how = mnist_mod._SOURCES[which]
        monkeypatch.setitem(mnist_mod._SOURCES, which, (title, sub, tmp_path / "nowhere", how))
    with pytest.raises(DatasetNotFoundError, match="dataset-fashion-mnist"):
        run_experiment("utility-fmnist-classify", overrides={"data_path": str(tmp_path)})


def _tiny_classify(fake_data, tmp_path, **changes):
    """utility-fmnist-classify at a tiny size on the fake files (scattering cache in tmp)."""
    overrides = {
        "data_path": str(fake_data), "cache_dir": str(tmp_path / "cache"), "n_agents": 4,
        "epsilons": [8.0], "repetitions": 1, "public_fraction": 0.25, "partitions": ["iid"],
        "steps_dpdpsgd": [0.1, 0.2], "steps_dpsgd": [0.2], "clips": [0.1],
        "batch_fractions": [0.5, 1.0], "epochs_grid": [2.0], "momenta": [0.5],
        "dims": [16, 0], "tail_averages": [0.5], "tune_sweeps": 1, "tune_repetitions": 1,
        "eps_tune": 8.0, "target_epsilon": 8.0, "reference_maxiter": 50}
    overrides.update(changes)
    return run_experiment("utility-fmnist-classify", out_dir=tmp_path / "out",
                          overrides=overrides)


def test_add_remove_plans_its_batch_and_rounds_from_the_declared_sizes(fake_data, tmp_path):
    """Under add/remove the true local sizes are private: the batch and the rounds of a private
    run, and of the public proxy that tunes it, read the declared public sizes, never the
    true ones (a Dirichlet split makes the two differ); replace-one reads the true ones."""
    from rfed.experiments._classify import local_batch, rounds_for

    summary, ctx = _tiny_classify(
        fake_data, tmp_path, partitions=["dirichlet"], dirichlet_alpha=0.5,
        relations=["add_remove_one", "replace_one"], algorithms=["DP-DPSGD"],
        batch_fractions=[0.5], dims=[16], steps_dpdpsgd=[0.1])
    declared = summary["declared_public_sizes"]
    true = {r["partition"]: (r["min_local_size"], r["max_local_size"])
            for r in summary["references"]}["dirichlet"]
    assert true[0] < min(declared) < true[1]  # the two differ: the test can fail
    rows = {r["relation"]: r for r in ctx.tables["privacy_utility"]
            if r.get("epsilon_certified") is not None}
    batch = local_batch(0.5, min(declared))
    assert rows["add_remove_one"]["local_batch"] == batch
    assert rows["add_remove_one"]["rounds"] == rounds_for(2.0, sum(declared), 4, batch)
    assert rows["replace_one"]["local_batch"] == local_batch(0.5, true[0])
    # the public search was planned at the first relation's (add/remove) sizes
    assert {t["local_batch"] for t in ctx.tables["tuning"] if t["algorithm"] == "DP-DPSGD"} \
        == {batch}


def test_classify_tiny_on_scattering_features(fake_data, tmp_path):
    summary, ctx = _tiny_classify(fake_data, tmp_path,
                                  relations=["replace_one", "add_remove_one"])
    rows = ctx.tables["privacy_utility"]
    private = [r for r in rows if r.get("epsilon_certified") is not None]
    assert {(r["algorithm"], r["relation"]) for r in private} == {
        (alg, rel) for alg in ("DP-DPSGD", CENTRALIZED)
        for rel in ("replace_one", "add_remove_one")}
    # under add/remove every agent declares the nominal public size: 900 private images / 4
    assert summary["declared_public_sizes"] == [225] * 4
    for r in private:
        # every private run certifies its target (budget-first), noise not wasted
        assert 0.9 * r["target_epsilon"] <= r["epsilon_certified"] <= r["target_epsilon"] + 1e-9
        assert r["delta"] == summary["delta"] == certified_delta(225)
    # the reports' relation is the one asked
    for label, report in ctx.privacy.items():
        if "certified" in label:
            assert report["neighboring"] == ("add_remove_one" if "add/remove" in label
                                             else "replace_one"), label
    assert not any(r.get("refused") for r in rows)
    # the hyperparameters come from the public split: one choice per trainer, an edge flagged
    tuning = ctx.tables["tuning"]
    for alg in ("DP-DPSGD", CENTRALIZED):
        mine = [t for t in tuning if t["algorithm"] == alg]
        chosen = [t for t in mine if t["chosen"]]
        assert len(chosen) == 1 and "public split" in chosen[0]["chosen_on"]
        assert chosen[0]["public_validation_accuracy"] == max(
            t["public_validation_accuracy"] for t in mine)
        # the public run has the private run's noise std on the averaged clipped gradient
        for t in mine:
            assert t["public_noise_multiplier"] / t["public_batch"] == pytest.approx(
                t["noise_multiplier"] / t["local_batch"])
        # a two-value grid of the step puts its choice on an edge; full batch and every
        # feature are the ends of their domains, not grid edges
        edges = chosen[0]["at_grid_edge"].split(", ") if chosen[0]["at_grid_edge"] else []
        assert ("step" in edges) == (alg == "DP-DPSGD")
        assert "batch_fraction" not in edges
        assert ("dim" in edges) == (chosen[0]["dim"] == 16)
    refs = {r["partition"]: r for r in summary["references"]}
    x_test_labels = np.frombuffer(gzip.decompress(
        (fake_data / "t10k-labels-idx1-ubyte.gz").read_bytes())[8:], dtype=np.uint8)
    assert refs["iid"]["zero_start_test_accuracy"] == pytest.approx(
        100 * np.mean(x_test_labels == 0))
    assert refs["iid"]["nonprivate_optimum_test_accuracy"] > 90
    # the fake classes are easy: every private run at eps 8 learns
    assert all(r["accuracy_mean"] > refs["iid"]["zero_start_test_accuracy"] + 20
               for r in private)
    assert set(summary["targets"]) == {f"{who} {rel}" for who in ("decentralized", "centralized")
                                       for rel in ("replace_one", "add_remove_one")}
    assert summary["targets"]["decentralized add_remove_one"]["target_accuracy"] == 88.7
    for name in ("privacy_utility.png", "privacy_utility.csv", "tuning.csv",
                 "summary_table.csv", "summary.json"):
        assert (tmp_path / "out" / name).exists()
    # every summary row names its relation, in its label and in its accountant (which the
    # generated results page reads)
    with open(tmp_path / "out" / "summary_table.csv", newline="") as fh:
        summary_rows = list(csv.DictReader(fh))
    assert len(summary_rows) == 4
    for row in summary_rows:
        rel = "add/remove" if "add-remove" in row["accountant"] or "add/remove" in row[
            "accountant"] else "replace-one"
        assert row["accountant"].endswith(f"relation: {rel}") and rel in row["setting"]
    assert {r["setting"] for r in summary_rows} == {
        f"iid {alg} {rel} target eps=8" for alg in ("DP-DPSGD", CENTRALIZED)
        for rel in ("replace-one", "add/remove")}


def test_classify_refuses_bad_settings(fake_data, tmp_path):
    with pytest.raises(ValueError, match="'relations'"):
        _tiny_classify(fake_data, tmp_path, relations=["neighbour"])
    with pytest.raises(ValueError, match="'algorithms'"):
        _tiny_classify(fake_data, tmp_path, algorithms=["Adam"])
    with pytest.raises(ValueError, match="'features'"):
        _tiny_classify(fake_data, tmp_path, features="hog")
    with pytest.raises(ValueError, match="'batch_fractions'"):
        _tiny_classify(fake_data, tmp_path, batch_fractions=[1.5])
    with pytest.raises(ValueError, match="'tune_folds'"):
        _tiny_classify(fake_data, tmp_path, tune_folds=3)
    with pytest.raises(ValueError, match="'ema_decays'"):
        _tiny_classify(fake_data, tmp_path, ema_decays=[1.0])
    with pytest.raises(ValueError, match="'public_warm_start'"):
        _tiny_classify(fake_data, tmp_path, public_warm_start="public")
    with pytest.raises(ValueError, match="'warm_start_l2s'"):
        _tiny_classify(fake_data, tmp_path, public_warm_start=True, warm_start_l2s=[-1.0])
    with pytest.raises(ValueError, match="'warm_start_l2s'"):
        _tiny_classify(fake_data, tmp_path, warm_start_l2s=[])


def _warm_data(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    d, m = 12, 60
    return {"x_priv": rng.standard_normal((200, d)).astype(np.float32),
            "y_priv": rng.integers(0, 10, 200), "x_pub": rng.standard_normal((m, d)),
            "y_pub": np.arange(m) % 10, "x_test": rng.standard_normal((30, d)),
            "y_test": rng.integers(0, 10, 30), "feature_bound": 10.0}


def test_public_warm_start_reads_only_the_public_split():
    """The warm start is the L2-regularised softmax fit to the public split: changing a private
    record or a test image leaves it bit for bit, changing a public record moves it; it is
    the stationary point of the regularised objective (gradient written out here); off, the
    start is the zero model."""
    data, lam, dim = _warm_data(), 0.05, 8
    cfg = {"public_warm_start": True, "reference_maxiter": 500}
    proj = Projections(data["x_pub"], [dim])
    x0 = start_point(data, proj, dim, {"warm_start_l2": lam}, cfg)
    assert x0.shape == (dim * 10 + 10,) and np.abs(x0).max() > 0.1
    changed = _warm_data()
    changed["x_priv"][0] += 5.0
    changed["y_priv"][0] = (changed["y_priv"][0] + 1) % 10
    changed["x_test"][0] += 5.0
    assert np.array_equal(start_point(changed, proj, dim, {"warm_start_l2": lam}, cfg), x0)
    public_changed = _warm_data()
    public_changed["x_pub"][0] += 1.0
    assert not np.allclose(
        start_point(public_changed, Projections(public_changed["x_pub"], [dim]), dim,
                    {"warm_start_l2": lam}, cfg), x0)
    # first-order condition of mean CE + (lam / 2) ||W||^2 on the projected public features
    a = proj.apply(data["x_pub"], dim)
    w, b = x0[:dim * 10].reshape(dim, 10), x0[dim * 10:]
    z = a @ w + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    r = (p - np.eye(10)[data["y_pub"]]) / len(a)
    grad = np.concatenate([(a.T @ r + lam * w).ravel(), r.sum(axis=0)])
    assert np.linalg.norm(grad) < 1e-5
    off = {"public_warm_start": False, "reference_maxiter": 500, "warm_start_l2s": [lam]}
    assert not start_point(data, proj, dim, {"warm_start_l2": lam}, off).any()
    # off, the public search has no warm-start axis (the zero start's search, unchanged)
    settings = get_experiment("utility-fmnist-classify").config({"warm_start_l2s": [lam]})
    assert "warm_start_l2" not in ud._grids(settings, "DP-DPSGD", [dim])
    assert list(ud._grids({**settings, "public_warm_start": True}, "DP-DPSGD", [dim]))[0] \
        == "warm_start_l2"


def test_classify_public_warm_start_costs_no_privacy(fake_data, tmp_path):
    """Off (the default), a warm-start grid adds no search axis and no column; on, the runs
    start from the public fit (its test accuracy reported, its L2 strength searched on the
    public split) and the certified privacy is the zero start's: the start is public."""
    grids = {"algorithms": ["DP-DPSGD"], "steps_dpdpsgd": [0.2], "batch_fractions": [1.0],
             "dims": [16], "cache_dir": str(tmp_path / "cache")}
    _, off = _tiny_classify(fake_data, tmp_path / "off", warm_start_l2s=[0.5], **grids)
    assert all("warm_start_l2" not in t for t in off.tables["tuning"])
    assert all("public_warm_start_test_accuracy" not in r for r in off.tables["references"])
    summary, on = _tiny_classify(fake_data, tmp_path / "on", public_warm_start=True,
                                 warm_start_l2s=[0.01, 0.1], **grids)
    tuning = on.tables["tuning"]
    assert {t["warm_start_l2"] for t in tuning} == {0.01, 0.1}
    chosen = [t for t in tuning if t["chosen"]]
    assert len(chosen) == 1
    assert "warm_start_l2=" in summary["hyperparameters"]["DP-DPSGD"]
    ref = summary["references"][0]
    assert ref["public_warm_start_l2"] == f"{chosen[0]['warm_start_l2']:g}"
    # the fake classes are easy: the public fit alone is far above chance
    assert ref["public_warm_start_test_accuracy"] > ref["zero_start_test_accuracy"] + 20
    for a, b in zip(off.tables["privacy_utility"], on.tables["privacy_utility"], strict=True):
        assert (a["epsilon_certified"], a["noise_multiplier"]) == \
            (b["epsilon_certified"], b["noise_multiplier"])
        assert a["accuracy_mean"] != b["accuracy_mean"]


def test_classify_two_fold_tuning_averages_both_ways(fake_data, tmp_path):
    """With tune_folds=2 a configuration's public score is the mean of the first fold's score
    (the one-fold run's, same streams) and of the swapped fold's: twice the two-fold score less
    the one-fold score is an accuracy on the other half, a multiple of 100 / its size."""
    grids = {"algorithms": ["DP-DPSGD"], "steps_dpdpsgd": [0.2], "batch_fractions": [1.0],
             "dims": [0], "ema_decays": [0.0, 0.5], "cache_dir": str(tmp_path / "cache")}
    _, one = _tiny_classify(fake_data, tmp_path / "one", **grids)
    summary, two = _tiny_classify(fake_data, tmp_path / "two", tune_folds=2, **grids)
    first = {t["ema_decay"]: t["public_validation_accuracy"] for t in one.tables["tuning"]}
    both = {t["ema_decay"]: t for t in two.tables["tuning"]}
    assert set(first) == set(both) == {0.0, 0.5}
    n_val = int(both[0.0]["chosen_on"].split("(")[1].split()[0]) // 2   # the public half
    for decay, row in both.items():
        assert "2 folds" in row["chosen_on"]
        other = 2 * row["public_validation_accuracy"] - first[decay]
        assert 0.0 <= other <= 100.0
        assert other * n_val / 100 == pytest.approx(round(other * n_val / 100), abs=1e-6)
    # the decay is one of the hyperparameters the private run reports
    assert "ema_decay=" in summary["hyperparameters"]["DP-DPSGD"]


def test_classify_tiny_on_pixels_with_every_trainer(fake_data, tmp_path):
    summary, ctx = _tiny_classify(
        fake_data, tmp_path, features="pixels", pca_dim=16,
        algorithms=["DO-ADP", "noisy DSGD", "DPDL", "DP-DPSGD", CENTRALIZED],
        steps_doadp=[0.1], steps_dsgd=[0.1], steps_dpdl=[0.1], steps_dpdpsgd=[0.1],
        steps_dpsgd=[0.1],
        batch_fractions=[0.25], comm_configs=[[1.0, 1.0], [1.0, 0.25]], eps_comm=8.0,
        decentralized_sampling="without_replacement",
        relations=["replace_one", "add_remove_one"])
    rows = ctx.tables["privacy_utility"]
    private = [r for r in rows if r.get("epsilon_certified")]
    assert {r["algorithm"] for r in private} == {"DO-ADP", "noisy DSGD", "DPDL", "DP-DPSGD",
                                                 CENTRALIZED}
    # fixed-size draws have no add/remove bound: every decentralized trainer refuses it, the
    # row saying why; the centralized companion (Poisson) runs
    refused = {r["algorithm"]: r["refused"] for r in rows if r.get("refused")}
    assert set(refused) == {"DO-ADP", "noisy DSGD", "DPDL", "DP-DPSGD"}
    assert all("add_remove_one" in why for why in refused.values())
    assert {r["algorithm"] for r in private if r["relation"] == "add_remove_one"} == {
        CENTRALIZED}
    # one-point grids: nothing at an edge; the pixel features have one dimension
    assert not any(t["at_grid_edge"] for t in ctx.tables["tuning"])
    assert {t["dim"] for t in ctx.tables["tuning"]} == {16}
    comm = ctx.tables["doadp_communication_accuracy"]
    assert len(comm) == 2 and comm[1]["bytes_sent_mean"] < comm[0]["bytes_sent_mean"]
    assert (tmp_path / "out" / "doadp_communication_accuracy.png").exists()


def test_random_relu_features_are_public_and_bounded():
    w = random_relu_weights(16, 64, 4.0, seed=3)
    # a function of the seed alone: the same bits again, whatever data it is applied to
    assert np.array_equal(w, random_relu_weights(16, 64, 4.0, seed=3))
    assert w.shape == (16, 64) and np.std(w) == pytest.approx(4.0, rel=0.1)
    x = np.random.default_rng(0).standard_normal((50, 16))
    phi = random_relu_features(x, w)
    assert phi.shape == (50, 64) and np.all(phi >= 0)
    # unit rows: the public feature bound ||phi(x)|| <= 1 of the clipped gradients holds
    assert np.allclose(np.linalg.norm(phi, axis=1), 1.0)
    assert np.array_equal(random_relu_features(np.zeros((2, 16)), w), np.zeros((2, 64)))
    with pytest.raises(ValueError, match="random_features"):
        random_relu_weights(16, 0, 4.0, seed=3)
    with pytest.raises(ValueError, match="feature_scale"):
        random_relu_weights(16, 8, -1.0, seed=3)


def test_classify_tiny_with_random_features(fake_data, tmp_path):
    summary, ctx = _tiny_classify(
        fake_data, tmp_path, features="pixels", pca_dim=16, random_features=48,
        algorithms=[CENTRALIZED], batch_fractions=[0.25])
    refs = {r["partition"]: r for r in summary["references"]}
    # 48 random features of the 16 public directions still separate the easy fake classes
    assert refs["iid"]["nonprivate_optimum_test_accuracy"] > 90


def test_dirichlet_partition_is_non_iid_and_covers_the_data():
    labels = np.random.default_rng(0).integers(0, 10, 2000)
    parts = partition(labels, 5, "dirichlet", 0.25, np.random.default_rng(1))
    assert sorted(np.concatenate(parts).tolist()) == list(range(2000))
    shares = np.array([np.bincount(labels[p], minlength=10) / len(p) for p in parts])
    assert shares.max() > 0.3  # Dirichlet(0.25): some agent is dominated by a few classes
    with pytest.raises(ValueError, match="partition"):
        partition(labels, 5, "shards", 0.25, np.random.default_rng(1))


def test_svm_tiny_fmnist_binary(fake_data):
    summary, ctx = run_experiment("utility-svm", overrides={
        "data_path": str(fake_data), "datasets": ["fmnist-binary"], "classes": [1, 8],
        "n_agents": 4, "n_active": 2, "epochs": 1, "epsilons": [8.0], "repetitions": 1,
        "pca_dim": 16, "public_fraction": 0.3, "gammas_l2": [1.0, 10.0], "mus_l2": [1e-3, 1e-2],
        "gammas_l1": [1.0], "eps_tune": 8.0})
    rows = ctx.tables["privacy_utility"]
    assert {r["panel"] for r in rows} == {"fmnist-binary l2-SVM", "fmnist-binary l1-SVM"}
    tuning = ctx.tables["tuning"]
    # (strength, gamma) chosen jointly on the public split: one choice per panel, from its grid
    l2 = [t for t in tuning if t["panel"] == "fmnist-binary l2-SVM"]
    assert {(t["strength"], t["gamma"]) for t in l2} == {
        (mu, g) for mu in (1e-3, 1e-2) for g in (1.0, 10.0)}
    for panel in ("fmnist-binary l2-SVM", "fmnist-binary l1-SVM"):
        chosen = [t for t in tuning if t["panel"] == panel and t["chosen"]]
        best = max(t["public_validation_accuracy"] for t in tuning if t["panel"] == panel)
        assert len(chosen) == 1 and chosen[0]["public_validation_accuracy"] == best
        # two-point grids put the l2 choice on an edge; the l1 grids are single points
        assert chosen[0]["at_grid_edge"] == panel.endswith("l2-SVM")
        row = next(r for r in rows if r["panel"] == panel)
        assert (row["regularization"], row["gamma"]) == (chosen[0]["strength"],
                                                         chosen[0]["gamma"])
    for r in rows:
        assert 0.9 * r["target_epsilon"] <= r["epsilon_certified"] <= r["target_epsilon"] + 1e-9
    ref = summary["references"]["fmnist-binary l2-SVM"]
    assert ref["non-private optimum"] > 90  # classes 1 and 8 light up disjoint rows


def test_svm_epsilon_standin_subsample(tmp_path, monkeypatch):
    monkeypatch.setenv("RFED_CACHE", str(tmp_path / "cache"))
    seen, original = [], ud._projection

    def recording_projection(x_public, dim):
        seen.append(x_public.shape)
        return original(x_public, dim)

    monkeypatch.setattr(ud, "_projection", recording_projection)
    summary, ctx = run_experiment("utility-svm", overrides={
        "datasets": ["epsilon-standin"], "eps_rows": 3000, "eps_features": 20,
        "eps_subsample": 1000, "n_agents": 4, "n_active": 2, "epochs": 1, "epsilons": [4.0],
        "repetitions": 1, "regularizers": ["l2", "l1"], "gammas_l2": [10.0], "mus_l2": [1e-2],
        "gammas_l1": [0.1], "public_fraction": 0.1, "eps_tune": 4.0, "eps_pca_dim": 8})
    rows = ctx.tables["privacy_utility"]
    assert [r["panel"] for r in rows] == ["epsilon-standin l2-SVM", "epsilon-standin l1-SVM"]
    note = summary["data"]["epsilon-standin"]
    assert "subsample of 1000 rows" in note and "projection to 8 dims" in note
    # the projection is fitted on the public split only: 10 % of the 800 non-test rows
    assert seen == [(80, 20)]
    for r in rows:
        assert 0.9 * 4.0 <= r["epsilon_certified"] <= 4.0 + 1e-9
    # references (LP / QP optima of the projected problem, zero start) are numbers
    assert all(np.isfinite(v) for ref in summary["references"].values() for v in ref.values())


def test_svm_checks_bands():
    def row(eps, mean, lo, hi, risk):
        return {"target_epsilon": eps, "accuracy_mean": mean, "accuracy_min": lo,
                "accuracy_max": hi, "excess_risk_mean": risk, "excess_risk_start": 1.0}

    refs = {"zero start": 50.0}
    # the mean dips from eps 1 to eps 2, but eps 2's band [68, 74] reaches eps 1's [70, 72]
    rows = [row(2.0, 71.0, 68.0, 74.0, 0.4), row(0.5, 60.0, 58.0, 62.0, 0.8),
            row(1.0, 71.5, 70.0, 72.0, 0.5)]
    c = ud._svm_checks("p", rows, refs)
    assert c["largest_epsilon"] == 2.0 and c["accuracy_improves_at_largest_eps"]
    assert c["excess_risk_improves_at_largest_eps"]
    assert not c["monotone_means"] and c["monotone_within_bands"]
    # below the band: not monotone within the bands
    rows[0] = row(2.0, 66.0, 65.0, 69.0, 0.4)
    assert not ud._svm_checks("p", rows, refs)["monotone_within_bands"]
    # accuracy above the start but excess risk above the start's
    rows[0] = row(2.0, 80.0, 79.0, 81.0, 1.2)
    c = ud._svm_checks("p", rows, refs)
    assert c["accuracy_improves_at_largest_eps"] and not c["excess_risk_improves_at_largest_eps"]
    rows[0] = row(2.0, 49.0, 48.0, 50.0, 0.4)
    assert not ud._svm_checks("p", rows, refs)["accuracy_improves_at_largest_eps"]


def test_dpdgt_tiny():
    summary, ctx = run_experiment("utility-dpdgt", overrides={
        "iterations": 300, "epsilons": [0.5, 8.0], "mc_runs": 2})
    rows = summary["privacy_utility"]
    for r in rows:
        assert 0.9 * r["target_epsilon"] <= r["epsilon_certified"] <= r["target_epsilon"] + 1e-9
        assert r["adjacency_radius"] == 0.01
    # a larger budget means smaller noise (theta0 calibrated for the planned iterations)
    assert rows[0]["theta0"] > rows[1]["theta0"]
    assert summary["nonprivate_sq_error"] < summary["start_sq_error"]


needs_fmnist = pytest.mark.skipif(not fashion_mnist_available(),
                                  reason="Fashion-MNIST files not installed")


@pytest.mark.slow
@needs_fmnist
def test_classify_full_size(tmp_path):
    summary, ctx = run_experiment("utility-fmnist-classify", out_dir=tmp_path)
    rows = [r for r in summary["privacy_utility"] if r["target_epsilon"] is not None]
    for r in rows:
        assert r["epsilon_certified"] <= r["target_epsilon"] + 1e-9
    assert summary["target"] is not None


#: the documented real-data runs (docs/guide/features-and-utility.md) in one process: eps 3,
#: both relations, both partitions, one repetition, all 3,969 scattering features, the default
#: grids searched in two coordinate sweeps with two public runs per configuration, no
#: non-private runs of the trainers (the documented runs are one process per trainer and
#: relation, each tuned at its own noise)
DOCUMENTED_RUN = {
    "epsilons": [3.0], "repetitions": 1, "relations": ["replace_one", "add_remove_one"],
    "tune_sweeps": 2, "tune_repetitions": 2, "nonprivate_runs": False,
    "partitions": ["iid", "dirichlet"]}


@pytest.mark.slow
@needs_fmnist
def test_classify_documented_run(tmp_path):
    # the documented runs (about an hour of CPU): every private run certifies its budget under
    # the relation asked and learns far beyond the zero start
    summary, _ = run_experiment("utility-fmnist-classify", out_dir=tmp_path,
                                overrides=DOCUMENTED_RUN)
    ref = summary["references"][0]
    private = [r for r in summary["privacy_utility"] if r["epsilon_certified"] is not None]
    assert {(r["algorithm"], r["relation"]) for r in private} == {
        (a, rel) for a in ("DP-DPSGD", CENTRALIZED) for rel in ("replace_one", "add_remove_one")}
    assert {r["partition"] for r in private} == {"iid", "dirichlet"}
    for r in private:
        assert r["epsilon_certified"] <= 3.0 + 1e-9
        assert r["accuracy_mean"] > ref["zero_start_test_accuracy"] + 50
    assert set(summary["targets"]) == {f"{who} {rel}" for who in ("decentralized", "centralized")
                                       for rel in ("replace_one", "add_remove_one")}


def _assert_svm_must_show(summary: dict, n_panels: int) -> None:
    # issue 9's must-show per panel at the defaults (publicly tuned): the private curve beats
    # its start at eps 8, in accuracy and in the regularized objective, and never gets worse
    # beyond the bands as eps grows
    checks = summary["checks"]
    assert len(checks) == n_panels
    for check in checks:
        assert check["accuracy_improves_at_largest_eps"], check
        assert check["excess_risk_improves_at_largest_eps"], check
        assert check["monotone_within_bands"], check


@pytest.mark.slow
@needs_fmnist
def test_svm_full_size(tmp_path):
    # all four panels (about 20 CPU-minutes)
    summary, _ = run_experiment("utility-svm", out_dir=tmp_path)
    _assert_svm_must_show(summary, 4)


@pytest.mark.slow
def test_svm_epsilon_standin_full_size_learns(tmp_path):
    # the paper-size stand-in alone, no download needed (about 10 CPU-minutes)
    summary, _ = run_experiment("utility-svm", out_dir=tmp_path,
                                overrides={"datasets": ["epsilon-standin"]})
    _assert_svm_must_show(summary, 2)


@pytest.mark.slow
def test_dpdgt_full_size(tmp_path):
    # 40 Monte Carlo runs per budget (about 5 CPU-minutes): the heavy-tailed error's mean
    # falls as epsilon grows and ends far below the start's
    summary, _ = run_experiment("utility-dpdgt", out_dir=tmp_path)
    rows = summary["privacy_utility"]
    assert len(rows) == 5
    means = [r["sq_error_mean"] for r in sorted(rows, key=lambda r: r["target_epsilon"])]
    assert all(b <= a for a, b in zip(means, means[1:], strict=False)), means
    assert means[-1] < 1e-2 * summary["start_sq_error"]


def test_epsilon_axis_names_relation_and_delta():
    rows = [{"relation": "replace_one", "delta": 1e-5, "epsilon_certified": 2.9},
            {"relation": "add_remove_one", "delta": 2e-6, "epsilon_certified": 3.0},
            {"relation": "replace_one", "delta": 1e-5, "epsilon_certified": 0.9}]
    name = lambda r: ud._RELATIONS[r["relation"]]  # noqa: E731
    assert ud._epsilon_axis_label(rows[:1], name) == (
        "certified epsilon, replace-one, delta = 1e-05 (whole run)")
    assert ud._epsilon_axis_label(rows, name) == (
        "certified epsilon, replace-one, delta = 1e-05; add/remove, delta = 2e-06 (whole run)")
    assert ud._epsilon_axis_label([dict(rows[0], epsilon_certified=None)], name) == (
        "certified epsilon (whole run)")


def _proxies_for(warm_labels_true: bool, train_labels_true: bool, seed: int = 0):
    """Public proxies on separable synthetic classes (one fold each way round is not needed:
    one fold), whose warm-start part and training part have true or shuffled labels."""
    from rfed.experiments._classify import PublicProxy
    from rfed.privacy.budget import PrivacyBudget
    rng = np.random.default_rng(seed)
    d, m = 20, 300
    centres = 0.6 * rng.standard_normal((10, d))

    def part(true: bool):
        y = rng.integers(0, 10, m)
        x = centres[y] + rng.standard_normal((m, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x, (y if true else rng.permutation(y))
    (wx, wy), (tx, ty), (vx, vy) = part(warm_labels_true), part(train_labels_true), part(True)
    cfg = {"public_warm_start": True, "reference_maxiter": 200, "graph_degree": 1,
           "decentralized_sampling": "poisson"}
    proxy = PublicProxy(CENTRALIZED, tx, ty, vx, vy, np.array([3000] * 4), 4, cfg,
                        Projections(np.vstack([wx, tx, vx]), [d]), 1.0,
                        PrivacyBudget(2.0, 1e-5), 1,
                        lambda *s: np.random.default_rng([seed, *s]), warm_x=wx, warm_y=wy)
    grids = {"warm_start_l2": [0.01], "step": [1.0, 4.0], "clip": [1.0],
             "batch_fraction": [0.5], "epochs": [20.0], "momentum": [0.5], "dim": [d],
             "tail_average": [0.5], "ema_decay": [0.0]}
    return [proxy], grids


def test_public_search_prefers_the_warm_start_when_private_steps_only_add_noise():
    """When the records the public run trains on carry no label information (shuffled
    labels: a private step can only add noise to the start), the search's choice is the warm
    start alone; when the warm start learned nothing (its part shuffled) and the training part
    is informative, the search keeps the private phase. Without the candidate the search has
    no way to say no private phase is better."""
    proxies, grids = _proxies_for(warm_labels_true=True, train_labels_true=False)
    noise_only = ud.public_search(proxies, grids, 1, warm_start_alone=True)
    assert noise_only["prefers_warm_start_alone"]
    assert noise_only["alone_best"]["public_score"] > 50.0   # far above chance (10 %)
    assert noise_only["alone_best"]["public_score"] > noise_only["best_score"]
    proxies, grids = _proxies_for(warm_labels_true=False, train_labels_true=True)
    informative = ud.public_search(proxies, grids, 1, warm_start_alone=True)
    assert not informative["prefers_warm_start_alone"]
    assert informative["best_score"] > informative["alone_best"]["public_score"] + 20
    # off, the candidate is not scored and the private phase is the only choice
    off = ud.public_search(*_proxies_for(True, False), 1, warm_start_alone=False)
    assert off["alone_rows"] == [] and not off["prefers_warm_start_alone"]
    assert off["best"] == noise_only["best"]


_THIRDS = {"algorithms": [CENTRALIZED], "batch_fractions": [1.0], "dims": [16],
           "public_warm_start": True, "warm_start_l2s": [0.01, 0.1],
           "public_split_parts": 3, "warm_start_alone": True, "tune_folds": 2}


def test_classify_public_thirds_refuses_bad_settings(fake_data, tmp_path):
    """Thirds and the warm-start-alone candidate need the warm start; at most as many
    rotations as parts; each refusal names its setting."""
    for bad, match in (({"public_warm_start": False}, "'public_split_parts'"),
                       ({"public_warm_start": False, "public_split_parts": 2},
                        "'warm_start_alone'"),
                       ({"tune_folds": 4}, "'tune_folds'"),
                       ({"public_split_parts": 4}, "'public_split_parts'")):
        with pytest.raises(ValueError, match=match):
            _tiny_classify(fake_data, tmp_path / "bad", **{**_THIRDS, **bad})


@pytest.mark.slow
def test_classify_public_thirds_and_warm_start_alone(fake_data, tmp_path):
    """public_split_parts = 3 fits the warm start to one third, trains on the next and scores
    on the last; warm_start_alone adds the warm start alone to the tuning table (one chosen
    row in all) and the choice to the summary."""
    grids = _THIRDS
    summary, ctx = _tiny_classify(fake_data, tmp_path / "thirds", **grids)
    tuning = ctx.tables["tuning"]
    alone = [t for t in tuning if t["private_phase"] is False]
    assert {(t["warm_start_l2"], t["dim"]) for t in alone} == {(0.01, 16), (0.1, 16)}
    assert sum(bool(t["chosen"]) for t in tuning) == 1
    assert all("in thirds" in t["chosen_on"] and "2 rotations" in t["chosen_on"]
               for t in tuning)
    choice = summary["public_choice"][CENTRALIZED]
    best_alone = max(t["public_validation_accuracy"] for t in alone)
    assert choice["public_score_warm_start_alone"] == best_alone
    assert choice["private_phase"] == (choice["public_score_with_private_phase"] >= best_alone)
    chosen = next(t for t in tuning if t["chosen"])
    assert chosen["private_phase"] is choice["private_phase"]


def test_mix_toward_start_is_the_interpolation_and_refuses_bad_fractions():
    """x0 + mix (x - x0); mix 1 is the output itself; a fraction outside (0, 1] is refused
    naming the setting."""
    from rfed.experiments._classify import mix_toward_start
    rng = np.random.default_rng(3)
    x, x0 = rng.standard_normal(7), rng.standard_normal(7)
    assert mix_toward_start(x, x0, 1.0) is x
    assert np.allclose(mix_toward_start(x, x0, 0.25), 0.75 * x0 + 0.25 * x)
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="'warm_start_mixes'"):
            mix_toward_start(x, x0, bad)


def test_public_proxy_scores_a_mix_on_the_same_trained_outputs():
    """The public score of warm_start_mix m is the validation accuracy of x0 + m (x - x0) for
    the outputs x of the unmixed configuration (trained once: the mix is post-processing), and
    m = 1 scores as the configuration without the axis."""
    from rfed.experiments._classify import mix_toward_start
    proxies, grids = _proxies_for(warm_labels_true=False, train_labels_true=True)
    proxy = proxies[0]
    hp = {k: v[0] for k, v in grids.items()}
    plain, _ = proxy.score(hp)
    assert proxy.score({**hp, "warm_start_mix": 1.0})[0] == plain
    xs = proxy.outputs(hp)
    assert len(proxy._outputs) == 1 and xs is not None
    x0 = proxy.start(hp, hp["dim"])
    mixed, _ = proxy.score({**hp, "warm_start_mix": 0.3})
    assert len(proxy._outputs) == 1          # not trained again
    val = proxy.projections.apply(proxy.val_x, hp["dim"])
    by_hand = np.mean([100.0 * proxy.problem(hp["dim"]).accuracy(
        mix_toward_start(x, x0, 0.3), val, proxy.val_y) for x in xs])
    assert mixed == pytest.approx(by_hand)
    # the warm start learned nothing here (its labels shuffled): pulling toward it costs
    assert mixed < plain


def test_classify_warm_start_mixes_axis_and_refusals(fake_data, tmp_path, monkeypatch):
    """warm_start_mixes adds the axis warm_start_mix to the public search (last) only when it
    is other than [1.0]; it needs the public warm start; bad fractions are refused naming the
    setting; the chosen mix is reported with the hyperparameters and applied to every private
    run's output, toward that run's start."""
    from rfed.experiments._classify import mix_toward_start
    applied = []

    def recording(x, x0, mix):
        applied.append((float(mix), bool(np.any(x0))))
        return mix_toward_start(x, x0, mix)
    monkeypatch.setattr(ud, "mix_toward_start", recording)
    settings = get_experiment("utility-fmnist-classify").config({})
    assert "warm_start_mix" not in ud._grids({**settings, "public_warm_start": True},
                                             "DP-DPSGD", [16])
    grids = ud._grids({**settings, "public_warm_start": True,
                       "warm_start_mixes": [0.5, 1.0]}, "DP-DPSGD", [16])
    assert list(grids)[-1] == "warm_start_mix" and grids["warm_start_mix"] == [0.5, 1.0]
    for bad in ({"public_warm_start": True, "warm_start_mixes": [0.0]},
                {"public_warm_start": True, "warm_start_mixes": []},
                {"public_warm_start": True, "warm_start_mixes": [True]},
                {"warm_start_mixes": [0.5]}):
        with pytest.raises(ValueError, match="'warm_start_mixes'"):
            _tiny_classify(fake_data, tmp_path / "bad", **bad)
    summary, ctx = _tiny_classify(
        fake_data, tmp_path / "on", algorithms=["DP-DPSGD"], steps_dpdpsgd=[0.2],
        batch_fractions=[1.0], dims=[16], public_warm_start=True, warm_start_l2s=[0.1],
        warm_start_mixes=[0.5, 1.0])
    tuning = ctx.tables["tuning"]
    assert {t["warm_start_mix"] for t in tuning} == {0.5, 1.0}
    chosen = next(t for t in tuning if t["chosen"])
    assert f"warm_start_mix={chosen['warm_start_mix']:g}" in summary["hyperparameters"][
        "DP-DPSGD"]
    # every run of the trainer (its non-private run and one private repetition) output the
    # mixed model, toward the public warm start (not the zero model)
    assert applied == [(chosen["warm_start_mix"], True)] * 2
