"""One docstring mechanism: an override keeps its own summary and shares its base's sections.

An algorithm's ``step`` or ``release`` says in its own words what it does, while its parameters
and return value are those of the method it overrides. :func:`sections_from` appends the base
method's numpydoc sections (Parameters, Returns, Raises, ...) to the override's docstring when the
class is defined, so that Sphinx (numpydoc) renders them and they are written once.
``tools/numpydoc_sections.py`` follows the decorator the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def _sections(doc: str) -> str:
    """The numpydoc sections of a cleaned docstring: from the first heading (a line followed by
    a line of dashes) to the end; ``""`` when it has none."""
    lines = doc.split("\n")
    for i in range(len(lines) - 1):
        underline = lines[i + 1].strip()
        if lines[i].strip() and underline and set(underline) == {"-"}:
            return "\n".join(lines[i:])
    return ""


def sections_from(base: Callable) -> Callable[[F], F]:
    """Decorator: append ``base``'s numpydoc sections to the decorated function's docstring.

    Parameters
    ----------
    base : callable
        The documented method the decorated one overrides, e.g. ``Algorithm.step``.

    Returns
    -------
    callable
        A decorator that returns the function itself, its ``__doc__`` extended (the function is
        not wrapped: nothing changes when it is called).
    """
    sections = _sections(inspect.cleandoc(base.__doc__ or ""))
    if not sections:
        raise ValueError(f"argument 'base' ({getattr(base, '__qualname__', base)!r}) has no "
                         "numpydoc section to share")

    def decorate(fn: F) -> F:
        own = inspect.cleandoc(fn.__doc__ or "")
        fn.__doc__ = f"{own}\n\n{sections}" if own else sections
        return fn

    return decorate
