"""A loopback server speaking the bulk insert protocol of SPEC §3, for tests and benchmarks.

>>> with LoopbackServer() as server:                       # doctest: +SKIP
...     with bulkwire.BulkInsert(server.url, server.database) as bulk:
...         bulk.store({"Name": "a"}, id="things/1")
...     server.documents["things/1"]["Name"]
'a'

It listens on 127.0.0.1 (an ephemeral port), reads the chunked (and gzip) body as it
arrives, chunk by chunk, parses the command stream and keeps the documents. On request it
stalls (stops reading the body until :meth:`resume`), fails mid-stream (HTTP 500 with an
error body that ``operations/state`` then reports), or finishes the request early.

It also answers the few requests the official Python client makes before a bulk insert
(``topology``, ``cluster/topology``, ``build/version``), so that client can be benchmarked
against it.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

__all__ = ["LoopbackServer", "ReceivedRequest"]

_PUT_MARKER = b'"Type":"PUT"'
_FAULT_TYPE = "Raven.Client.Documents.Operations.OperationExceptionResult, Raven.Client"


class ReceivedRequest:
    """One bulk insert request as the server saw it."""

    def __init__(self, op_id: int, headers: Dict[str, str], query: Dict[str, str]) -> None:
        self.op_id = op_id
        self.headers = headers
        self.query = query
        self.wire_chunks: List[int] = []     # size of each HTTP chunk on the wire
        self.wire = bytearray()               # the body as sent (when the server keeps it)
        self.decoded_chunks: List[bytes] = []  # what each chunk decoded to, on arrival
        self.body = bytearray()               # the decoded (uncompressed) body
        self.body_bytes = 0                   # its length (also when the body is not kept)
        self.put_commands = 0                 # PUT commands counted (when the body is not kept)
        self.complete = False                 # the terminating chunk arrived
        self.commands: Optional[list] = None  # parsed commands, when complete
        self.error: Optional[str] = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: Any, handler: type, recv_buffer: Optional[int]) -> None:
        self._recv_buffer = recv_buffer
        super().__init__(address, handler)

    def server_bind(self) -> None:
        if self._recv_buffer:  # accepted sockets inherit it: a small window stalls sooner
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer)
        super().server_bind()


class LoopbackServer:
    """A real HTTP/1.1 server on 127.0.0.1 implementing the bulk insert endpoints."""

    def __init__(self, database: str = "db", *, keep_decoded_chunks: bool = True,
                 parse: bool = True, keep_wire: bool = False, keep_body: bool = True,
                 recv_buffer: Optional[int] = None, port: int = 0) -> None:
        self.database = database
        self.keep_decoded_chunks = keep_decoded_chunks
        self.parse = parse
        self.documents: Dict[str, Any] = {}
        self.requests: List[ReceivedRequest] = []
        self.log: List[str] = []  # "METHOD path" of every request
        self.operations: Dict[int, dict] = {}
        self.killed: set = set()
        self._lock = threading.Lock()
        self._next_op = 0
        self._running = threading.Event()
        self._running.set()
        self._resume = threading.Event()
        self._resume.set()
        self.stalled_at: Optional[int] = None  # decoded bytes received when the stall began
        self.stall_after_bytes: Optional[int] = None
        self.fail_after_bytes: Optional[int] = None
        self.fail_message = "Simulated failure on the server"
        self.finish_after_bytes: Optional[int] = None
        self.read_delay = 0.0  # seconds to sleep after each chunk (a slow server)
        self.keep_wire = keep_wire  # keep each request's body exactly as it came off the wire
        self.keep_body = keep_body  # False: count bytes and PUT commands only (benchmarks)
        if not keep_body:
            self.parse = self.keep_decoded_chunks = False
        self._httpd = _Server(("127.0.0.1", port), self._handler_class(), recv_buffer)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="bulkwire-loopback", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # ---- control ----

    def stall(self, after_bytes: int = 0) -> None:
        """Stop reading bulk insert bodies once ``after_bytes`` decoded bytes have arrived."""
        self.stall_after_bytes = after_bytes
        self._resume.clear()

    def resume(self) -> None:
        self.stall_after_bytes = None
        self._resume.set()

    @property
    def stalled(self) -> bool:
        return self.stalled_at is not None and not self._resume.is_set()

    def wait_stalled(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stalled:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self._running.clear()
        self._resume.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- request handling ----

    def _handler_class(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server._dispatch(self, "GET")

            def do_POST(self) -> None:
                server._dispatch(self, "POST")

            def do_PUT(self) -> None:
                server._dispatch(self, "PUT")

        return Handler

    def _reply(self, h: BaseHTTPRequestHandler, status: int, payload: Any, *, close: bool = False) -> None:
        body = json.dumps(payload).encode() if payload is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        if close:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        path = parsed.path
        with self._lock:
            self.log.append(f"{method} {h.path}")
        prefix = f"/databases/{self.database}"
        if path.startswith(prefix):
            rest = path[len(prefix):]
            if method == "GET" and rest == "/operations/next-operation-id":
                with self._lock:
                    self._next_op += 1
                    op = self._next_op
                    self.operations[op] = {"Status": "InProgress", "Result": None}
                return self._reply(h, 200, {"Id": op, "NodeTag": "A"})
            if method == "POST" and rest == "/bulk_insert":
                return self._bulk_insert(h, query)
            if method == "GET" and rest == "/operations/state":
                state = self.operations.get(int(query.get("id", "0")))
                if state is None:
                    return self._reply(h, 404, {"Message": "no such operation"})
                return self._reply(h, 200, state)
            if method == "POST" and rest == "/operations/kill":
                op = int(query.get("id", "0"))
                self.killed.add(op)
                if op in self.operations:
                    self.operations[op] = {"Status": "Canceled", "Result": None}
                return self._reply(h, 200, None)
            if method == "GET" and rest == "/topology":
                return self._reply(h, 200, self._topology())
            if method == "GET" and rest.startswith("/hilo/next"):
                with self._lock:
                    self._next_op += 1000
                    low = self._next_op
                return self._reply(h, 200, {"Prefix": "", "Low": low, "High": low + 999,
                                            "LastSize": 1000, "ServerTag": "A",
                                            "LastRangeAt": "2020-01-01T00:00:00.0000000"})
        if method == "GET" and path == "/cluster/topology":
            return self._reply(h, 200, {"Topology": {"TopologyId": "t", "AllNodes": {"A": self.url},
                                                     "Members": {"A": self.url}, "Promotables": {},
                                                     "Watchers": {}, "LastNodeId": "A", "Etag": 1},
                                        "Leader": "A", "NodeTag": "A", "Etag": 1, "Status": {}})
        if method == "GET" and path == "/_loopback/last":
            return self._reply(h, 200, self.last_request_summary())
        if method == "GET" and path.startswith("/build/version"):
            return self._reply(h, 200, {"BuildVersion": 72, "ProductVersion": "7.2",
                                        "CommitHash": "loopback", "FullVersion": "7.2.0"})
        self._drain(h)
        return self._reply(h, 404, {"Message": f"not implemented by the loopback server: {method} {path}"})

    def last_request_summary(self) -> dict:
        """What the last bulk insert request looked like (also at GET /_loopback/last)."""
        if not self.requests:
            return {}
        r = self.requests[-1]
        return {"op_id": r.op_id, "complete": r.complete, "error": r.error,
                "wire_chunks": len(r.wire_chunks), "wire_bytes": sum(r.wire_chunks),
                "body_bytes": r.body_bytes,
                "documents": len(r.commands) if r.commands is not None else r.put_commands,
                "content_encoding": r.headers.get("Content-Encoding")}

    def _topology(self) -> dict:
        return {"Nodes": [{"Url": self.url, "ClusterTag": "A", "Database": self.database,
                           "ServerRole": "Member"}], "Etag": 1}

    @staticmethod
    def _drain(h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)

    def _bulk_insert(self, h: BaseHTTPRequestHandler, query: Dict[str, str]) -> None:
        op = int(query.get("id", "0"))
        request = ReceivedRequest(op, dict(h.headers.items()), query)
        with self._lock:
            self.requests.append(request)
        gzip = h.headers.get("Content-Encoding", "").lower() == "gzip"
        decoder = zlib.decompressobj(31) if gzip else None
        received = 0
        tail = b""
        chunked = h.headers.get("Transfer-Encoding", "").lower() == "chunked"
        remaining = None if chunked else int(h.headers.get("Content-Length") or 0)
        # Counting only: read each chunk into one reused buffer (a fresh 1 MiB object per chunk
        # costs the server page faults that a benchmark would charge to the client).
        keeps = self.keep_body or self.keep_wire or self.keep_decoded_chunks
        scratch: Optional[bytearray] = None if keeps else bytearray(1 << 20)
        while self._running.is_set():
            if self.stall_after_bytes is not None and received >= self.stall_after_bytes:
                self.stalled_at = received
                while not self._resume.wait(0.05):
                    if not self._running.is_set():
                        return
                self.stalled_at = None
            if op in self.killed:
                request.error = "killed"
                h.close_connection = True
                return
            if chunked:
                size_line = h.rfile.readline(1024)
                if not size_line:
                    request.error = "connection closed before the end of the body"
                    self._fault(op, request.error)
                    h.close_connection = True
                    return
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    h.rfile.readline(1024)  # the CRLF after the last chunk (no trailers)
                    break
                if scratch is not None:
                    if len(scratch) < size:
                        scratch = bytearray(size)
                    data = memoryview(scratch)[:h.rfile.readinto(memoryview(scratch)[:size])]
                else:
                    data = h.rfile.read(size)
                if len(data) < size:
                    request.error = "connection closed in the middle of a chunk"
                    self._fault(op, request.error)
                    h.close_connection = True
                    return
                h.rfile.readline(1024)
            else:
                if not remaining:
                    break
                data = h.rfile.read(min(remaining, 1 << 20))
                if not data:
                    request.error = "connection closed before the end of the body"
                    h.close_connection = True
                    return
                remaining -= len(data)
            request.wire_chunks.append(len(data))
            if self.keep_wire:
                request.wire += data
            decoded = decoder.decompress(data) if decoder is not None else data
            if self.keep_decoded_chunks:
                request.decoded_chunks.append(decoded)
            if self.keep_body:
                request.body += decoded
            else:
                # every marker inside the piece, plus the one that may straddle the boundary
                # with the previous pieces (the last len(marker) - 1 bytes seen, kept in tail)
                edge = len(_PUT_MARKER) - 1
                inside = (scratch.count(_PUT_MARKER, 0, len(decoded)) if isinstance(decoded, memoryview)
                          else decoded.count(_PUT_MARKER))
                request.put_commands += inside + (tail + bytes(decoded[:edge])).count(_PUT_MARKER)
                tail = (tail + bytes(decoded[-edge:]))[-edge:]
            request.body_bytes += len(decoded)
            received += len(decoded)
            if self.read_delay:
                time.sleep(self.read_delay)
            if self.fail_after_bytes is not None and received >= self.fail_after_bytes:
                self._fault(op, self.fail_message)
                request.error = self.fail_message
                return self._reply(h, 500, {"Type": "Raven.Server.BulkInsertFailed",
                                            "Message": self.fail_message,
                                            "Error": self.fail_message + "\n   at LoopbackServer"},
                                   close=True)
            if self.finish_after_bytes is not None and received >= self.finish_after_bytes:
                request.error = "finished early"
                self._complete(op)
                return self._reply(h, 200, {"Message": "The server finished the bulk insert early"},
                                   close=True)
        if not self._running.is_set():  # closed while reading: the body did not end
            request.error = "the server shut down before the end of the body"
            h.close_connection = True
            return
        if decoder is not None:
            tail = decoder.flush()
            request.body += tail
            if not decoder.eof:
                request.error = "gzip stream not terminated"
        request.complete = True
        if self.parse:
            try:
                commands = json.loads(bytes(request.body))
            except ValueError as exc:
                request.error = f"bad body: {exc}"
                self._fault(op, request.error)
                return self._reply(h, 400, {"Message": request.error}, close=True)
            request.commands = commands
            with self._lock:
                for command in commands:
                    if command.get("Type") == "PUT":
                        self.documents[command["Id"]] = command["Document"]
        self._complete(op)
        self._reply(h, 200, None)

    def _fault(self, op: int, message: str) -> None:
        if self.operations.get(op, {}).get("Status") == "Canceled":
            return  # a killed operation stays killed, whatever its connection does afterwards
        self.operations[op] = {"Status": "Faulted",
                               "Result": {"$type": _FAULT_TYPE, "Message": message,
                                          "Error": message + "\n   at LoopbackServer",
                                          "StatusCode": 500}}

    def _complete(self, op: int) -> None:
        if self.operations.get(op, {}).get("Status") == "InProgress":
            self.operations[op] = {"Status": "Completed", "Result": {"Total": 0}}


def serve(port: int = 0, database: str = "db", **options: Any) -> None:
    """Run a server until interrupted, printing its URL first (benchmarks run it in its own
    process so that it does not share the client's GIL)."""
    with LoopbackServer(database, port=port, **options) as server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="bulkwire's loopback bulk insert server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--database", default="db")
    parser.add_argument("--count-only", action="store_true", help="count bytes and commands, keep nothing")
    args = parser.parse_args()
    serve(args.port, args.database, keep_body=not args.count_only)
