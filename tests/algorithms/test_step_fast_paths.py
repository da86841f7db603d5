"""Issue 13's per-step fast paths give the bits of the general paths they shortcut.

Each test runs a fast path and the general (or former) computation on the same input and
asserts equality of every bit, plus the refusals the privacy claim needs.
"""

from __future__ import annotations

import numpy as np
import pytest

from rfed.algorithms.federated.streams import AgentBlockGenerator
from rfed.manifolds import Sphere
from rfed.manifolds.sphere import AntipodalError
from rfed.privacy._checks import _FEW, check_nonneg_array
from rfed.privacy.mechanisms import gaussian_mechanism
from rfed.problems import SpherePCA
from rfed.randomness import AgentStreams, StackedStreams


def test_stacked_draws_of_one_agent_blocks_are_each_runs_own_rows():
    # every block one agent: several agents, one agent twice under two seeds, and a seed above
    # 2**63
    seeds = [5, 9, 2**63 + 1, 5]
    blocks = [np.array([3]), np.array([3]), np.array([23]), np.array([40])]
    stacked = StackedStreams(seeds, blocks, agents_per_stream=1)
    for kind in ("normal", "uniform"):
        for shape in ((), (4,), (2, 3)):
            got = stacked.draw(6, "local#5", shape, kind)
            want = np.concatenate([getattr(AgentStreams(s, agents_per_stream=1), kind)(
                b, 6, "local#5", shape)
                                   for s, b in zip(seeds, blocks, strict=True)])
            assert got.shape == (4, *shape)
            np.testing.assert_array_equal(got, want)
    # one block of one agent through the generator (its one-run case) is the same stream
    gen = AgentBlockGenerator(9, np.array([3]), 6, "local")
    gen.calls = 5
    np.testing.assert_array_equal(gen.standard_normal((1, 4)),
                                  AgentStreams(9, agents_per_stream=1).normal(
                                      [3], 6, "local#5", (4,)))


def _general_path(manifold, x, value, sigma, seed):
    # lists are converted and broadcast by the general path of gaussian_mechanism
    return gaussian_mechanism(manifold, x.tolist(), value.tolist(), sigma,
                              np.random.default_rng(seed))


@pytest.mark.parametrize("sigma", [0.3, np.array([0.1, 0.0, 2.0])])
def test_gaussian_mechanism_fast_path_gives_the_general_paths_bits(sigma):
    man = Sphere(5)
    rng = np.random.default_rng(1)
    x = man.random_point(rng, (3,))
    value = man.proj(x, rng.standard_normal((3, 6)))
    fast = gaussian_mechanism(man, x, value, sigma, np.random.default_rng(11))
    np.testing.assert_array_equal(fast, _general_path(man, x, value, sigma, 11))
    # the keyed block generator of the trainers takes the fast path as well
    blocks = [np.array([a]) for a in (0, 17, 2)]
    fast = gaussian_mechanism(man, x, value, sigma,
                              AgentBlockGenerator.stacked([4, 5, 6], blocks, 2))
    general = gaussian_mechanism(man, x.tolist(), value.tolist(), sigma,
                                 AgentBlockGenerator.stacked([4, 5, 6], blocks, 2))
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_gaussian_mechanism_fast_path_refuses_what_the_general_path_refuses(bad):
    man = Sphere(3)
    x = man.random_point(np.random.default_rng(0), (2,))
    value = np.zeros((2, 4))
    value[1, 2] = bad
    with pytest.raises(ValueError, match="'value'"):
        gaussian_mechanism(man, x, value, 0.5, np.random.default_rng(0))
    for sigma in (np.array([0.5, bad]), np.array([0.5, -1.0]), -0.5, bad):
        with pytest.raises(ValueError, match="'sigma'"):
            gaussian_mechanism(man, x, np.zeros((2, 4)), sigma, np.random.default_rng(0))


