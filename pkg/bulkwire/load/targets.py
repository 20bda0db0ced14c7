"""Where a load goes: the interface every kind of target implements, and its two kinds here.

A load is described by a :class:`TargetDescription`: a small picklable value (a worker
process receives it) that judges the Arrow schema and makes the plan and the encoder of its
kind, opens sessions (:class:`TargetSession`: one request, or one session, each) into which
the pipeline stores encoded batches, and, when its sessions are confirmed each on its own
(a :class:`ResumableTarget`), says what a resume state binds to. The pipeline
(:mod:`bulkwire.load.pipeline`, :mod:`bulkwire.load.workers`, :mod:`bulkwire.load.entry`)
talks to nothing else of a target.

The kinds here: a RavenDB database (:class:`ServerDescription`; its session,
:class:`_ServerTarget`, is a bulk insert), and the exact request body written to a file
(:class:`FileDescription`; its session, :class:`_FileTarget`). Both write documents, with
one plan and encoder (:class:`_DocumentDescription`). A description's ``compress`` is a
value of :mod:`bulkwire.compression`'s vocabulary, read by it (the load's
:class:`~bulkwire.LoadOptions` hold it in its canonical form).
"""
from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Mapping, Protocol, Sequence

from ..bulk import BulkInsert, BulkWriter
from ..compression import compress_encoding
from ..errors import BulkInsertAborted, BulkInsertError, _frames_let_go, _handed_over
from .._deprecated import renamed_fields, renamed_module_attributes
from ..load_options import DEFAULT_BUFFER_SIZE, RENAMED_CONSTANTS, RENAMED_OPTIONS, LoadOptions
from ..parquet import PathLike, _pyarrow
from ..urls import normalize_url, server_urls
from .plan import _Encoder, _metadata_json, _Plan, _plan

__getattr__ = renamed_module_attributes(__name__, RENAMED_CONSTANTS)


class ColumnPlan(Protocol):
    """What the pipeline reads of a kind's plan: the columns to read from the source (in
    the order the encoder wants them), and the column whose vectors' dimension is given to
    the encoder (None: no vector column)."""

    @property
    def read_columns(self) -> list[str]: ...

    @property
    def vector_column(self) -> str | None: ...


class BatchEncoder(Protocol):
    """A kind's encoder: called (on encoding threads, in any order; the pipeline keeps the
    file order) with a record batch of the plan's columns, the vector dimension found in the
    first batch (-1: none or unknown) and the source row number of the batch's first row.
    It returns the batch made ready for the target (for the bulk insert kinds, validated:
    the writer encodes it in one call), which the pipeline hands, as it is, to
    :meth:`TargetSession.store`, and raises :class:`~bulkwire.errors.RowError` for a bad
    row (the batch's row number: the pipeline names the source's row). An encoder may also
    have ``ahead``, called as it is on encoding threads instead (the batch's text written
    there too, so that the writer only takes it over; the body is the same either way);
    what either returns may have ``discard()``, called when the batch will not be stored,
    to give its memory back at once. It is also the one
    judge of the columns' types: called on a batch without rows, it raises what it would
    raise on the first batch. Picklable (sent to worker processes)."""

    @property
    def plan(self) -> ColumnPlan: ...

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any: ...


class TargetSession(Protocol):
    """One request into a target (one session: a bulk insert request, one file written
    whole): the encoded batches of one or more units of work, stored in order. Either
    :meth:`close` returns (the target confirmed every row stored) or :meth:`abort` is
    called (the pipeline then raises): a session never ends normally with batches
    missing."""

    def store(self, encoded: Any, rows: int) -> int:
        """Stores one batch as the encoder gave it (``rows`` rows); returns the body bytes it
        adds. Raises (naming the target) when the target refuses or cannot be reached."""
        ...

    def close(self) -> None:
        """Ends the session; returns once the target confirmed it, else raises."""
        ...

    def abort(self) -> None:
        """Stops the session, so the target does not take it as complete (again: a no-op).
        Raises nothing: the load's own error is the one that matters."""
        ...

    @property
    def body_bytes(self) -> int:
        """The encoded bytes stored."""
        ...

    @property
    def wire_bytes(self) -> int:
        """The bytes that went out (compressed, where the kind compresses)."""
        ...


