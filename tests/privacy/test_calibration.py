"""Noise calibration against dp-accounting's reference numbers and the closed forms' inverses."""

import pytest

from rfed.privacy import (
    calibrate_noise_multiplier,
    calibrate_sigma,
    dpdgt_theta0,
    gaussian_epsilon,
    papers,
    prirfed_local_epsilon,
)


@pytest.mark.parametrize(("target", "expected"), [(1.0, 1.5131), (3.0, 0.8646), (8.0, 0.6159)])
def test_rdp_calibration_matches_anchor(target, expected):
    # specs/anchors_dp_engines.md: q = 0.01, 1000 steps, delta = 1e-5
    z = calibrate_noise_multiplier(target, 1e-5, 0.01, 1000)
    assert z == pytest.approx(expected, abs=2e-4)
    assert gaussian_epsilon(z, 0.01, 1000, 1e-5) <= target


def test_pld_calibration_matches_anchor():
    # anchors: calibrate_dp_mechanism with PLD (interval 1e-3): 1.4158;
    # get_smallest_subsampled_gaussian_noise: 1.4146
    z = calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000, method="pld")
    assert z == pytest.approx(1.4158, abs=1e-3)
    assert gaussian_epsilon(z, 0.01, 1000, 1e-5, method="pld") <= 1.0


def test_calibrate_sigma_scales_by_sensitivity():
    z = calibrate_noise_multiplier(2.0, 1e-5, 0.05, 100)
    assert calibrate_sigma(2.0, 1e-5, 0.25, 0.05, 100) == pytest.approx(0.25 * z)


@pytest.mark.slow
def test_without_replacement_calibration():
    z = calibrate_noise_multiplier(
        1.0, 1e-5, 0.5, 100, sampling="without_replacement", dataset_size=70
    )
    eps = gaussian_epsilon(z, 0.5, 100, 1e-5, sampling="without_replacement", dataset_size=70)
    assert eps <= 1.0
    assert (
        gaussian_epsilon(z / 1.001, 0.5, 100, 1e-5, sampling="without_replacement", dataset_size=70)
        > 1.0
    )


def test_calibration_refuses_bad_targets_and_events():
    with pytest.raises(ValueError, match="'target_epsilon'"):
        calibrate_noise_multiplier(0.0, 1e-5, 0.01, 10)
    with pytest.raises(ValueError, match="'delta'"):
        calibrate_noise_multiplier(1.0, 2.0, 0.01, 10)
    with pytest.raises(ValueError, match="without replacement needs method='rdp'"):
        calibrate_noise_multiplier(
            1.0, 1e-5, 0.1, 10, method="pld", sampling="without_replacement", dataset_size=100
        )
    with pytest.raises(ValueError, match="'target_epsilon'"):
        calibrate_noise_multiplier(1e-7, 1e-5, 1.0, 10**6, sampling="none")


def test_prirfed_inverse():
    local = prirfed_local_epsilon(1.0, 100, 5, 200, 1e-3, 1e-4)
    assert papers.prirfed_privacy(100, 5, local, 1e-4, 200, 1e-3).epsilon == pytest.approx(
        1.0, rel=1e-8
    )
    assert papers.prirfed_privacy(100, 5, local * 1.001, 1e-4, 200, 1e-3).epsilon > 1.0


def test_dpdgt_inverse():
    theta0 = dpdgt_theta0(5.0, 0.015, 0.991, 0.995, 0.995, 0.06, 0.8, 0.7, 1e-4)
    # eq. 38 at Sec. 6.1: eps = 493.27 delta / theta0
    assert theta0 == pytest.approx(493.27e-4 / 5.0, rel=1e-5)
    assert papers.dpdgt_epsilon(
        0.015, 0.991, theta0, 0.995, theta0, 0.995, 0.06, 0.8, 0.7, 1e-4
    ) == pytest.approx(5.0)
