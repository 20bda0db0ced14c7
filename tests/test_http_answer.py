"""The answers bulkwire reads (an operation id, a state, the answer to a body) go through a
head parser of its own: differential against http.client's, on generated heads, for what
decides how the body is read (status, version, chunked, length, whether the connection
closes) and for the headers, then the body read through both; and the same errors."""
from __future__ import annotations

import http.client

import pytest
from hypothesis import given, settings, strategies as st

from bulkwire.transport import (HEADER_COUNT_LIMIT, HEADER_LINE_LIMIT, MAX_ANSWER_BYTES,
                                MAX_CHUNK_SIZE, MAX_INTERIM_ANSWERS, MAX_INTERIM_BYTES,
                                _AnswerRefused, _Answer)


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


def same(data: bytes, method: str = "GET", as_http_client_reads_it: bytes = b"") -> dict:
    ours = read_with(_Answer, data, method)
    theirs = read_with(http.client.HTTPResponse, as_http_client_reads_it or data, method)
    if ours.get("body_error") == "_AnswerRefused":
        # a chunk size outside RFC 9112's grammar, which http.client reads on (or fails on
        # later): refused here, by design (the chunk size tests below)
        assert ours["chunked"]
        theirs.pop("body", None), theirs.pop("body_error", None), ours.pop("body_error")
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
def heads(draw) -> tuple:
    """An answer, and the same answer as http.client reads it: without the interim
    answers other than ``100 Continue`` (http.client skips only those; bulkwire skips
    every 1xx, as RFC 9110 says a client does)."""
    status = draw(st.sampled_from([200, 201, 204, 304, 400, 404, 500]))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0"]))
    lines = [f"{version} {status} {draw(st.sampled_from(['OK', 'Created', '', 'Some Reason']))}"]
    interim = draw(st.lists(st.sampled_from([100, 102, 103, 199]), max_size=3))
    kept = []
    for code in interim:
        head = [f"HTTP/1.1 {code} Interim", "X-Skipped: 1", ""]
        lines = head + lines
        if code == 100:
            kept = head + kept
    for _ in range(draw(st.integers(0, 8))):
        spacing = draw(st.sampled_from([": ", ":", ":  ", " : ", ":\t"]))
        lines.append(f"{draw(names)}{spacing}{draw(values)}")
    body = draw(st.binary(max_size=40))
    if draw(st.booleans()):
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    final = lines[3 * len(interim):]
    return tuple("\r\n".join(part).encode("latin-1") + b"\r\n\r\n" + body
                 for part in (lines, kept + final))


@settings(max_examples=400, deadline=None)
@given(data=heads(), method=st.sampled_from(["GET", "POST", "HEAD"]))
def test_answers_read_the_same_as_http_client_reads_them(data, method):
    ours, theirs = data
    same(ours, method, theirs)


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


# ---- chunk sizes: RFC 9112's grammar, nothing http.client's int(line, 16) also takes ----

HEXDIG = set(b"0123456789abcdefABCDEF")
TCHAR = set(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
WS = set(b" \t")


def oracle_chunk_size(line: bytes):
    """The size RFC 9112 reads in a chunk's size line, or None where the grammar refuses
    it: ``1*HEXDIG *( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] )`` and
    CRLF (or a bare LF). Written a byte at a time, apart from the transport's rule."""
    if line.endswith(b"\r\n"):
        text = line[:-2]
    elif line.endswith(b"\n"):
        text = line[:-1]
    else:
        return None
    i = 0

    def run(allowed):
        nonlocal i
        start = i
        while i < len(text) and text[i] in allowed:
            i += 1
        return text[start:i]

    digits = run(HEXDIG)
    if not digits:
        return None
    while i < len(text):
        run(WS)
        if i >= len(text) or text[i] != ord(";"):
            return None
        i += 1
        run(WS)
        if not run(TCHAR):
            return None
        save = i
        run(WS)
        if i < len(text) and text[i] == ord("="):
            i += 1
            run(WS)
            if i < len(text) and text[i] == ord('"'):
                i += 1
                while i < len(text) and text[i] != ord('"'):
                    if text[i] == ord("\\"):
                        i += 1
                        if i >= len(text) or not (text[i] in WS or 0x20 <= text[i] <= 0x7e
                                                  or text[i] >= 0x80):
                            return None
                    elif not (text[i] in WS or text[i] == 0x21 or 0x23 <= text[i] <= 0x7e
                              or text[i] >= 0x80):
                        return None
                    i += 1
                if i >= len(text):
                    return None
                i += 1
            elif not run(TCHAR):
                return None
        else:
            i = save  # whitespace with nothing after it is not BWS before a ";"
            if i < len(text):
                continue
            return None if text[i - 1:i] in (b" ", b"\t") else int(digits, 16)
    size = int(digits, 16)
    return size if size <= MAX_CHUNK_SIZE else None


chunk_lines = st.one_of(
    st.builds(lambda n, ext, end: b"%x%s%s" % (n, ext, end), st.integers(0, 40),
              st.sampled_from([b"", b";a", b";a=b", b" ; a = b", b';q="x\\"y"', b";a;b=c",
                               b"\t;x=1", b";", b";=", b" ", b";a=", b';q="', b";a b"]),
              st.sampled_from([b"\r\n", b"\n", b"\r\r\n", b"\t\r\n"])),
    st.sampled_from([b"-1\r\n", b"+5\r\n", b" 5\r\n", b"0x5\r\n", b"5_0\r\n", b"\t5\r\n",
                     b"5 \r\n", b"F" * 17 + b"\r\n", b"8" + b"0" * 15 + b"\r\n",
                     b"7" + b"f" * 15 + b"\r\n", b"0" * 40 + b"5\r\n", b"\r\n", b"-0\r\n",
                     b"\xd9\xa5\r\n", b"\xef\xbc\x95\r\n"]),
    st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"") + b"\r\n"))


