"""Bad input gets a ValueError naming the argument, the manifold and the violation size."""

import re

import numpy as np
import pytest

from rfed.manifolds import (
    SPD,
    Euclidean,
    Hyperboloid,
    PoincareBall,
    Product,
    Sphere,
    as_generator,
    to_pymanopt,
)


def _off_points():
    """(manifold, valid point, point off the manifold, expected violation) per case."""
    rng = np.random.default_rng(0)
    s = Sphere(2)
    x_s = s.random_point(rng)
    spd = SPD(3)
    p = spd.random_point(rng)
    h = Hyperboloid(2)
    x_h = h.random_point(rng)
    ball = PoincareBall(2)
    return [
        (s, x_s, 2.0 * x_s, 1.0),  # | ||x|| - 1 | = 1
        (spd, p, -p, None),  # negative definite
        (spd, p, p + np.triu(np.ones((3, 3)), 1), None),  # not symmetric
        (h, x_h, 2.0 * x_h, 3.0 / (1.0 + 4.0 * np.sum(x_h**2))),
        (h, x_h, -x_h, 1.0),  # lower sheet
        (ball, ball.random_point(rng), np.array([0.6, 0.9]), np.hypot(0.6, 0.9)),
    ]


@pytest.mark.parametrize("case", range(6))
def test_point_off_manifold(case):
    m, _, bad, expected = _off_points()[case]
    with pytest.raises(ValueError) as info:
        m.check_point(bad, "x0")
    msg = str(info.value)
    assert "argument 'x0'" in msg and m.name in msg and "not on the manifold" in msg
    size = float(re.search(r"violation ([0-9.e+-]+)", msg).group(1))
    np.testing.assert_allclose(size, float(np.max(m.point_violation(bad))), rtol=1e-3)
    if expected is not None:
        np.testing.assert_allclose(size, expected, rtol=1e-3)
    assert not m.belongs(bad)


def test_off_manifold_reports_batch_index():
    s = Sphere(2)
    x = s.random_point(0, (4,))
    x[2] *= 1.5
    with pytest.raises(ValueError, match=r"batch index \(2,\)"):
        s.check_point(x)


def _off_tangents():
    rng = np.random.default_rng(1)
    s = Sphere(2)
    x_s = s.random_point(rng)
    spd = SPD(2)
    p = spd.random_point(rng)
    h = Hyperboloid(2)
    x_h = h.random_point(rng)
    return [
        (s, x_s, x_s + s.tangent_gaussian(x_s, 1.0, rng)),
        (spd, p, np.array([[1.0, 2.0], [0.0, 1.0]])),
        (h, x_h, x_h),
    ]


@pytest.mark.parametrize("case", range(3))
def test_vector_off_tangent_space(case):
    m, x, bad = _off_tangents()[case]
    with pytest.raises(ValueError) as info:
        m.check_tangent(x, bad, "grad")
    msg = str(info.value)
    assert "argument 'grad'" in msg and m.name in msg and "not a tangent vector" in msg
    size = float(re.search(r"violation ([0-9.e+-]+)", msg).group(1))
    np.testing.assert_allclose(size, float(m.tangent_violation(x, bad)), rtol=1e-3)
    assert size > 1e-3
    assert not m.is_tangent(x, bad)


ALL = [
    Euclidean(3),
    Sphere(2),
    SPD(2),
    Hyperboloid(2),
    PoincareBall(2),
    Product(Sphere(2), SPD(2)).as_flat(),
]


@pytest.mark.parametrize("m", ALL, ids=str)
def test_wrong_shape(m):
    bad = np.zeros((4,) + tuple(d + 1 for d in m.point_shape))
    with pytest.raises(ValueError) as info:
        m.check_point(bad, "y")
    msg = str(info.value)
    assert "argument 'y'" in msg and m.name in msg and "has shape (4," in msg
    assert str(m.point_shape) in msg


