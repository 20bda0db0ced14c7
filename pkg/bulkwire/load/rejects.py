"""Rejected rows: with ``max_errors``, a row that the encoder (or, for CQL, the server)
refuses is taken out of its batch and written, with where it came from and why, to the
rejected file; the rest of the batch goes on (:class:`_Rejects`). Also the dry run's session,
which stores nothing (:class:`_DrySession`).

The rejected rows are written as they come to a log next to the rejected file
(``<rejected>.partial.<name>``, an Arrow IPC stream, flushed after each write: a process that
dies leaves the rows written so far readable), one log per process. When the load ends,
completed or failed, the logs are joined into the rejected file, in the source's format,
written under a temporary name and renamed (:func:`_finish`): a file with the rejected
file's name is always complete. With ``resume``, a failed load keeps its logs, and the next
run carries over the rows of the units the resume state records as confirmed
(:func:`_carry_over`); the rows of the others are read, and rejected, again.
"""
from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import LoadError, RowError
from .._arrow import _pyarrow
from .interface import _remove

#: The columns a rejected file adds to the source's: the source file, the row's number in it
#: and why it was refused. A source whose schema has all three is a rejected file: a load
#: reads its other columns only.
REJECT_COLUMNS = ("_source_file", "_row", "_reason")


def max_errors_limit(max_errors: int | str | None, total: int | None) -> int | None:
    """The rows a load may reject (a count, or ``"P%"`` of ``total`` rows); None: no limit
    known yet (a fraction of a stream whose rows are not known: judged at the end).

    >>> max_errors_limit(5, None), max_errors_limit("1%", 1000), max_errors_limit("0.1%", 999)
    (5, 10, 0)
    """
    if max_errors is None:
        return None
    if isinstance(max_errors, int):
        return max_errors
    if total is None:
        return None
    return int(float(max_errors[:-1]) / 100 * total)


def source_schema(schema: Any) -> Any:
    """``schema`` without the columns a rejected file adds, when it has all three."""
    names = set(schema.names)
    if not all(name in names for name in REJECT_COLUMNS):
        return schema
    pa = _pyarrow()
    return pa.schema([f for f in schema if f.name not in REJECT_COLUMNS])


@dataclass(frozen=True)
class _RejectSpec:
    """What a process needs to write rejected rows (picklable: sent to worker processes):
    the rejected file, the logs' schema, the most rows it may reject (None: no limit) and
    the rule's words for the error."""

    path: str | None
    schema: Any
    limit: int | None
    rule: str
    #: the length every vector of a list column must have: the most common one of the load's
    #: first rows (the first file's first batch, whatever a resumed run skips, so that every
    #: run judges alike); None: the first batch the process encodes says
    vector_dim: int | None = None

    def log(self, name: str) -> str | None:
        return None if self.path is None else f"{self.path}.partial.{name}"


class TooManyRejected(LoadError):
    """More rows were rejected than ``max_errors`` allows: the load stops."""


