"""One engine object decides where the agents live and how an experiment's runs are checkpointed.

:func:`rfed.engines.use_engine` sets it for a block;
:func:`rfed.networks.engine.default_communicator` (every network built without a communicator)
and :func:`rfed.algorithms.base.run_hook` (every run of an experiment) both ask it.
"""

from __future__ import annotations

import contextvars
import threading

import numpy as np
import pytest

import rfed.networks as N
from rfed.algorithms.base import _HOOK, run_hook
from rfed.engines import IN_PROCESS, Engine, current_engine, use_engine
from rfed.networks.comm import InProcessCommunicator
from rfed.networks.engine import default_communicator


class _Tagged(InProcessCommunicator):
    """An in-process communicator that says which engine built it."""

    def __init__(self, n_agents: int, tag: str):
        super().__init__(n_agents)
        self.tag = tag


class _Wrapped:
    def __init__(self, inner, tag):
        self.inner, self.tag = inner, tag


class _Custom(Engine):
    name = "custom"

    def __init__(self, tag: str):
        self.tag = tag

    def communicator(self, n_agents):
        return _Tagged(n_agents, self.tag)

    def run_hook(self, hook):
        return _Wrapped(hook, self.tag)


def test_in_process_by_default():
    assert current_engine() is IN_PROCESS
    comm = default_communicator(5)
    assert type(comm) is InProcessCommunicator and comm.n_agents == 5
    hook = object()
    with run_hook(hook):
        assert _HOOK.get() is hook   # the in-process engine installs the experiment's own hook
    assert _HOOK.get() is None


def test_one_engine_gives_the_communicator_and_the_run_hook_and_nests():
    hook = object()
    with use_engine(_Custom("outer")) as outer:
        assert current_engine() is outer
        net = N.Network(N.ring(4), N.metropolis_hastings_weights(N.ring(4)))
        assert isinstance(net.comm, _Tagged) and net.comm.tag == "outer"
        with run_hook(hook):
            assert isinstance(_HOOK.get(), _Wrapped) and _HOOK.get().inner is hook
        with use_engine(_Custom("inner")):
            assert default_communicator(3).tag == "inner"
            with run_hook(hook):
                assert _HOOK.get().tag == "inner"
        assert default_communicator(3).tag == "outer"
    assert current_engine() is IN_PROCESS
    assert type(default_communicator(3)) is InProcessCommunicator


def test_the_engine_is_restored_after_an_error():
    with pytest.raises(RuntimeError, match="boom"), use_engine(_Custom("x")):
        raise RuntimeError("boom")
    assert current_engine() is IN_PROCESS


def test_the_engine_holds_for_its_thread_only():
    seen = []
    with use_engine(_Custom("main")):
        worker = threading.Thread(target=lambda: seen.append(current_engine()))
        worker.start()
        worker.join()
        copied = contextvars.copy_context().run(current_engine)
    assert seen == [IN_PROCESS]          # a new thread starts on the default engine
    assert copied.tag == "main"          # a copied context carries it


@pytest.mark.parametrize("bad", [None, lambda n: InProcessCommunicator(n), "mpi"])
def test_use_engine_refuses_what_is_not_an_engine(bad):
    with pytest.raises(TypeError, match="argument 'engine' must be an rfed Engine"), \
            use_engine(bad):
        pass
    assert current_engine() is IN_PROCESS


def test_an_experiment_reports_its_runs_to_the_engines_hook():
    """``run_experiment`` installs its context through the engine: a custom engine's hook
    sees every algorithm run of the experiment."""
    from rfed.experiments.registry import run_experiment

    class Counting:
        def __init__(self, inner):
            self.inner, self.secure, self.started = inner, inner.secure, 0

        def start_run(self, *args):
            self.started += 1
            return self.inner.start_run(*args)

        def end_run(self, result):
            self.inner.end_run(result)

    hooks = []

    class CountingEngine(Engine):
        def run_hook(self, hook):
            hooks.append(Counting(hook))
            return hooks[-1]

    overrides = {"rounds": 3, "repetitions": 1, "eval_every": 1, "epsilons": [8.0],
                 "n_agents": 4, "dim": 6, "non_private": False}
    with use_engine(CountingEngine()):
        _, ctx = run_experiment("pca-synthetic", overrides=overrides)
    assert len(hooks) == 1 and hooks[0].inner is ctx
    assert hooks[0].started == ctx.runs_started == 1
    assert [r["round"] for r in ctx.records] == [0, 1, 2, 3]   # eval_every 1, 3 rounds


def test_the_mpi_engine_in_one_process():
    """Without mpiexec the MPI engine is one rank holding every agent; its hook wraps the
    experiment's context."""
    pytest.importorskip("mpi4py")
    from rfed.engines.mpi import MPICommunicator, MPIEngine, MPIRunHook, mpi_engine

    with mpi_engine() as engine:
        assert isinstance(engine, MPIEngine) and current_engine() is engine
        comm = default_communicator(6)
        assert isinstance(comm, MPICommunicator) and comm.n_local == comm.n_agents == 6
        hook = type("Ctx", (), {"secure": False})()
        with run_hook(hook):
            installed = _HOOK.get()
        assert isinstance(installed, MPIRunHook) and installed.inner is hook
    assert current_engine() is IN_PROCESS
    np.testing.assert_array_equal(comm.agents, np.arange(6))
