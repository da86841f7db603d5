"""Execution engines past one process.

* :mod:`rfed.engines.mpi` -- decentralized algorithms on MPI through mpi4py (optional extra
  ``rfed[mpi]``);
* :mod:`rfed.engines.flower` -- PriRFed on Flower's deployment engine (optional extra
  ``rfed[flower]``, Python >= 3.11).

Importing this package imports neither mpi4py nor flwr.
"""
