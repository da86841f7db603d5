"""The papers' experiments as named, configurable runs (see :mod:`rfed.experiments.registry`)."""

from rfed.experiments.registry import (
    Experiment,
    RunContext,
    get_experiment,
    list_experiments,
    register,
    run_experiment,
)

__all__ = [
    "Experiment",
    "RunContext",
    "get_experiment",
    "list_experiments",
    "register",
    "run_experiment",
]
