"""TLS for bulk insert: how a connection to one ``https://`` server is made.

:class:`TlsSettings` holds what :class:`bulkwire.BulkInsert` was given (``certificate``,
``ca``, ``ssl_context``) and makes the connection to a server with
:meth:`TlsSettings.http_connection`, one call per server.

* ``certificate`` / ``ca`` (or neither): bulkwire's own TLS client in the C core, through the
  OpenSSL it was built with (``bulkwire._core.TLS_LIBRARY``). The body pump encrypts and sends
  the body with the GIL released, as on plain HTTP.
* ``ssl_context``: Python's :mod:`ssl`, with that context as it is. Its sessions live inside
  Python's ssl module (possibly another OpenSSL than bulkwire's), so the body goes through a
  Python sender: the same bytes, more GIL traffic.

Built without OpenSSL, ``certificate`` / ``ca`` make an :class:`ssl.SSLContext` and take the
second way.

>>> settings = TlsSettings(ca=False)
>>> settings.verify, settings.native == (_core.TLS_LIBRARY is not None)
(False, True)
"""
from __future__ import annotations

import errno
import http.client
import io
import os
import socket
import ssl
import stat
from typing import Any, Optional, Tuple, Union

from . import _core
from .errors import TLSFileError

__all__ = ["TlsSettings", "CertificateArg", "CaArg", "tls_settings"]

PathLike = Union[str, "os.PathLike[str]"]
#: a PEM file holding the certificate and its key, or a ``(certificate, key)`` pair of files
CertificateArg = Union[PathLike, Tuple[PathLike, PathLike], None]
#: a PEM bundle of trusted CAs, None for the system's, False to skip verifying the server
CaArg = Union[PathLike, bool, None]


#: The largest certificate, key or CA file taken (a system's whole CA bundle is a few
#: hundred KiB): a larger one is not a PEM file, and is not read.
MAX_PEM_BYTES = 16 << 20


def _file_error(argument: str, path: Optional[str], reason: str) -> TLSFileError:
    """The error for the file ``path`` of ``argument`` that cannot be used, for ``reason``."""
    return TLSFileError(f"{argument}={path!r}: {reason}", path=path, argument=argument,
                        reason=reason)


def _readable(path: Any, argument: str) -> str:
    """``path`` as a str, once it could be opened for reading and is a regular file of at
    most :data:`MAX_PEM_BYTES`; otherwise the ``OSError`` (or ``TypeError``) names the
    argument and the file, and a pipe, a device or a file too large is a
    :class:`~bulkwire.errors.TLSFileError` (a pipe is opened without waiting for a writer:
    nothing here can block)."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{argument} must be a path, not {type(path).__name__}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    except OSError as exc:
        raise type(exc)(exc.errno, f"{argument}={path!r} cannot be read: {exc.strerror}",
                        path) from None
    if not stat.S_ISREG(info.st_mode):
        raise _file_error(argument, path, "not a regular file (a pipe, a socket or a device); "
                                          "give a PEM file")
    if info.st_size > MAX_PEM_BYTES:
        raise _file_error(argument, path, f"{info.st_size:,} bytes: larger than any PEM file "
                                          f"bulkwire takes ({MAX_PEM_BYTES:,} bytes)")
    return path


class TlsSettings:
    """The TLS side of the connections to ``https://`` servers.

    ``certificate``: the client certificate, a PEM file holding the certificate (and its
    chain) and the private key, or a ``(certificate, key)`` pair of PEM files; the key must
    not be protected by a passphrase. ``ca``: a PEM bundle of the CAs that sign the servers'
    certificates (None: the system's trusted CAs; False: the server's certificate is not
    verified). ``ssl_context``: an :class:`ssl.SSLContext` used as it is, instead of both.
    Files are read here: a missing or unreadable one raises its ``OSError``; one that cannot
    be used (no PEM certificate or key in it, a key that does not match the certificate or
    is encrypted, a certificate that has expired or is not valid yet, a CA bundle without a
    certificate, a pipe or device, a file larger than :data:`MAX_PEM_BYTES`) raises
    :class:`~bulkwire.errors.TLSFileError` (a ``TLSError`` and a ``ValueError``); either
    names the argument and the file.

    >>> TlsSettings(certificate="/nonexistent.pem")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    FileNotFoundError: [Errno 2] certificate='/nonexistent.pem' cannot be read: ...
    """

    def __init__(self, certificate: CertificateArg = None, ca: CaArg = None, *,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        if ssl_context is not None:
            if not isinstance(ssl_context, ssl.SSLContext):
                raise TypeError(f"ssl_context must be an ssl.SSLContext, not {type(ssl_context).__name__}")
            if certificate is not None or ca is not None:
                given = " and ".join(n for n, v in (("certificate", certificate), ("ca", ca)) if v is not None)
                raise ValueError(f"ssl_context cannot be combined with {given}: load them into the "
                                 f"context (load_cert_chain, load_verify_locations), or leave "
                                 f"ssl_context out")
        self.ssl_context = ssl_context
        self.cert_file: Optional[str] = None
        self.key_file: Optional[str] = None
        if certificate is not None:
            if isinstance(certificate, tuple):
                if len(certificate) != 2:
                    raise ValueError("certificate must be a PEM file, or a (certificate, key) "
                                     f"pair of files, not a tuple of {len(certificate)}")
                self.cert_file = _readable(certificate[0], "certificate")
                self.key_file = _readable(certificate[1], "certificate key")
            else:
                self.cert_file = _readable(certificate, "certificate")
        if ca is True:
            ca = None
        self.verify = ca is not False
        self.ca_file: Optional[str] = None if ca is None or ca is False else _readable(ca, "ca")
        self.native = ssl_context is None and _core.TLS_LIBRARY is not None
        self._native_context: Any = None
        if self.native:
            try:
                self._native_context = _core.TlsContext(self.cert_file, self.key_file,
                                                        self.ca_file, self.verify)
            except ValueError as exc:  # a file that cannot be used: the core says which, why
                given = getattr(exc, "argument", "")
                argument = {"key": "certificate key"}.get(given, given)
                raise _file_error(argument, getattr(exc, "path", None),
                                  getattr(exc, "reason", str(exc))) from None
        elif ssl_context is None:
            from ._fallbacks import warn_missing

            warn_missing("openssl", "HTTPS bodies are sent by a Python sender through Python's "
                         "ssl module,", "slower than bulkwire's C sender")
            self.ssl_context = self._python_context()

    def _python_context(self) -> ssl.SSLContext:
        """The same settings for Python's ssl (a build without OpenSSL of its own). Its
        reasons are Python's; a certificate's dates are judged by the server."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise _file_error("ca", self.ca_file, str(exc)) from None
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file is not None:
            try:  # an encrypted key gets an empty passphrase, never a prompt
                context.load_cert_chain(self.cert_file, self.key_file, password=lambda: b"")
            except (ssl.SSLError, OSError) as exc:
                pair = ("" if self.key_file is None else
                        f" (with the key {self.key_file!r}: Python's ssl does not say which)")
                raise _file_error("certificate", self.cert_file, f"{exc}{pair}") from None
        return context

    def http_connection(self, host: str, port: Optional[int],
                        timeout: Optional[float]) -> http.client.HTTPConnection:
        """A connection object (not yet connected) to the server ``host:port`` (443 when
        None): ``connect()`` makes the TCP connection and the TLS handshake."""
        if self.native:
            return _NativeTlsConnection(host, port, timeout=timeout, context=self._native_context)
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=self.ssl_context)


