"""The generic run loop (rfed.algorithms.base): checkpoints resume bit for bit on every
algorithm, one divergence rule, and the generic argument checks."""

import pickle
import signal

import numpy as np
import pytest

from rfed.algorithms.base import (
    Algorithm,
    check_step_size,
    load_checkpoint,
    step_size_at,
)
from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL, DPDPSGD, NoisyDSGD
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.datasets.synthetic import make_epsilon_like, make_pca_synthetic
from rfed.manifolds import Euclidean, Sphere
from rfed.networks.graphs import complete, ieee14_digraph, ring
from rfed.networks.mixing import uniform_weights
from rfed.networks.network import Network
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import ieee14_problem
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.problems.pca import SpherePCA
from rfed.state import dumps_state, loads_state, register_state_type


def _pca():
    return SpherePCA(make_pca_synthetic(4, 30, 6, 0.3, 0))


def _logreg():
    x, y = make_epsilon_like(240, 5, 1)
    f, lab = split_evenly(x, y, 6, np.random.default_rng(1))
    return LogisticRegression(f, lab, L2Regularizer(0.1))


def _cases():
    lam = 4.0
    return {
        "prirfed-dprsgd": (lambda: PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=1.0,
                                                  paper_epsilon=1.0, paper_delta=1e-5),
                                           n_sampled=2,
                                           step_size=0.2 / lam), _pca, None),
        "prirfed-dprsvrg": (lambda: PriRFed(DPRSVRG(steps=2, inner_steps=3,
                                                    clip=1.0, clip_full=1.0, paper_epsilon=1.0,
                                                    paper_delta=1e-5),
                                            n_sampled=1, step_size=0.05), _pca, None),
        "doadp": (lambda: DOADP(Network(ring(6)), alpha=0.1, p=0.8, k=3, sigma=0.3,
                                grad_bound=1.0), _logreg, np.zeros(5)),
        "noisy-dsgd": (lambda: NoisyDSGD(Network(ring(6)), alpha=0.1, sigma=0.3,
                                         grad_bound=1.0), _logreg, np.zeros(5)),
        "dpdda": (lambda: DPDDA(Network(complete(6)), n_active=4, schedule="general",
                                gamma=0.2, sigma=0.1, clip=1.0), _logreg, np.zeros(5)),
        "dpdl": (lambda: DPDL(Network(ring(6), uniform_weights(ring(6))), lr=0.1, beta=0.7,
                              alpha=2.0, batch_size=8, clip=0.5, sigma=0.5), _logreg,
                 np.zeros(5)),
        "dpdpsgd": (lambda: DPDPSGD(Network(ring(6), uniform_weights(ring(6))), lr=0.1,
                                    batch_size=8, clip=0.5, sigma=0.5), _logreg, np.zeros(5)),
        "dpdgt": (lambda: DPDGT(ieee14_digraph("paper"),
                                theta_xi=LaplaceSchedule(0.05, 0.995),
                                theta_zeta=LaplaceSchedule(0.05, 0.995)),
                  ieee14_problem, None),
    }


CASES = _cases()

class _Keep:
    """A checkpoint sink keeping each payload as the bytes of a checkpoint file."""

    def __init__(self):
        self.saved = []

    def __call__(self, payload):
        self.saved.append(dumps_state(payload, kind="algorithm-checkpoint"))


def _loaded(data: bytes) -> dict:
    return loads_state(data, kind="algorithm-checkpoint")


def _same(a, b):
    assert len(a.history) == len(b.history)
    for ra, rb in zip(a.history, b.history, strict=True):
        assert ra.keys() == rb.keys()
        for k in ra:
            assert np.array_equal(np.asarray(ra[k]), np.asarray(rb[k]), equal_nan=True), k
    assert np.array_equal(a.x, b.x)


@pytest.mark.parametrize("name", sorted(CASES))
def test_checkpoint_resume_is_bit_identical(name):
    make, problem_factory, x0 = CASES[name]
    problem = problem_factory()
    full = make().run(problem, 12, rng=5, x0=x0, eval_every=3)
    keep = _Keep()
    make().run(problem, 12, rng=5, x0=x0, eval_every=3, checkpoint_every=4, checkpoint=keep)
    assert len(keep.saved) == 2                      # rounds 4 and 8 (not the last round)
    payload = _loaded(keep.saved[0])
    assert payload["round"] == 4 and len(payload["history"]) == 2   # rounds 0 and 3
    resumed = make().run(problem, 12, rng=999, x0=x0, eval_every=3, resume_from=payload)
    _same(full, resumed)


def test_checkpoint_to_a_path_and_resume(tmp_path):
    make, problem_factory, _ = CASES["prirfed-dprsgd"]
    problem = problem_factory()
    full = make().run(problem, 10, rng=1, eval_every=2)
    path = tmp_path / "ck.pkl"
    make().run(problem, 10, rng=1, eval_every=2, checkpoint_every=6, checkpoint=path)
    assert load_checkpoint(path)["round"] == 6
    _same(full, make().run(problem, 10, rng=1, eval_every=2, resume_from=path))
    with pytest.raises(ValueError, match="n_rounds"):
        make().run(problem, 11, rng=1, eval_every=2, resume_from=path)
    (tmp_path / "junk.pkl").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(ValueError, match="resume_from"):
        make().run(problem, 10, rng=1, resume_from=tmp_path / "junk.pkl")


def test_a_checkpoint_path_without_its_folder_is_refused_before_any_round(tmp_path):
    make, problem_factory, _ = CASES["prirfed-dprsgd"]
    rounds = []
    for target, message in ((tmp_path / "no-such-folder" / "ck.npz", "does not exist"),
                            (tmp_path, "is a folder")):
        with pytest.raises(ValueError, match=f"argument 'checkpoint': .*{message}"):
            make().run(problem_factory(), 10, rng=1, checkpoint_every=6, checkpoint=target,
                       callback=lambda t, record, state: rounds.append(t))
    assert rounds == []


class _Walk(Algorithm):
    """Gradient-free test algorithm: x <- x * factor (Euclidean) or a sphere point drifting."""

    name = "walk"

    def __init__(self, factor, blow_up_at=None, error=None, off_manifold_at=None):
        self.factor, self.blow_up_at, self.error = factor, blow_up_at, error
        self.off_manifold_at = off_manifold_at

    def init(self, problem, x0, rng):
        return {"x": np.array(x0, dtype=float), "t": 0}

    def step(self, problem, state):
        t = state["t"] + 1
        if self.error is not None and t == self.blow_up_at:
            raise self.error
        x = state["x"] * self.factor
        if t == self.blow_up_at:
            x = x * np.inf
        if t == self.off_manifold_at:
            x = x * 1.5
        return {"x": x, "t": t}

    def output(self, problem, state):
        return state["x"]

    def iterates(self, state):
        return state["x"]

    def metrics(self, problem, state, with_reference):
        return {"norm": float(np.linalg.norm(state["x"]))}


class _Problem:
    def __init__(self, manifold):
        self.manifold = manifold


@pytest.mark.parametrize("error", [None, FloatingPointError("overflow"),
                                   np.linalg.LinAlgError("not positive definite")])
def test_divergence_stops_the_run_and_keeps_the_history(error):
    res = _Walk(2.0, blow_up_at=5, error=error).run(_Problem(Euclidean(3)), 10, rng=0,
                                                    x0=np.ones(3), eval_every=2)
    assert res.diverged and res.diverged_round == 5
    assert [r["round"] for r in res.history] == [0, 2, 4]
    assert np.array_equal(res.x, np.ones(3) * 2.0**4)      # the last finite state
    assert "round 5" in res.diverged_reason
    ok = _Walk(2.0).run(_Problem(Euclidean(3)), 10, rng=0, x0=np.ones(3))
    assert not ok.diverged and ok.diverged_round is None


def test_off_manifold_iterates_count_as_divergence_at_recorded_rounds():
    x0 = np.array([1.0, 0.0, 0.0])
    res = _Walk(1.0, off_manifold_at=4).run(_Problem(Sphere(2)), 10, rng=0, x0=x0,
                                            eval_every=2)
    assert res.diverged and res.diverged_round == 4 and "manifold" in res.diverged_reason
    # not a recorded round: the check is skipped (cheap rounds), the next one catches it
    res = _Walk(1.0, off_manifold_at=3).run(_Problem(Sphere(2)), 10, rng=0, x0=x0,
                                            eval_every=2)
    assert res.diverged and res.diverged_round == 4


def test_sigint_is_deferred_to_the_end_of_the_round_and_checkpointed():
    class _Interrupting(_Walk):
        def step(self, problem, state):
            if state["t"] == 3:
                signal.raise_signal(signal.SIGINT)   # Ctrl-C in the middle of round 4
            return super().step(problem, state)

    keep = _Keep()
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _Interrupting(2.0).run(_Problem(Euclidean(2)), 10, rng=0, x0=np.ones(2),
                               checkpoint=keep)
    payload = _loaded(keep.saved[-1])
    assert payload["round"] == 4                      # round 4 finished before stopping
    assert np.array_equal(payload["state"]["x"], np.ones(2) * 16.0)
    assert signal.getsignal(signal.SIGINT) is before          # the handler is restored
    res = _Walk(2.0).run(_Problem(Euclidean(2)), 10, rng=0, resume_from=payload)
    assert np.array_equal(res.x, np.ones(2) * 2.0**10) and len(res.history) == 11


@pytest.mark.parametrize("bad", [True, 0, -3, 2.0, "5"])
def test_n_rounds_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="n_rounds"):
        _Walk(1.0).run(_Problem(Euclidean(1)), bad, rng=0, x0=np.ones(1))


@pytest.mark.parametrize("bad", ["0.1", "paper", True, 0.0, -1.0, float("nan"), float("inf")])
def test_step_size_values_are_checked(bad):
    with pytest.raises(ValueError, match="step_size"):
        check_step_size(bad)


def test_callable_step_size_is_checked_each_round():
    sched = check_step_size(lambda t: 1.0 - 0.5 * t)
    assert step_size_at(sched, 1) == 0.5
    with pytest.raises(ValueError, match="'step_size' returned -0.5 at round 3"):
        step_size_at(sched, 3)
    with pytest.raises(ValueError, match="step_size"):
        step_size_at(lambda t: "fast", 1)


def test_a_failing_privacy_report_after_the_rounds_keeps_the_rounds():
    class _BadReport(_Walk):
        def privacy(self, state):
            raise OverflowError("math range error")

    keep = _Keep()
    with pytest.raises(OverflowError):
        _BadReport(2.0).run(_Problem(Euclidean(2)), 6, rng=0, x0=np.ones(2), checkpoint=keep)
    payload = _loaded(keep.saved[-1])
    assert payload["round"] == 6 and len(payload["history"]) == 7
    res = _Walk(2.0).run(_Problem(Euclidean(2)), 6, rng=0, resume_from=payload)
    assert np.array_equal(res.x, np.ones(2) * 64.0) and len(res.history) == 7


def test_run_checks_a_step_size_attribute_and_each_value_of_a_schedule():
    make, problem_factory, _ = CASES["prirfed-dprsgd"]
    problem = problem_factory()
    alg = make()
    alg.step_size = "0.1"
    with pytest.raises(ValueError, match="'step_size' must be a positive number"):
        alg.run(problem, 3, rng=0)
    alg.step_size = lambda t: 3.0 - t                   # not positive from t = 3 on
    with pytest.raises(ValueError, match="'step_size' returned 0.0 at round 3"):
        alg.run(problem, 6, rng=0)
    alg.step_size = lambda t: 0.1 / (t + 1)
    assert len(alg.run(problem, 6, rng=0, eval_every=3).history) == 3


@register_state_type
class _CountsPickling:
    """A run result that counts how often it is serialized."""

    pickled = 0

    def __init__(self, value):
        self.value = value

    def __getstate__(self):
        type(self).pickled += 1
        return {"value": self.value}


def test_a_checkpoint_serializes_each_completed_run_once_and_loads_it_back(tmp_path):
    from rfed.experiments.registry import RunContext, read_checkpoint

    ctx = RunContext(seed=0, out_dir=tmp_path / "run")
    ctx.open("test", {})
    _CountsPickling.pickled = 0
    for i in range(4):
        _, _, saver, _ = ctx.start_run(None, None, 10, 1)
        for _ in range(3):
            saver({"state": i})
        ctx.end_run(_CountsPickling(i))
    # 4 completed runs, 16 checkpoints: each result is written once, not once per checkpoint
    assert _CountsPickling.pickled == 4
    ck = read_checkpoint(tmp_path / "run")
    assert [(r.value, n) for r, n in ck["completed"]] == [(i, 0) for i in range(4)]
