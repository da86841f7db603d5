"""RDP accountant speed: one curve (dp-accounting against rfed's vectorized curves) and noise
calibration (cold and warm in-memory caches, and cold with either curve engine).

Run on demand: ``python benchmarks/bench_accountant.py [--repeat 7]``.

**Curves.** The first subsampled event of dpdl-digits, doadp-logreg, prirfed-fig1 and
prirfed-fig5 at their default settings is captured (each experiment is started and stopped at
its first subsampled RDP curve; all four sample without replacement) and its curve over
dp-accounting's default orders is timed with dp-accounting's ``RdpAccountant`` and with
:mod:`rfed.privacy._rdp`, interleaved, median of ``--repeat`` CPU times
(``time.process_time``). No default experiment uses Poisson sampling; the Poisson rows time the
Poisson-subsampled Gaussian at the same noise multiplier and rate.

**Calibration.** The calibration calls of dpdl-digits (``gaussian_groups_calibration`` of
:mod:`rfed.algorithms.decentralized.dpdl`) and of prirfed-fig1 and prirfed-fig2 (``calibrate``
of :mod:`rfed.algorithms.federated.accounting`) are captured the same way, then timed (CPU):

* ``cold dp-accounting`` / ``cold rfed``: empty caches, curves computed by dp-accounting (the
  code before issue 13) or by rfed, interleaved (median of ``--repeat``);
* ``warm memory``: nothing cleared (a repetition within one run).

There is no disk cache (a file could lower a printed epsilon): a new process computes its
curves again, which the ``cold rfed`` column times.

The noise multipliers of the rfed calls must agree exactly; the dp-accounting one is
printed beside them (it differs where dp-accounting's curve is off, see
``tests/privacy/test_rdp_vectorized.py``).

**PLD.** The first PLD accountant prirfed-fig1 builds (a calibration trial: an unsampled
Gaussian composed over the planned run, replace-one), and the same event under add/remove, are
built with dp-accounting's ``PLDAccountant`` and with rfed's (the inverse privacy loss on the
connect-the-dots grid as one array expression), interleaved, median of ``--repeat`` CPU times;
their epsilons at the experiment's delta must be the same float.

``--tables`` picks the tables (default: all three).
"""

from __future__ import annotations

import argparse
import logging
import time

import dp_accounting as dpa
import numpy as np
from _timing import interleaved_medians
from dp_accounting import pld as dpa_pld
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from rfed.algorithms.decentralized import _privacy as dec_privacy
from rfed.algorithms.decentralized import dpdl as dpdl_module
from rfed.algorithms.federated import accounting as fed_accounting
from rfed.experiments.registry import get_experiment, run_experiment
from rfed.privacy import accountants
from rfed.privacy.accountants import DEFAULT_RDP_ORDERS, EventSpec


class _Captured(Exception):
    pass


def capture_call(module, attribute: str, name: str, overrides=None) -> tuple:
    """The arguments of the first call of ``module.attribute`` when experiment ``name`` runs."""
    calls = []
    original = getattr(module, attribute)

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        raise _Captured

    setattr(module, attribute, spy)
    try:
        run_experiment(name, overrides=overrides)
    except _Captured:
        pass
    finally:
        setattr(module, attribute, original)
    return calls[0]


def capture_event(name: str) -> tuple[EventSpec, str]:
    """The first subsampled event (and its relation) whose RDP curve experiment ``name`` asks
    for at its default settings."""
    overrides = {"non_private": False} if name == "dpdl-digits" else None
    original = accountants._rdp_vector
    found = []

    def spy(spec, neighboring, orders):
        if spec.sampling != "none":
            found.append((spec, neighboring))
            raise _Captured
        return original(spec, neighboring, orders)

    spy.cache_clear = original.cache_clear
    accountants._rdp_vector = spy
    try:
        run_experiment(name, overrides=overrides)
    except _Captured:
        pass
    finally:
        accountants._rdp_vector = original
    return found[0]


def dp_accounting_curve(spec: EventSpec, neighboring: str, orders) -> np.ndarray:
    """The curve as computed before issue 13: dp-accounting's ``RdpAccountant``."""
    acc = dpa_rdp.RdpAccountant(orders=list(orders),
                                neighboring_relation=accountants._NR[neighboring])
    acc.compose(spec.to_dp_event("rdp", neighboring))
    return np.asarray(acc.rdp, dtype=float)


def clear_memory() -> None:
    accountants.clear_rdp_cache()
    dec_privacy._calibrate_groups.cache_clear()


def timed(fn) -> tuple[float, object]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def noise_of(out) -> float:
    return out[0] if isinstance(out, tuple) else out.noise_multiplier


