"""Named, configurable experiment runs: registration, lookup and settings.

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
experiment only needs a new module with ``@register``. :func:`run_experiment` runs one through a
:class:`~rfed.experiments.run_context.RunContext` (the results folder;
:mod:`~rfed.experiments.checkpoints` its checkpoint, :mod:`~rfed.experiments.tables` its
tables), whose public names are importable from here too.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rfed.experiments.checkpoints import (
    OutputDirError,
    config_digest,
    read_checkpoint,
    read_run_config,
)
from rfed.experiments.run_context import RunContext
from rfed.experiments.settings import check_choices, check_setting, configure, parse_overrides
from rfed.experiments.tables import (
    SUMMARY_COLUMNS,
    clean_text,
    first_sentence,
    format_summary_table,
    format_table,
    summarise_repetitions,
    summary_row,
)
from rfed.experiments.timings import TimeEstimate, recorded_runs

__all__ = [
    "Experiment", "register", "get_experiment", "list_experiments", "run_experiment",
    "parse_overrides", "check_setting", "check_choices",
    # re-exported from settings, run_context, checkpoints and tables
    "RunContext", "OutputDirError", "read_checkpoint", "read_run_config", "config_digest",
    "SUMMARY_COLUMNS", "summary_row", "format_summary_table", "format_table",
    "summarise_repetitions", "clean_text",
]

#: Modules of this package that register no experiment (not imported by the lookup).
_NOT_EXPERIMENTS = frozenset({"registry", "settings", "run_context", "checkpoints", "tables",
                              "plotting", "audits", "timings"})
_REGISTRY: dict[str, Experiment] = {}
_LOADED = False


@dataclass(frozen=True)
class Experiment:
    """A named run: the paper it reproduces, its default configuration and its function.

    ``summary`` is the one line of ``rfed list`` (default: the first sentence of
    ``description``); ``description`` is the long text of ``rfed show NAME``.

    Parameters
    ----------
    name : str
        The name ``rfed run`` takes.
    paper : str
        The paper and figure or table reproduced.
    description : str
        The long text of ``rfed show NAME``.
    defaults : mapping
        The default settings, ``{name: value}``.
    func : callable
        ``func(config, ctx) -> summary``, the experiment itself.
    slow : bool, default False
        Whether the experiment is slow at its defaults.
    summary : str, default ""
        The line of ``rfed list``.
    requires : tuple of str, default ()
        The data sets that must be installed.
    validate : callable, optional
        ``validate(config)`` checks the settings beyond their types.
    scales : mapping, optional
        ``{scale: {setting: value}}``, the settings each value of ``scale`` changes.
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
    scales: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def short(self) -> str:
        """One line for ``rfed list``, internal references removed."""
        return clean_text(self.summary or first_sentence(self.description))

    @property
    def paper_label(self) -> str:
        """The paper and figure, internal references removed."""
        return clean_text(self.paper)

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict:
        """The defaults updated by ``overrides``; unknown keys are refused, types coerced.

        The generic checks of :func:`rfed.experiments.settings.configure`, then the
        experiment's own ``validate(config)`` checks what depends on it (choices, ranges,
        settings that depend on each other), naming the setting (:func:`check_setting`).

        ``scale``: an experiment with a ``scale`` setting and ``scales`` (e.g. ``{"paper":
        {...}}``) takes the settings of the named scale first, then the other overrides.

        Parameters
        ----------
        overrides : mapping, optional
            ``{setting: value}`` to change (the ``--set`` keys).

        Returns
        -------
        dict
            The complete, checked configuration.
        """
        cfg = configure(self.name, self.defaults, overrides, scales=self.scales)
        if self.validate is not None:
            self.validate(cfg)
        return cfg


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
    scales: Mapping[str, Mapping[str, Any]] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator registering ``func(config, ctx) -> summary`` as experiment ``name``.

    ``summary`` is the short line of ``rfed list``; ``description`` the long text;
    ``requires`` names the data sets that must be installed (e.g. ``("fashion-mnist",)``);
    ``validate(config)`` checks the settings beyond their types (choices, ranges, settings
    that depend on each other) before anything runs, raising ``ValueError`` naming the
    setting (:func:`check_setting`, :func:`check_choices`). ``scales`` maps a value of the
    experiment's ``scale`` setting (e.g. ``"paper"``) to the settings it changes
    (``--set scale=paper``); every key must be a setting.

    Parameters
    ----------
    name : str
        The experiment's name.
    paper : str
        The paper and figure or table it reproduces.
    description : str
        The long text.
    defaults : mapping
        The default settings.
    slow : bool, default False
        Whether it is slow at its defaults.
    summary : str, default ""
        The short line.
    requires : tuple of str, default ()
        The data sets it needs.
    validate : callable, optional
        The settings' own checks.
    scales : mapping, optional
        ``{scale: {setting: value}}``.

    Returns
    -------
    callable
        The decorator; it registers the function and returns it unchanged.

    Raises
    ------
    ValueError
        A scale sets an unknown setting, or the name is registered twice.
    """
    scales = {str(k): dict(v) for k, v in (scales or {}).items()}
    for scale, changes in scales.items():
        unknown = sorted(set(changes) - set(defaults))
        if "scale" not in defaults or unknown:
            raise ValueError(f"experiment '{name}': scale '{scale}' sets unknown settings "
                             f"{unknown or ['scale']}")

    def decorator(func: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].func is not func:
            raise ValueError(f"experiment '{name}' is registered twice")
        _REGISTRY[name] = Experiment(name, paper, description, dict(defaults), func, slow,
                                     summary, tuple(requires), validate, scales)
        return func

    return decorator


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import rfed.experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in _NOT_EXPERIMENTS and not info.name.startswith("_"):
            importlib.import_module(f"rfed.experiments.{info.name}")
    _LOADED = True


def list_experiments() -> list[Experiment]:
    """All registered experiments, sorted by name.

    Returns
    -------
    list of Experiment
    """
    _load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_experiment(name: str) -> Experiment:
    """The experiment registered as ``name``; the error lists the valid names.

    Parameters
    ----------
    name : str
        The experiment's name.

    Returns
    -------
    Experiment

    Raises
    ------
    ValueError
        No experiment is registered as ``name``.
    """
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown experiment '{name}'; available: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name]


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
    on_start: Callable[[], None] | None = None,
) -> tuple[dict, RunContext]:
    """Run experiment ``name``; return its summary and the context holding everything logged.

    The configuration is validated before anything is created on disk; if the run fails
    before writing any result, the output folder it created is removed again. Every
    :meth:`Algorithm.run` of the experiment is checkpointed (see the module's docstring and
    :class:`RunContext` for ``checkpoint_every`` and ``checkpoint_seconds``);
    ``mode="resume"`` continues a run from ``out_dir``.

    Parameters
    ----------
    name : str
        The experiment's name.
    seed : int, default 0
        The seed of every generator of the run.
    overrides : mapping, optional
        ``{setting: value}`` changing the defaults.
    out_dir : str or Path, optional
        The output folder; nothing is written when ``None``.
    progress : bool, default False
        Show a progress bar.
    mode : {"new", "overwrite", "resume"}, default "new"
        How an existing output folder is treated.
    checkpoint_every : int, default 100
        Rounds between checkpoints.
    secure : bool, default False
        Secure mode: noise from OS randomness (not reproducible).
    checkpoint_seconds : float, default 5.0
        The least time between two checkpoints.
    on_start : callable, optional
        Called with no argument once the configuration is valid and the output folder is
        ready, before the experiment's first run (``rfed run`` prints its header there, so a
        refused configuration or folder prints only the refusal).

    Returns
    -------
    summary : dict
        The experiment's summary.
    ctx : RunContext
        The context holding the records, privacy reports and tables.
    """
    from rfed.algorithms.base import run_hook

    if on_start is not None and not callable(on_start):
        raise TypeError(f"argument 'on_start' must be callable with no argument, got "
                        f"{type(on_start).__name__}")
    exp = get_experiment(name)
    config = exp.config(overrides)
    ctx = RunContext(seed=seed, out_dir=Path(out_dir) if out_dir is not None else None,
                     progress=progress, mode=mode, checkpoint_every=checkpoint_every,
                     secure=secure, checkpoint_seconds=checkpoint_seconds)
    ctx.title = exp.short
    ctx.estimate = TimeEstimate(recorded_runs(name, config, str(config.get("scale", "quick"))))
    # data standing in for the paper's (a "PUBLIC stand-in" only sets clip levels: not marked)
    ctx.stand_in = re.search(r"(?<!public )stand-in", exp.description.lower()) is not None
    start = time.perf_counter()
    try:
        ctx.open(name, config)
        if on_start is not None:
            on_start()
        with run_hook(ctx):
            summary = dict(exp.func(config, ctx))
        summary.setdefault("seconds", time.perf_counter() - start)
        ctx.finish(config, summary)
    except BaseException:
        ctx.abandon()
        raise
    return summary, ctx
