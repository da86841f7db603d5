"""A small fuzz of ``rfed run NAME --set KEY=VALUE`` over every experiment's settings.

For each experiment that needs no installed data set and each of its settings, a few values
that are wrong for the setting's type (an int setting: 0, -3, "x"; a float: -1.0, NaN, "x"; a
name: "bogus"; a list of numbers: [-1], ["x"]; a list of names: ["bogus"], [1]; a setting
whose default is None: -1, "bogus"; a bool: "maybe") are run through the CLI in-process
(``rfed.cli.main``), the other settings at a small size, one child process per experiment.
Each outcome is

* ``clear``: exit status 2 and one line on stderr naming the setting (``'KEY'``);
* ``unclear``: any other error (a traceback, another exit status, or a line that does not
  name the setting);
* ``accepted``: the run went on (exit 0, or still running after ``--timeout`` seconds). Some
  of these values are valid for their setting (0 where 0 means "off", -1.0 for a signed
  parameter): read the list (``--list``).

Usage::

    python benchmarks/fuzz_settings.py [NAME ...] [--timeout 20] [--rfed DIR] [--list]

``--rfed DIR`` fuzzes the rfed found in ``DIR`` (e.g. a checkout of an earlier version). Prints
the counts per experiment and in total.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: Small sizes of the experiments (the bit-identity tests' sizes, and these).
SMALL_EXTRA = {
    "utility-dpdgt": {"iterations": 20, "mc_runs": 1, "epsilons": [1.0]},
    "utility-hyperbolic": {"repetitions": 1, "tune_repetitions": 1, "epsilons": [1.0],
                           "rsgd_rounds": [5], "rsgd_steps": [0.1], "clips": [2.0]},
    "utility-pca-synthetic": {"n_agents": 4, "per_agent": 50, "dim": 6, "epsilons": [1.0],
                              "repetitions": 1, "tune_repetitions": 1, "clips": [0.01],
                              "norm_bounds": [0.3], "rsgd_rounds": [5], "rsgd_steps": [100.0],
                              "rsvrg": False, "power_iters": [3]},
    "utility-spd": {"n_agents": 4, "per_agent": 50, "epsilons": [1.0], "repetitions": 1,
                    "tune_repetitions": 1, "rsgd_rounds": [5], "rsgd_steps": [0.3],
                    "clips": [1.0], "log_norm_bounds": [0.5]},
}


def bad_values(default):
    """Values of the wrong type or range for a setting whose default is ``default``."""
    if isinstance(default, bool):
        return ["maybe"]
    if isinstance(default, int):
        return [0, -3, "x"]
    if isinstance(default, float):
        return [-1.0, float("nan"), "x"]
    if isinstance(default, str):
        return ["bogus"]
    if isinstance(default, (list, tuple)):
        if default and all(isinstance(d, str) for d in default):
            return [["bogus"], [1]]
        if default and all(isinstance(d, (int, float)) and not isinstance(d, bool)
                           for d in default):
            return [[-1], ["x"]]
        return [["x"], [-1]]
    if default is None:
        return [-1, "bogus"]
    return ["x"]


def _child(name: str, timeout: int) -> None:
    """Fuzz experiment ``name`` in this process; one JSON line per case on stdout."""
    import contextlib
    import io
    import signal
    import time
    import warnings

    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path.cwd() / "tests" / "experiments"))
    import matplotlib.pyplot as plt
    from test_bit_identity import SMALL

    import rfed.experiments.registry as reg
    from rfed.cli import main
    from rfed.experiments import get_experiment

    reg.RunContext.save_figure = lambda self, fig, name: plt.close(fig)
    # heavy imports first: a time-out must not cut one short (a half-imported module breaks
    # every later case of the child)
    import importlib
    import importlib.util

    for module in ("torch", "geomstats", "pymanopt", "autograd", "sklearn"):
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)

    class Timeout(BaseException):
        pass

    def alarm(signum, frame):
        raise Timeout

    exp = get_experiment(name)
    small = {**SMALL.get(name, {}), **SMALL_EXTRA.get(name, {})}
    for key, default in exp.defaults.items():
        for value in bad_values(default):
            args = ["run", name, "--no-progress", "--checkpoint-every", "0"]
            for k, v in {**small, key: value}.items():
                args += ["--set", f"{k}={v}" if isinstance(v, str) else f"{k}={v!r}"]
            err = io.StringIO()
            with tempfile.TemporaryDirectory() as out:
                signal.signal(signal.SIGALRM, alarm)
                signal.alarm(timeout)
                start = time.time()
                try:
                    with contextlib.redirect_stderr(err), \
                            contextlib.redirect_stdout(io.StringIO()):
                        outcome = ("exit", main([*args, "--out", f"{out}/o"]))
                except Timeout:
                    outcome = ("timeout", None)
                except BaseException as exc:   # a traceback for the user
                    outcome = ("raised", f"{type(exc).__name__}: {exc}")
                finally:
                    signal.alarm(0)
            lines = [line for line in err.getvalue().splitlines() if line.strip()]
            kind, status = outcome
            if kind == "exit" and status == 2 and len(lines) == 1 and f"'{key}'" in lines[0]:
                verdict = "clear"
            elif (kind == "exit" and status == 0) or kind == "timeout":
                verdict = "accepted"
            else:
                verdict = "unclear"
            message = lines[-1] if lines else (status if kind == "raised" else "")
            print(json.dumps({"experiment": name, "key": key, "value": repr(value),
                              "verdict": verdict, "status": status if kind == "exit" else kind,
                              "message": str(message)[:300],
                              "seconds": round(time.time() - start, 1)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--timeout", type=int, default=20)
    parser.add_argument("--rfed", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--list", action="store_true", help="print every case not clear")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, args.timeout)
        return
    env = dict(os.environ, PYTHONPATH=str(args.rfed), RFED_CACHE_DIR="")
    names = args.names or json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from rfed.experiments import list_experiments; "
         "print(json.dumps([e.name for e in list_experiments() if not e.requires]))"],
        env=env, cwd=args.rfed, capture_output=True, text=True, check=True).stdout)
    cases = []
    for name in names:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name,
                               "--timeout", str(args.timeout)], env=env, cwd=args.rfed,
                              capture_output=True, text=True)
        cases += [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    print(f"rfed from {args.rfed}; {len(cases)} cases")
    print(f"{'experiment':<24} {'clear':>6} {'unclear':>8} {'accepted':>9}")
    total: Counter = Counter()
    for name in names:
        counts = Counter(c["verdict"] for c in cases if c["experiment"] == name)
        total += counts
        print(f"{name:<24} {counts['clear']:6d} {counts['unclear']:8d} {counts['accepted']:9d}")
    print(f"{'total':<24} {total['clear']:6d} {total['unclear']:8d} {total['accepted']:9d}")
    if args.list:
        for c in cases:
            if c["verdict"] != "clear":
                print(f"  [{c['verdict']}] {c['experiment']} {c['key']}={c['value']}: "
                      f"{c['message']}")


if __name__ == "__main__":
    main()
