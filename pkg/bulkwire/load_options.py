"""The options of a load, stated and checked in one place: :class:`LoadOptions`.

``load_parquet``, ``load_arrow``, the Dask and Ray sinks and ``bulkwire load`` take the same
options, with the same defaults, refused with the same messages: each builds one
:class:`LoadOptions` (from ``options=`` and its keyword arguments) and reads it; the command
line takes its defaults and choices from the class.

>>> LoadOptions().collection, LoadOptions().id_column, LoadOptions().float32
('Embeddings', 'id', 'widen')
>>> LoadOptions(collection="Points").replace(float32="shortest").float32
'shortest'
>>> LoadOptions(buffer_size=0)
Traceback (most recent call last):
...
ValueError: buffer_size must be a positive int, not 0
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple, Union

from . import _core
from ._deprecated import renamed_fields, renamed_keywords, renamed_module_attributes
from .bulk import DEFAULT_BUFFER_SIZE
from .compression import compress_value

__all__ = ["LoadOptions", "DEFAULT_BUFFER_SIZE", "FLOAT32_MODES"]

#: Old spellings of the options (old -> new), still accepted with a ``DeprecationWarning``.
RENAMED_OPTIONS = {"chunk_size": "buffer_size"}
#: Old spellings of the constants (old -> new), still readable with a ``DeprecationWarning``
#: here and where the constants are re-exported.
RENAMED_CONSTANTS = {"DEFAULT_CHUNK_SIZE": "DEFAULT_BUFFER_SIZE"}

__getattr__ = renamed_module_attributes(__name__, RENAMED_CONSTANTS)

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


@renamed_fields(**RENAMED_OPTIONS)
@dataclass(frozen=True)
class LoadOptions:
    """How rows become documents and how they are sent, for every load entry point.

    ``collection``: the documents' ``@collection`` (and, lower-cased with ``/``, the id
    prefix of integer ids). ``id_column``: the column holding each id. ``id_prefix``: put
    before every id (None: ``collection.lower() + "/"`` for integer ids, ``""`` for string
    ids). ``vector_column``: the vector column (None: the only list column). ``columns``:
    the document's fields, in order (None: every column but the id). ``compress``: the body's
    compression (:func:`bulkwire.compression.parse_compress`; kept in its canonical form).
    ``float32``: one of :data:`FLOAT32_MODES`. ``metadata``: entries of every document's
    ``@metadata``. ``python_type``: its ``Raven-Python-Type`` (None: none). ``buffer_size``:
    the writer's buffer, in bytes (:class:`~bulkwire.bulk.BulkWriter`'s ``buffer_size``;
    ``chunk_size`` is its deprecated spelling). ``batch_rows``: rows per Arrow batch (None: about 4 MiB
    of text).

    Every value is checked when the object is made (``TypeError`` or ``ValueError`` naming
    the option), the same for every entry point; the object is frozen, hashable (but for
    ``metadata``) and pickles small, as engines send it to their workers.
    """

    collection: str = "Embeddings"
    id_column: str = "id"
    id_prefix: Optional[str] = None
    vector_column: Optional[str] = None
    columns: Optional[Tuple[str, ...]] = None
    compress: Union[bool, str] = False
    float32: str = "widen"
    metadata: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    python_type: Optional[str] = "builtins.dict"
    buffer_size: int = DEFAULT_BUFFER_SIZE
    batch_rows: Optional[int] = None

    def __post_init__(self) -> None:
        _name(self.collection, "collection", optional=False)
        _name(self.id_column, "id_column", optional=False)
        if self.id_prefix is not None and not isinstance(self.id_prefix, str):
            raise TypeError(f"id_prefix must be a str or None, not {type(self.id_prefix).__name__}")
        _name(self.vector_column, "vector_column", optional=True)
        if self.columns is not None:
            if isinstance(self.columns, (str, bytes)) or not isinstance(self.columns, Sequence):
                raise TypeError(f"columns must be a sequence of column names, not "
                                f"{type(self.columns).__name__}")
            columns = tuple(self.columns)
            for i, name in enumerate(columns):
                if not isinstance(name, str):
                    raise TypeError(f"columns[{i}] must be a str, not {type(name).__name__}")
                if not name:
                    raise ValueError(f"columns[{i}] is an empty column name")
            object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "compress", compress_value(self.compress))
        if self.float32 not in FLOAT32_MODES:
            raise ValueError(f"float32 must be {' or '.join(map(repr, FLOAT32_MODES))}, "
                             f"not {self.float32!r}")
        if self.metadata is not None and not isinstance(self.metadata, Mapping):
            raise TypeError(f"metadata must be a mapping or None, not {type(self.metadata).__name__}")
        if self.python_type is not None and not isinstance(self.python_type, str):
            raise TypeError(f"python_type must be a str or None, not "
                            f"{type(self.python_type).__name__}")
        _positive(self.buffer_size, "buffer_size", optional=False)
        _positive(self.batch_rows, "batch_rows", optional=True)

    @classmethod
    def of(cls, options: Optional["LoadOptions"] = None, **fields: Any) -> "LoadOptions":
        """``options`` (default: the defaults) with ``fields`` replacing its values: how an
        entry point turns ``options=`` and its keyword arguments into one object. A keyword
        that is not an option is a ``TypeError`` naming it.

        >>> LoadOptions.of(LoadOptions(collection="Points"), float32="shortest").collection
        'Points'
        """
        if options is not None and not isinstance(options, LoadOptions):
            raise TypeError(f"options must be a LoadOptions, not {type(options).__name__}")
        # called by the entry points and replace: the warning points at their caller
        fields = renamed_keywords(RENAMED_OPTIONS, "", fields, 3)
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r} (not a load option)")
        base = options if options is not None else cls()
        return dataclasses.replace(base, **fields) if fields else base

    def replace(self, **fields: Any) -> "LoadOptions":
        """A copy with ``fields`` changed (checked again)."""
        return LoadOptions.of(self, **fields)
