"""rfed.state: saved states that cannot run code, are checksummed, versioned and bound to their run.

The crafted files of every resume entry point live here and beside the entry points
(``tests/cli/test_crafted_checkpoints.py``, ``tests/engines/test_mpi_crafted.py``): a pickle
whose loading would create a marker file, a flipped bit in one float of the saved iterate, and
another run's file. Each is refused with one line naming the file, before anything runs.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.engines import flower, flower_config
from rfed.privacy import PrivacyLedger
from rfed.privacy.accountants import EventSpec
from rfed.problems.pca import SpherePCA
from rfed.state import (
    STATE_TYPES,
    StateBindingError,
    StateFileError,
    UnsupportedStateError,
    _member_digest,
    dumps_state,
    load_state,
    loads_state,
    register_state_type,
    save_state,
)


class Marker:
    """Unpickling it creates ``path``: what any code a crafted pickle runs could do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def crafted_pickle(marker: Path) -> bytes:
    """A pickle that creates ``marker`` when it is loaded (checked to do so)."""
    data = pickle.dumps({"format": 2, "state": Marker(marker)})
    probe = marker.with_name(marker.name + ".probe")
    pickle.loads(pickle.dumps(Marker(probe)))
    assert probe.exists()     # the payload does run code when unpickled
    probe.unlink()
    return data


def members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(i.filename, zf.read(i.filename)) for i in zf.infolist()]


def rezip(items: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in items:
            zf.writestr(name, data)
    return out.getvalue()


def _find_array(tree, path):
    """The array index of the saved tree at ``path`` (keys / attribute names / indices)."""
    node = tree
    for step in path:
        if isinstance(node, dict) and "$o" in node:
            node = node["v"]
        node = node[step]
    assert "$a" in node, node
    return node["$a"]


def flip_iterate_bit(data: bytes, path, rezipped: bool) -> bytes:
    """``data`` with the lowest bit of the first float of the array at ``path`` flipped: in
    place in the archive (its CRC-32 then fails), or re-zipped with fresh CRCs (only the
    SHA-256 over the state catches it)."""
    items = members(data)
    body = json.loads(dict(items)["state.json"])
    name, offset, _, _ = body["arrays"][_find_array(body["tree"], path)]
    npy = dict(items)[name]
    itemsize = np.lib.format.read_array(io.BytesIO(npy)).dtype.itemsize
    # the .npy header ends with a newline; the float's lowest byte is its first (little-endian)
    at_npy = npy.index(b"\n") + 1 + (offset or 0) * itemsize
    if rezipped:
        flipped = npy[:at_npy] + bytes([npy[at_npy] ^ 1]) + npy[at_npy + 1:]
        return rezip([(n, flipped if n == name else d) for n, d in items])
    at = data.index(npy) + at_npy           # stored uncompressed: the bytes are in the file
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]


