"""How rows become JSON documents: the options of the targets that write documents (a RavenDB
database, its request body in a file, a JSON Lines file), stated, defaulted and checked once
here in :class:`DocumentOptions`.

>>> DocumentOptions().collection, DocumentOptions().id_column, DocumentOptions().float32
('Embeddings', 'id', 'widen')
>>> DocumentOptions(buffer_size=0)
Traceback (most recent call last):
...
ValueError: buffer_size must be a positive int, not 0
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

from . import _core
from .compression import compress_value

__all__ = ["DocumentOptions", "DOCUMENT_OPTIONS", "DEFAULT_BUFFER_SIZE", "FLOAT32_MODES"]

#: The writer's buffer, in bytes, by default (:class:`~bulkwire.BulkWriter`'s ``buffer_size``).
DEFAULT_BUFFER_SIZE = 1 << 20

#: How float32 values are written: ``"widen"`` (the repr of the double, as ``json.dumps``
#: of the float) or ``"shortest"`` (the shortest text that reads back as the float32); the
#: C writers' own list.
FLOAT32_MODES: Tuple[str, ...] = _core.FLOAT32_MODES


def _name(value: Any, what: str, *, optional: bool) -> None:
    """A non-empty ``str`` (or None when ``optional``); ``TypeError`` / ``ValueError``
    naming ``what`` otherwise."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        kind = "a str or None" if optional else "a str"
        raise TypeError(f"{what} must be {kind}, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")


def _positive(value: Any, what: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive int{' or None' if optional else ''}, "
                         f"not {value!r}")


@dataclass(frozen=True, kw_only=True)
class DocumentOptions:
    """The options of a document: ``collection``, its ``@collection`` (and, lower-cased with
    ``/``, the id prefix of integer ids); ``id_column``, the column holding each id;
    ``id_prefix``, put before every id (None: ``collection.lower() + "/"`` for integer ids,
    ``""`` for string ids); ``metadata``, entries of every document's ``@metadata``;
    ``python_type``, its ``Raven-Python-Type`` (None: none); ``float32``, one of
    :data:`FLOAT32_MODES`; ``compress``, the output's compression
    (:func:`bulkwire.compression.parse_compress`, kept in its canonical form);
    ``buffer_size``, the writer's buffer in bytes.

    Every value is checked when the object is made (``TypeError`` or ``ValueError`` naming
    the option). The document targets are made of these fields and their own.
    """

    collection: str = "Embeddings"
    id_column: str = "id"
    id_prefix: Optional[str] = None
    metadata: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    python_type: Optional[str] = "builtins.dict"
    float32: str = "widen"
    compress: Union[bool, str] = False
    buffer_size: int = DEFAULT_BUFFER_SIZE

    def __post_init__(self) -> None:
        for name, value in check_document_options(self.document_options()).items():
            object.__setattr__(self, name, value)

    def document_options(self) -> Dict[str, Any]:
        """The document options' values, by name."""
        return {name: getattr(self, name) for name in DOCUMENT_OPTIONS}


#: The names of the document options (the fields of :class:`DocumentOptions`).
DOCUMENT_OPTIONS: Tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DocumentOptions))
#: Their defaults, by name.
DOCUMENT_DEFAULTS: Dict[str, Any] = {f.name: f.default for f in dataclasses.fields(DocumentOptions)}


def check_document_options(values: Mapping[str, Any]) -> Dict[str, Any]:
    """``values`` (some of the document options, by name) checked: ``TypeError`` or
    ``ValueError`` naming the option; returns them in their canonical form (``compress``)."""
    out = dict(values)
    if "collection" in out:
        _name(out["collection"], "collection", optional=False)
    if "id_column" in out:
        _name(out["id_column"], "id_column", optional=False)
    id_prefix = out.get("id_prefix")
    if id_prefix is not None and not isinstance(id_prefix, str):
        raise TypeError(f"id_prefix must be a str or None, not {type(id_prefix).__name__}")
    if "compress" in out:
        out["compress"] = compress_value(out["compress"])
    if "float32" in out and out["float32"] not in FLOAT32_MODES:
        raise ValueError(f"float32 must be {' or '.join(map(repr, FLOAT32_MODES))}, "
                         f"not {out['float32']!r}")
    metadata = out.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping or None, not {type(metadata).__name__}")
    python_type = out.get("python_type")
    if python_type is not None and not isinstance(python_type, str):
        raise TypeError(f"python_type must be a str or None, not {type(python_type).__name__}")
    if "buffer_size" in out:
        _positive(out["buffer_size"], "buffer_size", optional=False)
    return out