class TargetDescription(Protocol):
    """What a load goes into, as :func:`~bulkwire.load.load_parquet` (or another entry) built
    it from its arguments, with every argument judged: a picklable value, which a worker
    process receives in its job and opens its own sessions from.

    The pipeline calls, in this order: :meth:`plan` and :meth:`encoder` (the schema judged,
    before any row is read), :meth:`placed` once the sources are known, :meth:`describe`,
    with ``resume`` the members of :class:`ResumableTarget`, then :meth:`open` once per
    session: per unit of work when :meth:`request_per_unit` says so, else once for all the
    units of a process. A kind with :attr:`units` is a :class:`ResumableTarget`; one without
    is never resumed."""

    @property
    def units(self) -> bool:
        """Whether each session is confirmed by the target on its own (a database): the
        units of work can then go in sessions of their own (worker processes, ``resume``),
        and the rows of a failed load that no session confirmed are named. False for one
        output written whole or not at all (a file): one session, in this process."""
        ...

    def plan(self, schema: Any, source: str, options: LoadOptions) -> ColumnPlan:
        """Judges ``schema`` (the Arrow schema of ``source``, named in errors) with the load's
        ``options`` (its :class:`~bulkwire.LoadOptions`, every value already checked there:
        ``id_column``, ``columns``, ...): which columns are read, and how. Raises
        ``ValueError`` or ``TypeError`` naming the column."""
        ...

    def encoder(self, schema: Any, plan: Any, options: LoadOptions) -> BatchEncoder:
        """The encoder of ``plan``'s batches, with the load's ``options``. The pipeline calls
        it on a batch without rows before any row is read."""
        ...

    def placed(self, path: Any, files: list[str] | None) -> "TargetDescription":
        """This description for the sources of the load (``path`` as given, ``files`` its
        data files, or None for Arrow data): a target whose place follows from them (the
        file's default name) takes it now. Raises ``ValueError`` when it cannot."""
        ...

    def describe(self) -> str:
        """The target for messages and :attr:`~bulkwire.load.LoadResult.target`."""
        ...

    def request_per_unit(self, resume: bool) -> bool:
        """Whether each unit of work needs a session of its own (with ``resume``, a unit is
        recorded once its session is confirmed)."""
        ...

    def open(self) -> TargetSession:
        """A new session (in the process that calls it: a worker opens its own)."""
        ...


class ResumableTarget(TargetDescription, Protocol):
    """A target with :attr:`~TargetDescription.units`: a load into it can record its units
    in a resume state, and a later load resume from there. Called with ``resume``:
    :meth:`resume_options`, :meth:`resume_identity`, and :meth:`checked_identity` / :meth:`identity_mismatch` when
    the state file exists; then :meth:`resuming` when it records earlier work."""

    def resuming(self) -> "ResumableTarget":
        """This description for a load that resumes an earlier one, whose sessions may send
        rows again that the target already holds (RavenDB: they are skipped when unchanged)."""
        ...

    def resume_options(self, encode: Any, options: LoadOptions) -> dict:
        """The options a resume state records (JSON), from the encoder and the load's
        :class:`~bulkwire.LoadOptions`: a state written with other options is refused, since
        the rows it confirmed were written otherwise."""
        ...

    def resume_identity(self) -> dict:
        """What a resume state binds to (JSON; never a credential), in one spelling: two
        descriptions of the same target give equal identities."""
        ...

    def checked_identity(self, recorded: Any) -> dict:
        """A state file's recorded identity (any JSON), judged and spelled as
        :meth:`resume_identity` spells it; ``ValueError`` saying what is wrong with it."""
        ...

    def identity_mismatch(self, recorded: dict) -> str:
        """Why a state recorded for ``recorded`` is not this load's (the rest of the
        sentence "resume state <path> ...")."""
        ...


class _FileTarget:
    """Without ``url``: the exact request body, written to ``path``. The commands go to a
    :class:`bulkwire.BulkWriter`, which frames the body; a thread writes its pieces (gzip:
    one stream at the fastest level, sync-flushed per piece, with the C core's own compressor:
    ISA-L when built in, else zlib; zstd: one frame, libzstd or the zstandard package).
    Written under a temporary name and renamed on success,
    so a failed load leaves no truncated body behind."""

    def __init__(self, path: str, compress: bool | str, buffer_size: int) -> None:
        self.path = path
        self.partial = path + ".partial"
        try:
            self._file = open(self.partial, "wb")
        except OSError as exc:  # named by the path the user gave, not the temporary one
            raise type(exc)(exc.errno, exc.strerror, path) from None
        try:
            self.writer = BulkWriter(compress=compress,
                                     buffer_size=buffer_size)
            self._error: BaseException | None = None  # the consumer's: the file's own error
            self._thread = threading.Thread(target=self._write_pieces, name="bulkwire-file",
                                            daemon=True)
            self._thread.start()
        except BaseException:  # no writer, or no thread: nothing was written, nothing stays
            self._file.close()
            _remove(self.partial)
            raise

    def _write_pieces(self) -> None:
        pieces = self.writer.pieces()
        try:
            for piece in pieces:
                self._file.write(piece)
                del piece
        except BaseException as exc:  # noqa: BLE001 - the producer raises it
            self._error = _handed_over(exc)
            self.writer.fail(exc)  # before the generator's own cleanup: this is the failure
        finally:
            pieces.close()
        if self._error is not None:
            _frames_let_go(self._error)

    def _raise_file_error(self) -> None:
        """The file's own error (a full disk) as it was, not as a bulk insert's."""
        if self._error is not None and not isinstance(self._error, BulkInsertError):
            raise self._error

    def store(self, encoded: Any, rows: int) -> int:
        """One prepared batch; returns the body bytes it adds (the separator included)."""
        if not rows:
            return 0
        try:
            return self.writer._store_prepared(encoded)
        except BulkInsertError:
            self._thread.join()
            self._raise_file_error()
            raise

    def close(self) -> None:
        try:
            self.writer.close()
        except BulkInsertError:
            self._thread.join()
            self._raise_file_error()
            raise
        self._thread.join()
        if self._error is not None:  # the last pieces could not be written
            raise self._error
        self._file.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        """Stops the writer and removes the partial output (again: a no-op)."""
        self.writer.fail(BulkInsertAborted("the load was stopped"))
        self._thread.join()
        self._file.close()
        _remove(self.partial)

    @property
    def wire_bytes(self) -> int:
        return self.writer.stats.wire_bytes

    @property
    def body_bytes(self) -> int:
        return self.writer.stats.body_bytes


