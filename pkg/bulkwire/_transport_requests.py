"""The requests of the bulk insert protocol against one server and database
(:class:`HttpTransport`): their heads written as http.client writes them, their answers read
by :mod:`bulkwire._transport_answer`, their failures raised by
:mod:`bulkwire._transport_errors`. A module of :mod:`bulkwire.transport`, which keeps every
name of it importable as before."""
from __future__ import annotations

import http.client
import re
import ssl
import urllib.parse
from typing import Optional, Sequence, Tuple, Union

from .errors import BulkInsertError
from .tls import TlsSettings
from .urls import DEFAULT_PORTS, ServerUrl, parse_server_url
from ._transport_answer import MAX_ANSWER_BYTES, _Answer, _answered
from ._transport_errors import (_json_answer, _message_member, _pending_alert, _protocol_error,
                                status_error, transport_error)

# operation_error() when the state says Faulted but gives no message of its own
FAULTED_WITHOUT_MESSAGE = "the server reported the operation as faulted"


# What a request's head may not hold (http.client's rules, and ASCII only): in the method
# and the target (path, host), a control character or space; in a header's name, also ":";
# in its value, a line end or another control character but the tab
_REFUSED_IN_TOKEN = re.compile(r"[^\x21-\x7e]")
_REFUSED_IN_FIELD = re.compile(r"[^\x21-\x39\x3b-\x7e]")
_REFUSED_IN_VALUE = re.compile(r"[^\t\x20-\x7e]")


