"""PriRFed (specs/004_prirfed.md): Theorem 4.2 against the paper's Table 1; noise formulas."""

import math

import pytest

from rfed.privacy import papers

# Table 1 of the paper (L270-280), copied from specs/004_prirfed.md section 3.4:
# (eps, delta) = (0.15, 1e-4), delta_hat = 1e-3; rows (N, s), columns T = 50, ..., 500;
# eps' and delta' split into two tables.
EPS_TABLE = """
100 1 | 4.26e-2 6.04e-2 8.55e-2 1.05e-1 1.21e-1 1.36e-1
100 5 | 1.58 2.32 3.46 4.41 5.25 6.03
200 1 | 2.13e-2 3.01e-2 4.26e-2 5.23e-2 6.04e-2 6.76e-2
500 5 | 2.98e-1 4.25e-1 6.09e-1 7.52e-1 8.75e-1 9.85e-1
300 5 | 5.02e-1 7.20e-1 1.04 1.29 1.51 1.70
300 10 | 3.52 5.36 8.32 1.09e1 1.33e1 1.55e1
400 5 | 3.74e-1 5.35e-1 7.68e-1 9.51e-1 1.11 1.25
400 10 | 2.56 3.83 5.84 7.55 9.11 1.06e1
"""
DELTA_TABLE = """
100 1 | 1.05e-3 1.10e-3 1.20e-3 1.30e-3 1.40e-3 1.50e-3
100 5 | 2.25e-3 3.50e-3 6.00e-3 8.50e-3 1.10e-2 1.35e-2
200 1 | 1.03e-3 1.05e-3 1.10e-3 1.15e-3 1.20e-3 1.25e-3
500 5 | 1.25e-3 1.50e-3 2.00e-3 2.50e-3 3.00e-3 3.50e-3
300 5 | 1.42e-3 1.83e-3 2.67e-3 3.50e-3 4.33e-3 5.17e-3
300 10 | 2.67e-3 4.33e-3 7.67e-3 1.10e-2 1.43e-2 1.77e-2
400 5 | 1.31e-3 1.63e-3 2.25e-3 2.88e-3 3.50e-3 4.13e-3
400 10 | 2.25e-3 3.50e-3 6.00e-3 8.50e-3 1.10e-2 1.35e-2
"""
ROUNDS = (50, 100, 200, 300, 400, 500)


def _entries():
    out = []
    for which, text in (("epsilon", EPS_TABLE), ("delta", DELTA_TABLE)):
        for line in text.strip().splitlines():
            head, cells = line.split("|")
            n, s = (int(v) for v in head.split())
            for t, value in zip(ROUNDS, cells.split(), strict=True):
                out.append(pytest.param(n, s, t, which, float(value), id=f"N{n}-s{s}-T{t}-{which}"))
    return out


ENTRIES = _entries()


def test_table_has_96_numbers():
    assert len(ENTRIES) == 96


@pytest.fixture(scope="module")
def table():
    return papers.prirfed_table1()


@pytest.mark.parametrize(("n", "s", "t", "which", "printed"), ENTRIES)
def test_table1_entry(table, n, s, t, which, printed):
    value = getattr(table[(n, s, t)], which)
    # printed to 3 significant digits, rounded half up
    assert papers.round_sig(value, 3) == pytest.approx(printed, rel=1e-12)


def test_table1_every_cell_takes_the_advanced_branch(table):
    # spec 004 section 3.4: in every cell the advanced-composition branch is the min
    assert all(r.branch == "advanced" for r in table.values())
    assert set(table) == {(n, s, t) for n, s in papers.PRIRFED_TABLE1_SETTINGS for t in ROUNDS}


def test_intermediate_values_of_the_spec():
    # spec 004 section 3.4: (100,1) eps_tilde 1.617e-3, delta_tilde 1e-6; (100,5) 5.435e-2, 2.5e-5
    r1 = papers.prirfed_privacy(100, 1, 0.15, 1e-4, 50, 1e-3)
    r5 = papers.prirfed_privacy(100, 5, 0.15, 1e-4, 50, 1e-3)
    assert r1.eps_tilde == pytest.approx(1.617e-3, abs=5e-7)
    assert r1.delta_tilde == pytest.approx(1e-6, rel=1e-12)
    assert r5.eps_tilde == pytest.approx(5.435e-2, abs=5e-6)
    assert r5.delta_tilde == pytest.approx(2.5e-5, rel=1e-12)


def test_hand_derived_cell():
    # (N, s, T) = (100, 1, 50) written out from Thm 4.2 by hand
    eps_t = math.log(1 + 0.01 * (math.exp(0.15) - 1))
    adv = math.sqrt(2 * 50 * math.log(1e3)) * eps_t + 50 * eps_t * (math.exp(eps_t) - 1)
    r = papers.prirfed_privacy(100, 1, 0.15, 1e-4, 50, 1e-3)
    assert r.epsilon == pytest.approx(min(adv, 50 * eps_t), rel=1e-14)
    assert r.delta == pytest.approx(1e-3 + 50 * 0.01 * 1e-4, rel=1e-14)


