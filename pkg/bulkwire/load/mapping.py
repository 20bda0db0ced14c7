"""Columns named otherwise in the target, and constant columns: the load's ``columns``
mapping (``{"emb": "vector"}``) and ``constants`` (``{"source": "export-2026-12"}``), for
every kind of target.

The target sees the data as it will be written: :func:`mapped` gives it the source's schema
with each mapped column under its target name and a field per constant, and the load
options in the target's names; the target's plan and encoder are made of those, and the
encoder is wrapped (:class:`_MappedEncoder`) so that the pipeline reads the source's columns
by their own names and hands the target each batch renamed (its schema only: the arrays are
the same, nothing is copied) with the constants' arrays added (made by pyarrow once, and
sliced for each batch). A load without a mapping or constants is not wrapped at all.

>>> import pyarrow as pa
>>> from bulkwire import LoadOptions
>>> schema = pa.schema([("id", pa.int64()), ("emb", pa.list_(pa.float32(), 2))])
>>> options = LoadOptions(columns={"id": "pk", "emb": "vector"}, constants={"run": "r1"})
>>> seen, given, constants = mapped(schema, options, None, "f.parquet")
>>> seen.names, given.columns, constants
(['pk', 'vector', 'run'], ('pk', 'vector', 'run'), {'run': <pyarrow.StringScalar: 'r1'>})
"""
from __future__ import annotations

import threading
from typing import Any

from .._arrow import _pyarrow
from ..errors import RowError
from ..load_options import LoadOptions


def active(options: LoadOptions) -> bool:
    """Whether ``options`` rename a column or add constants (else nothing is wrapped)."""
    return bool(options.renames) or bool(options.constants)


def mapped(schema: Any, options: LoadOptions, target: Any,
           source: str) -> tuple[Any, LoadOptions, dict]:
    """The schema the target is given (the source's ``schema`` with the mapped columns
    renamed, and the constants' fields), the options it is given (``columns`` in its names,
    the constants among them; no constants), and each constant's value as a pyarrow scalar
    of its type (a target with ``column_types``, a CQL table, gives the type each constant
    takes: the value converted once). ``ValueError`` naming the column: a mapped column that
    ``source`` lacks, a constant named as a column the target is also given, a value that
    does not convert."""
    pa = _pyarrow()
    renames = options.renames
    read = options.source_columns
    for name in read or ():
        if name not in schema.names:
            to = f" (mapped to {renames[name]!r})" if name in renames else ""
            raise ValueError(f"column {name!r}{to} is not a column of {source} (its columns: "
                             f"{', '.join(schema.names)})")
    pairs = list(options.columns) if renames else [(n, n) for n in read or ()]
    taken = {target_name for _, target_name in pairs}
    # the target's columns: the mapped ones under their names, the others (a document
    # target's id column, when not mapped) under theirs unless a mapped column took it
    fields = [pa.field(to, schema.field(name).type) for name, to in pairs]
    fields += [f for f in schema if f.name not in taken and f.name not in renames]
    constants = dict(options.constants or ())
    for name in constants:
        if name in taken or (read is None and name in schema.names):
            raise ValueError(f"constant column {name!r} is also a column of {source} "
                             f"(or mapped to it): name it once")
    scalars = _scalars(constants, target)
    fields += [pa.field(name, scalar.type) for name, scalar in scalars.items()]
    columns = None if read is None else tuple(to for _, to in pairs) + tuple(scalars)
    given = LoadOptions.of(options, columns=columns, constants=None)
    return pa.schema(fields), given, scalars


def _scalars(constants: dict, target: Any) -> dict:
    """Each constant's value as a pyarrow scalar: of the type the target's ``column_types``
    gives (converted once; ``ValueError`` naming the column when it does not convert), else
    of the type pyarrow infers."""
    pa = _pyarrow()
    if not constants:
        return {}
    types = getattr(target, "column_types", None)
    wanted = types(list(constants)) if types is not None else {}
    scalars = {}
    for name, value in constants.items():
        t = wanted.get(name)
        try:
            scalar = pa.scalar(value)
            if t is not None and scalar.type != t:
                scalar = _converted(pa, value, scalar, t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError,
                OverflowError) as exc:
            raise ValueError(f"constant column {name!r}: {value!r} does not convert to "
                             f"{t} ({exc})") from None
        scalars[name] = scalar
    return scalars


