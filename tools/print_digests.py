"""Print the current value of every pinned run digest, to re-pin them after a deliberate change.

Covers ``tests/experiments/test_bit_identity.py`` (``EXPECTED``: every SMALL experiment;
``EXPECTED_PENCIL``: fig3/fig4 with the SPD pencil evaluation) and
``tests/algorithms/test_doadp_round_bits.py`` (``PINNED``). The digests are computed with the
tests' arithmetic: OpenBLAS pinned to its Haswell kernels as ``tests/conftest.py`` pins it (set
before numpy loads). Compare the output with the pinned values; nothing is written.

Run from the repository root::

    python tools/print_digests.py                 # everything
    python tools/print_digests.py pca-synthetic   # some SMALL experiments only
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # as tests/conftest.py, before numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "experiments"),
                os.path.join(ROOT, "tests", "algorithms")]


def main(names: list[str]) -> None:
    import test_bit_identity as bits

    from rfed.manifolds import SPD

    print("# tests/experiments/test_bit_identity.py EXPECTED")
    for name in names or sorted(bits.SMALL):
        print(f'    "{name}": "{bits.history_digest(name)}",', flush=True)
    if names:
        return
    print("# tests/experiments/test_bit_identity.py EXPECTED_PENCIL")
    log_dist_eigh, dist = SPD.log_dist_eigh, SPD.dist
    SPD.log_dist_eigh, SPD.dist = SPD.log_dist, bits._pencil_dist  # the test's monkeypatch
    try:
        for name in sorted(bits.EXPECTED_PENCIL):
            digest = bits.digest(bits.history(name, grad_norm=True))
            print(f'    "{name}": "{digest}",', flush=True)
    finally:
        SPD.log_dist_eigh, SPD.dist = log_dist_eigh, dist
    import test_doadp_round_bits as doadp

    print("# tests/algorithms/test_doadp_round_bits.py PINNED")
    cases = doadp._cases()
    for name in doadp.PINNED:
        problem, make, rounds, x0 = cases[name]
        print(f'    "{name}": "{doadp._digest(doadp._states(problem, make(), rounds, x0))}",',
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