class _Rejects:
    """One process's rejected rows: written to its log as they come (under a lock: encoding
    threads reject), counted, and the load stopped once more than the limit were."""

    def __init__(self, spec: _RejectSpec, name: str) -> None:
        self.spec = spec
        self.count = 0
        self.unreported = 0  # rows rejected and not yet told to the parent (workers)
        self.lock = threading.Lock()
        self.path = spec.log(name)
        self.file: Any = None
        self.writer: Any = None
        self.broken = False  # a write failed (the disk full): the log ends at its last batch
        if self.path is not None:
            pa = _pyarrow()
            self.file = _open_log(self.path)
            try:
                self.writer = pa.ipc.new_stream(self.file, spec.schema)
                self.file.flush()
            except BaseException:
                self.file.close()
                raise

    def close(self) -> None:
        with self.lock:
            if self.writer is not None:
                try:
                    self.writer.close()
                except Exception:  # noqa: BLE001 - a write failed already: that error is raised
                    if not self.broken:
                        raise
                finally:
                    self.writer = None
                    self.file.close()

    def add(self, rows: Any, source: str, numbers: Sequence[int],
            reasons: Sequence[str]) -> None:
        """Writes the record batch ``rows`` (the source's ``numbers``, refused for
        ``reasons``); raises :class:`TooManyRejected` once the limit is passed."""
        pa = _pyarrow()
        n = rows.num_rows
        with self.lock:
            if self.writer is not None:
                fields = self.spec.schema
                columns = []
                for f in list(fields)[:-len(REJECT_COLUMNS)]:
                    column = rows.column(f.name)
                    columns.append(column if column.type == f.type else column.cast(f.type))
                columns += [_strings([source] * n), _int64s(numbers), _strings(reasons)]
                try:
                    self.writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=fields))
                    self.file.flush()
                except OSError as exc:
                    self.broken = True
                    raise OSError(exc.errno, f"cannot write the rejected rows to "
                                             f"{self.path!r}: {exc.strerror or exc}") from None
            self.count += n
            self.unreported += n
            if self.spec.limit is not None and self.count > self.spec.limit:
                raise TooManyRejected(
                    f"{self.count:,} rows rejected, more than max_errors allows "
                    f"({self.spec.rule}): the load stops (the last refused: {source!r} row "
                    f"{numbers[-1]}: {reasons[-1]})")

    def take_unreported(self) -> int:
        with self.lock:
            n, self.unreported = self.unreported, 0
        return n

    def checked(self, encode: Callable, check: Callable, batch: Any, dim: int, row_base: int,
                source: str, idx: Any) -> tuple[Any, int]:
        """``(encoded, rows)`` of ``batch`` without its refused rows, which go to the log
        (``encode`` makes what is stored; ``check``, the encoder itself, only judges). An
        encoder that judges every row in one pass (its ``refusing``: the CQL one) encodes
        the batch once, its refused rows left out and listed with their reasons
        (:meth:`_set_aside`). Otherwise the
        batch is encoded whole first: a batch without a bad row costs nothing more. When the
        encoder refuses a row, the rows refused for the same reason are found at once by
        Arrow compute (the column's nulls, the vectors of another length, the vectors
        holding a null), each confirmed by judging it alone; when none is, the rows after
        it are judged on, from one refusal to the next; then the rows left are encoded once
        (and judged again when that is refused). ``(None, 0)`` when every row was
        refused."""
        refusing = getattr(encode, "refusing", None)
        if refusing is not None:
            try:
                encoded, refused = refusing(batch, dim, row_base)
            except RowError as exc:  # judged before the rows (a per-row TTL): as below
                error = exc
            else:
                if not refused:
                    return _Kept(encoded, batch, None, row_base, source, idx), batch.num_rows
                return self._set_aside(encoded, refused, batch, row_base, source, idx)
        else:
            try:
                return _Kept(encode(batch, dim, row_base), batch, None, row_base, source,
                             idx), batch.num_rows
            except RowError as exc:
                error = exc
        import numpy as np

        read = batch  # the batch read, which the rows kept are taken from
        positions = None  # the rows of ``batch`` in the batch read (None: the same)
        while True:
            reasons: dict[int, str] = {}
            start = 0
            while True:
                at = error.row - row_base
                if not start <= at < batch.num_rows:  # not a row of this batch
                    raise error
                if at not in reasons:
                    reasons[at] = f"column {error.column!r}: {error.reason}"
                    alike = False  # rows refused like it were found
                    nulls = _refused_nulls(batch, error.column, at)
                    if nulls is not None:
                        # the encoder refused a null of this column: it refuses every null
                        # of it, for the same reason (its rule is the column's, not the
                        # row's), so they need no judging one by one
                        for other in nulls.tolist():
                            reasons.setdefault(other, reasons[at])
                        alike = len(nulls) > 1
                    for other in [] if nulls is not None else _suspects(batch, error.column,
                                                                         at, dim):
                        if other not in reasons:
                            try:
                                _discard(check(batch.slice(other, 1), dim, 0))
                            except RowError as alone:
                                reasons[other] = f"column {alone.column!r}: {alone.reason}"
                                alike = True
                    if alike:  # the rows left are judged by encoding them, below
                        break
                start = at + 1
                if start >= batch.num_rows:
                    break
                try:  # the rows after it (those found bad already are refused again)
                    _discard(check(batch.slice(start), dim, row_base + start))
                    break
                except RowError as exc:
                    error = exc
            bad = np.array(sorted(reasons), dtype=np.int64)
            read = bad if positions is None else positions[bad]
            numbers = ((read + row_base).tolist() if idx is None
                       else [int(idx[r]) for r in read + row_base])
            self.add(batch.take(_int64s(bad)), source, numbers,
                     [reasons[int(b)] for b in bad])
            keep = np.ones(batch.num_rows, dtype=bool)
            keep[bad] = False
            kept = np.flatnonzero(keep)
            positions = kept if positions is None else positions[kept]
            batch = batch.take(_int64s(kept))
            if batch.num_rows == 0:
                return None, 0
            try:
                return (_Kept(encode(batch, dim, row_base), read, positions, row_base, source,
                              idx), batch.num_rows)
            except RowError as exc:  # refused only among other rows: judged again
                error = exc

    def _set_aside(self, encoded: Any, refused: list, batch: Any, row_base: int, source: str,
                   idx: Any) -> tuple[Any, int]:
        """``(encoded, rows)`` of ``batch``, of which the encoder wrote every row but those
        of ``refused`` (``(row, column, reason)``, the rows counted from ``row_base``, in
        order), which go to the log, each with the reason RowError would give it."""
        import numpy as np

        try:
            bad = np.fromiter((r for r, _, _ in refused), dtype=np.int64,
                              count=len(refused)) - row_base
            if bad[0] < 0 or bad[-1] >= batch.num_rows:  # not a row of this batch: raised
                row, column, reason = refused[0 if bad[0] < 0 else -1]
                raise RowError(column, row, reason)
            numbers = ((bad + row_base).tolist() if idx is None
                       else [int(idx[r]) for r in bad + row_base])
            self.add(batch.take(_int64s(bad)), source, numbers,
                     [f"column {column!r}: {reason}" for _, column, reason in refused])
        except BaseException:
            _discard(encoded)
            raise
        keep = np.ones(batch.num_rows, dtype=bool)
        keep[bad] = False
        kept = np.flatnonzero(keep)
        if len(kept) == 0:
            _discard(encoded)
            return None, 0
        return _Kept(encoded, batch, kept, row_base, source, idx), len(kept)


