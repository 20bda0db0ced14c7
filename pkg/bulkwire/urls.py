"""Server URLs: the one parser and validator every URL of bulkwire goes through.

A server URL is ``http://`` or ``https://``, a host (a name, an IPv4 address, or an IPv6
address in brackets), an optional port (1 to 65535; 80 or 443 when left out) and an optional
path (the server's root behind a reverse proxy; a trailing ``/`` is dropped). Nothing else:

* printable ASCII only: no whitespace, no control character, no other character (a host in
  another script is given in its IDNA form, ``xn--...``; a path percent-encoded);
* no query (``?``) and no fragment (``#``): a server's root has neither;
* no credentials (``user:password@host``): RavenDB authenticates clients with X.509
  certificates (``certificate=``, ``--certificate``), never with a password in the URL.
  The refusal names the host and never repeats anything before the ``@``.

Every other place takes a :class:`ServerUrl` made here, so no message, result or file of
bulkwire can hold credentials, and a URL that is refused is refused when it is given:
:func:`parse_server_url` raises ``ValueError`` (``TypeError`` for a value that is not a
``str``) whose message starts with the argument's name. The URLs a server returns in its
topology go through the same function; the topology's reader turns the ``ValueError`` into
the server's fault (:class:`~bulkwire.errors.ProtocolError`).

A cluster never mixes schemes (:func:`check_scheme`): every URL given, and every node of the
topology a server returns, has the scheme of the first URL given, so a bulk insert that
starts on ``https://`` never sends a byte in clear text.

>>> url = parse_server_url("HTTPS://Node-A.example:8443/")
>>> url, str(url), url.origin
(ServerUrl(scheme='https', host='node-a.example', port=8443, root=''), 'https://node-a.example:8443', 'https://node-a.example:8443')
>>> normalize_url("http://[::1]/raven"), normalize_url("http://b")
('http://[::1]:80/raven', 'http://b:80')
>>> parse_server_url("http://admin:hunter2@db.example:8080", "--url")
Traceback (most recent call last):
ValueError: --url: credentials in a URL are not supported (the URL of host 'db.example:8080' holds a user name or password before '@'); RavenDB authenticates clients with X.509 certificates: give the client certificate instead (certificate=, --certificate)
"""
from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Union

__all__ = ["ServerUrl", "parse_server_url", "normalize_url", "server_urls", "check_scheme",
           "DEFAULT_PORTS"]

#: The schemes a server URL may have, and the port each means when the URL gives none.
DEFAULT_PORTS = {"http": 80, "https": 443}

