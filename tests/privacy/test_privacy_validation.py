"""Every public function of rfed.privacy refuses bad input with an error naming the argument."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import rdp

from rfed.manifolds import Sphere
from rfed.privacy import (
    CertifiedAccountant,
    EventSpec,
    LaplaceSchedule,
    PrivacyLedger,
    calibrate_noise_multiplier,
    calibrate_sigma,
    clip_by_norm,
    clip_coordinates,
    clipped_mean_sensitivity,
    compose_delta,
    compose_epsilon,
    dpdgt_theta0,
    gaussian_epsilon,
    gaussian_mechanism,
    laplace_mechanism,
    laplace_noise,
    papers,
    prirfed_local_epsilon,
)
from rfed.privacy.accountants import assumptions_text
from rfed.privacy.clipping import clip_factors

NAN = float("nan")
S2 = Sphere(2)
X = np.array([1.0, 0.0, 0.0])
G = np.zeros((4, 3))
W = np.full((3, 3), 1 / 3)
ALPHAS = 0.015 * 0.991 ** np.arange(5)
THETA = 0.01 * 0.995 ** np.arange(5)
DGT = (0.06, 0.8, 0.7, 1e-3)  # mu, gamma, phi, adjacency delta
DOADP = dict(delta0=1e-5, iterations=1000, n_local=100, p=0.8, k=3, d=10, grad_bound=1.0)
DDA = dict(delta0=1e-2, iterations=1000, n_local=100, iota=0.1, lipschitz=1.0)
EV = [(EventSpec.make("gaussian", 1.0), 3)]


def _ledger(**kw):
    return PrivacyLedger(3, **kw)


def _recorded():
    led = _ledger()
    led.record(0, [0, 1], sigma=1.0, sensitivity=0.1)
    return led


# (call, exception, argument named in the message)
CASES = {
    # epsilon <= 0, NaN epsilon
    "classic_gaussian eps 0": (lambda: papers.classic_gaussian_sigma(0.0, 1e-5, 1.0), "epsilon"),
    "classic_gaussian eps nan": (lambda: papers.classic_gaussian_sigma(NAN, 1e-5, 1.0), "epsilon"),
    "prirfed eps<0": (lambda: papers.prirfed_privacy(10, 1, -0.1, 1e-5, 5, 1e-3), "epsilon"),
    "dp_rsgd eps 0": (lambda: papers.dp_rsgd_sigma(0.0, 1e-5, 1.0, 70, 5), "epsilon"),
    "dp_rsvrg eps nan": (lambda: papers.dp_rsvrg_sigma(NAN, 1e-5, 1, 1, 70, 2, 3), "epsilon"),
    "doadp eps 0": (lambda: papers.doadp_sigma(0.0, **DOADP), "epsilon"),
    "doadp eps>1": (lambda: papers.doadp_sigma(1.5, **DOADP), "epsilon"),
    "doadp_for_delta eps 0": (lambda: papers.doadp_sigma_for_delta(0.0, 1e-6, **DOADP), "epsilon"),
    "dpdl eps 0": (lambda: papers.dpdl_sigma(0.0, 1e-5, 10, 0.1, 1.5, 3, 0.3, 0.3, 3), "epsilon"),
    "dpdda eps 0": (lambda: papers.dpdda_sigma(0.0, **DDA), "epsilon"),
    "dpdda_for_delta eps nan": (lambda: papers.dpdda_sigma_for_delta(NAN, 1e-6, **DDA), "epsilon"),
    "dpdda_remark eps 0": (lambda: papers.dpdda_remark_epsilon(1, 10, 0.0), "epsilon"),
    "advanced eps<0": (lambda: papers.advanced_composition(-1.0, 3, 1e-3), "epsilon"),
    "subsampled eps nan": (lambda: papers.subsampled_epsilon(NAN, 0.1), "epsilon"),
    "heterogeneous eps<0": (lambda: papers.heterogeneous_composition(-0.1, 0.0, 0.1), "epsilons"),
    "calibrate target 0": (lambda: calibrate_noise_multiplier(0.0, 1e-5), "target_epsilon"),
    "calibrate_sigma target nan": (lambda: calibrate_sigma(NAN, 1e-5, 1.0), "target_epsilon"),
    "prirfed inverse target 0": (
        lambda: prirfed_local_epsilon(0.0, 10, 1, 5, 1e-3, 1e-5),
        "target_epsilon",
    ),
    "dpdgt_theta0 target<0": (
        lambda: dpdgt_theta0(-1.0, 0.015, 0.991, 0.995, 0.995, *DGT),
        "target_epsilon",
    ),
    "compose_delta eps 0": (lambda: compose_delta(EV, 0.0), "epsilon"),
    "ledger deltas eps nan": (lambda: _recorded().deltas(NAN), "epsilon"),
    "ledger paper bound eps nan": (
        lambda: _ledger().add_paper_bound("x", NAN, 1e-5, "src"),
        "epsilon",
    ),
    # delta outside (0, 1)
    "gaussian_epsilon delta 1": (lambda: gaussian_epsilon(1.0, 0.1, 5, 1.0), "delta"),
    "compose_epsilon delta nan": (lambda: compose_epsilon(EV, NAN), "delta"),
    "accountant delta 0": (lambda: CertifiedAccountant().epsilon(0.0), "delta"),
    "classic_gaussian delta 0": (lambda: papers.classic_gaussian_sigma(0.5, 0.0, 1.0), "delta"),
    "prirfed delta_hat 1": (lambda: papers.prirfed_privacy(10, 1, 0.1, 1e-5, 5, 1.0), "delta_hat"),
    "dp_rsgd delta 2": (lambda: papers.dp_rsgd_sigma(0.1, 2.0, 1.0, 70, 5), "delta"),
    "doadp delta0 0": (lambda: papers.doadp_sigma(0.5, **{**DOADP, "delta0": 0.0}), "delta0"),
    "doadp_epsilon delta_hat 0": (
        lambda: papers.doadp_epsilon(10.0, **DOADP, delta_hat=0.0),
        "delta_hat",
    ),
    "dpdl delta 1": (lambda: papers.dpdl_sigma(0.5, 1.0, 10, 0.1, 1.5, 3, 0.3, 0.3, 3), "delta"),
    "dpdda delta0 nan": (lambda: papers.dpdda_sigma(0.5, **{**DDA, "delta0": NAN}), "delta0"),
    "dpdda delta_prime 1": (
        lambda: papers.dpdda_sigma_for_delta(0.5, 1.0, **DDA),
        "delta_prime",
    ),
    "heterogeneous deltas nan": (
        lambda: papers.heterogeneous_composition(0.1, NAN, 0.1),
        "deltas",
    ),
    "heterogeneous deltas>1": (lambda: papers.heterogeneous_composition(0.1, 1.5, 0.1), "deltas"),
    "heterogeneous delta_hat 0": (
        lambda: papers.heterogeneous_composition(0.1, 0.0, 0.0),
        "delta_hat",
    ),
    "calibrate delta nan": (lambda: calibrate_noise_multiplier(1.0, NAN), "delta"),
    "prirfed inverse local_delta 0": (
        lambda: prirfed_local_epsilon(1.0, 10, 1, 5, 1e-3, 0.0),
        "local_delta",
    ),
    "ledger epsilons delta 1": (lambda: _recorded().epsilons(1.0), "delta"),
    "ledger report delta 0": (lambda: _recorded().report(0.0), "delta"),
    "ledger paper bound delta 2": (
        lambda: _ledger().add_paper_bound("x", 1.0, 2.0, "src"),
        "delta",
    ),
    # sampling rate outside (0, 1]
    "gaussian_epsilon rate 0": (lambda: gaussian_epsilon(1.0, 0.0, 5, 1e-5), "sampling_rate"),
    "gaussian_epsilon rate nan": (lambda: gaussian_epsilon(1.0, NAN, 5, 1e-5), "sampling_rate"),
    "add_gaussian rate>1": (lambda: CertifiedAccountant().add_gaussian(1.0, 1.5), "sampling_rate"),
    "calibrate rate 0": (lambda: calibrate_noise_multiplier(1.0, 1e-5, 0.0, 10), "sampling_rate"),
    "subsampled rate 0": (lambda: papers.subsampled_epsilon(0.1, 0.0), "rate"),
    "dpdl rate>1": (
        lambda: papers.dpdl_sigma(0.5, 1e-5, 10, 1.5, 1.5, 3, 0.3, 0.3, 3),
        "sampling_rate",
    ),
    "doadp p 0": (lambda: papers.doadp_sigma(0.5, **{**DOADP, "p": 0.0}), "p"),
    "dpdda iota>1": (lambda: papers.dpdda_sigma(0.5, **{**DDA, "iota": 2.0}), "iota"),
    "ledger record rate 0": (
        lambda: _ledger(method="pld").record(
            0, [0], noise_multiplier=1.0, sampling="poisson", sampling_rate=0.0
        ),
        "sampling_rate",
    ),
    "schedule q 0": (lambda: LaplaceSchedule(1.0, 0.0), "q"),
    "dpdgt q_c nan": (
        lambda: papers.dpdgt_epsilon(0.015, 0.991, 0.01, 0.995, 0.01, 0.995, *DGT, q_c=NAN),
        "q_c",
    ),
    # negative noise (and NaN noise)
    "add_gaussian z<0": (lambda: CertifiedAccountant().add_gaussian(-1.0), "noise_multiplier"),
    "event spec z<0": (lambda: EventSpec("gaussian", -1.0), "noise_multiplier"),
    "add_laplace z nan": (
        lambda: CertifiedAccountant().add_laplace(NAN, sampling="none"),
        "noise_multiplier",
    ),
    "gaussian_mechanism sigma<0": (lambda: gaussian_mechanism(S2, X, X * 0, -1.0, 0), "sigma"),
    "gaussian_mechanism sigma nan": (lambda: gaussian_mechanism(S2, X, X * 0, NAN, 0), "sigma"),
    "laplace_noise scale<0": (lambda: laplace_noise(3, -1.0, 0), "scale"),
    "laplace_mechanism scale nan": (lambda: laplace_mechanism(np.zeros(3), NAN, 0), "scale"),
    "schedule theta0<0": (lambda: LaplaceSchedule(-1.0, 0.9), "theta0"),
    "doadp_epsilon sigma<0": (
        lambda: papers.doadp_epsilon(-1.0, **DOADP, delta_hat=1e-6),
        "sigma",
    ),
    "dpdl multipliers sigma<0": (lambda: papers.dpdl_noise_multipliers(-1.0, W, 1.5), "sigma"),
    "dpdgt recursion theta nan": (
        lambda: papers.dpdgt_epsilon_recursion(ALPHAS, THETA * NAN, THETA, *DGT),
        "theta_xi",
    ),
    "dpdgt events theta<0": (
        lambda: papers.dpdgt_laplace_events(ALPHAS, -THETA, THETA, *DGT),
        "theta_xi",
    ),
    "dpdgt events theta shape": (
        lambda: papers.dpdgt_laplace_events(ALPHAS, THETA, THETA[:3], *DGT),
        "theta_zeta",
    ),
    "ledger record sigma<0": (
        lambda: _ledger().record(0, [0], sigma=-1.0, sensitivity=1.0),
        "sigma",
    ),
    "ledger record z nan": (lambda: _ledger().record(0, [0], noise_multiplier=NAN), "noise"),
    # other arguments
    "sensitivity bound 0": (lambda: clipped_mean_sensitivity(0.0, 10, "replace_one"), "bound"),
    "sensitivity relation": (lambda: clipped_mean_sensitivity(1.0, 10, "swap"), "neighboring"),
    "clip_factors bound<0": (lambda: clip_factors(np.ones(3), -1.0), "bound"),
    "clip_by_norm bound nan": (lambda: clip_by_norm(S2, X, G, NAN), "bound"),
    "clip_coordinates bound<0": (lambda: clip_coordinates(np.ones(3), -1.0), "bound"),
    "laplace_noise scale shape": (lambda: laplace_noise(3, np.ones((2, 3)), 0), "scale"),
    "schedule k nan": (lambda: LaplaceSchedule(1.0, 0.9).scale(NAN), "k"),
    "accountant orders": (lambda: CertifiedAccountant(rdp_orders=[0.5, 2.0]), "rdp_orders"),
    "compose orders nan": (lambda: compose_epsilon(EV, 1e-5, rdp_orders=[NAN]), "rdp_orders"),
    "assumptions method": (lambda: assumptions_text("moments", "replace_one", 1e-3), "method"),
    "ledger pld interval": (lambda: _ledger(pld_discretization=-1.0), "pld_discretization"),
    "ledger record per-agent length": (
        lambda: _ledger().record(0, [0, 1], noise_multiplier=[1.0, 2.0, 3.0]),
        "noise_multiplier",
    ),
    "ledger record sigma length": (
        lambda: _ledger().record(0, [0, 1], sigma=[1.0, 2.0, 3.0], sensitivity=1.0),
        "sigma",
    ),
    "ledger agent range": (lambda: _recorded().epsilon(1e-5, agent=3), "agent"),
    "ledger paper bound agent": (
        lambda: _ledger().add_paper_bound("x", 1.0, 0.0, "src", agent=-1),
        "agent",
    ),
    "ledger report max_rows": (lambda: _recorded().report(1e-5, max_rows=-1), "max_rows"),
    "prirfed inverse rtol nan": (
        lambda: prirfed_local_epsilon(1.0, 10, 1, 5, 1e-3, 1e-5, rtol=NAN),
        "rtol",
    ),
    "round_sig nan": (lambda: papers.round_sig(NAN), "x"),
    "round_sig digits 0": (lambda: papers.round_sig(1.5, 0), "digits"),
    "dpdl mixing nan": (lambda: papers.dpdl_noise_multipliers(1.0, W * NAN, 1.5), "mixing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_names_the_argument(case):
    call, name = CASES[case]
    with pytest.raises((ValueError, TypeError), match=f"'{name}"):
        call()


def test_rdp_orders_as_a_list_match_dp_accounting():
    # a list of orders used to reach an lru_cache and fail as unhashable
    orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0]
    eps = compose_epsilon(
        [(EventSpec.make("gaussian", 1.2, "poisson", 0.05), 200)], 1e-5, rdp_orders=orders
    )
    ref = rdp.RdpAccountant(orders=orders)
    ref.compose(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.2)), 200)
    )
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-12)
    acc = CertifiedAccountant(rdp_orders=orders)
    acc.add_gaussian(1.2, 0.05, count=200)
    assert acc.epsilon(1e-5) == eps


def test_laplace_noise_has_the_requested_shape():
    # per-coordinate scales broadcast to the shape, never widen it
    out = laplace_noise((4, 3), np.array([0.0, 1.0, 2.0]), 0)
    assert out.shape == (4, 3)
    assert np.all(out[:, 0] == 0)


def test_clip_factors_never_flip_direction():
    f = clip_factors(np.array([0.0, 0.5, 2.0, 4.0]), 1.0)
    assert f.tolist() == [1.0, 1.0, 0.5, 0.25]


def test_valid_edge_values_are_accepted():
    # the closed intervals the papers allow: delta0 = 1, rate = 1, epsilon 0 for composition tools
    assert papers.doadp_sigma(0.5, **{**DOADP, "delta0": 1.0}).sigma > 0
    assert papers.subsampled_epsilon(0.3, 1.0) == pytest.approx(0.3)
    assert papers.advanced_composition(0.0, 5, 1e-3) == 0.0
    assert papers.round_sig(math.inf) == math.inf
    led = _ledger()
    led.add_paper_bound("DP-DGT eq. 38", math.inf, 0.0, "spec 003 section 3.4", agent=2)
    assert led.report_dict(1e-5)["paper_bounds"][0]["agent"] == 2
