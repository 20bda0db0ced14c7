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

import operator
import os
from typing import Any, Sequence, Union

import numpy as np

from ._extras import missing_extra

PathLike = Union[str, "os.PathLike[str]"]

#: Row-group size of :func:`sample_parquet`: ~4 MiB of 1024-dim float32 vectors per group,
#: so a point lookup decodes a few MiB at most and a load streams in small steps.
DEFAULT_ROW_GROUP_ROWS = 1024

_PARQUET_MAGIC = b"PAR1"
_ARROW_MAGIC = b"ARROW1"


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
        import pyarrow.ipc  # noqa: F401
    except ImportError as exc:
        raise missing_extra("Parquet support", "pyarrow", "parquet") from exc
    return pyarrow


def sample_parquet(path: PathLike, rows: int = 10_000, dim: int = 1024, seed: int = 42, *,
                   row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, id_start: int = 0,
                   vector_column: str = "emb", compression: str = "snappy") -> str:
    """Write a seeded sample shaped like the feature-vectors dataset: an int64 ``id``
    (``id_start`` .. ``id_start + rows - 1``) and a ``fixed_size_list<float32>[dim]`` column
    of values uniform in [0, 1) from ``numpy.random.default_rng(seed)``. It is written one
    row group at a time, so memory stays at one row group whatever ``rows`` is. Returns the
    path as a string.
    """
    pa = _pyarrow()
    for name, value in (("rows", rows), ("dim", dim), ("row_group_rows", row_group_rows)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < (0 if name == "rows" else 1):
            raise ValueError(f"{name} must be {'non-negative' if name == 'rows' else 'positive'}, "
                             f"got {value}")
    rng = np.random.default_rng(seed)
    schema = pa.schema([("id", pa.int64()),
                        (vector_column, pa.list_(pa.float32(), dim))])
    path = os.fspath(path)
    with pa.parquet.ParquetWriter(path, schema, compression=compression) as writer:
        if rows == 0:
            writer.write_table(schema.empty_table())
        for done in range(0, rows, row_group_rows):
            n = min(row_group_rows, rows - done)
            ids = pa.array(np.arange(id_start + done, id_start + done + n, dtype=np.int64))
            values = pa.array(rng.random(n * dim, dtype=np.float32))
            vectors = pa.FixedSizeListArray.from_arrays(values, dim)
            writer.write_table(pa.Table.from_arrays([ids, vectors], schema=schema),
                               row_group_size=n)
    return path


def _file_format(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(6)
    if head[:4] == _PARQUET_MAGIC:
        return "parquet"
    if head == _ARROW_MAGIC:
        return "ipc"
    raise ValueError(f"{path!r} is neither a Parquet file nor an Arrow IPC file "
                     f"(starts with {head!r})")


def _check_batch(batch: Any, source: str) -> None:
    """pyarrow's checks of a record batch read from a file: the sizes of its buffers against
    the lengths, offsets and last string/list offsets that will be read. The Arrow C Data
    Interface carries no buffer sizes, so the C readers (which check everything else: see
    ``csrc/arrow_c.h``) cannot; a crafted or corrupt file is refused here, naming the file
    and the column. Constant time per column (``Array.validate()``, not ``full=True``)."""
    pa = _pyarrow()
    for name, column in zip(batch.schema.names, batch.columns):
        try:
            column.validate()
        except pa.ArrowException as exc:
            raise ValueError(f"{source!r} is malformed: column {name!r}: {exc}") from None


def _check_indices(indices: Any, num_rows: int, name: str = "indices") -> np.ndarray:
    """``indices`` as an int64 array, or a clear error naming the argument."""
    if hasattr(indices, "__arrow_c_array__") and not isinstance(indices, np.ndarray):
        indices = np.asarray(_pyarrow().array(indices).to_numpy(zero_copy_only=False))
    if isinstance(indices, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integers, not {type(indices).__name__}")
    try:
        arr = np.asarray(indices)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} must be a sequence of integers: {exc}") from None
    if arr.ndim == 0:
        raise TypeError(f"{name} must be a sequence of integers, not a scalar "
                        f"{type(indices).__name__}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind == "O":  # Python ints too large for int64, or mixed objects
        for pos, value in enumerate(arr.tolist()):
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise TypeError(f"{name}[{pos}] = {value!r} is not an integer")
            value = operator.index(value)
            if value < 0:
                raise IndexError(f"{name}[{pos}] = {value} is negative")
            if value >= num_rows:
                raise IndexError(f"{name}[{pos}] = {value} is out of range for {num_rows} rows")
        raise TypeError(f"{name} could not be read as integers")  # pragma: no cover
    if arr.dtype.kind not in "iu":
        bad = 0
        if arr.dtype.kind == "f":
            fractional = np.flatnonzero(arr != np.floor(arr))
            bad = int(fractional[0]) if fractional.size else 0
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype} "
                        f"({name}[{bad}] = {arr[bad].item()!r})")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and (arr > np.iinfo(np.int64).max).any():
        pos = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise IndexError(f"{name}[{pos}] = {arr[pos]} is out of range for {num_rows} rows")
    arr = arr.astype(np.int64, copy=False)
    negative = arr < 0
    if negative.any():
        pos = int(np.argmax(negative))
        raise IndexError(f"{name}[{pos}] = {arr[pos]} is negative")
    too_big = arr >= num_rows
    if too_big.any():
        pos = int(np.argmax(too_big))
        raise IndexError(f"{name}[{pos}] = {arr[pos]} is out of range for {num_rows} rows")
    return arr


class TableFile:
    """An open Parquet or Arrow IPC file for repeated lookups (the benchmark's cached mode).

    Parquet: the footer is parsed once; each :meth:`take` reads only the row groups that hold
    the requested rows. Arrow IPC: the file is memory-mapped and its record batches are
    referenced without copying, so a lookup touches only the pages of the rows it takes.
    """

    def __init__(self, path: PathLike, columns: Sequence[str] | None = None):
        pa = _pyarrow()
        self.path = os.fspath(path)
        self.format = _file_format(self.path)
        self.columns = list(columns) if columns is not None else None
        if self.format == "parquet":
            self._parquet = pa.parquet.ParquetFile(self.path, memory_map=True)
            meta = self._parquet.metadata
            counts = np.fromiter((meta.row_group(i).num_rows for i in range(meta.num_row_groups)),
                                 dtype=np.int64, count=meta.num_row_groups)
            self.schema = self._parquet.schema_arrow
        else:
            self._mmap = pa.memory_map(self.path, "r")
            self._table = pa.ipc.open_file(self._mmap).read_all()  # zero-copy over the map
            self._batches = self._table.to_batches()
            for batch in self._batches:  # before any lookup reads them
                _check_batch(batch, self.path)
            counts = np.fromiter((b.num_rows for b in self._batches), dtype=np.int64,
                                 count=len(self._batches))
            self.schema = self._table.schema
        if self.columns is not None:
            missing = [c for c in self.columns if self.schema.get_field_index(c) < 0]
            if missing:
                raise KeyError(f"columns: {missing[0]!r} is not a column of {self.path!r} "
                               f"(it has {', '.join(self.schema.names)})")
            self.schema = _pyarrow().schema([self.schema.field(c) for c in self.columns])
        #: first row of each row group (Parquet) or record batch (IPC), and the total at the end
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.num_rows = int(self.offsets[-1])

    def take(self, indices: Any):
        """The rows at ``indices`` (any order, repeats allowed) as a ``pyarrow.Table``."""
        pa = _pyarrow()
        idx = _check_indices(indices, self.num_rows)
        if idx.size == 0:
            return self.schema.empty_table()
        if self.format == "ipc":
            return self._take_ipc(pa, idx)
        group_of = np.searchsorted(self.offsets, idx, side="right") - 1
        groups = np.unique(group_of)
        # one call for all touched row groups: pyarrow decodes them on its own threads
        table = self._parquet.read_row_groups(groups.tolist(), columns=self.columns)
        # position of each requested row inside the concatenation of the touched groups
        sizes = self.offsets[groups + 1] - self.offsets[groups]
        base = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        where = np.searchsorted(groups, group_of)
        local = idx - self.offsets[group_of] + base[where]
        return table.take(pa.array(local))

    def _take_ipc(self, pa, idx: np.ndarray):
        # Batch by batch: Table.take on the whole chunked table would first concatenate every
        # chunk (a copy of the file); a RecordBatch.take copies only the rows it takes.
        unique, inverse = np.unique(idx, return_inverse=True)
        group_of = np.searchsorted(self.offsets, unique, side="right") - 1
        cuts = np.flatnonzero(np.diff(group_of)) + 1
        pieces = []
        for part in np.split(np.arange(unique.size), cuts):
            g = int(group_of[part[0]])
            batch = self._batches[g]
            if self.columns is not None:
                batch = batch.select(self.columns)
            pieces.append(batch.take(pa.array(unique[part] - self.offsets[g])))
        table = pa.Table.from_batches(pieces, schema=self.schema)
        if unique.size == idx.size and bool((np.diff(idx) > 0).all()):
            return table
        return table.take(pa.array(inverse.reshape(-1).astype(np.int64)))

    def close(self) -> None:
        if self.format == "parquet":
            self._parquet.close()
        else:
            self._table = self._batches = None
            self._mmap.close()

    def __enter__(self) -> "TableFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TableFile({self.path!r}, format={self.format!r}, num_rows={self.num_rows})"


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
