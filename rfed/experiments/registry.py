"""A registry of named, configurable experiment runs, and the context they write results through.

An experiment is a function ``run(config, ctx) -> summary`` registered under a name::

    @register("prirfed-pca-synthetic", paper="PriRFed, Fig. 1",
              summary="Private PCA on the sphere (Fig. 1)",
              description="...", defaults={"n_agents": 10, "epsilons": [0.5], ...})
    def run(config: dict, ctx: RunContext) -> dict:
        rng = ctx.rng(repetition)
        ...
        ctx.log(setting="eps=0.5", repetition=r, round=t, cost=..., excess_risk=...)
        ctx.set_privacy("eps=0.5", ledger.report_dict(delta))
        ctx.summary_table([summary_row(...), ...])
        ctx.save_figure(fig, "cost")
        return {"final_excess_risk": ...}

Every module in ``rfed.experiments`` is imported on first use of the registry, so a new
experiment only needs a new module with ``@register``.

The run context an experiment writes through is :mod:`rfed.experiments.run_context`; the
results folder's checkpoint :mod:`rfed.experiments.checkpoints`; the summary table
:mod:`rfed.experiments.tables`. Their public names are importable from here too.
"""

from __future__ import annotations

import ast
import importlib
import math
import pkgutil
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rfed.experiments.checkpoints import (
    OutputDirError,
    config_digest,
    read_checkpoint,
    read_run_config,
)
from rfed.experiments.run_context import RunContext
from rfed.experiments.tables import (
    SUMMARY_COLUMNS,
    _first_sentence,
    clean_text,
    format_summary_table,
    format_table,
    summarise_repetitions,
    summary_row,
)

__all__ = [
    "Experiment",
    "RunContext",
    "OutputDirError",
    "register",
    "get_experiment",
    "list_experiments",
    "run_experiment",
    "parse_overrides",
    "format_table",
    "summary_row",
    "format_summary_table",
    "summarise_repetitions",
    "clean_text",
    "read_checkpoint",
    "read_run_config",
    "config_digest",
    "check_setting",
    "check_choices",
    "SUMMARY_COLUMNS",
]

_REGISTRY: dict[str, Experiment] = {}
_LOADED = False

#: Settings that count something and must be an int >= 1 when an experiment has them.
_POSITIVE_INT_SETTINGS = frozenset({"repetitions", "rounds", "iterations", "eval_every",
                                    "mc_runs", "epochs"})

#: Names of the settings that hold an epsilon (> 0) or a delta (in (0, 1)).
_EPSILON_SETTING = re.compile(r"^(eps|epsilon)(_|$)|_(eps|epsilon)$")
_DELTA_SETTING = re.compile(r"^delta(0|_|$)|_delta$")

@dataclass(frozen=True)
class Experiment:
    """A named run: the paper it reproduces, its default configuration and its function.

    ``summary`` is the one line of ``rfed list`` (default: the first sentence of
    ``description``); ``description`` is the long text of ``rfed show NAME``.
    """

    name: str
    paper: str
    description: str
    defaults: Mapping[str, Any]
    func: Callable[[dict, RunContext], dict]
    slow: bool = False
    summary: str = ""
    requires: tuple[str, ...] = ()
    validate: Callable[[dict], None] | None = None

    @property
    def short(self) -> str:
        """One line for ``rfed list``, internal references removed."""
        return clean_text(self.summary or _first_sentence(self.description))

    @property
    def paper_label(self) -> str:
        """The paper and figure, internal references removed."""
        return clean_text(self.paper)

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict:
        """The defaults updated by ``overrides``; unknown keys are refused, types coerced.

        Generic checks: a counting setting (``repetitions``, ``rounds``, ...) and every int
        setting whose default is >= 1 (but seeds) is an int >= 1; a float setting is finite; a
        list whose default is non-empty (``epsilons``, ...) stays non-empty. Then the
        experiment's own ``validate(config)`` checks what depends on it (choices, ranges,
        settings that depend on each other), naming the setting (:func:`check_setting`).
        """
        cfg = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in cfg:
                raise ValueError(
                    f"experiment '{self.name}' has no setting '{key}'; valid settings: "
                    f"{', '.join(sorted(cfg))}"
                )
            cfg[key] = _coerce(key, value, cfg[key])
            default = self.defaults[key]
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
        if self.validate is not None:
            self.validate(cfg)
        return cfg


