"""The exceptions of bulkwire, all in one place: a load's that did not complete (whatever its
target), a row's that cannot be encoded, a source file's, a resume state's.

Every exception bulkwire raises for an operation that failed is a :class:`BulkwireError`, and
also the builtin exception it stands for (as pyarrow's ``ArrowInvalid`` is a ``ValueError``):
``except BulkwireError`` catches them all, ``except RuntimeError`` / ``except ValueError``
catch the ones they always caught::

    BulkwireError
     ├── LoadError            (RuntimeError)   the load did not complete, whatever the target
     │    └── BulkInsertError                  a RavenDB bulk insert did not complete
     ├── RowError             (ValueError)     a row that cannot be encoded
     ├── MalformedFileError   (ValueError)     a source file or batch whose data is inconsistent
     ├── ResumeStateError     (ValueError)     a resume state that does not fit the load
     └── SchemaMismatchError  (ValueError)     a column that cannot be bound to its CQL column

A call that is wrong in itself (an argument of the wrong type or out of its range, a closed
object, a call from a second thread, an object a forked child inherited) raises the builtin
``TypeError``, ``ValueError`` or ``RuntimeError`` naming the argument, before anything was
done; a file that cannot be opened or read raises the operating system's ``OSError`` naming
it. Whatever else fails while a load sends its data (a compressor, the socket) reaches
the caller as a :class:`LoadError` with the failure as its ``__cause__``.
:class:`bulkwire.VectorCodec` raises ``ValueError`` for bytes that are no vector of its type,
as the Cassandra driver's codec does.

The C core raises these classes through one mapper (``csrc/py/common/py_errors.c``), which
looks them up once, when ``bulkwire._core`` is imported. Its own ``_core.TlsError`` (a TLS session
that failed, which :mod:`bulkwire.transport` turns into :class:`TLSError`) is an ``OSError``
and a :class:`BulkwireError`. Every class pickles with its attributes, so an error raised in
a worker process reaches the caller whole.

Every failure of a load reaches the caller as one of these (``__cause__`` holds the
lower-level exception: the socket's, ``http.client``'s, the JSON decoder's)::

    RuntimeError, BulkwireError
     └── LoadError                     the load did not complete
          ├── TransportError            the network failed: no whole answer arrived
          │    ├── ConnectError         no connection: refused, unreachable, unknown host,
          │    │    │                   TLS handshake
          │    │    └── TLSError        TLS failed: the server's certificate did not verify,
          │    │         │              or the server refused the client's (an alert)
          │    │         └── TLSFileError  a certificate, key or CA file that cannot be
          │    │                        used (also a ValueError): raised by the
          │    │                        constructor, before any request
          │    ├── ConnectionLostError  the connection was closed or reset before the
          │    │                        answer was complete
          │    └── TransportTimeoutError  a socket operation waited longer than ``timeout``
          ├── ServerError               the server answered with an error: an error status,
          │    │                        or an operation it reports as faulted
          │    ├── ProtocolError        an answer that is not the protocol's: not HTTP, not
          │    │                        JSON, or JSON of another shape
          │    └── CqlServerError       a CQL node answered ERROR: code, name
          └── BulkInsertError           a RavenDB bulk insert did not complete
               ├── BulkInsertAborted    it was stopped before its body was complete:
               │    │                   abort(), Ctrl-C while waiting, an interrupted store
               │    └── EarlyResponse   the server ended the request (2xx) before the end
               │                        of the body
               ├── UnsupportedByServer  the server's version does not read what the insert
               │                        would send (a zstd body, counters, ...): nothing of
               │                        it was sent
               └── a bulk insert's case of each shared class above (BULK_INSERT_CASES):
                    BulkInsertTransportError, BulkInsertConnectError, BulkInsertTLSError,
                    BulkInsertTLSFileError, BulkInsertConnectionLostError,
                    BulkInsertTimeoutError, BulkInsertServerError, BulkInsertProtocolError

A RavenDB bulk insert (:class:`bulkwire.BulkInsert`, a load into
:func:`bulkwire.targets.ravendb`) raises the bulk insert's case of each shared class (both
it and a :class:`BulkInsertError`): ``except BulkInsertError`` catches every failure of a
bulk insert, ``except ConnectError`` a connection refused whatever the target. A load into
another target (a CQL table) raises the shared classes themselves: its failures are
:class:`LoadError` s, never :class:`BulkInsertError` s.

A row of an Arrow batch that cannot become a command (``bulkwire.load_parquet``,
``_core.encode_batch``) raises, before any byte of its batch is written or sent::

    ValueError, BulkwireError
     └── RowError                   column, row: a null or invalid id, a null or ragged
                                    vector, invalid UTF-8, a timestamp out of range

A source file whose own metadata is inconsistent (``TableFile``, ``take`` on a crafted or
corrupt Parquet or Arrow IPC file: an offset outside the file, a page header that does not
parse, offsets that decrease), or that changed since it was opened (cut short, rewritten,
grown)::

    ValueError, BulkwireError
     └── MalformedFileError         path: the file; the message names the column and what

A resume state file (``load_parquet(resume=)``, ``bulkwire load --resume``) that does not fit
the load given it: unreadable, of another shape or version, written for another target,
other options or other files, or in use by another load::

    ValueError, BulkwireError
     └── ResumeStateError           path: the state file; the message says what is wrong

Data whose Arrow schema does not fit the CQL table it is loaded into
(a load into :func:`bulkwire.targets.cql`), found before any row is sent::

    ValueError, BulkwireError
     └── SchemaMismatchError        column, arrow_type, cql_type

Errors name the request (``GET http://host/databases/db/operations/next-operation-id``) and,
for the server's errors, carry its message. ``ServerError.status`` is the HTTP status (None
when the error came from ``operations/state``); ``ServerError.body`` the answer's first bytes.

>>> try:
...     raise bulk_insert_case(ConnectError("cannot reach http://127.0.0.1:9: refused"))
... except BulkInsertError as exc:
...     isinstance(exc, ConnectError), isinstance(exc, LoadError), isinstance(exc, RuntimeError)
(True, True, True)
>>> issubclass(ConnectError, BulkInsertError)
False
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: the annotations are text
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BulkwireError", "LoadError", "BulkInsertError", "BulkInsertAborted", "EarlyResponse", "TransportError",
           "ConnectError", "TLSError", "TLSFileError", "ConnectionLostError", "TransportTimeoutError",
           "ServerError", "ProtocolError", "UnsupportedByServer", "RowError", "MalformedFileError",
           "ResumeStateError"]


class BulkwireError(Exception):
    """The root of every exception bulkwire raises for an operation that failed. Each subclass
    is also the builtin exception it stands for (``RuntimeError``, ``ValueError``), so either
    ``except`` clause catches it.

    >>> issubclass(RowError, BulkwireError), issubclass(RowError, ValueError)
    (True, True)
    """


class LoadError(RuntimeError, BulkwireError):
    """A load did not complete, whatever its target: the target refused it, could not be
    reached, or it was stopped. The message is the target's when it gave one; ``__cause__``
    holds the underlying exception. :class:`BulkInsertError` is RavenDB's case of it.

    >>> issubclass(BulkInsertError, LoadError), issubclass(ConnectError, LoadError)
    (True, True)
    """

    def with_message(self, message: str) -> "LoadError":
        """A copy of this error (same class and attributes) saying ``message``."""
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        new.args = (message,)
        new.__cause__ = self.__cause__
        return new


class BulkInsertError(LoadError):
    """A RavenDB bulk insert failed on the server or in the transport, or could not
    complete. The message is the server's when it gave one; ``__cause__`` holds the
    underlying exception. A bulk insert's failures of the network and of the server are
    also the shared classes (:class:`ConnectError`, :class:`ServerError`, ...): see
    :data:`BULK_INSERT_CASES`."""


class BulkInsertAborted(BulkInsertError):
    """The bulk insert was stopped before its body was complete: ``abort()``, Ctrl-C while a
    call waited, a ``store_encoded`` interrupted part-way, or the server ending it early."""


class EarlyResponse(BulkInsertAborted):
    """The server answered the bulk insert request (2xx) before the body was complete."""

    def __init__(self, message: str, *, status: int | None = None,
                 body: bytes | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class TransportError(LoadError):
    """The network failed: a connection could not be made, was lost, or timed out (a
    server's, a CQL node's)."""


class ConnectError(TransportError):
    """No connection to the server: refused, unreachable, an unknown host, a TLS handshake
    that failed."""


class TLSError(ConnectError):
    """TLS failed: the server's certificate did not verify (``verify_failed``), or the server
    ended the session with an alert (``alert``: e.g. it requires a client certificate and got
    none, or one it does not trust). ``reason`` is OpenSSL's."""

    def __init__(self, message: str, *, reason: str = "", verify_failed: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.verify_failed = verify_failed

    @property
    def alert(self) -> bool:
        """The server ended the session with a TLS alert."""
        return "alert" in self.reason.lower()


class TLSFileError(TLSError, ValueError):
    """A file of the TLS settings that cannot be used: a client certificate whose key does
    not match it, is encrypted, is missing from the file, or that has expired; a file that
    holds no PEM certificate or key; a CA bundle without a certificate; something that is
    not a regular file. ``path`` is the file, ``argument`` what named it (``"certificate"``,
    ``"certificate key"``, ``"ca"``), ``reason`` what is wrong (OpenSSL's words in it). Raised
    when the settings are made, before any connection; it is also a ``ValueError`` (a bad
    argument).

    >>> error = TLSFileError("certificate='c.pem': the certificate expired", path="c.pem",
    ...                      argument="certificate", reason="the certificate expired")
    >>> isinstance(error, TLSError), isinstance(error, ValueError), error.path
    (True, True, 'c.pem')
    """

    def __init__(self, message: str, *, path: str | None = None, argument: str = "",
                 reason: str = "") -> None:
        super().__init__(message, reason=reason)
        self.path = path
        self.argument = argument


class ConnectionLostError(TransportError):
    """The connection was closed or reset before the server's answer was complete."""


class TransportTimeoutError(TransportError):
    """A socket operation (connect, send, or waiting for the answer) took longer than the
    load's ``timeout``."""


class ServerError(LoadError):
    """The server (a RavenDB server, a CQL node) answered with an error: an error status (``status``), or an operation it
    reports as faulted (``status`` None). ``body``: the first bytes of its answer."""

    def __init__(self, message: str, *, status: int | None = None,
                 body: bytes | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ProtocolError(ServerError):
    """The server's answer is not the protocol's: not HTTP, not JSON, or JSON of another shape
    (e.g. ``next-operation-id`` without an integer ``Id``)."""


class UnsupportedByServer(BulkInsertError):
    """The server taking the bulk insert is older than the RavenDB release that reads
    ``feature`` (``"zstd"``, ``"counters"``, ``"time series"``, ``"attachments"``); its
    version (``server_version``, as ``GET /build/version`` gives it) is in the message. The
    insert is failed before any of it is sent."""

    def __init__(self, message: str, *, feature: str = "", server_version: str = "") -> None:
        super().__init__(message)
        self.feature = feature
        self.server_version = server_version


class RowError(ValueError, BulkwireError):
    """A row of an Arrow batch that cannot be encoded as a command: ``column`` names the
    column, ``row`` the row (the file's row number; counted from the ``row_base`` given to
    the encoder), ``reason`` says what is wrong. With ``take``, ``take_index`` is the position
    in ``take`` whose row it is (``row`` is then the file's row), else None.

    >>> str(RowError("v", 4, "null vector"))
    "column 'v', row 4: null vector"
    >>> str(RowError("v", 700, "null vector", take_index=1))
    "column 'v', row 700 (take[1]): null vector"
    >>> str(RowError("v", 4, "null vector", source="part-1.parquet"))
    "'part-1.parquet': column 'v', row 4: null vector"

    ``source`` is the file the row is in (``load_parquet`` names it), or None.
    """

    def __init__(self, column: str, row: int, reason: str, *,
                 take_index: int | None = None, source: str | None = None) -> None:
        taken = "" if take_index is None else f" (take[{take_index}])"
        where = "" if source is None else f"{source!r}: "
        super().__init__(f"{where}column '{column}', row {row}{taken}: {reason}")
        self.column = column
        self.row = row
        self.reason = reason
        self.take_index = take_index
        self.source = source

    def __reduce__(self) -> tuple:
        # BaseException pickles as type(self)(*self.args), and args holds only the message:
        # a worker process, Dask or Ray ships a worker's RowError to the client by pickle
        return (_rebuild_row_error, (type(self), self.column, self.row, self.reason,
                                     self.take_index, self.__dict__))


def _rebuild_row_error(cls: type, column: str, row: int, reason: str,
                       take_index: int | None, state: dict) -> RowError:
    """A :class:`RowError` as it was pickled: message, attributes (``source`` included) and
    all."""
    error = cls(column, row, reason, take_index=take_index, source=state.get("source"))
    error.__dict__.update(state)
    return error


class MalformedFileError(ValueError, BulkwireError):
    """A source file whose own metadata is inconsistent: an offset or length outside the file,
    a page header or index that cannot be parsed, offsets that decrease or point past their
    buffer; or a file that changed since it was opened (cut short, rewritten, grown: "changed
    since it was opened" in the message). ``path`` names the file; the message says what is
    wrong and where."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ResumeStateError(ValueError, BulkwireError):
    """A resume state file that does not fit the load it was given to: it cannot be read, is
    not a state of this version or of this shape, records another target (database and
    servers), other options or other files, or another load is using it. ``path`` names the
    state file; the message names it too, and says what is wrong. Nothing was sent."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


def _mark_unconfirmed(error: BaseException, unconfirmed: object, note: str) -> None:
    """Says on ``error`` (raised by a load that did not complete) what the server did not
    confirm: ``error.unconfirmed`` (what it is depends on the load: files' row ranges, or
    partition numbers) and ``note`` appended to its notes (shown with the traceback on
    Python 3.11+; the ``bulkwire`` command prints them)."""
    error.unconfirmed = unconfirmed  # type: ignore[attr-defined]
    _add_note(error, note)


def _name_source_rows(error: BaseException, row: int | None, unacknowledged: list,
                      take: Any = None) -> None:
    """Words a failed CQL run's ``error`` in the rows of its source, the one numbering of a
    load's errors: ``row`` (the row the server refused, or None) and ``unacknowledged`` (the
    rows not acknowledged), each a row of the source or, with ``take``, a position in it, named
    as the file's row and its place (``777 (take[2])``). Sets ``source_row`` (the file's row),
    ``take_index`` (with take) and ``source_unacknowledged``; the message is the failure
    (``error.failure``: the connection's words without its own rows), then those rows. Called
    again with ``take`` once the rows are known to be positions in it."""
    unacknowledged = sorted(unacknowledged)
    error._source_positions = (row, unacknowledged)  # type: ignore[attr-defined]

    def file_row(p: int) -> int:
        return p if take is None else int(take[p])

    def named(p: int) -> str:
        return str(p) if take is None else f"{file_row(p)} (take[{p}])"

    error.source_row = None if row is None else file_row(row)  # type: ignore[attr-defined]
    error.take_index = None if take is None else row  # type: ignore[attr-defined]
    error.source_unacknowledged = [file_row(p) for p in unacknowledged]  # type: ignore[attr-defined]
    failure = getattr(error, "failure", None) or (error.args[0] if error.args else "")
    listed = ", ".join(named(p) for p in unacknowledged[:8])
    more = ", ..." if len(unacknowledged) > 8 else ""
    rows = (f"source row {named(row)}; " if row is not None else "") + \
        f"{len(unacknowledged)} source row(s) not acknowledged" + (f": {listed}{more}" if listed else "")
    error.args = (f"{failure} ({rows})",) + tuple(error.args[1:])


def _add_note(error: BaseException, note: str) -> None:
    """Appends ``note`` to ``error.__notes__`` (``BaseException.add_note`` where Python has
    it; the same list where it has not)."""
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        notes.append(note)
    else:
        error.__notes__ = [note]  # type: ignore[attr-defined]


class CqlServerError(ServerError):
    """A CQL server answered a request with ERROR (``bulkwire._core.CqlConnection``).

    ``code`` is the protocol's error code (``0x1001`` overloaded, ``0x2200`` invalid, ...),
    ``name`` its name, ``server_message`` the server's own words; the message also names
    the server (``host:port``). The codes that carry more set ``consistency``, ``required``,
    ``alive`` (unavailable), ``received``, ``blockfor`` and ``write_type`` (write timeout).
    Raised by a pipelined run, it also has ``row`` (the index of the body the server refused),
    ``unacknowledged`` (the sorted indexes of every body sent whose answer did not arrive,
    ``row`` among them) and ``sent`` (how many bodies, from the first, were sent: those below
    it and not unacknowledged were acknowledged); the connection's other failures
    (``ConnectionLostError``, ``TransportTimeoutError``, ``ProtocolError``) carry the same
    attributes.

    >>> error = CqlServerError("127.0.0.1:9042: error 0x2200 (Invalid): bad", code=0x2200,
    ...                        server_message="bad", name="Invalid")
    >>> error.code, error.name, error.server_message, isinstance(error, ServerError)
    (8704, 'Invalid', 'bad', True)
    """

    def __init__(self, message: str, *, code: int, server_message: str = "",
                 name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.server_message = server_message
        self.row: int | None = None
        self.unacknowledged: list[int] = []
        self.sent = 0

    def __reduce__(self) -> tuple:
        # the default pickle calls type(self)(*self.args), without the keyword-only code
        return (_rebuild_cql_server_error, (type(self), self.args[0], self.__dict__))


def _rebuild_cql_server_error(cls: type, message: str, state: dict) -> "CqlServerError":
    """A :class:`CqlServerError` as it was pickled, attributes and all."""
    error = cls(message, code=state["code"], server_message=state.get("server_message", ""),
                name=state.get("name", ""))
    error.__dict__.update(state)
    return error


__all__ += ["CqlServerError"]


# ------------------------------------------------------------- a bulk insert's own cases

class BulkInsertTransportError(TransportError, BulkInsertError):
    """A bulk insert's :class:`TransportError`."""


class BulkInsertConnectError(ConnectError, BulkInsertTransportError):
    """A bulk insert's :class:`ConnectError`."""


class BulkInsertTLSError(TLSError, BulkInsertConnectError):
    """A bulk insert's :class:`TLSError`."""


class BulkInsertTLSFileError(TLSFileError, BulkInsertTLSError):
    """A bulk insert's :class:`TLSFileError`."""


class BulkInsertConnectionLostError(ConnectionLostError, BulkInsertTransportError):
    """A bulk insert's :class:`ConnectionLostError`."""


class BulkInsertTimeoutError(TransportTimeoutError, BulkInsertTransportError):
    """A bulk insert's :class:`TransportTimeoutError`."""


class BulkInsertServerError(ServerError, BulkInsertError):
    """A RavenDB server's :class:`ServerError`."""


class BulkInsertProtocolError(ProtocolError, BulkInsertServerError):
    """A RavenDB server's :class:`ProtocolError`."""


#: Each shared class of a load's failures -> its bulk insert's case (a subclass of both it
#: and :class:`BulkInsertError`), which the RavenDB target raises: ``except BulkInsertError``
#: around a RavenDB load catches its network and server failures too, ``except
#: ConnectError`` (say) catches them whatever the target.
BULK_INSERT_CASES = {
    TransportError: BulkInsertTransportError, ConnectError: BulkInsertConnectError,
    TLSError: BulkInsertTLSError, TLSFileError: BulkInsertTLSFileError,
    ConnectionLostError: BulkInsertConnectionLostError,
    TransportTimeoutError: BulkInsertTimeoutError, ServerError: BulkInsertServerError,
    ProtocolError: BulkInsertProtocolError,
}


def bulk_insert_case(error: BaseException) -> BaseException:
    """``error`` as a bulk insert's: a :class:`LoadError` of a shared class (raised by code
    that serves every target) becomes its case of :data:`BULK_INSERT_CASES`, the same object
    with its attributes; any other error is returned as it is.

    >>> type(bulk_insert_case(ConnectError("refused"))).__name__
    'BulkInsertConnectError'
    """
    case = BULK_INSERT_CASES.get(type(error))
    if case is not None:
        error.__class__ = case
    return error


__all__ += ["LoadError", "BulkInsertTransportError",
            "BulkInsertConnectError", "BulkInsertTLSError", "BulkInsertTLSFileError", "BulkInsertConnectionLostError",
            "BulkInsertTimeoutError", "BulkInsertServerError", "BulkInsertProtocolError"]
__all__ += ["SchemaMismatchError"]
class SchemaMismatchError(ValueError, BulkwireError):
    """An Arrow/Parquet column whose type cannot be bound to the CQL column of the same name
    (or a CQL column the data does not have), found before any row is sent. ``column`` is
    the column's name, ``arrow_type`` its Arrow type in words ("int64",
    "fixed_size_list<float32, 4>"; empty when the data lacks the column), ``cql_type`` the
    CQL type ("vector<float, 3>").

    >>> str(SchemaMismatchError("column 'n': Arrow int64 cannot be bound to CQL int", "n",
    ...                         "int64", "int"))
    "column 'n': Arrow int64 cannot be bound to CQL int"
    """

    def __init__(self, message: str, column: str, arrow_type: str, cql_type: str) -> None:
        super().__init__(message)
        self.column = column
        self.arrow_type = arrow_type
        self.cql_type = cql_type

    def __reduce__(self) -> tuple:
        return (type(self), (self.args[0], self.column, self.arrow_type, self.cql_type),
                self.__dict__)