@pytest.mark.parametrize("m", ALL, ids=str)
def test_non_finite(m):
    x = np.array(m.random_point(0, (3,)))
    x[1].flat[0] = np.nan
    x[2].flat[-1] = np.inf
    with pytest.raises(ValueError, match=r"argument 'x'.*2 non-finite value") as info:
        m.check_point(x)
    assert m.name in str(info.value)
    assert list(m.belongs(x)) == [True, False, False]
    u = np.array(m.tangent_gaussian(m.random_point(0), 1.0, 0))
    u.flat[0] = np.nan
    with pytest.raises(ValueError, match=r"argument 'u'.*1 non-finite value"):
        m.check_tangent(m.random_point(0), u)


def test_not_numeric():
    with pytest.raises(ValueError, match=r"Sphere\(2\): argument 'x' is not a numeric array"):
        Sphere(2).check_point("abc")


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda: SPD(0), "'n'"),
        (lambda: SPD(2.5), "'n'"),
        (lambda: Hyperboloid(0), "'dim'"),
        (lambda: Hyperboloid(True), "'dim'"),
        (lambda: PoincareBall(-1), "'dim'"),
        (lambda: Sphere("3"), "'dim'"),
        (lambda: Euclidean(), "'shape'"),
        (lambda: Euclidean(3, 0), "'shape'"),
        (lambda: Product(), "'manifolds'"),
        (lambda: Product(Sphere(2), "SPD(2)"), "'manifolds[1]'"),
    ],
)
def test_bad_constructor_argument(make, arg):
    with pytest.raises(ValueError, match=re.escape(arg)):
        make()


def test_product_validation_names_the_block():
    prod = Product(Sphere(2), SPD(2))
    x = prod.random_point(0)
    bad = (x[0], -x[1])
    with pytest.raises(ValueError, match=r"SPD\(2\): argument 'x\[1\]' is not on the manifold"):
        prod.check_point(bad)
    with pytest.raises(ValueError, match=r"argument 'x' must be a tuple of 2 arrays"):
        prod.check_point(x[0])
    with pytest.raises(ValueError, match=r"of length 3"):
        prod.check_point(x + (x[0],))
    u = prod.tangent_gaussian(x, 1.0, 0)
    with pytest.raises(ValueError, match=r"Sphere\(2\): argument 'u\[0\]' is not a tangent"):
        prod.check_tangent(x, (u[0] + x[0], u[1]))
    assert not prod.belongs(bad)
    assert prod.belongs(x)
    with pytest.raises(ValueError, match=r"SPD\(2\): argument 'x\[1\]'"):
        prod.checked().exp(bad, u)


def test_checked_view_rejects_bad_input():
    s = Sphere(2)
    x = s.random_point(0)
    with pytest.raises(ValueError, match=r"Sphere\(2\): argument 'y' is not on the manifold"):
        s.checked().log(x, 3 * x)
    with pytest.raises(ValueError, match=r"argument 'u' is not a tangent vector"):
        s.checked().exp(x, x)


def test_generator_argument():
    assert isinstance(as_generator(3), np.random.Generator)
    with pytest.raises(TypeError, match="argument 'rng'"):
        Sphere(2).random_point(None)
    with pytest.raises(TypeError, match="argument 'seed'"):
        to_pymanopt(Sphere(2), seed=None)
    with pytest.raises(ValueError, match="argument 'manifold'"):
        to_pymanopt("Sphere(2)")


def test_mean_weights_validation():
    s = Sphere(2)
    pts = s.random_point(0, (3,))
    with pytest.raises(ValueError, match="argument 'weights'"):
        s.mean(pts, np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="argument 'weights' has shape"):
        s.mean(pts, np.ones(4))
    with pytest.raises(ValueError, match="argument 'points' has shape"):
        s.mean(np.zeros((3, 4)))


# ---------------------------------------------------------------- every manifold case
from manifold_cases import (  # noqa: E402
    CASES,
    ambient_normal,
    blocks,
    is_product,
    scale,
    unit_tangent,
)

EVERY = list(CASES)