def _kind(default: Any) -> str:
    """``'an int'``, ``'a float'``, ...: the type of a setting's default, with its article."""
    name = type(default).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _coerce(key: str, value: Any, default: Any) -> Any:
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
    """
    if not ok:
        raise ValueError(f"setting '{key}' must be {expected}, got {config[key]!r}")


def check_choices(config: Mapping[str, Any], key: str, choices: Iterable[str]) -> None:
    """The setting ``key`` (a name, or a list of names) takes only values in ``choices``."""
    value = config[key]
    names = value if isinstance(value, (list, tuple)) else [value]
    allowed = list(choices)
    bad = [v for v in names if v not in allowed]
    if bad:
        what = "one of" if not isinstance(value, (list, tuple)) else "a list of names among"
        raise ValueError(f"setting '{key}' must be {what} {', '.join(map(repr, allowed))}; "
                         f"got {bad[0]!r}")


def register(
    name: str,
    *,
    paper: str,
    description: str,
    defaults: Mapping[str, Any],
    slow: bool = False,
    summary: str = "",
    requires: tuple[str, ...] = (),
    validate: Callable[[dict], None] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator registering ``func(config, ctx) -> summary`` as experiment ``name``.

    ``summary`` is the short line of ``rfed list``; ``description`` the long text;
    ``requires`` names the data sets that must be installed (e.g. ``("fashion-mnist",)``);
    ``validate(config)`` checks the settings beyond their types (choices, ranges, settings
    that depend on each other) before anything runs, raising ``ValueError`` naming the
    setting (:func:`check_setting`, :func:`check_choices`).
    """

    def decorator(func: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].func is not func:
            raise ValueError(f"experiment '{name}' is registered twice")
        _REGISTRY[name] = Experiment(name, paper, description, dict(defaults), func, slow,
                                     summary, tuple(requires), validate)
        return func

    return decorator


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import rfed.experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in {"registry", "plotting"} and not info.name.startswith("_"):
            importlib.import_module(f"rfed.experiments.{info.name}")
    _LOADED = True


def list_experiments() -> list[Experiment]:
    """All registered experiments, sorted by name."""
    _load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_experiment(name: str) -> Experiment:
    """The experiment registered as ``name``; the error lists the valid names."""
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown experiment '{name}'; available: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name]


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings (from ``--set``) into a dict of raw strings."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out



def run_experiment(
    name: str,
    *,
    seed: int = 0,
    overrides: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    progress: bool = False,
    mode: str = "new",
    checkpoint_every: int = 100,
    secure: bool = False,
    checkpoint_seconds: float = 5.0,
) -> tuple[dict, RunContext]:
    """Run experiment ``name``; return its summary and the context holding everything logged.

    The configuration is validated before anything is created on disk; if the run fails
    before writing any result, the output folder it created is removed again. Every
    :meth:`Algorithm.run` of the experiment is checkpointed (see the module's docstring and
    :class:`RunContext` for ``checkpoint_every`` and ``checkpoint_seconds``);
    ``mode="resume"`` continues a run from ``out_dir``.
    """
    from rfed.algorithms.base import run_hook

    exp = get_experiment(name)
    config = exp.config(overrides)
    ctx = RunContext(seed=seed, out_dir=Path(out_dir) if out_dir is not None else None,
                     progress=progress, mode=mode, checkpoint_every=checkpoint_every,
                     secure=secure, checkpoint_seconds=checkpoint_seconds)
    ctx.title = exp.short
    # data standing in for the paper's (a "PUBLIC stand-in" only sets clip levels: not marked)
    ctx.stand_in = re.search(r"(?<!public )stand-in", exp.description.lower()) is not None
    start = time.perf_counter()
    try:
        ctx.open(name, config)
        with run_hook(ctx):
            summary = dict(exp.func(config, ctx))
        summary.setdefault("seconds", time.perf_counter() - start)
        ctx.finish(config, summary)
    except BaseException:
        ctx.abandon()
        raise
    return summary, ctx
