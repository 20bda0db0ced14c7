"""The exceptions of a bulk insert, all in one place.

Every failure of :class:`bulkwire.BulkInsert` reaches the caller as one of these, raised by
``store``/``store_many``/``store_encoded``, ``close`` or ``abort`` (``__cause__`` holds the
lower-level exception: the socket's, ``http.client``'s, the JSON decoder's)::

    RuntimeError
     └── BulkInsertError               the bulk insert did not complete
          ├── BulkInsertAborted         it was stopped before its body was complete:
          │    │                        abort(), Ctrl-C while waiting, an interrupted store
          │    └── EarlyResponse        the server ended the request (2xx) before the end
          │                             of the body
          ├── TransportError            the network failed: no whole answer arrived
          │    ├── ConnectError         no connection: refused, unreachable, unknown host,
          │    │                        TLS handshake
          │    ├── ConnectionLostError  the connection was closed or reset before the
          │    │                        answer was complete
          │    └── TransportTimeoutError  a socket operation waited longer than ``timeout``
          └── ServerError               the server answered with an error: an error status,
               │                        or an operation it reports as faulted
               └── ProtocolError        an answer that is not the protocol's: not HTTP, not
                                        JSON, or JSON of another shape

Errors name the request (``GET http://host/databases/db/operations/next-operation-id``) and,
for the server's errors, carry its message. ``ServerError.status`` is the HTTP status (None
when the error came from ``operations/state``); ``ServerError.body`` the answer's first bytes.

>>> try:
...     raise ConnectError("cannot reach the server at http://127.0.0.1:9: refused")
... except BulkInsertError as exc:
...     isinstance(exc, TransportError), isinstance(exc, RuntimeError)
(True, True)
"""
from __future__ import annotations

from typing import Optional

__all__ = ["BulkInsertError", "BulkInsertAborted", "EarlyResponse", "TransportError",
           "ConnectError", "ConnectionLostError", "TransportTimeoutError", "ServerError",
           "ProtocolError"]


class BulkInsertError(RuntimeError):
    """The bulk insert failed on the server or in the transport, or could not complete. The
    message is the server's when it gave one; ``__cause__`` holds the underlying exception."""

    def with_message(self, message: str) -> "BulkInsertError":
        """A copy of this error (same class and attributes) saying ``message``."""
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        new.args = (message,)
        new.__cause__ = self.__cause__
        return new


class BulkInsertAborted(BulkInsertError):
    """The bulk insert was stopped before its body was complete: ``abort()``, Ctrl-C while a
    call waited, a ``store_encoded`` interrupted part-way, or the server ending it early."""


class EarlyResponse(BulkInsertAborted):
    """The server answered the bulk insert request (2xx) before the body was complete."""

    def __init__(self, message: str, *, status: Optional[int] = None,
                 body: Optional[bytes] = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class TransportError(BulkInsertError):
    """The network failed: a connection could not be made, was lost, or timed out."""


class ConnectError(TransportError):
    """No connection to the server: refused, unreachable, an unknown host, a TLS handshake
    that failed."""


class ConnectionLostError(TransportError):
    """The connection was closed or reset before the server's answer was complete."""


class TransportTimeoutError(TransportError):
    """A socket operation (connect, send, or waiting for the answer) took longer than the
    bulk insert's ``timeout``."""


class ServerError(BulkInsertError):
    """The server answered with an error: an error status (``status``), or an operation it
    reports as faulted (``status`` None). ``body``: the first bytes of its answer."""

    def __init__(self, message: str, *, status: Optional[int] = None,
                 body: Optional[bytes] = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ProtocolError(ServerError):
    """The server's answer is not the protocol's: not HTTP, not JSON, or JSON of another shape
    (e.g. ``next-operation-id`` without an integer ``Id``)."""
