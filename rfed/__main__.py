"""``python -m rfed ...`` runs the ``rfed`` command.

Under MPI: ``mpiexec -n K python -m mpi4py -m rfed run NAME --engine mpi``.
"""

import sys

from rfed.cli import main

sys.exit(main())
