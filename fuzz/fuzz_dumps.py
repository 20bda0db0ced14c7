"""Fuzz target: ``bulkwire.dumps`` and ``BulkWriter.store`` on hostile object graphs, against
the JSON round trip ``json.dumps(json.loads(json.dumps(x, default=D)))``.

The input bytes are a program that builds an object graph deterministically (plain Python
over the bytes; an exhausted input reads as zeros, which build ``None``): dicts with str, int,
float, bool and None keys; lists, tuples, list and tuple subclasses (namedtuple, ``__iter__``
overrides, ``__len__``/``__getitem__`` overrides json ignores, an ``__iter__`` that raises);
str with non-ASCII text, controls and lone surrogates; ints up to beyond 64 bits; floats with
NaN, infinities and -0.0; sets; objects encoded through their ``__dict__``; NumPy arrays (float,
int and object dtype) and scalars; and hook objects. A hook (``to_json`` under the entity
conventions, a ``default=`` callable otherwise) mutates a container built before it when it
runs (possibly the one being walked): adds a str or non-str key, deletes, pops and re-inserts,
clears, grows a dict; appends, clears, pops, inserts into, refills, reverses a list; resizes or
refills a NumPy array; or raises. It then returns a value built with the graph (possibly a
container holding more hooks, possibly its own container: a cycle).

Because hooks mutate, the graph is built afresh from the same bytes for each consumer:
``bulkwire.dumps`` and the round trip must give the same bytes or raise the same exception
type; ``BulkWriter.store`` of a graph whose top is a dict must give the round trip's document,
or raise the same exception type and leave nothing in the body.

Lone surrogates are built only for ``ensure_ascii=True``: with ``ensure_ascii=False`` the round
trip raises ``UnicodeEncodeError`` only after its first pass completed (so a later error
or hook in the graph wins there), where bulkwire raises it as it reaches the string.
"""
from __future__ import annotations

import collections
import datetime
import enum
import json
import pathlib
import sys

import numpy as np

import bulkwire
from bulkwire.bulk import collection_name

_TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))
from oracle import entity_default  # noqa: E402  (the reference conventions, in plain Python)

MAX_NODES = 48
MAX_DEPTH = 7


class HookError(Exception):
    """What a hook raises on purpose; both sides must let it through."""


