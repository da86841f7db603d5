"""PriRFed on a real Flower federation on this machine: a SuperLink and SuperNodes on loopback.

    python examples/flower_prirfed.py

Starts ``flower-superlink`` and two ``flower-supernode`` processes (offline: no dependency
installation), runs the rfed Flower app (`rfed/engines/flower_app`), stops every process it
started, and compares the final point and privacy report with the same run in one process.
"""

import tempfile

import numpy as np

from rfed.engines.flower import DEFAULT_CONFIG, run_in_process, run_on_deployment

if __name__ == "__main__":
    config = dict(DEFAULT_CONFIG, rounds=3, epsilon=2.0)
    with tempfile.TemporaryDirectory() as workdir:
        x_flower, privacy = run_on_deployment(config, n_supernodes=2, workdir=workdir)
    x_local, privacy_local = run_in_process(config)
    print(f"Flower: certified eps={privacy['epsilon_certified']:.4f} "
          f"(delta={privacy['delta']:g}); same final point as in one process: "
          f"{np.array_equal(x_flower, x_local)}; same report: {privacy == privacy_local}")
