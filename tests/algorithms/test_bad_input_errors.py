"""Bad input named by the argument (privacy budget, ledger, step sizes)."""

import numpy as np
import pytest

from rfed.algorithms._steps import injectivity_radius
from rfed.algorithms.decentralized import DOADP, DPDL, DPDPSGD, NoisyDSGD
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import SPD, Euclidean, Grassmann, Sphere
from rfed.networks import Network, ring
from rfed.privacy import PrivacyBudget, PrivacyLedger
from rfed.problems import SpherePCA


def test_privacy_budget_refuses_strings_and_keeps_floats():
    with pytest.raises(TypeError, match="argument 'epsilon' must be a real number, got str"):
        PrivacyBudget(epsilon="1")
    with pytest.raises(TypeError, match="argument 'delta' must be a real number, got str"):
        PrivacyBudget(1.0, delta="1e-5")
    b = PrivacyBudget(np.float32(2), 1e-5)
    assert type(b.epsilon) is float and b.epsilon == 2.0


def test_ledger_refuses_a_round_before_the_last_recorded():
    led = PrivacyLedger(3)
    led.record(5, [0], sigma=1.0, sensitivity=1.0)
    led.record(5, [1], sigma=1.0, sensitivity=1.0)   # the same round again: fine
    with pytest.raises(ValueError, match=r"argument 'round' \(4\) is before the last round "
                                         r"recorded \(5\)"):
        led.record(4, [2], sigma=1.0, sensitivity=1.0)
    spec = led.spent(0)[0][0]
    with pytest.raises(ValueError, match=r"argument 'round' \(2\)"):
        led.record_event(2, spec, np.array([1]))
    led.record_event(6, spec, np.array([1]))
    assert led.rounds_participated.tolist() == [1, 2, 0]


@pytest.mark.parametrize("cls", [DPDL, DPDPSGD])
def test_zero_learning_rate_is_refused_as_doadp_refuses_alpha_zero(cls):
    with pytest.raises(ValueError, match="argument 'lr' \\(the step size\\) must be > 0"):
        cls(Network(ring(4)), lr=0.0)
    with pytest.raises(ValueError, match="argument 'alpha' \\(the step size\\) must be > 0"):
        DOADP(Network(ring(4)), alpha=0.0)


def test_injectivity_radii():
    assert injectivity_radius(Sphere(3)) == np.pi
    assert injectivity_radius(Grassmann(5, 2)) == np.pi / 2
    for m in (Euclidean(3), SPD(2)):
        assert injectivity_radius(m) == np.inf


def _pca():
    return SpherePCA(make_pca_synthetic(4, 20, 6, 0.3, 1))


@pytest.mark.parametrize("cls", [DOADP, NoisyDSGD])
def test_doadp_with_a_huge_alpha_on_the_sphere_is_refused_naming_alpha(cls):
    alg = cls(Network(ring(4)), alpha=1e9, grad_bound=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="argument 'alpha'.*injectivity radius"):
        alg.run(_pca(), 5, rng=0)
    assert not cls(Network(ring(4)), alpha=0.05, grad_bound=1.0, noise_multiplier=1.0).run(
        _pca(), 5, rng=0).diverged


def test_prirfed_with_a_step_that_wraps_the_sphere_warns_naming_step_size(recwarn):
    from rfed.algorithms.federated import DPRSGD, PriRFed

    def run(step):
        trainer = DPRSGD(steps=1, batch_size=5, clip=1.0, noise_multiplier=1.0)
        return PriRFed(trainer, n_sampled=None, step_size=step).run(_pca(), 2, rng=0)

    with pytest.warns(UserWarning, match="argument 'step_size'.*injectivity radius"):
        run(1e6)
    recwarn.clear()
    run(0.5)            # 0.5 * clip 1 < pi: no warning
    assert not [w for w in recwarn if "injectivity" in str(w.message)]