class _ServerTarget:
    """``load_parquet(url=...)``: the batches' commands go to :class:`bulkwire.BulkInsert`
    (its bounded queue, compression on the sender thread, error messages, abort). The request
    starts with the first batch; no rows, no request."""

    def __init__(self, url: str | Sequence[str], database: str | None, compress: bool | str,
                 buffer_size: int, tls: Mapping[str, Any], skip_overwrite: bool = False):
        if database is None:
            raise ValueError("database is required with url")
        self.bulk = BulkInsert(url, database, compress=compress,
                               buffer_size=buffer_size, skip_overwrite_if_unchanged=skip_overwrite,
                               **tls)

    def store(self, encoded: Any, rows: int) -> int:
        """One prepared batch; returns the body bytes it adds (the separator included).
        The bulk insert's own errors pass as they are: a server's refusal is its
        :class:`~bulkwire.errors.ServerError` (``status``, ``body``, the request's URL in the
        message), a network failure its :class:`~bulkwire.errors.TransportError`."""
        if not rows:
            return 0
        return self.bulk._store_prepared(encoded)

    def close(self) -> None:
        self.bulk.close()

    def abort(self) -> None:
        """Stop sending and kill the operation (errors while doing so are dropped: the load's
        own error is the one that matters)."""
        try:
            self.bulk.abort()
        except Exception:  # noqa: BLE001
            pass

    @property
    def wire_bytes(self) -> int:
        return self.bulk.stats.wire_bytes

    @property
    def body_bytes(self) -> int:
        return self.bulk.stats.body_bytes


def _remove(path: str) -> None:
    """Removes a file this load made (a partial output, a temporary state), if it is there."""
    try:
        os.unlink(path)
    except OSError:
        pass


def default_out(path: PathLike, compress: bool | str) -> str:
    """``<name>.bulk.json`` (``.bulk.json.gz`` with gzip, ``.bulk.json.zst`` with zstd) next
    to the source file.

    >>> default_out("data/points.parquet", "zstd")
    'data/points.bulk.json.zst'
    """
    root, _ = os.path.splitext(os.fspath(path))
    encoding = compress_encoding(compress)
    return root + {None: ".bulk.json", "gzip": ".bulk.json.gz", "zstd": ".bulk.json.zst"}[encoding]


def _default_out(path: Any, files: list[str] | None, compress: bool | str) -> str:
    if files is not None and not isinstance(path, (list, tuple)) and os.path.isdir(path):
        return default_out(os.path.normpath(os.fspath(path)), compress)
    if files is not None and len(files) == 1:
        return default_out(files[0], compress)
    raise ValueError("out is needed to write the request body of a dataset of several files "
                     "or of Arrow data (or give url to load into a server)")


