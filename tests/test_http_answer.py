"""The answers bulkwire reads (an operation id, a state, the answer to a body) go through a
head parser of its own: differential against http.client's, on generated heads, for what
decides how the body is read (status, version, chunked, length, whether the connection
closes) and for the headers, then the body read through both; and the same errors."""
from __future__ import annotations

import http.client

import pytest
from hypothesis import given, settings, strategies as st

from bulkwire.transport import HEADER_COUNT_LIMIT, HEADER_LINE_LIMIT, _Answer


class FakeSocket:
    """What HTTPResponse reads an answer from: ``makefile`` over fixed bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str, *args: object, **kwargs: object):
        import io

        return io.BufferedReader(io.BytesIO(self.data))


def read_with(cls: type, data: bytes, method: str = "GET") -> dict:
    """What ``cls`` makes of the answer ``data``: its framing, headers and body, or the
    exception it raised (type and text)."""
    response = cls(FakeSocket(data), method=method)
    try:
        response.begin()
        framing = dict(status=response.status, reason=response.reason,
                       version=response.version, chunked=response.chunked,
                       length=response.length, will_close=response.will_close,
                       headers=list(response.headers.items()))
        try:
            framing["body"] = response.read()
        except (http.client.HTTPException, ValueError) as exc:
            framing["body_error"] = type(exc).__name__
        return framing
    except http.client.HTTPException as exc:
        return {"error": type(exc).__name__, "text": str(exc)}


def same(data: bytes, method: str = "GET") -> dict:
    ours = read_with(_Answer, data, method)
    theirs = read_with(http.client.HTTPResponse, data, method)
    assert ours == theirs
    return ours


# header names and values as servers write them, and some as they should not
names = st.sampled_from(["Content-Type", "Content-Length", "content-length", "Proxy-Connection",
                         "Transfer-Encoding", "Connection", "Keep-Alive", "Server", "Date",
                         "Raft-Term", "X-Weird_Name", "Vary"])
plain_values = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e),
                       max_size=20)
framing_values = st.sampled_from(["chunked", "Chunked", "gzip, chunked", "close", "Close",
                                  "keep-alive", "0", "5", "12", "-1", "abc", " 7 ", ""])
values = st.one_of(plain_values, framing_values,
                   st.text(alphabet=" \tab:;,=\x80\xe9", max_size=12))


@st.composite
def heads(draw) -> bytes:
    status = draw(st.sampled_from([200, 201, 204, 304, 400, 404, 500, 199]))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0"]))
    lines = [f"{version} {status} {draw(st.sampled_from(['OK', 'Created', '', 'Some Reason']))}"]
    if draw(st.booleans()) and status == 200:
        lines = ["HTTP/1.1 100 Continue", "X-Skipped: 1", ""] + lines
    for _ in range(draw(st.integers(0, 8))):
        spacing = draw(st.sampled_from([": ", ":", ":  ", " : ", ":\t"]))
        lines.append(f"{draw(names)}{spacing}{draw(values)}")
    body = draw(st.binary(max_size=40))
    text = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
    if draw(st.booleans()):
        return text + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    return text + body


@settings(max_examples=400, deadline=None)
@given(data=heads(), method=st.sampled_from(["GET", "POST", "HEAD"]))
def test_answers_read_the_same_as_http_client_reads_them(data, method):
    same(data, method)


def test_an_answer_with_a_length():
    got = same(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n"
               b"\r\n{\"Id\": 7}trailing")
    assert got["body"] == b'{"Id": 7}' and got["length"] == 9 and not got["will_close"]


def test_a_chunked_answer_that_closes():
    got = same(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
               b"\r\n3\r\nabc\r\n0\r\n\r\n")
    assert got["body"] == b"abc" and got["chunked"] and got["will_close"]


@pytest.mark.parametrize("folded", [b" continued", b"\tcontinued", b"  two  spaces "])
def test_folded_header_lines(folded):
    same(b"HTTP/1.1 200 OK\r\nX-Long: first\r\n" + folded + b"\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("line", [b"no colon here", b"From someone", b":empty name",
                                  b"Name-Only:", b"\xff\xfe: latin"])
def test_odd_header_lines(line):
    same(b"HTTP/1.1 200 OK\r\nServer: x\r\n" + line + b"\r\nContent-Length: 2\r\n\r\nok")


@pytest.mark.parametrize("data", [
    b"",                                        # the connection closed: RemoteDisconnected
    b"garbage\r\n\r\n",                         # not a status line
    b"HTTP/1.1 abc OK\r\n\r\n",                 # not a status
    b"HTTP/2 200 OK\r\n\r\n",                   # another protocol
    b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * (HEADER_LINE_LIMIT + 10) + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * (HEADER_COUNT_LIMIT + 1) + b"\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * HEADER_COUNT_LIMIT + b"\r\n",
])
def test_the_same_errors(data):
    same(data)