def tls_settings(certificate: CertificateArg, ca: CaArg,
                 ssl_context: Optional[ssl.SSLContext]) -> TlsSettings:
    """The settings of ``BulkInsert(certificate=, ca=, ssl_context=)`` (see :class:`TlsSettings`)."""
    return TlsSettings(certificate, ca, ssl_context=ssl_context)


class TlsSocket:
    """A TLS session of bulkwire's own on a connected socket, with the socket methods
    ``http.client`` uses; ``session`` is the ``_core.TlsConnection`` the body pump writes
    through. The socket stays non-blocking: every wait is the C core's, with the session's
    timeout. As with a socket, ``close()`` leaves the session open until the files made by
    ``makefile`` are closed too (``http.client`` reads an answer after closing)."""

    def __init__(self, sock: socket.socket, session: Any) -> None:
        self.sock = sock
        self.session = session
        self._files = 0
        self._closing = False

    def sendall(self, data: Any) -> None:
        self.session.sendall(data)

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        return self.session.recv_into(buffer, nbytes)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        if mode not in ("r", "rb"):
            raise ValueError(f"a TLS socket's file is for reading only, not mode {mode!r}")
        self._files += 1
        return io.BufferedReader(_SessionReader(self))

    def fileno(self) -> int:
        return self.sock.fileno()

    def gettimeout(self) -> Optional[float]:
        return self.session.timeout

    def settimeout(self, timeout: Optional[float]) -> None:
        self.session.timeout = timeout

    def setsockopt(self, *args: Any) -> None:
        self.sock.setsockopt(*args)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self._closing = True
        if self._files <= 0:
            self._close_now()

    def _file_closed(self) -> None:
        self._files -= 1
        if self._closing and self._files <= 0:
            self._close_now()

    def _close_now(self) -> None:
        try:
            self.session.close()
        finally:
            self.sock.close()


class _SessionReader(io.RawIOBase):
    def __init__(self, owner: TlsSocket) -> None:
        self._owner = owner
        self._session = owner.session

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._owner._file_closed()

    def readinto(self, buffer: Any) -> int:
        return self._session.recv_into(buffer)


class _NativeTlsConnection(http.client.HTTPConnection):
    """``http.client``'s connection over bulkwire's own TLS."""

    default_port = http.client.HTTPS_PORT

    def __init__(self, host: str, port: Optional[int], *, timeout: Optional[float],
                 context: Any) -> None:
        super().__init__(host, port, timeout=timeout)
        self._tls_context = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout, self.source_address)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = self._tls_context.connect(sock.fileno(), self.host, self.timeout)
        except BaseException:
            sock.close()
            raise
        self.sock = TlsSocket(sock, session)  # type: ignore[assignment]
