"""Time of noise calibration for the events of dpdl-digits and prirfed-fig2 (cold and warm).

Run on demand: ``python benchmarks/bench_accountant.py [--cache-dir DIR]``.

The calibration calls of each experiment are captured by starting the experiment at its default
settings and stopping it at its first calibration (DPDL: ``gaussian_groups_calibration`` of
:mod:`rfed.algorithms.decentralized.dpdl`; PriRFed: ``calibrate`` of
:mod:`rfed.algorithms.federated.accounting`). Each captured call is then timed (CPU time,
``time.process_time``):

* ``cold``: every in-memory cache cleared and an empty on-disk cache (a first run);
* ``warm disk``: in-memory caches cleared, the on-disk cache filled by the cold call (a second
  run of the same configuration in a new process);
* ``warm memory``: nothing cleared (a repetition within one run).

The calibrated noise multiplier of the three must agree exactly.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from rfed.algorithms.decentralized import _privacy as dec_privacy
from rfed.algorithms.decentralized import dpdl as dpdl_module
from rfed.algorithms.federated import accounting as fed_accounting
from rfed.experiments.registry import run_experiment
from rfed.privacy import accountants


class _Captured(Exception):
    pass


def capture_dpdl() -> tuple:
    """The arguments of dpdl-digits' first ``gaussian_groups_calibration``."""
    calls = []
    original = dpdl_module.gaussian_groups_calibration

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        raise _Captured

    dpdl_module.gaussian_groups_calibration = spy
    try:
        run_experiment("dpdl-digits", overrides={"non_private": False})
    except _Captured:
        pass
    finally:
        dpdl_module.gaussian_groups_calibration = original
    return calls[0]


def capture_prirfed() -> tuple:
    """The arguments of prirfed-fig2's first ``calibrate``."""
    calls = []
    original = fed_accounting.calibrate

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        raise _Captured

    fed_accounting.calibrate = spy
    try:
        run_experiment("prirfed-fig2")
    except _Captured:
        pass
    finally:
        fed_accounting.calibrate = original
    return calls[0]


def clear_memory() -> None:
    accountants.clear_rdp_cache(memory=True, disk=False)
    dec_privacy._calibrate_groups.cache_clear()


def timed(fn) -> tuple[float, object]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=None,
                        help="on-disk cache to use (default: a fresh temporary folder)")
    args = parser.parse_args()
    cases = {
        "dpdl-digits (groups)": (capture_dpdl(),
                                 lambda a, k: dec_privacy.gaussian_groups_calibration(*a, **k)),
        "prirfed-fig2 (calibrate)": (capture_prirfed(),
                                     lambda a, k: fed_accounting.calibrate(*a, **k)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        accountants.set_rdp_cache_dir(args.cache_dir or tmp)
        print(f"{'events':<26} {'cold [s]':>9} {'warm disk [s]':>14} {'warm memory [s]':>16} "
              f"{'z':>20}")
        for name, ((a, k), call) in cases.items():
            accountants.clear_rdp_cache(memory=True, disk=True)
            dec_privacy._calibrate_groups.cache_clear()
            cold, out_cold = timed(lambda a=a, k=k, call=call: call(a, k))
            clear_memory()
            disk, out_disk = timed(lambda a=a, k=k, call=call: call(a, k))
            memory, out_memory = timed(lambda a=a, k=k, call=call: call(a, k))
            z = [o[0] if isinstance(o, tuple) else o.noise_multiplier
                 for o in (out_cold, out_disk, out_memory)]
            assert z[0] == z[1] == z[2], z
            print(f"{name:<26} {cold:>9.3f} {disk:>14.3f} {memory:>16.3f} {z[0]!r:>20}")


if __name__ == "__main__":
    main()
