"""The options of a load's pipeline, stated and checked in one place: :class:`LoadOptions`.

``load_parquet``, ``load_arrow``, the Dask and Ray sinks and ``bulkwire load`` take the same
options, with the same defaults, refused with the same messages: each builds one
:class:`LoadOptions` (from ``options=`` and its keyword arguments) and reads it; the command
line takes its defaults and choices from the class. The options of the documents belong to
the document targets (:mod:`bulkwire.document_options`, :mod:`bulkwire.targets`); they are
still fields here, for the code that gives them here.

>>> LoadOptions().columns, LoadOptions().vector_column, LoadOptions().batch_rows
(None, None, None)
>>> LoadOptions(columns=["a"]).replace(batch_rows=10).batch_rows
10
>>> LoadOptions(batch_rows=0)
Traceback (most recent call last):
...
ValueError: batch_rows must be a positive int or None, not 0
>>> LoadOptions(collection="Points", batch_rows=10).document_options()
{'collection': 'Points'}
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple, Union

from ._deprecated import renamed_fields, renamed_keywords, renamed_module_attributes
from .document_options import (DEFAULT_BUFFER_SIZE, DOCUMENT_DEFAULTS, DOCUMENT_OPTIONS,
                               FLOAT32_MODES, _name, _positive, check_document_options)

__all__ = ["LoadOptions", "DEFAULT_BUFFER_SIZE", "FLOAT32_MODES", "DOCUMENT_OPTIONS"]

#: Old spellings of the options (old -> new), still accepted with a ``DeprecationWarning``.
RENAMED_OPTIONS = {"chunk_size": "buffer_size"}
#: Old spellings of the constants (old -> new), still readable with a ``DeprecationWarning``
#: here and where the constants are re-exported.
RENAMED_CONSTANTS = {"DEFAULT_CHUNK_SIZE": "DEFAULT_BUFFER_SIZE"}

__getattr__ = renamed_module_attributes(__name__, RENAMED_CONSTANTS)


#: The rate limits and the values each may take (per second).
RATE_RANGES = (("max_rows_per_second", 1, 1e9), ("max_bytes_per_second", 1024, 1e12))


def _rate(value: Any, name: str, low: float, high: float) -> None:
    """A rate limit: None, or a number from ``low`` to ``high``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number or None, not {type(value).__name__}")
    if not low <= value <= high:  # NaN too
        raise ValueError(f"{name} must be from {low:,} to {high:,.0f} per second, not {value!r}")


