"""PriRFed on Flower on this machine: a real SuperLink with SuperNodes, or the simulation engine.

    python examples/flower_prirfed.py                 # SuperLink + 2 SuperNodes on loopback
    python examples/flower_prirfed.py --simulation    # Flower's simulation engine (Ray)

The first starts ``flower-superlink`` with TLS (a certificate authority made for the run) and
SuperNode authentication, and two ``flower-supernode`` processes, each reading the rows of its
agents from its own data file (offline: no dependency installation); the second starts
``flower-superlink --simulation``, whose virtual SuperNodes run the ClientApps in Ray actors.
Both run the rfed Flower app (``rfed/engines/flower_app``), stop every process they started,
and the script compares the final point and privacy report with the same run in one process.
docs/guide/flower.md covers a deployment on several machines.
"""

import argparse
import tempfile

import numpy as np

from rfed.engines.flower import DEFAULT_CONFIG, run_in_process, run_in_simulation, run_on_deployment

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulation", action="store_true",
                        help="use Flower's simulation engine (needs rfed[flower-sim])")
    parser.add_argument("--supernodes", type=int, default=2, help="number of SuperNodes")
    args = parser.parse_args()
    config = dict(DEFAULT_CONFIG, rounds=3, epsilon=2.0)
    run = run_in_simulation if args.simulation else run_on_deployment
    with tempfile.TemporaryDirectory() as workdir:
        x_flower, privacy = run(config, n_supernodes=args.supernodes, workdir=workdir)
    x_local, privacy_local = run_in_process(config)
    federation = privacy.pop("federation")
    engine = "simulation engine" if args.simulation else "SuperLink + SuperNodes, TLS"
    print(f"Flower ({engine}): certified eps={privacy['epsilon_certified']:.4f} "
          f"(delta={privacy['delta']:g}); same final point as in one process: "
          f"{np.array_equal(x_flower, x_local)}; same report: {privacy == privacy_local}; "
          f"refused replies: {len(federation['refused'])}")
