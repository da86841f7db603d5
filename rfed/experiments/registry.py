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

Results on disk (``RunContext`` with an ``out_dir``):

* the folder is created only once the configuration is valid, must be empty unless the run
  overwrites (``mode="overwrite"``: an earlier rfed results folder is cleared) or resumes
  (``mode="resume"``), and is removed again if the run fails before writing any result;
* ``history.jsonl`` grows by one line per record, appended whole or not at all; every line
  carries the run's ``run_id`` and ``seed``; every other file (``config.json``,
  ``privacy.json``, tables, figures, ``history.csv``, ``summary.json``, ``checkpoint.npz``) is
  replaced atomically (a temporary file named after the process, fsync, rename); temporaries
  left by a killed run are removed when the folder is resumed or overwritten;
* the JSON is standard: a non-finite number is written ``null`` with the reason in
  ``<key>_nonfinite`` (see :mod:`rfed._io`);
* every :meth:`rfed.algorithms.base.Algorithm.run` inside the experiment is checkpointed at
  its end, at Ctrl-C and every ``checkpoint_every`` rounds (default 100) once at least
  ``checkpoint_seconds`` (default 5; 0: no floor) have passed since the last checkpoint; a
  resumed run replays the experiment, takes the finished runs from the checkpoint, continues
  the unfinished one from its state, and ends with the same results as an uninterrupted run
  (bit for bit: the clock decides only when the state is saved, never what is computed).
  The checkpoint is ``checkpoint.npz`` (the unfinished run, replaced atomically) standing on a
  prefix of ``checkpoint.log`` (the finished runs and the records, appended once each; see
  :class:`RunContext`); both are :mod:`rfed.state` files (no pickle: nothing in them can run
  code), checksummed and bound to the run, and both are removed when the run finishes.

Divergence: a run whose result has ``diverged=True`` is one repetition lost, not the
experiment; :func:`summarise_repetitions` summarises the others and counts it.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import importlib
import io
import json
import math
import os
import pkgutil
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rfed._io import (
    append_line,
    atomic_write_bytes,
    atomic_write_text,
    process_gone,
    remove_stale_temporaries,
    strict_json,
    write_at_end,
)
from rfed.state import StateFileError, UnsupportedStateError, dumps_state, load_state, loads_state

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

_INTERNAL_REFS = [
    (re.compile(r"\s*\(seed \d{3}\)"), ""),           # "PriRFed (seed 004)": a paper's file id
    (re.compile(r",?\s*\bL\d+(?:-\d+)?\b"), ""),      # ", L447-460": line numbers of the paper
    (re.compile(r"\s*\blines? \d+(?:-\d+)?\b"), ""),
    (re.compile(r"\(\s*[,;]?\s*\)"), ""),
    (re.compile(r"\(\s*,\s*"), "("),
    (re.compile(r"\s+,"), ","),
]


