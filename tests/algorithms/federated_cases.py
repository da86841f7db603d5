"""The registry of federated test cases: one line per federated trainer on the public contract.

The federated counterpart of ``algorithm_cases.py``: adding a :class:`FederatedCase` to
:data:`CASES` runs every shared test of ``tests/algorithms/test_federated_cases.py`` on it (the
report's one shape private or not, the budget planned through
:func:`~rfed.algorithms.private.plan_noise` and certified within 0.9-1 of the target, an
empirical audit below the certified epsilon that catches a broken variant, checkpoint and
resume bit-identity, and the refusal of bad input naming the argument). A case is

``FederatedCase(name, make, ...)``

with ``make(*, clip, budget=None, n_rounds=None, noise_multiplier=None) -> PriRFed`` (the noise
is a ``budget`` with the planned ``n_rounds``, a research ``noise_multiplier``, or none). The
federated engine across processes is Flower, whose equality with the in-process run is
``tests/engines/test_flower.py``'s (there is no MPI engine for PriRFed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed.algorithms.federated import DPRSGD, DPRSVRG, ClientLevelDP, PriRFed
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA

N_AGENTS, RECORDS, DIM = 4, 10, 5


def pca() -> SpherePCA:
    """PCA on the sphere S^4, 4 agents of 10 records of norm about sqrt(5)."""
    return SpherePCA(np.random.default_rng(0).standard_normal((N_AGENTS, RECORDS, DIM)))


def _record_level(trainer: Callable[..., Any], **prirfed: Any) -> Callable[..., PriRFed]:
    """``make`` of a record-level case: the trainer takes the research noise, PriRFed the
    budget."""

    def make(*, clip, budget=None, n_rounds=None, noise_multiplier=None):
        # without a budget the relation is given to PriRFed (with a budget: the budget's)
        return PriRFed(trainer(clip=clip, noise_multiplier=noise_multiplier), 2, 0.1,
                       budget=budget, n_rounds=n_rounds, **({} if budget else prirfed))

    return make


def _client_level(*, clip, budget=None, n_rounds=None, noise_multiplier=None):
    """``make`` of the client-level case: the server's noise; the local training not private.
    Every client takes part in every round: a client-level budget is calibrated for that worst
    case of the selection (with 2 of 4 clients the run certifies about 0.8 of the target)."""
    if budget is None and noise_multiplier is None:
        return PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1, n_rounds=n_rounds)
    return PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1, n_rounds=n_rounds,
                   client_dp=ClientLevelDP(clip=clip, budget=budget,
                                           noise_multiplier=noise_multiplier))


@dataclass(frozen=True)
class FederatedCase:
    """One federated trainer under the shared tests.

    Attributes
    ----------
    name : str
    make : callable
        ``make(*, clip, budget=None, n_rounds=None, noise_multiplier=None) -> PriRFed``.
    level : {'record', 'client'}
        Which report the tests read: the record-level one (``result.privacy``) or the
        client-level one (``result.privacy['client_level']``).
    budget : callable
        ``budget(epsilon, delta) -> PrivacyBudget`` of the case's relation.
    audit : callable or None
        ``audit(budget_epsilon) -> (PriRFed, other)``: a PriRFed configured for the generic
        record-level audit on 4 records (one noisy step on every record, the canary's
        sensitivity attained), and the canary's value in the neighbouring data set (``-10``:
        replaced, the worst case of replace-one; ``0``: at the start, its gradient zero, the
        same release as removing it under add/remove with public sizes); ``None`` when the
        case is audited elsewhere (named in ``audited_in``).
    audited_in : str
    default : bool
        Its audit runs in the default suite (the others with ``-m slow``).
    clip_name : str
        The constructor's name for the clip level.
    """

    name: str
    make: Callable[..., PriRFed]
    level: str = "record"
    budget: Callable[[float, float], PrivacyBudget] = PrivacyBudget
    audit: Callable[..., PriRFed] | None = None
    audited_in: str = ""
    default: bool = False
    clip_name: str = "clip"

    def report(self, privacy: dict) -> dict:
        """The report the case certifies."""
        return privacy["client_level"] if self.level == "client" else privacy


def _add_remove(epsilon: float, delta: float) -> PrivacyBudget:
    return PrivacyBudget(epsilon, delta, neighboring="add_remove_one", public_sizes=RECORDS)


CASES = [
    FederatedCase("DP-RSGD", _record_level(lambda **kw: DPRSGD(steps=2, batch_size=5, **kw)),
                  audit=lambda eps: (PriRFed(DPRSGD(steps=1, clip=1.0), 1, 0.5,
                                             budget=PrivacyBudget(eps, 1e-5), n_rounds=1),
                                     -10.0),
                  default=True),
    FederatedCase("DP-RSGD Poisson add/remove",
                  _record_level(lambda **kw: DPRSGD(steps=2, batch_size=5, sampling="poisson",
                                                    **kw),
                                neighboring="add_remove_one", public_sizes=RECORDS),
                  budget=_add_remove,
                  # rate 1 (expected batch = the public size 4): every record drawn
                  audit=lambda eps: (PriRFed(DPRSGD(steps=1, clip=1.0, batch_size=4,
                                                    sampling="poisson"), 1, 0.5,
                                             budget=PrivacyBudget(eps, 1e-5,
                                                                  neighboring="add_remove_one",
                                                                  public_sizes=4),
                                             n_rounds=1), 0.0), default=True),
    FederatedCase("DP-RSVRG", _record_level(lambda **kw: DPRSVRG(
        steps=1, inner_steps=2, clip_full=kw.pop("clip"), clip=0.5, **kw)),
                  clip_name="clip_full",
                  # K = m = 1 with a tiny inner clip: the inner step at the snapshot is the
                  # full clipped gradient, which the canary moves by 2 tau_0 / N_i
                  audit=lambda eps: (PriRFed(DPRSVRG(steps=1, inner_steps=1, clip=0.005,
                                                     clip_full=1.0), 1, 0.5,
                                             budget=PrivacyBudget(eps, 1e-5), n_rounds=1),
                                     -10.0), default=True),
    FederatedCase("DP-RSVRG released snapshot", _record_level(
        lambda **kw: DPRSVRG(steps=1, inner_steps=2, batch_size=5, variant="released_snapshot",
                             clip_full=kw["clip"], **kw)),
                  audited_in="tests/privacy/test_audit_federated.py (the paper's variant; the "
                             "snapshot release is a full-batch Gaussian of the same account)"),
    FederatedCase("client-level DP", _client_level, level="client",
                  audited_in="tests/algorithms/test_federated_client_dp.py (the server's "
                             "release on two clients)"),
]

#: name -> case
BY_NAME = {case.name: case for case in CASES}
