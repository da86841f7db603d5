"""Saved states that cannot run code: checkpoints as checksummed, versioned, run-bound files.

Every state rfed writes to disk and reads back (the checkpoints of
:meth:`rfed.algorithms.base.Algorithm.run`, of ``rfed run`` results folders, of
:func:`rfed.engines.mpi.run_mpi` and of the Flower ServerApp) goes through :func:`save_state` /
:func:`load_state`. Nothing is unpickled:

* a state is a tree of ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples, dicts,
  numpy arrays and scalars, ``numpy.random.Generator`` objects (their bit generator's state and
  seed sequence), and instances of an explicit list of rfed classes (:data:`STATE_TYPES`, plus
  what a program registers with :func:`register_state_type`). An instance is rebuilt by the
  class found in that list under the tag written in the file, never by importing a name read
  from the file: a file naming any other type is refused. A
  :class:`rfed.privacy.PrivacyLedger` is saved through its own ``to_dict`` / ``from_dict``;
* arrays are ``.npy`` members written and read with ``allow_pickle=False`` (object arrays are
  refused); everything else is one JSON member;
* objects that several places of the state share stay shared after loading (a generator held by
  a state and by its privacy account is one generator again), as the run that saved them had it.

File layout (a ZIP archive, members stored uncompressed, in this order):

``format``
    ``{"format": "rfed-state", "version": 1}`` (JSON).
``state.json``
    ``{"kind", "bind", "arrays", "tree"}``: what the file is (``kind``, e.g.
    ``"algorithm-checkpoint"``), the run it belongs to (``bind``: e.g. the run id or the
    configuration), where each array of the tree is (``arrays``: its member, and for a small
    array its offset, shape and memory order in its dtype's block) and the encoded tree.
``arrays/block0.npy``, ..., ``arrays/17.npy``, ...
    The arrays: the small numeric ones (at most 4,096 elements) one after the other in one
    block per dtype, the others each in its own member.
``sha256``
    SHA-256 (hex) over every member before it (name, length and bytes), checked before anything
    is parsed.

:func:`load_state` refuses a file, with a :class:`StateFileError` whose message is one line
naming the file and what is wrong, when it is not an rfed state file (a pickle written by an
earlier rfed is named as such, and never unpickled), has another format version, lacks a member,
fails its checksum, is of another kind, belongs to another run (``expect`` differs from the
file's ``bind``) or names a type that is not a state type.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import io
import json
import math
import operator
import os
import zipfile
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np

from rfed._io import atomic_write_bytes

__all__ = [
    "STATE_FORMAT",
    "STATE_VERSION",
    "STATE_TYPES",
    "StateFileError",
    "StateBindingError",
    "UnsupportedStateError",
    "check_state",
    "dumps_state",
    "loads_state",
    "save_state",
    "load_state",
    "register_state_type",
    "describe_kind",
]

#: The format name written in every state file's ``format`` member.
STATE_FORMAT = "rfed-state"
#: The version of that format this rfed writes and reads.
STATE_VERSION = 1

#: rfed's own classes that may appear in a saved state: tag -> ``"module:QualName"``. The tag is
#: what the file holds; the class is imported from the module named HERE (rfed's code), so a
#: file can only ever name one of these (or a class a program registered itself).
STATE_TYPES: dict[str, str] = {
    # algorithms
    "RunResult": "rfed.algorithms.base:RunResult",
    "TailAveragedState": "rfed.algorithms.averaging:TailAveragedState",
    "DPSGDState": "rfed.algorithms.centralized:DPSGDState",
    "PooledAccount": "rfed.algorithms.centralized:_PooledAccount",
    "DecentralizedState": "rfed.algorithms.decentralized.base:PrivateState",
    "DOADPState": "rfed.algorithms.decentralized.doadp:DOADPState",
    "DPDLState": "rfed.algorithms.decentralized.dpdl:DPDLState",
    "DPDDAState": "rfed.algorithms.decentralized.dpdda:DPDDAState",
    "DGTState": "rfed.algorithms.decentralized.dpdgt:DGTState",
    "GaussianAccount": "rfed.algorithms.private:GaussianAccount",
    "GaussianRelease": "rfed.algorithms.private:GaussianRelease",
    "NoisePlan": "rfed.algorithms.private:NoisePlan",
    "NoiseConfig": "rfed.algorithms.private:NoiseConfig",
    "DGTAccount": "rfed.algorithms.decentralized._privacy:DGTAccount",
    "DGTRelease": "rfed.algorithms.decentralized._privacy:DGTRelease",
    "PaperFormula": "rfed.algorithms.decentralized._privacy:PaperFormula",
    "MuffliatoPaperFormula": "rfed.algorithms.decentralized.muffliato:MuffliatoPaperFormula",
    "DPDOState": "rfed.algorithms.decentralized.dpdo:DPDOState",
    "DPDOAccount": "rfed.algorithms.decentralized.dpdo:DPDOAccount",
    "DPDOPaperFormula": "rfed.algorithms.decentralized.dpdo:DPDOPaperFormula",
    "PriRFedState": "rfed.algorithms.federated.prirfed:PriRFedState",
    "RepeatedState": "rfed.algorithms.federated.repeated:RepeatedState",
    "LocalPlan": "rfed.algorithms.federated.local:LocalPlan",
    "PlanEvents": "rfed.algorithms.federated.accounting:_PlanEvents",
    # privacy
    "PrivacyLedger": "rfed.privacy.ledger:PrivacyLedger",
    "EventSpec": "rfed.privacy.accountants:EventSpec",
    "PrivacyBudget": "rfed.privacy.budget:PrivacyBudget",
    "Certificate": "rfed.privacy.budget:Certificate",
    "Calibration": "rfed.privacy.budget:Calibration",
    "LaplaceSchedule": "rfed.privacy.mechanisms:LaplaceSchedule",
    "GaussianNoise": "rfed.privacy.mechanisms:GaussianNoise",
    "SecureRandom": "rfed.privacy.secure:SecureRandom",
    # networks
    "InProcessCommunicator": "rfed.networks.comm:InProcessCommunicator",
    "CommStats": "rfed.networks.comm:CommStats",
    # engines
    "SavedBlocks": "rfed.engines.mpi:SavedBlocks",
}

#: The kinds of state file rfed writes, in words (for the messages).
_KINDS = {
    "algorithm-checkpoint": "checkpoint of Algorithm.run",
    "experiment-checkpoint": "checkpoint of an rfed results folder",
    "experiment-checkpoint-log": "checkpoint log of an rfed results folder",
    "mpi-checkpoint": "checkpoint of rfed.engines.mpi.run_mpi",
    "flower-server-checkpoint": "checkpoint of the Flower ServerApp",
}

#: Arrays of at most this many elements share one ``.npy`` member per dtype (see
#: :func:`_array_layout`); larger ones have their own.
_PACKED_MAX = 4096

#: numpy bit generators a saved ``Generator`` may use (by their class name).
_BIT_GENERATORS: dict[str, type] = {
    cls.__name__: cls for cls in (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox,
                                  np.random.SFC64, np.random.MT19937)
}

#: numpy scalar kinds written as JSON values (exact: float16/32/64 round-trip through a Python
#: float, integers through a Python int); other numpy scalars are stored as 0-d arrays.
_JSON_SCALAR_KINDS = frozenset("biuf")

_PICKLE_PREFIXES = (b"\x80",)   # protocol 2+ (every pickle rfed ever wrote)


class StateFileError(ValueError):
    """A state file rfed refuses; ``str(err)`` is one line naming the file and what is wrong.

    Attributes
    ----------
    path : str
        The file (or ``"<bytes>"`` / a description for in-memory data).
    reason : str
        What is wrong, e.g. ``"is damaged: checksum mismatch (...)"``.

    Parameters
    ----------
    path : str
    reason : str
    """

    def __init__(self, path: str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"'{self.path}' {reason}")

    def within(self, context: str) -> StateFileError:
        """The same error, its message prefixed by ``context`` (e.g. the argument's name).

        Parameters
        ----------
        context : str

        Returns
        -------
        StateFileError
        """
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.args = (f"{context}: {self.args[0]}",)
        return err


class StateBindingError(StateFileError):
    """A whole, readable state file that belongs to another run (``expect`` differs from its
    ``bind``).

    Attributes
    ----------
    key : str
        The first binding key that differs.
    saved, expected : object
        The file's value and the value this run expected.

    Parameters
    ----------
    path : str
    key : str
    saved, expected : object
    """

    def __init__(self, path: str, key: str, saved: Any, expected: Any):
        self.key, self.saved, self.expected = key, saved, expected
        if isinstance(saved, dict) and isinstance(expected, dict):
            differ = sorted(k for k in set(saved) | set(expected)
                            if saved.get(k, _MISSING) != expected.get(k, _MISSING))
            what = f"its {key} differs in {differ}"
        else:
            what = f"its {key} is {saved!r}, this run's is {expected!r}"
        super().__init__(path, f"was written by another run ({what})")


class UnsupportedStateError(TypeError):
    """A value that cannot be saved (its type is not a state type); names where it is."""


_MISSING = object()


# ---------------------------------------------------------------------------- the type registry
class _StateType:
    """How one class is saved: its fields (``__dict__`` and slots) or its own codec."""

    def __init__(self, tag: str, cls: type,
                 encode: Callable[[Any], Any] | None = None,
                 decode: Callable[[Any], Any] | None = None):
        self.tag, self.cls, self.encode, self.decode = tag, cls, encode, decode
        self._settable: dict[str, bool] = {}
        # a class's own __getstate__ / __setstate__ are honoured, as pickle does
        getstate = getattr(cls, "__getstate__", None)
        self.own_getstate = getstate is not None and getstate is not getattr(
            object, "__getstate__", None)
        self.own_setstate = callable(getattr(cls, "__setstate__", None))

    def fields(self, obj: Any) -> dict[str, Any]:
        """The attributes saved: the class's own ``__getstate__`` (a dict), else the instance's
        ``__dict__`` and slots."""
        if self.own_getstate:
            state = obj.__getstate__()
            if not isinstance(state, dict):
                raise UnsupportedStateError(
                    f"{type(obj).__qualname__}.__getstate__ returned a "
                    f"{type(state).__name__}; a state type's must return a dict")
            return state
        out = dict(getattr(obj, "__dict__", {}))
        for klass in type(obj).__mro__:
            for name in klass.__dict__.get("__slots__", ()):
                if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                    out[name] = getattr(obj, name)
        return out

    def settable(self, name: str) -> bool:
        """A plain attribute: an identifier, not a dunder, not a method or property."""
        ok = self._settable.get(name)
        if ok is None:
            attr = inspect.getattr_static(self.cls, name, None)
            ok = (name.isidentifier() and not name.startswith("__")
                  and not callable(attr) and not isinstance(attr, property))
            self._settable[name] = ok
        return ok


def _ledger_codec() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    from rfed.privacy.ledger import PrivacyLedger

    return (lambda ledger: ledger.to_dict()), PrivacyLedger.from_dict


#: Types with their own codec (instead of their fields): tag -> factory of (encode, decode).
_CODECS: dict[str, Callable[[], tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = {
    "PrivacyLedger": _ledger_codec,
}

_BY_TAG: dict[str, _StateType] = {}
_BY_CLASS: dict[type, _StateType] = {}
_TAG_OF_NAME = {path: tag for tag, path in STATE_TYPES.items()}


def register_state_type(cls: type, tag: str | None = None) -> type:
    """Allow instances of ``cls`` in saved states (usable as a class decorator).

    The instance's attributes (``__dict__`` and ``__slots__``, or what the class's own
    ``__getstate__`` returns: a dict) are saved; loading makes an instance with
    ``cls.__new__`` and sets them (or passes them to the class's ``__setstate__``);
    ``__init__`` and ``__post_init__`` are not called, as when unpickling. Register a class
    before loading a file that holds it.

    Parameters
    ----------
    cls : type
        A class of your own (e.g. the state dataclass of an algorithm you wrote).
    tag : str, optional
        The name written in the files (default ``"module:QualName"``); keep it when the class
        moves, so that saved files stay readable.

    Returns
    -------
    type
        ``cls``.
    """
    if not isinstance(cls, type):
        raise TypeError(f"argument 'cls' must be a class, got {cls!r}")
    tag = f"{cls.__module__}:{cls.__qualname__}" if tag is None else tag
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"argument 'tag' must be a non-empty str, got {tag!r}")
    known = _BY_TAG.get(tag)
    if (known is not None and known.cls is not cls) or tag in STATE_TYPES:
        raise ValueError(f"argument 'tag': {tag!r} already names another state type")
    entry = _StateType(tag, cls)
    _BY_TAG[tag] = _BY_CLASS[cls] = entry
    return cls


def _builtin(tag: str) -> _StateType | None:
    """The rfed class of ``tag`` from :data:`STATE_TYPES` (imported from rfed's own table)."""
    entry = _BY_TAG.get(tag)
    if entry is not None or tag not in STATE_TYPES:
        return entry
    module, _, qualname = STATE_TYPES[tag].partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):  # pragma: no cover - the table names classes
        raise TypeError(f"STATE_TYPES[{tag!r}] is not a class")
    codec = _CODECS.get(tag)
    entry = _StateType(tag, obj, *(codec() if codec is not None else (None, None)))
    _BY_TAG[tag] = _BY_CLASS[obj] = entry
    return entry


def _entry_of(cls: type) -> _StateType | None:
    entry = _BY_CLASS.get(cls)
    if entry is None:
        tag = _TAG_OF_NAME.get(f"{cls.__module__}:{cls.__qualname__}")
        if tag is not None:
            entry = _builtin(tag)
            if entry is not None and entry.cls is not cls:
                return None
    return entry


def describe_kind(kind: str) -> str:
    """``kind`` in words (e.g. ``"checkpoint of Algorithm.run"``).

    Parameters
    ----------
    kind : str

    Returns
    -------
    str
    """
    return _KINDS.get(kind, f"'{kind}' file")


# ---------------------------------------------------------------------------- encoding
#: Types JSON reads back as they were written (a float only when finite).
_PLAIN_TYPES = frozenset({int, str, bool, type(None)})
_JSON_SCALARS = frozenset({int, float, str, bool, type(None)})


def _plain_values(values: Any) -> bool:
    """Every value is a str, bool, None, int or finite float (written as is, no tag)."""
    types = set(map(type, values))
    if types <= _PLAIN_TYPES:
        return True
    if types <= _JSON_SCALARS:
        return all(math.isfinite(v) for v in values if type(v) is float)
    return False


_STR = frozenset({str})
_DOLLAR = operator.methodcaller("startswith", "$")


def _where(where: Any) -> str:
    """``where`` of :meth:`_Encoder.encode` as text: ``state['key'][3].attribute``."""
    steps = []
    while isinstance(where, tuple):
        where, step = where
        steps.append(step if isinstance(step, str) and step.startswith(".")
                     else f"[{step!r}]")
    return str(where) + "".join(reversed(steps))


def _nonfinite(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


class _Encoder:
    """Tree -> JSON-able tree and a list of arrays.

    Shared containers and objects are written once: every list, tuple, dict, generator and
    state object gets the next memo number when first met (pre-order, the decoder numbers them
    in the same order); a later meeting writes ``{"$r": number}``. Every numbered object is
    kept alive until the end, so that no id is reused by a temporary of a codec.
    """

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self._array_index: dict[int, int] = {}
        self._memo: dict[int, int] = {}
        self._alive: list[Any] = []

    def _number(self, obj: Any) -> None:
        self._memo[id(obj)] = len(self._alive)
        self._alive.append(obj)

    def encode(self, obj: Any, where: Any) -> Any:
        """The JSON-able node of ``obj``; ``where`` locates it for the messages (a str, or
        ``(parent, step)`` rendered by :func:`_where` only when an error names it)."""
        t = type(obj)
        if t in _PLAIN_TYPES:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"$f": _nonfinite(obj)}
        if t is np.ndarray:
            return {"$a": self._array(obj, where)}
        if isinstance(obj, np.generic):
            return self._scalar(obj, where)
        ref = self._memo.get(id(obj))
        if ref is not None:
            return {"$r": ref}
        if t is list:
            self._number(obj)
            if _plain_values(obj):         # numbers and strings only: written as they are
                return list(obj)
            return [self.encode(v, (where, i)) for i, v in enumerate(obj)]
        if t is tuple:
            self._number(obj)
            return {"$t": [self.encode(v, (where, i)) for i, v in enumerate(obj)]}
        if t is dict:
            self._number(obj)
            if set(map(type, obj)) <= _STR and not any(map(_DOLLAR, obj)):
                if _plain_values(obj.values()):
                    return dict(obj)
                return {k: v if type(v) in _PLAIN_TYPES else self.encode(v, (where, k))
                        for k, v in obj.items()}
            return {"$d": [[self.encode(k, (where, ".<key>")), self.encode(v, (where, k))]
                           for k, v in obj.items()]}
        if t is np.random.Generator:
            self._number(obj)
            return {"$g": self._generator(obj, where)}
        entry = _entry_of(t)
        if entry is None:
            raise UnsupportedStateError(
                f"{_where(where)} is a {t.__module__}.{t.__qualname__}, which is not a state "
                "type (rfed.state.STATE_TYPES; register your own with "
                "rfed.state.register_state_type)")
        self._number(obj)
        if entry.encode is not None:
            return {"$o": entry.tag, "c": self.encode(entry.encode(obj), where)}
        fields = entry.fields(obj)
        return {"$o": entry.tag,
                "v": {k: v if type(v) in _PLAIN_TYPES else self.encode(v, (where, f".{k}"))
                      for k, v in fields.items()}}

    def _array(self, arr: np.ndarray, where: Any) -> int:
        index = self._array_index.get(id(arr))
        if index is None:
            if arr.dtype.hasobject:
                raise UnsupportedStateError(f"{_where(where)} is an array of Python objects "
                                            f"(dtype {arr.dtype}), which a state cannot hold")
            index = self._array_index[id(arr)] = len(self.arrays)
            self.arrays.append(arr)
        return index

    def _scalar(self, value: np.generic, where: Any) -> Any:
        dtype = value.dtype
        if dtype.kind in _JSON_SCALAR_KINDS and dtype.itemsize <= 8:
            item = value.item()
            if isinstance(item, float) and not math.isfinite(item):
                item = _nonfinite(item)
            return {"$s": dtype.str, "v": item}
        return {"$S": self._array(np.asarray(value), where)}

    def _generator(self, gen: np.random.Generator, where: Any) -> dict[str, Any]:
        bitgen = gen.bit_generator
        name = type(bitgen).__name__
        if _BIT_GENERATORS.get(name) is not type(bitgen):
            raise UnsupportedStateError(f"{_where(where)} draws from a "
                                        f"{type(bitgen).__qualname__}, "
                                        "not a numpy bit generator a state can hold")
        seq = getattr(bitgen, "seed_seq", None)
        seed = None
        if isinstance(seq, np.random.SeedSequence):
            seed = {"entropy": self.encode(seq.entropy, (where, ".seed_seq.entropy")),
                    "spawn_key": [int(k) for k in seq.spawn_key],
                    "pool_size": int(seq.pool_size),
                    "n_children_spawned": int(seq.n_children_spawned)}
        return {"bit_generator": name,
                "state": self.encode(bitgen.state, (where, ".bit_generator.state")),
                "seed_seq": seed}


class _Decoder:
    """The inverse of :class:`_Encoder` (memo numbers assigned in the same pre-order)."""

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = arrays
        self._memo: list[Any] = []

    def _reserve(self) -> int:
        self._memo.append(_MISSING)
        return len(self._memo) - 1

    def decode(self, node: Any) -> Any:
        if isinstance(node, list):
            if set(map(type, node)) <= _JSON_SCALARS:   # no container, no tag: as it is
                self._memo.append(node)
                return node
            out: list = []
            self._memo.append(out)
            out.extend(self.decode(v) for v in node)
            return out
        if not isinstance(node, dict):
            return node
        if not node or not next(iter(node)).startswith("$"):
            if set(map(type, node.values())) <= _JSON_SCALARS:
                self._memo.append(node)
                return node
            plain: dict = {}
            self._memo.append(plain)
            for k, v in node.items():
                plain[k] = self.decode(v)
            return plain
        tag = next(iter(node))
        body = node[tag]
        if tag == "$f":
            return float(body)
        if tag == "$a":
            return self.arrays[body]
        if tag == "$S":
            return self.arrays[body][()]
        if tag == "$s":
            dtype = np.dtype(body)
            if dtype.kind not in _JSON_SCALAR_KINDS:
                raise ValueError(f"scalar of dtype {body!r}")
            return dtype.type(node["v"])
        if tag == "$r":
            value = self._memo[body]
            if value is _MISSING:
                raise ValueError("a reference to an object that is still being read")
            return value
        if tag == "$t":
            slot = self._reserve()
            value = tuple(self.decode(v) for v in body)
            self._memo[slot] = value
            return value
        if tag == "$d":
            out_d: dict = {}
            self._memo.append(out_d)
            for k, v in body:
                out_d[self.decode(k)] = self.decode(v)
            return out_d
        if tag == "$g":
            slot = self._reserve()
            gen = self._generator(body)
            self._memo[slot] = gen
            return gen
        if tag == "$o":
            return self._object(body, node)
        raise ValueError(f"unknown node {tag!r}")

    def _generator(self, body: dict) -> np.random.Generator:
        cls = _BIT_GENERATORS.get(body["bit_generator"])
        if cls is None:
            raise ValueError(f"unknown bit generator {body['bit_generator']!r}")
        seed = body["seed_seq"]
        if seed is not None:
            seq = np.random.SeedSequence(self.decode(seed["entropy"]),
                                         spawn_key=tuple(int(k) for k in seed["spawn_key"]),
                                         pool_size=int(seed["pool_size"]),
                                         n_children_spawned=int(seed["n_children_spawned"]))
            bitgen = cls(seq)
        else:
            bitgen = cls()
        bitgen.state = self.decode(body["state"])
        return np.random.Generator(bitgen)

    def _object(self, tag: Any, node: dict) -> Any:
        entry = _BY_TAG.get(tag) if isinstance(tag, str) else None
        if entry is None and isinstance(tag, str):
            entry = _builtin(tag)
        if entry is None:
            raise _UnknownType(tag)
        if entry.decode is not None:
            slot = self._reserve()
            value = entry.decode(self.decode(node["c"]))
            self._memo[slot] = value
            return value
        obj = entry.cls.__new__(entry.cls)  # type: ignore[call-overload]  # as unpickling
        self._memo.append(obj)
        if entry.own_setstate:
            obj.__setstate__({name: self.decode(value) for name, value in node["v"].items()})
            return obj
        for name, value in node["v"].items():
            if not entry.settable(name):
                raise ValueError(f"{entry.tag} has no plain attribute {name!r}")
            object.__setattr__(obj, name, self.decode(value))
        return obj


class _UnknownType(Exception):
    def __init__(self, tag: Any):
        self.tag = tag


# ---------------------------------------------------------------------------- the file
def _member_digest(members: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in members:
        h.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _array_layout(arrays: list[np.ndarray]
                  ) -> tuple[list[list[Any]], list[tuple[str, np.ndarray]]]:
    """Where each array goes: ``[member, offset, shape, order]`` per array (offset None: the
    member holds the array alone), and the members ``(name, array)``.

    A small numeric array goes into the block of its dtype (one ``.npy`` member per dtype,
    the arrays flattened one after the other): one header to write and parse instead of
    hundreds (a state holds many per-agent vectors).
    """
    layout: list[list[Any]] = []
    blocks: list[tuple[str, np.ndarray]] = []
    packed: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}
    names: dict[str, str] = {}
    for i, arr in enumerate(arrays):
        if arr.size > _PACKED_MAX or arr.dtype.kind not in "biufc":
            name = f"arrays/{i}.npy"
            blocks.append((name, arr))
            layout.append([name, None, None, None])
            continue
        key = arr.dtype.str
        if key not in packed:
            packed[key], sizes[key] = [], 0
            names[key] = f"arrays/block{len(names)}.npy"
        order: Literal["C", "F"] = (
            "F" if arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous
            else "C")
        packed[key].append(arr.ravel(order=order))
        layout.append([names[key], sizes[key], list(arr.shape), order])
        sizes[key] += arr.size
    for key, parts in packed.items():
        blocks.append((names[key], np.concatenate(parts) if parts else np.zeros(0, key)))
    return layout, blocks


def _unpacked(read: Mapping[str, np.ndarray], entry: list[Any]) -> np.ndarray:
    """Array ``entry`` of :func:`_array_layout` from the members read (its own copy)."""
    member, offset, shape, order = entry
    whole = read[member]
    if offset is None:
        return whole
    shape = tuple(int(d) for d in shape)
    size = math.prod(shape)
    if whole.ndim != 1 or not 0 <= offset <= whole.size - size or order not in ("C", "F") \
            or min(shape, default=0) < 0:
        raise ValueError(f"array entry {entry!r} does not fit member {member!r}")
    return np.array(whole[offset:offset + size].reshape(shape, order=order), order=order)


def _json_normal(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, allow_nan=False))


