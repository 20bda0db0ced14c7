"""Parquet and Arrow IPC sources: a seeded sample file, and random access by row index.

pyarrow is an optional dependency (the ``parquet`` extra); it is imported here
only, so ``import bulkwire`` works without it.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "s.parquet")
>>> sample_parquet(path, rows=10, dim=4)  # doctest: +ELLIPSIS
'...s.parquet'
>>> take(path, [7, 2]).column("id").to_pylist()
[7, 2]
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict, namedtuple
from typing import Any, Sequence

import numpy as np

from . import _core
from ._arrow import PathLike, _pyarrow  # noqa: F401 - also imported from here
from ._arrow_arrays import numeric_array
# the rooms of the sample writer and of what the load shares with TableFile: every name
# importable from here as before
from ._parquet_files import (_ARROW_MAGIC, _PARQUET_MAGIC, _check_batch,  # noqa: F401
                             _check_indices, _file_format, _open_parquet, _pyarrow_error,
                             _source_format)
from ._parquet_sample import DEFAULT_ROW_GROUP_ROWS, sample_parquet  # noqa: F401


#: Parquet's number for zstd pages
_ZSTD_CODEC = 6
_ZSTD_UNSEARCHED = object()
#: how this process decodes zstd pages where libzstd is not linked, once looked for (see
#: :func:`zstd_page_decoder`): (its name, the function) or None
_zstd_decoder: Any = _ZSTD_UNSEARCHED
_zstd_lock = threading.Lock()


def _find_zstd_decoder() -> "tuple[str, Any] | None":
    """(its name, decode(data, size) -> exactly size bytes) of the first zstd decompressor
    installed: pyarrow's zstd codec, else the ``zstandard`` package; None when neither is."""
    try:
        import pyarrow
        if pyarrow.Codec.is_available("zstd"):
            codec = pyarrow.Codec("zstd")

            def decode_pyarrow(data: bytes, size: int) -> Any:
                return codec.decompress(data, decompressed_size=size)

            return "pyarrow's zstd codec", decode_pyarrow
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        return None

    def decode_zstandard(data: bytes, size: int) -> bytes:
        # a decompressor per call: one is not to be shared between threads. The output is
        # bounded (a frame that does not say its size, 0 meaning no bound to the package)
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=max(size, 1))

    return "the zstandard package", decode_zstandard


def zstd_page_decoder() -> "str | None":
    """What decompresses zstd Parquet pages read page by page here: ``"libzstd"`` when the C
    core links it; else pyarrow's zstd codec or the ``zstandard`` package (one call per
    page), which this registers with the C core the first time it is asked; None when there
    is none (zstd column chunks are then read a row group at a time).

    >>> zstd_page_decoder() is not None   # pyarrow, the parquet extra, has a zstd codec
    True
    """
    global _zstd_decoder
    if _core.PARQUET_CODECS[_ZSTD_CODEC][1]:
        return "libzstd"
    with _zstd_lock:
        if _zstd_decoder is _ZSTD_UNSEARCHED:
            found = _find_zstd_decoder()
            if found is not None:
                _core.parquet_zstd_decoder(found[1])
            _zstd_decoder = found
        return None if _zstd_decoder is None else _zstd_decoder[0]


#: A column chunk as the footer describes it: a row of ``_core.parquet_index_locations``,
#: its fields named by the C reader (``dictionary`` is an offset, or
#: ``_core.PARQUET_NO_DICTIONARY`` when the chunk names none, or
#: ``_core.PARQUET_DICTIONARY_UNLOCATED`` when the footer places it nowhere in the file)
_ChunkLocation = namedtuple("_ChunkLocation", _core.PARQUET_CHUNK_FIELDS)
#: a chunk without a page index whose pages could not be walked: read by row groups
_NOT_WALKED = np.empty((0, 3), dtype=np.int64)
_PHYSICAL_WIDTH = {"INT32": 4, "INT64": 8, "FLOAT": 4, "DOUBLE": 8}

