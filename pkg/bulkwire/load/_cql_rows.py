"""The CQL target's rows: its plan (the bound columns, the prepared INSERT) and its encoder,
a batch's rows as EXECUTE bodies with their partition tokens (``_core.cql_execute_bodies``),
the per-row TTL and write time columns checked and converted first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _core
from ..cql_statements import Prepared
from ._cql_options import MAX_TTL

@dataclass(frozen=True)
class _CqlPlan:
    """The bound columns (in the order of the INSERT's markers: the data's), the prepared
    statement, and a vector column (for the batch size)."""

    read_columns: list[str]
    vector_column: str | None
    prepared: Prepared
    #: bytes an element of the vector takes in an EXECUTE body (for the batch size)
    value_bytes: int = 8
    #: the data's column bound to each marker (the table's columns: their own names; the
    #: markers of USING TTL ? and TIMESTAMP ?: ttl_column and timestamp_column)
    bound: tuple[str, ...] = ()
    #: one byte per marker: not 0 where its nulls are sent unset (empty: none)
    unset: bytes = b""
    #: the per-row TTL and write time columns (None: not given)
    ttl_column: str | None = None
    timestamp_column: str | None = None


@dataclass(frozen=True)
class _CqlEncoder:
    """A batch's rows as EXECUTE bodies of the plan's statement: ``[bodies, ends, tokens,
    row_base, prepared]`` (``_core.cql_execute_bodies``; a bad row raises RowError with its source
    row)."""

    plan: _CqlPlan
    consistency: int

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> list:
        return self._bodies(batch, row_base, False)

    def refusing(self, batch: Any, dim: int = -1, row_base: int = 0) -> tuple[list, list]:
        """``(encoded, refused)``: the batch's rows the encoder takes, encoded as calling it
        encodes them, and each row it refuses as ``(row, column, reason)`` (the row counted
        from ``row_base``, in order; the column and reason of the RowError calling it would
        raise), judged in one pass. A per-row TTL or write time out of range still raises
        RowError at the first (judged before the rows)."""
        *encoded, refused = self._bodies(batch, row_base, True)
        return encoded, refused

    def _bodies(self, batch: Any, row_base: int, refusing: bool) -> list:
        plan = self.plan
        p = plan.prepared
        if not plan.bound:  # the statement's own markers, nothing sent unset
            bodies, ends, tokens, *refused = _core.cql_execute_bodies(
                batch, p.id, p.names, p.types, list(p.pk_indexes), self.consistency,
                first_row=row_base, refusing=refusing)
            return [bodies, ends, tokens or b"", row_base, p, *refused]
        if plan.ttl_column is not None:
            batch = _per_row(batch, plan.ttl_column, "ttl_column", row_base)
        if plan.timestamp_column is not None:
            batch = _per_row(batch, plan.timestamp_column, "timestamp_column", row_base)
        bodies, ends, tokens, *refused = _core.cql_execute_bodies(
            batch, p.id, list(plan.bound), p.types, list(p.pk_indexes), self.consistency,
            first_row=row_base, unset=plan.unset, refusing=refusing)
        return [bodies, ends, tokens or b"", row_base, p, *refused]


def _per_row_type(pa: Any, t: Any, option: str, name: str) -> Any:
    """The Arrow type column ``name`` (``option``: ``ttl_column`` or ``timestamp_column``,
    whose type is ``t``) is sent as: int32 seconds for a TTL, int64 microseconds for a write
    time. ``TypeError`` naming the option and the column when ``t`` is not an integer (nor,
    for a write time, an Arrow timestamp)."""
    if option == "ttl_column" and pa.types.is_integer(t):
        return pa.int32()
    if option == "timestamp_column" and (pa.types.is_integer(t) or pa.types.is_timestamp(t)):
        return pa.int64()
    what = ("integers (seconds)" if option == "ttl_column"
            else "integers (microseconds since the epoch) or timestamps")
    raise TypeError(f"{option} {name!r} holds {t}, not {what}")


def _per_row(batch: Any, name: str, option: str, row_base: int) -> Any:
    """``batch`` with its column ``name`` (a per-row TTL or write time: ``option``) checked
    and as the CQL marker takes it (a TTL 0..MAX_TTL as int32; a write time in microseconds
    as int64; an Arrow timestamp in seconds or milliseconds scaled, in nanoseconds cut to
    microseconds): :class:`~bulkwire.errors.RowError` naming the first row out of range. A
    null stays null (sent unset: the table's default)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..errors import RowError

    i = batch.schema.get_field_index(name)
    column = batch.column(i)
    scale = 1
    if pa.types.is_timestamp(column.type):
        if column.type.unit == "ns":
            column = column.cast(pa.timestamp("us", column.type.tz), safe=False)
        scale = {"s": 1_000_000, "ms": 1000}.get(column.type.unit, 1)
        column = column.view(pa.int64())
    want = _per_row_type(pa, column.type, option, name)
    if option == "ttl_column":
        low, high = 0, MAX_TTL
    else:
        low, high = -(1 << 63) // scale, ((1 << 63) - 1) // scale
    if column.null_count < len(column):
        bounds = pc.min_max(column)
        least, most = bounds["min"].as_py(), bounds["max"].as_py()
        if least < low or most > high:
            # each bound compared only where a value passes it (then it is of the column's type)
            below = pc.less(column, pa.scalar(low, column.type)) if least < low else None
            above = pc.greater(column, pa.scalar(high, column.type)) if most > high else None
            bad = above if below is None else below if above is None else pc.or_(below, above)
            row = pc.index(bad, True).as_py()
            value = column[row].as_py()
            what = (f"a TTL of {value} s is out of 0..{MAX_TTL} (20 years, the longest "
                    f"Cassandra takes)" if option == "ttl_column" else
                    f"a write time of {value} x {scale} microseconds is out of the range of "
                    f"a signed 64-bit integer" if scale > 1 else
                    f"a write time of {value} is out of the range of a signed 64-bit integer")
            raise RowError(name, row_base + row, what)
    if column.type != want:
        column = column.cast(want)
    if scale > 1:
        column = pc.multiply(column, scale)
    return batch.set_column(i, name, column)