@renamed_fields(**RENAMED_OPTIONS)
@dataclass(frozen=True)
class LoadOptions:
    """The options the load pipeline itself reads, for every load entry point: ``columns``,
    the columns read from the source, in order (None: every column the target takes), or a
    mapping of the columns read to their names in the target (``{"emb": "vector"}``: the
    source's column ``emb`` is the target's ``vector``; kept as its ``(source, target)``
    pairs, in order); ``constants``, columns of the same value in every row
    (``{"source": "export-2026-12"}``; kept as pairs); ``vector_column``, the vector column (None: the only list column); ``batch_rows``, rows
    per Arrow batch (None: about 4 MiB of text); ``max_errors`` and ``rejected``, the rows
    that may be refused and set aside in the rejected file rather than fail the load;
    ``dry_run``, every row read and checked, nothing sent (docs/operations.md).

    The document options (``collection``, ``id_column``, ``id_prefix``, ``metadata``,
    ``python_type``, ``float32``, ``compress``, ``buffer_size``;
    :class:`bulkwire.document_options.DocumentOptions`) belong to the targets that write
    documents (:func:`bulkwire.targets.ravendb`, :func:`bulkwire.targets.request_file`);
    they are still fields here, with the same defaults and checks, for the loads that give
    them here: such a load warns (``DeprecationWarning``) and hands them to its target.

    Every value is checked when the object is made (``TypeError`` or ``ValueError`` naming
    the option), the same for every entry point; the object is frozen, hashable (but for
    ``metadata``) and pickles small, as engines send it to their workers.
    """

    collection: str = DOCUMENT_DEFAULTS["collection"]
    id_column: str = DOCUMENT_DEFAULTS["id_column"]
    id_prefix: Optional[str] = DOCUMENT_DEFAULTS["id_prefix"]
    vector_column: Optional[str] = None
    columns: Optional[Tuple[str, ...]] = None
    compress: Union[bool, str] = DOCUMENT_DEFAULTS["compress"]
    float32: str = DOCUMENT_DEFAULTS["float32"]
    metadata: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    python_type: Optional[str] = DOCUMENT_DEFAULTS["python_type"]
    buffer_size: int = DOCUMENT_DEFAULTS["buffer_size"]
    batch_rows: Optional[int] = None
    #: rows a load may refuse, writing them to ``rejected``, and go on: a count, or a
    #: percentage of the load's rows ("0.1%"); None: the first refused row fails the load
    max_errors: Union[int, str, None] = None
    #: the rejected file (the refused rows, in the source's format)
    rejected: Optional[str] = None
    #: read and check every row against the target, send and write nothing
    dry_run: bool = False
    #: the load's rate limits, over every worker process, thread and node together (None:
    #: none); see docs/operations.md
    max_rows_per_second: Optional[float] = None
    max_bytes_per_second: Optional[float] = None
    #: where the run report (JSON) is written, whether the load succeeds or fails (None: none)
    report: Optional[str] = None
    constants: Optional[Tuple[Tuple[str, Any], ...]] = None

    def __post_init__(self) -> None:
        checked = check_document_options({name: getattr(self, name) for name in DOCUMENT_OPTIONS})
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        _name(self.vector_column, "vector_column", optional=True)
        if isinstance(self.columns, Mapping) or _pairs(self.columns):
            object.__setattr__(self, "columns", _mapping(self.columns))
        elif self.columns is not None:
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
        _positive(self.batch_rows, "batch_rows", optional=True)
        for name, low, high in RATE_RANGES:
            _rate(getattr(self, name), name, low, high)
        if self.report is not None:
            if not isinstance(self.report, (str, os.PathLike)):
                raise TypeError(f"report must be a path or None, not {type(self.report).__name__}")
            object.__setattr__(self, "report", os.fspath(self.report))
            if not self.report:
                raise ValueError("report must not be an empty path")
        object.__setattr__(self, "max_errors", check_max_errors(self.max_errors))
        if self.rejected is not None:
            rejected = os.fspath(self.rejected)
            if not isinstance(rejected, str) or not rejected:
                raise ValueError(f"rejected must be a file path, not {self.rejected!r}")
            object.__setattr__(self, "rejected", rejected)
        if not isinstance(self.dry_run, bool):
            raise TypeError(f"dry_run must be a bool, not {type(self.dry_run).__name__}")
        if not self.dry_run:
            if self.max_errors is not None and self.rejected is None:
                raise ValueError("max_errors needs rejected (the file the refused rows go to)")
            if self.rejected is not None and self.max_errors is None:
                raise ValueError("rejected needs max_errors (without it, the first refused "
                                 "row fails the load)")
        if self.constants is not None:
            object.__setattr__(self, "constants", _constants(self.constants))

    def rejecting(self) -> bool:
        """Whether refused rows are set aside (``max_errors``, or a dry run) rather than
        failing the load."""
        return self.max_errors is not None or self.dry_run

    @property
    def source_columns(self) -> Optional[Tuple[str, ...]]:
        """The columns read from the source, in order (None: every column the target
        takes): ``columns``, or a mapping's source names.

        >>> LoadOptions(columns={"emb": "vector", "id": "pk"}).source_columns
        ('emb', 'id')
        """
        if self.columns is None or not self.columns or isinstance(self.columns[0], str):
            return self.columns
        return tuple(source for source, _ in self.columns)

    @property
    def renames(self) -> dict:
        """``{source name: target name}`` of the columns ``columns`` maps to another name."""
        if self.columns is None or not self.columns or isinstance(self.columns[0], str):
            return {}
        return {source: target for source, target in self.columns if source != target}

    def document_options(self) -> dict:
        """The document options these options hold that differ from their defaults (the
        options a document target takes; a load given them here warns)."""
        return {name: getattr(self, name) for name in DOCUMENT_OPTIONS
                if getattr(self, name) != DOCUMENT_DEFAULTS[name]}

    def pipeline_only(self) -> "LoadOptions":
        """These options with the document options at their defaults."""
        return dataclasses.replace(self, **DOCUMENT_DEFAULTS) if self.document_options() else self

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


