"""A JSON Lines file as a load's target: one document per line, the same documents a RavenDB
load writes (each the ``Document`` of its PUT command, ``@metadata`` included), written whole
or not at all.

:func:`jsonl` is the constructor (listed in :data:`bulkwire.targets.KINDS`);
:class:`JsonlDescription` the description, with the document options of the RavenDB kinds
and their plan; :class:`_JsonlEncoder` writes a batch's documents as lines (the C encoder's
commands, each cut to its document); :class:`_JsonlSession` writes them to a temporary file,
compressed as the file's suffix says (``.gz``: gzip, ``.zst``: zstd), renamed to the file's
name once the load is complete.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from .. import _core
from .._arrow import PathLike, _pyarrow
from ..compression import body_compressor, compress_encoding, parse_compress
from ..document_options import DOCUMENT_DEFAULTS
from ..load_options import LoadOptions
from .interface import _remove, kind_constructor
from .plan import _metadata_json, _Plan
from .ravendb_target import _DocumentDescription

_D = DOCUMENT_DEFAULTS

#: The compression each suffix of a JSON Lines file's name says (any other: none).
SUFFIXES = {".gz": "gzip", ".zst": "zstd"}
#: What separates a command's head from its document, and one command from the next, in the
#: C encoder's commands (the documents themselves write ``": "`` and ``", "``: neither
#: separator can occur inside a document).
_DOCUMENT_START = b',"Type":"PUT","Document":'
_NEXT_COMMAND = b'},{"Id":'


def _documents(commands: bytes) -> list:
    """The documents of ``commands`` (PUT commands as the C encoder writes them, separated by
    commas), each its own bytes, in order."""
    parts = commands.split(_DOCUMENT_START)[1:]
    documents = [part[:part.rindex(_NEXT_COMMAND)] for part in parts[:-1]]
    if parts:
        documents.append(parts[-1][:-1])  # the last command's closing brace
    return documents


@dataclass(frozen=True)
class _JsonlEncoder:
    """A batch's rows as JSON Lines: each row's document (as the RavenDB kinds write it) and
    a newline, all in one ``bytes``. Called on a batch without rows, it judges the columns'
    types as the C encoder does."""

    plan: _Plan
    id_prefix: str
    metadata: bytes
    float32: str

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> bytes:
        plan = self.plan
        pieces = _core.encode_batch(batch, plan.id_column, plan.fields,
                                    vector_column=plan.vector_column, id_prefix=self.id_prefix,
                                    metadata=self.metadata, float32=self.float32, dim=dim,
                                    first=True, row_base=row_base)
        documents = _documents(b"".join(pieces))
        return b"".join(document + b"\n" for document in documents)


class _JsonlSession:
    """The file's one session: lines written (compressed) to ``<path>.partial``, renamed to
    ``path`` by :meth:`close`; :meth:`abort` removes it."""

    def __init__(self, path: str, compress: str | None) -> None:
        self.path = path
        self.partial = path + ".partial"
        self._compressor = (None if compress is None
                            else body_compressor(parse_compress(compress)))
        try:
            self._file = open(self.partial, "wb")
        except OSError as exc:  # named by the path the user gave, not the temporary one
            raise type(exc)(exc.errno, exc.strerror, path) from None
        self._body = self._wire = 0

    def _write(self, data: bytes | None) -> None:
        if data:
            self._file.write(data)
            self._wire += len(data)

    def store(self, encoded: bytes, rows: int) -> int:
        if not rows:
            return 0
        self._body += len(encoded)
        self._write(encoded if self._compressor is None else self._compressor.compress(encoded))
        return len(encoded)

    def close(self) -> None:
        if self._compressor is not None:
            self._write(self._compressor.finish())
        self._file.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self._file.close()
        _remove(self.partial)

    @property
    def body_bytes(self) -> int:
        return self._body

    @property
    def wire_bytes(self) -> int:
        return self._wire


@dataclass(frozen=True, kw_only=True)
class JsonlDescription(_DocumentDescription):
    """A JSON Lines file at ``path``: one session, written whole or removed
    (:class:`_JsonlSession`); its ``compress`` is what the suffix of ``path`` says."""

    path: str

    units = False
    kind: ClassVar[str] = "jsonl"

    def encoder(self, schema: Any, plan: _Plan, options: LoadOptions) -> _JsonlEncoder:
        id_prefix = self.id_prefix
        if id_prefix is None:
            is_integer = _pyarrow().types.is_integer(schema.field(plan.id_column).type)
            id_prefix = f"{self.collection.lower()}/" if is_integer else ""
        return _JsonlEncoder(plan, id_prefix,
                             _metadata_json(self.collection, self.python_type, self.metadata),
                             self.float32)

    def describe(self) -> str:
        return self.path

    def request_per_unit(self, resume: bool) -> bool:
        return False

    def open(self) -> _JsonlSession:
        return _JsonlSession(self.path, compress_encoding(self.compress))


@kind_constructor("jsonl")
def jsonl(path: PathLike, *, compress: bool | str | None = None,
          collection: str = _D["collection"], id_column: str = _D["id_column"],
          id_prefix: str | None = _D["id_prefix"],
          metadata: Mapping[str, Any] | None = _D["metadata"],
          python_type: str | None = _D["python_type"],
          float32: str = _D["float32"]) -> JsonlDescription:
    """A JSON Lines file as a load's target: each row one line, the document a RavenDB load
    would PUT (its columns and ``@metadata``; the document options as for
    :func:`bulkwire.targets.ravendb`). ``path``'s suffix says the compression: ``.gz`` gzip,
    ``.zst`` zstd, anything else none; ``compress``, when given, must say the same. The file
    is written under a temporary name and renamed once the load is complete: a load that
    fails leaves no file. One file is written by one process, whole: a load into it is never
    resumed, nor shared out among worker processes.

    >>> from bulkwire import targets
    >>> targets.jsonl("points.jsonl.gz").compress
    'gzip'
    """
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty file name, not {path!r}")
    said = SUFFIXES.get(os.path.splitext(path)[1].lower())
    if compress is not None and compress_encoding(compress) != said:
        raise ValueError(f"compress={compress!r} differs from what the suffix of {path!r} says "
                         f"({said or 'no compression'}): the suffix says the compression")
    return JsonlDescription(path=path, compress=said or False, collection=collection,
                            id_column=id_column, id_prefix=id_prefix, metadata=metadata,
                            python_type=python_type, float32=float32)
