"""``rfed._docstrings.sections_from``: an override keeps its own summary and gets its base's
numpydoc sections, which Sphinx then renders (and ``tools/numpydoc_sections.py`` counts)."""

from __future__ import annotations

import pytest

from rfed._docstrings import sections_from


def test_the_base_sections_follow_the_own_summary():
    def base(x):
        """Base summary.

        Parameters
        ----------
        x : int

        Returns
        -------
        int
        """

    @sections_from(base)
    def override(x):
        """What the override does."""
        return x

    assert override.__doc__ == ("What the override does.\n\nParameters\n----------\nx : int\n\n"
                                "Returns\n-------\nint")
    assert override(3) == 3   # the function itself, not a wrapper


def test_a_base_without_sections_is_refused():
    def base():
        """Only a summary."""

    with pytest.raises(ValueError, match="no numpydoc section"):
        sections_from(base)


def test_the_algorithms_steps_carry_the_sections_of_algorithm_step():
    from rfed.algorithms.base import Algorithm
    from rfed.algorithms.decentralized import DOADP, DPDL, Muffliato

    for cls in (DOADP, DPDL, Muffliato):
        doc = cls.step.__doc__
        assert doc.split("\n")[0] != Algorithm.step.__doc__.split("\n")[0]  # its own summary
        assert "Parameters\n----------\nproblem : Problem" in doc and "Returns\n-------" in doc
