"""What both the random access (:class:`bulkwire.parquet.TableFile`) and the load
(``bulkwire.load``) need of a source file: its format by its magic bytes, pyarrow's errors
named by the file, a Parquet footer opened, a batch's buffer sizes checked, and row indices
judged. Imported from :mod:`bulkwire.parquet` as before."""
from __future__ import annotations

import operator
import os
from typing import Any

import numpy as np

from ._arrow import _pyarrow
from .errors import MalformedFileError


_PARQUET_MAGIC = b"PAR1"
_ARROW_MAGIC = b"ARROW1"


def _source_format(source: Any) -> str:
    """"parquet" or "ipc", by the magic bytes at the start of an open
    :class:`._source.SourceFile`."""
    head = os.pread(source.fd, 6, 0)
    if head[:4] == _PARQUET_MAGIC:
        return "parquet"
    if head == _ARROW_MAGIC:
        return "ipc"
    raise ValueError(f"{source.path!r} is neither a Parquet file nor an Arrow IPC file "
                     f"(starts with {head!r})")


def _file_format(path: str) -> str:
    from ._source import SourceFile

    with SourceFile(path) as source:
        return _source_format(source)


def _pyarrow_error(source: Any, exc: BaseException, where: str = "") -> Exception:
    """The error to raise for what pyarrow raised reading the open
    :class:`._source.SourceFile` ``source`` (``where``: what it was reading, for the
    message), naming the file: an ``OSError`` with an errno is the system's; pyarrow's own
    errors, and the bare ``OSError`` (no errno, no file named) it raises for some files it
    refuses (a schema nested deeper than it reads), say the file is malformed, or that it
    changed since it was opened when it did (see :meth:`._source.SourceFile.read_error`)."""
    if isinstance(exc, OSError) and exc.errno:
        return source.read_error(exc)
    return source.read_error(f"{where}{exc}")


def _open_parquet(source: Any, pyfile: Any, **options: Any) -> Any:
    """``pyarrow.parquet.ParquetFile`` on ``pyfile`` (a file object of the open
    :class:`._source.SourceFile` ``source``), its schema read. A footer or schema pyarrow
    refuses (corrupt, or nested too deeply) raises :class:`~bulkwire.errors.MalformedFileError`
    naming the file (see :func:`_pyarrow_error`)."""
    pa = _pyarrow()
    try:
        parquet = pa.parquet.ParquetFile(pyfile, **options)
        parquet.schema_arrow
        return parquet
    except (pa.ArrowException, UnicodeDecodeError, OSError) as exc:
        raise _pyarrow_error(source, exc) from exc


def _check_batch(batch: Any, source: str) -> None:
    """pyarrow's checks of a record batch read from a file: the sizes of its buffers against
    the lengths, offsets and last string/list offsets that will be read. The Arrow C Data
    Interface carries no buffer sizes, so the C readers (which check everything else: see
    ``csrc/arrow_c.h``) cannot; a crafted or corrupt file is refused here with
    :class:`~bulkwire.errors.MalformedFileError` (as :class:`TableFile` refuses it), naming
    the file and the column. Constant time per column (``Array.validate()``, not
    ``full=True``)."""
    pa = _pyarrow()
    for name, column in zip(batch.schema.names, batch.columns):
        try:
            column.validate()
        except pa.ArrowException as exc:
            raise MalformedFileError(f"{source!r} is malformed: column {name!r}: {exc}",
                                     source) from None


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