# ---------------------------------------------------------------------------- the format
def test_a_tree_round_trips_exactly_with_its_sharing():
    gen = np.random.default_rng([3, 4])
    gen.standard_normal(5)
    shared = [1, 2]
    arr = np.arange(6.0).reshape(2, 3)
    tree = {
        "floats": [0.1, -0.0, float("nan"), float("inf"), -float("inf"), 1e308, 5e-324],
        "ints": [0, -1, 2 ** 130], "text": "é", "none": None, "flags": (True, False),
        "scalars": [np.float64(0.1), np.float32(1.5), np.int64(-3), np.uint8(7), np.bool_(True),
                    np.complex128(1 + 2j)],
        "arrays": [arr, arr, np.array([1 + 1j]), np.zeros((0, 3), np.int32),
                   np.asfortranarray(np.arange(6.0).reshape(2, 3))],
        "keys": {1: "int key", (2, "x"): "tuple key", "$dollar": 3},
        "shared": (shared, shared), "gen": gen, "gen_again": gen,
        "ledger": PrivacyLedger(3), "spec": EventSpec("gaussian", 1.5),
    }
    tree["ledger"].record(0, [0, 2], noise_multiplier=1.2)
    back = loads_state(dumps_state(tree, kind="k"), kind="k")
    assert back["floats"][:2] == [0.1, -0.0] and np.signbit(back["floats"][1])
    assert np.isnan(back["floats"][2]) and back["floats"][3:] == [np.inf, -np.inf, 1e308, 5e-324]
    assert back["ints"] == [0, -1, 2 ** 130] and back["text"] == "é" and back["none"] is None
    assert back["flags"] == (True, False)
    for got, want in zip(back["scalars"], tree["scalars"], strict=True):
        assert type(got) is type(want) and got == want
    assert back["arrays"][0] is back["arrays"][1]          # one array, shared as it was
    for got, want in zip(back["arrays"], tree["arrays"], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    assert back["arrays"][4].flags.f_contiguous
    assert back["keys"] == tree["keys"]
    assert back["shared"][0] is back["shared"][1]
    assert back["gen_again"] is back["gen"]
    assert back["gen"].bit_generator.state == gen.bit_generator.state
    assert np.array_equal(back["gen"].standard_normal(4), gen.standard_normal(4))
    assert back["gen"].bit_generator.seed_seq.spawn_key == gen.bit_generator.seed_seq.spawn_key
    assert back["ledger"].to_dict() == tree["ledger"].to_dict()
    assert back["spec"] == tree["spec"]


def test_what_a_state_cannot_hold_is_refused_at_save_naming_where():
    with pytest.raises(UnsupportedStateError, match=r"state\['f'\]\[1\] is a builtins.function"):
        dumps_state({"f": [1, lambda: 0]}, kind="k")
    with pytest.raises(UnsupportedStateError, match=r"state\['a'\] is an array of Python"):
        dumps_state({"a": np.array([None])}, kind="k")


class _Mine:
    def __init__(self, x):
        self.x = x


def test_a_class_of_ones_own_is_saved_once_registered():
    with pytest.raises(UnsupportedStateError, match="register_state_type"):
        dumps_state(_Mine(1), kind="k")
    register_state_type(_Mine)
    back = loads_state(dumps_state(_Mine(np.ones(2)), kind="k"), kind="k")
    assert type(back) is _Mine and np.array_equal(back.x, np.ones(2))
    with pytest.raises(ValueError, match="already names another state type"):
        register_state_type(dict, "PriRFedState")


def test_every_listed_state_type_is_an_rfed_class():
    import importlib

    for tag, where in STATE_TYPES.items():
        module, _, name = where.partition(":")
        assert module.startswith("rfed."), tag
        cls = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
        assert isinstance(cls, type), tag


@pytest.fixture
def good():
    return dumps_state({"x": np.linspace(0, 1, 5), "round": 3}, kind="algorithm-checkpoint",
                       bind={"run_id": "abc"})


def _refused(data: bytes, match: str, **kw):
    kw = {"kind": "algorithm-checkpoint", "source": "/some/ck.npz"} | kw
    with pytest.raises(StateFileError, match=match) as info:
        loads_state(data, **kw)
    message = str(info.value)
    assert "\n" not in message and message.startswith("'/some/ck.npz' ")
    return info.value


def test_damaged_foreign_and_unknown_files_are_refused_in_one_line(good, tmp_path):
    marker = tmp_path / "marker"
    _refused(crafted_pickle(marker), r"is a pickle .* no longer read, since loading a pickle "
                                     r"can run code")
    assert not marker.exists()
    _refused(b"", "is empty")
    _refused(b"PK\x03\x04 cut short", "not a ZIP archive")
    _refused(good[: len(good) // 2], "not a ZIP archive")
    _refused(flip_iterate_bit(good, ["x"], rezipped=False), r"damaged: checksum mismatch .*CRC")
    _refused(flip_iterate_bit(good, ["x"], rezipped=True),
             r"damaged: checksum mismatch \(SHA-256")
    items = members(good)
    _refused(rezip([(n, d) for n, d in items if n != "sha256"]), "missing member 'sha256'")
    _refused(rezip([(n, d) for n, d in items if n != "state.json"]),
             "missing member 'state.json'")
    newer = [("format", b'{"format": "rfed-state", "version": 2}')] + items[1:]
    _refused(rezip(newer), "has rfed-state version 2; this rfed reads version 1")
    _refused(rezip([("format", b'{"format": "other", "version": 1}')] + items[1:]),
             "not an rfed state file")
    _refused(good, "is a checkpoint of Algorithm.run, not a checkpoint of rfed.engines.mpi",
             kind="mpi-checkpoint")
    err = _refused(good, r"was written by another run \(its run_id is 'abc', this run's is "
                         r"'xyz'\)", expect={"run_id": "xyz"})
    assert isinstance(err, StateBindingError) and err.key == "run_id"
    assert loads_state(good, kind="algorithm-checkpoint", expect={"run_id": "abc"})["round"] == 3


def _with_tree(tree) -> bytes:
    """A file holding the raw encoded ``tree``, with a valid checksum (what a forger can do)."""
    body = json.dumps({"kind": "k", "bind": {}, "arrays": [], "tree": tree}).encode()
    items = [("format", b'{"format": "rfed-state", "version": 1}'), ("state.json", body)]
    return rezip(items + [("sha256", _member_digest(items).encode())])


def test_a_forged_array_layout_is_refused(good):
    items = members(good)
    body = json.loads(dict(items)["state.json"])
    body["arrays"][0][1] = 10 ** 6                       # an offset past the block's end
    forged = [("state.json", json.dumps(body).encode()) if n == "state.json" else (n, d)
              for n, d in items if n != "sha256"]
    forged.append(("sha256", _member_digest(forged).encode()))
    _refused(rezip(forged), "is malformed .*does not fit member")


def test_a_forged_file_with_a_valid_checksum_builds_only_listed_types(tmp_path):
    assert loads_state(_with_tree({"$o": "EventSpec", "v": {"mechanism": "gaussian",
                                                             "noise_multiplier": 1.0}}),
                       kind="k").mechanism == "gaussian"
    for tree, match in [
        ({"$o": "os:system", "v": {}}, "type 'os:system' that is not a state type"),
        ({"$o": "builtins:eval", "c": "1"}, "not a state type"),
        ({"$o": "EventSpec", "v": {"__class__": 1}}, "malformed"),
        ({"$o": "EventSpec", "v": {"describe": 1}}, "malformed"),
        ({"$g": {"bit_generator": "os", "state": {}, "seed_seq": None}}, "malformed"),
        ({"$s": "O", "v": 1}, "malformed"),
        ({"$r": 5}, "malformed"),
    ]:
        with pytest.raises(StateFileError, match=match):
            loads_state(_with_tree(tree), kind="k")


# ---------------------------------------------------------------------------- Algorithm.run
def _pca_case():
    problem = SpherePCA(make_pca_synthetic(4, 30, 6, 0.3, 0))

    def make():
        return PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=1.0, paper_epsilon=1.0,
                              paper_delta=1e-5), n_sampled=2, step_size=0.05)
    return problem, make


class _Counting:
    """Counts the rounds an algorithm steps."""

    def __init__(self, alg):
        self.steps = 0
        step = alg.step

        def counted(problem, state):
            self.steps += 1
            return step(problem, state)
        alg.step = counted


def test_algorithm_run_refuses_crafted_checkpoints_before_any_round(tmp_path):
    problem, make = _pca_case()
    path = tmp_path / "ck.npz"
    full = make().run(problem, 6, rng=3, eval_every=2)
    make().run(problem, 6, rng=3, eval_every=2, checkpoint_every=4, checkpoint=path)
    good = path.read_bytes()
    resumed = make().run(problem, 6, rng=3, eval_every=2, resume_from=path)
    np.testing.assert_array_equal(resumed.x, full.x)          # the good file resumes, exactly

    marker = tmp_path / "marker"
    foreign = tmp_path / "foreign.npz"
    make().run(problem, 8, rng=3, eval_every=2, checkpoint_every=4, checkpoint=foreign)
    cases = {
        "pickle": (crafted_pickle(marker), "is a pickle .* no longer read"),
        "bit": (flip_iterate_bit(good, ["state", "x"], rezipped=True),
                r"is damaged: checksum mismatch \(SHA-256"),
        "bit-in-place": (flip_iterate_bit(good, ["state", "x"], rezipped=False),
                         "is damaged: checksum mismatch"),
        "foreign": (foreign.read_bytes(), r"was written by another run \(its n_rounds is 8, this "
                                          r"run's is 6\)"),
    }
    for name, (data, match) in cases.items():
        path.write_bytes(data)
        alg = make()
        counter = _Counting(alg)
        with pytest.raises(StateFileError, match=f"argument 'resume_from': '{path}' {match}"
                           ) as info:
            alg.run(problem, 6, rng=3, eval_every=2, resume_from=path)
        assert "\n" not in str(info.value) and counter.steps == 0, name
        assert not marker.exists(), name
    # another algorithm's checkpoint (same rounds) is refused too
    path.write_bytes(good)
    other = make()
    other.name = "PriRFed-other"
    with pytest.raises(StateFileError, match="its algorithm is 'PriRFed-DP-RSGD', this run's "
                                             "is 'PriRFed-other'"):
        other.run(problem, 6, rng=3, eval_every=2, resume_from=path)


# ---------------------------------------------------------------------------- Flower
def _flower_run(config, served):
    """The ServerApp's rounds on the demo federation (one node owning every agent), the blocks
    trained in this process as a ClientApp trains them; ``served`` records the rounds asked."""
    c = flower._config(config)
    full = flower.demo_problem()
    server = flower_config.public_problem(c)
    shard_alg = flower.algorithm_from_config(c)
    client = (full.shard(np.arange(8)), shard_alg, flower._initial(full, shard_alg, c))

    def train_blocks(t, state, node_blocks):
        served.append(t)
        return [(node, flower.train_block(*client, state.x, t, int(state.seed), block))
                for node, block in node_blocks]
    return flower.serve(server, flower.algorithm_from_config(c), config, [1], train_blocks)


def test_the_flower_server_refuses_crafted_checkpoints_before_any_round(tmp_path):
    config = {**flower.DEFAULT_CONFIG, "rounds": 2, "checkpoint": str(tmp_path / "s.ckpt")}
    served: list[int] = []
    _flower_run(config, served)
    good = Path(config["checkpoint"]).read_bytes()
    assert served == [0, 1]
    other = {**config, "rounds": 2, "epsilon": 4.0, "checkpoint": str(tmp_path / "o.ckpt")}
    _flower_run(other, [])
    marker = tmp_path / "marker"
    cases = {
        "pickle": (crafted_pickle(marker), "is a pickle .* no longer read"),
        "bit": (flip_iterate_bit(good, ["state", "x"], rezipped=True),
                "damaged: checksum mismatch"),
        "foreign": (Path(other["checkpoint"]).read_bytes(),
                    r"another configuration \(differing keys: \['epsilon'\]"),
    }
    for name, (data, match) in cases.items():
        Path(config["checkpoint"]).write_bytes(data)
        served.clear()
        with pytest.raises(ValueError, match=match) as info:
            _flower_run(config, served)
        assert "\n" not in str(info.value) and config["checkpoint"] in str(info.value), name
        assert served == [] and not marker.exists(), name


def test_save_state_writes_atomically_and_load_names_a_missing_file(tmp_path):
    path = tmp_path / "s.npz"
    save_state(path, {"a": 1}, kind="k", bind={"r": 1})
    assert load_state(path, kind="k", expect={"r": 1}) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.npz"]
    with pytest.raises(StateFileError, match=r"'.*nothing.npz' cannot be read"):
        load_state(tmp_path / "nothing.npz", kind="k")