@dataclass
class _Kept:
    """A batch checked by :meth:`_Rejects.checked`: the encoded rows, the rows themselves
    and their places in the batch read (``positions``; None: all of them), where the batch
    read begins (``row_base``, in ``source``; with ``take``, ``idx``): what a row the
    server refuses is written with. ``batch`` is the batch read, whose rows ``positions``
    are."""

    encoded: Any
    batch: Any
    positions: Any
    row_base: int
    source: str
    idx: Any

    def discard(self) -> None:
        _discard(self.encoded)

    def refused(self, rejects: "_Rejects", row: int, reason: str) -> None:
        """Writes the batch's ``row``, which the server refused for ``reason``."""
        at = row if self.positions is None else int(self.positions[row])
        number = self.row_base + at if self.idx is None else int(self.idx[self.row_base + at])
        rejects.add(self.batch.slice(at, 1), self.source, [number], [reason])


def _discard(encoded: Any) -> None:
    discard = getattr(encoded, "discard", None)
    if discard is not None:
        discard()


def _refused_nulls(batch: Any, column: str, at: int) -> Any:
    """The rows where ``column`` of ``batch`` is null, when it is null at ``at`` (the row the
    encoder refused); None otherwise."""
    if column not in batch.schema.names:
        return None
    values = batch.column(column)
    if values[at].is_valid:
        return None
    return _null_rows(values)


