"""The engine that runs rfed's algorithms: one object, chosen for a block of code.

An engine answers the two questions that depend on where the agents live:

* **Which communicator does a network get?** :meth:`Engine.communicator` builds the
  communicator of every :class:`rfed.networks.Network` made without an explicit one (and of
  DP-DGT's per-run communicator), through :func:`default_communicator`.
* **Which hook checkpoints an experiment's runs?** :meth:`Engine.run_hook` turns the hook an
  experiment installs (its :class:`rfed.experiments.RunContext`, through
  :func:`rfed.algorithms.base.run_hook`) into the one every :meth:`Algorithm.run` reports to.

The base class is the in-process engine (:data:`IN_PROCESS`, in use outside any
:func:`use_engine` block): an :class:`~rfed.networks.comm.InProcessCommunicator` holding every
agent, and the experiment's own hook. The MPI engine (:class:`rfed.engines.mpi.MPIEngine`) gives
each rank an :class:`~rfed.engines.mpi.MPICommunicator` on its block of agents and gathers the
ranks' blocks into rank 0's checkpoints; the Flower engine
(:class:`rfed.engines.flower_runs.FlowerEngine`) sends an experiment's PriRFed runs to a
federation. A new engine subclasses :class:`Engine` and overrides either method::

    from rfed.engines import Engine, use_engine

    class Recording(Engine):
        def run_hook(self, hook):
            return MyHook(hook)      # start_run / end_run, delegating to ``hook``

    with use_engine(Recording()):
        run_experiment("prirfed-fig1")

The engine in use is a context variable: it holds for the current thread (or asyncio task)
and nested blocks restore the outer engine when they end.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, TypeVar

from rfed.networks.comm import Communicator, InProcessCommunicator

__all__ = ["Engine", "IN_PROCESS", "current_engine", "default_communicator", "use_engine"]


class Engine:
    """Where the agents live: the in-process engine, and the base class of the others.

    Subclasses override :meth:`communicator` (where the agents' rows are held and how they
    travel) and :meth:`run_hook` (how an experiment's runs are checkpointed on this engine).
    """

    #: A short name for messages (``"inprocess"``, ``"mpi"``, ``"flower"``).
    name: str = "inprocess"

    def communicator(self, n_agents: int) -> Communicator:
        """A new communicator for a network of ``n_agents`` agents.

        Parameters
        ----------
        n_agents : int
            Agents of the network (all of them, also on an engine holding only a block).

        Returns
        -------
        Communicator
            Here an :class:`~rfed.networks.comm.InProcessCommunicator` holding every agent.
        """
        return InProcessCommunicator(n_agents)

    def run_hook(self, hook: Any) -> Any:
        """The hook that every :meth:`rfed.algorithms.base.Algorithm.run` of an experiment
        reports to, given the experiment's own ``hook`` (see
        :func:`rfed.algorithms.base.run_hook` for the protocol).

        Parameters
        ----------
        hook : object
            The experiment's hook (a :class:`rfed.experiments.RunContext`).

        Returns
        -------
        object
            Here ``hook`` itself.
        """
        return hook

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


#: The in-process engine: the one in use outside any :func:`use_engine` block.
IN_PROCESS = Engine()

_ENGINE: contextvars.ContextVar[Engine] = contextvars.ContextVar("rfed_engine",
                                                                 default=IN_PROCESS)


def current_engine() -> Engine:
    """The engine in use: the innermost :func:`use_engine`'s, else :data:`IN_PROCESS`.

    Returns
    -------
    Engine
    """
    return _ENGINE.get()


def default_communicator(n_agents: int) -> Communicator:
    """A new communicator for ``n_agents`` agents from the engine in use
    (:meth:`Engine.communicator` of :func:`current_engine`): an
    :class:`~rfed.networks.comm.InProcessCommunicator`, or e.g. the MPI engine's
    :class:`rfed.engines.mpi.MPICommunicator` for every network built inside
    :func:`rfed.engines.mpi.mpi_engine`.

    Parameters
    ----------
    n_agents : int
        Agents of the network.

    Returns
    -------
    Communicator
    """
    return current_engine().communicator(n_agents)


EngineT = TypeVar("EngineT", bound=Engine)


@contextlib.contextmanager
def use_engine(engine: EngineT) -> Iterator[EngineT]:
    """Within the block, ``engine`` is the engine in use (:func:`current_engine`).

    Parameters
    ----------
    engine : Engine

    Yields
    ------
    Engine
        ``engine``.

    Raises
    ------
    TypeError
        ``engine`` is not an :class:`Engine`.
    """
    if not isinstance(engine, Engine):
        raise TypeError(f"argument 'engine' must be an rfed Engine (rfed.engines.Engine), got "
                        f"{type(engine).__name__}")
    token = _ENGINE.set(engine)
    try:
        yield engine
    finally:
        _ENGINE.reset(token)