@pytest.mark.parametrize("size", [1, 2, _FEW, _FEW + 1, 500])
def test_check_nonneg_array_same_verdict_for_few_and_many_values(size):
    ok = np.linspace(0.0, 3.0, size)
    np.testing.assert_array_equal(check_nonneg_array(ok, "s"), ok)
    for bad in (np.nan, np.inf, -1e-300):
        arr = ok.copy()
        arr[-1] = bad
        with pytest.raises(ValueError, match="'s'"):
            check_nonneg_array(arr.reshape(-1, 1) if size > 1 else arr, "s")


def test_sphere_transport_still_refuses_antipodal_pairs_and_only_them():
    man = Sphere(3)
    x = man.random_point(np.random.default_rng(3), (4,))
    u = man.proj(x, np.ones((4, 4)))
    y = x.copy()
    y[2] = -x[2]
    with pytest.raises(AntipodalError):
        man.transport(x, y, u)
    # far apart (c < -1) but not antipodal: transported, an isometry
    far = man.exp(x, 3.0 * u / np.linalg.norm(u, axis=-1, keepdims=True))
    assert np.all(np.einsum("ai,ai->a", x, far) < 0)
    out = man.transport(x, far, u)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(u, axis=-1),
                               rtol=1e-12)


def test_sphere_tangent_gaussian_per_row_sigma_is_the_broadcast_draw():
    man = Sphere(4)
    x = man.random_point(np.random.default_rng(4), (3,))
    sigma = np.array([0.5, 1.0, 2.0])
    got = man.tangent_gaussian(x, sigma, np.random.default_rng(8))
    z = np.random.default_rng(8).standard_normal((3, 5))
    z -= np.einsum("...i,...i->...", x, z)[..., None] * x
    z *= sigma[..., None]
    np.testing.assert_array_equal(got, z)
    with pytest.raises(ValueError):   # a point of the wrong dimension is still refused
        man.tangent_gaussian(np.ones((3, 6)), sigma, np.random.default_rng(8))


def _former_clipped_grad_sum(x, batch, bound, mask=None, blas=True):
    """SpherePCA.clipped_grad_sum as it was before issue 13 (explicit ones), with its two
    products by np.matmul as today (``blas=False``: by np.einsum, as then)."""
    z = batch["z"]
    a = np.matmul(z, x[..., None])[..., 0] if blas else np.einsum("...bd,...d->...b", z, x)
    c = np.ones_like(a) if mask is None else mask.astype(float)
    n_clipped = np.zeros(a.shape[:-1], dtype=int)
    if bound is not None:
        sq = batch["sq"]
        perp = np.maximum(sq - a * a, 0.0)
        norms = 2.0 * np.abs(a) * np.sqrt(perp)
        over = norms > bound
        c = c * np.where(over, bound / np.where(over, norms, 1.0), 1.0)
        n_clipped = np.sum(over if mask is None else over & mask, axis=-1)
    ca = c * a
    total = (np.matmul(ca[..., None, :], z)[..., 0, :] if blas
             else np.einsum("...bd,...b->...d", z, ca))
    total -= np.sum(ca * a, -1)[..., None] * x
    total *= -2.0
    return total, n_clipped


@pytest.mark.parametrize("bound", [None, 0.5, 1e9])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("b", [1, 7])
def test_pca_clipped_grad_sum_gives_the_former_bits(bound, masked, b):
    rng = np.random.default_rng(5)
    z = rng.standard_normal((4, 9, 6))
    z[0, 0] = 0.0   # a zero record (signed zeros in the products)
    p = SpherePCA(z)
    x = p.manifold.random_point(rng, (4,))
    batch = p.batch(np.arange(4), rng.integers(0, 9, (4, b)))
    mask = (rng.random((4, b)) < 0.7) if masked else None
    got = p.clipped_grad_sum(x, batch, bound, mask)
    want = _former_clipped_grad_sum(x, batch, bound, mask)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].dtype == want[1].dtype
    # the products by BLAS moved only the last bits of the einsum sums
    np.testing.assert_allclose(got[0], _former_clipped_grad_sum(x, batch, bound, mask,
                                                                blas=False)[0],
                               rtol=1e-13, atol=1e-13)
