"""The errors made from a server's answers (its status, its message, a JSON answer that is not
the protocol's) and from the socket's, TLS's and http.client's failures: only
:mod:`bulkwire.errors` exceptions, naming the request. A module of :mod:`bulkwire.transport`,
which keeps every name of it importable as before."""
from __future__ import annotations

import http.client
import json
import ssl
from typing import Any, Optional

from . import _core
from .errors import (ConnectError, ConnectionLostError, LoadError, ProtocolError, ServerError,
                     TLSError, TransportError, TransportTimeoutError, bulk_insert_case)
from ._transport_answer import _AnswerRefused

def error_message(body: bytes) -> Optional[str]:
    """The message in a server error body (``{"Message": ..., "Error": ...}``), if any."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return _message_member(data)


def _message_member(data: Any) -> Optional[str]:
    """RavenDB's error text in a decoded error object: its "Message", else its "Error"; with
    the innermost exception of "Error" after it when the message does not say it (a failed
    bulk insert's message is "Failed to process bulk insert ...", its cause only in "Error")."""
    if isinstance(data, dict):
        for key in ("Message", "Error"):
            value = data.get(key)
            if isinstance(value, str) and value:
                cause = _innermost_cause(data.get("Error"))
                return f"{value}: {cause}" if cause and cause not in value else value
    return None


#: the longest cause taken from an error's stack trace into a message
MAX_CAUSE_CHARS = 300


def _innermost_cause(error: Any) -> Optional[str]:
    r"""``"Type: message"`` of the innermost exception in a .NET exception text (``Outer: a
    ---> Inner: b\n   at ...``), or None when it names no inner exception.

    >>> _innermost_cause("System.X: failed ---> System.IO.Y: disk full\n   at Z()")
    'System.IO.Y: disk full'
    """
    if not isinstance(error, str):
        return None
    head = error.split("\n   at ", 1)[0]
    if " ---> " not in head:
        return None
    cause = head.rsplit(" ---> ", 1)[1].strip()
    return cause[:MAX_CAUSE_CHARS] or None


def _protocol_error(message: str, **fields: Any) -> BaseException:
    """A RavenDB server's :class:`~bulkwire.errors.ProtocolError` saying ``message``."""
    return bulk_insert_case(ProtocolError(message, **fields))


def status_error(status: int, body: bytes, what: str, *, message_first: bool = False) -> ServerError:
    """The error for an answer with a status outside 2xx to the request ``what``.
    ``message_first``: the server's message leads (its verdict on the body matters most)."""
    said = error_message(body)
    if said and message_first:
        message = f"{said} (HTTP {status} from {what})"
    else:
        message = f"HTTP {status} from {what}: {said or (repr(body[:200]) if body else 'no message')}"
    return bulk_insert_case(ServerError(message, status=status, body=body[:1000]))


def tls_error(exc: BaseException, what: str) -> TLSError:
    """The :class:`TLSError` for a TLS failure of bulkwire's own (``_core.TlsError``) or of
    Python's ssl (``ssl.SSLError``) during the request ``what``."""
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
        verify_failed = isinstance(exc, ssl.SSLCertVerificationError)
        reason = f"certificate verify failed: {reason}" if verify_failed else str(reason).lower().replace("_", " ")
    else:
        reason = str(exc)
        verify_failed = bool(getattr(exc, "verify_failed", False))
    if verify_failed:
        message = (f"{what}: the server's certificate failed verification ({reason}); give ca= "
                   f"the CA bundle that signed it (ca=False skips verification)")
    elif "alert" in reason.lower():
        message = (f"{what}: the server refused the TLS session ({reason}); a server that "
                   f"requires a client certificate refuses a missing or untrusted one (certificate=)")
    else:
        message = f"{what}: TLS failed: {reason}"
    return bulk_insert_case(TLSError(message, reason=reason, verify_failed=verify_failed))


def transport_error(exc: BaseException, what: str, timeout: Optional[float], *,
                    connecting: bool = False) -> BaseException:
    """The :mod:`bulkwire.errors` exception for ``exc``, raised by the socket or
    ``http.client`` during the request ``what`` (``exc`` itself when it is not one of theirs).
    The caller chains it (``raise ... from exc``)."""
    if isinstance(exc, LoadError):  # a shared class raised below this: the bulk insert's case
        return bulk_insert_case(exc)
    if isinstance(exc, TimeoutError):  # socket.timeout, and the pump's
        return bulk_insert_case(TransportTimeoutError(
            f"{what} timed out: nothing moved for {timeout} s"))
    if isinstance(exc, (_core.TlsError, ssl.SSLError)) and not isinstance(exc, ssl.SSLEOFError):
        return tls_error(exc, what)
    if connecting and isinstance(exc, OSError):  # refused, unreachable, unknown host, TLS
        return bulk_insert_case(ConnectError(f"cannot reach the server for {what}: {exc}"))
    if isinstance(exc, http.client.RemoteDisconnected):  # before ConnectionError: it is both
        return bulk_insert_case(ConnectionLostError(
            f"{what}: the server closed the connection without answering"))
    if isinstance(exc, ConnectionError):  # reset, broken pipe, aborted
        return bulk_insert_case(ConnectionLostError(f"{what}: the connection was lost: {exc}"))
    if isinstance(exc, http.client.IncompleteRead):
        return bulk_insert_case(ConnectionLostError(
            f"{what}: the connection was closed in the middle of the answer"))
    if isinstance(exc, _AnswerRefused):  # what _Answer refuses, in its own words
        return bulk_insert_case(ProtocolError(f"{what}: {exc}"))
    if isinstance(exc, http.client.HTTPException):  # a bad status line, headers too long, ...
        return bulk_insert_case(ProtocolError(
            f"{what}: the answer is not HTTP/1.1: {exc!r}"))
    if isinstance(exc, OSError):
        return bulk_insert_case(TransportError(f"{what}: {exc}"))
    return exc


def _pending_alert(conn: http.client.HTTPConnection, exc: BaseException) -> BaseException:
    """The TLS alert the server sent before it closed, when writing to it failed (``exc``):
    with TLS 1.3 a server that refuses the client's certificate says so after the handshake,
    and a request written meanwhile meets the closed connection before the alert is read.
    Reading it tells the refusal from a lost connection; ``exc`` when there is none."""
    sock = conn.sock
    if not isinstance(sock, ssl.SSLSocket) or not isinstance(exc, (ssl.SSLEOFError,
                                                                     ConnectionError)):
        return exc
    try:
        sock.settimeout(1.0)
        sock.recv(1)
    except ssl.SSLError as alert:
        if not isinstance(alert, ssl.SSLEOFError):
            return alert
    except OSError:
        pass
    return exc


def _json_answer(status: int, body: bytes, what: str) -> Any:
    if not 200 <= status < 300:
        raise status_error(status, body, what)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _protocol_error(f"{what}: the answer is not JSON: {body[:200]!r}", status=status,
                            body=body[:1000]) from exc
