"""A registry of named, configurable experiment runs, and the context they write results through.

An experiment is a function ``run(config, ctx) -> summary`` registered under a name::

    @register("prirfed-pca-synthetic", paper="PriRFed (seed 004), Fig. 1",
              description="...", defaults={"n_agents": 10, "epsilon": 0.5, ...})
    def run(config: dict, ctx: RunContext) -> dict:
        rng = ctx.rng(repetition)
        ...
        ctx.log(setting="eps=0.5", repetition=r, round=t, cost=..., excess_risk=...)
        ctx.set_privacy("eps=0.5", ledger.report_dict(delta))
        ctx.save_figure(fig, "cost")
        return {"final_excess_risk": ...}

Every module in ``rfed.experiments`` is imported on first use of the registry, so a new
experiment only needs a new module with ``@register``. Results are written as they arrive:
``history.jsonl`` grows by one flushed line per logged record, so an interrupted run keeps what
it had; ``history.csv``, ``summary.json`` and the figures are written at the end (and figures
whenever the experiment saves one).
"""

from __future__ import annotations

import ast
import csv
import importlib
import json
import pkgutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Experiment",
    "RunContext",
    "register",
    "get_experiment",
    "list_experiments",
    "run_experiment",
    "parse_overrides",
]

_REGISTRY: dict[str, Experiment] = {}
_LOADED = False


@dataclass(frozen=True)
class Experiment:
    """A named run: the paper it reproduces, its default configuration and its function."""

    name: str
    paper: str
    description: str
    defaults: Mapping[str, Any]
    func: Callable[[dict, RunContext], dict]
    slow: bool = False

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict:
        """The defaults updated by ``overrides``; unknown keys are refused, types coerced."""
        cfg = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in cfg:
                raise ValueError(
                    f"experiment '{self.name}' has no setting '{key}'; valid settings: "
                    f"{', '.join(sorted(cfg))}"
                )
            cfg[key] = _coerce(key, value, cfg[key])
        return cfg


def _coerce(key: str, value: Any, default: Any) -> Any:
    if isinstance(value, str) and not isinstance(default, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ValueError(
                f"setting '{key}': cannot read {value!r} as a {type(default).__name__} "
                f"(default {default!r})"
            ) from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"setting '{key}' must be True or False, got {value!r}")
        return value
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (int, float)):
        return type(default)([value])
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(default)(value)
    if default is not None and not isinstance(value, type(default)):
        raise ValueError(
            f"setting '{key}' must be a {type(default).__name__} (default {default!r}), "
            f"got {value!r}"
        )
    return value


def register(
    name: str,
    *,
    paper: str,
    description: str,
    defaults: Mapping[str, Any],
    slow: bool = False,
) -> Callable[[Callable], Callable]:
    """Decorator registering ``func(config, ctx) -> summary`` as experiment ``name``."""

    def decorator(func: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].func is not func:
            raise ValueError(f"experiment '{name}' is registered twice")
        _REGISTRY[name] = Experiment(name, paper, description, dict(defaults), func, slow)
        return func

    return decorator


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import rfed.experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in {"registry"} and not info.name.startswith("_"):
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass
class RunContext:
    """What an experiment writes through: seeds, the history, tables, figures, privacy.

    Parameters
    ----------
    seed : int
        Master seed; :meth:`rng` derives independent streams from it.
    out_dir : Path or None
        Where results go (``None``: keep in memory only, as the tests do).
    progress : bool
        Show progress bars.
    """

    seed: int
    out_dir: Path | None = None
    progress: bool = True
    records: list[dict] = field(default_factory=list)
    privacy: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._history = None
        if self.out_dir is not None:
            self.out_dir = Path(self.out_dir)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._history = open(self.out_dir / "history.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def rng(self, *stream: int) -> np.random.Generator:
        """An independent generator for ``stream`` (e.g. a repetition index) under this seed."""
        return np.random.default_rng([self.seed, *stream])

    def log(self, **record: Any) -> None:
        """Append one history record (a round of one setting/repetition); written at once."""
        rec = _jsonable(record)
        self.records.append(rec)
        if self._history is not None:
            self._history.write(json.dumps(rec) + "\n")
            self._history.flush()

    def set_privacy(self, setting: str, report: Mapping[str, Any]) -> None:
        """Record the privacy report of one setting (written to ``privacy.json`` at once)."""
        self.privacy[setting] = _jsonable(report)
        self._write_json("privacy.json", self.privacy)

    def save_table(self, name: str, rows: list[Mapping[str, Any]]) -> None:
        """Write a table as ``NAME.csv`` and ``NAME.md``."""
        rows = [_jsonable(r) for r in rows]
        self.tables[name] = rows
        if self.out_dir is None or not rows:
            return
        keys = list(dict.fromkeys(k for r in rows for k in r))
        with open(self.out_dir / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)
        (self.out_dir / f"{name}.md").write_text(format_table(rows, keys), encoding="utf-8")

    def save_figure(self, fig: Any, name: str) -> Path | None:
        """Save a matplotlib figure as ``NAME.png`` and close it."""
        path = None
        if self.out_dir is not None:
            path = self.out_dir / f"{name}.png"
            fig.savefig(path, dpi=120, bbox_inches="tight")
            self.figures.append(path)
        import matplotlib.pyplot as plt

        plt.close(fig)
        return path

    def progress_bar(self, total: int, desc: str = ""):
        """A tqdm progress bar (silent when progress is off)."""
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, disable=not self.progress, leave=False)

    def _write_json(self, name: str, obj: Any) -> None:
        if self.out_dir is not None:
            tmp = self.out_dir / f".{name}.tmp"
            tmp.write_text(json.dumps(obj, indent=2), encoding="utf-8")
            tmp.replace(self.out_dir / name)

    def finish(self, config: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """Write ``history.csv`` and ``summary.json``; close the history stream."""
        if self._history is not None:
            self._history.close()
            self._history = None
        if self.out_dir is None:
            return
        if self.records:
            keys = list(dict.fromkeys(k for r in self.records for k in r))
            with open(self.out_dir / "history.csv", "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=keys)
                writer.writeheader()
                writer.writerows(self.records)
        self._write_json("summary.json", {"config": _jsonable(dict(config)),
                                          "summary": _jsonable(dict(summary))})


def format_table(rows: list[Mapping[str, Any]], keys: list[str] | None = None) -> str:
    """A markdown table of ``rows`` (floats with 4 significant digits)."""
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def run_experiment(
    name: str,
    *,
    seed: int = 0,
    overrides: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    progress: bool = False,
) -> tuple[dict, RunContext]:
    """Run experiment ``name``; return its summary and the context holding everything logged."""
    exp = get_experiment(name)
    config = exp.config(overrides)
    ctx = RunContext(seed=seed, out_dir=Path(out_dir) if out_dir is not None else None,
                     progress=progress)
    ctx._write_json("config.json", {"experiment": name, "seed": seed, "config": config})
    start = time.perf_counter()
    try:
        summary = dict(exp.func(config, ctx))
    finally:
        if ctx._history is not None:
            ctx._history.flush()
    summary.setdefault("seconds", time.perf_counter() - start)
    ctx.finish(config, summary)
    return summary, ctx
