"""Fixtures of the manifold tests: every manifold case of manifold_cases.CASES x two seeds."""

import numpy as np
import pytest
from manifold_cases import CASES


@pytest.fixture(params=list(CASES), scope="module")
def manifold(request):
    return CASES[request.param]()


@pytest.fixture(params=[0, 1])
def rng(request):
    return np.random.default_rng(request.param)