def check_state(tree: Any) -> None:
    """Raise what :func:`dumps_state` would raise for ``tree``'s types, writing nothing.

    The tree is walked as :func:`dumps_state` walks it, without copying an array or making
    bytes: a run that will checkpoint calls it on its first state, so that a state class not
    registered with :func:`register_state_type` is refused before the first round, not at the
    first checkpoint rounds later.

    Parameters
    ----------
    tree : object
        The state (see the module docstring for what it may hold).

    Raises
    ------
    UnsupportedStateError
        ``tree`` holds a value of a type that is not a state type (the message says where).
    """
    _Encoder().encode(tree, "state")


def dumps_state(tree: Any, *, kind: str, bind: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of a state file holding ``tree`` (see the module docstring).

    Parameters
    ----------
    tree : object
        The state (see the module docstring for what it may hold).
    kind : str
        What the file is, e.g. ``"algorithm-checkpoint"`` (checked by :func:`loads_state`).
    bind : mapping, optional
        JSON values naming the run the state belongs to (run id, configuration, ...);
        :func:`loads_state` compares them with its ``expect``.

    Returns
    -------
    bytes

    Raises
    ------
    UnsupportedStateError
        ``tree`` holds a value of a type that is not a state type (the message says where).
    """
    enc = _Encoder()
    encoded = enc.encode(tree, "state")
    layout, blocks = _array_layout(enc.arrays)
    head = json.dumps({"format": STATE_FORMAT, "version": STATE_VERSION}).encode()
    body = json.dumps({"kind": kind, "bind": dict(bind or {}), "arrays": layout,
                       "tree": encoded}, allow_nan=False, separators=(",", ":")).encode()
    members = [("format", head), ("state.json", body)]
    for name, arr in blocks:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, arr, allow_pickle=False)
        members.append((name, buf.getvalue()))
    digest = _member_digest(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        zf.writestr("sha256", digest.encode("ascii"))
    return out.getvalue()


def _read_members(data: bytes, source: str) -> list[tuple[str, bytes]]:
    """Every member of the archive, in order (nothing parsed yet)."""
    if not data:
        raise StateFileError(source, "is empty")
    if data.startswith(_PICKLE_PREFIXES):
        raise StateFileError(source, "is a pickle (a checkpoint written by an earlier rfed); "
                                     "this format is no longer read, since loading a pickle "
                                     "can run code")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise StateFileError(source, "is not an rfed state file (not a ZIP archive: another "
                                     "format, or cut short)") from None
    with zf:
        names = [info.filename for info in zf.infolist()]
        if names[:1] != ["format"]:
            raise StateFileError(source, "is not an rfed state file (no 'format' member)")
        try:
            return [(name, zf.read(name)) for name in names]
        except zipfile.BadZipFile as exc:
            raise StateFileError(source, f"is damaged: checksum mismatch ({exc})") from None
        except (OSError, EOFError, ValueError, NotImplementedError) as exc:
            raise StateFileError(source, f"is damaged ({type(exc).__name__}: {exc})") from None


def loads_state(data: bytes, *, kind: str, expect: Mapping[str, Any] | None = None,
                source: str = "<bytes>") -> Any:
    """The tree of a state file's bytes, after every check (see the module docstring).

    Parameters
    ----------
    data : bytes
    kind : str
        The kind the caller reads; a file of another kind is refused.
    expect : mapping, optional
        Binding values the file must hold (each key of ``expect``, compared as JSON).
    source : str
        The file's name, for the messages.

    Returns
    -------
    object
        The tree.

    Raises
    ------
    StateFileError
        One line naming ``source`` and what is wrong (:class:`StateBindingError` for another
        run's file).
    """
    members = _read_members(data, source)
    by_name = dict(members)
    try:
        fmt = json.loads(by_name["format"])
        name, version = fmt["format"], fmt["version"]
    except (ValueError, KeyError, TypeError):
        raise StateFileError(source, "is not an rfed state file (unreadable 'format' "
                                     "member)") from None
    if name != STATE_FORMAT:
        raise StateFileError(source, f"is not an rfed state file (format {name!r})")
    if version != STATE_VERSION:
        raise StateFileError(source, f"has {STATE_FORMAT} version {version!r}; this rfed reads "
                                     f"version {STATE_VERSION}")
    for required in ("state.json", "sha256"):
        if required not in by_name:
            raise StateFileError(source, f"is incomplete: missing member '{required}'")
    if [n for n, _ in members][-1] != "sha256" or len(by_name) != len(members):
        raise StateFileError(source, "is not an rfed state file (members out of order)")
    digest = _member_digest(members[:-1])
    if by_name["sha256"].decode("ascii", "replace") != digest:
        raise StateFileError(source, "is damaged: checksum mismatch (SHA-256 over the state "
                                     "differs from the one saved with it)")
    try:
        body = json.loads(by_name["state.json"])
        file_kind, bind, layout, tree = (body["kind"], body["bind"], body["arrays"],
                                         body["tree"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StateFileError(source, f"is malformed (state.json: {exc})") from None
    if file_kind != kind:
        raise StateFileError(source, f"is a {describe_kind(file_kind)}, not a "
                                     f"{describe_kind(kind)}")
    for key, value in (expect or {}).items():
        wanted = _json_normal(value)
        saved = bind.get(key, _MISSING) if isinstance(bind, dict) else _MISSING
        if saved is _MISSING:
            raise StateFileError(source, f"does not say which run wrote it (no {key!r})")
        if saved != wanted:
            raise StateBindingError(source, key, saved, wanted)
    if not isinstance(layout, list):
        raise StateFileError(source, "is malformed (state.json: 'arrays' is not a list)")
    read: dict[str, np.ndarray] = {}
    for entry in layout:
        member = entry[0] if isinstance(entry, list) and entry else None
        if member in read:
            continue
        if not isinstance(member, str) or member not in by_name:
            raise StateFileError(source, f"is incomplete: missing member {member!r}")
        try:
            read[member] = np.lib.format.read_array(io.BytesIO(by_name[member]),
                                                    allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise StateFileError(source, f"is malformed (member '{member}': {exc})") from None
    try:
        arrays = [_unpacked(read, entry) for entry in layout]
        return _Decoder(arrays).decode(tree)
    except _UnknownType as exc:
        raise StateFileError(source, f"holds a type {exc.tag!r} that is not a state type "
                                     "(nothing was built from it)") from None
    except Exception as exc:  # a crafted tree: say so in one line, whatever failed
        raise StateFileError(source, f"is malformed ({type(exc).__name__}: {exc})") from None


def save_state(path: str | os.PathLike, tree: Any, *, kind: str,
               bind: Mapping[str, Any] | None = None) -> None:
    """Write ``tree`` to ``path`` as a state file, atomically (:func:`dumps_state`).

    Parameters
    ----------
    path : str or os.PathLike
    tree : object
        Of the state types :func:`dumps_state` accepts.
    kind : str
        What the file is (:func:`describe_kind`).
    bind : mapping, optional
        What the file is bound to (a later :func:`load_state` with ``expect`` compares it).
    """
    atomic_write_bytes(path, dumps_state(tree, kind=kind, bind=bind))


def load_state(path: str | os.PathLike, *, kind: str,
               expect: Mapping[str, Any] | None = None) -> Any:
    """The tree saved in ``path`` by :func:`save_state`, after every check.

    Parameters
    ----------
    path : str or os.PathLike
    kind : str
        The kind the caller reads; a file of another kind is refused.
    expect : mapping, optional
        Binding values the file must hold (as :func:`loads_state`).

    Returns
    -------
    object
        The tree.

    Raises
    ------
    StateFileError
        The file is missing or refused (see :func:`loads_state`); the message names it.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StateFileError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    return loads_state(data, kind=kind, expect=expect, source=str(path))

