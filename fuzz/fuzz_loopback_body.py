"""Fuzz target: the loopback server's body parser (chunked decoder, gzip inflater, command
parser), driven without sockets through ``bulkwire.testing.decode_body``/``parse_commands``.

The first byte picks a mode:

0. build a valid body from the input (commands, JSON spacing, ASCII or UTF-8, gzip or not,
   cut into chunks anywhere, sizes padded or upper-case, chunk extensions): it must decode to
   exactly the commands it was built from, chunked and as a whole body;
1. the same, then mutated (bytes flipped, inserted, deleted, cut): it decodes to a list of
   well-formed commands or raises ``RequestError`` (4xx);
2. the rest of the input as wire bytes (gzip / chunked from the second byte): the same rule;
3. the rest of the input as a decoded body: ``parse_commands`` must agree with ``json.loads``
   (the commands when that reads a JSON array of well-formed commands without attachment
   bytes, ``RequestError`` otherwise); a body that is not JSON is accepted only for the raw
   bytes of an attachment.

The commands are PUT, Counters, TimeSeriesBulkInsert and AttachmentPUT (followed by its
``ContentLength`` raw bytes, which the parser returns as ``"Bytes"``).

Any other exception, or a mismatch, is a defect.
"""
import json
import math
import struct
import sys
import zlib

from bulkwire.testing import RequestError, decode_body, parse_commands


