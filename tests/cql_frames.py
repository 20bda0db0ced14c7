"""The native protocol's frames as the suite's fake CQL nodes read and write them (v4: a
9-byte head of version, flags, stream, opcode and body length, then the body)."""
from __future__ import annotations

import socket
import struct


def read_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; ``EOFError`` when it closes first."""
    data = b""
    while len(data) < n:
        received = sock.recv(n - len(data))
        if not received:
            raise EOFError
        data += received
    return data


def read_frame(sock: socket.socket) -> tuple[int, int, bytes]:
    """The next frame a client sent: (stream, opcode, body)."""
    _, _, stream, opcode, length = struct.unpack(">BBhBi", read_exact(sock, 9))
    return stream, opcode, read_exact(sock, length)


def send_frame(sock: socket.socket, stream: int, opcode: int, body: bytes) -> None:
    """A response frame (version 0x84) answering ``stream``."""
    sock.sendall(struct.pack(">BBhBi", 0x84, 0, stream, opcode, len(body)) + body)
