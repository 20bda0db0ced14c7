"""Arrow IPC files read through a descriptor, never through a memory map.

A file cut short under a memory map kills the process (SIGBUS) at the first access past its
new end, so an IPC file is read here with positioned reads (:class:`._source.SourceFile`):

- its footer and each record batch's metadata message are parsed once, by a FlatBuffer
  reader that checks every offset against the bytes it has, so every row's place in the file
  is known without reading the rows;
- a lookup (:meth:`IpcFile.take`) of a column whose layout is covered reads only the bytes
  of the rows it takes: fixed-width values (integers, floats, decimals, dates and times,
  fixed-size binary, fixed-size lists of those: a vector column), strings and binaries, and
  lists of fixed-width values. Their offsets and validity bitmaps are read once per record
  batch and checked once: offsets non-decreasing and within the values they index (the one
  rule: pyarrow's full validation), so no row reads bytes of another row or outside its
  buffer;
- every other column (dictionaries, structs, unions, views, nested lists), and every batch
  of a file with compressed bodies, is read by pyarrow's IPC reader a record batch at a
  time (its columns only), each batch validated in full before anything reads it; validated
  batches are kept up to a bounded size, so a repeated lookup does not pay again;
- loads (:meth:`IpcFile.batches`) read whole record batches the same way.

A file shorter than it was when opened raises :class:`~bulkwire.errors.MalformedFileError`
saying it changed; a malformed footer or message raises it naming the file and what is
wrong.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from ._arrow_arrays import numeric_array


_MAGIC = b"ARROW1"
_CONTINUATION = 0xFFFFFFFF
_RECORD_BATCH = 3  # MessageHeader.RecordBatch

#: Record batches read whole (columns the lookup reads whole) are kept, validated, up to
#: this many bytes, the least recently used dropped first.
WHOLE_BATCH_CACHE_BYTES = 64 << 20


class _Bad(Exception):
    """A FlatBuffer offset or length outside the bytes it lives in."""


_STRUCTS = {fmt: struct.Struct(fmt) for fmt in ("<I", "<i", "<H", "<B", "<q")}


class _Flat:
    """Bounds-checked reads of one FlatBuffer (an IPC footer or message): every position is
    checked against the buffer before it is read."""

    __slots__ = ("data", "size")

    def __init__(self, data: Any) -> None:
        self.data = data
        self.size = len(data)

    def _unpack(self, fmt: str, pos: int) -> Any:
        unpacker = _STRUCTS[fmt]
        if pos < 0 or pos + unpacker.size > self.size:
            raise _Bad(f"{unpacker.size} bytes at {pos} outside the {self.size} of the metadata")
        return unpacker.unpack_from(self.data, pos)[0]

    def root(self) -> int:
        return self._unpack("<I", 0)

    def _field(self, table: int, index: int) -> Optional[int]:
        """Where field ``index`` of the table at ``table`` is, or None when it is absent."""
        vtable = table - self._unpack("<i", table)
        size = self._unpack("<H", vtable)
        if size < 4 or size % 2:
            raise _Bad(f"vtable of {size} bytes")
        if 4 + 2 * index >= size:
            return None
        offset = self._unpack("<H", vtable + 4 + 2 * index)
        return table + offset if offset else None

    def scalar(self, table: int, index: int, fmt: str, default: Any) -> Any:
        at = self._field(table, index)
        return default if at is None else self._unpack(fmt, at)

    def table(self, table: int, index: int) -> Optional[int]:
        at = self._field(table, index)
        return None if at is None else at + self._unpack("<I", at)

    def _long_vector(self, table: int, index: int, per_item: int) -> tuple:
        """(where the values start, how many int64 values) of a vector of structs of
        ``per_item`` little-endian int64 fields (FieldNode, Buffer: 2; a vector of longs: 1);
        (0, 0) when the field is absent."""
        at = self._field(table, index)
        if at is None:
            return 0, 0
        vector = at + self._unpack("<I", at)
        count = self._unpack("<I", vector)
        if count * 8 * per_item > self.size - vector - 4:
            raise _Bad(f"a vector of {count} items runs past the metadata's end")
        return vector + 4, count * per_item

    def longs(self, table: int, index: int, per_item: int) -> np.ndarray:
        """That vector as an int64 array of ``per_item`` columns (for many items: the
        footer's blocks)."""
        start, count = self._long_vector(table, index, per_item)
        return np.frombuffer(self.data, dtype="<i8", count=count, offset=start) \
            .reshape(-1, per_item).astype(np.int64)

    def long_tuples(self, table: int, index: int, per_item: int) -> list:
        """That vector as a list of ``per_item``-tuples of ints (for a few items: a message's
        nodes and buffers, where NumPy's per-call cost would dominate)."""
        start, count = self._long_vector(table, index, per_item)
        values = struct.unpack_from(f"<{count}q", self.data, start)
        return [values[i:i + per_item] for i in range(0, count, per_item)]


_BLOCK = np.dtype([("offset", "<i8"), ("meta", "<i4"), ("pad", "<i4"), ("body", "<i8")])


class _Batch:
    """One record batch's metadata: where its body is, its length; on first use (``parse``)
    its field nodes (length, null count) and buffers (offset in the body, length) in the
    schema's depth-first order, the variadic buffer counts of its view columns, and whether
    its body is compressed."""

    __slots__ = ("flat", "header", "body", "body_length", "length", "nodes", "buffers",
                 "variadic", "compressed")

    def __init__(self, flat: _Flat, body: int, body_length: int) -> None:
        root = flat.root()
        if flat.scalar(root, 1, "<B", 0) != _RECORD_BATCH:
            raise _Bad("a record batch block holds another kind of message")
        if flat.scalar(root, 3, "<q", 0) != body_length:
            raise _Bad("the message's body length is not its block's")
        self.header = flat.table(root, 2)
        if self.header is None:
            raise _Bad("a record batch message without its header")
        self.length = flat.scalar(self.header, 0, "<q", 0)
        if self.length < 0:
            raise _Bad(f"a record batch of {self.length} rows")
        self.flat, self.body, self.body_length = flat, body, body_length
        self.nodes = None

    def parse(self) -> None:
        """Reads the nodes, buffers, variadic counts and compression (once)."""
        if self.nodes is not None:
            return
        flat, header = self.flat, self.header
        nodes, buffers = flat.long_tuples(header, 1, 2), flat.long_tuples(header, 2, 2)
        self.compressed = flat.table(header, 3) is not None
        self.variadic = [count for (count,) in flat.long_tuples(header, 4, 1)]
        if any(a < 0 or b < 0 for a, b in nodes) or any(a < 0 or b < 0 for a, b in buffers):
            raise _Bad("a negative length, null count, buffer offset or buffer length")
        if any(offset + length > self.body_length for offset, length in buffers):
            raise _Bad("a buffer outside the batch's body")
        self.buffers, self.nodes = buffers, nodes


# ------------------------------------------------------------------------------ layouts

def _layout_counts(pa: Any, t: Any) -> Optional[tuple]:
    """(field nodes, buffers, view columns) a field of type ``t`` takes in a record batch's
    metadata, its children included; None for a type whose layout is not known here (its
    file is then read by pyarrow's reader alone)."""
    if isinstance(t, pa.ExtensionType):
        return _layout_counts(pa, t.storage_type)
    children: list = []
    if pa.types.is_null(t):
        buffers = 0
    elif pa.types.is_dictionary(t):
        buffers = 2
    elif pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return (1, 2, 1)
    elif (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
          or pa.types.is_large_binary(t)):
        buffers = 3
    elif pa.types.is_fixed_size_list(t):
        buffers, children = 1, [t.value_type]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        buffers, children = 2, [t.value_field.type if pa.types.is_map(t) else t.value_type]
    elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        buffers, children = 3, [t.value_type]
    elif pa.types.is_struct(t):
        buffers, children = 1, [t.field(i).type for i in range(t.num_fields)]
    elif pa.types.is_union(t):
        buffers = 1 if t.mode == "sparse" else 2
        children = [t.field(i).type for i in range(t.num_fields)]
    elif pa.types.is_run_end_encoded(t):
        buffers, children = 0, [t.run_end_type, t.value_type]
    elif pa.types.is_boolean(t) or _byte_width(pa, t):
        buffers = 2
    else:
        return None
    nodes, views = 1, 0
    for child in children:
        counts = _layout_counts(pa, child)
        if counts is None:
            return None
        nodes, buffers, views = nodes + counts[0], buffers + counts[1], views + counts[2]
    return nodes, buffers, views


def _byte_width(pa: Any, t: Any) -> int:
    """Bytes per value of a fixed-width type of whole bytes (0 for any other)."""
    if pa.types.is_boolean(t) or pa.types.is_dictionary(t) or isinstance(t, pa.ExtensionType):
        return 0
    try:
        bits = t.bit_width
    except (ValueError, AttributeError):
        return 0
    return bits // 8 if bits and bits % 8 == 0 else 0


class _Chain:
    """A column read row by row: fixed_size_list levels (``sizes``, outermost first) over a
    fixed-width leaf of ``width`` bytes; a row is ``stride`` contiguous bytes of the leaf's
    values. ``types`` are the levels' types, the leaf's last."""

    def __init__(self, types: list, sizes: list, width: int) -> None:
        self.types, self.sizes, self.width = types, sizes, width
        self.stride = width * int(np.prod(sizes, dtype=np.int64))


def _chain(pa: Any, t: Any) -> Optional[_Chain]:
    types, sizes = [], []
    while pa.types.is_fixed_size_list(t):
        types.append(t)
        sizes.append(t.list_size)
        t = t.value_type
    width = _byte_width(pa, t)
    if not width or any(size < 1 for size in sizes):
        return None
    return _Chain(types + [t], sizes, width)


class _Gather:
    """How a column is read row by row: ``kind`` "chain" (a :class:`_Chain`), "bytes" (a
    string or binary; ``offset_width`` 4 or 8) or "list" (a list of a chain)."""

    def __init__(self, kind: str, arrow_type: Any, chain: Optional[_Chain] = None,
                 offset_width: int = 0) -> None:
        self.kind, self.type, self.chain, self.offset_width = kind, arrow_type, chain, \
            offset_width


def _gather_plan(pa: Any, t: Any) -> Optional[_Gather]:
    chain = _chain(pa, t)
    if chain is not None:
        return _Gather("chain", t, chain)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _Gather("bytes", t, offset_width=4)
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return _Gather("bytes", t, offset_width=8)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        chain = _chain(pa, t.value_type)
        if chain is not None:
            return _Gather("list", t, chain, 4 if pa.types.is_list(t) else 8)
    return None


class _Skeleton:
    """What a lookup needs of one column of one record batch, read and checked once:
    validity bitmaps (one per level, None where it has no nulls), offsets (bytes and lists),
    and where its values start in the file."""

    __slots__ = ("validity", "offsets", "values_at")


def _offsets_checked(pa: Any, raw: np.ndarray, width: int, length: int,
                     limit: int) -> np.ndarray:
    """The ``length + 1`` offsets (``width`` bytes each) in ``raw``, validated by pyarrow's
    full validation of a list of ``limit`` values with these offsets: non-decreasing, none
    negative or past ``limit``. ValueError saying so otherwise."""
    offsets = raw.view("<i4" if width == 4 else "<i8")[:length + 1]
    list_type = pa.list_(pa.null()) if width == 4 else pa.large_list(pa.null())
    check = pa.Array.from_buffers(list_type, length, [None, pa.py_buffer(offsets)],
                                  children=[pa.nulls(limit)])
    try:
        check.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"the offsets: {exc}") from None
    return offsets