#: How a column is read: ``PAGES`` reads only the pages holding the requested rows, found
#: through the file's page index; ``WALKED_PAGES`` the same, for a file without a page index,
#: its pages found by walking each column chunk's page headers once; ``ROW_GROUPS`` reads each
#: touched row group whole (one at a time) and takes from it.
PAGES = "pages"
WALKED_PAGES = "walked pages"
ROW_GROUPS = "row groups"


def _byte_array(pa, arrow_type: Any, data: np.ndarray, lengths: np.ndarray):
    """A string or binary array from the values' bytes and each row's byte length (-1: null);
    None when its offsets would not fit the type. Strings are checked to be UTF-8, as
    pyarrow's own reader would have them."""
    nulls = lengths < 0
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(np.where(nulls, 0, lengths), out=offsets[1:])
    large = arrow_type in (pa.large_string(), pa.large_binary())
    if not large:
        if offsets[-1] > np.iinfo(np.int32).max:
            return None  # let pyarrow read it and say so
        offsets = offsets.astype(np.int32)
    validity = None
    if nulls.any():
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    array = pa.Array.from_buffers(arrow_type, lengths.size,
                                  [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                  null_count=int(nulls.sum()))
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        array.validate(full=True)
    return array


class _PagePlan:
    """What the page reader needs to know about one column: its leaf in the Parquet schema,
    the NumPy dtype of its values, its levels and list size."""

    __slots__ = ("leaf", "dtype", "width", "max_rep", "max_def", "list_size", "kind", "type")

    def __init__(self, leaf: int, dtype: Any, width: int, max_rep: int, max_def: int,
                 list_size: int, kind: str, arrow_type: Any):
        self.leaf, self.dtype, self.width = leaf, dtype, width
        self.max_rep, self.max_def, self.list_size = max_rep, max_def, list_size
        self.kind, self.type = kind, arrow_type


def _page_plan(pa, field: Any, leaves: list, pq_schema: Any) -> "tuple[_PagePlan | None, str]":
    """The page plan of an Arrow field, or None and why its type is not covered."""
    if len(leaves) != 1:
        return None, "type not covered"
    leaf = leaves[0]
    column = pq_schema.column(leaf)
    t = field.type
    scalar = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float32(): np.float32,
              pa.float64(): np.float64}
    if t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        if column.physical_type != "BYTE_ARRAY" or column.max_repetition_level != 0 \
                or column.max_definition_level > 1:
            return None, "type not covered"
        return _PagePlan(leaf, np.dtype(np.uint8), 0, 0, column.max_definition_level, 0,
                         "bytes", t), ""
    if t in scalar:
        kind, value_type, list_size, max_rep = "scalar", t, 0, 0
    elif pa.types.is_fixed_size_list(t) and t.value_type in scalar:
        kind, value_type, list_size, max_rep = "fixed_size_list", t.value_type, t.list_size, 1
    elif pa.types.is_list(t) and t.value_type in scalar:
        kind, value_type, list_size, max_rep = "list", t.value_type, 0, 1
    else:
        return None, "type not covered"
    dtype = np.dtype(scalar[value_type])
    width = _PHYSICAL_WIDTH.get(column.physical_type)
    if (width != dtype.itemsize or column.max_repetition_level != max_rep
            or column.max_definition_level > 3 or (kind == "fixed_size_list" and list_size < 1)
            or (column.physical_type in ("FLOAT", "DOUBLE")) != (dtype.kind == "f")):
        return None, "type not covered"
    return _PagePlan(leaf, dtype, width, max_rep, column.max_definition_level, list_size, kind,
                     t), ""


#: The bytes of column chunk dictionaries and page tables a TableFile keeps for its later
#: lookups (``cache_bytes=``): 64 of pyarrow's largest default dictionary pages (1 MiB).
DEFAULT_CACHE_BYTES = 64 << 20

_MISSING = object()