class HttpTransport:
    """Requests of the bulk insert protocol against one server (``url``: a
    :class:`~bulkwire.urls.ServerUrl`, or a ``str`` that
    :func:`~bulkwire.urls.parse_server_url` takes) and database. Every request raises only
    :mod:`bulkwire.errors` exceptions, naming the request."""

    def __init__(self, url: Union[str, ServerUrl], database: str, *,
                 timeout: Optional[float] = 300.0, tls: Optional[TlsSettings] = None) -> None:
        server = url if isinstance(url, ServerUrl) else parse_server_url(url, "url")
        if not isinstance(database, str):
            raise TypeError(f"database must be a str, not {type(database).__name__}")
        if not database or database.isspace():
            raise ValueError("database must be a non-empty name")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
        if tls is not None and server.scheme != "https":
            raise ValueError(f"certificate, ca and ssl_context need an https:// URL, not {server}")
        self.server = server
        self.scheme = server.scheme
        # the https:// connections' TLS (bulkwire's own, with the system's CAs, by default)
        self.tls = tls if tls is not None or server.scheme != "https" else TlsSettings()
        self.host = server.host
        self.port = server.port
        # the Host header http.client writes: an IPv6 address in brackets, the port left out
        # when it is the scheme's own
        host = f"[{server.host}]" if ":" in server.host else server.host
        self._host_field = host if server.port == DEFAULT_PORTS[server.scheme] else f"{host}:{server.port}"
        self.timeout = timeout
        self.database = database
        self.root = server.root  # the server's own paths (topology) start here
        self.base = (self.root + "/databases/" + urllib.parse.quote(database, safe=""))
        self.origin = server.origin

    def url_of(self, path: str) -> str:
        """The full URL of the protocol path ``path`` (for messages)."""
        return self.origin + self.base + path

    def head(self, method: str, path: str, fields: Sequence[Tuple[str, str]]) -> bytes:
        """The request line and headers of a request to ``path`` (from the server's root):
        ``Host`` first, then ``fields``, as http.client writes a request's head (the one
        place bulkwire's requests are written; their answers are read by :class:`_Answer`).
        Every part is ASCII: the host and paths were judged by :mod:`bulkwire.urls`, the
        database name is percent-encoded. A part that would end its line or the head early
        or is not ASCII (a hand-built :class:`~bulkwire.urls.ServerUrl` is not judged) is
        refused here, as http.client refused it: ``ValueError`` naming the part, nothing
        written."""
        for part, text in (("method", method), ("path", path), ("host", self._host_field)):
            if _REFUSED_IN_TOKEN.search(text):
                raise ValueError(f"the request's {part} {text[:200]!r} holds a control "
                                 f"character, a space or a character outside ASCII: a request "
                                 f"to {self.origin!r} cannot be written with it")
        for name, value in fields:
            if _REFUSED_IN_FIELD.search(name) or not name or _REFUSED_IN_VALUE.search(value):
                raise ValueError(f"the request's header {name[:100]!r}: {value[:200]!r} holds "
                                 f"a line end, a control character or a character outside "
                                 f"ASCII: a request to {self.origin!r} cannot be written with it")
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self._host_field}"]
        lines += [f"{name}: {value}" for name, value in fields]
        lines.append("\r\n")
        return "\r\n".join(lines).encode("ascii")

    def short_timeout(self, limit: float) -> float:
        """The timeout of a request that only asks (state) or tells (kill): the transport's,
        but at most ``limit``."""
        return limit if self.timeout is None else min(self.timeout, limit)

    def connect(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        """A connection object, not yet connected (see :meth:`open`)."""
        timeout = self.timeout if timeout is None else timeout
        if self.tls is not None:
            conn = self.tls.http_connection(self.host, self.port, timeout)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn.response_class = _Answer
        return conn

    @staticmethod
    def open(conn: http.client.HTTPConnection, what: str) -> bool:
        """Connects ``conn`` unless it is still connected from an earlier request and the
        server has not spoken since (an idle connection that reads as ready was closed by the
        server, or holds bytes nobody asked for: it is closed, and a new one made);
        :class:`ConnectError` (or a timeout) when it cannot connect. True when it connected
        (a new connection), False when ``conn`` is kept as it was."""
        sock = conn.sock
        if sock is not None:
            if not _answered(sock) and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return False
            conn.close()
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise transport_error(exc, what, conn.timeout, connecting=True) from exc
        return True

    def request(self, method: str, path: str, *, timeout: Optional[float] = None,
                server_wide: bool = False,
                conn: Optional[http.client.HTTPConnection] = None) -> Tuple[int, bytes]:
        """``(status, body)`` of one request without a body, to the database's ``path`` (the
        server's own with ``server_wide``); the transport's errors raise as
        :mod:`bulkwire.errors` exceptions.

        ``conn`` (from :meth:`connect`): the request goes on it, and it stays open for the
        caller's next request when the answer leaves it open (the caller closes it); closed
        when the request fails. Without it, a connection of its own, closed afterwards."""
        full_path = (self.root if server_wide else self.base) + path
        what = f"{method} {self.origin}{full_path}"
        own = conn is None
        if conn is None:
            conn = self.connect(timeout)
        failed = True
        try:
            self.open(conn, what)
            # the head http.client's request() writes for a request without a body (a
            # Content-Length of 0 where the method expects a body)
            fields = [("Accept-Encoding", "identity")]
            if method in ("POST", "PUT", "PATCH"):
                fields.append(("Content-Length", "0"))
            fields.append(("Accept", "application/json"))
            try:
                conn.sock.sendall(self.head(method, full_path, fields))
                response = _Answer(conn.sock, method=method)
                try:
                    response.begin()
                    body = response.read_at_most(MAX_ANSWER_BYTES + 1)
                finally:
                    response.close()
            except (OSError, http.client.HTTPException) as exc:
                raise transport_error(_pending_alert(conn, exc), what, conn.timeout) from exc
            # the rest unread (the stream is lost), or the server ends the connection here
            failed = len(body) > MAX_ANSWER_BYTES or response.will_close
        finally:
            if own or failed:
                conn.close()
        if len(body) > MAX_ANSWER_BYTES:
            raise _protocol_error(f"{what}: the answer is larger than {MAX_ANSWER_BYTES} bytes",
                                status=response.status, body=body[:1000])
        return response.status, body

    def next_operation_id(self, conn: Optional[http.client.HTTPConnection] = None
                          ) -> Tuple[int, Optional[str]]:
        """``(operation id, node tag)`` for a new bulk insert (on ``conn``, left open for the
        insert's body, when given: see :meth:`request`)."""
        path = "/operations/next-operation-id"
        what = f"GET {self.url_of(path)}"
        status, body = self.request("GET", path, conn=conn)
        try:
            data = _json_answer(status, body, what)
            op_id = data.get("Id") if isinstance(data, dict) else None
            if type(op_id) is not int or op_id < 0:
                raise _protocol_error(f"{what}: the answer has no operation id (a non-negative "
                                    f"integer \"Id\"): {body[:200]!r}", status=status,
                                    body=body[:1000])
        except BaseException:
            if conn is not None:  # no insert follows on it
                conn.close()
            raise
        tag = data.get("NodeTag")
        return op_id, tag if isinstance(tag, str) else None

    def operation_state(self, op_id: int, *, timeout: float = 5.0) -> dict:
        """The server's ``operations/state`` of the operation (a JSON object)."""
        path = f"/operations/state?id={op_id}"
        what = f"GET {self.url_of(path)}"
        status, body = self.request("GET", path, timeout=self.short_timeout(timeout))
        data = _json_answer(status, body, what)
        if not isinstance(data, dict):
            raise _protocol_error(f"{what}: the answer is not a JSON object: {body[:200]!r}",
                                status=status, body=body[:1000])
        return data

    def operation_error(self, op_id: int) -> Optional[str]:
        """The error the server recorded for the operation, when it reports it as faulted;
        None when it does not, or does not say (whatever it answers: this explains a failure
        that is already certain, and must not raise one of its own)."""
        try:
            state = self.operation_state(op_id)
        except BulkInsertError:
            return None  # the server is gone or does not say; the transport's error stands
        if state.get("Status") != "Faulted":
            return None
        return _message_member(state.get("Result")) or FAULTED_WITHOUT_MESSAGE

    def kill(self, op_id: int) -> None:
        """Kills the operation on the server (``operations/kill``)."""
        path = f"/operations/kill?id={op_id}"
        status, body = self.request("POST", path, timeout=self.short_timeout(10.0))
        if not 200 <= status < 300:
            raise status_error(status, body, f"POST {self.url_of(path)}")

    def bulk_insert_path(self, op_id: int, skip_overwrite_if_unchanged: bool) -> str:
        flag = "true" if skip_overwrite_if_unchanged else "false"
        return f"/bulk_insert?id={op_id}&skipOverwriteIfUnchanged={flag}"
