"""A RavenDB database as a load's target, and its request body written to a file: the two
kinds that write the bulk insert's body (:func:`ravendb`, :func:`request_file`, listed in
:mod:`bulkwire.targets`).

A RavenDB database (:class:`ServerDescription`; its session, :class:`_ServerTarget`, is a
bulk insert), and the exact request body written to a file (:class:`FileDescription`; its
session, :class:`_FileTarget`). Both write documents, with one plan and encoder
(:class:`_DocumentDescription`, whose fields are the
:class:`~bulkwire.document_options.DocumentOptions`). A description's ``compress`` is a
value of :mod:`bulkwire.compression`'s vocabulary, read by it.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass, field as dataclass_field
from typing import Any, ClassVar, Mapping, Sequence

from .._arrow import PathLike, _pyarrow
from ..bulk import BulkInsert, BulkWriter
from ..compression import compress_encoding
from ..document_options import DOCUMENT_DEFAULTS, DocumentOptions
from ..errors import BulkInsertAborted, BulkInsertError
from .._deprecated import renamed_fields
from ..load_options import RENAMED_OPTIONS, LoadOptions
from ..urls import normalize_url, server_urls
from .interface import DescriptionDefaults, _cut, _remove, _short, kind_constructor
from .plan import _Encoder, _metadata_json, _Plan, _plan

_D = DOCUMENT_DEFAULTS


class _FileTarget:
    """A session of :func:`request_file`'s target: the exact request body, written to ``path``. The commands go to a
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
            self._error = exc
            self.writer.fail(exc)  # before the generator's own cleanup: this is the failure
        finally:
            pieces.close()

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
    """A session of :func:`ravendb`'s target: the batches' commands go to :class:`bulkwire.BulkInsert`
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


# ------------------------------------------------------------------------------ descriptions

@dataclass(frozen=True, kw_only=True)
class _DocumentDescription(DocumentOptions, DescriptionDefaults):
    """The plan and encoder of the kinds that write RavenDB documents (a server, a file of
    the request body, a JSON Lines file): each row a PUT command of the columns and
    ``@metadata`` (:func:`~bulkwire.load.plan._plan`, :class:`~bulkwire.load.plan._Encoder`),
    made with the description's own document options (its fields of
    :class:`~bulkwire.document_options.DocumentOptions`) and the load's ``columns`` and
    ``vector_column``."""

    def plan(self, schema: Any, source: str, options: LoadOptions) -> _Plan:
        return _plan(schema, source, self.id_column, options.vector_column, options.columns)

    def encoder(self, schema: Any, plan: _Plan, options: LoadOptions) -> _Encoder:
        collection, id_prefix = self.collection, self.id_prefix
        if id_prefix is None:
            is_integer = _pyarrow().types.is_integer(schema.field(plan.id_column).type)
            id_prefix = f"{collection.lower()}/" if is_integer else ""
        metadata_json = _metadata_json(collection, self.python_type, self.metadata)
        return _Encoder(plan, id_prefix, metadata_json, self.float32, self.buffer_size)

    def resume_options(self, encode: _Encoder, options: LoadOptions) -> dict:
        return {"collection": self.collection, "id_column": encode.plan.id_column,
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
    kind: ClassVar[str] = "ravendb"
    #: a failure of a load into it is a bulk insert's
    load_error: ClassVar[type] = BulkInsertError

    def describe(self) -> str:
        return f"{', '.join(map(str, server_urls(self.url)))} (database {self.database})"

    def __getstate__(self) -> dict:
        if "ssl_context" in self.tls:
            raise TypeError("ssl_context cannot be sent to worker processes: give certificate= "
                            "and ca= instead")
        return dict(self.__dict__)

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
    kind: ClassVar[str] = "request_file"

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


# ------------------------------------------------------------------------------ constructors

@kind_constructor("ravendb")
def ravendb(url: str | Sequence[str], database: str, *, certificate: Any = None,
            ca: Any = None, ssl_context: Any = None,
            collection: str = _D["collection"], id_column: str = _D["id_column"],
            id_prefix: str | None = _D["id_prefix"],
            metadata: Mapping[str, Any] | None = _D["metadata"],
            python_type: str | None = _D["python_type"], float32: str = _D["float32"],
            compress: bool | str = _D["compress"],
            buffer_size: int = _D["buffer_size"]) -> ServerDescription:
    """A RavenDB database as a load's target: each row a document (a PUT command of a bulk
    insert request), written as :func:`bulkwire.load_parquet` describes.

    ``url``: one server's URL or a list of a cluster's node URLs, as
    :class:`bulkwire.BulkInsert` takes it; ``database``: its name. ``certificate``, ``ca``,
    ``ssl_context`` (with an ``https://`` URL): TLS, as for :class:`bulkwire.BulkInsert`
    (``ssl_context`` cannot be sent to worker processes). The document options
    (:class:`~bulkwire.document_options.DocumentOptions`): ``collection``, ``id_column``,
    ``id_prefix``, ``metadata``, ``python_type``, ``float32``; ``compress``, the request
    body's compression (True or ``"gzip"``, ``"zstd"``); ``buffer_size``, the writer's
    buffer. Every value is judged now (the URLs normalized, the TLS files read), before
    anything is read or sent: ``ValueError`` or ``TypeError`` naming it.

    >>> from bulkwire import targets
    >>> target = targets.ravendb("http://127.0.0.1:8080", "db", collection="Points")
    >>> target.describe(), target.collection
    ('http://127.0.0.1:8080 (database db)', 'Points')
    """
    from ..topology import open_servers

    if not isinstance(database, str) or not database:
        raise ValueError(f"database must be a non-empty str, not {database!r}")
    tls = {name: value for name, value in
           (("certificate", certificate), ("ca", ca), ("ssl_context", ssl_context))
           if value is not None}
    open_servers(url, database, **tls)
    return ServerDescription(url=url, database=database, tls=tls, collection=collection,
                             id_column=id_column, id_prefix=id_prefix, metadata=metadata,
                             python_type=python_type, float32=float32, compress=compress,
                             buffer_size=buffer_size)


@kind_constructor("request_file")
def request_file(out: PathLike | None = None, *,
                 collection: str = _D["collection"], id_column: str = _D["id_column"],
                 id_prefix: str | None = _D["id_prefix"],
                 metadata: Mapping[str, Any] | None = _D["metadata"],
                 python_type: str | None = _D["python_type"], float32: str = _D["float32"],
                 compress: bool | str = _D["compress"],
                 buffer_size: int = _D["buffer_size"]) -> FileDescription:
    """The exact bulk insert request body a RavenDB load would send, written to the file
    ``out`` (None: ``<name>.bulk.json[.gz|.zst]`` next to the source file or directory),
    whole or not at all: a load that fails leaves no file. The document options are
    :func:`ravendb`'s; ``compress``: one gzip stream or one zstd frame, as the server would
    receive the body.

    >>> from bulkwire import targets
    >>> targets.request_file("points.bulk.json.gz", compress="gzip").compress
    'gzip'
    """
    return FileDescription(out=out, collection=collection, id_column=id_column,
                           id_prefix=id_prefix, metadata=metadata, python_type=python_type,
                           float32=float32, compress=compress, buffer_size=buffer_size)
