import numpy as np
import pytest

import rfed._einsum as mod
from rfed._einsum import einsum


@pytest.mark.parametrize("subscripts,shapes", [
    ("...i,...i->...", [(7, 25), (7, 25)]),
    ("...i,...i->...", [(3, 1, 26), (3, 40, 26)]),
    ("...i,...i->...", [(26,), (26,)]),
    ("...bd,...d->...b", [(4, 50, 31), (4, 31)]),
])
def test_c_einsum_gives_np_einsum_bits(subscripts, shapes):
    """rfed's einsum (numpy's C einsum, called without the wrapper) returns np.einsum's bits,
    contiguous or strided, and into ``out``; on this numpy it is the C function, not the
    wrapper. A dot product by another route (np.vecdot) differs in the last bits here."""
    rng = np.random.default_rng(4)
    ops = [rng.standard_normal(s) * 10.0 ** rng.uniform(-3, 3, s) for s in shapes]
    np.testing.assert_array_equal(einsum(subscripts, *ops), np.einsum(subscripts, *ops))
    strided = [np.repeat(o, 2, axis=-1)[..., ::2] for o in ops]
    assert not strided[0].flags.c_contiguous
    np.testing.assert_array_equal(einsum(subscripts, *strided),
                                  np.einsum(subscripts, *strided))
    out = np.empty(np.einsum(subscripts, *ops).shape)
    assert einsum(subscripts, *ops, out=out) is out
    np.testing.assert_array_equal(out, np.einsum(subscripts, *ops))
    assert einsum is not np.einsum
    if subscripts == "...i,...i->..." and shapes[0] == (7, 25):
        assert not np.array_equal(np.vecdot(*ops), np.einsum(subscripts, *ops))


def test_falls_back_to_np_einsum(monkeypatch):
    """Without numpy's C einsum (a numpy that moved it), np.einsum itself."""
    import importlib

    def no_module(name):
        raise ImportError(name)

    monkeypatch.setattr(importlib, "import_module", no_module)
    assert mod._c_einsum() is np.einsum
