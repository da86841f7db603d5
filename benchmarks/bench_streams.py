"""Cost of a keyed per-agent draw under the two stream layouts, and of a DO-ADP round.

Run on demand: ``python benchmarks/bench_streams.py [--repeat 11] [--round-agents 100000]
[--rounds 5]``; the tables are printed and written to ``benchmarks/results/bench_streams.txt``
(``--out``).

:class:`rfed.randomness.AgentStreams` takes the number of agents per Philox stream as its layout
(``agents_per_stream``). The first table times one call ``streams.normal(block, round, purpose,
(m,))`` (the block's ids checked once beforehand, as the algorithms do) for

* ``P = 16``: groups of 16 consecutive agents share a stream (one re-keying per group; a block
  holding part of a group draws the whole group): the decentralized algorithms' layout;
* ``P = 1``: one stream per agent (one re-keying and one sampler call per agent): the federated
  trainers' layout;
* ``floor``: ``A x m`` normals from one sequential numpy Generator (Philox), the cheapest
  normals numpy draws, with no per-agent key at all;

on the access patterns of rfed's algorithms: 10^5 agents x 10 normals (a decentralized round's
noise at 10^5 agents), 1,000 x 783 (PriRFed's 1,000 clients on 784-pixel images), 20 x 2,000,
and 10 scattered agents x 64 normals (PriRFed's fig. 2 pattern: one agent per run, ids far
apart, so each in its own group). Median wall time (``time.perf_counter``) of ``--repeat``
calls, the layouts interleaved in each repeat, one BLAS thread.

The second table times DO-ADP rounds at ``--round-agents`` agents (bench_scale.py's
``DO-ADP`` setting: logistic regression, ``d = 10``, circulant graph of degree 4, batch 1,
``p = 1``) with the decentralized streams' layout set to 16 and to 1
(``rfed.algorithms.decentralized._streams.AGENTS_PER_STREAM``), interleaved round by round on
two states of the same run: median CPU time per round (``time.process_time``).
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from rfed.randomness import AgentStreams

RESULTS = Path(__file__).resolve().parent / "results"
LAYOUTS = (16, 1)


def patterns() -> list[tuple[str, np.ndarray, int]]:
    """``(label, agent ids, normals per agent)`` of the timed access patterns."""
    scattered = np.arange(10) * 1009 + 3   # ten ids in ten different groups of 16
    return [("10^5 agents x 10", np.arange(100_000), 10),
            ("1,000 x 783", np.arange(1000), 783),
            ("20 x 2,000", np.arange(20), 2000),
            ("10 scattered x 64", scattered, 64)]


def draw_table(repeat: int) -> str:
    lines = [f"{'pattern':<20} {'P = 16':>12} {'P = 1':>12} {'floor':>12} "
             f"{'P=1 / P=16':>11}",
             "-" * 71]
    for label, ids, m in patterns():
        streams = {p: AgentStreams(7, agents_per_stream=p) for p in LAYOUTS}
        blocks = {p: streams[p].block(ids) for p in LAYOUTS}
        floor_gen = np.random.Generator(np.random.Philox(7))
        calls: dict = {p: (lambda st=streams[p], b=blocks[p], m=m: st.normal(b, 3, "noise", (m,)))
                       for p in LAYOUTS}
        calls["floor"] = lambda g=floor_gen, shape=(ids.size, m): g.standard_normal(shape)
        times: dict = {k: [] for k in calls}
        for fn in calls.values():
            fn()   # warm: the first call allocates the scratch arrays
        for _ in range(repeat):
            for key, fn in calls.items():
                t0 = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        lines.append(f"{label:<20} {_fmt(med[16]):>12} {_fmt(med[1]):>12} "
                     f"{_fmt(med['floor']):>12} {med[1] / med[16]:>10.2f}x")
    return "\n".join(lines)


def round_table(n: int, rounds: int) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale

    from rfed.algorithms.decentralized import _streams

    step, init = bench_scale.build("DO-ADP", n)
    states = {p: init() for p in LAYOUTS}
    times: dict = {p: [] for p in LAYOUTS}
    kept = _streams.AGENTS_PER_STREAM
    try:
        for r in range(rounds + 1):
            for p in LAYOUTS:
                _streams.AGENTS_PER_STREAM = p
                t0 = time.process_time()
                states[p] = step(states[p])
                if r:   # the first round warms the caches and scratch arrays
                    times[p].append(time.process_time() - t0)
    finally:
        _streams.AGENTS_PER_STREAM = kept
    med = {p: statistics.median(v) for p, v in times.items()}
    return "\n".join([f"{'DO-ADP round':<20} {'P = 16':>12} {'P = 1':>12} {'P=1 / P=16':>11}",
                      "-" * 58,
                      f"{f'{n:,} agents':<20} {_fmt(med[16]):>12} {_fmt(med[1]):>12} "
                      f"{med[1] / med[16]:>10.2f}x"])


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed calls per cell")
    parser.add_argument("--round-agents", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per layout")
    parser.add_argument("--out", default=str(RESULTS / "bench_streams.txt"))
    args = parser.parse_args()
    for name, value in (("--repeat", args.repeat), ("--round-agents", args.round_agents),
                        ("--rounds", args.rounds)):
        if value < 1:
            parser.error(f"argument {name} must be >= 1, got {value}")
    head = (f"# python benchmarks/bench_streams.py --repeat {args.repeat} --round-agents "
            f"{args.round_agents} --rounds {args.rounds}\n"
            f"# {platform.machine()}, numpy {np.__version__}, load average "
            f"{os.getloadavg()[0]:.1f}, one BLAS thread\n"
            f"# one keyed draw, median wall time of {args.repeat} calls; P = agents per "
            f"Philox stream\n")
    text = head + draw_table(args.repeat) + "\n\n" + (
        f"# median CPU time per round of {args.rounds} rounds, layouts interleaved\n"
        + round_table(args.round_agents, args.rounds)) + "\n"
    print(text, end="")
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
