"""The server side of ``load_parquet(url=...)``: pre-encoded command chunks streamed with the
bulk insert protocol of SPEC §3.

It is built from the bulk insert's own pieces — ``HttpTransport`` and ``BodySender``
(``bulkwire.transport``), the bounded ``HandoverQueue`` whose blocking put releases the GIL
and wakes for Ctrl-C, and ``GzipStream`` (zlib or ISA-L) running on the sender thread — rather
than through :class:`bulkwire.BulkInsert`, because ``BulkWriter`` encodes entities itself and
has no public way to append commands that are already encoded (here by
``_core.encode_batch``, straight from Arrow buffers). Same wire, same guarantees: memory held
is at most ``max_buffers`` chunks plus the one being encoded; a server or transport error
raises at the next write or at close with the server's message; abort kills the operation.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from . import _core
from .bulk import BulkInsertAborted, BulkInsertError, compression_backends


class ServerSink:
    """Streams the request body to ``url`` / ``database`` as the chunks are written."""

    def __init__(self, url: str, database: str, *, compress: bool = False, max_buffers: int = 8,
                 skip_overwrite_if_unchanged: bool = False, timeout: Optional[float] = 300.0) -> None:
        from .transport import BodySender, HttpTransport

        self._transport = HttpTransport(url, database, timeout=timeout)
        self._failure: Optional[BaseException] = None
        self.backend = None
        if compress:
            backend = compression_backends()[0]
            self.backend = backend if backend in ("isal", "zlib") else "zlib"
        self.wire_bytes = 0
        self.body_bytes = 0
        try:
            self.op_id, _ = self._transport.next_operation_id()
        except OSError as exc:
            raise ConnectionError(f"cannot reach the server at {url}: {exc}") from exc
        self._queue = _core.HandoverQueue(max_buffers)
        self._sender = BodySender(
            self._transport, self._transport.bulk_insert_path(self.op_id, skip_overwrite_if_unchanged),
            self._pieces(), gzip=self.backend is not None, on_error=self._failed)
        self._sender.start()

    # ---- consumer side (the sender thread) ----

    def _pieces(self) -> Iterator[Any]:
        get = self._queue.get
        complete = False
        try:
            if self.backend is None:
                while (item := get()) is not None:
                    self.wire_bytes += len(item)
                    yield item
                    del item
            else:
                gz = _core.GzipStream(backend=self.backend)
                while (item := get()) is not None:
                    out = gz.compress(item)
                    del item
                    if out is not None and len(out):
                        self.wire_bytes += len(out)
                        yield out
                    del out
                out = gz.finish()
                self.wire_bytes += len(out)
                yield out
            complete = self._failure is None
        finally:
            if not complete:
                self._fail(self._failure or BulkInsertAborted("the sender stopped reading the body"))

    def _failed(self, exc: BaseException) -> None:
        """On the sender thread: the request failed; find the server's message."""
        if self._failure is not None:  # aborted by us
            return
        message = self._transport.operation_error(self.op_id)
        error = BulkInsertError(message or f"the bulk insert request failed: {exc}")
        error.__cause__ = exc
        self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self._queue.close_consumer()

    def _raise(self) -> None:
        failure = self._failure
        if isinstance(failure, BulkInsertError):
            raise type(failure)(*failure.args) from failure.__cause__
        raise BulkInsertError(f"the bulk insert failed: {failure!r}") from failure

    # ---- producer side ----

    def write(self, chunk: bytes) -> None:
        if self._failure is not None:
            self._raise()
        if not self._queue.put(chunk):  # the sender is gone
            if self._failure is None:
                self._failure = BulkInsertAborted("the bulk insert body is no longer being read")
            self._raise()
        self.body_bytes += len(chunk)

    def _join(self) -> None:
        while self._sender.is_alive():
            self._sender.join(0.1)  # short joins keep Ctrl-C working

    def close(self) -> None:
        self._queue.close_producer()
        self._join()
        if self._failure is not None:
            self._raise()

    def abort(self) -> None:
        """Stop sending and kill the operation on the server (errors while doing so are
        dropped: the load's own error is the one that matters)."""
        if self._failure is None:
            self._failure = BulkInsertAborted("the load was aborted")
        self._queue.close_consumer()
        self._sender.cancel()
        try:
            self._transport.kill(self.op_id)
        except Exception:  # noqa: BLE001
            pass
        self._join()