@pytest.mark.parametrize("case", EVERY)
def test_checked_view_names_arguments_whose_batches_do_not_broadcast(case):
    m = CASES[case]()
    x, y = m.random_point(0, (5,)), m.random_point(1, (3,))
    with pytest.raises(ValueError, match=r"batch shapes .* of arguments 'x.* \(5,\).*'y.* "
                                         r"\(3,\) do not broadcast"):
        m.checked().dist(x, y)
    with pytest.raises(ValueError, match=r"'x.* \(5,\).*'u.* \(3,\) do not broadcast"):
        m.checked().exp(x, m.zero_vector(y))
    # batches that broadcast still pass
    assert np.shape(m.checked().dist(x, m.random_point(2, (5,)))) == (5,)


@pytest.mark.parametrize("case", EVERY)
@pytest.mark.parametrize("sigma", [np.nan, np.inf, -0.5, "big"])
def test_checked_tangent_gaussian_refuses_bad_sigma(case, sigma):
    m = CASES[case]()
    x = m.random_point(0)
    with pytest.raises(ValueError, match=r"argument 'sigma'"):
        m.checked().tangent_gaussian(x, sigma, 0)
    with pytest.raises(ValueError, match=r"argument 'sigma'"):
        m.checked().tangent_gaussian(x, sigma=sigma, rng=0)


@pytest.mark.parametrize("case", EVERY)
def test_checked_tangent_gaussian_refuses_one_bad_entry_of_an_array_sigma(case):
    m = CASES[case]()
    x = m.random_point(0, (3,))
    with pytest.raises(ValueError, match=r"argument 'sigma'.*1 bad entries"):
        m.checked().tangent_gaussian(x, np.array([0.1, -1.0, 0.2]), 0)
    m.checked().tangent_gaussian(x, np.array([0.1, 0.0, 0.2]), 0)  # zero noise is valid


@pytest.mark.parametrize("case", EVERY)
def test_complex_points_are_refused(case):
    m = CASES[case]()
    x = m.random_point(0)
    if is_product(m):
        bad = (x[0] + 1e-3j, x[1])
        with pytest.raises(ValueError, match=r"argument 'x\[0\]' is complex"):
            m.check_point(bad)
        return
    with pytest.raises(ValueError, match=r"argument 'x' is complex"):
        m.check_point(x + 0j)
    u = m.tangent_gaussian(x, 1.0, 0)
    with pytest.raises(ValueError, match=r"argument 'u' is complex"):
        m.check_tangent(x, u * (1 + 0j))


@pytest.mark.parametrize("case", EVERY)
def test_checked_exp_refuses_an_overflowing_step(case):
    """A step so long that exp leaves float64 (or, on the ball, reaches the boundary float64
    can represent) is refused, naming 'u', instead of returning NaN or a clipped point."""
    m = CASES[case]()
    x = m.random_point(0)
    u = unit_tangent(m, x, np.random.default_rng(1), 1.0)
    huge = scale(m, u, 1e300)
    try:
        y = m.exp(x, huge)
    except (FloatingPointError, ValueError) as exc:  # refused by exp itself: fine too
        assert "float64" in str(exc) or "representable" in str(exc)
        return
    if all(np.all(np.isfinite(b)) for _, b in blocks(m, y)) and np.all(m.belongs(y)) and not (
        isinstance(m, PoincareBall)
    ):
        # a representable result (Euclidean: x + u; compact manifolds: a point of the
        # geodesic) is valid; the checked view passes it through unchanged
        assert np.all(m.belongs(m.checked().exp(x, huge)))
        return
    with pytest.raises(ValueError, match=r"argument 'u(\[\d\])?' is too long"):
        m.checked().exp(x, huge)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("case", EVERY)
