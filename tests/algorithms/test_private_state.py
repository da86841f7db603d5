"""PrivateState.advance: the state dataclasses.replace builds, without its call through
__init__ (the fast path of plain state classes), for every decentralized state class."""

import dataclasses

import numpy as np
import pytest

from rfed.algorithms.decentralized.base import PrivateState
from rfed.algorithms.decentralized.doadp import DOADPState
from rfed.algorithms.decentralized.dpdda import DPDDAState
from rfed.algorithms.decentralized.dpdl import DPDLState
from rfed.algorithms.decentralized.dpdo import DPDOState

STATE_CLASSES = [PrivateState, DOADPState, DPDDAState, DPDLState, DPDOState]


def _instance(cls):
    """An instance of ``cls`` whose every field holds a distinct object."""
    values = {}
    for k, f in enumerate(dataclasses.fields(cls)):
        values[f.name] = k if f.name == "t" else np.full(2, float(k))
    return cls(**values)


@pytest.mark.parametrize("cls", STATE_CLASSES, ids=lambda c: c.__name__)
def test_advance_is_replace(cls):
    state = _instance(cls)
    changed = {f.name: object() for f in dataclasses.fields(cls)[1:3]}
    got = state.advance(**changed)
    want = dataclasses.replace(state, t=state.t + 1, **changed)
    assert type(got) is cls and got is not state
    for f in dataclasses.fields(cls):
        # the same objects (references copied, nothing copied deeper), t advanced
        assert getattr(got, f.name) is getattr(want, f.name) or \
            getattr(got, f.name) == getattr(want, f.name), f.name
    assert got.t == state.t + 1
    assert vars(got).keys() == vars(want).keys()
    # the old state is untouched
    assert all(getattr(state, f.name) is not changed.get(f.name)
               for f in dataclasses.fields(cls))


def test_advance_refuses_what_replace_refuses():
    state = _instance(DPDDAState)
    with pytest.raises(TypeError):
        state.advance(no_such_field=1)
    with pytest.raises(TypeError):   # t is advance's own
        state.advance(t=7)


def test_a_class_with_post_init_goes_through_replace():
    @dataclasses.dataclass
    class Checked(PrivateState):
        seen: int = 0

        def __post_init__(self):
            self.seen += 1

    state = Checked(t=0, x=np.zeros(2), rng=None, comm=None)
    assert state.advance(x=np.ones(2)).seen == 2   # __post_init__ ran again, as replace does