def curve_table(repeat: int) -> None:
    print(f"{'event':<52} {'dp-accounting [ms]':>19} {'rfed vectorized [ms]':>21} "
          f"{'ratio':>7}")
    for name in ("dpdl-digits", "doadp-logreg", "prirfed-fig1", "prirfed-fig5"):
        spec, neighboring = capture_event(name)
        events = [(f"{name} {spec.describe()}", spec, neighboring)]
        poisson = EventSpec.make("gaussian", spec.noise_multiplier, "poisson", spec.sampling_rate)
        events.append((f"  same z, Poisson(q={spec.sampling_rate:.3g})", poisson,
                       "add_remove_one"))
        for label, event, relation in events:
            ref = dp_accounting_curve(event, relation, DEFAULT_RDP_ORDERS)
            ours = accountants._compute_rdp_curve(event, relation, DEFAULT_RDP_ORDERS)
            assert np.array_equal(np.isinf(ref), np.isinf(ours)), label
            med = interleaved_medians({
                "dpa": lambda e=event, r=relation: dp_accounting_curve(e, r, DEFAULT_RDP_ORDERS),
                "rfed": lambda e=event, r=relation: accountants._compute_rdp_curve(
                    e, r, DEFAULT_RDP_ORDERS),
            }, repeat)
            print(f"{label:<52} {1e3 * med['dpa']:>19.1f} {1e3 * med['rfed']:>21.2f} "
                  f"{med['dpa'] / med['rfed']:>6.1f}x", flush=True)


def calibration_table(repeat: int) -> None:
    cases = {
        "dpdl-digits (groups)": (
            capture_call(dpdl_module, "gaussian_groups_calibration", "dpdl-digits",
                         {"non_private": False}),
            lambda a, k: dec_privacy.gaussian_groups_calibration(*a, **k)),
        "prirfed-fig1 (calibrate)": (
            capture_call(fed_accounting, "calibrate", "prirfed-fig1"),
            lambda a, k: fed_accounting.calibrate(*a, **k)),
        "prirfed-fig2 (calibrate)": (
            capture_call(fed_accounting, "calibrate", "prirfed-fig2"),
            lambda a, k: fed_accounting.calibrate(*a, **k)),
    }
    print(f"\n{'calibration':<26} {'cold dp-acc [s]':>15} {'cold rfed [s]':>14} {'ratio':>7} "
          f"{'warm mem [s]':>13}   z (rfed) / z (dp-accounting)")
    rfed_engine = accountants._compute_rdp_curve
    for name, ((a, k), call) in cases.items():
        outputs = {}

        def cold(engine, key, a=a, k=k, call=call, outputs=outputs):
            accountants._compute_rdp_curve = engine
            clear_memory()
            try:
                outputs[key] = call(a, k)
            finally:
                accountants._compute_rdp_curve = rfed_engine

        med = interleaved_medians({"dpa": lambda: cold(dp_accounting_curve, "dpa"),
                                   "rfed": lambda: cold(rfed_engine, "rfed")}, repeat)
        clear_memory()
        _, out_cold = timed(lambda a=a, k=k, call=call: call(a, k))
        memory, out_memory = timed(lambda a=a, k=k, call=call: call(a, k))
        z = [noise_of(o) for o in (out_cold, out_memory, outputs["rfed"])]
        assert z[0] == z[1] == z[2], z
        print(f"{name:<26} {med['dpa']:>15.3f} {med['rfed']:>14.3f} "
              f"{med['dpa'] / med['rfed']:>6.1f}x {memory:>13.4f}   "
              f"{z[0]!r} / {noise_of(outputs['dpa'])!r}", flush=True)


def dp_accounting_pld(events, neighboring: str, vdi: float) -> dpa_pld.PLDAccountant:
    """The PLD accountant as built before: dp-accounting's ``PLDAccountant``."""
    acc = dpa_pld.PLDAccountant(neighboring_relation=accountants._NR[neighboring],
                                value_discretization_interval=vdi)
    acc.compose(dpa.ComposedDpEvent(
        [dpa.SelfComposedDpEvent(s.to_dp_event("pld", neighboring), c) for s, c in events]))
    return acc


def pld_table(repeat: int) -> None:
    (events, neighboring, vdi), _ = capture_call(accountants, "_pld_accountant", "prirfed-fig1")
    delta = get_experiment("prirfed-fig1").defaults["delta"]
    print(f"\n{'PLD accountant':<52} {'dp-accounting [ms]':>19} {'rfed [ms]':>10} {'ratio':>7}")
    build = accountants._pld_accountant.__wrapped__
    for relation in (neighboring, "add_remove_one"):
        label = (f"prirfed-fig1 {' + '.join(f'{c} x {s.describe()}' for s, c in events)}"
                 f" {relation}")
        eps = {build(events, relation, vdi).get_epsilon(delta),
               dp_accounting_pld(events, relation, vdi).get_epsilon(delta)}
        assert len(eps) == 1, (label, eps)
        med = interleaved_medians({
            "dpa": lambda r=relation: dp_accounting_pld(events, r, vdi),
            "rfed": lambda r=relation: build(events, r, vdi),
        }, repeat)
        print(f"{label:<52} {1e3 * med['dpa']:>19.1f} {1e3 * med['rfed']:>10.1f} "
              f"{med['dpa'] / med['rfed']:>6.1f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per row (median)")
    parser.add_argument("--tables", nargs="+", choices=("curves", "calibration", "pld"),
                        default=["curves", "calibration", "pld"], help="the tables to print")
    args = parser.parse_args()
    # dp-accounting warns once per order whose fractional series it abandons (inf), per call
    logging.getLogger("absl").setLevel(logging.ERROR)
    if "curves" in args.tables:
        curve_table(args.repeat)
    if "calibration" in args.tables:
        calibration_table(args.repeat)
    if "pld" in args.tables:
        pld_table(args.repeat)


if __name__ == "__main__":
    main()
