"""Hand-made Arrow C Data Interface structs (ctypes), for hostile-input tests and fuzz targets.

A :class:`Node` describes one array: its format, lengths, buffers (bytes, or ``None`` for a
NULL pointer), children and dictionary, plus deliberate defects (a NULL format, a released
child, mismatched child counts, NULL pointer arrays). :class:`Exported` lays a Node out in
memory and offers it through ``__arrow_c_array__`` as any non-pyarrow producer would:

* every buffer is its own ``malloc`` of exactly the bytes given, so under AddressSanitizer a
  read one byte past what the producer handed over is reported;
* every release callback is a ctypes function (Python code, as with a ctypes or cffi
  producer) that counts its calls, so a test can check "exactly once";
* ``free()`` returns the memory once the consumer is done.

:func:`from_pyarrow` copies a pyarrow array's buffers into a Node (the sizes pyarrow's
buffers have, so the copy is exact), which a test or fuzz target can then mutate.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Callable, List, Optional


class ArrowSchema(ctypes.Structure):
    pass


class ArrowArray(ctypes.Structure):
    pass


class ArrowArrayStream(ctypes.Structure):
    pass


ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)), ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p)]
ArrowArray._fields_ = [
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)), ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p)]
GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream), ctypes.POINTER(ArrowSchema))
GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream), ctypes.POINTER(ArrowArray))
GET_LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ArrowArrayStream))
ArrowArrayStream._fields_ = [
    ("get_schema", ctypes.c_void_p), ("get_next", ctypes.c_void_p),
    ("get_last_error", ctypes.c_void_p), ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p)]

RELEASE_SCHEMA = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
RELEASE_ARRAY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
RELEASE_STREAM = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArrayStream))

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


@dataclass
class Node:
    """One array node and the defects to give it."""

    format: Optional[bytes]
    length: int = 0
    buffers: List[Optional[bytes]] = field(default_factory=list)
    children: List["Node"] = field(default_factory=list)
    name: Optional[bytes] = b""
    null_count: int = 0
    offset: int = 0
    dictionary: Optional["Node"] = None
    # defects
    schema_n_children: Optional[int] = None  # the schema claims this many children
    null_buffers_pointer: bool = False      # buffers == NULL (n_buffers unchanged)
    null_children_pointer: bool = False     # children == NULL in the array
    null_child: Optional[int] = None        # children[i] == NULL in the array
    released: bool = False                  # array->release == NULL
    schema_released: bool = False           # schema->release == NULL
    array_dictionary_only: bool = False     # a dictionary in the array, not in the schema


def _malloc_copy(data: bytes) -> int:
    ptr = _libc.malloc(len(data))
    if not ptr:
        raise MemoryError
    if data:
        ctypes.memmove(ptr, data, len(data))
    return ptr


class Exported:
    """A Node laid out as C structs; ``__arrow_c_array__`` hands out capsules of them.

    ``on_release``: called (from the release callback, so from inside the consumer) each
    time a root struct is released, e.g. to run Python while the consumer holds an error.
    """

    def __init__(self, node: Node, on_release: Optional[Callable[[], None]] = None):
        self.node = node
        self.on_release = on_release
        self.released = {"schema": 0, "array": 0}
        self._mallocs: list = []
        self._keep: list = []  # ctypes objects that must outlive the consumer
        self._release_schema = RELEASE_SCHEMA(self._on_schema_release)
        self._release_array = RELEASE_ARRAY(self._on_array_release)
        self._noop_schema = RELEASE_SCHEMA(lambda p: None)
        self._noop_array = RELEASE_ARRAY(lambda p: None)
        self.schema, self.array = self._build(node, root=True)
        self._handed_out = False

    # the callbacks a consumer calls: they must leave release == NULL
    def _on_schema_release(self, p) -> None:
        self.released["schema"] += 1
        p[0].release = None
        if self.on_release is not None:
            self.on_release()

    def _on_array_release(self, p) -> None:
        self.released["array"] += 1
        p[0].release = None
        if self.on_release is not None:
            self.on_release()

    def _fn(self, cb) -> int:
        return ctypes.cast(cb, ctypes.c_void_p).value

    def _build(self, node: Node, root: bool):
        schema, array = ArrowSchema(), ArrowArray()
        self._keep += [schema, array]
        schema.format = node.format
        schema.name = node.name
        schema.flags = 2
        n = len(node.children)
        schema.n_children = n if node.schema_n_children is None else node.schema_n_children
        array.n_children = n
        array.length, array.null_count, array.offset = node.length, node.null_count, node.offset
        array.n_buffers = len(node.buffers)
        if node.buffers and not node.null_buffers_pointer:
            ptrs = (ctypes.c_void_p * len(node.buffers))()
            for i, b in enumerate(node.buffers):
                if b is not None:
                    ptrs[i] = _malloc_copy(b)
                    self._mallocs.append(ptrs[i])
            self._keep.append(ptrs)
            array.buffers = ctypes.cast(ptrs, ctypes.POINTER(ctypes.c_void_p))
        if n:
            # the schema's child array is as long as the schema says (never read past it)
            sn = max(n, schema.n_children)
            schema_children = (ctypes.POINTER(ArrowSchema) * sn)()
            array_children = (ctypes.POINTER(ArrowArray) * n)()
            for i, child in enumerate(node.children):
                cs, ca = self._build(child, root=False)
                schema_children[i] = ctypes.pointer(cs)
                if node.null_child != i:
                    array_children[i] = ctypes.pointer(ca)
            for i in range(n, sn):  # extra children the schema claims: NULL
                schema_children[i] = ctypes.POINTER(ArrowSchema)()
            self._keep += [schema_children, array_children]
            schema.children = ctypes.cast(schema_children, ctypes.POINTER(ctypes.POINTER(ArrowSchema)))
            if not node.null_children_pointer:
                array.children = ctypes.cast(array_children, ctypes.POINTER(ctypes.POINTER(ArrowArray)))
        elif schema.n_children > 0:
            schema_children = (ctypes.POINTER(ArrowSchema) * schema.n_children)()
            self._keep.append(schema_children)
            schema.children = ctypes.cast(schema_children, ctypes.POINTER(ctypes.POINTER(ArrowSchema)))
        if node.dictionary is not None:
            ds, da = self._build(node.dictionary, root=False)
            if not node.array_dictionary_only:
                schema.dictionary = ctypes.pointer(ds)
            array.dictionary = ctypes.pointer(da)
        if root:
            schema.release = None if node.schema_released else self._fn(self._release_schema)
            array.release = None if node.released else self._fn(self._release_array)
        else:
            schema.release = None if node.schema_released else self._fn(self._noop_schema)
            array.release = None if node.released else self._fn(self._noop_array)
        return schema, array

    def capsules(self):
        """(schema capsule, array capsule) over the root structs (no destructors: the
        holder frees the memory in free())."""
        return (_capsule_new(ctypes.addressof(self.schema), b"arrow_schema", None),
                _capsule_new(ctypes.addressof(self.array), b"arrow_array", None))

    def __arrow_c_array__(self, requested_schema=None):
        return self.capsules()

    def free(self) -> None:
        for ptr in self._mallocs:
            _libc.free(ptr)
        self._mallocs = []


class Stream:
    """A hand-made ArrowArrayStream over Exported arrays that share one schema (the first's)."""

    def __init__(self, arrays: List[Exported], fail_at: Optional[int] = None,
                 on_release: Optional[Callable[[], None]] = None):
        self.arrays = arrays
        self.fail_at = fail_at
        self.on_release = on_release
        self.position = 0
        self.released = 0
        self._message = ctypes.create_string_buffer(b"the producer failed")
        message = ctypes.addressof(self._message)
        self._callbacks = (GET_SCHEMA(self._get_schema), GET_NEXT(self._get_next),
                           GET_LAST_ERROR(lambda s: message),
                           RELEASE_STREAM(self._release))
        self.stream = ArrowArrayStream()
        for name, cb in zip(("get_schema", "get_next", "get_last_error", "release"), self._callbacks):
            setattr(self.stream, name, ctypes.cast(cb, ctypes.c_void_p).value)

    def _get_schema(self, s, out) -> int:
        ctypes.memmove(out, ctypes.addressof(self.arrays[0].schema), ctypes.sizeof(ArrowSchema))
        return 0

    def _get_next(self, s, out) -> int:
        if self.fail_at is not None and self.position == self.fail_at:
            return 5
        if self.position == len(self.arrays):
            out[0].release = None
            return 0
        exported = self.arrays[self.position]
        self.position += 1
        ctypes.memmove(out, ctypes.addressof(exported.array), ctypes.sizeof(ArrowArray))
        return 0

    def _release(self, s) -> None:
        self.released += 1
        s[0].release = None
        if self.on_release is not None:
            self.on_release()

    def __arrow_c_stream__(self, requested_schema=None):
        return _capsule_new(ctypes.addressof(self.stream), b"arrow_array_stream", None)


def struct_pointers(obj):
    """(ArrowSchema, ArrowArray) views of the structs inside obj.__arrow_c_array__()'s capsules,
    and the capsules (keep them alive while the views are used)."""
    sc, ac = obj.__arrow_c_array__()
    schema = ArrowSchema.from_address(_capsule_pointer(sc, b"arrow_schema"))
    array = ArrowArray.from_address(_capsule_pointer(ac, b"arrow_array"))
    return schema, array, (sc, ac)


def from_pyarrow(obj) -> Node:
    """A Node holding copies of the buffers of a pyarrow Array or RecordBatch (as exported
    through its capsules), each copy exactly as large as pyarrow's buffer: a buffer is
    found by its address among the pyarrow buffers of the object; one not found (a shared
    empty placeholder) is copied as 0 bytes."""
    import pyarrow as pa

    arrays = obj.columns if isinstance(obj, pa.RecordBatch) else [obj]
    sizes = {}
    for a in arrays:
        for b in a.buffers():
            if b is not None:
                sizes[b.address] = max(sizes.get(b.address, 0), b.size)
    schema, array, keep = struct_pointers(obj)

    def walk(s, a) -> Node:
        buffers = []
        for i in range(a.n_buffers):
            ptr = a.buffers[i]
            buffers.append(None if not ptr else ctypes.string_at(ptr, sizes.get(ptr, 0)))
        return Node(format=s.format, name=s.name, length=a.length, null_count=a.null_count,
                    offset=a.offset, buffers=buffers,
                    children=[walk(s.children[i][0], a.children[i][0]) for i in range(a.n_children)],
                    dictionary=walk(s.dictionary[0], a.dictionary[0]) if a.dictionary else None)

    node = walk(schema, array)
    del keep
    return node
