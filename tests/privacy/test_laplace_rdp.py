"""The Laplace mechanism's RDP curve: rfed's loop against dp-accounting's ``RdpAccountant``.

rfed evaluates dp-accounting's own arithmetic (Mironov 2017, Prop. 6, as its ``_laplace_rdp``
writes it) in one loop per curve, so the curve must be the same floats, bit for bit (compared
as integers: ``==`` on the bit patterns, which also tells ``-0.0`` from ``0.0``), for every
order tier (``a == 1``, ``1 < a < 1.1``, ``a >= 1.1``) and any noise multiplier, tiny and huge.
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from rfed.privacy import accountants as acc_mod
from rfed.privacy.accountants import (
    DEFAULT_RDP_ORDERS,
    CertifiedAccountant,
    EventSpec,
    compose_delta,
    compose_epsilon,
)

#: Orders of every branch of dp-accounting's formula: the KL limit, the Taylor series just
#: above 1 (both sides of its 1.1 switch), the defaults, and very large orders.
BRANCH_ORDERS = (1.0, 1.0 + 1e-12, 1.01, 1.05, 1.0999999999999999, 1.1, 1.1000000000000003,
                 2.5, 7.0, 1e4, 2.5e6, 1e300)


def _dpa_curve(noise_multiplier: float, orders) -> np.ndarray:
    acc = dpa_rdp.RdpAccountant(orders=list(orders))
    acc.compose(dpa.LaplaceDpEvent(noise_multiplier))
    return np.asarray(acc.rdp, dtype=float)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def _rfed_curve(noise_multiplier: float, orders) -> np.ndarray:
    return acc_mod._compute_rdp_curve(EventSpec.make("laplace", noise_multiplier),
                                      "add_remove_one", tuple(orders))


@pytest.mark.parametrize("orders", [DEFAULT_RDP_ORDERS, *acc_mod._ORDER_TIERS, BRANCH_ORDERS],
                         ids=["default", "tier1", "tier2", "tier3", "branches"])
def test_curve_is_dp_accountings_bit_for_bit_on_a_grid(orders):
    # 25 decades each side of one, the extremes of float64, and round values
    grid = np.concatenate([np.geomspace(1e-300, 1e300, 241), np.geomspace(1e-4, 1e6, 301),
                           [0.1, 0.5, 1.0, 2.0, 3.0, 10.0, 1e-307, 5e-300, 1.7e308]])
    for nm in grid:
        nm = float(nm)
        assert _same_bits(_rfed_curve(nm, orders), _dpa_curve(nm, orders)), nm


@settings(max_examples=300, deadline=None)
@given(log10_nm=st.floats(-300.0, 300.0),
       extra=st.lists(st.floats(1.0, 1e6), min_size=1, max_size=6))
def test_curve_is_dp_accountings_bit_for_bit_anywhere(log10_nm, extra):
    nm = 10.0 ** log10_nm
    orders = DEFAULT_RDP_ORDERS + tuple(extra)
    assert _same_bits(_rfed_curve(nm, orders), _dpa_curve(nm, orders))


def test_unsampled_laplace_curve_is_the_same_for_both_relations():
    # dp-accounting's LaplaceDpEvent has no relation: the multiplier already refers to it
    spec = EventSpec.make("laplace", 0.7)
    a = acc_mod._compute_rdp_curve(spec, "add_remove_one", DEFAULT_RDP_ORDERS)
    b = acc_mod._compute_rdp_curve(spec, "replace_one", DEFAULT_RDP_ORDERS)
    assert _same_bits(a, b)


@pytest.mark.parametrize("neighboring", ["add_remove_one", "replace_one"])
def test_composed_epsilon_and_delta_are_those_of_dp_accountings_curves(neighboring):
    events = [(EventSpec.make("laplace", b), c) for b, c in ((0.3, 5), (2.0, 40), (17.0, 3))]
    acc_mod.clear_rdp_cache()
    eps = compose_epsilon(events, 1e-6, "rdp", neighboring)
    delta = compose_delta(events, 3.0, "rdp", neighboring)
    # dp-accounting's curves, summed in rfed's canonical event order (a sum in another order
    # may differ in the last bit), converted by dp-accounting
    total = 0.0
    for spec, count in acc_mod._canonical(events):
        total = total + count * _dpa_curve(spec.noise_multiplier, DEFAULT_RDP_ORDERS)
    orders = np.asarray(DEFAULT_RDP_ORDERS)
    assert eps == dpa_rdp.compute_epsilon(orders, total, 1e-6)[0]
    assert delta == dpa_rdp.compute_delta(orders, total, 3.0)[0]
    # and within rounding of dp-accounting's own composition
    ref = dpa_rdp.RdpAccountant(neighboring_relation=acc_mod._NR[neighboring])
    for spec, count in events:
        ref.compose(dpa.LaplaceDpEvent(spec.noise_multiplier), count)
    assert eps == pytest.approx(ref.get_epsilon(1e-6), rel=1e-14)
    user = CertifiedAccountant("rdp", neighboring)
    for spec, count in events:
        user.add_event(spec, count)
    assert user.epsilon(1e-6) == eps


@pytest.mark.parametrize("eps", [math.inf, math.nan, -1.0, -1e-300])
def test_bad_eps_is_refused_naming_it(eps):
    with pytest.raises(ValueError, match="'eps'.*finite and >= 0"):
        acc_mod._laplace_rdp_curve(eps, DEFAULT_RDP_ORDERS)


def test_overflowing_eps_is_refused_as_dp_accounting_does():
    # 1 / 1e-320 overflows to inf: dp-accounting refuses it, so must rfed (not a silent inf)
    acc = CertifiedAccountant("rdp")
    acc.add_laplace(1e-320, sampling="none")
    with pytest.raises(ValueError, match="'eps'"):
        acc.epsilon(1e-5)
    with pytest.raises(ValueError):
        _dpa_curve(1e-320, DEFAULT_RDP_ORDERS)


@pytest.mark.parametrize("order", [0.5, -2.0, math.inf, math.nan])
def test_bad_order_is_refused_naming_it(order):
    with pytest.raises(ValueError, match="'orders'"):
        acc_mod._laplace_rdp_curve(1.0, (2.0, order))