def _bits(bitmap: Optional[np.ndarray], positions: np.ndarray) -> np.ndarray:
    """The validity bits at ``positions`` (all set without a bitmap)."""
    if bitmap is None:
        return np.ones(positions.size, dtype=bool)
    return ((bitmap[positions >> 3] >> (positions & 7).astype(np.uint8)) & 1).astype(bool)


class _Rows:
    """The rows of a lookup, by record batch: ``local`` rows of the batches ``batch_of``
    (sorted, no repeats); ``touched`` the batches, ``position`` each row's index in
    ``touched``, ``groups`` the indices of each touched batch's rows."""

    def __init__(self, batch_of: np.ndarray, local: np.ndarray) -> None:
        self.local = local
        self.cuts = np.flatnonzero(batch_of[1:] != batch_of[:-1]) + 1
        self.touched = batch_of[np.concatenate(([0], self.cuts))].tolist() if local.size else []
        position = np.zeros(local.size, dtype=np.intp)
        position[self.cuts] = 1
        self.position = np.cumsum(position)
        self._groups: Optional[list] = None

    @property
    def groups(self) -> list:
        if self._groups is None:
            self._groups = np.split(np.arange(self.local.size), self.cuts) if self.local.size \
                else []
        return self._groups


def _spans(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``arange(s, s + c)`` for each (s, c), concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64)


