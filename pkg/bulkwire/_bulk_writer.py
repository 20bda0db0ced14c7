"""The request body of a bulk insert: :class:`BulkWriter` (documents encoded in C straight
into buffers handed over without a copy to a bounded queue, compressed on the way out when
asked) and :class:`BulkStats`, with the checks of their arguments. It knows nothing of HTTP:
:class:`bulkwire.bulk.BulkInsert` drives a writer over the server's protocol. Imported from
:mod:`bulkwire.bulk`, where every name here is public (see that module for the id rules)."""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Optional, Sequence, Union

from . import _core
from . import compression as _compression
from .compression import Compress, body_compressor, check_compress_threads
from .compression import parse_compress as _resolve_compress
from .bulk_commands import (AttachmentsBulkInsert, CountersBulkInsert, TimeSeriesBulkInsert,
                            TypedTimeSeriesBulkInsert)
from ._deprecated import renamed_fields, warn_deprecated
from .errors import BulkInsertAborted, BulkInsertError, bulk_insert_case

from .document_options import DEFAULT_BUFFER_SIZE  # noqa: E402 - the one default
DEFAULT_MAX_BUFFERS = 8

# collection names: the rule lives with the other document conventions
from .conventions import collection_name  # noqa: E402


def _class_info(cls: type, token: str) -> tuple:
    """What the C writer needs once per entity class: the prefix of the ids it generates
    (``"<collection in lower case>/<token>-"``) and the ``@metadata`` defaults."""
    collection = collection_name(cls)
    return (f"{collection.lower()}/{token}-",
            {"@collection": collection, "Raven-Python-Type": f"{cls.__module__}.{cls.__name__}"})


def _resolve_defer_float_text(value: Any) -> bool:
    """None: on when this process may run on two CPUs or more (on one, the other thread
    only adds the copy and a second pass)."""
    if value is None:
        return _compression.usable_cpus() >= 2
    if not isinstance(value, bool):
        raise TypeError(f"defer_float_text must be True, False or None, not {type(value).__name__}")
    return value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {value}")
    return value


Encoded = Union[bytes, bytearray, memoryview, Sequence[Any]]


def _raise_failure(writer: Any) -> NoReturn:
    """Raises the failure of ``writer`` (a ``_core.CommandWriter``) again (a copy: same class,
    message and attributes), each time it is asked; ``RuntimeError`` instead in a forked
    child."""
    writer.check_process()
    failure = bulk_insert_case(writer.failure)  # a shared class: the bulk insert's case
    if isinstance(failure, BulkInsertError):
        raise failure.with_message(str(failure)) from failure.__cause__
    raise BulkInsertError(f"the bulk insert failed: {failure!r}") from failure


def _refuse_closed(writer: Any, call: str) -> NoReturn:
    """``ValueError`` for ``call`` on a closed writer; ``RuntimeError`` instead in a forked
    child."""
    writer.check_process()
    raise ValueError(f"{call} on a closed bulk insert")


def _buffer_lost(writer: Any, interrupted: bool) -> None:
    """A finished buffer did not reach the queue, so the body can never be whole: say so,
    never skip it. Interrupted (the caller re-raises): the writer fails. The consumer is
    gone: its failure raises."""
    if interrupted:
        if writer.failure is None:
            writer.fail(BulkInsertAborted("interrupted while handing a buffer over: the bulk "
                                          "insert body is incomplete"))
        return
    if writer.failure is None:
        writer.failure = BulkInsertAborted("the bulk insert body is no longer being read")
    _raise_failure(writer)


def _store_refused(writer: Any, event: str) -> None:
    """The ``on_failure`` hook of a BulkWriter's ``_core.CommandWriter``, whose ``store`` is
    ``BulkWriter.store``: what it raises for a failed (``"failed"``) or closed (``"closed"``)
    writer and for a buffer the gone consumer never took (``"lost"``); an interrupted
    hand-over (``"interrupted"``) fails the writer, and the store's exception goes on."""
    if event == "failed":
        _raise_failure(writer)
    if event == "closed":
        _refuse_closed(writer, "store()")
    _buffer_lost(writer, interrupted=event == "interrupted")


