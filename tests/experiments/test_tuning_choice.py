"""The choice of a public tuning search (:func:`rfed.experiments.tables.choose_best`)."""

import math

import pytest

from rfed.experiments.tables import choose_best


def test_the_first_strictly_best_row_wins_and_every_row_is_marked():
    rows = [{"alpha": 0.1, "score": 0.3}, {"alpha": 0.01, "score": 0.1},
            {"alpha": 0.001, "score": 0.1}, {"alpha": 0.03, "score": math.inf}]
    assert choose_best(rows, "score", ["alpha"])["alpha"] == 0.01   # the tie keeps the first
    assert [r["chosen"] for r in rows] == [False, True, False, False]
    # accuracies: the highest wins; several keys name a row
    rows = [{"a": 1, "g": 0.3, "acc": 80.0}, {"a": 1, "g": 1.0, "acc": 84.5},
            {"a": 2, "g": 0.3, "acc": -math.inf}]
    best = choose_best(rows, "acc", ["a", "g"], higher_is_better=True)
    assert (best["a"], best["g"]) == (1, 1.0)
    assert [r["chosen"] for r in rows] == [False, True, False]
    # a NaN score never displaces a finite one, and later rows still compete with the first
    rows = [{"s": 1, "v": 2.0}, {"s": 2, "v": math.nan}, {"s": 3, "v": 1.5}]
    assert choose_best(rows, "v", ["s"])["s"] == 3
    with pytest.raises(ValueError, match="argument 'rows'"):
        choose_best([], "v", ["s"])
