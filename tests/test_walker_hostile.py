"""The walker against hostile input: hooks that mutate the containers being walked, list and
tuple subclasses that override iteration, NumPy object arrays resized by their own elements,
nesting deeper than the thread's C stack allows, and one Encoder shared by threads.

Each graph is built afresh for each side (hooks mutate it), and the output must be the JSON
round trip's, byte for byte, or the same exception type; nothing may crash or read out of
bounds (the sanitizer build runs these too).
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

import bulkwire
from bulkwire.bulk import collection_name
from oracle import entity_default, oracle_bytes, round_trip

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fuzz"))
import fuzz_dumps  # noqa: E402


class HookError(Exception):
    pass


def outcome(action):
    try:
        return action(), None
    except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
        return None, type(exc)


def hook_default(o):
    """default= for the callable mode: hooks act, everything else as the conventions."""
    if isinstance(o, Mutator):
        return o.act()
    return entity_default(o)


def check_all_ways(make):
    """make() builds a fresh graph each call. dumps under the entity conventions, under a
    default= callable, and BulkWriter.store (for dicts) all give the round trip."""
    for ours_default, reference_default in ((bulkwire.ENTITY, entity_default),
                                            (hook_default, hook_default)):
        ours = outcome(lambda: bulkwire.dumps(make(), default=ours_default))
        reference = outcome(lambda: oracle_bytes(make(), reference_default))
        assert ours == reference
        assert reference[1] is None or reference[1] in (ValueError, TypeError, HookError)
    document = make()
    if type(document) is dict:
        check_store(document, make())


def check_store(ours, reference):
    writer = bulkwire.BulkWriter()
    stored = outcome(lambda: writer.store(ours, id="docs/1"))
    writer.close()
    body = b"".join(bytes(piece) for piece in writer.pieces())
    expected = outcome(lambda: json.loads(json.dumps(reference, default=entity_default)))
    if expected[1] is not None:
        assert stored[1] is expected[1]
        assert body == b"[]"
        return
    document = {k: v for k, v in expected[0].items() if k not in ("Id", "@metadata")}
    document["@metadata"] = {"@collection": collection_name(dict),
                             "Raven-Python-Type": "builtins.dict"}
    assert stored == ("docs/1", None)
    assert body == (b'[{"Id":"docs/1","Type":"PUT","Document":' + json.dumps(document).encode()
                    + b"}]")


class Mutator:
    """Runs `action(target)` when encoded (to_json, or the default= hook), then returns
    `result`; a few times at most, so that inserting before itself cannot loop forever."""

    def __init__(self, target, action, result=1):
        self.target, self.action, self.result, self.runs = target, action, result, 0

    def to_json(self):
        return self.act()

    def act(self):
        self.runs += 1
        if self.runs <= 3:
            self.action(self.target)
        return self.result


# ---------------------------------------------------------------- dicts mutated mid-walk

def test_hook_adding_a_non_str_key_reads_no_memory_as_a_str():
    """The reported crash: the key check made before the walk was trusted after a hook ran."""
    class Evil:
        def __init__(self, d):
            self.d = d

        def to_json(self):
            self.d[10 ** 20] = 0
            return 1

    def make():
        d = {"a": None}
        d["a"] = Evil(d)
        return d

    assert bulkwire.dumps(make()) == oracle_bytes(make()) == b'{"a": 1}'
    check_store(make(), make())


def _pop_reinsert(key):
    def action(d):
        d[key] = d.pop(key)
    return action


DICT_ACTIONS = {
    "add str key": lambda d: d.__setitem__("zz", "added"),
    "add int key": lambda d: d.__setitem__(10 ** 20, 0),
    "add float, None, bool keys": lambda d: d.update({1.5: 1, None: 2, True: 3}),
    "add unencodable key": lambda d: d.__setitem__((1, 2), 0),
    "delete a later key": lambda d: d.pop("c", None),
    "delete an earlier key": lambda d: d.pop("a", None),
    "pop and reinsert a later key": _pop_reinsert("c"),
    "pop and reinsert an earlier key": _pop_reinsert("a"),
    "pop and reinsert own key": _pop_reinsert("b"),
    "clear": dict.clear,
    "grow the table": lambda d: d.update((f"k{i}", i) for i in range(100)),
    "replace a later value": lambda d: d.__setitem__("c", ["replaced"]),
    "replace an earlier value": lambda d: d.__setitem__("a", ["replaced"]),
    "popitem": lambda d: d.popitem(),
    "replace everything by non-str keys": lambda d: (d.clear(), d.update({1: "x", 2.5: "y"})),
    "raise": lambda d: (_ for _ in ()).throw(HookError("from the hook")),
}


@pytest.mark.parametrize("action", DICT_ACTIONS.values(), ids=DICT_ACTIONS.keys())
@pytest.mark.parametrize("keys", ["str", "mixed", "subclass", "record"])
def test_hook_mutating_the_dict_being_walked(action, keys):
    class Sub(dict):
        pass

    class Record:
        pass

    def make():
        d = {"a": 0, "b": None, "c": [2, {"x": 3}]}
        if keys == "mixed":
            d[7] = "int key"  # json's general path: coerced keys
        elif keys == "subclass":
            d = Sub(d)
        if keys == "record":
            record = Record()
            record.__dict__.update(d)
            record.b = Mutator(record.__dict__, action, result={"n": [1, 2]})
            return [record, record.__dict__]
        d["b"] = Mutator(d, action, result={"n": [1, 2]})
        return d

    check_all_ways(make)


def test_hook_mutating_an_enclosing_dict_and_a_sibling():
    def make():
        inner = {"p": 1, "q": 2}
        outer = {"first": inner, "second": None, "third": inner}
        outer["second"] = Mutator(outer, lambda d: (d.pop("third"), inner.clear(),
                                                    d.__setitem__(0, inner)))
        inner["q"] = Mutator(inner, lambda d: outer.update(fourth=d))
        return outer

    check_all_ways(make)


def test_nested_dicts_that_grow_the_snapshot_stack_mid_walk():
    """A hook's result holds a dict large enough to move the walker's stack of held items
    while the enclosing dicts still walk theirs."""
    def make():
        big = {f"k{i}": i for i in range(20000)}
        return {"a": 1, "b": Mutator(None, lambda _: None, result=[big, {"c": big}]), "z": 2}

    check_all_ways(make)


def test_an_error_mid_dict_releases_every_held_item():
    values = [object() for _ in range(5)]
    d = {f"k{i}": [v] for i, v in enumerate(values)}
    d["k2"] = [values[2], 1j]  # not serializable: raises in the middle
    before = [sys.getrefcount(v) for v in values]
    for _ in range(100):
        with pytest.raises(TypeError):
            bulkwire.dumps(d, default=None)
    assert [sys.getrefcount(v) for v in values] == before


def test_values_dropped_from_the_dict_live_until_the_dict_is_written():
    """json holds the items it took until the dict is done: a value the hook drops from the
    dict is not finalized before then (its __del__ would otherwise run mid-walk)."""
    log = []

    class Noisy:
        def __init__(self, name):
            self.name = name

        def to_json(self):
            return self.name

        def __del__(self):
            log.append(f"del {self.name}")

    def run(encode, default):
        log.clear()
        d = {"a": None, "b": Noisy("b"), "c": Noisy("c")}
        d["a"] = Mutator(d, lambda d: (log.append("hook"), d.clear()), result="a")
        out = encode(d, default)
        del d
        return out, list(log)

    ours = run(lambda d, h: bulkwire.dumps(d, default=h), bulkwire.ENTITY)
    reference = run(lambda d, h: oracle_bytes(d, h), entity_default)
    assert ours == reference


# ---------------------------------------------------------------- lists mutated mid-walk

LIST_ACTIONS = {
    "append": lambda lst: lst.append("appended"),
    "extend": lambda lst: lst.extend(range(5)),
    "clear": list.clear,
    "pop last": lambda lst: lst.pop(),
    "insert before": lambda lst: lst.insert(0, "inserted"),
    "delete first": lambda lst: lst.__delitem__(0),
    "refill": lambda lst: lst.__setitem__(slice(None), [1.5, 2.5, 3.5]),
    "reverse": list.reverse,
    "replace next": lambda lst: lst.__setitem__(-1, {"x": "replaced"}),
}


@pytest.mark.parametrize("action", LIST_ACTIONS.values(), ids=LIST_ACTIONS.keys())
@pytest.mark.parametrize("container", ["list", "list subclass", "dict value"])
def test_hook_mutating_the_list_being_walked(action, container):
    class Sub(list):
        pass

    def make():
        lst = [0.5, None, 1.5, 2.5, "s", [3]]
        lst[1] = Mutator(lst, action, result=[lst[0]])
        if container == "list subclass":
            sub = Sub(lst)
            sub[1] = Mutator(sub, action)
            return [sub, sub]
        if container == "dict value":
            return {"l": lst, "again": lst}
        return lst

    check_all_ways(make)


# ---------------------------------------------------------------- sequence subclasses

class IterList(list):
    def __iter__(self):
        return iter(["EVIL"])


class ReversedList(list):
    def __iter__(self):
        return reversed(list(list.__iter__(self)))


class LyingList(list):
    def __len__(self):
        return 100

    def __getitem__(self, index):
        return "never"


class SelfList(list):
    def __iter__(self):
        return iter([self])


class RaisingList(list):
    def __iter__(self):
        raise HookError("no iteration")


class NotIterator(list):
    def __iter__(self):
        return 42


class IterTuple(tuple):
    def __iter__(self):
        return iter(("T", *tuple.__iter__(self)))


class LyingTuple(tuple):
    def __len__(self):
        return 0

    def __getitem__(self, index):
        return "never"


Point = collections.namedtuple("Point", "x y")


class IterPoint(Point):
    def __iter__(self):
        return iter(("swapped", self.y, self.x))


SEQUENCES = {
    "__iter__ override": lambda: IterList([1, 2]),
    "reversed": lambda: ReversedList([1, [2.5, 3.5], {"k": ReversedList([4, 5])}]),
    "__len__/__getitem__ overrides": lambda: LyingList([1, 2]),
    "empty storage, items from __iter__": lambda: IterList(),
    "iterates to itself": lambda: SelfList([1]),
    "__iter__ raises": lambda: RaisingList([1]),
    "__iter__ returns a non-iterator": lambda: NotIterator([1]),
    "tuple __iter__ override": lambda: IterTuple((1, 2)),
    "tuple __len__/__getitem__": lambda: LyingTuple((1, 2)),
    "namedtuple": lambda: Point(1, [2, 3]),
    "namedtuple __iter__": lambda: IterPoint(1, 2),
    "nested in a dict": lambda: {"a": IterList([1]), "b": (IterTuple(()), Point(0.5, "x"))},
    "mutated while iterated": lambda: _self_mutating_subclass(),
}


def _self_mutating_subclass():
    sub = ReversedList([0, 1, 2])
    sub[1] = Mutator(sub, lambda s: s.append("late"))
    return [sub, sub]


@pytest.mark.parametrize("make", SEQUENCES.values(), ids=SEQUENCES.keys())
def test_sequence_subclasses_are_iterated_as_json_iterates_them(make):
    check_all_ways(make)
    check_store({"seq": make()}, {"seq": make()})


def test_exact_lists_and_tuples_are_still_read_from_storage():
    assert bulkwire.dumps([1, (2.5, "x"), [None]]) == b'[1, [2.5, "x"], [null]]'
    assert bulkwire.dumps(IterList([1, 2])) == b'["EVIL"]' == oracle_bytes(IterList([1, 2]))


# ---------------------------------------------------------------- NumPy object arrays

ARRAY_ACTIONS = {
    "shrink to nothing": lambda a: a.resize(0, refcheck=False),
    "shrink": lambda a: a.resize(1, refcheck=False),
    "grow": lambda a: a.resize(a.size + 1000, refcheck=False),
    "refill": lambda a: a.fill("filled"),
    "replace next": lambda a: a.__setitem__(-1, {"x": 1}),
}


@pytest.mark.parametrize("action", ARRAY_ACTIONS.values(), ids=ARRAY_ACTIONS.keys())
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_object_array_changed_by_its_own_element_hook(action, shape):
    """The round trip takes arr.tolist() when it reaches the array: what a hook does to the
    array after that is not written, and the walker holds no pointer into its data."""
    def make():
        arr = np.empty(shape, dtype=object)
        for i in range(arr.size):
            arr.flat[i] = {"i": i, "s": "x" * i}
        arr.flat[0] = Mutator(arr, action, result=[0.5])
        return {"arr": arr, "after": [1, 2], "again": arr}

    check_all_ways(make)


def test_object_array_hooks_that_resize_another_array_being_walked():
    def make():
        floats = np.arange(6, dtype=np.float64) / 7
        objects = np.empty(3, dtype=object)
        objects[0] = Mutator(floats, lambda a: a.resize(1000, refcheck=False))
        objects[1] = floats
        objects[2] = Mutator(objects, lambda a: a.resize(0, refcheck=False))
        return [objects, floats, objects]

    check_all_ways(make)


def test_other_dtypes_and_zero_dim_arrays_match_tolist():
    values = [np.array(["a", "bc"]), np.array([[1, 2]], dtype="datetime64[D]"),
              np.array(5, dtype=object), np.array(2.5), np.array([b"x"], dtype="S2"),
              np.array([None, "s", 3], dtype=object)]
    for value in values:
        assert outcome(lambda: bulkwire.dumps(value)) == outcome(lambda: oracle_bytes(value))


def test_ndarray_subclass_is_encoded_through_its_tolist():
    class Masked(np.ndarray):
        def tolist(self):
            return ["masked"] * self.size

    arr = np.arange(3, dtype=np.float32).view(Masked)
    assert bulkwire.dumps(arr) == oracle_bytes(arr) == b'["masked", "masked", "masked"]'
    with pytest.warns(PendingDeprecationWarning):
        matrix = np.matrix([[1, 2], [3, 4]])
    assert bulkwire.dumps(matrix) == oracle_bytes(matrix)


# ---------------------------------------------------------------- the C stack

STACK_CHILD = textwrap.dedent(r"""
    import json, sys, threading
    import numpy as np
    import bulkwire
    sys.path.insert(0, sys.argv[1])
    from oracle import entity_default

    sys.setrecursionlimit(20000)  # the references below run in the 8 MiB main thread

    class Node:
        def __init__(self, child):
            self.child = child

    class Hooked:
        def __init__(self, child):
            self.child = child

        def to_json(self):
            # Python work in the hook: C calling Python calling C, a few levels deep
            text = json.dumps({"k": sorted(map(str, range(5)), key=lambda s: -int(s))})
            return [self.child, len(text)]

    class Opaque:
        def __init__(self, child):
            self.child = child

    def opaque_default(o):
        if isinstance(o, Opaque):
            return {"c": o.child}
        return entity_default(o)

    class Sub(list):
        pass

    def object_array(child):
        arr = np.empty(1, dtype=object)
        arr[0] = child
        return arr

    SHAPES = {
        "lists": (lambda c: [c], None),
        "dicts": (lambda c: {"k": c}, None),
        "list subclasses": (lambda c: Sub([c]), None),
        "entities": (Node, None),
        "to_json hooks": (Hooked, None),
        "default= hook": (Opaque, opaque_default),
        "object arrays": (object_array, None),
    }
    DEPTHS = [1, 10, 100, 300, 1000, 2100, 5000]
    SIZES = [int(s) for s in sys.argv[2].split(",")]

    failures = []
    for shape, (wrap, hook) in SHAPES.items():
        for depth in DEPTHS:
            if shape == "object arrays" and depth > 2100:
                continue  # NumPy frees nested object arrays recursively: 5000 overflow it
            graph = 1
            for _ in range(depth):
                graph = wrap(graph)
            # past MAX_DEPTH every shape raises; json itself would overflow the main thread
            expected = None
            if depth <= 1000:
                expected = json.dumps(json.loads(json.dumps(
                    graph, default=hook or entity_default))).encode()
            for size in SIZES:
                got = {}

                def run():
                    try:
                        got["out"] = bulkwire.dumps(graph, default=hook or bulkwire.ENTITY)
                    except RecursionError as exc:
                        got["out"] = exc

                threading.stack_size(size)
                thread = threading.Thread(target=run)
                thread.start()
                thread.join()
                out = got["out"]
                if isinstance(out, RecursionError):
                    # shallow graphs must fit a 1 MiB stack, in both builds
                    if size >= 1 << 20 and depth <= 100:
                        failures.append(f"{shape} depth {depth} stack {size}: {out}")
                elif expected is None or out != expected:
                    failures.append(f"{shape} depth {depth} stack {size}: {out[:60]!r}")
            # the graph is freed here, in the main thread (NumPy frees nested object arrays
            # recursively, which a small stack would not hold)
    print("\n".join(failures) or "ok")