def _encoded_pieces(commands: Any, count: Any) -> list:
    """Checks a ``store_encoded`` argument pair; returns its non-empty pieces, each ``bytes``
    or a 1-D byte ``memoryview``."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be an int, not {type(count).__name__}")
    if count < 0:
        raise ValueError(f"count must not be negative, not {count}")
    if isinstance(commands, (list, tuple)):
        items, several = commands, True
    else:
        items, several = (commands,), False
    pieces = []
    total = 0
    for i, item in enumerate(items):
        name = f"commands[{i}]" if several else "commands"
        if type(item) is bytes:
            piece: Any = item
        else:
            if isinstance(item, str):
                raise TypeError(f"{name} must be a bytes-like object, not str (encode it to UTF-8)")
            try:
                piece = memoryview(item)
            except TypeError:
                raise TypeError(f"{name} must be a bytes-like object"
                                f"{'' if several else ' or a list/tuple of them'}, "
                                f"not {type(item).__name__}") from None
            if not piece.c_contiguous:
                raise ValueError(f"{name} must be a contiguous buffer")
            if piece.format != "B" or piece.ndim != 1:
                piece = piece.cast("B")
        n = len(piece)
        if n:
            if pieces and piece[0] == 0x7B and pieces[-1][-1] == 0x7D:  # '}' then '{'
                raise ValueError(f"{name} starts with '{{' right after a '}}': the pieces are "
                                 f"concatenated as they are, so join the commands with ','")
            pieces.append(piece)
            total += n
    if not total:
        if count:
            raise ValueError(f"commands is empty but count is {count}")
        return pieces
    if not count:
        raise ValueError("count must be the number of commands in commands (at least 1), not 0")
    first, last = pieces[0][0], pieces[-1][-1]
    if first != 0x7B:  # '{'
        if first == 0x2C:
            raise ValueError("commands must not start with ',': the writer writes the separators")
        if first == 0x5B:
            raise ValueError("commands must not start with '[': the writer writes the array's "
                             "brackets; pass the commands only")
        raise ValueError(f"commands must start with '{{' (a command object), not {bytes([first])!r}")
    if last != 0x7D:  # '}'
        raise ValueError(f"commands must end with '}}' (a complete command), not {bytes([last])!r}"
                         + (": leave out the array's ']'" if last == 0x5D else
                            ": leave out the trailing ','" if last == 0x2C else ""))
    return pieces


@renamed_fields(chunks="pieces")
@dataclass
class BulkStats:
    """What a bulk insert did. ``body_bytes`` is the JSON body, ``wire_bytes`` what was
    handed to the transport (compressed when compressing), ``pieces`` in how many pieces
    (each sent as one HTTP chunk)."""

    documents: int = 0
    body_bytes: int = 0
    wire_bytes: int = 0
    pieces: int = 0
    buffers: int = 0
    compression: Optional[str] = None
    #: what sent the body: ``"c"`` (the C body pump, plain or through bulkwire's own TLS),
    #: ``"python"`` (the body iterated in Python: a gzip backend outside the C core, or TLS
    #: through Python's ssl module); None before sending
    sender: Optional[str] = None
    queue_peak: int = 0
    blocked_puts: int = 0
    seconds: float = 0.0
    operation_id: Optional[int] = None
    extra: dict = field(default_factory=dict)

    @property
    def average_piece(self) -> float:
        return self.wire_bytes / self.pieces if self.pieces else 0.0

    @property
    def average_chunk(self) -> float:
        """Deprecated spelling of :attr:`average_piece`."""
        warn_deprecated("BulkStats.average_chunk", "BulkStats.average_piece")
        return self.average_piece

    @property
    def documents_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0


class BulkWriter:
    """The request body of a bulk insert, built by a producer and drained by a consumer.

    ``buffer_size``: a buffer is handed over once it holds more than this many bytes.
    ``max_buffers``: how many finished buffers may wait for the consumer; a full queue makes
    ``store`` wait (GIL released). ``compress``: False/None, True or "gzip" (one gzip
    stream by the C core's own gzip), "zstd" (one zstd frame), or a backend: "isal",
    "python-isal", "zlib", "python-zstd" (the one vocabulary of every entry point:
    :func:`bulkwire.compression.parse_compress`). ``compress_threads``: how many threads compress
    each buffer at once (C core backends; still one gzip member or zstd frame); None: for
    gzip the CPUs this process may use, at most 4
    (:func:`bulkwire.compression.default_compress_threads`), for zstd one.
    ``default``: the encoder's default hook for what JSON has no type for (``bulkwire.ENTITY``,
    the entity conventions; or a callable, as ``json.dumps(default=...)`` takes it).
    ``class_info``: the conventions of an entity class, asked once per class: a callable
    ``cls -> (id prefix, metadata defaults)`` or ``(id prefix, metadata defaults, members the
    body leaves out)``; None: the built-in ones (:func:`bulkwire.conventions.collection_name`).
    ``defer_float_text``: a document's list (or tuple) of at least 16 floats is copied as
    doubles by ``store`` and its text is written by the consumer (the sender's thread,
    without the GIL) when it takes the buffer, except while the consumer is behind (a
    hand-over found the queue full, until one finds room), when ``store`` writes it; the
    body's bytes are the same either way (see docs/bulk_insert.md, "Float text off the
    producer thread"). None (the default): on
    when the process may run on two CPUs or more (:func:`bulkwire.compression.usable_cpus`).

    A writer has one producer thread: the first thread that calls ``store``,
    ``store_many``, ``store_encoded`` or ``close`` owns it, and those calls from any other
    thread raise ``RuntimeError`` (always, before anything changes). The consumer side
    (``pieces``, ``fail``) belongs to one other thread. A producer call made from inside
    another one of the same writer (a hook, ``to_json``, ``__del__``, a gc or weakref
    callback, a signal handler) raises ``RuntimeError`` before anything changes, and the
    call it came from goes on. A writer belongs to the process that made it: in a forked
    child every call raises ``RuntimeError`` (see docs/bulk_insert.md, "Processes").

    >>> w = BulkWriter()
    >>> w.store({"Name": "a"}, id="things/1")
    'things/1'
    >>> w.close()
    >>> b"".join(bytes(piece) for piece in w.pieces())
    b'[{"Id":"things/1","Type":"PUT","Document":{"Name": "a", "@metadata": {"@collection": "dicts", "Raven-Python-Type": "builtins.dict"}}}]'
    """

    def __init__(self, *, compress: Compress = False, buffer_size: int = DEFAULT_BUFFER_SIZE,
                 max_buffers: int = DEFAULT_MAX_BUFFERS,
                 default: Any = _core.ENTITY, class_info: Any = None,
                 compress_threads: Optional[int] = None,
                 defer_float_text: Optional[bool] = None) -> None:
        _positive_int("buffer_size", buffer_size)
        defer_float_text = _resolve_defer_float_text(defer_float_text)
        _positive_int("max_buffers", max_buffers)
        self._compression = _resolve_compress(compress)
        if compress_threads is not None:
            check_compress_threads(compress_threads)
        self.compress_threads = compress_threads
        self._queue = _core.HandoverQueue(max_buffers)
        if class_info is None:
            class_info = partial(_class_info, token=secrets.token_hex(6))
        # the C writer applies the conventions and hands full buffers over to the queue
        self._writer = _core.CommandWriter(buffer_size, queue=self._queue,
                                           class_info=class_info, default=default,
                                           defer_float_text=defer_float_text,
                                           on_failure=_store_refused)
        if type(self).store is BulkWriter.store:
            # store is the C writer's own method, its checks included: no Python frame per
            # document (a subclass's own store stays its own)
            self.store = self._writer.store  # type: ignore[method-assign]
        self.defer_float_text = defer_float_text
        self._put = self._queue.put
        self._finished = False  # the end of the body (its last buffer) was handed over
        self._consuming = False
        # pieces() has yielded every piece of the body's data (up to the closing "]",
        # decodable): what it and http_chunks() yield from now on carries none
        self.data_taken = False
        self._series: Any = None  # the open TimeSeriesBulkInsert
        self.buffer_size = buffer_size
        self.max_buffers = max_buffers
        self._stats = BulkStats(compression=self._compression)

    @property
    def _failure(self) -> Optional[BaseException]:
        """Why the body can no longer be completed (kept by the C writer), or None."""
        return self._writer.failure

    @_failure.setter
    def _failure(self, error: Optional[BaseException]) -> None:
        self._writer.failure = error

    @property
    def _closed(self) -> bool:
        """The producer side is closed (kept by the C writer, whose store refuses then)."""
        return self._writer.closed

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        self._writer.closed = closed

    # ---- producer side ----

    def _check_process(self) -> None:
        """``RuntimeError`` in a forked child of the process that made the writer (its body,
        sender, request and connection are that process's)."""
        self._writer.check_process()

    def _raise_failure(self) -> NoReturn:
        """Raises the failure again (a copy: same class, message and attributes), each time
        it is asked; ``RuntimeError`` instead in a forked child."""
        _raise_failure(self._writer)

    def _refuse_closed(self, call: str) -> NoReturn:
        """``ValueError`` for ``call`` on a closed writer; ``RuntimeError`` instead in a forked
        child."""
        _refuse_closed(self._writer, call)

    def store(self, entity: Any, id: Optional[str] = None,
              metadata: Optional[Mapping[str, Any]] = None) -> str:
        """Append one document; returns its id. Raises the sender's error if it failed, and
        the encoder's error (nothing of the document is kept) if it cannot be encoded.

        On an instance this is the C writer's ``store`` itself (``_core.CommandWriter.store``:
        the same checks, in the same order, with the same errors), so a document costs no
        Python frame."""
        return self._writer.store(entity, id, metadata)

    def store_many(self, entities: Iterable[Any], ids: Optional[Sequence[Optional[str]]] = None,
                   metadata: Optional[Mapping[str, Any]] = None) -> list:
        """Store each entity (``ids[i]`` as its id when given, the same ``metadata`` for all);
        returns the ids."""
        self._writer.claim()  # also for no entities: the same refusals as store
        store = self.store
        if ids is None:
            return [store(e, None, metadata) for e in entities]
        entities = list(entities)
        if len(ids) != len(entities):
            raise ValueError(f"ids has {len(ids)} items but there are {len(entities)} entities")
        return [store(e, i, metadata) for e, i in zip(entities, ids)]

    def store_encoded(self, commands: Encoded, count: int) -> None:
        """Append commands that are already encoded, e.g. by ``_core.encode_batch``.

        ``commands`` holds one or more complete PUT commands exactly as the body carries them,
        joined by ``,`` — without the array's ``[``/``]`` and without a leading or trailing
        ``,`` — as a bytes-like object, or a list/tuple of them whose concatenation is that
        (the pieces are concatenated as they are and may split a command anywhere; a piece
        starting with ``{`` right after one ending with ``}`` is refused as a missing ``,``). ``count`` is how many commands it holds
        (for ``documents`` and the stats). The writer writes the ``[``, the ``,`` before the
        commands when something came before, and the ``]``, so ``store`` and
        ``store_encoded`` mix freely in one body.

        The content is trusted: only its first and last byte are checked (``{`` and ``}``).
        ``bytes`` pieces (or read-only views of ``bytes``) of at least ``buffer_size`` bytes are
        handed over as they are (no copy; slices of ``buffer_size`` when longer than twice
        that), as an attachment's bytes are; other pieces are
        copied into the writer's buffers, so a mutable buffer may be reused after the call.
        Hand-over waits on the bounded queue like ``store``; the sender's error raises here.
        If the call is interrupted part-way (Ctrl-C while waiting), the writer is marked as
        failed: its body is incomplete and it raises :class:`BulkInsertAborted` from then on.

        >>> w = BulkWriter()
        >>> w.store({"Name": "a"}, id="things/1")
        'things/1'
        >>> w.store_encoded(b'{"Id":"things/2","Type":"PUT","Document":{"@metadata": {}}}', 1)
        >>> w.close()
        >>> import json
        >>> body = b"".join(bytes(piece) for piece in w.pieces())
        >>> [c["Id"] for c in json.loads(body)], w.documents
        (['things/1', 'things/2'], 2)
        """
        self._writer.claim()
        if self._failure is not None:
            self._raise_failure()
        if self._closed:
            self._refuse_closed("store_encoded()")
        pieces = _encoded_pieces(commands, count)
        if pieces:
            self._store_pieces(pieces, count)

    # ---- counters, time series, attachments (see bulkwire.bulk_commands) ----

    def counters_for(self, id: str) -> "CountersBulkInsert":
        """The counters of the document ``id``: ``counters_for(id).increment(name, delta=1)``.

        >>> w = BulkWriter()
        >>> w.counters_for("users/1").increment("likes")
        >>> w.close()
        """
        self._check_process()
        return CountersBulkInsert(self, id)

    def time_series_for(self, id: str, name: str) -> "TimeSeriesBulkInsert":
        """The time series ``name`` of the document ``id``, as a context manager:
        ``append_single(timestamp, value, tag=None)``, ``append(timestamp, values, tag=None)``.

        >>> from datetime import datetime
        >>> w = BulkWriter()
        >>> with w.time_series_for("users/1", "Heartrate") as ts:
        ...     ts.append(datetime(2024, 1, 1), [72, 80.5], "watch")
        >>> w.close()
        """
        return TimeSeriesBulkInsert(self, id, name)

    def typed_time_series_for(self, object_type: type, id: str,
                              name: Optional[str] = None) -> "TypedTimeSeriesBulkInsert":
        """A time series whose entries are ``object_type`` objects (see
        :class:`bulkwire.bulk_commands.TypedTimeSeriesBulkInsert`); ``name`` defaults to the
        collection name of ``object_type``."""
        return TypedTimeSeriesBulkInsert(self, object_type, id, name)

    def attachments_for(self, id: str) -> "AttachmentsBulkInsert":
        """The attachments of the document ``id``:
        ``attachments_for(id).store(name, attachment_bytes, content_type=None)``.

        >>> w = BulkWriter()
        >>> w.attachments_for("users/1").store("a.txt", b"hello", "text/plain")
        >>> w.close()
        """
        self._check_process()
        return AttachmentsBulkInsert(self, id)

    def _command(self, method: Any, *args: Any, call: str = "a command") -> Any:
        """One producer call of the C writer other than ``store`` (counters, time series,
        attachments, encoded pieces, batches), with ``store``'s failure rules; ``call`` names
        it when the writer is closed. Returns what it returned."""
        if self._failure is not None:
            self._raise_failure()
        if self._closed:
            self._refuse_closed(call)
        try:
            done = method(*args)
        except BaseException:
            if self._writer.handover_interrupted:  # part of the body never reached the queue
                self._buffer_lost(interrupted=True)
            raise
        if done is None:  # the consumer is gone: that buffer never reached it
            self._buffer_lost(interrupted=False)
        return done

    def _increment(self, id: str, name: Any, delta: Any) -> None:
        self._command(self._writer.increment, id, name, delta)

    def _series_begin(self, series: Any, id: str, name: str) -> None:
        self._writer.claim()
        if self._series is not None:
            raise RuntimeError(f"the time series {self._series._name!r} of "
                               f"{self._series._id!r} is still open: close it (leave its with "
                               "block) before opening another")
        self._command(self._writer.series_begin, id, name)
        self._series = series

    def _series_append(self, series: Any, timestamp: Any, values: Any, tag: Any) -> None:
        if series is not self._series:
            raise RuntimeError("this time series is not the open one of its bulk insert")
        self._command(self._writer.series_append, timestamp, values, tag)

    def _series_end(self, series: Any) -> None:
        if series is self._series:
            self._writer.claim()
            if self._failure is None and not self._closed:
                self._writer.series_end()
            self._series = None

    def _attachment(self, id: str, name: Any, data: Any, content_type: Any) -> None:
        self._command(self._writer.attachment, id, name, data, content_type)

    def _store_prepared(self, prepared: Any) -> int:
        """The rows of a batch that ``_core.prepare_batch`` validated, in one call into C: it
        encodes them straight into the writer's buffers (the separator in the same buffer,
        the GIL released) and hands each full buffer over. Returns the body bytes they added
        (the separator included). Interrupted after a buffer of the batch was handed over
        (Ctrl-C while the queue was full), the writer is failed: its body is incomplete."""
        before = self._writer.bytes
        self._command(self._writer.put_batch, prepared, call="a batch store")
        return self._writer.bytes - before

    def _store_pieces(self, pieces: list, count: int) -> None:
        """Checked pieces (``_encoded_pieces``) into the body in one call into C, through the
        writer's one size-threshold slicer: ``bytes`` pieces of at least the threshold handed
        over without a copy, the rest copied into buffers handed over past the threshold.
        Interrupted part-way (Ctrl-C while the queue was full), the writer is failed: its body
        holds some of the commands, not all."""
        self._command(self._writer.put_pieces, pieces, count, call="store_encoded()")

    def _hand_over(self, piece: Any) -> None:
        try:
            taken = self._put(piece)
        except BaseException:  # Ctrl-C while the queue was full: this buffer is not queued
            self._buffer_lost(interrupted=True)
            raise
        if not taken:  # the consumer is gone: failed, aborted or finished early
            self._buffer_lost(interrupted=False)

    def _buffer_lost(self, interrupted: bool) -> None:
        """A finished buffer did not reach the queue (see :func:`_buffer_lost`)."""
        _buffer_lost(self._writer, interrupted)

    def close(self) -> None:
        """End the body: the last buffer (with the closing ``]``) is handed over and the
        consumer's iteration ends after it. Raises the consumer's error if it failed, at this
        and at every later call. A close interrupted before the last buffer was handed over
        (Ctrl-C while the queue was full) marks the writer failed: its body is incomplete."""
        self._writer.claim()  # another thread: RuntimeError, and nothing changed
        if self._series is not None and not self._closed and self._failure is None:
            # the series' command has no end: the body cannot be finished
            series = self._series
            message = (f"close() while the time series {series._name!r} of {series._id!r} is "
                       "open: close it (leave its with block) first; the bulk insert failed")
            self.fail(BulkInsertAborted(message))
            self._closed = True
            self._queue.close_producer()
            raise RuntimeError(message)
        if not self._closed:
            self._closed = True
            try:
                if self._failure is None:
                    piece = self._writer.finish()
                    if piece is not None:
                        self._hand_over(piece)
                    self._finished = True
            except BaseException:
                if self._failure is None:  # the consumer must not see an ending without "]"
                    self.fail(BulkInsertAborted("close() was interrupted before the end of the "
                                                "body was handed over: the bulk insert body is "
                                                "incomplete"))
                raise
            finally:
                self._queue.close_producer()
        if self._failure is not None:
            self._raise_failure()

    @property
    def complete(self) -> bool:
        """The whole body, up to its closing ``]``, was handed over and nothing failed."""
        return self._finished and self._failure is None

    @property
    def failed(self) -> bool:
        return self._failure is not None

    @property
    def documents(self) -> int:
        return self._writer.commands

    # ---- consumer side ----

    def fail(self, error: BaseException) -> None:
        """Called by the consumer: it cannot take more. The producer raises ``error`` (as a
        BulkInsertError) at its next store() or close(); waiting buffers are dropped."""
        self._writer.fail(error)

    @property
    def compression(self) -> Optional[str]:
        """The compression backend of the body (see :mod:`bulkwire.compression`), or None.

        >>> BulkWriter(compress="zlib").compression
        'zlib'
        """
        return self._compression

    @property
    def _can_pump(self) -> bool:
        return self._compression in (None, "zlib", "isal", "zstd")

    def wait_ready(self) -> bool:
        """Waits, consuming nothing, until the body has a buffer to send (True) or will have
        none (False: it ended or failed): the moment before its first byte is sent."""
        return self._queue.wait()

    def pump(self, fd: int, timeout: Optional[float], tls: Any = None) -> Optional[int]:
        """Consumer side for a connected socket the caller owns: sends the whole body on
        ``fd`` (through ``tls``, a ``_core.TlsConnection`` on it, when given) as HTTP chunks
        (then the terminating chunk) from C with the GIL released,
        instead of iterating :meth:`pieces`. None when this body cannot be pumped (a gzip
        backend outside the C core): nothing was consumed, send :meth:`http_chunks` instead.
        Otherwise how the sending ended (:class:`bulkwire.transport.Sent`): the body went
        out whole, or the server answered before its last data byte (nothing more was sent),
        or after it (the rest was still tried). Socket errors raise; the caller reports them
        (``fail``)."""
        if not self._can_pump:
            return None
        self._start_consuming("the body may be consumed once")
        stats = self.stats
        stats.sender = "c"
        gz = None
        if self._compression is not None:
            gz = body_compressor(self._compression, self.compress_threads)
            stats.compression = gz.backend
        try:
            sent = _core.pump_body(self._queue, fd, gz, timeout, tls)
        finally:
            self._record_queue_stats()  # the pump's counts in the queue: its result's
        # stopped by fail(): the body must not look complete
        if sent.outcome == _core.PUMP_CLOSED:
            raise BulkInsertAborted(f"the bulk insert body was cut short: {self._failure}")
        return sent.outcome

    def pieces(self) -> Iterator[Any]:
        """The body, piece by piece, for one consumer: objects supporting the buffer protocol
        (never empty). Plain: the handed-over buffers themselves. Compressed: one gzip
        stream, sync-flushed after each buffer.

        >>> w = BulkWriter()
        >>> w.close()
        >>> [bytes(piece) for piece in w.pieces()]
        [b'[]']
        """
        self._start_consuming("pieces() may be iterated once")
        stats = self.stats
        stats.sender = "python"
        gz: Any = None
        if self._compression is not None:
            gz = body_compressor(self._compression, self.compress_threads)
            stats.compression = gz.backend
        next_piece = _core.next_piece  # the pieces are cut in C, by the pump's rule
        queue = self._queue
        complete = False
        try:
            while (got := next_piece(queue, gz)) is not None:
                piece, consumed = got
                del got
                if consumed is None:  # the compressed stream's end alone
                    self.data_taken = True
                elif consumed:
                    stats.buffers += 1
                    stats.body_bytes += consumed
                if piece is not None and len(piece):
                    stats.pieces += 1
                    stats.wire_bytes += len(piece)
                    yield piece
                del piece
            if self._failure is not None:  # stopped by fail(): the body must not look complete
                raise BulkInsertAborted(f"the bulk insert body was cut short: {self._failure}")
            self.data_taken = complete = True
        finally:
            self._record_queue_stats()
            if not complete:
                self.fail(self._failure or BulkInsertAborted("the consumer stopped reading the body"))

    def chunks(self) -> Iterator[Any]:
        """Deprecated spelling of :meth:`pieces`."""
        warn_deprecated("BulkWriter.chunks()", "BulkWriter.pieces()")
        return self.pieces()

    def http_chunks(self) -> Iterator[bytes]:
        """The body as an HTTP/1.1 chunked body, for a sender that cannot :meth:`pump` (TLS):
        each piece of :meth:`pieces` as one whole HTTP chunk, then the terminating chunk, every
        byte framed by the C core as the pump frames it. The terminating chunk comes only
        after the whole body.

        >>> w = BulkWriter()
        >>> w.close()
        >>> b"".join(w.http_chunks())
        b'2\\r\\n[]\\r\\n0\\r\\n\\r\\n'
        """
        http_chunk = _core.http_chunk
        pieces = self.pieces()
        try:
            for piece in pieces:
                yield http_chunk(piece)
                del piece
        finally:
            pieces.close()  # its cleanup runs now, on the consumer's thread
        yield _core.HTTP_LAST_CHUNK

    def _start_consuming(self, message: str) -> None:
        self._check_process()
        if self._consuming:
            raise RuntimeError(message)
        self._consuming = True

    def _record_queue_stats(self) -> None:
        stats = self._stats
        stats.documents = self._writer.commands
        stats.queue_peak = self._queue.peak
        stats.blocked_puts = self._queue.waits
        if stats.sender == "c":  # the pump counts in the queue as it goes, without the GIL
            queue = self._queue
            stats.buffers, stats.body_bytes = queue.taken_buffers, queue.taken_bytes
            stats.pieces, stats.wire_bytes = queue.sent_pieces, queue.sent_bytes

    @property
    def stats(self) -> BulkStats:
        """What the bulk insert did so far, read live from any thread: the documents stored,
        the queue's peak and blocked puts, and what the sender took and sent (the C body pump
        counts as it goes; :meth:`pieces` as it yields); final once the body was sent."""
        self._record_queue_stats()
        return self._stats