def _cut(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a hand-edited state can hold anything,
    nested as deep as JSON goes: reprlib does not descend far)."""
    import reprlib

    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = limit
    return _cut(shortened.repr(value), limit)


# ------------------------------------------------------------------------------ descriptions

@dataclass(frozen=True, kw_only=True)
class _DocumentDescription:
    """The plan and encoder of the kinds that write RavenDB documents (a server, a file of
    the request body): each row a PUT command of the columns and ``@metadata``
    (:func:`~bulkwire.load.plan._plan`, :class:`~bulkwire.load.plan._Encoder`)."""

    compress: bool | str = False
    buffer_size: int = DEFAULT_BUFFER_SIZE

    def plan(self, schema: Any, source: str, options: LoadOptions) -> _Plan:
        return _plan(schema, source, options.id_column, options.vector_column, options.columns)

    def encoder(self, schema: Any, plan: _Plan, options: LoadOptions) -> _Encoder:
        collection, id_prefix = options.collection, options.id_prefix
        if id_prefix is None:
            is_integer = _pyarrow().types.is_integer(schema.field(plan.id_column).type)
            id_prefix = f"{collection.lower()}/" if is_integer else ""
        metadata_json = _metadata_json(collection, options.python_type, options.metadata)
        return _Encoder(plan, id_prefix, metadata_json, options.float32, self.buffer_size)

    def resume_options(self, encode: _Encoder, options: LoadOptions) -> dict:
        return {"collection": options.collection, "id_column": encode.plan.id_column,
                "id_prefix": encode.id_prefix, "fields": encode.plan.fields,
                "vector_column": encode.plan.vector_column, "float32": encode.float32,
                "metadata": encode.metadata.decode()}


@renamed_fields(**RENAMED_OPTIONS)
@dataclass(frozen=True, kw_only=True)
class ServerDescription(_DocumentDescription):
    """A RavenDB database (``url``: one server's URL or a cluster's node URLs, judged by
    :func:`bulkwire.topology.open_servers` before this is made): each session a bulk insert
    request (:class:`_ServerTarget`)."""

    url: str | Sequence[str]
    database: str
    #: certificate= and ca= (ssl_context= too, in this process: it cannot be pickled)
    tls: Mapping[str, Any] = dataclass_field(default_factory=dict)
    #: a resumed load: documents the server holds unchanged are not written again
    skip_overwrite: bool = False

    units = True

    def placed(self, path: Any, files: list[str] | None) -> "ServerDescription":
        return self

    def describe(self) -> str:
        return f"{', '.join(map(str, server_urls(self.url)))} (database {self.database})"

    def request_per_unit(self, resume: bool) -> bool:
        return resume

    def resuming(self) -> "ServerDescription":
        return dataclasses.replace(self, skip_overwrite=True)

    def open(self) -> "_ServerTarget":
        return _ServerTarget(self.url, self.database, self.compress, self.buffer_size, self.tls,
                             skip_overwrite=self.skip_overwrite)

    def resume_identity(self) -> dict:
        return _resume_target(self.url, self.database)

    def checked_identity(self, recorded: Any) -> dict:
        """``{"database": name, "servers": [URL, ...]}``, the URLs normalized and sorted."""
        if not (isinstance(recorded, dict) and set(recorded) == {"database", "servers"}
                and isinstance(recorded["database"], str) and recorded["database"]
                and isinstance(recorded["servers"], list) and recorded["servers"]):
            raise ValueError(f"target is {_short(recorded)}, not an object of a database name "
                             f"and a list of server URLs")
        try:
            servers = sorted({normalize_url(url, f"target.servers[{i}]")
                              for i, url in enumerate(recorded["servers"])})
        except TypeError as exc:  # a server that is not a str: a state of the wrong shape
            raise ValueError(str(exc)) from None
        return {"database": recorded["database"], "servers": servers}

    def identity_mismatch(self, recorded: dict) -> str:
        return (f"was written by a load into {_cut(_describe_target(recorded), 300)}; this "
                f"load is into {_describe_target(self.resume_identity())}: a state file "
                f"belongs to one database on one server or cluster (give this load its own "
                f"state file)")


@renamed_fields(**RENAMED_OPTIONS)
@dataclass(frozen=True, kw_only=True)
class FileDescription(_DocumentDescription):
    """The exact request body, written to the file ``out`` (by default, once the sources are
    known, ``<name>.bulk.json[.gz|.zst]`` next to them): one session, written whole or
    removed (:class:`_FileTarget`)."""

    #: the path given (None: the default, once :meth:`placed`), then the file's name
    out: Any

    units = False

    def placed(self, path: Any, files: list[str] | None) -> "FileDescription":
        out = (os.fspath(self.out) if self.out is not None
               else _default_out(path, files, self.compress))
        return dataclasses.replace(self, out=out)

    def describe(self) -> str:
        return self.out

    def request_per_unit(self, resume: bool) -> bool:
        return False

    def open(self) -> "_FileTarget":
        return _FileTarget(self.out, self.compress, self.buffer_size)


def _resume_target(url: Any, database: str) -> dict:
    """The target a resume state belongs to: the database, and the set of its servers'
    normalized URLs (:func:`bulkwire.urls.normalize_url`: one spelling per server, never
    credentials), sorted: a cluster given with its nodes in another order is the same target."""
    return {"database": database, "servers": sorted({str(u) for u in server_urls(url)})}


def _describe_target(target: Mapping[str, Any]) -> str:
    return f"database {target['database']!r} at {', '.join(target['servers'])}"
