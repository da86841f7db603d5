"""The "write your own private algorithm" example (``examples/noisy_gossip_sgd.py``) and its
tutorial (``docs/tutorials_src/plot_5_write_your_own_private_algorithm.py``): the algorithm is
short and uses public names only, certifies between 0.9 and 1 times its target, passes an audit
that catches a broken variant, and gives the same digest in one process and on 1-3 MPI ranks."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed.networks import Network, ring
from rfed.privacy import PrivacyBudget, epsilon_lower_bound
from rfed.problems.linear import LogisticRegression

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "noisy_gossip_sgd.py"
TUTORIAL = ROOT / "docs" / "tutorials_src" / "plot_5_write_your_own_private_algorithm.py"
MPIEXEC = Path(sys.executable).with_name("mpiexec")


def _example():
    spec = importlib.util.spec_from_file_location("noisy_gossip_sgd", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _class_node(path: Path) -> ast.ClassDef:
    tree = ast.parse(path.read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef)
                and n.name == "NoisyGossipSGD")


@pytest.mark.parametrize("path", [EXAMPLE, TUTORIAL], ids=["example", "tutorial"])
def test_the_algorithm_is_short_and_imports_no_private_name(path):
    node = _class_node(path)
    assert node.end_lineno - node.lineno + 1 <= 50
    for imp in ast.walk(ast.parse(path.read_text())):
        if isinstance(imp, ast.ImportFrom):
            assert not any(part.startswith("_") for part in imp.module.split(".")), imp.module
            assert not any(a.name.startswith("_") for a in imp.names), imp.module
        elif isinstance(imp, ast.Import):
            assert not any(part.startswith("_") for a in imp.names
                           for part in a.name.split(".")), [a.name for a in imp.names]


def test_the_tutorial_builds_the_example_s_algorithm():
    assert ast.dump(_class_node(TUTORIAL)) == ast.dump(_class_node(EXAMPLE))


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_the_example_certifies_between_0_9_and_1_of_its_target(epsilon):
    ex = _example()
    algorithm, problem = ex.build(PrivacyBudget(epsilon=epsilon, delta=1e-5))
    res = algorithm.run(problem, rng=np.random.default_rng(7), x0=np.zeros(ex.DIM),
                        eval_every=ex.N_ROUNDS, with_reference=False)
    rep = res.privacy
    assert rep["rounds"] == rep["planned_rounds"] == ex.N_ROUNDS   # the rounds given once
    assert 0.9 * epsilon <= rep["epsilon_certified"] <= epsilon * (1 + 1e-12)
    assert rep["private"] and rep["target_epsilon"] == epsilon and rep["delta"] == 1e-5
    # one release of the clipped sum per agent and round: the ledger holds every round
    assert algorithm.privacy(res.state)["noise_multiplier"] > 0
    assert np.all(res.state.ledger.counts == ex.N_ROUNDS)
    with pytest.raises(RuntimeError):     # past the planned run the budget would be exceeded
        algorithm.step(problem, res.state)


@pytest.mark.parametrize("mistake", ["no advance", "two releases"])
def test_a_step_that_would_release_twice_in_one_round_is_refused_before_drawing(mistake):
    # the minibatch and the noise are keyed by (seed, agent, state.t): a step that returns a
    # state that did not advance, or calls the private gradient twice, would draw them again
    # (the same noise on gradients at other points: their difference would be noise-free)
    ex = _example()

    class Mistaken(ex.NoisyGossipSGD):
        def step(self, problem, state):
            g = self.gradient(problem, state)
            if mistake == "two releases":
                g = g + self.gradient(problem, state)
                return state.advance(x=state.x - self.lr * g)
            state.x = state.x - self.lr * g
            return state

    algorithm, problem = ex.build()
    mistaken = Mistaken(algorithm.network, lr=0.2, clip=1.0, batch_size=10,
                        budget=PrivacyBudget(epsilon=2.0, delta=1e-5), n_rounds=ex.N_ROUNDS)
    with pytest.raises(RuntimeError, match=r"already released in round t=0; .* call it once "
                                           r"per step and return state.advance"):
        mistaken.run(problem, rng=np.random.default_rng(7), x0=np.zeros(ex.DIM))


def test_a_state_class_of_your_own_not_registered_is_refused_before_the_first_round(tmp_path):
    # a checkpointed run holds its state in an rfed state file, which holds registered types
    # only: an unregistered state class is refused before round 1 (it was refused at the first
    # checkpoint, after checkpoint_every rounds had run), and nothing is written
    import dataclasses

    from rfed.algorithms.decentralized import PrivateState
    from rfed.state import UnsupportedStateError

    ex = _example()

    @dataclasses.dataclass
    class CountingState(PrivateState):
        steps: int = 0

    rounds = []

    class WithOwnState(ex.NoisyGossipSGD):
        state_class = CountingState

        def step(self, problem, state):
            rounds.append(state.t)
            return super().step(problem, state)

    algorithm, problem = ex.build()
    own = WithOwnState(algorithm.network, lr=0.2, clip=1.0, batch_size=10,
                       budget=PrivacyBudget(epsilon=2.0, delta=1e-5), n_rounds=ex.N_ROUNDS)
    path = tmp_path / "ck.rfed"
    with pytest.raises(UnsupportedStateError, match=r"CountingState.*register_state_type"):
        own.run(problem, rng=np.random.default_rng(7), x0=np.zeros(ex.DIM), checkpoint=path,
                checkpoint_every=2)
    assert rounds == [] and not path.exists()
    # without a checkpoint nothing is saved, so nothing is checked: the run goes through
    own.run(problem, 3, rng=np.random.default_rng(7), x0=np.zeros(ex.DIM))
    assert rounds == [0, 1, 2]


def test_a_subclass_that_skips_the_contract_s_init_is_told_so():
    ex = _example()

    class NoSuperInit(ex.NoisyGossipSGD):
        def __init__(self, network, **privacy):
            self.network, self.lr, self.gradient = network, 0.2, None

    algorithm, problem = ex.build()
    for n_rounds in (None, 3):   # the planned rounds are the noise's; init needs the noise too
        with pytest.raises(TypeError, match=r"NoSuperInit.__init__ must call "
                                            r"super\(\).__init__\(network, \*\*privacy\)"):
            NoSuperInit(algorithm.network).run(problem, n_rounds, rng=1, x0=np.zeros(ex.DIM))


def test_the_example_passes_an_audit_that_catches_a_broken_variant():
    """One round of 6000 agents, half holding a canary record (the worst case of replace-one at
    the public start); the broken variant adds 4x less noise than its ledger records."""
    ex, n, q = _example(), 3000, 4
    canary = np.arange(2 * n) >= n
    labels = np.ones((2 * n, q))
    labels[canary, 0] = -1.0
    problem = LogisticRegression(np.ones((2 * n, q, 1)), labels)
    budget = PrivacyBudget(epsilon=1.5, delta=1e-5)
    bounds = {}
    for factor in (1.0, 0.25):
        alg = ex.NoisyGossipSGD(Network(ring(2 * n)), lr=1.0, clip=0.5, batch_size=None,
                                budget=budget, n_rounds=1)
        state = alg.init(problem, np.zeros(1), np.random.default_rng(0))
        state.noise_std *= factor
        state = alg.step(problem, state)
        certified = alg.privacy(state)["epsilon_certified"]
        assert 0.9 * 1.5 <= certified <= 1.5
        bounds[factor] = epsilon_lower_bound(state.x[~canary, 0], state.x[canary, 0],
                                             1e-5).epsilon_lower
    assert bounds[1.0] < certified < bounds[0.25]


def _one_process_digest() -> str:
    ex = _example()
    algorithm, problem = ex.build()
    res = algorithm.run(problem, rng=np.random.default_rng(7), x0=np.zeros(ex.DIM),
                        eval_every=ex.N_ROUNDS, with_reference=False)
    return f"digest {ex.digest(res.state.x)}; {res.privacy['label']}"


@pytest.mark.parametrize("ranks", [
    pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow), 3])
def test_the_example_is_bit_identical_on_mpi_ranks(ranks):
    if not MPIEXEC.exists():
        pytest.skip("no mpiexec beside the interpreter")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py",
                          str(EXAMPLE), "--mpi"], capture_output=True, text=True, timeout=300,
                         env=env, check=True)
    printed = [line for line in out.stdout.splitlines() if line.startswith("digest")]
    assert len(printed) == 1
    assert printed[0].split("; target")[0] == _one_process_digest()
