"""Bulk insert: documents encoded in C straight into ~1 MiB buffers, handed over without a
copy to a bounded queue, (optionally) gzip-compressed and streamed by a sender thread.

Two layers:

* :class:`BulkWriter` builds the request body and knows nothing about HTTP. The producer
  calls :meth:`BulkWriter.store`; a consumer (any transport, on its own thread) iterates
  :meth:`BulkWriter.pieces` and writes each piece out, reporting its own failure with
  :meth:`BulkWriter.fail`.
* :class:`BulkInsert` drives the document database's bulk insert protocol over HTTP/1.1
  (``bulkwire.transport``) with a :class:`BulkWriter` inside.

Ids: the ``id`` argument when given; otherwise the entity's ``Id`` (a dict's ``"Id"`` key or
an object's ``Id`` attribute) when it is not ``None``; otherwise a generated
``"<collection in lower case>/<token>-<n>"``, where ``token`` is 12 random hex digits drawn
once per writer and ``n`` counts from 1 (e.g. ``users/3f9a0c61d2b4-1``). The entity is never
modified: the id is returned by ``store``.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _core
from .compression import Compress, body_compressor, compression_backends  # noqa: F401
from .compression import _PythonIsal  # noqa: F401 - importable here as before
from .compression import parse_compress as _resolve_compress  # noqa: F401
from .bulk_commands import (AttachmentsBulkInsert, CountersBulkInsert, TimeSeriesBulkInsert,
                            TypedTimeSeriesBulkInsert)
from .errors import BulkInsertAborted, BulkInsertError, bulk_insert_case
# the request body (BulkWriter, BulkStats and their argument checks): a module of its own,
# every name of it importable from here as before
from ._bulk_writer import (DEFAULT_BUFFER_SIZE, DEFAULT_MAX_BUFFERS, BulkStats,  # noqa: F401
                           BulkWriter, Encoded, _buffer_lost, _class_info, _encoded_pieces,
                           _positive_int, _raise_failure, _refuse_closed,
                           _resolve_defer_float_text, _store_refused, collection_name)

__all__ = ["BulkInsert", "BulkWriter", "BulkInsertError", "BulkInsertAborted", "BulkStats",
           "collection_name", "compression_backends"]


class BulkInsert:
    """A bulk insert into ``database`` on the server at ``url`` (RavenDB's bulk insert protocol), as a context manager.

    >>> with BulkInsert("http://127.0.0.1:8080", "db") as bulk:   # doctest: +SKIP
    ...     for user in users:
    ...         bulk.store(user)

    ``url`` is one server's URL, or a list of a cluster's node URLs: then the database's
    topology is asked of the first that answers, and the bulk insert goes to the node that
    issued its operation id, as the official client does (see :mod:`bulkwire.topology`)::

        BulkInsert(["http://a:8080", "http://b:8080"], "db")

    Every URL is judged here by :mod:`bulkwire.urls` (``ValueError`` naming ``url``): http or
    https, a host, a port, printable ASCII, no query, fragment or credentials (RavenDB
    authenticates with certificates), one scheme for all (and for every node the topology
    lists).

    The operation id is fetched and the request opened on the first ``store``. A server or
    transport error raises a :class:`BulkInsertError` (see :mod:`bulkwire.errors`; with the
    server's message when it gave one) at the next ``store`` or at ``close``, and again at
    every later call. ``close`` returns normally only when the server answered 2xx to the
    whole body. Leaving the ``with`` block by an exception aborts the operation; the
    exception propagates.

    One thread stores (the producer: the first to call ``store``, ``store_many``,
    ``store_encoded`` or ``close``); those calls from another thread raise ``RuntimeError``.
    ``abort`` may come from any thread. An insert belongs to the process that made it: in a
    forked child every call (``with`` included) raises ``RuntimeError`` at once and nothing
    reaches the parent's request, connection or operation (see docs/bulk_insert.md,
    "Processes").

    ``timeout`` (seconds, or None) bounds every socket operation, including a send to a
    server that stopped reading; ``compress``, ``compress_threads``, ``default``,
    ``class_info`` and ``defer_float_text`` are as for :class:`BulkWriter`.

    ``https://`` (see :mod:`bulkwire.tls`): ``certificate``, the client certificate (a PEM
    file holding the certificate and its key, or a ``(certificate, key)`` pair of files);
    ``ca``, a PEM bundle of the CAs that sign the server's certificate (None: the system's;
    False: the server's certificate is not verified); or ``ssl_context``, an
    :class:`ssl.SSLContext` used as it is (not with the other two; its body goes through a
    Python sender). The files are read here: one that cannot be used raises
    :class:`bulkwire.errors.TLSFileError` naming it. A refused certificate, either way,
    raises :class:`bulkwire.errors.TLSError`.

    >>> BulkInsert("https://127.0.0.1:8443", "db", ca=False)._transport.tls.verify
    False
    """

    def __init__(self, url: Union[str, Sequence[str]], database: str, *, compress: Compress = False,
                 buffer_size: int = DEFAULT_BUFFER_SIZE, max_buffers: int = DEFAULT_MAX_BUFFERS,
                 skip_overwrite_if_unchanged: bool = False, timeout: Optional[float] = 300.0,
                 certificate: Any = None, ca: Any = None, ssl_context: Any = None,
                 default: Any = _core.ENTITY, class_info: Any = None,
                 compress_threads: Optional[int] = None,
                 defer_float_text: Optional[bool] = None) -> None:
        from .topology import open_servers

        if not isinstance(skip_overwrite_if_unchanged, bool):
            raise TypeError("skip_overwrite_if_unchanged must be True or False, not "
                            f"{type(skip_overwrite_if_unchanged).__name__}")
        self._servers = open_servers(url, database, timeout=timeout, certificate=certificate,
                                     ca=ca, ssl_context=ssl_context)
        self._transport = self._servers.first  # until the operation's node is known
        self._writer = BulkWriter(compress=compress, buffer_size=buffer_size, max_buffers=max_buffers,
                                  default=default, class_info=class_info,
                                  compress_threads=compress_threads,
                                  defer_float_text=defer_float_text)
        self._skip_overwrite = skip_overwrite_if_unchanged
        self._server_version: Any = False  # not asked yet (see _require)
        self._sender: Any = None
        self._op_id: Optional[int] = None
        self._node_tag: Optional[str] = None
        self._started_at = 0.0
        self._closed = False
        self._aborted = False
        self._succeeded = False  # close() saw the server's 2xx to the whole body

    # ---- lifecycle ----

    def __enter__(self) -> "BulkInsert":
        self._check_process()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # in a forked child: RuntimeError, and the parent's operation is left alone
        self._check_process()
        if exc_type is None:
            self.close()
        else:
            self._abort_quietly()

    def _check_process(self) -> None:
        """``RuntimeError`` in a forked child of the process that made this insert."""
        self._writer._check_process()

    def _claim(self) -> None:
        """The calling thread becomes the producer; ``RuntimeError`` (nothing changes) in a
        forked child, from another thread, or from inside a call of this insert."""
        self._writer._writer.claim()

    def _start(self) -> None:
        """Opens the operation and starts the sender. The caller becomes the producer, and
        until the request is under way a call from inside (a callback run while connecting)
        raises ``RuntimeError`` rather than start a second request on the same body."""
        held = self._writer._writer
        held.hold("the start of its request")
        try:
            if self._sender is None:  # not started by a signal handler just before the hold
                self._open_request()
        finally:
            held.release()

    def _open_request(self) -> None:
        from .transport import BodySender

        writer = self._writer
        if writer._failure is not None:
            writer._raise_failure()
        if self._aborted or self._closed:
            raise ValueError("store() on a closed or aborted bulk insert")
        self._started_at = time.perf_counter()
        conn = None  # the operation id's connection, kept for the body until the sender owns it
        try:
            self._transport, self._op_id, self._node_tag, conn = self._servers.open_operation()
            writer.stats.operation_id = self._op_id
            if writer.compression in ("zstd", "python-zstd"):
                self._require("zstd")
            sender = BodySender(
                self._transport, self._transport.bulk_insert_path(self._op_id, self._skip_overwrite),
                writer, explain=self._explain, conn=conn)
            sender.start()
            conn = None  # the sender's now
        except BaseException as exc:
            if conn is not None:
                conn.close()
            # An insert that could not start stays failed: a later store or close raises
            # again, it never starts over as if the first documents had not been refused.
            exc = bulk_insert_case(exc)
            if isinstance(exc, BulkInsertError):
                writer.fail(exc)
                raise
            failure = BulkInsertAborted(f"the bulk insert could not start: {exc!r}")
            failure.__cause__ = exc
            writer.fail(failure)
            if isinstance(exc, Exception):
                raise failure from exc
            raise  # Ctrl-C and the like go on as they are
        self._sender = sender
        # From now on store() is the writer's own, the C writer's method (no Python frame per
        # document); it raises after close() and abort() just as this class's would.
        self.store = writer.store  # type: ignore[method-assign]

    def _require(self, feature: str) -> None:
        """Raises :class:`~bulkwire.errors.UnsupportedByServer` when the node taking this
        insert is older than the first RavenDB that reads ``feature`` (its version is asked
        once per insert, see :mod:`bulkwire.server_features`); the insert is then failed, and
        nothing of ``feature`` was written."""
        from .server_features import require, server_version

        if self._server_version is False:
            self._server_version = server_version(self._transport)
        try:
            require(feature, self._transport, self._server_version)
        except BulkInsertError as exc:
            if self._sender is None:  # at the start: _start fails the insert
                raise
            self._writer.fail(exc)
            self._abort_quietly()  # what the server took so far stays, as after abort()
            raise

    def _explain(self, error: BaseException) -> BaseException:
        """On the sender thread, for a failed request: the error the producer raises, with
        the server's message from ``operations/state`` when it recorded one."""
        from .errors import ServerError, TransportError, bulk_insert_case
        from .transport import FAULTED_WITHOUT_MESSAGE

        own = self._writer._failure
        if own is not None:  # stopped on this side (abort, an interrupted store): that stands
            return own
        if self._op_id is None or not isinstance(error, BulkInsertError):
            return error
        message = self._transport.operation_error(self._op_id)
        if not message or message in str(error):
            return error
        if message == FAULTED_WITHOUT_MESSAGE and not isinstance(error, TransportError):
            return error  # what the server answered says more
        if isinstance(error, TransportError):
            # the connection broke, and the server says why: its fault is the error
            explained = bulk_insert_case(ServerError(f"{message} ({error})"))
            explained.__cause__ = error
            return explained
        return error.with_message(f"{message} ({error})")

    def store(self, entity: Any, id: Optional[str] = None,
              metadata: Optional[Mapping[str, Any]] = None) -> str:
        """Store one entity; returns its id (see the module docstring for the id rules)."""
        if self._sender is None:
            self._start()
        return self._writer.store(entity, id, metadata)

    def store_many(self, entities: Iterable[Any], ids: Optional[Sequence[Optional[str]]] = None,
                   metadata: Optional[Mapping[str, Any]] = None) -> list:
        """Store each entity; returns the ids."""
        if self._sender is None:
            self._start()
        return self._writer.store_many(entities, ids, metadata)

    def store_encoded(self, commands: Encoded, count: int) -> None:
        """Append ``count`` commands that are already encoded (see
        :meth:`BulkWriter.store_encoded`); the request starts on the first non-empty call.

        >>> with BulkInsert("http://127.0.0.1:8080", "db") as bulk:   # doctest: +SKIP
        ...     bulk.store_encoded(b'{"Id":"a/1","Type":"PUT","Document":{"@metadata": '
        ...                        b'{"@collection": "As"}}}', 1)
        """
        self._check_process()
        pieces = _encoded_pieces(commands, count)  # bad arguments raise before any request
        self._store_pieces(pieces, count)

    # ---- counters, time series, attachments (see bulkwire.bulk_commands) ----

    def counters_for(self, id: str) -> "CountersBulkInsert":
        """The counters of the document ``id``: ``counters_for(id).increment(name, delta=1)``
        (see :meth:`BulkWriter.counters_for`)."""
        self._check_process()
        return CountersBulkInsert(self, id)

    def time_series_for(self, id: str, name: str) -> "TimeSeriesBulkInsert":
        """The time series ``name`` of the document ``id``, as a context manager (see
        :meth:`BulkWriter.time_series_for`)."""
        return TimeSeriesBulkInsert(self, id, name)

    def typed_time_series_for(self, object_type: type, id: str,
                              name: Optional[str] = None) -> "TypedTimeSeriesBulkInsert":
        """A time series of ``object_type`` entries (see
        :meth:`BulkWriter.typed_time_series_for`)."""
        return TypedTimeSeriesBulkInsert(self, object_type, id, name)

    def attachments_for(self, id: str) -> "AttachmentsBulkInsert":
        """The attachments of the document ``id`` (see :meth:`BulkWriter.attachments_for`)."""
        self._check_process()
        return AttachmentsBulkInsert(self, id)

    def _started_for(self, feature: str) -> None:
        """Before a command of ``feature``: the request started, and the node taking it reads
        ``feature`` (see :meth:`_require`)."""
        self._check_process()  # before anything that may ask the server
        if self._sender is None:
            self._start()
        self._require(feature)

    def _increment(self, id: str, name: Any, delta: Any) -> None:
        self._started_for("counters")
        self._writer._increment(id, name, delta)

    def _series_begin(self, series: Any, id: str, name: str) -> None:
        self._writer._series_begin(series, id, name)

    def _series_append(self, series: Any, timestamp: Any, values: Any, tag: Any) -> None:
        self._started_for("time series")
        self._writer._series_append(series, timestamp, values, tag)

    def _series_end(self, series: Any) -> None:
        self._writer._series_end(series)

    def _attachment(self, id: str, name: Any, data: Any, content_type: Any) -> None:
        self._started_for("attachments")
        self._writer._attachment(id, name, data, content_type)

    def _store_prepared(self, prepared: Any) -> int:
        """A batch ``_core.prepare_batch`` validated (see :meth:`BulkWriter._store_prepared`);
        the request starts with the first batch that has rows. The body bytes added."""
        self._check_process()
        if not prepared.rows:
            if self._writer._failure is not None:
                self._writer._raise_failure()
            return 0
        if self._sender is None:
            self._start()
        return self._writer._store_prepared(prepared)

    def _store_pieces(self, pieces: list, count: int) -> None:
        """Pieces as :meth:`BulkWriter._store_pieces` takes them; no pieces, no request."""
        self._check_process()
        if not pieces:
            if self._writer._failure is not None:
                self._writer._raise_failure()
            return
        if self._sender is None:
            self._start()
        self._writer._store_pieces(pieces, count)

    def close(self) -> None:
        """Finish the body and wait for the server's answer. Returns normally only when the
        server answered 2xx to the whole body (or nothing was stored: no request at all);
        otherwise raises a :class:`BulkInsertError`, at this call and at every later one. A
        close interrupted by Ctrl-C leaves the insert failed (its outcome unknown)."""
        writer = self._writer
        writer._writer.claim()  # another thread: RuntimeError, and nothing changed
        if self._succeeded:
            return
        if self._sender is None:  # nothing was sent: no request at all
            if writer._failure is not None:  # it could not start, or was aborted
                writer._raise_failure()
            self._closed = self._succeeded = True
            return
        self._closed = True
        try:
            try:
                writer.close()  # raises the sender's failure
            finally:
                self._join()
        except BaseException:
            if writer._failure is None:  # interrupted before the answer was seen
                writer.fail(BulkInsertAborted("close() was interrupted before the server's "
                                              "answer: the bulk insert did not complete"))
                self._sender.cancel()
            raise
        writer.stats.seconds = time.perf_counter() - self._started_at
        if writer._failure is None and not (writer.complete and self._sender.succeeded):
            # success is what the server said, never the absence of an error
            writer.fail(BulkInsertError(f"{self._sender.what}: the request ended without the "
                                        "server's 2xx answer to the whole body"))
        if writer._failure is not None:
            writer._raise_failure()
        self._succeeded = True

    def _join(self) -> None:
        sender = self._sender
        while sender.is_alive():
            sender.join(0.1)  # short joins keep Ctrl-C working on the main thread

    def abort(self) -> None:
        """Kill the operation on the server and stop sending; later stores and ``close()``
        raise :class:`BulkInsertAborted`. Nothing to do after a successful ``close()``; no
        request before the first store. May be called from another thread (the producer's
        waiting store then raises). Raises a :class:`BulkInsertError` if the kill failed, and
        ``RuntimeError`` in a forked child (the operation is the parent's: nothing is sent)."""
        self._check_process()
        if self._aborted or self._succeeded:
            return
        self._aborted = True
        writer = self._writer
        if writer._failure is None:
            writer.fail(BulkInsertAborted("the bulk insert was aborted"))
        if self._sender is None:
            self._closed = True
            return
        try:
            self._transport.kill(self._op_id)  # type: ignore[arg-type]
        finally:
            self._sender.cancel()
            self._join()

    def _abort_quietly(self) -> None:
        try:
            self.abort()
        except Exception:  # noqa: BLE001 - the exception leaving the with block wins
            pass

    # ---- information ----

    @property
    def operation_id(self) -> Optional[int]:
        return self._op_id

    @property
    def stats(self) -> BulkStats:
        """Documents, body and wire bytes, pieces, average piece, compression backend, queue
        peak and blocked puts, seconds (set by close)."""
        return self._writer.stats

    @property
    def documents(self) -> int:
        return self._writer.documents
