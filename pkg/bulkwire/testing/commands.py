"""The loopback server's command checker: a decoded bulk insert body parsed into its commands,
each checked as RavenDB checks it (:func:`parse_commands`), a whole request body decoded from
its wire bytes (:func:`decode_body`), and the cheap tests the server runs while a body
arrives (:func:`holds_whole_array`, the PUT counter)."""
from __future__ import annotations

import io
import json
import re
from typing import Any, List, Optional, Union

from .wire import (MAX_CHUNK_SIZE, MAX_SIZE_LINE, ChunkedReader, GzipInflater, LengthReader,
                   RequestError, ZstdInflater)

_PUT_MARKER = b'"Type":"PUT"'

_JSON_SPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    return _kind(value)


_MISSING = object()
_COMMAND_TYPES = ("PUT", "Counters", "TimeSeriesBulkInsert", "AttachmentPUT")


def _member(index: int, what: str, obj: dict, key: str, check: Any, expected: str) -> Any:
    """obj[key] when check(obj[key]); RequestError naming the command otherwise."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise RequestError(f"command {index} ({what}) has no {key}")
    _need(index, what, value, check(value), f"{key} {expected}")
    return value


def _need(index: int, what: str, value: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise RequestError(f"command {index} ({what}) needs {expected}, not {_show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_increment(op: Any) -> bool:
    return (isinstance(op, dict) and op.get("Type") == "Increment"
            and isinstance(op.get("CounterName"), str) and _is_int(op.get("Delta")))


def _is_entry(entry: Any) -> bool:
    """[<unix ms>, <n>, <n numbers or nulls>(, <tag>)]"""
    if not (isinstance(entry, list) and len(entry) >= 2 and _is_int(entry[0])
            and _is_int(entry[1]) and entry[1] >= 0):
        return False
    n = entry[1]
    return (len(entry) in (2 + n, 3 + n)
            and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                    for v in entry[2:2 + n])
            and (len(entry) == 2 + n or isinstance(entry[-1], str)))


def _check_counters(index: int, command: dict) -> None:
    what = f"Counters {_show(command['Id'])}"
    counters = _member(index, what, command, "Counters", lambda v: isinstance(v, dict),
                       "that is a JSON object")
    _member(index, what, counters, "DocumentId", _is_name, "that is a non-empty string")
    operations = _member(index, what, counters, "Operations", lambda v: isinstance(v, list),
                         "that is a JSON array")
    for op in operations:
        _need(index, what, op, _is_increment(op),
              'operations {"Type":"Increment","CounterName":<string>,"Delta":<integer>}')


def _check_time_series(index: int, command: dict) -> None:
    what = f"TimeSeriesBulkInsert {_show(command['Id'])}"
    series = _member(index, what, command, "TimeSeries", lambda v: isinstance(v, dict),
                     "that is a JSON object")
    _member(index, what, series, "Name", _is_name, "that is a non-empty string")
    _member(index, what, series, "TimeFormat", lambda v: v == "UnixTimeInMs", "'UnixTimeInMs'")
    appends = _member(index, what, series, "Appends", lambda v: isinstance(v, list),
                      "that is a JSON array")
    for entry in appends:
        _need(index, what, entry, _is_entry(entry), "entries [<unix ms>,<n>,<n numbers>(,<tag>)]")


def _check_attachment(index: int, command: dict) -> None:
    what = f"AttachmentPUT {_show(command['Id'])}"
    _member(index, what, command, "Name", _is_name, "that is a non-empty string")
    if "ContentType" in command:
        _member(index, what, command, "ContentType", lambda v: isinstance(v, str), "that is a string")
    _member(index, what, command, "ContentLength", lambda v: _is_int(v) and v >= 0,
            "that is a non-negative integer")


def _check_command(index: int, command: Any) -> None:
    if not isinstance(command, dict):
        raise RequestError(f"command {index} must be a JSON object, not {_kind(command)}")
    kind = command.get("Type")
    if kind not in _COMMAND_TYPES:
        if "Type" not in command:
            raise RequestError(f"command {index} has no Type")
        raise RequestError(f"command {index} has Type {_show(kind)}: the loopback server "
                           f"implements {', '.join(_COMMAND_TYPES)}")
    doc_id = command.get("Id")
    if not isinstance(doc_id, str) or not doc_id:
        if "Id" not in command:
            raise RequestError(f"command {index} ({kind}) has no Id")
        raise RequestError(f"command {index} ({kind}) needs an Id that is a non-empty string, "
                           f"not {_show(doc_id)}")
    if kind == "Counters":
        return _check_counters(index, command)
    if kind == "TimeSeriesBulkInsert":
        return _check_time_series(index, command)
    if kind == "AttachmentPUT":
        return _check_attachment(index, command)
    if not isinstance(command.get("Document"), dict):
        if "Document" not in command:
            raise RequestError(f"command {index} (PUT {_show(doc_id)}) has no Document")
        raise RequestError(f"command {index} (PUT {_show(doc_id)}) needs a Document that is a "
                           f"JSON object, not {_kind(command['Document'])}")


def parse_commands(body: Union[bytes, bytearray, memoryview]) -> List[dict]:
    """The commands of a decoded bulk insert body: a JSON array (UTF-8) of commands, each
    ``{"Id": str, "Type": "PUT", "Document": {...}}``, a ``Counters``, a
    ``TimeSeriesBulkInsert`` or an ``AttachmentPUT`` command; the latter is followed by its
    ``ContentLength`` raw bytes, which the parser puts into the command as ``"Bytes"``
    (``bytes``). Raises :class:`RequestError` naming the first problem (the first bad
    command, the byte that is not UTF-8, the JSON error).

    >>> parse_commands(b'[{"Id":"a/1","Type":"PUT","Document":{"x":1}}]')
    [{'Id': 'a/1', 'Type': 'PUT', 'Document': {'x': 1}}]
    >>> parse_commands(b'[{"Id":"a/1","Type":"AttachmentPUT","Name":"f","ContentLength":2}\\xff\\x00]')
    [{'Id': 'a/1', 'Type': 'AttachmentPUT', 'Name': 'f', 'ContentLength': 2, 'Bytes': b'\\xff\\x00'}]
    """
    try:
        commands = json.loads(str(body, "utf-8"))
    except (ValueError, RecursionError):
        # not UTF-8 JSON as a whole: raw attachment bytes, or an error to find and name
        return _walk_commands(bytes(body))
    if not isinstance(commands, list):
        raise RequestError(f"the body must be a JSON array of commands, not {_kind(commands)}")
    for index, command in enumerate(commands):
        _check_command(index, command)
        if command.get("Type") == "AttachmentPUT":
            if command["ContentLength"]:  # its bytes were read as JSON (e.g. b" "): read again
                return _walk_commands(bytes(body))
            command["Bytes"] = b""
    return commands


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JSON_SPACE:
        pos += 1
    return pos


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _walk_commands(body: bytes) -> List[dict]:
    """Parses the array one command at a time, taking each attachment's raw bytes by its
    declared length. The body is read as UTF-8 with undecodable bytes escaped (as lone
    surrogates, which valid UTF-8 never gives), so that the JSON between attachments must
    still be UTF-8 and an attachment's bytes may be anything."""
    text = body.decode("utf-8", "surrogateescape")
    char_mark = byte_mark = 0  # a character position and its byte offset
    checked = 0  # text before this was checked to be UTF-8 (attachments' bytes excepted)

    def byte_offset(pos: int) -> int:
        nonlocal char_mark, byte_mark
        byte_mark += len(text[char_mark:pos].encode("utf-8", "surrogateescape"))
        char_mark = pos
        return byte_mark

    def not_utf8(start: int, end: int) -> Optional[RequestError]:
        bad = _ESCAPED_BYTE.search(text, start, end)
        if bad is None:
            return None
        return RequestError(f"the body is not UTF-8 (an invalid byte sequence at byte "
                            f"{byte_offset(bad.start())})")

    def syntax(message: str, pos: int) -> RequestError:
        # a syntax error at an undecodable byte is that byte's error
        return not_utf8(checked, min(pos + 1, len(text))) or RequestError(message)

    pos = _skip_space(text, 0)
    if pos == len(text):
        raise syntax("the body is empty: expected a JSON array of commands", pos)
    if text[pos] != "[":
        try:
            value, _ = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            raise syntax(f"the body is not JSON (at character {pos})", pos) from None
        raise RequestError(f"the body must be a JSON array of commands, not {_kind(value)}")
    commands: List[dict] = []
    pos = _skip_space(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        pos += 1
    else:
        while True:
            index = len(commands)
            try:
                command, end = _DECODER.raw_decode(text, pos)
            except RecursionError:
                raise RequestError(f"command {index} is nested too deeply") from None
            except json.JSONDecodeError as exc:
                raise syntax(f"command {index} is not valid JSON: {exc.msg} (at character "
                             f"{exc.pos})", exc.pos) from None
            error = not_utf8(checked, end)
            if error is not None:
                raise error
            _check_command(index, command)
            commands.append(command)
            pos = end
            if command["Type"] == "AttachmentPUT":
                start = byte_offset(pos)
                length = command["ContentLength"]
                data = body[start:start + length]
                if len(data) < length:
                    raise RequestError(f"the body ends inside the bytes of attachment command "
                                       f"{index} ({len(data)} of {length})")
                command["Bytes"] = data
                pos += len(data.decode("utf-8", "surrogateescape"))
                char_mark, byte_mark = pos, start + length
            checked = pos
            pos = _skip_space(text, pos)
            if pos == len(text):
                raise syntax("the body ends inside the array of commands", pos)
            if text[pos] == "]":
                pos += 1
                break
            if text[pos] != ",":
                raise syntax(f"expected ',' or ']' after command {index} (at character {pos})", pos)
            pos = _skip_space(text, pos + 1)
    pos = _skip_space(text, pos)
    if pos < len(text):
        raise syntax(f"data after the end of the array of commands (at character {pos})", pos)
    error = not_utf8(checked, len(text))
    if error is not None:
        raise error
    return commands


def holds_whole_array(body: Union[bytes, bytearray]) -> bool:
    """Whether ``body``, a decoded bulk insert body so far, is one whole JSON array: its
    closing ``]`` has arrived, so a server that parses the stream as it comes can answer.

    >>> holds_whole_array(b'[{"a": [1]}'), holds_whole_array(b'[{"a": [1]}]')
    (False, True)
    """
    if not bytes(body[-64:]).rstrip(_JSON_SPACE.encode()).endswith(b"]"):
        return False  # cheap: only a body that ends in "]" is parsed
    try:
        return isinstance(json.loads(body), list)
    except (ValueError, RecursionError):
        return False


def decode_body(wire: Union[bytes, bytearray], *, gzip: bool = False, chunked: bool = True,
                max_size_line: int = MAX_SIZE_LINE,
                max_chunk_size: int = MAX_CHUNK_SIZE, zstd: bool = False) -> List[dict]:
    """The commands of one bulk insert request body exactly as it came off the wire: chunked
    (or, ``chunked=False``, the whole body), gzip when ``gzip``, zstd when ``zstd``. The same
    readers, inflaters and command parser as the server's; :class:`RequestError` for anything
    it refuses, including bytes after the last chunk.

    >>> decode_body(b'2\\r\\n[]\\r\\n0\\r\\n\\r\\n')
    []
    """
    stream = io.BytesIO(wire)
    reader: Union[ChunkedReader, LengthReader] = (
        ChunkedReader(stream, max_size_line=max_size_line, max_chunk_size=max_chunk_size)
        if chunked else LengthReader(stream, len(wire)))
    if gzip and zstd:
        raise ValueError("a body is gzip or zstd, not both")
    inflater: Union[GzipInflater, ZstdInflater, None] = (
        GzipInflater() if gzip else ZstdInflater() if zstd else None)
    body = bytearray()
    while True:
        data = reader.read_chunk()
        if data is None:
            break
        for piece in (inflater.feed(data) if inflater is not None else (data,)):
            body += piece
    if stream.read(1):
        raise RequestError("bytes after the last chunk")
    if inflater is not None:
        inflater.finish()
    return parse_commands(body)


class _MarkerCounter:
    """Counts PUT markers in a body seen in pieces, also those split between pieces."""

    def __init__(self) -> None:
        self.count = 0
        self._tail = b""  # the last len(marker) - 1 bytes seen

    def feed(self, piece: Union[bytes, memoryview]) -> None:
        edge = len(_PUT_MARKER) - 1
        size = len(piece)
        # a view from ChunkedReader(reuse_buffer=True) starts at its buffer's first byte
        buffer = piece.obj if isinstance(piece, memoryview) else piece
        self.count += buffer.count(_PUT_MARKER, 0, size)  # type: ignore[union-attr]
        self.count += (self._tail + bytes(piece[:edge])).count(_PUT_MARKER)
        self._tail = (self._tail + bytes(piece[-edge:]))[-edge:]


# ---- the server ----