class Reader:
    """The input bytes as a stream of small choices; zeros once exhausted."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def choice(self, n: int) -> int:
        if self.pos >= len(self.data):
            return 0
        value = self.data[self.pos]
        self.pos += 1
        return value % n

    def big(self) -> int:
        value = 0
        for _ in range(self.choice(10)):
            value = value * 256 + self.choice(256)
        return value


class Hook:
    """Mutates its target when it runs (to_json, or the default= callable), then returns
    ``result``. It runs every time it is reached, as json calls the hook every time, but
    mutates only the first few times: a hook that inserts before itself into the list being
    walked would otherwise make json (and so bulkwire) walk forever."""

    MUTATIONS = 3

    def __init__(self, op: int, target, arg, result, budget: list) -> None:
        self.op, self.target, self.arg, self.result = op, target, arg, result
        self.runs = 0
        # Shared by the graph's hooks: hooks that re-insert each other could otherwise make
        # the walk exponential, which json does not finish either.
        self.budget = budget

    def to_json(self):
        return self.act()

    def act(self):
        self.runs += 1
        if self.runs <= self.MUTATIONS and self.budget[0] > 0:
            self.budget[0] -= 1
            mutate(self.op, self.target, self.arg)
        return self.result


class Record:
    """Encoded through its __dict__ under the entity conventions."""

    def __init__(self, attrs: dict) -> None:
        self.__dict__.update(attrs)


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class IterList(list):
    def __iter__(self):  # json iterates a subclass: this order is the one written
        return iter(list(list.__iter__(self))[::-1])


class AltList(list):
    def __init__(self, items, alt) -> None:
        super().__init__(items)
        self.alt = alt

    def __iter__(self):
        return iter(self.alt)


class LyingList(list):
    """json ignores __len__ and __getitem__: it iterates."""

    def __len__(self) -> int:
        return 0

    def __getitem__(self, index):
        return "never"


class RaisingList(list):
    def __iter__(self):
        raise HookError("__iter__")


class IterTuple(tuple):
    def __iter__(self):
        return iter(("T",) + tuple(tuple.__iter__(self)))


Point = collections.namedtuple("Point", "x y")

_STRINGS = ["", "a", "Id", "k\u00e9", "\u20ac\U0001f600", "\x00\n\"\\", "x" * 40, "\u2028"]
_FLOATS = [0.0, -0.0, 1.5, 1e16, 1e-7, float("nan"), float("inf"), float("-inf"), 2.0 ** -1074]
# the first five are str (dicts with only those take the exact-str-key path); a tuple key
# raises json's TypeError
_KEYS = ["a", "b", "c", "d", "k\u00e9", 1, -7, 2 ** 70, 1.5, float("nan"), True, False, None, "1",
         (1,)]


def mutate(op: int, target, arg) -> None:
    """One mutation of a dict, list or ndarray; what a hostile hook does."""
    if op == 0:
        raise HookError("hook")
    if isinstance(target, dict):
        key = next(iter(target), None)
        if op == 1:
            target[arg[0]] = arg[1]                   # add (or replace) a key, maybe not a str
        elif op == 2:
            target.pop(key, None)                     # delete the first key
        elif op == 3 and target:
            target[key] = target.pop(key)             # pop and re-insert: moves it last
        elif op == 4:
            target.clear()
        elif op == 5:
            target.update((f"grow{i}", i) for i in range(20))  # resize the table
        elif op == 6 and target:
            target[list(target)[-1]] = arg[1]         # replace the last value
        elif op == 7 and target:
            target.popitem()
        elif op == 8:
            target[10 ** 20] = 0
    elif isinstance(target, list):
        if op == 1:
            target.append(arg[1])
        elif op == 2:
            target.clear()
        elif op == 3 and target:
            target.pop()
        elif op == 4:
            target.insert(0, arg[1])
        elif op == 5:
            target[:] = [arg[1]] * 3
        elif op == 6 and target:
            del target[0]
        elif op == 7:
            target.reverse()
        elif op == 8:
            target.extend(range(10))
    elif isinstance(target, np.ndarray):
        if op in (1, 2, 3):
            target.resize((0, 1, 40)[op - 1],  refcheck=False)
        elif op == 4:
            target.resize(target.shape[0] + 50, refcheck=False)
        elif op == 5 and target.size:
            target[...] = arg[1] if target.dtype == object else 7


GRAPH_MUTATIONS = 6  # all hooks of one graph together


class Builder:
    """Builds one graph from the reader; every choice comes from the bytes."""

    def __init__(self, reader: Reader, ensure_ascii: bool) -> None:
        self.r = reader
        self.ensure_ascii = ensure_ascii
        self.nodes = 0
        self.targets: list = []   # mutable containers built so far (hook targets)
        self.mutation_budget = [GRAPH_MUTATIONS]

    def scalar(self):
        r = self.r
        kind = r.choice(9)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice(2) == 1
        if kind == 2:
            return r.choice(256) - 128
        if kind == 3:
            return (r.big() + 1) * (-1) ** r.choice(2)
        if kind == 4:
            return _FLOATS[r.choice(len(_FLOATS))]
        if kind == 5:
            return _STRINGS[r.choice(len(_STRINGS))]
        if kind == 6:
            text = "".join(chr(0x20 + r.choice(0x60)) + chr(0xe0 + r.choice(0x300))
                           for _ in range(r.choice(4)))
            if self.ensure_ascii and r.choice(4) == 0:
                text += "\ud800" if r.choice(2) else "\udfff"
            return text
        if kind == 7:
            return Color.RED if r.choice(2) else datetime.datetime(2024, 1 + r.choice(12), 5, 6, 7)
        return np.float32(1.25) if r.choice(2) else np.int64(-3)

    def key(self):
        return _KEYS[self.r.choice(len(_KEYS))]

    def value(self, depth: int):
        self.nodes += 1
        r = self.r
        kind = r.choice(16)
        if depth >= MAX_DEPTH or self.nodes >= MAX_NODES or kind < 3:
            return self.scalar()
        if kind in (4, 5):
            d: dict = {}
            self.targets.append(d)
            str_keys_only = kind == 4
            for _ in range(r.choice(6)):
                k = _KEYS[r.choice(5)] if str_keys_only else self.key()
                d[k] = self.value(depth + 1)
            return d
        if kind == 6:
            lst: list = []
            self.targets.append(lst)
            for _ in range(r.choice(6)):
                lst.append(self.value(depth + 1))
            return lst
        if kind == 7:
            return tuple(self.value(depth + 1) for _ in range(r.choice(4)))
        if kind == 8:
            items = [self.value(depth + 1) for _ in range(r.choice(4))]
            variant = r.choice(5)
            if variant == 0:
                made = IterList(items)
            elif variant == 1:
                made = AltList(items, [self.value(depth + 1)])
            elif variant == 2:
                made = LyingList(items)
            elif variant == 3:
                made = RaisingList(items)
            else:
                made = type("Sub", (list,), {})(items)
            self.targets.append(made)
            return made
        if kind == 9:
            items = tuple(self.value(depth + 1) for _ in range(2))
            return Point(*items) if r.choice(2) else IterTuple(items)
        if kind in (10, 11, 12):
            return self.hook(depth)
        if kind == 13:
            record = Record({})
            self.targets.append(record.__dict__)
            for _ in range(r.choice(4)):
                record.__dict__[_KEYS[r.choice(4)]] = self.value(depth + 1)
            return record
        if kind == 14:
            return self.array(depth)
        return {self.scalar() for _ in range(r.choice(3))}

    def array(self, depth: int):
        r = self.r
        variant = r.choice(4)
        n = r.choice(5)
        if variant == 0:
            arr = np.arange(n, dtype=np.float32) / 3
        elif variant == 1:
            arr = np.arange(n * 2, dtype=np.int64).reshape(n, 2) - 3
        else:
            arr = np.empty(n, dtype=object)
            if variant == 2:
                self.targets.append(arr)  # its own elements' hooks may resize it
            for i in range(n):
                arr[i] = self.value(depth + 1)
            if variant == 3:
                # a view: resizing it raises ValueError on both sides (its base is no target:
                # resizing a base without refcheck leaves its views dangling, in NumPy itself)
                arr = arr[::-1]
                self.targets.append(arr)
            return arr
        self.targets.append(arr)
        return arr

    def hook(self, depth: int):
        r = self.r
        target = self.targets[-1 - r.choice(len(self.targets))] if self.targets else None
        op = r.choice(10)
        arg = (self.key(), self.scalar())
        hook = Hook(op, target, arg, None, self.mutation_budget)
        self.targets.append(hook.__dict__)
        # the result is built after the hook exists, so it may contain the hook's own target
        # or, through later containers, the hook itself (a cycle)
        hook.result = self.value(depth + 1) if r.choice(4) else target
        return hook


def callable_default(o):
    """The default= hook both sides use when the input asks for a callable."""
    if isinstance(o, Hook):
        return o.act()
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=repr)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def outcome(action):
    """(bytes, None) or (None, exception type)."""
    try:
        return action(), None
    except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
        return None, type(exc)


def build(data: bytes):
    """(graph, mode, ensure_ascii) from the bytes; deterministic."""
    r = Reader(data)
    mode = r.choice(4)  # 0, 1: entity conventions; 2: a callable; 3: default=None
    ensure_ascii = r.choice(3) != 0
    graph = Builder(r, ensure_ascii).value(0)
    return graph, mode, ensure_ascii


def check_dumps(data: bytes) -> None:
    ours_graph, mode, ensure_ascii = build(data)
    reference_graph, _, _ = build(data)
    ours_default = {0: bulkwire.ENTITY, 1: bulkwire.ENTITY, 2: callable_default, 3: None}[mode]
    reference_default = {0: entity_default, 1: entity_default, 2: callable_default, 3: None}[mode]
    ours = outcome(lambda: bulkwire.dumps(ours_graph, default=ours_default,
                                          ensure_ascii=ensure_ascii))
    reference = outcome(lambda: json.dumps(
        json.loads(json.dumps(reference_graph, default=reference_default)),
        ensure_ascii=ensure_ascii).encode())
    assert ours == reference, f"dumps: {ours!r} != round trip {reference!r}"


def check_store(data: bytes) -> None:
    """BulkWriter.store of a dict document walks it through the open-object path."""
    ours_graph, _, _ = build(data)
    if type(ours_graph) is not dict or "Id" in ours_graph or "@metadata" in ours_graph:
        return
    reference_graph, _, _ = build(data)
    writer = bulkwire.BulkWriter(buffer_size=1 << 20)
    stored = outcome(lambda: writer.store(ours_graph, id="docs/1"))
    writer.close()
    body = b"".join(bytes(piece) for piece in writer.pieces())
    try:
        document = json.loads(json.dumps(reference_graph, default=entity_default))
    except Exception as exc:  # noqa: BLE001
        assert stored == (None, type(exc)), f"store: {stored!r}, round trip raised {exc!r}"
        assert body == b"[]", body
        return
    assert stored == ("docs/1", None), f"store raised {stored!r}; the round trip did not"
    metadata = {"@collection": collection_name(dict), "Raven-Python-Type": "builtins.dict"}
    document = {k: v for k, v in document.items() if k not in ("Id", "@metadata")}
    document["@metadata"] = metadata
    expected = b'[{"Id":"docs/1","Type":"PUT","Document":' + json.dumps(document).encode() + b"}]"
    assert body == expected, f"store: {body!r} != {expected!r}"


def test_one_input(data: bytes) -> None:
    check_dumps(data)
    check_store(data)


if __name__ == "__main__":
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