def _converted(pa: Any, value: Any, scalar: Any, t: Any) -> Any:
    """``value`` (``scalar``) as a scalar of type ``t``: a uuid from its text, anything else
    by pyarrow's safe cast (text to numbers, booleans, timestamps; a number that does not
    fit refused)."""
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16 and isinstance(value, str):
        import uuid

        return pa.scalar(uuid.UUID(value).bytes, t)
    if isinstance(value, str) and pa.types.is_boolean(t):
        word = value.strip().lower()
        if word not in ("true", "false"):
            raise ValueError("not true or false")
        return pa.scalar(word == "true")
    return scalar.cast(t)


class _MappedPlan:
    """The target's plan, in the source's names: ``read_columns`` (the source's columns the
    target's plan reads, constants left out) and ``vector_column``; anything else the
    target's plan has is read from it."""

    def __init__(self, inner: Any, back: dict, constants: dict) -> None:
        self.inner = inner
        self.read_columns = list(dict.fromkeys(back.get(n, n) for n in inner.read_columns
                                               if n not in constants))
        vector = inner.vector_column
        self.vector_column = None if vector is None else back.get(vector, vector)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class _MappedEncoder:
    """The target's encoder, given each batch of the source's columns renamed to the
    target's names (a new schema over the same arrays) with the constants' arrays added,
    in the order of the target's plan. Picklable (sent to worker processes)."""

    def __init__(self, inner: Any, back: dict, constants: dict) -> None:
        self.inner, self.back, self.constants = inner, back, constants
        self.plan = _MappedPlan(inner.plan, back, constants)
        self._lock = threading.Lock()
        self._repeated: dict = {}  # name -> an array of the constant, sliced per batch
        if hasattr(inner, "ahead"):
            self.ahead = self._ahead

    def __getstate__(self) -> tuple:
        return self.inner, self.back, self.constants

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:  # the target's encoder's other attributes
        if name in ("inner", "back", "constants", "plan"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _constant(self, name: str, rows: int) -> Any:
        """The constant ``name`` as an array of ``rows`` values: a slice of one made once by
        pyarrow (made again, longer, for a longer batch)."""
        with self._lock:
            array = self._repeated.get(name)
            if array is None or len(array) < rows:
                array = _pyarrow().repeat(self.constants[name], max(rows, 1))
                self._repeated[name] = array
        return array.slice(0, rows)

    def batch(self, batch: Any) -> Any:
        """``batch`` (the source's columns) as the target's encoder takes it."""
        pa = _pyarrow()
        names = self.inner.plan.read_columns
        arrays = [self._constant(n, batch.num_rows) if n in self.constants
                  else batch.column(self.back.get(n, n)) for n in names]
        return pa.RecordBatch.from_arrays(arrays, names=list(names))

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any:
        try:
            return self.inner(self.batch(batch), dim, row_base)
        except RowError as exc:
            raise self._source_row(exc) from None

    def _ahead(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any:
        try:
            return self.inner.ahead(self.batch(batch), dim, row_base)
        except RowError as exc:
            raise self._source_row(exc) from None

    def _source_row(self, exc: Any) -> Any:
        """A row error of the target's column, as one of the source's column it maps."""
        name = self.back.get(exc.column)
        if name is None:
            return exc
        return RowError(name, exc.row, f"{exc.reason} (written as {exc.column!r})")


def wrapped(encoder: Any, options: LoadOptions, constants: dict) -> Any:
    """``encoder`` (made of :func:`mapped`'s schema and options) wrapped to take the source's
    batches (``options``: the load's own, with its mapping)."""
    back = {to: name for name, to in options.renames.items()}
    return _MappedEncoder(encoder, back, constants)


def explained(exc: BaseException, options: LoadOptions) -> BaseException:
    """``exc`` (the target's plan refusing the schema it was given), its message saying
    which source column each target name it quotes is mapped from."""
    renames = options.renames
    if not renames or len(exc.args) != 1 or not isinstance(exc.args[0], str):
        return exc
    message = exc.args[0]
    said = [f"{source!r} is mapped to {to!r}" for source, to in renames.items()
            if repr(to) in message]
    if said:
        exc.args = (f"{message} ({'; '.join(said)})",)
    return exc
