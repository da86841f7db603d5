"""Execution engines past one process.

* :mod:`rfed.engines.mpi` -- decentralized algorithms on MPI through mpi4py (optional extra
  ``rfed[mpi]``; importing this package does not import mpi4py).
"""