def test_derived_experiment_settings():
    # spec 004 section 3.5 (derived values, 3 significant digits)
    r = papers.prirfed_privacy(16, 1, 0.15, 1e-5, 100, 1e-3)
    assert r.eps_tilde == pytest.approx(1.006e-2, abs=5e-6)
    assert r.epsilon == pytest.approx(0.384, abs=5e-4)
    assert r.delta == pytest.approx(1.06e-3, abs=5e-6)
    assert papers.prirfed_privacy(16, 1, 0.15, 1e-5, 500, 1e-3).epsilon == pytest.approx(
        0.887, abs=5e-4
    )
    full = papers.prirfed_privacy(16, 16, 0.15, 1e-5, 100, 1e-3)
    assert full.eps_tilde == pytest.approx(2.4, rel=1e-12)  # rho = 1: no amplification
    assert full.branch == "sequential" and full.epsilon == pytest.approx(240.0, rel=1e-12)
    wn = papers.prirfed_privacy(9, 1, 0.15, 1e-4, 100, 1e-3)
    assert wn.eps_tilde == pytest.approx(1.782e-2, abs=5e-6)
    # the spec prints 0.695; the formula gives 0.69448 (the spec's last digit is a rounding slip)
    assert wn.epsilon == pytest.approx(0.695, abs=1e-3)
    assert wn.delta == pytest.approx(2.11e-3, abs=5e-6)


def test_round_sig_half_up():
    assert papers.round_sig(2.875e-3) == 2.88e-3
    assert papers.round_sig(0.0425) == 0.0425
    assert papers.round_sig(10.55, 3) == 10.6


def _half_unit(printed: float) -> float:
    """Half a unit in the last digit of a value printed with at most 4 significant digits."""
    text = f"{printed:.4g}"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals + 1e-12


# spec 004 section 5.5: sig/tau = sqrt(m K ln(1/delta)) / (N_i eps), o_i = o~_i = 1
@pytest.mark.parametrize(
    ("eps", "k", "n_local", "delta", "expected"),
    [
        (0.08, 1, 70, 1e-5, 0.606),
        (0.15, 1, 70, 1e-5, 0.323),
        (0.3, 1, 70, 1e-5, 0.162),
        (0.08, 5, 70, 1e-5, 1.355),
        (0.15, 5, 70, 1e-5, 0.723),
        (0.3, 5, 70, 1e-5, 0.361),
        (0.15, 3, 1200, 1e-4, 0.0292),
        (0.15, 3, 1000, 1e-4, 0.0350),
        (0.15, 3, 750, 1e-4, 0.0467),
        (0.15, 3, 600, 1e-4, 0.0584),
        (0.15, 3, 250, 1e-4, 0.140),
        (0.15, 3, 100, 1e-4, 0.350),
        (0.15, 3, 131, 1e-4, 0.2675),
    ],
)
def test_dp_rsgd_sigma_matches_spec_table(eps, k, n_local, delta, expected):
    sigma = papers.dp_rsgd_sigma(eps, delta, clip=1.0, n_local=n_local, local_steps=k)
    # the spec prints 3-4 significant digits: agree to half a unit in the last printed digit
    assert abs(sigma - expected) <= _half_unit(expected)
    # proportional to the clip level
    assert papers.dp_rsgd_sigma(eps, delta, 2.5, n_local, k) == pytest.approx(2.5 * sigma)


@pytest.mark.parametrize(
    ("eps", "k", "m", "n_local", "delta", "expected"),
    [
        (0.08, 2, 53, 100, 1e-5, 4.367),
        (0.15, 2, 53, 100, 1e-5, 2.329),
        # the spec prints 1.165; sqrt(106 ln 1e5)/30 = 1.16447 (a rounding slip in the spec)
        (0.3, 2, 53, 100, 1e-5, 1.16447),
        (0.15, 3, 166, 1200, 1e-4, 0.376),
        (0.15, 3, 200, 1000, 1e-4, 0.496),
        (0.15, 3, 266, 750, 1e-4, 0.762),
        (0.15, 3, 333, 600, 1e-4, 1.066),
        (0.15, 3, 10, 250, 1e-4, 0.443),
        (0.15, 3, 10, 100, 1e-4, 1.108),
        (0.15, 3, 5, 131, 1e-4, 0.598),
    ],
)
def test_dp_rsvrg_sigma_matches_spec_table(eps, k, m, n_local, delta, expected):
    sigma = papers.dp_rsvrg_sigma(eps, delta, 1.0, 0.5, n_local, k, m)
    assert abs(sigma - expected) <= _half_unit(expected)
    # tau = max(tau0, tau1)
    assert papers.dp_rsvrg_sigma(eps, delta, 0.5, 3.0, n_local, k, m) == pytest.approx(3 * sigma)


def test_rsvrg_with_one_inner_step_is_rsgd():
    assert papers.dp_rsvrg_sigma(0.2, 1e-5, 1.0, 1.0, 50, 4, 1) == pytest.approx(
        papers.dp_rsgd_sigma(0.2, 1e-5, 1.0, 50, 4)
    )


def test_generic_tools_agree_with_theorem_4_2():
    r = papers.prirfed_privacy(300, 5, 0.15, 1e-4, 200, 1e-3)
    eps_tilde = papers.subsampled_epsilon(5 * 0.15, 5 / 300)
    assert eps_tilde == pytest.approx(r.eps_tilde, rel=1e-14)
    assert papers.advanced_composition(eps_tilde, 200, 1e-3) == pytest.approx(r.epsilon)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_agents": 10, "s": 11}, "s"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"delta_hat": 0.0}, "delta_hat"),
        ({"rounds": 0}, "rounds"),
    ],
)
def test_prirfed_bad_input(kwargs, name):
    args = {
        "n_agents": 100,
        "s": 5,
        "epsilon": 0.15,
        "delta": 1e-4,
        "rounds": 50,
        "delta_hat": 1e-3,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"'{name}'"):
        papers.prirfed_privacy(**args)