class _Cursor:
    """Reads the fuzzer's bytes as choices; past the end every choice is 0."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def rest(self) -> bytes:
        out = self.data[self.pos:]
        self.pos = len(self.data)
        return out


def _number(v) -> bool:
    return v is None or (type(v) in (int, float))


def _well_formed(c) -> bool:
    if not isinstance(c, dict) or not isinstance(c.get("Id"), str) or not c["Id"]:
        return False
    kind = c.get("Type")
    if kind == "PUT":
        return isinstance(c.get("Document"), dict)
    if kind == "Counters":
        body = c.get("Counters")
        return (isinstance(body, dict) and isinstance(body.get("DocumentId"), str)
                and bool(body["DocumentId"]) and isinstance(body.get("Operations"), list)
                and all(isinstance(op, dict) and op.get("Type") == "Increment"
                        and isinstance(op.get("CounterName"), str) and type(op.get("Delta")) is int
                        for op in body["Operations"]))
    if kind == "TimeSeriesBulkInsert":
        body = c.get("TimeSeries")
        if not (isinstance(body, dict) and isinstance(body.get("Name"), str) and body["Name"]
                and body.get("TimeFormat") == "UnixTimeInMs" and isinstance(body.get("Appends"), list)):
            return False
        for e in body["Appends"]:
            if not (isinstance(e, list) and len(e) >= 2 and type(e[0]) is int and type(e[1]) is int
                    and e[1] >= 0 and len(e) - 2 - e[1] in (0, 1)):
                return False
            if not all(_number(v) for v in e[2:2 + e[1]]) or (len(e) == 3 + e[1] and not isinstance(e[-1], str)):
                return False
        return True
    if kind == "AttachmentPUT":
        n = c.get("ContentLength")
        return (isinstance(c.get("Name"), str) and bool(c["Name"]) and type(n) is int and n >= 0
                and isinstance(c.get("ContentType", ""), str)
                and (not isinstance(c.get("Bytes"), bytes) or len(c["Bytes"]) == n))
    return False


def _is_command_list(value) -> bool:
    return isinstance(value, list) and all(_well_formed(c) for c in value)


def _attachment_bytes(value) -> bool:
    """Some attachment of the list declares raw bytes after it."""
    return any(c.get("Type") == "AttachmentPUT" and c.get("ContentLength") for c in value)


def _without_bytes(commands: list) -> list:
    return [{k: v for k, v in c.items() if k != "Bytes"} for c in commands]


def _commands(cur: _Cursor) -> list:
    commands = []
    for i in range(cur.byte() % 6):
        flags = cur.byte()
        text = cur.take(cur.byte() % 12).decode("latin-1")
        document = {"t": text, "n": int.from_bytes(cur.take(4), "little", signed=True)}
        if flags & 1:
            floats = [struct.unpack("<f", cur.take(4).ljust(4, b"\0"))[0] for _ in range(flags % 4)]
            document["v"] = [0.0 if math.isnan(f) else f for f in floats]
        if flags & 2:
            document["nested"] = {"a": [text, None, True, {"b": -1.5}]}
        if flags & 4:
            document["u"] = chr(0x1F600 + flags) + "\u00e9\u4e2d" + text
        if flags & 8:
            document["@metadata"] = {"@collection": "Things", "Raven-Python-Type": "x.Thing"}
        doc_id = f"things/{i}{text}"
        commands.append({"Id": doc_id, "Type": "PUT", "Document": document})
        if flags & 16:
            commands.append({"Id": doc_id, "Type": "Counters", "Counters": {
                "DocumentId": doc_id, "Operations": [
                    {"Type": "Increment", "CounterName": text, "Delta": document["n"]}]}})
        if flags & 32:
            entry = [document["n"], 2, -1.5, None] + ([text] if flags & 1 else [])
            commands.append({"Id": doc_id, "Type": "TimeSeriesBulkInsert", "TimeSeries": {
                "Name": "s" + text, "TimeFormat": "UnixTimeInMs", "Appends": [entry]}})
        if flags & 64:
            raw = cur.take(cur.byte() % 40)
            attachment = {"Id": doc_id, "Type": "AttachmentPUT", "Name": "a" + text}
            if flags & 128:
                attachment["ContentType"] = text
            attachment.update(ContentLength=len(raw), Bytes=raw)
            commands.append(attachment)
    return commands


def _serialize(cur: _Cursor, commands: list) -> bytes:
    style = cur.byte()
    if style & 1:
        options = {"separators": (",", ":"), "ensure_ascii": bool(style & 2)}
    else:
        options = {"indent": style % 4, "ensure_ascii": bool(style & 2)}
    if not any("Bytes" in c for c in commands):
        return json.dumps(commands, **options).encode("utf-8")
    # each attachment's raw bytes right after its command
    pieces = [json.dumps(plain, **options).encode("utf-8") + c.get("Bytes", b"")
              for plain, c in zip(_without_bytes(commands), commands)]
    return b"[" + b",".join(pieces) + b"]"


def _cuts(cur: _Cursor, length: int) -> list:
    cuts = set()
    for _ in range(cur.byte() % 8):
        cuts.add(int.from_bytes(cur.take(2), "little") % (length + 1))
    return sorted(cuts)


def _gzip(cur: _Cursor, body: bytes) -> bytes:
    compressor = zlib.compressobj(cur.byte() % 10, zlib.DEFLATED, 31)
    out = bytearray()
    start = 0
    for cut in _cuts(cur, len(body)) + [len(body)]:
        out += compressor.compress(body[start:cut]) + compressor.flush(zlib.Z_SYNC_FLUSH)
        start = cut
    return bytes(out + compressor.flush())


def _chunked(cur: _Cursor, body: bytes) -> bytes:
    wire = bytearray()
    start = 0
    for cut in _cuts(cur, len(body)) + [len(body)]:
        piece = body[start:cut]
        start = cut
        if not piece:
            continue  # a zero-size chunk is the last one
        form = cur.byte()
        size = ("%X" if form & 1 else "%x") % len(piece)
        if form & 2:
            size = "00" + size
        extension = (";", ";name=value", ' ;q="a;b"', "")[(form >> 2) % 4] if form & 16 else ""
        wire += f"{size}{extension}\r\n".encode() + piece + b"\r\n"
    return bytes(wire + b"0\r\n\r\n")


def _valid(cur: _Cursor):
    commands = _commands(cur)
    body = _serialize(cur, commands)
    compress = bool(cur.byte() & 1)
    on_wire = _gzip(cur, body) if compress else body
    return commands, compress, on_wire, _chunked(cur, on_wire)


def _mutate(cur: _Cursor, wire: bytes) -> bytes:
    out = bytearray(wire)
    for _ in range(1 + cur.byte() % 4):
        action = cur.byte() % 4
        at = int.from_bytes(cur.take(2), "little") % (len(out) + 1)
        if action == 0 and at < len(out):
            out[at] ^= 1 << (cur.byte() % 8)
        elif action == 1:
            out[at:at] = cur.take(1 + cur.byte() % 4)
        elif action == 2:
            del out[at:at + 1 + cur.byte() % 4]
        else:
            del out[at:]
    return bytes(out)


def _decodes_or_refuses(wire: bytes, *, gzip: bool, chunked: bool = True) -> None:
    try:
        commands = decode_body(wire, gzip=gzip, chunked=chunked)
    except RequestError as error:
        assert 400 <= error.status < 500 and error.message, (error.status, error.message)
        return
    assert _is_command_list(commands), commands


def _same(a, b) -> bool:
    return json.dumps(a) == json.dumps(b)  # NaN-safe, order-sensitive


def _json_differential(body: bytes) -> None:
    try:
        expected = json.loads(body.decode("utf-8"))
    except RecursionError:
        expected = RecursionError  # the depth limit may differ by a frame or two: either is fine
    except ValueError:  # not UTF-8, not JSON
        expected = None
    # an attachment declaring raw bytes is read by its length: json.loads is no oracle then
    exact = expected is not RecursionError and _is_command_list(expected) and not _attachment_bytes(expected)
    try:
        got = parse_commands(body)
    except RequestError as error:
        assert 400 <= error.status < 500 and error.message
        assert not exact, f"refused a valid command list: {error.message}"
        return
    assert _is_command_list(got), got
    if exact:
        assert _same(_without_bytes(got), expected), (got, expected)
    elif expected is None:  # not JSON as a whole: only raw attachment bytes make it a body
        assert any(c["Type"] == "AttachmentPUT" and c["Bytes"] for c in got), got


def test_one_input(data: bytes) -> None:
    cur = _Cursor(data)
    mode = cur.byte() % 4
    if mode == 0:
        commands, compress, body, wire = _valid(cur)
        assert decode_body(wire, gzip=compress) == commands
        assert decode_body(body, gzip=compress, chunked=False) == commands
    elif mode == 1:
        _, compress, _, wire = _valid(cur)
        _decodes_or_refuses(_mutate(cur, wire), gzip=compress)
    elif mode == 2:
        flags = cur.byte()
        _decodes_or_refuses(cur.rest(), gzip=bool(flags & 1), chunked=not flags & 2)
    else:
        _json_differential(cur.rest())


if __name__ == "__main__":
    import atheris

    atheris.instrument_all()  # coverage feedback from the parsers already imported above
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