class _ChunkCache:
    """What a TableFile keeps of the column chunks it has read (their page tables and
    dictionaries, NumPy arrays), the least recently used dropped first once it holds more
    than ``limit`` bytes: each entry counts its array's bytes and ENTRY_BYTES for the objects
    around it. The entry put last always stays, so it holds at most ``limit`` bytes or that
    one entry."""

    ENTRY_BYTES = 256

    def __init__(self, limit: int):
        self.limit = limit
        self.bytes = 0
        self._entries: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any) -> Any:
        """The value kept for ``key`` (made the most recently used), or ``_MISSING``."""
        entry = self._entries.get(key)
        if entry is None:
            return _MISSING
        self._entries.move_to_end(key)
        return entry[0]

    def clear(self) -> None:
        """Drops every entry."""
        self._entries.clear()
        self.bytes = 0

    def put(self, key: Any, value: Any) -> None:
        size = self.ENTRY_BYTES + getattr(value, "nbytes", 0)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.limit and len(self._entries) > 1:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped


class TableFile:
    """An open Parquet or Arrow IPC file for repeated lookups (the benchmark's cached mode).

    Parquet: the footer is parsed once. A column whose type the page reader covers —
    int32/int64/float32/float64, or a ``fixed_size_list`` or ``list`` of them, or
    string/large_string/binary/large_binary, PLAIN or dictionary encoded (the chunk's
    dictionary page read once and kept), uncompressed, snappy, gzip or zstd — is read page by
    page: only the pages holding the requested rows are read and decompressed, and only those
    rows copied out. The pages are found through the file's page index
    (``write_page_index=True``) or, in a file without one, by walking each touched column
    chunk's page headers once (the table kept for later lookups). What is kept of the chunks
    read (dictionaries, page tables) stays under ``cache_bytes`` (64 MiB by default), the
    least recently used dropped first (and read again when needed). Every other column is read
    a whole row group at a time, one group at a time, for the touched groups only. ``paths``
    says which way each column goes (and why), ``stats`` counts what each lookup did. Arrow
    IPC: the footer and every record batch's metadata are read once; a lookup reads only the
    bytes of the rows it takes for fixed-width, fixed-size-list, string and binary columns and
    lists of fixed-width values, and the record batches it touches whole (validated once, kept
    up to a bounded size) for other columns.

    The file is opened once, and only a regular file is (a FIFO or a device raises
    ``ValueError``). It is read with positioned reads, never through a memory map: a file cut
    short, rewritten, grown or replaced while it is open gives
    :class:`~bulkwire.errors.MalformedFileError` (saying it changed since it was opened) or
    the rows it held when it was opened, never a crash. A lookup may run in several threads
    at once; :meth:`close` waits for those running, and later lookups raise ``ValueError``.

    >>> import tempfile, os, pyarrow, pyarrow.parquet
    >>> path = os.path.join(tempfile.mkdtemp(), "p.parquet")
    >>> t = pyarrow.table({"id": pyarrow.array(range(10), pyarrow.int64())})
    >>> pyarrow.parquet.write_table(t, path, write_page_index=True, use_dictionary=False)
    >>> with TableFile(path) as f:
    ...     f.take([3, 1]).column("id").to_pylist(), f.paths, f.stats["id"]["pages_read"]
    ([3, 1], {'id': 'pages'}, 1)
    """

    def __init__(self, path: PathLike, columns: Sequence[str] | None = None, *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, _source: Any = None):
        from ._source import SourceFile

        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative int, got {cache_bytes!r}")
        self._cache = _ChunkCache(cache_bytes)
        pa = _pyarrow()
        self.path = os.fspath(path)
        self.columns = list(columns) if columns is not None else None
        #: per column: ``"pages"``, ``"walked pages"``, or ``"row groups"`` with the reason
        #: (Parquet only)
        self.paths: dict = {}
        #: per column: column chunks read by each path, pages read by the page path, and
        #: column chunks whose page headers were walked
        self.stats: dict = {}
        self._plans: dict = {}
        self._parquet = self._pyfile = self._ipc = None
        # lookups running, and whether close() was called: close waits for the lookups, a
        # lookup after it is refused
        self._state = threading.Condition()
        self._running = 0
        self._closed = False
        # a load's reader shares its open file (``_source``, a SourceFile it closes itself)
        self._owns_source = _source is None
        self._source = SourceFile(self.path) if _source is None else _source
        try:
            self.format = _source_format(self._source)
            self._open(pa)
        except BaseException:
            self._release()
            raise

    def _open(self, pa) -> None:
        if self.format == "parquet":
            try:
                # pyarrow reads the row groups it decodes through the same open file
                self._pyfile = self._source.python_file()
                self._parquet = _open_parquet(self._source, self._pyfile)
                meta = self._parquet.metadata
                counts = np.fromiter((meta.row_group(i).num_rows
                                      for i in range(meta.num_row_groups)),
                                     dtype=np.int64, count=meta.num_row_groups)
                self.schema = self._parquet.schema_arrow
            except (pa.ArrowException, UnicodeDecodeError) as exc:  # pyarrow refused the footer
                raise self._malformed(exc) from exc
            if (counts < 0).any():
                g = int(np.argmax(counts < 0))
                raise self._malformed(f"row group {g} has {counts[g]} rows")
        else:
            from ._ipc import IpcFile

            self._ipc = IpcFile(self._source, pa)
            counts = np.array(self._ipc.batch_rows, dtype=np.int64)
            self.schema = self._ipc.schema
            # the columns a lookup reads, by position (names may repeat in a file)
            self._ipc_columns = list(range(len(self.schema))) if self.columns is None else \
                [self.schema.get_field_index(c) for c in self.columns]
        if self.columns is not None:
            missing = [c for c in self.columns if self.schema.get_field_index(c) < 0]
            if missing:
                raise KeyError(f"columns: {missing[0]!r} is not a column of {self.path!r} "
                               f"(it has {', '.join(self.schema.names)})")
            self.schema = _pyarrow().schema([self.schema.field(c) for c in self.columns])
        #: first row of each row group (Parquet) or record batch (IPC), and the total at the end
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.num_rows = int(self.offsets[-1])
        if self.format == "parquet":
            self._plan_pages(pa)

    def _malformed(self, exc: Any, column: str | None = None) -> Exception:
        """The error of a read that failed, naming the file and the column (see
        :meth:`._source.SourceFile.read_error`)."""
        return self._source.read_error(exc, column)

    def _plan_pages(self, pa) -> None:
        """Decides, column by column, whether the page reader can read it (see ``paths``)."""
        from . import _core

        meta = self._parquet.metadata
        pq_schema = self._parquet.schema
        names = self.schema.names
        leaves: dict = {name: [] for name in names}
        ambiguous = any("." in name for name in names)
        for i in range(meta.num_columns):
            top = pq_schema.column(i).path.split(".")[0]
            if top in leaves:
                leaves[top].append(i)
        self._locations = None
        candidates = {}
        for name in names:
            self.stats[name] = {"pages": 0, "row_groups": 0, "pages_read": 0, "walks": 0}
            plan, why = (None, "type not covered") if ambiguous else \
                _page_plan(pa, self.schema.field(name), leaves[name], pq_schema)
            self.paths[name] = f"{ROW_GROUPS} ({why})"
            if plan is not None:
                candidates[name] = plan
        if not candidates or not meta.num_row_groups:
            return
        # the page reader's file: the descriptor, read with pread, and the size it had
        self._file = (self._source.fd, self._source.size)
        # the footer's chunk metadata read by our own hardened reader: what pyarrow's
        # accessors would give, without trusting them on a crafted footer
        try:
            self._locations = _core.parquet_index_locations(
                self._file, meta.num_row_groups, meta.num_columns)
        except (ValueError, OSError) as exc:
            raise self._malformed(exc) from None
        for name, plan in candidates.items():
            path = self._chunks_path(self._locations[:, plan.leaf], _core)
            if path in (PAGES, WALKED_PAGES):
                self.paths[name] = path
                self._plans[name] = plan
            else:
                self.paths[name] = f"{ROW_GROUPS} ({path})"

    @staticmethod
    def _chunks_path(chunks: np.ndarray, _core: Any) -> str:
        """How a column's chunks (rows of parquet_index_locations, :data:`_ChunkLocation`)
        are read:
        ``PAGES``, ``WALKED_PAGES`` when some chunk has no page index, or why some chunk
        cannot be read page by page."""
        codecs = _core.PARQUET_CODECS  # {number: (name, covered here, library it needs)}
        path = PAGES
        for chunk in map(_ChunkLocation._make, chunks.tolist()):
            codec = chunk.codec
            if chunk.index_offset < 0:
                if chunk.start < 0 or chunk.size < 0:  # nothing to find its pages with
                    return "no page index"
                path = WALKED_PAGES
            name, covered, library = codecs.get(codec, (str(codec), False, None))
            if not covered and codec == _ZSTD_CODEC:
                covered = zstd_page_decoder() is not None
            if not covered:
                return f"{name.lower()} pages not covered by this build (built without " \
                    f"{library}: apt-get install {library}-dev, reinstall bulkwire)" \
                    if library is not None else f"{name} not covered"
            if chunk.dictionary == _core.PARQUET_DICTIONARY_UNLOCATED:
                return "dictionary page not located"
        return path

    def take(self, indices: Any):
        """The rows at ``indices`` (any order, repeats allowed) as a ``pyarrow.Table``.

        >>> import tempfile, os
        >>> path = sample_parquet(os.path.join(tempfile.mkdtemp(), "t.parquet"), rows=5, dim=2)
        >>> with TableFile(path) as f:
        ...     f.take([4, 0, 4]).column("id").to_pylist()
        [4, 0, 4]
        """
        pa = _pyarrow()
        idx = _check_indices(indices, self.num_rows)
        with self._state:
            if self._closed:
                raise ValueError(f"TableFile({self.path!r}) is closed")
            self._running += 1
        try:
            if idx.size == 0:
                return self.schema.empty_table()
            if self.format == "ipc":
                table = self._take_ipc(pa, idx)
            else:
                table = self._take_parquet(pa, idx)
            # the bytes read were the file's as it was opened: a file rewritten in place
            # (its modification time, or its size, changed) is not trusted
            self._source.check_unchanged()
            return table
        finally:
            with self._state:
                self._running -= 1
                if not self._running:
                    self._state.notify_all()

    def _take_parquet(self, pa, idx: np.ndarray):
        # Row group by row group, never read_row_groups over several: that call concatenates
        # every touched group into one table first, which costs more than reading them.
        unique, inverse = np.unique(idx, return_inverse=True)
        group_of = np.searchsorted(self.offsets, unique, side="right") - 1
        cuts = np.flatnonzero(np.diff(group_of)) + 1
        names = self.schema.names
        pieces = []
        for part in np.split(np.arange(unique.size), cuts):
            g = int(group_of[part[0]])
            local = unique[part] - self.offsets[g]
            columns: dict = {}
            for name, plan in self._plans.items():
                array = self._take_pages(pa, g, name, plan, local)
                if array is not None:
                    columns[name] = array
            rest = [name for name in names if name not in columns]
            if rest:
                try:
                    group = self._parquet.read_row_group(g, columns=rest)
                except (pa.ArrowException, OSError) as exc:  # a chunk pyarrow refuses
                    raise _pyarrow_error(self._source, exc, f"row group {g}: ") from exc
                taken = group.take(numeric_array(pa, pa.int64(), local.astype(np.int64)))
                for name in rest:
                    columns[name] = taken.column(name)
                    self.stats[name]["row_groups"] += 1
            pieces.append(pa.Table.from_arrays([columns[name] for name in names],
                                               schema=self.schema))
        table = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
        if unique.size == idx.size and bool((np.diff(idx) > 0).all()):
            return table
        return table.take(numeric_array(pa, pa.int64(), inverse.reshape(-1).astype(np.int64)))

    def _chunk_pages(self, g: int, name: str, plan: _PagePlan) -> np.ndarray:
        """The page table of row group g's chunk of one column (``_NOT_WALKED`` when its
        pages are not covered): an int64 array (pages, 3) of (offset, compressed size, first
        row), from the offset index or a walk over the chunk's page headers, kept in the
        cache. The caller turns ``ValueError`` and ``OSError`` into the file's error."""
        from . import _core

        pages = self._cache.get(("pages", g, plan.leaf))
        if pages is not _MISSING:
            return pages
        group_rows = int(self.offsets[g + 1] - self.offsets[g])
        chunk = _ChunkLocation._make(self._locations[g, plan.leaf].tolist())
        if chunk.index_offset >= 0:
            pages = _core.parquet_offset_index(self._file, chunk.index_offset,
                                               chunk.index_length, group_rows, chunk.start,
                                               chunk.size)
        else:  # no page index: the chunk's page headers walked, once
            pages = _core.parquet_walk_pages(self._file, chunk.start, chunk.size, group_rows,
                                             chunk.codec, plan.max_rep, plan.list_size,
                                             chunk.null_count)
            self.stats[name]["walks"] += 1
            if pages is None:  # pages the walk leaves to pyarrow (see parquet_walk_pages)
                pages = _NOT_WALKED
        self._cache.put(("pages", g, plan.leaf), pages)
        return pages

    def _page_end(self, g: int, name: str, row: int) -> "int | None":
        """The row (of row group g) after the last one of the page holding ``row`` in the
        column's chunk; None when its pages are not covered."""
        try:
            pages = self._chunk_pages(g, name, self._plans[name])
        except (ValueError, OSError) as exc:
            raise self._malformed(exc, name) from None
        if pages is _NOT_WALKED:
            return None
        following = int(np.searchsorted(pages[:, 2], row, side="right"))
        if following < len(pages):
            return int(pages[following, 2])
        return int(self.offsets[g + 1] - self.offsets[g])

    def _take_pages(self, pa, g: int, name: str, plan: _PagePlan, local: np.ndarray):
        """The rows `local` of row group g of one column, read page by page; None when a page
        holds what the page reader does not cover (a list's nulls, another encoding)."""
        from . import _core

        group_rows = int(self.offsets[g + 1] - self.offsets[g])
        chunk = _ChunkLocation._make(self._locations[g, plan.leaf].tolist())
        try:
            pages = self._chunk_pages(g, name, plan)
            if pages is _NOT_WALKED:
                return None
            codec, dictionary_offset = chunk.codec, chunk.dictionary
            dictionary = None
            if dictionary_offset >= 0:
                dictionary = self._cache.get(("dictionary", g, plan.leaf))
                if dictionary is _MISSING:
                    dictionary = _core.parquet_dictionary(
                        self._file, dictionary_offset, int(pages[0, 0]), codec, plan.width)
                    self._cache.put(("dictionary", g, plan.leaf), dictionary)
                if dictionary is None:  # an encoding the page reader does not cover
                    return None
            result = _core.parquet_take_chunk(self._file, pages, group_rows, codec, plan.width,
                                              plan.max_rep, plan.max_def, plan.list_size,
                                              local, dictionary)
        except (ValueError, OSError) as exc:
            raise self._malformed(exc, name) from None
        if result is None:
            return None
        raw, lengths, pages_read = result
        if plan.kind == "bytes":
            try:
                array = _byte_array(pa, plan.type, raw, lengths)
            except pa.ArrowInvalid as exc:  # a string that is not UTF-8
                raise self._malformed(exc, name) from None
            if array is None:
                return None
            stats = self.stats[name]
            stats["pages"] += 1
            stats["pages_read"] += pages_read
            return array
        if plan.kind == "scalar":
            # a null row: a zeroed slot of length 0
            array = numeric_array(pa, plan.type, raw.view(plan.dtype), lengths == 0)
        elif plan.kind == "fixed_size_list":
            values = numeric_array(pa, plan.type.value_type, raw.view(plan.dtype))
            array = pa.FixedSizeListArray.from_arrays(values, type=plan.type)
        else:
            if lengths.size and int(lengths.sum()) > np.iinfo(np.int32).max:
                return None  # too many values for list's int32 offsets: let pyarrow say so
            offsets = np.zeros(lengths.size + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            values = numeric_array(pa, plan.type.value_type, raw.view(plan.dtype))
            array = pa.ListArray.from_arrays(numeric_array(pa, pa.int32(), offsets), values,
                                             type=plan.type)
        stats = self.stats[name]
        stats["pages"] += 1
        stats["pages_read"] += pages_read
        return array

    def _take_ipc(self, pa, idx: np.ndarray):
        ascending = bool((idx[1:] > idx[:-1]).all())  # no sort or repeat to undo
        unique, inverse = (idx, None) if ascending else np.unique(idx, return_inverse=True)
        batch_of = np.searchsorted(self.offsets, unique, side="right") - 1
        local = unique - self.offsets[batch_of]
        if not self._ipc_columns:  # no column to read: the rows, without columns
            rows = pa.record_batch([pa.nulls(idx.size)], names=["rows"]).select([])
            return pa.Table.from_batches([rows], schema=self.schema)
        arrays = self._ipc.take(self._ipc_columns, batch_of, local)
        table = pa.Table.from_arrays([arrays[i] for i in self._ipc_columns],
                                     schema=self.schema)
        if table.num_rows != unique.size:  # never fewer rows than asked, returned as found
            raise self._ipc.error(f"a lookup of {unique.size} rows read {table.num_rows}")
        if inverse is None:
            return table
        return table.take(numeric_array(pa, pa.int64(), inverse.reshape(-1).astype(np.int64)))

    def close(self) -> None:
        """Closes the file, once the lookups running in other threads are done; a lookup
        after it raises ``ValueError``."""
        with self._state:
            self._closed = True
            while self._running:
                self._state.wait()
            self._release()

    def _release(self) -> None:
        """Lets go of the readers, the descriptor and what the cache kept (each once,
        whatever was opened; called with ``_state`` held, or before the object is shared)."""
        self._cache.clear()
        parquet, self._parquet = self._parquet, None
        if parquet is not None:
            parquet.close()
        ipc, self._ipc = self._ipc, None
        if ipc is not None:
            ipc.close()
        pyfile, self._pyfile = self._pyfile, None
        if pyfile is not None:
            pyfile.close()
        if self._owns_source:
            self._source.close()

    def __enter__(self) -> "TableFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        paths = f", paths={self.paths!r}" if self.format == "parquet" else ""
        return f"TableFile({self.path!r}, format={self.format!r}, num_rows={self.num_rows}{paths})"


def take(source: PathLike | TableFile, indices: Any, *, columns: Sequence[str] | None = None):
    """The rows of a Parquet or Arrow IPC file at ``indices``, as a ``pyarrow.Table`` in the
    order asked (repeats allowed). ``source`` is a path (opened, read, closed: the reopen mode)
    or an open :class:`TableFile` (the cached mode).

    Raises ``TypeError`` for indices that are not integers and ``IndexError`` for a negative
    or out-of-range index, naming ``indices[i]``.
    """
    if isinstance(source, TableFile):
        if columns is not None and list(columns) != source.columns:
            return source.take(indices).select(list(columns))
        return source.take(indices)
    with TableFile(source, columns=columns) as f:
        return f.take(indices)