""")


@pytest.mark.parametrize("sizes", [[64 << 10, 128 << 10], [256 << 10, 1 << 20]],
                         ids=["64-128KiB", "256KiB-1MiB"])
def test_no_nesting_overflows_a_small_thread_stack(sizes):
    """Threads with small stacks: every graph is encoded exactly or raises RecursionError,
    and the process survives (run in a child, so a crash fails the test, not the run)."""
    # the child imports the bulkwire under test: the checkout's or the installed one
    package_parent = str(pathlib.Path(bulkwire.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.run([sys.executable, "-c", STACK_CHILD, str(ROOT / "tests"),
                            ",".join(map(str, sizes))],
                           capture_output=True, text=True, env=env, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip() == "ok", child.stdout[-3000:]


def test_stack_recursion_error_names_the_cause():
    got = {}
    deep = 1
    for _ in range(3000):
        deep = [deep]

    def run():
        try:
            bulkwire.dumps(deep)
        except RecursionError as exc:
            got["error"] = str(exc)

    threading.stack_size(64 << 10)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(0)
    assert got["error"].startswith("maximum recursion depth exceeded while encoding a JSON object")
    assert "stack" in got["error"]


def test_max_depth_still_bounds_the_main_thread():
    deep = []
    for _ in range(bulkwire.MAX_DEPTH - 1):
        deep = [deep]
    assert bulkwire.dumps(deep).count(b"[") == bulkwire.MAX_DEPTH  # the innermost is empty
    with pytest.raises(RecursionError, match=r"maximum nesting depth \(2048\)"):
        bulkwire.dumps([[deep]])


# ---------------------------------------------------------------- one Encoder, many threads

def test_one_encoder_shared_by_threads_and_reentered_from_hooks():
    """An Encoder holds only its options: threads may share it, hooks may call it again
    (each call has its own state), and the GIL changing hands inside a hook changes nothing."""
    encoder = bulkwire.Encoder()

    class Slow:
        def __init__(self, n):
            self.n = n

        def to_json(self):
            time.sleep(0)  # let another thread run mid-encode
            inner = encoder.encode({"n": self.n, "big": ["x" * 100] * (50 if self.n else 0)})
            return [inner.decode(), Slow(self.n - 1) if self.n else None]

    def reference_default(o):
        if isinstance(o, Slow):
            inner = oracle_bytes({"n": o.n, "big": ["x" * 100] * (50 if o.n else 0)})
            return [inner.decode(), Slow(o.n - 1) if o.n else None]
        return entity_default(o)

    expected = oracle_bytes({"doc": Slow(3), "v": [0.5] * 10}, reference_default)
    results, errors = [], []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def run():
        try:
            for _ in range(50):
                results.append(encoder.encode({"doc": Slow(3), "v": [0.5] * 10}))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    assert len(results) == 200 and set(results) == {expected}


# ---------------------------------------------------------------- random hostile graphs

@given(st.binary(max_size=400))
def test_random_hostile_graphs_match_the_round_trip(data):
    fuzz_dumps.test_one_input(data)



# ---------------------------------------------------------------- plain classes changed between stores

def stored_bodies(documents):
    """The body BulkWriter.store writes for ``documents`` (a list of (id, entity)), each
    store's outcome, and the writer's later store of a dict (the writer goes on)."""
    writer = bulkwire.BulkWriter()
    outcomes = [outcome(lambda: writer.store(entity, id=doc_id)) for doc_id, entity in documents]
    writer.store({"after": 1}, id="after/1")
    writer.close()
    return outcomes, json.loads(b"".join(bytes(piece) for piece in writer.pieces()))


def expected_bodies(documents):
    """The round trip's commands for ``documents`` (the reference, entity by entity, in the
    state each entity is in when its turn comes), and the outcomes BulkWriter.store gives."""
    outcomes, commands = [], []
    for doc_id, entity in documents:
        result = outcome(lambda: round_trip(entity))
        if result[1] is not None:
            outcomes.append(result)
            continue
        body = {k: v for k, v in result[0].items() if k not in ("Id", "@metadata")}
        cls = type(entity)
        body["@metadata"] = {"@collection": collection_name(cls),
                             "Raven-Python-Type": f"{cls.__module__}.{cls.__name__}"}
        commands.append({"Id": doc_id, "Type": "PUT", "Document": body})
        outcomes.append((doc_id, None))
    commands.append({"Id": "after/1", "Type": "PUT", "Document": {
        "after": 1, "@metadata": {"@collection": collection_name(dict),
                                  "Raven-Python-Type": "builtins.dict"}}})
    return outcomes, commands


def stores_interleaved_with(make_class, changes):
    """Stores an instance of a fresh class before and after each change of ``changes`` (each
    a function of the class, run between two stores): ours and the reference, each on its
    own class and instances, must agree store by store."""
    def run(store_all):
        cls = make_class()
        steps = []
        for i, change in enumerate([None, *changes]):
            if change is not None:
                steps.append(("change", change))
            steps.append(("store", f"docs/{i}"))
        return store_all(cls, steps)

    def ours(cls, steps):
        writer = bulkwire.BulkWriter()
        outcomes = []
        for kind, value in steps:
            if kind == "change":
                value(cls)
            else:
                outcomes.append(outcome(lambda: writer.store(cls(value), id=value)))
        writer.close()
        return outcomes, json.loads(b"".join(bytes(piece) for piece in writer.pieces()))

    def reference(cls, steps):
        outcomes, commands = [], []
        for kind, value in steps:
            if kind == "change":
                value(cls)
            else:
                got, expected = expected_bodies([(value, cls(value))])
                outcomes.append(got[0])
                commands.extend(expected[:-1])
        return outcomes, commands

    assert run(ours) == run(reference)


def plain_class():
    class Person:
        def __init__(self, name):
            self.Name = name
            self.Age = 42

    return Person


def _set(name, value):
    return lambda cls: setattr(cls, name, value)


def _delete(name):
    return lambda cls: delattr(cls, name)


@pytest.mark.parametrize("changes", [
    pytest.param([_set("to_json", lambda self: {"Json": self.Name}), _delete("to_json")],
                 id="to_json added then removed"),
    pytest.param([_set("to_json", lambda self: {"Json": 1}), _set("to_json", "not callable"),
                  _delete("to_json")], id="to_json replaced by a non-callable"),
    pytest.param([_set("__getattribute__", lambda self, name: (lambda: {"Via": "getattribute"})
                       if name == "to_json" else object.__getattribute__(self, name)),
                  _delete("__getattribute__")], id="__getattribute__ added then removed"),
    pytest.param([_set("__getattr__", lambda self, name: (lambda: {"Via": "getattr"})
                       if name == "to_json" else object.__getattribute__(self, name)),
                  _delete("__getattr__")], id="__getattr__ added then removed"),
    pytest.param([_set("Id", property(lambda self: "ignored/1"))], id="an Id property"),
])
def test_a_class_changed_between_stores_is_judged_again(changes):
    """A writer remembers that a class is plain (its instances written from their __dict__
    with no lookup of to_json); any change of the class, between two stores, is seen at the
    next store, as the round trip sees it."""
    stores_interleaved_with(plain_class, changes)


def test_a_base_class_changed_between_stores_is_seen_by_its_subclass():
    def make():
        class Base:
            pass

        class Person(Base):
            def __init__(self, name):
                self.Name = name

        return Person

    def on_base(change):
        return lambda cls: change(cls.__mro__[1])

    class WithToJson:
        def to_json(self):
            return {"Swapped": 1}

    def swap_base(cls):
        cls.__bases__ = (WithToJson,)

    stores_interleaved_with(make, [on_base(_set("to_json", lambda self: {"FromBase": 1})),
                                   on_base(_delete("to_json")), swap_base])


def test_an_instances_own_to_json_and_odd_members_are_seen():
    """Instances of one plain class: one with a to_json of its own (callable, then not), one
    with a non-str key and one with an empty __dict__, stored in turn: each as the round
    trip writes it."""
    def documents():
        Person = plain_class()
        own = Person("own")
        own.to_json = lambda: {"Own": 1}
        not_callable = Person("not callable")
        not_callable.to_json = 5
        odd_key = Person("odd key")
        odd_key.__dict__[1] = "one"
        empty = Person("empty")
        empty.__dict__.clear()
        return [(f"docs/{i}", e) for i, e in enumerate(
            [Person("a"), own, Person("b"), not_callable, odd_key, Person("c"), empty,
             Person("d")])]

    assert stored_bodies(documents()) == expected_bodies(documents())


@pytest.mark.parametrize("action", [
    pytest.param(lambda e: e.__dict__.update(Added=1), id="adds a member"),
    pytest.param(lambda e: e.__dict__.pop("Name"), id="removes a member"),
    pytest.param(lambda e: e.__dict__.clear(), id="clears the members"),
    pytest.param(lambda e: setattr(e, "__dict__", {"Other": 2}), id="replaces __dict__"),
    pytest.param(lambda e: setattr(type(e), "to_json", lambda self: {"Late": 1}),
                 id="gives the class a to_json"),
])
def test_a_hook_that_changes_the_entity_during_its_walk(action):
    """A member's to_json changes the entity being walked (its __dict__, or its class): the
    body is the round trip's, and so is the next store of the same entity."""
    def documents():
        Person = plain_class()
        entity = Person("a")
        entity.Hook = Mutator(entity, action, result="hooked")
        entity.Tail = "t"
        return [("docs/0", entity), ("docs/1", entity), ("docs/2", Person("b"))]

    assert stored_bodies(documents()) == expected_bodies(documents())
