"""Bad input gets one line naming the user's argument (the ``--set`` key at the command line, the
constructor argument in the library) and what was expected; nothing is silent.

Each case here was silent or unclear before: a setting refused in the words of an internal
argument (``batch_size``, ``hops``, ``n_samples``, ``steps``), a ``KeyError``, a problem of no
agent evaluating to 0, an MNIST label 11, numpy's own words for strings and ragged data,
``data['a']`` / ``data['sq']`` for the user's ``points`` / ``z``.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from rfed.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, setting, expected", [
    ("pca-synthetic", "batch_fraction=2",
     "setting 'batch_fraction' must be None (full batch) or a fraction of the records in "
     "(0, 1], got 2"),
    ("prirfed-kpca", "batch_fraction=1.5",
     "setting 'batch_fraction' must be None (full batch) or a fraction of the records in "
     "(0, 1], got 1.5"),
    ("pca-synthetic", "n_sampled=40",
     "setting 'n_sampled' must be None (every agent) or an int in [1, n_agents = 16], got 40"),
    ("doadp-logreg", "n_agents=4",
     "setting 'n_agents' must be an int >= 6 (the circulant graph links each agent to its 3 "
     "nearest on each side), got 4"),
    ("doadp-digits", "n_agents=0", "setting 'n_agents' must be an int >= 1, got 0"),
    ("dpdl-digits", "topologies=['bogus']",
     "setting 'topologies' must be a list of names among 'bipartite', 'complete', 'ring'; "
     "got 'bogus'"),
    ("dpdl-digits", "hidden=0", "setting 'hidden' must be an int >= 1, got 0"),
    ("prirfed-fig2", "local_steps=0", "setting 'local_steps' must be an int >= 1, got 0"),
    ("prirfed-fig3", "clip=-1.0", "setting 'clip' must be a public clip level > 0, got -1.0"),
    ("prirfed-fig5", "rsvrg_variant=bogus",
     "setting 'rsvrg_variant' must be one of 'released_snapshot', 'paper'; got 'bogus'"),
    ("prirfed-fig5", "rsvrg_step_sizes=[0.01, 0.0]",
     "setting 'rsvrg_step_sizes' holds numbers > 0 (default [0.01, 0.005, 0.002]), "
     "got [0.01, 0.0]"),
    ("prirfed-fig5", "rsgd_step_sizes=[]",
     "setting 'rsgd_step_sizes' must not be empty (default [0.1, 0.03, 0.01, 0.003])"),
    ("dpdda-svm", "mu=-1.0", "setting 'mu' must be a regularization strength > 0, got -1.0"),
    ("dpdda-svm", "eps_l2=-1.0", "setting 'eps_l2' must be an epsilon > 0, got -1.0"),
    ("dpdgt-ieee14", "q_theta=-1.0", "setting 'q_theta' must be a decay rate in (0, 1], got "
                                     "-1.0"),
    ("dpdgt-ieee14", "delta=2.0", "setting 'delta' must be a delta in (0, 1), got 2.0"),
    ("utility-spd", "tune_repetitions=0", "setting 'tune_repetitions' must be an int >= 1, "
                                          "got 0"),
    ("utility-pca-synthetic", "rsvrg_variant=bogus",
     "setting 'rsvrg_variant' must be one of 'released_snapshot', 'paper'; got 'bogus'"),
    ("doadp-logreg", "grad_bound=1e999", "setting 'grad_bound' must be a finite number, got inf"),
    # the synthetic PCA recipe's settings (were refused by the data generator as "argument")
    ("pca-synthetic", "dim=1", "setting 'dim' must be an int >= 6 (the records' dimension "
                               "d + 1: the recipe's spectrum has 5 structured entries), got 1"),
    ("prirfed-kpca", "eigengap=0.9", "setting 'eigengap' must be a number in (0, 1/1.4) (the "
                                     "recipe's spectrum holds 1 - 1.4 eigengap), got 0.9"),
    ("pca-synthetic", "n_per_agent=10", "setting 'n_per_agent' must be an int >= dim = 25 "
                                        "(each agent's records span the dimensions), got 10"),
    ("prirfed-fig1", "dim=80", "setting 'dim' must be an int in [6, 70] (each agent's 70 "
                               "records span the dimensions), got 80"),
    ("utility-pca-synthetic", "per_agent=3", "setting 'per_agent' must be an int >= dim = 25 "
                                             "(each agent's records span the dimensions), got 3"),
    ("pca-synthetic", "step_size=fast", "setting 'step_size' must be 'paper' (1/(2 L_g), L_g "
                                        "from the public stand-in) or a number > 0, got 'fast'"),
    ("pca-synthetic", "step_size=-1", "setting 'step_size' must be 'paper' (1/(2 L_g), L_g "
                                      "from the public stand-in) or a number > 0, got '-1'"),
    ("pca-synthetic", "clip=0", "setting 'clip' must be 'paper', 'tight' or 'median' (a rule on "
                                "the public stand-in), got '0'"),
])
def test_a_bad_setting_is_refused_naming_it(tmp_path, capsys, name, setting, expected):
    out = tmp_path / "out"
    assert main(["run", name, "--set", setting, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == f"rfed: error: {expected}\n"
    assert not out.exists()


# ---------------------------------------------------------------------------- problems
def test_a_problem_of_no_agent_refuses_to_evaluate_or_run():
    from rfed.algorithms.federated import DPRSGD, PriRFed
    from rfed.problems.linear import L2Regularizer, LogisticRegression
    from rfed.problems.pca import SpherePCA

    pca = SpherePCA(np.zeros((0, 5, 4)))           # (the step to a public-facts shard)
    x = np.eye(4)[0]
    for call in (lambda: pca.cost(x), lambda: pca.grad(x), pca.reference_point):
        with pytest.raises(ValueError, match=r"SpherePCA holds no agent \(its data arrays have "
                                             r"0 rows\)"):
            call()
    alg = PriRFed(DPRSGD(steps=1, clip=1.0, noise_multiplier=1.0), step_size=0.1)
    with pytest.raises(ValueError, match=r"argument 'problem' \(SpherePCA\) holds no agent"):
        alg.run(pca, 3, rng=0, x0=x)
    logreg = LogisticRegression(np.zeros((0, 5, 3)), np.zeros((0, 5)), L2Regularizer(0.1))
    with pytest.raises(ValueError, match="LogisticRegression holds no agent"):
        logreg.cost(np.zeros(3))


def test_problems_name_the_users_argument():
    from rfed.manifolds import Sphere
    from rfed.problems.frechet import FrechetMean
    from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
    from rfed.problems.pca import SpherePCA
    from rfed.problems.softmax import SoftmaxRegression

    cases = [
        (lambda: SpherePCA("abc"), "argument 'z' must hold real numbers, got strings"),
        (lambda: SpherePCA([[[1.0, 2.0]], [[1.0, 2.0, 3.0]]]), "argument 'z' is ragged"),
        (lambda: SpherePCA(np.array([[[1 + 1j, 2.0]]])),
         "argument 'z' must hold real numbers, got complex numbers"),
        (lambda: SpherePCA(np.full((2, 3, 4), 1e200)),
         "argument 'z' has rows whose squared norm overflows"),
        (lambda: SpherePCA(np.array([[[np.nan, 1.0]]])), "argument 'z' contains NaN or inf"),
        (lambda: FrechetMean(Sphere(2), np.array([[[np.nan, 0.0, 1.0]]])),
         "argument 'points' contains NaN or inf"),
        (lambda: LogisticRegression("abc", "def", L2Regularizer(0.1)),
         "argument 'features' must hold real numbers, got strings"),
        (lambda: LogisticRegression(np.ones((2, 3, 4)), [["a"] * 3] * 2, L2Regularizer(0.1)),
         "argument 'labels' must hold real numbers, got strings"),
        (lambda: split_evenly([[1.0, 2.0], [3.0]], [1.0, -1.0], 2),
         "argument 'features' is ragged"),
        (lambda: SoftmaxRegression(np.ones((2, 3, 4)), np.full((2, 3), 1.5)),
         "argument 'labels' must be integers"),
    ]
    for call, expected in cases:
        with pytest.raises(ValueError, match=None) as info:
            call()
        assert expected in str(info.value) and "\n" not in str(info.value), str(info.value)
        assert "data[" not in str(info.value) and "inhomogeneous" not in str(info.value)


def test_accuracy_on_held_out_samples_names_the_argument_of_the_wrong_shape():
    from rfed.problems.linear import L2Regularizer, LogisticRegression
    from rfed.problems.softmax import SoftmaxRegression

    rng = np.random.default_rng(0)
    logreg = LogisticRegression(rng.standard_normal((2, 5, 3)),
                                np.sign(rng.standard_normal((2, 5))), L2Regularizer(0.1))
    softmax = SoftmaxRegression(rng.standard_normal((2, 5, 3)), rng.integers(0, 4, (2, 5)),
                                n_classes=4)
    d = softmax.manifold.dim
    cases = [
        (lambda: logreg.accuracy(np.zeros(3), np.ones((6, 4)), np.ones(6)),
         "argument 'features' must have shape (N, 3) (the problem's 3 features per sample), "
         "got (6, 4)"),
        (lambda: logreg.accuracy(np.zeros(3), np.ones((6, 3)), np.ones(5)),
         "argument 'labels' must have shape (6,) (one per row of 'features'), got (5,)"),
        (lambda: logreg.accuracy(np.zeros(4), np.ones((6, 3)), np.ones(6)),
         "argument 'x' must have shape (3,) (one point), got (4,)"),
        (lambda: logreg.accuracy(np.zeros(3), np.ones((6, 3))),
         "argument 'labels' is required with 'features'"),
        (lambda: softmax.accuracy(np.zeros(d), np.ones((6, 5)), np.zeros(6, dtype=int)),
         "argument 'features' must have shape (N, 3)"),
        (lambda: softmax.accuracy(np.zeros(d), np.ones((6, 3)), np.zeros(7, dtype=int)),
         "argument 'labels' must have shape (6,)"),
    ]
    for call, expected in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert expected in str(info.value), str(info.value)
    # the right shapes give the same value as before the checks
    feats, labs = rng.standard_normal((6, 3)), np.sign(rng.standard_normal(6))
    x = rng.standard_normal(3)
    assert logreg.accuracy(x, feats, labs) == np.mean(np.where(feats @ x >= 0, 1.0, -1.0) == labs)



def test_mlp_accuracy_names_the_argument_of_the_wrong_shape():
    from rfed.problems.mlp import MLPClassifier

    rng = np.random.default_rng(0)
    mlp = MLPClassifier(rng.standard_normal((2, 5, 3)), rng.integers(0, 4, (2, 5)),
                        n_hidden=4, n_classes=4)
    d = mlp.manifold.dim
    for call, expected in [
        (lambda: mlp.accuracy(np.zeros((2, d + 1)), np.ones((6, 3)), np.zeros(6, dtype=int)),
         f"argument 'x' must have shape (*lead, {d}), got (2, {d + 1})"),
        (lambda: mlp.accuracy(np.zeros(d), np.ones((6, 5)), np.zeros(6, dtype=int)),
         "argument 'features' must have shape (N, 3)"),
        (lambda: mlp.accuracy(np.zeros(d), np.ones((6, 3)), np.zeros(7, dtype=int)),
         "argument 'labels' must have shape (6,)"),
    ]:
        with pytest.raises(ValueError) as info:
            call()
        assert expected in str(info.value), str(info.value)
    # batched points give one accuracy each, as the points one at a time
    xs, feats = rng.standard_normal((3, d)), rng.standard_normal((6, 3))
    labs = rng.integers(0, 4, 6)
    np.testing.assert_array_equal(mlp.accuracy(xs, feats, labs),
                                  [mlp.accuracy(x, feats, labs) for x in xs])

# ---------------------------------------------------------------------------- datasets
def _idx(path: Path, magic: int, shape: tuple[int, ...], data: bytes) -> None:
    head = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in shape)
    with gzip.open(path, "wb") as fh:
        fh.write(head + data)


def test_an_mnist_label_out_of_range_is_refused_naming_the_file(tmp_path):
    from rfed.datasets.images import load_mnist_idx

    images, labels = tmp_path / "img.gz", tmp_path / "lab.gz"
    _idx(images, 0x803, (3, 28, 28), bytes(3 * 28 * 28))
    _idx(labels, 0x801, (3,), bytes([1, 11, 2]))
    with pytest.raises(ValueError, match=rf"argument 'labels_path': '{labels}' holds label 11; "
                                         r"expected labels in 0..9 \(n_classes = 10\)"):
        load_mnist_idx(images, labels)
    x, y = load_mnist_idx(images, labels, n_classes=47)      # EMNIST balanced: 47 classes
    assert y.tolist() == [1, 11, 2] and x.shape == (3, 784)


def test_datasets_name_the_users_argument():
    from rfed.datasets.partition import dirichlet_partition, label_counts
    from rfed.datasets.preprocess import flatten_images

    cases = [
        (lambda: dirichlet_partition([[1], [2, 3]], 2, 0.5, np.random.default_rng(0)),
         "argument 'labels' is ragged"),
        (lambda: dirichlet_partition(["a", "b"], 2, 0.5, np.random.default_rng(0)),
         "argument 'labels' must hold integers, got strings"),
        (lambda: label_counts([0.5, 1.0], [np.array([0, 1])]),
         "argument 'labels' must hold integers, got real numbers"),
        (lambda: flatten_images([["a", "b"], ["c", "d"]]),
         "argument 'images' must hold real numbers, got strings"),
    ]
    for call, expected in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert expected in str(info.value), str(info.value)