def test_checked_exp_of_an_overflowing_step_is_warning_free(case):
    """The step of the test above through the checked view only: refused (or, where the result
    is representable, passed) without a RuntimeWarning on the way. The hyperboloid's squares of
    a 1e300 step overflowed, as did the ball's t * t, the tangent checks' norms (sphere, SPD),
    the refusal message's |u|_x (Stiefel, Oblique) and X^T X of a huge result (SO)."""
    m = CASES[case]()
    x = m.random_point(0)
    huge = scale(m, unit_tangent(m, x, np.random.default_rng(1), 1.0), 1e300)
    try:
        y = m.checked().exp(x, huge)
    except (FloatingPointError, ValueError) as exc:
        assert "float64" in str(exc) or "too long" in str(exc)
        return
    assert np.all(m.belongs(y))


def _off(m, rng, violation):
    """An ambient array (tuple for products) that ``violation`` (point_violation, or
    tangent_violation at a fixed base point) rejects at scale 1, or None where every array
    passes (Euclidean space; every vector is tangent to the ball)."""
    for _ in range(5):
        a = ambient_normal(m, rng, ())
        if float(np.max(violation(a))) > 1e-3:
            return a
    return None


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("case", EVERY)
def test_checks_refuse_a_huge_non_member(case):
    """A vector off the tangent space, or an array off the manifold, stays refused when scaled
    by 1e300 (every violation is scale-free or grows with the scale for vectors longer than 1),
    without a RuntimeWarning. The sphere's tangent check passed 1e300 x (the norm overflowed to
    inf, so the violation |<x, u>| / inf was 0), and SPD's point check a huge non-symmetric
    matrix (asymmetry over an infinite norm)."""
    m = CASES[case]()
    rng = np.random.default_rng(7)
    x = m.random_point(0)
    u = _off(m, rng, lambda a: m.tangent_violation(x, a))
    if u is not None:
        with pytest.raises(ValueError, match=r"argument 'u(\[\d\])?' is not a tangent"):
            m.check_tangent(x, scale(m, u, 1e300))
    p = _off(m, rng, m.point_violation)
    if p is not None:
        with pytest.raises(ValueError, match=r"argument 'x(\[\d\])?' is not on the manifold"):
            m.check_point(scale(m, p, 1e300))


def test_checked_exp_on_the_ball_refuses_a_clipped_result():
    ball = PoincareBall(2)
    x = np.zeros(2)
    with pytest.raises(ValueError, match=r"argument 'u' is too long.*boundary"):
        ball.checked().exp(x, np.array([30.0, 0.0]))
    ball.checked().exp(x, np.array([3.0, 0.0]))  # well inside


@pytest.mark.parametrize("case", EVERY)
@pytest.mark.parametrize("option, value", [("max_iter", -1), ("max_iter", 0), ("max_iter", 2.5),
                                           ("tol", np.nan), ("tol", -1.0), ("tol", np.inf)])
def test_mean_refuses_bad_options(case, option, value):
    m = CASES[case]()
    pts = m.random_point(0, (4,))
    with pytest.raises(ValueError, match=rf"argument '{option}'"):
        m.mean(pts, **{option: value})


@pytest.mark.parametrize("case", EVERY)
def test_mean_of_no_point_is_refused(case):
    m = CASES[case]()
    empty = tuple(np.zeros((0,) + mi.point_shape) for mi, _ in blocks(m, m.random_point(0)))
    with pytest.raises(ValueError, match=r"argument 'points' holds no point"):
        m.mean(empty if is_product(m) else empty[0])


@pytest.mark.parametrize("case", EVERY)
@pytest.mark.parametrize("size", [-1, (2, -1), 2.5, True, "3"])
def test_random_point_refuses_a_bad_size(case, size):
    """A batch shape that is not non-negative ints is refused naming 'size' (it was numpy's
    "negative dimensions are not allowed", or a float truncated silently), and the good ones
    give their shape."""
    m = CASES[case]()
    with pytest.raises(ValueError, match=r"argument 'size' must be a batch shape"):
        m.random_point(0, size)
    for good, batch in [(0, (0,)), (np.int64(2), (2,)), ((2, 1), (2, 1)), ((), ())]:
        first = blocks(m, m.random_point(0, good))[0]
        assert first[1].shape == batch + first[0].point_shape