def clean_text(text: str) -> str:
    """``text`` without internal references (``(seed 004)``, line numbers such as ``L447-460``)."""
    for pattern, repl in _INTERNAL_REFS:
        text = pattern.sub(repl, text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


_ABBREVIATIONS = re.compile(r"\b(?:Figs?|Secs?|Eqs?|Thms?|e\.g|i\.e|vs|cf|al|resp|approx)\.$")
_SHORT_MAX = 100


def _first_sentence(text: str) -> str:
    """The first sentence of ``text`` up to its first colon, bracket or semicolon, <= 100 chars."""
    text = " ".join(text.split())
    end = len(text)
    for match in re.finditer(r"[.!?](?=\s|$)", text):
        if not _ABBREVIATIONS.search(text[: match.end()]):
            end = match.start()
            break
    first = text[:end]
    for sep in (": ", " (", "; ", " ["):
        cut = first.find(sep)
        if cut > 20:
            first = first[:cut]
    if len(first) > _SHORT_MAX:
        first = first[: first.rfind(" ", 0, _SHORT_MAX - 3)] + "..."
    return first.rstrip(" ,;")


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


def _jsonable(value: Any) -> Any:
    """numpy scalars and arrays as Python objects (non-finite floats kept: in memory only)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# ============================================================================ summaries
#: Columns of the one summary table every experiment prints (see :func:`summary_row`).
SUMMARY_COLUMNS = ("setting", "utility_name", "utility", "utility_std", "reference_name",
                   "reference", "epsilon", "delta", "accountant", "figure", "repetitions",
                   "diverged", "epsilon_paper")


def summary_row(
    setting: str,
    *,
    utility_name: str,
    utility: float | None,
    utility_std: float | None = None,
    reference: float | None = None,
    reference_name: str = "",
    epsilon: float | None = None,
    delta: float | None = None,
    accountant: str = "",
    figure: str = "",
    repetitions: int | None = None,
    diverged: int = 0,
    epsilon_paper: float | None = None,
) -> dict:
    """One row of the summary table.

    Parameters
    ----------
    setting : str
        The curve / configuration, e.g. ``"eps=0.15"``.
    utility_name : str
        What ``utility`` measures, in words with its unit, e.g. ``"excess risk"`` or
        ``"test accuracy (%)"``.
    utility, utility_std : float or None
        Mean and standard deviation over the repetitions that did not diverge.
    reference, reference_name : float, str
        The value to compare with and what it is (``"non-private"``, ``"true value"``).
    epsilon, delta : float or None
        The **certified** budget of the setting (``inf`` without noise; ``None`` for a
        non-private run).
    accountant : str
        The accountant that certified ``epsilon``, e.g. ``"dp-accounting RDP, replace-one"``.
    figure : str
        The paper's figure or table the row reproduces, where there is one.
    repetitions, diverged : int
        Repetitions run and how many of them diverged.
    epsilon_paper : float, optional
        The paper's closed-form epsilon, shown beside the certified one, labelled as the
        paper's (never as the guarantee).
    """
    return {"setting": str(setting), "utility_name": str(utility_name),
            "utility": _num(utility), "utility_std": _num(utility_std),
            "reference_name": str(reference_name), "reference": _num(reference),
            "epsilon": _num(epsilon), "delta": _num(delta), "accountant": str(accountant),
            "figure": str(figure), "repetitions": repetitions, "diverged": int(diverged),
            "epsilon_paper": _num(epsilon_paper)}


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return str(v)


def format_summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary table as text: every row (never truncated), accountants as footnotes.

    Columns: setting, utility (``mean +- std``; its name in the header when all rows share
    it), the reference value, certified epsilon and delta with a footnote naming the
    accountant, the paper's figure, and ``diverged/repetitions``.
    """
    if not rows:
        return "(no settings)\n"
    names = list(dict.fromkeys(r["utility_name"] for r in rows))
    refs = list(dict.fromkeys(r["reference_name"] for r in rows if r.get("reference_name")))
    accountants = list(dict.fromkeys(r["accountant"] for r in rows if r.get("accountant")))
    one_name = len(names) == 1
    head = ["setting", f"{names[0]} (mean +- std)" if one_name else "utility (mean +- std)"]
    if not one_name:
        head.insert(1, "utility")
    ref_head = f"reference: {refs[0]}" if len(refs) == 1 else "reference"
    figures = list(dict.fromkeys(r.get("figure") or "" for r in rows))
    one_figure = len(figures) == 1
    head += [ref_head, "eps (certified)", "delta", "figure", "diverged"]
    with_paper = any(r.get("epsilon_paper") is not None for r in rows)
    if with_paper:
        head.insert(head.index("delta") + 1, "eps (paper's formula)")
    body = []
    for r in rows:
        util = _fmt(r.get("utility"))
        if r.get("utility_std") is not None:
            util += f" +- {_fmt(r['utility_std'])}"
        eps = _fmt(r.get("epsilon"))
        if r.get("accountant"):
            eps += f" [{accountants.index(r['accountant']) + 1}]"
        ref = _fmt(r.get("reference"))
        if len(refs) > 1 and r.get("reference_name"):
            ref += f" ({r['reference_name']})"
        reps = r.get("repetitions")
        line = [r["setting"], util, ref, eps, _fmt(r.get("delta")), r.get("figure") or "-",
                f"{r.get('diverged', 0)}/{reps}" if reps is not None else
                str(r.get("diverged", 0))]
        if with_paper:
            line.insert(5, _fmt(r.get("epsilon_paper")))
        if one_figure:
            line.pop(-2)
        if not one_name:
            line.insert(1, r["utility_name"])
        body.append(line)
    if one_figure:
        head.remove("figure")
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ([f"paper's figure: {figures[0]}"] if one_figure and figures[0] else [])
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    out += [f"[{i + 1}] accountant: {a}" for i, a in enumerate(accountants)]
    return "\n".join(out) + "\n"


def summarise_repetitions(
    results: Sequence[Any], metrics: Sequence[str] = ("excess_risk", "cost")
) -> dict:
    """Final metrics over the repetitions that did not diverge, and the count of those that did.

    Parameters
    ----------
    results : sequence of RunResult
        One per repetition (see :class:`rfed.algorithms.base.RunResult`).
    metrics : sequence of str
        History keys to summarise at each kept run's last record.

    Returns
    -------
    dict
        ``repetitions``, ``diverged`` (count), ``diverged_rounds`` (list), ``kept`` (the
        results that did not diverge) and, per metric, ``<metric>_mean`` / ``<metric>_std``
        over the kept runs' final values (NaN when no run was kept or none recorded it).
    """
    kept = [r for r in results if not getattr(r, "diverged", False)]
    lost = [r for r in results if getattr(r, "diverged", False)]
    out: dict[str, Any] = {"repetitions": len(results), "diverged": len(lost),
                           "diverged_rounds": [r.diverged_round for r in lost], "kept": kept}
    for m in metrics:
        vals = np.array([r.history[-1][m] for r in kept if r.history and m in r.history[-1]],
                        dtype=float)
        out[f"{m}_mean"] = float(vals.mean()) if vals.size else float("nan")
        out[f"{m}_std"] = float(vals.std()) if vals.size else float("nan")
    return out


class OutputDirError(ValueError):
    """The output folder cannot be used (exists and is not empty, is a file, not writable)."""


class _SharedBar:
    """One progress bar per experiment: every ``progress`` call reuses it with a new total."""

    def __init__(self, label: str, enabled: bool):
        self.label = label
        self.enabled = enabled
        self._bar = None
        self.setting = ""

    def start(self, total: int, setting: str = "") -> _SharedBar:
        if self.enabled:
            if self._bar is None:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, leave=False, dynamic_ncols=True)
            else:
                self._bar.reset(total=total)
        self.label_setting(setting)
        return self

    def label_setting(self, setting: str) -> None:
        if setting != self.setting:
            self.setting = setting
            if self._bar is not None:
                self._bar.set_description(f"{self.label} [{setting}]" if setting else self.label,
                                          refresh=False)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        """Kept open for the experiment's next phase; :meth:`shutdown` closes it."""

    def shutdown(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


_CHECKPOINT = "checkpoint.npz"
_CHECKPOINT_LOG = "checkpoint.log"
#: The checkpoint file of earlier releases (a pickle): refused, never read.
_OLD_CHECKPOINT = "checkpoint.pkl"
_LOCK = ".rfed.lock"
#: Layout of the checkpoint. 1 and 2 (earlier releases): pickles, no longer read; 3: the
#: ``checkpoint.npz`` state file (:mod:`rfed.state`) holds the unfinished run and the length and
#: SHA-256 of the prefix of ``checkpoint.log`` it stands on, and the log holds the completed runs
#: and the records, each serialized and written once, as length-prefixed state files.
_CHECKPOINT_FORMAT = 3
_READABLE_FORMATS = (3,)
#: The :mod:`rfed.state` kinds of the two files.
_CHECKPOINT_KIND = "experiment-checkpoint"
_LOG_KIND = "experiment-checkpoint-log"
#: Bytes of the length written before each frame of the log (little-endian).
_FRAME_HEADER = 8
#: The clock of the periodic checkpoints' wall-clock floor (tests replace it).
_clock = time.monotonic


def config_digest(experiment: str, seed: int, config: Mapping[str, Any], secure: bool) -> str:
    """SHA-256 (hex) of a run's settings as ``config.json`` holds them: what a checkpoint is
    bound to besides the run id (a ``config.json`` edited after the checkpoint is refused)."""
    text = json.dumps(_strict_roundtrip({"experiment": experiment, "seed": int(seed),
                                         "config": dict(config), "secure": bool(secure)}),
                      sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_run_config(out_dir: str | os.PathLike) -> dict[str, Any]:
    """The settings saved in a results folder's ``config.json``, checked.

    Returns
    -------
    dict
        ``experiment`` (str), ``seed`` (int >= 0), ``run_id`` (str), ``config`` (dict),
        ``secure`` (bool).

    Raises
    ------
    OutputDirError
        No ``config.json``, or one that is not JSON or lacks a key (one line naming the file).
    """
    path = Path(out_dir) / "config.json"
    if not path.is_file():
        raise OutputDirError(f"'{out_dir}' holds no rfed run (no config.json)")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise OutputDirError(f"'{path}' is damaged (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise OutputDirError(f"'{path}' is damaged (not JSON: {exc.msg} at line {exc.lineno}, "
                             f"column {exc.colno})") from None
    except OSError as exc:
        raise OutputDirError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not isinstance(saved, dict):
        raise OutputDirError(f"'{path}' is damaged (a JSON {type(saved).__name__}, not the "
                             "object rfed writes)")
    checks: tuple[tuple[str, type, str], ...] = (
        ("experiment", str, "a str"), ("seed", int, "an int >= 0"), ("run_id", str, "a str"),
        ("config", dict, "an object"))
    for key, kind, what in checks:
        value = saved.get(key)
        if (not isinstance(value, kind) or isinstance(value, bool)
                or (isinstance(value, int) and value < 0)):
            got = "missing" if key not in saved else f"{value!r}"
            raise OutputDirError(f"'{path}' is damaged: '{key}' must be {what}, got {got}")
    secure = saved.get("secure", False)
    if not isinstance(secure, bool):
        raise OutputDirError(f"'{path}' is damaged: 'secure' must be true or false, got "
                             f"{secure!r}")
    return {"experiment": saved["experiment"], "seed": saved["seed"],
            "run_id": saved["run_id"], "config": saved["config"], "secure": secure}


def read_checkpoint(out_dir: str | os.PathLike,
                    expect: Mapping[str, Any] | None = None) -> dict | None:
    """The checkpoint saved in the results folder ``out_dir``, assembled; ``None`` if none.

    ``checkpoint.npz`` is read as an :mod:`rfed.state` file (checksummed; nothing in it can run
    code); it trusts only the prefix of ``checkpoint.log`` whose length and SHA-256 it recorded:
    a torn tail left by a killed run is ignored.

    Parameters
    ----------
    out_dir : path
    expect : mapping, optional
        The binding the checkpoint must hold (``experiment``, ``seed``, ``run_id``,
        ``config_sha256``; see :func:`config_digest`): another run's checkpoint is refused.

    Returns
    -------
    dict or None
        ``format``, ``experiment``, ``seed``, ``run_id``; ``completed``: the finished runs in
        order, as ``(RunResult, number of records it logged)``; ``current``: the unfinished run
        (``{"index", "start", "n_logged", "payload"}``, the payload of
        :meth:`rfed.algorithms.base.Algorithm.run`) or ``None``; ``records``: every history
        record logged so far; ``log``: ``{"size", "sha256", "n_completed", "n_records"}`` of
        the log prefix.

    Raises
    ------
    OutputDirError
        One line naming the file and what is wrong: a checkpoint of an earlier release (a
        pickle, never read), a damaged one (checksum mismatch), one of another format, of
        another run, or whose log is missing, shorter than recorded or damaged.
    """
    return _read_checkpoint(Path(out_dir), expect)[0]


def _read_checkpoint(folder: Path, expect: Mapping[str, Any] | None
                     ) -> tuple[dict | None, Any]:
    """:func:`read_checkpoint` and the SHA-256 object of the log prefix (to go on appending)."""
    path = folder / _CHECKPOINT
    if not path.is_file():
        old = folder / _OLD_CHECKPOINT
        if old.is_file():
            raise OutputDirError(
                f"'{old}' is a checkpoint written by an earlier rfed (a pickle); this format is "
                "no longer read, since loading a pickle can run code: run the experiment again "
                "(--overwrite)")
        return None, None
    try:
        ck = load_state(path, kind=_CHECKPOINT_KIND, expect=expect)
    except StateFileError as exc:
        raise OutputDirError(str(exc)) from None
    fmt = ck.get("format") if isinstance(ck, dict) else None
    if fmt not in _READABLE_FORMATS:
        raise OutputDirError(
            f"'{path}' is not a checkpoint this rfed reads (layout {fmt!r}; it reads layout "
            f"{', '.join(map(str, _READABLE_FORMATS))})")
    try:
        head = {k: ck[k] for k in ("format", "experiment", "seed", "run_id", "current")}
        log = dict(ck["log"])
        size, digest = int(log["size"]), str(log["sha256"])
        n_completed, n_records = int(log["n_completed"]), int(log["n_records"])
    except (KeyError, TypeError, ValueError) as exc:
        raise OutputDirError(f"'{path}' is malformed (its log entry: {exc!r})") from None
    frames, hasher = _read_log(folder / _CHECKPOINT_LOG, size, digest, str(head["run_id"]))
    completed: list = []
    records: list = []
    for frame in frames:
        completed += frame["completed"]
        records += frame["records"]
    if len(completed) != n_completed or len(records) != n_records:
        raise OutputDirError(
            f"the checkpoint log '{folder / _CHECKPOINT_LOG}' is damaged: it holds "
            f"{len(completed)} runs and {len(records)} records, the checkpoint says "
            f"{n_completed} and {n_records}")
    return {**head, "completed": completed, "records": records, "log": log}, hasher


def _read_log(path: Path, size: int, digest: str, run_id: str) -> tuple[list[dict], Any]:
    """The frames (``{"completed", "records"}``) in the first ``size`` bytes of the log, and
    the SHA-256 object of those bytes."""
    hasher = hashlib.sha256()
    if size == 0:
        return [], hasher
    try:
        with open(path, "rb") as fh:
            data = fh.read(size)
    except FileNotFoundError:
        raise OutputDirError(f"the checkpoint log '{path}' is missing") from None
    if len(data) < size:
        raise OutputDirError(f"the checkpoint log '{path}' holds {len(data)} bytes, fewer "
                             f"than the {size} its checkpoint stands on")
    hasher.update(data)
    if hasher.hexdigest() != digest:
        raise OutputDirError(f"the checkpoint log '{path}' is damaged (checksum mismatch: "
                             f"SHA-256 of its first {size} bytes)")
    frames = []
    pos = 0
    while pos < size:
        n = int.from_bytes(data[pos:pos + _FRAME_HEADER], "little")
        blob = data[pos + _FRAME_HEADER:pos + _FRAME_HEADER + n]
        try:
            frame = loads_state(blob, kind=_LOG_KIND, expect={"run_id": run_id},
                                source=f"{path} (frame at byte {pos})")
            frames.append({"completed": list(frame["completed"]),
                           "records": list(frame["records"])})
        except StateFileError as exc:
            raise OutputDirError(str(exc)) from None
        except (KeyError, TypeError) as exc:
            raise OutputDirError(f"the checkpoint log '{path}' is malformed (frame at byte "
                                 f"{pos}: {exc!r})") from None
        pos += _FRAME_HEADER + n
    return frames, hasher


class _CheckpointSaver:
    """``save(payload)`` of a :class:`RunContext`'s runs, and ``due()``: whether a periodic
    checkpoint is due (the wall-clock floor; see :func:`rfed.algorithms.base.run_hook`)."""

    def __init__(self, ctx: RunContext):
        self._ctx = ctx

    def __call__(self, payload: dict) -> None:
        self._ctx._save_checkpoint(payload)

    def due(self) -> bool:
        return self._ctx._checkpoint_due()


@dataclass
class RunContext:
    """What an experiment writes through: seeds, the history, tables, figures, privacy.

    Parameters
    ----------
    seed : int
        Master seed (>= 0); :meth:`rng` derives independent streams from it.
    out_dir : Path or None
        Where results go (``None``: keep in memory only, as the tests do). Nothing is created
        before :meth:`open` (called by :func:`run_experiment` once the configuration is valid).
    progress : bool
        Show the progress bar.
    mode : {"new", "overwrite", "resume"}
        ``"new"``: ``out_dir`` must be absent or empty; ``"overwrite"``: an earlier rfed results
        folder (one holding ``config.json``) is cleared first; ``"resume"``: continue the run
        saved in ``out_dir``.
    checkpoint_every : int
        Checkpoint every algorithm run every this many rounds (0: only at the end of each run
        and at Ctrl-C). Only with an ``out_dir``.
    secure : bool
        Secure mode: every algorithm run draws from the operating system's randomness
        (:class:`rfed.privacy.SecureRandom`) and releases noise with the discrete mechanisms;
        data generation stays seeded. Not replayable from the seed, by design.
    checkpoint_seconds : float
        Wall-clock floor between periodic checkpoints: at a round where one is due
        (``checkpoint_every``), it is written only if at least this many seconds have passed
        since the last checkpoint (0: at every ``checkpoint_every`` rounds). The end-of-run and
        Ctrl-C checkpoints are always written. The clock decides only when the state is saved,
        never what is computed: a run resumed from any checkpoint ends bit-identical to an
        uninterrupted one, whatever the floor. A kill loses at most the rounds since the last
        checkpoint (about ``checkpoint_seconds`` plus ``checkpoint_every`` rounds of work).

    Notes
    -----
    Checkpoint layout (3). Each checkpoint appends one frame to ``checkpoint.log``: an
    :mod:`rfed.state` file (checksummed, bound to the run id) of the runs completed and the
    records logged since the previous checkpoint, preceded by its length, so every completed run
    and every record is serialized and written once, and fsynced. It then replaces
    ``checkpoint.npz`` atomically: an :mod:`rfed.state` file bound to the run (experiment,
    seed, run id and the SHA-256 of its settings) holding the unfinished run's payload (its
    state and history, which change between checkpoints) and the length and SHA-256 of the log
    prefix it stands on. A kill between the two leaves the previous ``checkpoint.npz``, which
    stands on a shorter prefix of the log; a resumed run cuts the log back to that prefix
    before it appends. Every append and every replacement is fsynced (what lets a checkpoint
    survive a power cut as well as a kill); ``checkpoint_seconds`` bounds how often that is
    paid. Nothing is unpickled: a ``checkpoint.pkl`` of an earlier release is refused, and so
    is a damaged checkpoint or another run's (one line naming the file).
    """

    seed: int
    out_dir: Path | None = None
    progress: bool = True
    mode: str = "new"
    checkpoint_every: int = 100
    secure: bool = False
    checkpoint_seconds: float = 5.0
    records: list[dict] = field(default_factory=list)
    privacy: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    summary_rows: list[dict] = field(default_factory=list)
    diverged_runs: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or self.seed < 0:
            raise ValueError(f"argument 'seed' must be an int >= 0, got {self.seed!r}")
        if self.mode not in ("new", "overwrite", "resume"):
            raise ValueError(
                f"argument 'mode' must be 'new', 'overwrite' or 'resume', got {self.mode!r}"
            )
        if (isinstance(self.checkpoint_every, bool)
                or not isinstance(self.checkpoint_every, (int, np.integer))
                or self.checkpoint_every < 0):
            raise ValueError(
                f"argument 'checkpoint_every' must be an int >= 0, got {self.checkpoint_every!r}"
            )
        floor = self.checkpoint_seconds
        if (isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating))
                or not (math.isfinite(floor) and floor >= 0)):
            raise ValueError(
                f"argument 'checkpoint_seconds' must be a finite number >= 0, got {floor!r}")
        self.checkpoint_seconds = float(floor)
        if self.out_dir is not None:
            self.out_dir = Path(self.out_dir)
        self.run_id = uuid.uuid4().hex[:12]
        self.experiment = ""
        self.title = ""         # the figures' default title (the experiment's short line)
        self.stand_in = False   # mark the figures "STAND-IN data"
        self._opened = False
        self._created: Path | None = None  # the top folder this run created (removed on failure)
        self._wrote_result = False
        self._bar = _SharedBar("", self.progress)
        # checkpoint bookkeeping (see start_run / end_run)
        self._pos = 0                  # records logged so far, counting replayed ones
        self._run_index = 0            # index of the next Algorithm.run call
        self._completed: list[tuple[Any, int]] = []  # (RunResult, records it logged)
        # what checkpoint.log holds: its size and SHA-256, the completed runs and records in it
        self._log_size = 0
        self._log_hash = hashlib.sha256()
        self._logged_completed = 0
        self._logged_records = 0
        self._last_checkpoint = _clock()
        self._current: tuple[int, int] | None = None  # (run index, _pos at its start)
        self._resume: dict | None = None
        self._checkpoint_error: str | None = None
        self._wrote_config = False
        self._locked = False
        self._bound: dict[str, Any] | None = None

    # ------------------------------------------------------------------ folder
    def open(self, experiment: str, config: Mapping[str, Any]) -> None:
        """Check and create the output folder, write ``config.json``; load a checkpoint.

        Raises
        ------
        OutputDirError
            The folder is a file, lies under a file, is not empty (mode ``"new"``), is not an
            rfed results folder (``"overwrite"``/``"resume"``), holds a finished or different
            run (``"resume"``), or cannot be written.
        """
        self.experiment = experiment
        self._bar.label = experiment
        self._config = dict(config)
        self._opened = True
        if self.out_dir is None:
            return
        out = self.out_dir
        for parent in [out, *out.parents]:
            if parent.exists() and not parent.is_dir():
                what = "is a file" if parent == out else f"lies under a file ({parent})"
                raise OutputDirError(f"output folder '{out}' {what}")
        self._check_lock()
        existing = out.is_dir() and any(out.iterdir())
        if self.mode == "new" and existing:
            raise OutputDirError(
                f"output folder '{out}' is not empty; pass --overwrite to replace it or "
                f"--resume to continue the run saved in it"
            )
        if self.mode in ("overwrite", "resume") and existing \
                and not (out / "config.json").is_file():
            raise OutputDirError(
                f"output folder '{out}' is not empty and holds no rfed results (no config.json); "
                f"refusing to {self.mode} it"
            )
        if self.mode == "resume":
            self._open_resume(experiment, config)
        elif self.mode == "overwrite" and existing:
            self._clear()
        if not out.exists():
            top = out
            while not top.parent.exists():
                top = top.parent
            try:
                out.mkdir(parents=True)
            except OSError as exc:
                raise OutputDirError(f"cannot create output folder '{out}': "
                                     f"{exc.strerror or exc}") from None
            self._created = top
        try:
            fd, probe = tempfile.mkstemp(dir=out, prefix=f".rfed-probe.{os.getpid()}.",
                                         suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            self._remove_created()
            raise OutputDirError(f"cannot write to output folder '{out}': "
                                 f"{exc.strerror or exc}") from None
        self._take_lock()
        remove_stale_temporaries(out)   # what a killed run was writing when it died
        if self.mode != "resume" or self._resume is None:
            self._write_json("config.json", {"experiment": experiment, "seed": int(self.seed),
                                             "run_id": self.run_id, "config": self._config,
                                             "secure": bool(self.secure)})
            self._wrote_config = True
            if self.mode == "resume":   # no checkpoint yet: start over in the same folder
                atomic_write_text(out / "history.jsonl", "")

    def _open_resume(self, experiment: str, config: Mapping[str, Any]) -> None:
        out = self.out_dir
        assert out is not None
        try:
            saved = read_run_config(out)
        except OutputDirError as exc:
            raise OutputDirError(f"cannot resume: {exc}") from None
        if (out / "summary.json").is_file():
            raise OutputDirError(f"cannot resume: the run in '{out}' has finished "
                                 f"(summary.json exists)")
        for key, mine in (("experiment", experiment), ("seed", int(self.seed)),
                          ("config", _strict_roundtrip(config))):
            if saved.get(key) != mine:
                raise OutputDirError(
                    f"cannot resume: '{out}' holds a run with {key} {saved.get(key)!r}, "
                    f"not {mine!r}"
                )
        self.run_id = saved["run_id"]
        try:
            ck, hasher = _read_checkpoint(out, self._binding())
        except OutputDirError as exc:
            raise OutputDirError(f"cannot resume: {exc}") from None
        if ck is None:
            return
        self._resume = ck
        self.records = ck["records"]
        # the log prefix stays: appends go after it
        self._log_size, self._log_hash = ck["log"]["size"], hasher
        self._logged_completed = ck["log"]["n_completed"]
        self._logged_records = ck["log"]["n_records"]
        lines = "".join(self._history_line(r) + "\n" for r in self.records)
        atomic_write_text(out / "history.jsonl", lines)

    def _binding(self) -> dict[str, Any]:
        """What this run's checkpoint files are bound to (:func:`rfed.state.save_state`);
        computed once per run id."""
        if self._bound is None or self._bound["run_id"] != self.run_id:
            self._bound = {"experiment": self.experiment, "seed": int(self.seed),
                           "run_id": self.run_id,
                           "config_sha256": config_digest(self.experiment, self.seed,
                                                          self._config, self.secure)}
        return self._bound

    def _lock_holder(self) -> int | None:
        """The pid of a live process holding the folder's lock, else ``None``."""
        assert self.out_dir is not None
        try:
            pid = int((self.out_dir / _LOCK).read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return None
        if pid <= 0 or pid == os.getpid() or process_gone(pid):
            return None                 # a run that was killed: the lock is stale
        return pid

    def _check_lock(self) -> None:
        pid = self._lock_holder()
        if pid is not None:
            raise OutputDirError(f"another rfed run (pid {pid}) is writing to '{self.out_dir}'")

    def _take_lock(self) -> None:
        """Create ``.rfed.lock`` (exclusive create: of two runs started at once, one wins)."""
        assert self.out_dir is not None
        path = self.out_dir / _LOCK
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._check_lock()
                path.unlink(missing_ok=True)   # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
            self._locked = True
            return
        raise OutputDirError(f"cannot lock output folder '{self.out_dir}'")

    def _release_lock(self) -> None:
        if self._locked and self.out_dir is not None:
            (self.out_dir / _LOCK).unlink(missing_ok=True)
            self._locked = False

    def _clear(self) -> None:
        assert self.out_dir is not None
        for child in self.out_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _remove_created(self) -> None:
        if self._created is not None:
            shutil.rmtree(self._created, ignore_errors=True)
            self._created = None

    def abandon(self) -> None:
        """After a failure: remove the folder (or ``config.json``) if no result was written."""
        self._bar.shutdown()
        self._release_lock()
        if self.out_dir is None or self._wrote_result or self.mode == "resume":
            return
        if self._created is not None:
            self._remove_created()
        elif self._wrote_config:
            (self.out_dir / "config.json").unlink(missing_ok=True)

    # ------------------------------------------------------------------ writing
    def rng(self, *stream: int) -> np.random.Generator:
        """An independent generator for ``stream`` (e.g. a repetition index) under this seed."""
        return np.random.default_rng([int(self.seed), *stream])

    def _history_line(self, rec: Mapping[str, Any]) -> str:
        return strict_json({**rec, "run_id": self.run_id, "seed": int(self.seed)})

    def log(self, **record: Any) -> None:
        """Append one history record (a round of one setting/repetition); written at once.

        When resuming, the records the checkpoint already holds are replayed, not repeated.
        """
        self._pos += 1
        if self._pos <= len(self.records):   # replaying a resumed run: already recorded
            return
        self._ensure_open()
        rec = _jsonable(record)
        if "setting" in rec:
            self._bar.label_setting(str(rec["setting"]))
        if self.out_dir is not None:
            append_line(self.out_dir / "history.jsonl", self._history_line(rec))
            self._wrote_result = True
        self.records.append(rec)

    def set_privacy(self, setting: str, report: Mapping[str, Any]) -> None:
        """Record the privacy report of one setting (written to ``privacy.json`` at once)."""
        self.privacy[setting] = _jsonable(report)
        self._write_json("privacy.json", self.privacy)
        self._wrote_result = self._wrote_result or self.out_dir is not None

    def save_table(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write a table as ``NAME.csv`` and ``NAME.md`` (all rows)."""
        table = [_jsonable(r) for r in rows]
        self.tables[name] = table
        if self.out_dir is None or not table:
            return
        self._ensure_open()
        keys = list(dict.fromkeys(k for r in table for k in r))
        atomic_write_text(self.out_dir / f"{name}.csv", _csv_text(table, keys))
        atomic_write_text(self.out_dir / f"{name}.md", format_table(table, keys))
        self._wrote_result = True

    def summary_table(self, rows: Sequence[Mapping[str, Any]]) -> str:
        """Record the experiment's summary table (rows from :func:`summary_row`); return its text.

        Saved as ``summary_table.csv`` / ``.md`` and printed by ``rfed run`` (every row).
        """
        clean = []
        for i, r in enumerate(rows):
            missing = [k for k in ("setting", "utility_name", "utility") if k not in r]
            if missing:
                raise ValueError(f"summary_table: row {i} lacks {missing}; build rows with "
                                 f"summary_row(...)")
            clean.append({k: r.get(k) for k in SUMMARY_COLUMNS})
        self.summary_rows = clean
        self.save_table("summary_table", clean)
        return format_summary_table(clean)

    def save_figure(self, fig: Any, name: str) -> Path | None:
        """Finish a matplotlib figure, save it as ``NAME.png`` (atomically) and close it.

        :func:`rfed.experiments.plotting.finish_figure` gives it a title if it has none, the
        certified epsilon of every setting in the legend (from :meth:`set_privacy`), one
        legend outside the data, and the "STAND-IN data" mark when the experiment's
        description says it uses a stand-in.
        """
        from rfed.experiments.plotting import finish_figure

        path = None
        try:
            finish_figure(fig, title=f"{self.title or self.experiment}: "
                                     f"{name.replace('_', ' ')}",
                          privacy=self.privacy, stand_in=self.stand_in)
            if self.out_dir is not None:
                self._ensure_open()
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
                path = self.out_dir / f"{name}.png"
                atomic_write_bytes(path, buf.getvalue())
                self.figures.append(path)
                self._wrote_result = True
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        return path

    def progress_bar(self, total: int, desc: str = "", *, setting: str = "") -> _SharedBar:
        """The experiment's one progress bar, restarted at ``total`` and labelled ``setting``.

        Every call reuses the same bar (one bar per experiment, labelled with its name and the
        setting); records logged with a ``setting`` key relabel it. ``update(n)`` advances it;
        ``close()`` is a no-op (the bar lives until the run ends). ``desc`` is ignored (kept
        for compatibility).
        """
        return self._bar.start(total, setting)

    def _ensure_open(self) -> None:
        """A context used without :func:`run_experiment` opens its folder on first write."""
        if self.out_dir is not None and not self._opened:
            self.open(self.experiment, {})

    def _write_json(self, name: str, obj: Any) -> None:
        if self.out_dir is not None:
            if name != "config.json":
                self._ensure_open()
            atomic_write_text(self.out_dir / name, strict_json(obj, indent=2) + "\n")

    # ------------------------------------------------------------------ checkpoints
    def start_run(self, algorithm: Any, problem: Any, n_rounds: int, eval_every: int):
        """Hook of :meth:`rfed.algorithms.base.Algorithm.run` (see :func:`run_hook`)."""
        index = self._run_index
        self._run_index += 1
        ck = self._resume
        if ck is not None and index < len(ck["completed"]):
            result, n_logged = ck["completed"][index]
            self._completed.append((result, n_logged))
            self._pos += n_logged
            if getattr(result, "diverged", False):
                rec = next((r for r in self.records[self._pos - n_logged:self._pos]
                            if "diverged" in r), {})
                self.diverged_runs.append({
                    **{k: rec[k] for k in ("setting", "group", "repetition") if k in rec},
                    "run": index, "diverged_round": result.diverged_round,
                    "reason": result.diverged_reason})
            return result, None, None, 0
        resume = None
        start = self._pos
        if ck is not None:
            self._resume = None
            cur = ck.get("current")
            if cur is not None and cur["index"] == index:
                if cur["start"] != self._pos:
                    raise RuntimeError(
                        "resume: the experiment did not replay as it ran (record "
                        f"{self._pos} instead of {cur['start']} at run {index})"
                    )
                resume = cur["payload"]
                self._pos += cur["n_logged"]
        self._current = (index, start)
        saver = _CheckpointSaver(self) if self.out_dir is not None else None
        return None, resume, saver, self.checkpoint_every

    def end_run(self, result: Any) -> None:
        """Hook of :meth:`Algorithm.run`: the run finished; checkpoint it as completed.

        A diverged run is logged as a record ``{setting, repetition, diverged,
        diverged_round}`` (setting and repetition from the run's last record) and listed in
        :attr:`diverged_runs`, so no experiment can lose it silently.
        """
        assert self._current is not None
        if getattr(result, "diverged", False):
            index, start = self._current
            last = self.records[-1] if len(self.records) > start else {}
            where = {k: last[k] for k in ("setting", "group", "repetition") if k in last}
            self.record_divergence(result, where, index)
        self._completed.append((result, self._pos - self._current[1]))
        self._current = None
        self._save_checkpoint(None)

    def record_divergence(self, result: Any, where: Mapping[str, Any], run: int) -> None:
        """List a diverged run in :attr:`diverged_runs` and log ``{**where, diverged,
        diverged_round}`` (what :meth:`end_run` does for a run that diverged; a driver running
        several repetitions in one :meth:`Algorithm.run` calls it for each)."""
        self.diverged_runs.append({**where, "run": run, "diverged_round": result.diverged_round,
                                   "reason": result.diverged_reason})
        self.log(**where, diverged=result.diverged_reason, diverged_round=result.diverged_round)

    @property
    def runs_started(self) -> int:
        """How many :meth:`Algorithm.run` calls this context has hooked so far."""
        return self._run_index

    def _checkpoint_due(self) -> bool:
        """A periodic checkpoint is due: ``checkpoint_seconds`` have passed since the last."""
        return (self.checkpoint_seconds == 0
                or _clock() - self._last_checkpoint >= self.checkpoint_seconds)

    def _save_checkpoint(self, payload: dict | None) -> None:
        """Append what is new to the log, then replace ``checkpoint.npz`` (see the Notes)."""
        if self.out_dir is None or self._checkpoint_error is not None:
            return
        current = None
        if payload is not None and self._current is not None:
            index, start = self._current
            current = {"index": index, "start": start, "n_logged": self._pos - start,
                       "payload": payload}
        new_completed = self._completed[self._logged_completed:]
        new_records = self.records[self._logged_records:]
        binding = self._binding()
        try:
            frame = b""
            if new_completed or new_records:
                blob = dumps_state({"completed": new_completed, "records": new_records},
                                   kind=_LOG_KIND, bind={"run_id": self.run_id})
                frame = len(blob).to_bytes(_FRAME_HEADER, "little") + blob
            log_hash = self._log_hash.copy()
            log_hash.update(frame)
            log: dict[str, Any] = {
                "size": self._log_size + len(frame), "sha256": log_hash.hexdigest(),
                "n_completed": len(self._completed), "n_records": len(self.records)}
            ck = {"format": _CHECKPOINT_FORMAT, "experiment": self.experiment,
                  "seed": int(self.seed), "run_id": self.run_id, "log": log,
                  "current": current}
            data = dumps_state(ck, kind=_CHECKPOINT_KIND, bind=binding)
        except UnsupportedStateError as exc:
            # an algorithm whose state cannot be saved: run on without checkpoints, say so
            self._checkpoint_error = str(exc)
            (self.out_dir / _CHECKPOINT).unlink(missing_ok=True)
            (self.out_dir / _CHECKPOINT_LOG).unlink(missing_ok=True)
            print(f"rfed: warning: checkpoints disabled for this run (the algorithm's state "
                  f"cannot be saved: {self._checkpoint_error})", file=sys.stderr)
            return
        if frame:
            # durable before the checkpoint that stands on it replaces the previous one
            write_at_end(self.out_dir / _CHECKPOINT_LOG, frame, self._log_size)
            self._log_size, self._log_hash = log["size"], log_hash
            self._logged_completed, self._logged_records = log["n_completed"], log["n_records"]
        atomic_write_bytes(self.out_dir / _CHECKPOINT, data)
        self._last_checkpoint = _clock()
        self._wrote_result = True

    # ------------------------------------------------------------------ end
    def finish(self, config: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """Write ``history.csv`` and ``summary.json``; remove the checkpoint; close the bar."""
        self._bar.shutdown()
        if self.out_dir is None:
            return
        if self.records:
            keys = list(dict.fromkeys(k for r in self.records for k in r)) + ["run_id", "seed"]
            rows = [{**r, "run_id": self.run_id, "seed": int(self.seed)} for r in self.records]
            atomic_write_text(self.out_dir / "history.csv", _csv_text(rows, keys))
        self._write_json("summary.json", {"experiment": self.experiment, "seed": int(self.seed),
                                          "run_id": self.run_id,
                                          "config": _jsonable(dict(config)),
                                          "summary": _jsonable(dict(summary)),
                                          "diverged_runs": _jsonable(self.diverged_runs)})
        (self.out_dir / _CHECKPOINT).unlink(missing_ok=True)
        (self.out_dir / _CHECKPOINT_LOG).unlink(missing_ok=True)
        self._release_lock()


def _strict_roundtrip(obj: Any) -> Any:
    return json.loads(strict_json(obj))


def _csv_text(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(keys))
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def format_table(rows: list[Mapping[str, Any]], keys: list[str] | None = None) -> str:
    """A markdown table of ``rows`` (floats with 4 significant digits; every row)."""
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_fmt(r.get(k, "")) if r.get(k, "") != "" else ""
                                for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"


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
