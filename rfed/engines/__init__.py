"""Execution engines: where the agents live and how an experiment's runs are checkpointed.

One object, an :class:`Engine`, chosen for a block with :func:`use_engine`, decides both (see
:mod:`rfed.networks.engine`); outside any block the engine is :data:`IN_PROCESS`.

* :mod:`rfed.engines.mpi` -- decentralized algorithms on MPI through mpi4py
  (:class:`~rfed.engines.mpi.MPIEngine`; optional extra ``rfed[mpi]``);
* :mod:`rfed.engines.flower` -- PriRFed on Flower's deployment engine
  (:class:`~rfed.engines.flower_runs.FlowerEngine`; optional extra ``rfed[flower]``,
  Python >= 3.11).

Importing this package imports neither mpi4py nor flwr.
"""

from rfed.networks.engine import IN_PROCESS, Engine, current_engine, use_engine

__all__ = ["Engine", "IN_PROCESS", "current_engine", "use_engine"]
