"""The settings of an experiment: ``--set`` strings read, types coerced, generic checks.

:meth:`rfed.experiments.Experiment.config` applies :func:`configure`, then the experiment's own
``validate(config)``, which reports a bad setting with :func:`check_setting` and
:func:`check_choices` (the message names the setting by its ``--set`` key).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["check_choices", "check_setting", "configure", "parse_overrides"]

#: Settings that count something and must be an int >= 1 when an experiment has them.
_POSITIVE_INT_SETTINGS = frozenset({"repetitions", "rounds", "iterations", "eval_every",
                                    "mc_runs", "epochs"})

#: Names of the settings that hold an epsilon (> 0) or a delta (in (0, 1)).
_EPSILON_SETTING = re.compile(r"^(eps|epsilon)(_|$)|_(eps|epsilon)$")
_DELTA_SETTING = re.compile(r"^delta(0|_|$)|_delta$")


def configure(experiment: str, defaults: Mapping[str, Any],
              overrides: Mapping[str, Any] | None,
              scales: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
    """The ``defaults`` of ``experiment`` updated by ``overrides``, coerced and checked.

    An unknown key is refused. A string is read as a Python literal of the default's type
    (``--set rounds=5``); a number is accepted where the default is a list (one element).
    Generic checks: a counting setting (``repetitions``, ``rounds``, ...) and every int
    setting whose default is >= 1 (but seeds) is an int >= 1; a float setting is finite, an
    epsilon > 0 and a delta in (0, 1) (by the setting's name); a list whose default is
    non-empty stays non-empty and holds numbers of the default's sign, or names.

    ``scale``: an experiment with a ``scale`` setting and ``scales`` (e.g. ``{"paper":
    {...}}``) takes the settings of the named scale first, then the other overrides.

    Parameters
    ----------
    experiment : str
        Its name (for the messages).
    defaults : mapping
        Every setting and its default value.
    overrides : mapping or None
        Settings to change (values or strings to read).
    scales : mapping, optional
        A value of the ``scale`` setting (e.g. ``"paper"``) -> the settings it changes; the
        default value of ``scale`` changes nothing.

    Returns
    -------
    dict
        Every setting.

    Raises
    ------
    ValueError
        Naming the setting and what was expected.
    """
    cfg = dict(defaults)
    overrides = dict(overrides or {})
    scales = scales or {}
    if "scale" in cfg and "scale" in overrides:
        scale = _coerce("scale", overrides.pop("scale"), cfg["scale"])
        if scale != defaults["scale"] and scale not in scales:
            raise ValueError(f"setting 'scale' must be one of "
                             f"{', '.join(map(repr, [defaults['scale'], *scales]))}"
                             f", got {scale!r}")
        cfg.update(scales.get(scale, {}))
        cfg["scale"] = scale
    for key, value in overrides.items():
        if key not in cfg:
            raise ValueError(
                f"experiment '{experiment}' has no setting '{key}'; valid settings: "
                f"{', '.join(sorted(cfg))}"
            )
        cfg[key] = _coerce(key, value, cfg[key])
        default = defaults[key]
        counting = key in _POSITIVE_INT_SETTINGS or (
            isinstance(default, int) and not isinstance(default, bool) and default >= 1
            and not key.endswith("seed"))
        if counting and isinstance(default, int) and cfg[key] < 1:
            raise ValueError(f"setting '{key}' must be an int >= 1, got {cfg[key]!r}")
        if isinstance(default, float) and not math.isfinite(cfg[key]):
            raise ValueError(f"setting '{key}' must be a finite number, got {cfg[key]!r}")
        if isinstance(default, float) and _EPSILON_SETTING.match(key) and cfg[key] <= 0:
            raise ValueError(f"setting '{key}' must be an epsilon > 0, got {cfg[key]!r}")
        if isinstance(default, float) and _DELTA_SETTING.match(key) \
                and not 0 < cfg[key] < 1:
            raise ValueError(f"setting '{key}' must be a delta in (0, 1), got {cfg[key]!r}")
        if isinstance(default, (list, tuple)) and len(default) and not len(cfg[key]):
            raise ValueError(f"setting '{key}' must not be empty (default {default!r})")
    return cfg


def _kind(default: Any) -> str:
    """``'an int'``, ``'a float'``, ...: the type of a setting's default, with its article."""
    name = type(default).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


# The spellings a shell user types for a boolean ``--set`` value (case-insensitive).
_BOOLEAN_SPELLINGS = {"true": True, "yes": True, "on": True, "1": True,
                      "false": False, "no": False, "off": False, "0": False}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool) and isinstance(value, str):
        spelled = _BOOLEAN_SPELLINGS.get(value.strip().lower())
        if spelled is None:
            raise ValueError(f"setting '{key}' must be true or false (also yes/no, on/off, "
                             f"1/0), got {value!r}")
        return spelled
    if isinstance(value, str) and not isinstance(default, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ValueError(
                f"setting '{key}': cannot read {value!r} as {_kind(default)} "
                f"(default {default!r})"
            ) from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"setting '{key}' must be True or False, got {value!r}")
        return value
    if isinstance(value, bool) and default is not None:
        raise ValueError(
            f"setting '{key}' must be {_kind(default)} (default {default!r}), got {value!r}"
        )
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (int, float)):
        value = [value]
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(default)(_check_elements(key, list(value), default))
    if default is not None and not isinstance(value, type(default)):
        raise ValueError(
            f"setting '{key}' must be {_kind(default)} (default {default!r}), got {value!r}"
        )
    return value


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_elements(key: str, values: list, default: Sequence) -> list:
    """A list of numbers (``epsilons``, ``agents``, ...) holds finite numbers of the
    default's sign: all defaults positive -> positive, all non-negative -> non-negative; a
    list of strings holds strings."""
    if default and all(_is_real(d) for d in default):
        for v in values:
            if not _is_real(v) or not math.isfinite(v):
                raise ValueError(f"setting '{key}' holds numbers (default {list(default)!r}), "
                                 f"got {v!r}")
        if all(d > 0 for d in default) and any(v <= 0 for v in values):
            raise ValueError(f"setting '{key}' holds numbers > 0 (default "
                             f"{list(default)!r}), got {values!r}")
        if all(d >= 0 for d in default) and any(v < 0 for v in values):
            raise ValueError(f"setting '{key}' holds numbers >= 0 (default "
                             f"{list(default)!r}), got {values!r}")
        if all(isinstance(d, int) for d in default) and \
                any(not isinstance(v, int) for v in values):
            raise ValueError(f"setting '{key}' holds ints (default {list(default)!r}), "
                             f"got {values!r}")
    elif default and all(isinstance(d, str) for d in default):
        for v in values:
            if not isinstance(v, str):
                raise ValueError(f"setting '{key}' holds names (default {list(default)!r}), "
                                 f"got {v!r}")
    return values