def answer_with_chunk(line: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + line


@settings(max_examples=500, deadline=None)
@given(line=chunk_lines)
def test_a_chunk_size_is_read_by_the_grammar_and_nothing_else(line):
    size = oracle_chunk_size(line)
    data = b"x" * 40
    response = _Answer(FakeSocket(answer_with_chunk(line) + data[:size or 0] + b"\r\n0\r\n\r\n"),
                       method="GET")
    response.begin()
    if size is None:
        with pytest.raises(_AnswerRefused):
            response.read(MAX_ANSWER_BYTES)
    elif size > len(data):  # a size it may give, more than it sent: the connection ended
        with pytest.raises(http.client.IncompleteRead):
            response.read(MAX_ANSWER_BYTES)
    else:
        assert response.read(MAX_ANSWER_BYTES) == data[:size]


class EndlessSocket:
    """An answer's first bytes, then ``x`` (up to 8 MiB: a reader that does not stop
    fails the test rather than fill the memory); counts what was read."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.read = 0

    def makefile(self, mode: str, *args: object, **kwargs: object):
        import io

        endless = self

        class Raw(io.RawIOBase):
            def readable(self):
                return True

            def readinto(self, buffer):
                n = min(len(buffer), max(0, (8 << 20) - endless.read))
                data = endless.first[endless.read:endless.read + n]
                data += b"x" * (n - len(data))
                buffer[:n] = data
                endless.read += n
                return n

        return io.BufferedReader(Raw())


@pytest.mark.parametrize("line", [b"-1", b"-10", b"+5", b" 5", b"0x5", b"5_0",
                                  b"f" * 17, b"1" * 1000])
def test_a_chunk_size_that_is_not_one_is_refused_before_its_data_is_read(line):
    """A server that says ``-1`` (which http.client reads as "to the end") and then never
    stops: refused at the size line, having read no more than the reader's buffer."""
    sock = EndlessSocket(answer_with_chunk(line + b"\r\n"))
    response = _Answer(sock, method="GET")
    response.begin()
    with pytest.raises(http.client.HTTPException) as raised:
        response.read(MAX_ANSWER_BYTES)
    assert sock.read <= 2 * 8192, f"read {sock.read} bytes"
    assert isinstance(raised.value, _AnswerRefused) and "chunk size" in str(raised.value)  # the buffered reader's reads ahead, nothing of the "chunk"


# ---- interim answers: every 1xx before the final answer is skipped, within bounds ----

FINAL = b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{"Id": 7}'


@pytest.mark.parametrize("interim", [
    b"HTTP/1.1 102 Processing\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n",
    b"HTTP/1.1 199 Whatever\r\nX: 1\r\n\r\n" * MAX_INTERIM_ANSWERS,
])
def test_interim_answers_before_the_final_one_are_skipped(interim):
    response = _Answer(FakeSocket(interim + FINAL), method="GET")
    response.begin()
    assert (response.status, response.read()) == (200, b'{"Id": 7}')


@pytest.mark.parametrize("interim, match", [
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "HTTP 101"),
    (b"HTTP/1.1 102 Processing\r\n\r\n" * (MAX_INTERIM_ANSWERS + 1), "interim"),
    (b"HTTP/1.1 103 Early Hints\r\n" + b"Link: <" + b"x" * 1000 + b">\r\n" * 70 + b"\r\n",
     "interim"),
])
def test_a_101_and_endless_interim_answers_are_refused(interim, match):
    sock = EndlessSocket(interim * 1000)  # a server that would go on for ever
    response = _Answer(sock, method="GET")
    with pytest.raises(_AnswerRefused, match=match):
        response.begin()
    assert sock.read <= MAX_INTERIM_BYTES + 2 * 65536