# a host name: dot-separated labels of 1 to 63 letters, digits, '-' and '_' (DNS's limit: a
# longer one cannot even be looked up), an optional final dot; 253 characters at most
_HOST_NAME = re.compile(r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?")
_HOST_NAME_MAX = 253
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# an echoed URL is cut to this many characters
_SHOWN = 200


@dataclass(frozen=True)
class ServerUrl:
    """One server's URL, validated and normalized: ``scheme`` (``"http"`` or ``"https"``),
    ``host`` (lower case; an IPv6 address without its brackets), ``port`` (always given),
    ``root`` (the path, ``""`` or ``"/prefix"`` without a trailing ``/``). ``str()`` is
    ``scheme://host:port`` followed by the root."""

    scheme: str
    host: str
    port: int
    root: str = ""

    @property
    def origin(self) -> str:
        """``scheme://host:port`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.origin + self.root


def _shown(text: str) -> str:
    """``text`` as a message shows it: its repr, cut to a bounded length."""
    return repr(text) if len(text) <= _SHOWN else repr(text[:_SHOWN]) + "..."


def _credentials_refused(text: str, argument: str) -> ValueError:
    """The error for a URL holding ``@``: whatever comes before the last ``@`` may be a
    password (one holding ``/``, ``?``, ``#``, ``,`` or ``@`` too), so only what follows it,
    up to the path (or a comma, in a list of URLs), is named."""
    after = text.rpartition("@")[2]
    host = re.split(r"[/?#,]", after, maxsplit=1)[0]
    named = f"the URL of host {_shown(host)}" if host else "the URL"
    return ValueError(f"{argument}: credentials in a URL are not supported ({named} holds a "
                      f"user name or password before '@'); RavenDB authenticates clients with "
                      f"X.509 certificates: give the client certificate instead (certificate=, "
                      f"--certificate)")


def _bad_character(text: str) -> str:
    """What is wrong with the first character of ``text`` that is not printable ASCII, or
    ``""`` when every one is."""
    for index, char in enumerate(text):
        if "!" <= char <= "~":
            continue
        if char.isspace():
            what = "whitespace"
        elif not char.isprintable() or ord(char) < 0x80:
            what = "a control character"
        else:
            what = ("a character that is not ASCII (give a host in its IDNA form, xn--..., "
                    "and percent-encode a path)")
        return f"{what} ({char!r} at index {index})"
    return ""


def parse_server_url(url: Any, argument: str = "url") -> ServerUrl:
    """``url`` as a :class:`ServerUrl`, once it passed every rule of this module; otherwise
    ``ValueError`` (``TypeError`` when it is not a ``str``) whose message starts with
    ``argument``, the name of what gave it (``"url"``, ``"url[1]"``, ``"--url"``, ``"node
    'B' of the topology"``). A URL holding credentials is refused without repeating them.

    >>> parse_server_url("http://127.0.0.1:8080/db?x=1")
    Traceback (most recent call last):
    ValueError: url 'http://127.0.0.1:8080/db?x=1': a server URL has no query ('?') or fragment ('#')
    """
    if type(url) is str and type(argument) is str:
        return _parsed(url, argument)  # a URL met before: its value, without judging it again
    return _parse(url, argument)


@functools.lru_cache(maxsize=256)
def _parsed(url: str, argument: str) -> ServerUrl:
    """:func:`_parse`, remembered: a program's inserts name the same few servers, and a
    :class:`ServerUrl` is immutable (an error is raised again each time, never kept)."""
    return _parse(url, argument)


def _parse(url: Any, argument: str) -> ServerUrl:
    if not isinstance(url, str):
        raise TypeError(f"{argument} must be a str, not {type(url).__name__}")
    if "@" in url:  # first: no other message may repeat what comes before it
        raise _credentials_refused(url, argument)
    shown = f"{argument} {_shown(url)}"
    bad = _bad_character(url)
    if bad:
        raise ValueError(f"{shown}: a URL cannot hold {bad}")
    scheme_match = _SCHEME.match(url)
    scheme = scheme_match.group(1).lower() if scheme_match else ""
    if scheme_match is None or scheme not in DEFAULT_PORTS:
        raise ValueError(f"{shown}: a server URL starts with http:// or https://")
    if "?" in url or "#" in url:
        raise ValueError(f"{shown}: a server URL has no query ('?') or fragment ('#')")
    rest = url[scheme_match.end():]
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    host, port = _authority(authority, shown)
    return ServerUrl(scheme, host, DEFAULT_PORTS[scheme] if port is None else port,
                     path.rstrip("/"))


def _authority(authority: str, shown: str) -> tuple:
    """``(host, port or None)`` of a URL's ``host[:port]`` part (already free of ``@`` and
    of anything but printable ASCII)."""
    if authority.startswith("["):  # an IPv6 address
        end = authority.find("]")
        literal = authority[1:end] if end > 0 else ""
        try:
            host = str(ipaddress.IPv6Address(literal)) if "%" not in literal else ""
        except ValueError:
            host = ""
        if not host:
            raise ValueError(f"{shown}: a host in brackets must be an IPv6 address, "
                             f"like [::1]")
        after = authority[end + 1:]
        if after and not after.startswith(":"):
            raise ValueError(f"{shown}: only ':port' may follow the IPv6 address")
        port_text = after[1:] if after else None
    else:
        host, colon, port_text = authority.partition(":")
        if not colon:
            port_text = None
        if not host:
            raise ValueError(f"{shown}: a server URL needs a host")
        if not _HOST_NAME.fullmatch(host) or len(host.rstrip(".")) > _HOST_NAME_MAX:
            raise ValueError(f"{shown}: {_shown(host)} is not a host name or IP address "
                             f"(labels of 1 to 63 letters, digits, '-' or '_' joined by '.', "
                             f"{_HOST_NAME_MAX} characters at most; an IPv6 address in "
                             f"brackets)")
        host = host.lower()
    if port_text is None:
        return host, None
    if not port_text.isdigit() or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{shown}: the port must be a number from 1 to 65535, not "
                         f"{_shown(port_text)}")
    return host, int(port_text)


def normalize_url(url: Any, argument: str = "url") -> str:
    """The normalized form of a server URL, which names one server whatever way it is
    written: ``scheme://host:port`` (the scheme and host in lower case, the port always
    given), followed by the root path when the URL has one. Raises as
    :func:`parse_server_url` does.

    >>> normalize_url("HTTP://Localhost/"), normalize_url("https://a:443/raven/")
    ('http://localhost:80', 'https://a:443/raven')
    """
    return str(parse_server_url(url, argument))


def check_scheme(url: ServerUrl, scheme: str, where: str) -> None:
    """The rule that a cluster never mixes schemes: ``ValueError`` naming ``where`` (the
    node) when ``url`` is not a ``scheme://`` URL."""
    if url.scheme != scheme:
        raise ValueError(f"{where} is {url}, whose scheme ({url.scheme}://) differs from the "
                         f"cluster's ({scheme}://): a cluster never mixes schemes, and no "
                         f"request goes to a node whose scheme differs")


def server_urls(url: Union[str, Sequence[str]], name: str = "url") -> List[ServerUrl]:
    """The servers of a ``url`` argument: a ``str`` (one server) or a non-empty list or tuple
    of them (a cluster's nodes), each through :func:`parse_server_url`, none named twice
    (in any spelling), all of one scheme. Raises ``TypeError`` or ``ValueError`` naming
    ``name`` (``url[1]`` for an item).

    >>> [str(u) for u in server_urls(["http://a:8080", "http://B:8080/"])]
    ['http://a:8080', 'http://b:8080']
    >>> server_urls(["https://a", "http://b"])
    Traceback (most recent call last):
    ValueError: url[1] is http://b:80, whose scheme (http://) differs from the cluster's (https://): a cluster never mixes schemes, and no request goes to a node whose scheme differs
    """
    if isinstance(url, str):
        return [parse_server_url(url, name)]
    if not isinstance(url, (list, tuple)):
        raise TypeError(f"{name} must be a str or a list of str, not {type(url).__name__}")
    if not url:
        raise ValueError(f"{name} must hold at least one URL")
    parsed = [parse_server_url(item, f"{name}[{index}]") for index, item in enumerate(url)]
    seen: Dict[str, int] = {}
    for index, item in enumerate(parsed):
        check_scheme(item, parsed[0].scheme, f"{name}[{index}]")
        key = str(item)
        if key in seen:
            raise ValueError(f"{name} names the server {key} more than once ({name}[{seen[key]}] "
                             f"and {name}[{index}])")
        seen[key] = index
    return parsed