def _suspects(batch: Any, column: str, at: int, dim: int) -> list[int]:
    """The rows of ``batch`` likely refused for the reason row ``at`` of ``column`` was: the
    column's nulls when it is null there; for a list column, the lists of another length
    than ``dim`` or the lists holding a null. Only candidates: each is judged on its own."""
    import numpy as np

    pa = _pyarrow()
    if column not in batch.schema.names:
        return [at]
    values = batch.column(column)
    nulls = _null_rows(values)
    if not values[at].is_valid:
        return nulls.tolist() or [at]
    t = values.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        return [at]
    import pyarrow.compute as pc

    lengths = _ints(pc.list_value_length(values)).copy()
    lengths[nulls] = -1
    if dim > 0 and lengths[at] != dim:
        return np.flatnonzero((lengths != dim) & (lengths >= 0)).tolist()
    flat = pc.list_flatten(values)
    parents = _ints(pc.list_parent_indices(values))
    holes = _ints(pc.indices_nonzero(pc.is_null(flat)))
    return np.unique(parents[holes]).tolist() or [at]


# Arrays made and read through their buffers: pyarrow's ``pa.array`` and ``to_numpy`` import
# pandas (0.3 s of CPU and 45 MB, a load with a rejected row would pay it once).

def _null_rows(values: Any) -> Any:
    """The rows where the Arrow array ``values`` is null, from its validity bitmap."""
    import numpy as np

    n = len(values)
    if values.null_count == 0 or values.buffers()[0] is None:
        return np.arange(n) if values.null_count == n and n else np.zeros(0, dtype=np.int64)
    bits = np.unpackbits(np.frombuffer(values.buffers()[0], dtype=np.uint8),
                         count=values.offset + n, bitorder="little")[values.offset:]
    return np.flatnonzero(bits == 0)


def _ints(array: Any) -> Any:
    """The values of an Arrow integer array as int64 NumPy (a null's value is whatever its
    slot holds: the caller knows where they are)."""
    import numpy as np

    t = array.type
    dtype = np.dtype(f"{'u' if _pyarrow().types.is_unsigned_integer(t) else 'i'}"
                     f"{t.bit_width // 8}")
    data = array.buffers()[1]
    if data is None or len(array) == 0:
        return np.zeros(0, dtype=np.int64)
    view = np.frombuffer(data, dtype=dtype, count=array.offset + len(array))
    return view[array.offset:].astype(np.int64)


def _int64s(values: Any) -> Any:
    """An Arrow int64 array of ``values`` (integers)."""
    import numpy as np

    pa = _pyarrow()
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def _strings(values: Sequence[str]) -> Any:
    """An Arrow string array of ``values``."""
    import numpy as np

    pa = _pyarrow()
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def _open_log(path: str) -> Any:
    """The log opened for writing (created, or emptied); an OSError naming it otherwise."""
    try:
        return open(path, "wb")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the rejected rows to {path!r}: "
                                 f"{exc.strerror or exc}") from None


def _logs(path: str) -> list[str]:
    return sorted(glob.glob(glob.escape(path) + ".partial.*"))


def _log_batches(path: str) -> Any:
    """The record batches of a log, up to the last one written whole (a process that died
    while writing leaves a batch cut short: it is not read)."""
    pa = _pyarrow()
    try:
        with open(path, "rb") as f:
            reader = pa.ipc.open_stream(f)
            while True:
                try:
                    yield reader.read_next_batch()
                except StopIteration:
                    return
    except (pa.ArrowInvalid, OSError, EOFError):
        return


def _file_rows(path: str) -> Any:
    """The record batches of a rejected file (Parquet or Arrow IPC); none when there is no
    such file or it cannot be read."""
    pa = _pyarrow()
    import pyarrow.parquet as pq

    try:
        yield from pq.ParquetFile(path).iter_batches()
        return
    except (pa.ArrowException, OSError):
        pass
    try:
        with pa.memory_map(path) as f:
            reader = pa.ipc.open_file(f)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
    except (pa.ArrowException, OSError):
        return