def check_max_errors(value: Any) -> int | str | None:
    """``max_errors`` checked: a count (an int >= 0) or a percentage (``"0.1%"``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("max_errors must be an int or a percentage like '0.1%', not bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"max_errors must be >= 0, not {value}")
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.endswith("%"):
                fraction = float(text[:-1])
                if not 0 <= fraction <= 100:
                    raise ValueError
                return f"{fraction:g}%"
            count = int(text)
            if count < 0:
                raise ValueError
            return count
        except ValueError:
            raise ValueError(f"max_errors must be a count (>= 0) or a percentage from 0% to "
                             f"100%, not {value!r}") from None
    raise TypeError(f"max_errors must be an int or a percentage like '0.1%', not "
                    f"{type(value).__name__}")
def _pairs(value: Any) -> bool:
    """Whether ``value`` is a non-empty sequence of (source, target) pairs (a mapping of
    columns as this class keeps it)."""
    return (isinstance(value, (tuple, list)) and bool(value)
            and all(isinstance(p, tuple) and len(p) == 2 for p in value))


def _mapping(given: Any) -> Tuple[Any, ...]:
    """``columns`` given as a mapping (or its pairs): the pairs, judged; a mapping where
    every column keeps its name is the names alone. ``TypeError`` or ``ValueError`` naming
    the entry: a name that is not a non-empty str, two columns mapped to one name."""
    pairs = list(given.items()) if isinstance(given, Mapping) else list(given)
    seen: dict = {}
    for source, target in pairs:
        for what, name in (("column", source), (f"the name of column {source!r}", target)):
            if not isinstance(name, str) or not name:
                raise TypeError(f"columns: {what} must be a non-empty str, not {name!r}")
        if target in seen:
            raise ValueError(f"columns: {seen[target]!r} and {source!r} are both mapped to "
                             f"{target!r} (a column of the target is written from one column)")
        seen[target] = source
    if not pairs:
        raise ValueError("columns is an empty mapping (no column to read)")
    if all(source == target for source, target in pairs):
        return tuple(source for source, _ in pairs)
    return tuple(pairs)


#: The Python types a constant column's value may have.
CONSTANT_TYPES = (str, int, float, bool)


def _constants(given: Any) -> Tuple[Tuple[str, Any], ...]:
    """``constants``: (name, value) pairs from a mapping (or its pairs), judged: a name a
    non-empty str, a value a str, int, float or bool (``TypeError`` naming the column)."""
    if not isinstance(given, (Mapping, tuple, list)):
        raise TypeError(f"constants must be a mapping of column names to values, not "
                        f"{type(given).__name__}")
    pairs = list(given.items()) if isinstance(given, Mapping) else list(given)
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"constants must map column names to values, not hold {pair!r}")
        name, value = pair
        if not isinstance(name, str) or not name:
            raise TypeError(f"constants: a column name must be a non-empty str, not {name!r}")
        if not isinstance(value, CONSTANT_TYPES):
            raise TypeError(f"constants: the value of column {name!r} must be a str, int, "
                            f"float or bool, not {type(value).__name__}")
    if len({name for name, _ in pairs}) != len(pairs):
        raise ValueError("constants names a column twice")
    return tuple(pairs) or None  # type: ignore[return-value]