def check_setting(config: Mapping[str, Any], key: str, ok: bool, expected: str) -> None:
    """Raise ``ValueError("setting 'KEY' must be EXPECTED, got VALUE")`` unless ``ok``.

    For an experiment's ``validate(config)``: the message names the setting by its ``--set``
    key and says what was expected.

    Parameters
    ----------
    config : mapping
        The experiment's settings.
    key : str
        The ``--set`` key.
    ok : bool
        Whether the value is acceptable.
    expected : str
        What the setting must be, in words.
    """
    if not ok:
        raise ValueError(f"setting '{key}' must be {expected}, got {config[key]!r}")


def check_choices(config: Mapping[str, Any], key: str, choices: Iterable[str]) -> None:
    """The setting ``key`` (a name, or a list of names) takes only values in ``choices``.

    Parameters
    ----------
    config : mapping
    key : str
        The ``--set`` key.
    choices : iterable of str
    """
    value = config[key]
    names = value if isinstance(value, (list, tuple)) else [value]
    allowed = list(choices)
    bad = [v for v in names if v not in allowed]
    if bad:
        what = "one of" if not isinstance(value, (list, tuple)) else "a list of names among"
        raise ValueError(f"setting '{key}' must be {what} {', '.join(map(repr, allowed))}; "
                         f"got {bad[0]!r}")


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings (from ``--set``) into a dict of raw strings.

    Parameters
    ----------
    items : iterable of str
        ``key=value`` strings.

    Returns
    -------
    dict of str to str
    """
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