def _prepare(spec: _RejectSpec, resume: Any) -> None:
    """Before a load with a rejected file: its folder checked writable (an OSError naming the
    file, before anything is sent). Logs of an earlier run are removed, unless this load
    resumes one: then the rows of the units it confirmed are carried over to one log, and
    the others left to be rejected again."""
    assert spec.path is not None
    folder = os.path.dirname(os.path.abspath(spec.path))
    probe = f"{spec.path}.partial.probe"
    try:
        with open(probe, "wb"):
            pass
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the rejected rows to {spec.path!r} (in "
                                 f"{folder!r}): {exc.strerror or exc}") from None
    finally:
        _remove(probe)
    old = [log for log in _logs(spec.path) if not log.endswith(".carried.tmp")]
    if resume is not None and resume.resumed and (old or os.path.exists(spec.path)):
        _carry_over(spec, old, resume)
    else:
        for log in old:
            _remove(log)


def _carry_over(spec: _RejectSpec, old: list[str], resume: Any) -> None:
    """The rows of the logs ``old`` and of the rejected file an earlier run left whose units
    ``resume`` records as confirmed, each once, to the log ``carried`` (written whole, then
    renamed); the old logs removed."""
    import bisect

    import numpy as np

    pa = _pyarrow()
    starts: dict[str, list[int]] = {}
    for name, (_, _, sizes) in resume.sources.items():
        starts[name] = list(np.cumsum([0] + list(sizes))[:-1])
    seen: set = set()
    temporary = spec.log("carried.tmp")
    with _open_log(temporary) as f:
        writer = pa.ipc.new_stream(f, spec.schema)
        for log in old + [spec.path]:
            for batch in (_log_batches(log) if log != spec.path else _file_rows(log)):
                if batch.schema != spec.schema:
                    continue  # not this load's (another source's columns)
                files = batch.column("_source_file").to_pylist()
                rows = batch.column("_row").to_pylist()
                keep = []
                for i, (name, row) in enumerate(zip(files, rows)):
                    absolute = os.path.abspath(name)
                    if absolute not in starts or (absolute, row) in seen:
                        continue
                    group = bisect.bisect_right(starts[absolute], row) - 1
                    if group in resume.done[absolute]:
                        seen.add((absolute, row))
                        keep.append(i)
                if keep:
                    writer.write_batch(batch.take(_int64s(keep)))
        writer.close()
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, spec.log("carried"))
    for log in old:
        if log != spec.log("carried"):
            _remove(log)


def _finish(spec: _RejectSpec, file_format: str, keep_logs: bool) -> int:
    """Joins the logs into the rejected file (``"parquet"`` or ``"ipc"``), written under a
    temporary name, synced and renamed; the logs removed unless ``keep_logs`` (a failed
    load that will be resumed). The rows in the file."""
    assert spec.path is not None
    pa = _pyarrow()
    temporary = f"{spec.path}.{os.getpid()}.tmp"
    rows = 0
    logs = _logs(spec.path)
    try:
        with open(temporary, "wb") as f:
            if file_format == "parquet":
                import pyarrow.parquet as pq

                writer = pq.ParquetWriter(f, spec.schema)
            else:
                writer = pa.ipc.new_file(f, spec.schema)
            try:
                for log in logs:
                    for batch in _log_batches(log):
                        writer.write_batch(batch)
                        rows += batch.num_rows
            finally:
                writer.close()
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, spec.path)
    except BaseException:
        _remove(temporary)
        raise
    if not keep_logs:
        for log in logs:
            _remove(log)
    return rows


class _DrySession:
    """A dry run's session: every batch checked by the encoder is taken and dropped;
    nothing is sent or written."""

    body_bytes = 0
    wire_bytes = 0

    def store(self, encoded: Any, rows: int) -> int:
        _discard(encoded)
        return 0

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass
