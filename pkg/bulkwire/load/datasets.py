"""The sources of a load: the files of a path, a directory, a glob or a list of them
(:func:`_dataset_files`), their footers (schema, row groups, identity), the units of work cut
from their row groups (:class:`_Unit`), and the record batches read from a file, from a file
at ``take`` or from Arrow data given in memory or as a stream."""
from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from .._source import SourceFile
from ..parquet import _open_parquet, _pyarrow, _pyarrow_error, _source_format, TableFile
from .interface import ColumnPlan


def _taken_batches(path: str, plan: ColumnPlan, batch_rows: int,
                   take: Any) -> tuple[Iterator[Any], int, Any]:
    """The rows of a file at ``take``: (record batches, total rows, index array)."""
    from ..parquet import _check_indices

    with TableFile(path, columns=plan.read_columns) as f:
        idx = _check_indices(take, f.num_rows, name="take")
        table = f.take(idx)
    return iter(table.to_batches(max_chunksize=batch_rows)), table.num_rows, idx


def _file_batches(path: str, plan: ColumnPlan, batch_rows: int, first: int = 0,
                  stop: int | None = None, identity: tuple | None = None) -> Iterator[Any]:
    """Record batches of row groups (Arrow IPC: record batches) [first, stop) of a file, of
    at most ``batch_rows`` rows, read through one open descriptor. The file must still be
    what it was when the load read its footer (``identity``: size and modification time),
    and stay so: checked when it is opened and after every batch, so a file rewritten, cut
    short or grown under the load raises :class:`~bulkwire.errors.MalformedFileError` naming
    it rather than sending rows of another file (one renamed over it is not read: the open
    file is)."""
    pa = _pyarrow()
    with SourceFile(path) as source:
        source.check_unchanged(identity)
        if _source_format(source) == "parquet":
            with source.python_file() as pyfile:
                vectors = None
                try:
                    # pre_buffer=False: pyarrow would otherwise buffer ahead up to the whole
                    # file (RSS grew with the file size: 540 MB for 470 MB of Parquet);
                    # without it, one row group.
                    pf = _open_parquet(source, pyfile, pre_buffer=False)
                    groups = range(first, pf.metadata.num_row_groups if stop is None else stop)
                    vectors = _PagedVectors.of(source, pf, plan)
                    columns = (plan.read_columns if vectors is None else
                               [c for c in plan.read_columns if c != vectors.name])
                    batches = pf.iter_batches(batch_size=batch_rows, row_groups=groups,
                                              columns=columns)
                    row = vectors.first_row(first) if vectors is not None else 0
                    while True:
                        try:
                            batch = next(batches)
                        except StopIteration:
                            return
                        if vectors is not None:
                            batch = vectors.joined(batch, row, plan.read_columns)
                            row += batch.num_rows
                        source.check_unchanged()
                        yield batch
                except (pa.ArrowException, OSError) as exc:
                    raise _pyarrow_error(source, exc) from exc
                finally:
                    if vectors is not None:
                        vectors.close()
        from .._ipc import IpcFile

        ipc = IpcFile(source, pa)
        try:
            for batch in ipc.batches(plan.read_columns, first, stop):
                for offset in range(0, batch.num_rows, batch_rows):
                    yield batch.slice(offset, batch_rows)
        finally:
            ipc.close()



class _PagedVectors:
    """The vector column of a Parquet file's batches, read by bulkwire's page reader
    (:class:`~bulkwire.parquet.TableFile`'s, over the load's open file): only the pages of
    each batch's rows are read and their values copied out, where pyarrow decodes every
    value's repetition and definition levels (the larger part of reading a file of vectors).
    The other columns are still read by pyarrow; :meth:`joined` puts a batch back together,
    the same batch as pyarrow's. Each page is read and decompressed once per load, whatever
    the batches: the rows of a batch are read up to the end of the page holding its last
    row, and the rest of that page's rows are kept for the batches after it (one page's rows
    at most, beyond the batch's). A row group with pages the page reader does not cover (a
    null, another encoding) is read by pyarrow, its vector column once for all its batches."""

    #: what is kept of the chunks read (page tables, dictionaries): a row group's, read in order
    CACHE_BYTES = 16 << 20

    def __init__(self, file: TableFile, name: str, pf: Any) -> None:
        self.file, self.name, self.pf = file, name, pf
        self.plan = file._plans[name]
        self.field = file.schema.field(name)
        self._group: tuple[int, Any] | None = None  # a row group read by pyarrow
        # rows read to the end of their last page: (row group, first row, end row, array)
        self._kept: tuple[int, int, int, Any] | None = None

    @classmethod
    def of(cls, source: SourceFile, pf: Any, plan: ColumnPlan) -> "_PagedVectors | None":
        """The reader of ``plan``'s vector column, or None when the page reader does not
        cover it (its type, a codec, no way to find its pages), when it is the only column
        read (pyarrow then reads nothing else that the batches could be cut by), or when a
        column read is named twice (in the plan or in the file)."""
        from ..parquet import PAGES, WALKED_PAGES

        name = plan.vector_column
        names = plan.read_columns
        if name is None or name not in names or len(names) < 2 or len(set(names)) != len(names):
            return None
        schema = pf.schema_arrow
        if any(len(schema.get_all_field_indices(c)) != 1 for c in names):
            return None  # a name the file gives twice: pyarrow's batches say which is which
        file = TableFile(source.path, [name], cache_bytes=cls.CACHE_BYTES, _source=source)
        if file.paths.get(name) not in (PAGES, WALKED_PAGES):
            file.close()
            return None
        return cls(file, name, pf)

    def first_row(self, group: int) -> int:
        """The file's row number of row group ``group``'s first row."""
        return int(self.file.offsets[group])

    def joined(self, batch: Any, row: int, names: list) -> Any:
        """``batch`` (the other columns of the file's rows from ``row``) with the vector
        column of the same rows, the columns in the order of ``names``."""
        import numpy as np

        pa = _pyarrow()
        offsets = self.file.offsets
        start, end = row, row + batch.num_rows
        parts = []
        while start < end:  # a batch of pyarrow's may span row groups
            g = int(np.searchsorted(offsets, start, side="right")) - 1
            group_first, group_end = int(offsets[g]), int(offsets[g + 1])
            stop = min(end, group_end)
            parts.append(self._rows(pa, g, start - group_first, stop - group_first))
            start = stop
        if not parts:
            vector = pa.nulls(0, type=self.field.type)  # (pa.array would import pandas)
        else:
            vector = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        arrays, fields = [], []
        for name in names:
            if name == self.name:
                arrays.append(vector)
                fields.append(self.field)
            else:
                i = batch.schema.get_field_index(name)
                arrays.append(batch.column(i))
                fields.append(batch.schema.field(i))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _rows(self, pa: Any, g: int, first: int, stop: int) -> Any:
        """The vector column's rows [first, stop) of row group ``g``, an array holding those
        rows only (never a view of a page's rows kept for the next batch)."""
        import numpy as np

        if self._group is None or self._group[0] != g:
            parts = []
            at = first
            kept = self._kept
            if kept is not None and kept[0] == g and kept[1] <= at < kept[2]:
                upto = min(stop, kept[2])
                parts.append(kept[3].slice(at - kept[1], upto - at))
                at = upto
            if at < stop:
                # to the end of the page holding the batch's last row: the batches after
                # this one take the rest of that page from here, not from the file again
                end = self.file._page_end(g, self.name, stop - 1)
                array = None if end is None else self.file._take_pages(
                    pa, g, self.name, self.plan, np.arange(at, end, dtype=np.int64))
                self._kept = None if array is None else (g, at, end, array)
                if array is None:  # pages the page reader does not cover: pyarrow's group
                    parts = None
                elif not parts and end == stop:
                    return array  # the batch's rows, and no more
                else:
                    parts.append(array.slice(0, stop - at))
            if parts is not None:
                return pa.concat_arrays(parts)  # a copy: the batch holds its own rows only
            self._kept = None
            column = self.pf.read_row_group(g, columns=[self.name]).column(0)
            self._group = (g, column.combine_chunks() if column.num_chunks != 1
                           else column.chunk(0))
        return self._group[1].slice(first, stop - first)

    def close(self) -> None:
        self._group = self._kept = None
        self.file.close()


#: The file names a directory contributes (others, like ``_SUCCESS`` markers, are left out).
DATA_SUFFIXES = (".parquet", ".pq", ".arrow", ".ipc", ".feather")


#: Rows per unit of work at most: with ``resume``, one request each, so a run that dies
#: repeats at most this many rows per worker.
RESUME_UNIT_ROWS = 65536


@dataclass(frozen=True)
class _Unit:
    """Row groups ``[first, stop)`` of one file (record batches, for Arrow IPC): one unit of
    work, owned by one worker; with ``resume``, one request."""

    path: str
    first: int
    stop: int
    first_row: int
    rows: int


def _dataset_files(source: Any) -> list[str]:
    """The files of a path (a file, a directory: its data files, recursively, in name order;
    a glob), or of a list of them. Raises ``FileNotFoundError`` naming what matched nothing.

    Only regular files (or symbolic links to them) are data files. A FIFO, a socket, a
    device file or a symbolic link loop where a data file would be (given as the path, named
    with a data suffix in a directory, matched by a glob) raises ``ValueError`` naming it,
    before any file is read: a FIFO is never opened (that would wait for a writer). A
    directory reached twice (a symbolic link back to a folder above it, or a second link to
    one) raises ``ValueError`` naming both paths, rather than walking in circles or reading
    its files twice."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("path is an empty list of files")
        files: list[str] = []
        for item in source:
            files.extend(_dataset_files(os.fspath(item)))
        return files
    path = os.fspath(source)
    if os.path.isdir(path):
        found = [os.path.join(folder, name) for folder, names in _walk(path, _dataset_name)
                 for name in names if name.endswith(DATA_SUFFIXES)]
        if not found:
            raise FileNotFoundError(f"no Parquet or Arrow IPC files ({', '.join(DATA_SUFFIXES)}) "
                                    f"in the directory {path!r}")
        return [_data_file(f) for f in found]
    if os.path.lexists(path):
        return [_data_file(path)]
    if glob.has_magic(path):
        found = sorted(p for p in _glob(path) if not os.path.isdir(p))
        if not found:
            raise FileNotFoundError(f"no file matches {path!r}")
        return [_data_file(f) for f in found]
    raise FileNotFoundError(f"no such file: {path!r}")


def _dataset_name(name: str) -> bool:
    """Whether a directory's entry belongs to its dataset: not ``_SUCCESS``, ``.crc``..."""
    return not name.startswith((".", "_"))


def _glob_name(name: str) -> bool:
    """Whether ``*`` and ``**`` match a name, as in :mod:`glob`: not a hidden one."""
    return not name.startswith(".")


def _data_file(path: str) -> str:
    """``path``, a regular file; ``ValueError`` naming it when it is anything else."""
    from .._source import not_a_data_file, refuse

    kind = not_a_data_file(path)
    if kind is not None:
        raise refuse(path, kind)
    return path


def _walk(root: str, keep: Callable[[str], bool]) -> Iterator[tuple[str, list[str]]]:
    """(folder, its other entries' names, sorted) for ``root`` and every folder below it
    whose name ``keep`` keeps, depth first in name order; symbolic links to folders are
    followed. A folder reached a second time (a link back to a folder above, or a second
    link to one) raises ``ValueError`` naming both paths."""
    seen: dict = {}

    def visit(folder: str) -> Iterator[tuple[str, list[str]]]:
        info = os.stat(folder)
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise ValueError(f"{folder!r} is the folder {seen[key]!r} again (a symbolic link "
                             f"loop, or a second link to it): a dataset's folders are read "
                             f"once")
        seen[key] = folder
        names, folders = [], []
        for name in sorted(os.listdir(folder)):
            if not keep(name):
                continue
            full = os.path.join(folder, name)
            (folders if os.path.isdir(full) else names).append(name)
        yield folder, names
        for name in folders:
            yield from visit(os.path.join(folder, name))

    yield from visit(root)


def _glob(pattern: str) -> list[str]:
    """The paths ``pattern`` matches, as :func:`glob.glob` (``recursive=True``) matches them,
    but with ``**`` walked by :func:`_walk`: a symbolic link loop raises ``ValueError``
    instead of being followed again and again."""
    parts = pattern.split(os.sep)
    base = 0
    while base < len(parts) - 1 and not glob.has_magic(parts[base]):
        base += 1
    root = os.sep.join(parts[:base]) or ("" if not pattern.startswith(os.sep) else os.sep)
    found: list[str] = []

    def match(folder: str, rest: list[str]) -> None:
        head, tail = rest[0], rest[1:]
        where = folder or os.curdir
        if head == "**":
            for below, _ in _walk(where, _glob_name):
                relative = os.path.relpath(below, where)
                match(folder if relative == os.curdir else os.path.join(folder, relative),
                      tail or ["*"])
            return
        if not glob.has_magic(head):
            names = [head] if os.path.lexists(os.path.join(where, head)) else []
        else:
            try:
                names = os.listdir(where)
            except OSError:
                return
            hidden = head.startswith(".")
            names = [n for n in names if (hidden or _glob_name(n)) and fnmatch.fnmatchcase(n, head)]
        for name in names:
            full = os.path.join(folder, name)
            if not tail:
                found.append(full)
            elif os.path.isdir(full):
                match(full, tail)

    if base and not os.path.isdir(root or os.curdir):
        return []
    match(root, parts[base:])
    return list(dict.fromkeys(found))


def _file_schema(path: str) -> Any:
    return _file_footer(path)[0]


def _row_groups(path: str) -> list[int]:
    """Rows of each row group (Parquet) or record batch (Arrow IPC), from the footer."""
    return _file_footer(path)[1]


def _file_footer(path: str) -> tuple:
    """(schema, rows of each row group (Arrow IPC: record batch), identity: the file's size
    and modification time), from the footer (and an IPC file's batch metadata)."""
    pa = _pyarrow()
    with SourceFile(path) as source:
        if _source_format(source) == "parquet":
            with source.python_file() as pyfile:
                try:
                    pf = _open_parquet(source, pyfile)
                    meta = pf.metadata
                    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
                    return pf.schema_arrow, groups, source.identity
                except (pa.ArrowException, OSError) as exc:
                    raise _pyarrow_error(source, exc) from exc
        from .._ipc import IpcFile

        ipc = IpcFile(source, pa)
        ipc.close()
        return ipc.schema, list(ipc.batch_rows), source.identity


def _check_schemas(files: list[str], schemas: list[Any]) -> None:
    """Every file's columns must be the first file's (names and types; order and metadata
    aside): a file that differs is refused before any document is sent, naming the file and
    the column."""
    first, reference = files[0], schemas[0]
    for path, schema in zip(files[1:], schemas[1:]):
        for field in reference:
            index = schema.get_field_index(field.name)
            if index < 0:
                raise ValueError(f"{path!r} has no column {field.name!r} (as {first!r} has): "
                                 f"the files of a dataset need the same columns")
            other = schema.field(index).type
            if other != field.type:
                raise ValueError(f"{path!r}: column {field.name!r} is {other}, but {field.type} "
                                 f"in {first!r}: the files of a dataset need the same columns")
        extra = [n for n in schema.names if reference.get_field_index(n) < 0]
        if extra:
            raise ValueError(f"{path!r} has a column {extra[0]!r} that {first!r} has not: the "
                             f"files of a dataset need the same columns")


def _units(files: list[str], groups: list[list[int]], done: Callable[[str], Any] | None,
           unit_rows: int) -> list[_Unit]:
    """Runs of row groups not in ``done(path)`` (the groups confirmed earlier, or none
    without ``done``), cut to about ``unit_rows`` rows (whole groups)."""
    units = []
    for path, sizes in zip(files, groups):
        skip = done(path) if done is not None else ()
        row = 0
        run: list[int] = []
        run_first_row = run_rows = 0

        def close_run() -> None:
            if run:
                units.append(_Unit(path, run[0], run[-1] + 1, run_first_row, run_rows))

        for index, size in enumerate(sizes):
            if index in skip or (run and run_rows + size > unit_rows):
                close_run()
                run, run_rows = [], 0
            if index not in skip:
                if not run:
                    run_first_row = row
                run.append(index)
                run_rows += size
            row += size
        close_run()
    return units


def _as_reader(data: Any, columns: list[str] | None = None) -> Any | None:
    """A ``pyarrow.RecordBatchReader`` over in-memory or streamed Arrow data (a Table, a
    RecordBatch, a RecordBatchReader, a ``pyarrow.dataset``, any object with
    ``__arrow_c_stream__``, an iterable of RecordBatches), or None for paths."""
    if isinstance(data, (str, bytes, os.PathLike, list, tuple)):
        return None
    pa = _pyarrow()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if isinstance(data, pa.RecordBatchReader):
        return data
    try:
        import pyarrow.dataset as pads
    except ImportError:  # pragma: no cover - pyarrow builds without datasets
        pads = None
    if pads is not None and isinstance(data, pads.Dataset):
        return data.scanner(columns=columns).to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if hasattr(data, "__iter__"):
        batches = iter(data)
        try:
            head = next(batches)
        except StopIteration:
            raise ValueError("path is an empty iterable: no record batch gives the schema") from None
        if not isinstance(head, pa.RecordBatch):
            raise TypeError(f"path: an iterable of pyarrow.RecordBatch, not of {type(head).__name__}")

        def chained() -> Iterator[Any]:
            yield head
            yield from batches
        return pa.RecordBatchReader.from_batches(head.schema, chained())
    raise TypeError(f"path must be a file, directory or glob (str or os.PathLike), a list of "
                    f"files, or Arrow data (an object with __arrow_c_stream__, a "
                    f"pyarrow.dataset, RecordBatches), not {type(data).__name__}")


def _reader_batches(reader: Any, plan: ColumnPlan, batch_rows: int) -> Iterator[Any]:
    """The reader's batches, cut to ``batch_rows`` and to the plan's columns (a stream's
    batches can be of any size: memory stays bounded by ``batch_rows``)."""
    for batch in reader:
        batch = batch.select(plan.read_columns)
        for offset in range(0, batch.num_rows, batch_rows):
            yield batch.slice(offset, batch_rows)


def _schema(source: str) -> Any:
    return _file_schema(source)


def _empty_batch(schema, names: Sequence[str]) -> Any:
    """A record batch without rows of the columns ``names`` of ``schema``: what the C encoder
    judges them on. Only the columns a load reads: the encoder imports every column of the
    batch it is given, and one it does not read (nested deeper than the import allows, say)
    must not stop a load that leaves it out. (Made from arrays of nulls: pyarrow's
    from_pylist and empty_table import pandas, which cost 0.3 s and 45 MB of memory.)"""
    pa = _pyarrow()
    fields = [schema.field(name) for name in dict.fromkeys(names)]
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in fields],
                                      schema=pa.schema(fields))