class IpcFile:
    """An Arrow IPC file open for lookups and loads, read through ``source`` (a
    :class:`._source.SourceFile`, which stays the caller's to close)."""

    def __init__(self, source: Any, pa: Any) -> None:
        self.source, self.path, self._pa = source, source.path, pa
        self._lock = threading.Lock()
        try:
            self._read_metadata()
            self._pyfile = source.python_file()
            reader = pa.ipc.open_file(self._pyfile)
            self.schema = reader.schema
            self.names = self.schema.names  # decoded now: pyarrow decodes names when asked
            if reader.num_record_batches != len(self._batches):
                raise _Bad(f"pyarrow finds {reader.num_record_batches} record batches, the "
                           f"footer {len(self._batches)}")
        except _Bad as exc:
            raise self.error(exc) from None
        except (pa.ArrowException, UnicodeDecodeError, OSError) as exc:
            raise self.error(exc) from exc
        #: rows of each record batch
        self.batch_rows = [b.length for b in self._batches]
        self._readers: dict = {}  # pyarrow readers by the column indices they read
        self._whole: OrderedDict = OrderedDict()  # (batch, columns) -> validated batch
        self._whole_bytes = 0
        self._skeletons: dict = {}  # (batch, column) -> _Skeleton
        counts = [_layout_counts(pa, f.type) for f in self.schema]
        self._starts = None
        if all(c is not None for c in counts):  # where each column's nodes and buffers start
            self._starts = np.cumsum([(0, 0, 0)] + [list(c) for c in counts],
                                     axis=0).tolist()
        self._plans = [_gather_plan(pa, f.type) if self._starts is not None else None
                       for f in self.schema]
        self._layout_ok: dict = {}  # batch -> whether its metadata matches the schema

    # -------------------------------------------------------------------- metadata

    def _read_metadata(self) -> None:
        size = self.source.size
        if size < 18:
            raise _Bad(f"{size} bytes: too short for an Arrow IPC file")
        tail = self.source.read(10, size - 10)
        if tail[4:] != _MAGIC:
            raise _Bad("no Arrow IPC footer at the end of the file")
        footer_length = struct.unpack_from("<i", tail)[0]
        footer_at = size - 10 - footer_length
        if footer_length <= 0 or footer_at < 8:
            raise _Bad(f"footer of {footer_length} bytes does not fit the file")
        footer = _Flat(self.source.read(footer_length, footer_at))
        # Block {offset: long, metaDataLength: int, (4 bytes of padding), bodyLength: long}
        blocks = footer.longs(footer.root(), 3, 3)
        offsets, bodies = blocks[:, 0], blocks[:, 2]
        metas = (blocks[:, 1] << 32) >> 32  # the int32 in the low half
        bad = (offsets < 8) | (metas < 8) | (bodies < 0) | (offsets + metas + bodies > footer_at)
        if bad.any():
            i = int(np.argmax(bad))
            raise _Bad(f"record batch {i}: block at {offsets[i]} ({metas[i]} + {bodies[i]} "
                       f"bytes) outside the file's body")
        # every batch's metadata message, in one call (the footer's offsets are checked)
        from . import _core

        try:
            data = memoryview(_core.read_ranges(self.source.fd, size, offsets, metas))
        except (ValueError, OSError) as exc:
            raise self.error(exc) from exc
        self._batches = []
        at = 0
        for i, (offset, meta, body) in enumerate(zip(offsets.tolist(), metas.tolist(),
                                                     bodies.tolist())):
            message = data[at:at + meta]
            at += meta
            if _STRUCTS["<I"].unpack_from(message)[0] == _CONTINUATION:
                length, start = _STRUCTS["<i"].unpack_from(message, 4)[0], 8
            else:  # the format before the continuation marker
                length, start = _STRUCTS["<i"].unpack_from(message)[0], 4
            if length <= 0 or start + length > meta:
                raise _Bad(f"record batch {i}: metadata of {length} bytes in a block of {meta}")
            try:
                self._batches.append(_Batch(_Flat(message[start:start + length]),
                                            offset + meta, body))
            except _Bad as exc:
                raise _Bad(f"record batch {i}: {exc}") from None

    def _column_layout(self, b: int, column: int) -> tuple:
        """(first node, first buffer) of a column in batch b, whose metadata is checked to
        hold exactly the schema's nodes and buffers (once per batch)."""
        batch = self._batches[b]
        ok = self._layout_ok.get(b)
        if ok is None:
            try:
                batch.parse()
            except _Bad as exc:
                raise self.error(f"record batch {b}: {exc}") from None
            nodes, buffers, views = self._starts[-1]
            ok = (not batch.compressed and len(batch.nodes) == nodes and len(batch.variadic) == views
                  and len(batch.buffers) == buffers + sum(batch.variadic)
                  and (not batch.nodes or batch.nodes[0][0] == batch.length))
            self._layout_ok[b] = ok
        if not ok:
            return None
        node, buffer, views = self._starts[column]
        return node, buffer + sum(batch.variadic[:views])

    # -------------------------------------------------------------------- whole batches

    def _reader(self, columns: tuple) -> Any:
        reader = self._readers.get(columns)
        if reader is None:
            options = self._pa.ipc.IpcReadOptions(included_fields=list(columns))
            reader = self._pa.ipc.open_file(self._pyfile, options=options)
            self._readers[columns] = reader
        return reader

    def whole_batch(self, b: int, columns: Sequence[int], keep: bool = False) -> Any:
        """Record batch b (only ``columns``, schema indices), read by pyarrow and validated
        in full; with ``keep``, kept for the next lookup (up to WHOLE_BATCH_CACHE_BYTES)."""
        pa = self._pa
        key = (b, tuple(columns))
        with self._lock:
            batch = self._whole.get(key)
            if batch is not None:
                self._whole.move_to_end(key)
                return batch
            try:
                batch = self._reader(key[1]).get_batch(b)
            except (pa.ArrowException, OSError) as exc:
                raise self.error(exc) from exc
        for name, column in zip(batch.schema.names, batch.columns):
            try:
                column.validate(full=True)
            except pa.ArrowException as exc:
                raise self.source.read_error(f"record batch {b}: {exc}", name) from None
        if keep and batch.nbytes <= WHOLE_BATCH_CACHE_BYTES:
            with self._lock:
                self._whole[key] = batch
                self._whole_bytes += batch.nbytes
                while self._whole_bytes > WHOLE_BATCH_CACHE_BYTES:
                    _, dropped = self._whole.popitem(last=False)
                    self._whole_bytes -= dropped.nbytes
        return batch

    def batches(self, columns: Sequence[str], first: int = 0,
                stop: Optional[int] = None) -> Iterator[Any]:
        """Record batches [first, stop) with ``columns`` (in that order), each validated in
        full before it is yielded."""
        indices = [self.schema.get_field_index(name) for name in columns]
        order = sorted(set(indices))
        for b in range(first, len(self._batches) if stop is None else stop):
            batch = self.whole_batch(b, order)
            yield batch.select(list(columns))
            self.source.check_unchanged()

    def error(self, exc: BaseException) -> Exception:
        """A read error as the file's (see :meth:`._source.SourceFile.read_error`). pyarrow
        reports some malformed metadata ("Verification of flatbuffer-encoded Footer failed")
        as an ``OSError`` with no errno: the file's fault, not the system's."""
        if isinstance(exc, OSError) and not exc.errno:
            return self.source.read_error(str(exc))
        return self.source.read_error(exc)

    # -------------------------------------------------------------------- lookups

    def _skeleton(self, b: int, column: int) -> Optional[_Skeleton]:
        """The column's validity, offsets and values' place in batch b, read and checked the
        first time (None: read this batch whole)."""
        key = (b, column)
        skeleton = self._skeletons.get(key)
        if skeleton is not None:
            return skeleton
        plan = self._plans[column]
        where = self._column_layout(b, column) if plan is not None else None
        if where is None:
            return None
        node, buffer = where
        batch = self._batches[b]
        nodes, buffers = batch.nodes, batch.buffers
        name = self.names[column]
        pa = self._pa

        def bad(what: str) -> Exception:
            return self.source.read_error(f"record batch {b}: {what}", name)

        def read(i: int, length: int) -> np.ndarray:
            offset, size = buffers[i]
            if size < length:
                raise bad(f"buffer {i} of {size} bytes, {length} needed")
            return np.frombuffer(self.source.read(length, batch.body + offset), np.uint8)

        def validity(n: int, i: int, rows: int) -> Optional[np.ndarray]:
            length, nulls = nodes[n]
            if length < rows:
                raise bad(f"{length} values where {rows} are needed")
            return read(i, (rows + 7) // 8) if nulls else None

        def chain(chain: _Chain, n: int, i: int, rows: int) -> tuple:
            bitmaps = []
            for size in chain.sizes:
                bitmaps.append(validity(n, i, rows))
                n, i, rows = n + 1, i + 1, rows * size
            bitmaps.append(validity(n, i, rows))
            offset, size = buffers[i + 1]
            if size < rows * chain.width:
                raise bad(f"{size} bytes of values for {rows} of {chain.width} bytes")
            return bitmaps, batch.body + offset

        skeleton = _Skeleton()
        rows = batch.length
        skeleton.offsets = None
        if plan.kind == "chain":
            skeleton.validity, skeleton.values_at = chain(plan.chain, node, buffer, rows)
        else:
            top = validity(node, buffer, rows)
            raw = read(buffer + 1, (rows + 1) * plan.offset_width)
            if plan.kind == "bytes":
                limit = buffers[buffer + 2][1]
                skeleton.values_at = batch.body + buffers[buffer + 2][0]
                skeleton.validity = [top]
            else:
                limit = nodes[node + 1][0]
                bitmaps, skeleton.values_at = chain(plan.chain, node + 1, buffer + 2, limit)
                skeleton.validity = [top] + bitmaps
            try:
                skeleton.offsets = _offsets_checked(pa, raw, plan.offset_width, rows, limit)
            except ValueError as exc:
                raise bad(str(exc)) from None
        self._skeletons[key] = skeleton
        return skeleton

    def take(self, columns: Sequence[int], batch_of: np.ndarray, local: np.ndarray) -> dict:
        """The rows (``local`` rows of batches ``batch_of``, sorted by batch then row, no
        repeats) of the ``columns`` (schema indices), as {column index: pyarrow Array}."""
        rows = _Rows(batch_of, local)
        out: dict = {}
        whole: list = []
        for column in columns:
            skeletons = [self._skeleton(b, column) for b in rows.touched]
            if any(s is None for s in skeletons):
                whole.append(column)
                continue
            out[column] = self._gather(self._plans[column], skeletons, rows,
                                       self.names[column])
        if whole:
            whole.sort()  # the order of pyarrow's batches of these columns
            pieces: dict = {c: [] for c in whole}
            for b, group in zip(rows.touched, rows.groups):
                batch = self.whole_batch(b, whole, keep=True)
                taken = batch.take(numeric_array(self._pa, self._pa.int64(),
                                                 local[group].astype(np.int64)))
                for position, column in enumerate(whole):
                    pieces[column].append(taken.column(position))
            for column in whole:
                out[column] = self._pa.concat_arrays(pieces[column]) if pieces[column] else \
                    self._pa.nulls(0, type=self.schema.field(column).type)
        return out

    def _gather(self, plan: _Gather, skeletons: list, rows: _Rows, name: str) -> Any:
        pa = self._pa
        local = rows.local
        values_at = np.array([s.values_at for s in skeletons], dtype=np.int64)[rows.position]
        if plan.kind == "chain":
            return self._chain_array(plan.chain, [s.validity for s in skeletons],
                                     lambda: rows.groups, local,
                                     values_at + local * plan.chain.stride)
        # bytes and lists: each row's range of values from its batch's checked offsets
        groups = rows.groups
        begin = np.concatenate([s.offsets[local[g]] for s, g in zip(skeletons, groups)])
        end = np.concatenate([s.offsets[local[g] + 1] for s, g in zip(skeletons, groups)])
        counts = end - begin
        offsets = np.concatenate(([0], np.cumsum(counts)))
        if plan.offset_width == 4 and offsets[-1] > np.iinfo(np.int32).max:
            raise ValueError(f"{self.path!r}: column {name!r}: the rows taken hold "
                             f"{offsets[-1]:,} values, more than a {plan.type} array can "
                             f"(take fewer rows at a time)")
        offsets = offsets.astype(np.int32 if plan.offset_width == 4 else np.int64)
        validity = self._validity([s.validity[0] for s in skeletons], groups, local)
        if plan.kind == "bytes":
            data = self._read(values_at + begin, counts)
            array = pa.Array.from_buffers(plan.type, local.size,
                                          [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
            if pa.types.is_string(plan.type) or pa.types.is_large_string(plan.type):
                try:
                    array.validate(full=True)  # the UTF-8 of the rows taken
                except pa.ArrowInvalid as exc:
                    raise self.source.read_error(exc, name) from None
            return array
        # a list of a chain: its values' rows, batch by batch
        child_groups, start = [], 0
        for g in groups:
            n = int(counts[g].sum())
            child_groups.append(np.arange(start, start + n))
            start += n
        child_local = _spans(begin, counts)
        child = self._chain_array(plan.chain, [s.validity[1:] for s in skeletons],
                                  lambda: child_groups, child_local,
                                  values_at.repeat(counts) + child_local * plan.chain.stride)
        return pa.Array.from_buffers(plan.type, local.size, [validity, pa.py_buffer(offsets)],
                                     children=[child])

    def _read(self, starts: np.ndarray, lengths: Any) -> np.ndarray:
        """The bytes at ``starts`` (``lengths`` each: an array, or one length for all), one
        range after another."""
        from . import _core

        lengths = np.full(starts.shape, lengths, dtype=np.int64) if np.isscalar(lengths) \
            else np.asarray(lengths, dtype=np.int64)
        try:
            return _core.read_ranges(self.source.fd, self.source.size, starts, lengths)
        except (ValueError, OSError) as exc:
            raise self.error(exc) from exc

    def _validity(self, bitmaps: list, groups: list, positions: np.ndarray) -> Any:
        """The packed validity bitmap of ``positions`` (grouped by batch), or None when none
        of those batches has nulls there."""
        if all(bitmap is None for bitmap in bitmaps):
            return None
        bits = np.concatenate([_bits(bitmap, positions[g]) for bitmap, g in zip(bitmaps, groups)])
        return self._pa.py_buffer(np.packbits(bits, bitorder="little"))

    def _chain_array(self, chain: _Chain, bitmaps: list, groups: Callable[[], list],
                     rows: np.ndarray, starts: np.ndarray) -> Any:
        """The chain's array of ``rows`` (grouped by batch, the groups made by ``groups()``
        only when a level has nulls; ``bitmaps`` per batch, per level), each row's
        ``chain.stride`` bytes of values read from ``starts``."""
        pa = self._pa
        values = self._read(starts, chain.stride)
        levels, per_row = [], 1  # per_row: values of a level in one row
        for level in range(len(chain.types)):
            level_bitmaps = [b[level] for b in bitmaps]
            validity = None
            if any(bitmap is not None for bitmap in level_bitmaps):
                spread = np.arange(per_row)  # a row's positions at this level

                def at_level(r: np.ndarray) -> np.ndarray:
                    return (r[:, None] * per_row + spread).reshape(-1)
                validity = self._validity(level_bitmaps, [at_level(g) for g in groups()],
                                          at_level(rows))
            levels.append((rows.size * per_row, validity))
            if level < len(chain.sizes):
                per_row *= chain.sizes[level]
        leaf_count, leaf_validity = levels[-1]
        array = pa.Array.from_buffers(chain.types[-1], leaf_count,
                                      [leaf_validity, pa.py_buffer(values)])
        for level in range(len(chain.sizes) - 1, -1, -1):
            count, validity = levels[level]
            array = pa.Array.from_buffers(chain.types[level], count, [validity],
                                          children=[array])
        return array

    def close(self) -> None:
        self._readers.clear()
        self._whole.clear()
        pyfile, self._pyfile = getattr(self, "_pyfile", None), None
        if pyfile is not None:
            pyfile.close()
