"""Fuzz target: ``VectorCodec.deserialize`` / ``deserialize_many`` / the drop-in's list decoding
of arbitrary bytes, against the Scylla driver's own ``VectorType.deserialize``.

Input layout (plain Python over the bytes, no FuzzedDataProvider):

- byte 0: the subtype (index into ``bulkwire.vectors.SUBTYPES``);
- byte 1: bits 0-1 the container (0 ``bytes``, 1 ``bytes`` cut to the codec's row size so the
  values themselves get decoded, 2 ``bytearray``, 3 ``memoryview``); bits 2-7 the dimension
  minus one (when cut to the row size, the dimension is what the payload holds instead);
- the rest: the payload.

Oracle: the driver's values (compared NaN-aware, per subtype), or both raise; bulkwire raises
``ValueError`` (``UnicodeDecodeError`` included) for every malformed payload, where the driver
raises ``ValueError`` (its vector and vint errors, every error inside a variable-width element
wrapped as "Error reading additional data ...") or ``OverflowError`` (``timestamp`` values
outside the years ``datetime`` holds). Where the two legitimately differ, the difference is
named in ``_allowed_divergence`` and checked precisely:

- ``timestamp``: the driver cannot make a ``datetime`` of the value (``OverflowError``);
  bulkwire's ``datetime64[ms]`` holds it. Only -2**63, which ``datetime64[ms]`` reads as NaT,
  raises in bulkwire.
- ``time``: the driver returns ``Time(n)`` for negative ``n`` (``util.Time`` checks only the
  upper bound); bulkwire refuses values outside ``[0, 86400e9)`` as its encoder does.
- every subtype the driver reads with vint lengths (``text``/``varchar``/``ascii``/``blob``/
  ``varint``, and ``smallint``/``tinyint``/``date``/``time``): the driver decodes whatever
  bytes remain when the last element's length prefix runs past the end of the payload (a
  truncated string, or ``2a 25 00`` as a smallint); bulkwire raises.
- ``smallint``/``tinyint``/``date``/``time``: the driver reads each element's length as any
  vint, so a non-minimal length (``80 02`` for 2) passes; bulkwire reads the one-byte length
  the server writes and raises on anything else.

Round trip: where both accept ``b``, ``serialize(deserialize(b))`` equals the driver's own
``serialize(deserialize(b))`` (which is ``b`` itself unless ``b`` holds a non-canonical form:
boolean bytes other than 0/1, non-minimal varints or vint lengths).
"""
from __future__ import annotations

import datetime
import math
import sys

import numpy as np

from bulkwire import VectorCodec
from bulkwire.vectors import SUBTYPES

import cassandra.cqltypes as ct
from cassandra import util
from cassandra.marshal import uvint_unpack
from references import driver_vector_type  # noqa: E402

PV = 4
DAY_NS = 86_400 * 10**9
VARIABLE = frozenset(("text", "varchar", "ascii", "blob", "varint"))
SHORT_PREFIXED = frozenset(("smallint", "tinyint", "date", "time"))
LIST_DECODED = frozenset(("float", "double", "int", "bigint", "smallint", "tinyint"))

_codecs: dict[tuple[str, int, bool], VectorCodec] = {}


driver_type = driver_vector_type


def codec(subtype: str, dim: int, compat: bool = False) -> VectorCodec:
    key = (subtype, dim, compat)
    if key not in _codecs:
        _codecs[key] = VectorCodec(subtype, dim, driver_compat=compat)
    return _codecs[key]


def _driver(name: str):
    """The driver's own VectorType method, also while bulkwire.cql.install() is in effect
    (another test in the same process may have installed it)."""
    import bulkwire.cql

    method = bulkwire.cql._state.get(name) or ct.VectorType.__dict__[name]
    return method.__func__


def _run(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - every exception is compared below
        return None, e


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _ms(dt: datetime.datetime) -> int:
    return (dt - util.DATETIME_EPOC) // datetime.timedelta(milliseconds=1)


def _same_values(subtype: str, got: np.ndarray, want: list) -> bool:
    """bulkwire's array against the driver's list, element by element."""
    if len(got) != len(want):
        return False
    if subtype in ("float", "double"):
        return all(_same_float(float(g), w) for g, w in zip(got, want))
    if subtype == "timestamp":
        return got.astype("int64").tolist() == [_ms(w) for w in want]
    if subtype == "date":
        return got.astype("int64").tolist() == [w.days_from_epoch for w in want]
    if subtype == "time":
        return got.astype("int64").tolist() == [w.nanosecond_time for w in want]
    return got.tolist() == want


def _elements(payload: bytes, dim: int):
    """(start, declared length) of each of the first dim vint-prefixed elements, as far as
    the payload lets them be read."""
    out, at = [], 0
    while len(out) < dim and at < len(payload):
        try:
            n, used = uvint_unpack(payload[at:])
        except IndexError:
            break
        out.append((at + used, n, used))
        at += used + n
    return out


def _allowed_divergence(subtype: str, dim: int, payload: bytes, want, d_exc, b_exc) -> bool:
    """Whether a value on one side and an error on the other is a difference the docstring
    names (checked on the payload itself, not assumed)."""
    if d_exc is not None:  # the driver raised, bulkwire returned values
        if subtype == "timestamp" and isinstance(d_exc, OverflowError):
            values = np.frombuffer(payload, ">i8").tolist()
            for v in values:
                try:
                    util.datetime_from_ms_timestamp(v)
                except OverflowError:
                    return True
        return False
    # bulkwire raised ValueError, the driver returned values
    if subtype == "time" and any(t.nanosecond_time < 0 for t in want):
        return True
    elements = _elements(payload, dim)
    if subtype in VARIABLE | SHORT_PREFIXED and len(elements) == dim:
        start, n, _ = elements[-1]
        if start + n > len(payload):
            return True
    if subtype in SHORT_PREFIXED and any(used > 1 for _, _, used in elements):
        return True
    return False


def _same_bits_list(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        _same_float(g, w) if isinstance(w, float) else (type(g) is type(w) and g == w)
        for g, w in zip(got, want))


def check(subtype: str, dim: int, payload) -> None:
    raw = bytes(payload)
    T = driver_type(subtype, dim)
    c = codec(subtype, dim)
    want, d_exc = _run(_driver("deserialize"), T, raw, PV)
    try:
        got = c.deserialize(payload)
        b_exc = None
    except ValueError as e:  # the documented decode error (UnicodeDecodeError included)
        got, b_exc = None, e

    if d_exc is None and b_exc is None:
        assert _same_values(subtype, got, want), (subtype, dim, raw.hex(), got, want)
    elif (d_exc is None) != (b_exc is None):
        assert _allowed_divergence(subtype, dim, raw, want, d_exc, b_exc), (
            subtype, dim, raw.hex(), want, d_exc, got, b_exc)
    else:
        assert isinstance(d_exc, (ValueError, OverflowError)), (subtype, raw.hex(), d_exc)

    # deserialize_many: the same rows, or the same error naming the row
    try:
        many = c.deserialize_many([payload, raw])
        m_exc = None
    except ValueError as e:
        many, m_exc = None, e
    if b_exc is None:
        assert m_exc is None, (subtype, raw.hex(), m_exc)
        assert many.shape == (2, dim), (subtype, many.shape)
        for row in many:
            if got.dtype.kind == "O":
                assert row.tolist() == got.tolist(), (subtype, raw.hex())
            else:
                assert row.tobytes() == got.astype(got.dtype.newbyteorder("=")).tobytes(), (
                    subtype, raw.hex())
    else:
        assert m_exc is not None and str(m_exc) == f"row 0: {b_exc}", (subtype, raw.hex(), m_exc)

    # the drop-in's decoding: the driver's own list, or None to run the driver's code
    if subtype in LIST_DECODED:
        listed = codec(subtype, dim, True)._driver_deserialize(payload, False)
        if listed is not None:
            assert d_exc is None and _same_bits_list(listed, want), (subtype, raw.hex(), listed)
        else:  # the driver's code then runs: right whenever the codec itself refuses
            assert b_exc is not None, (subtype, raw.hex(), want)

    # round trip
    if d_exc is None and b_exc is None:
        again = c.serialize(got)
        # floats keep their bits here; the driver's trip through Python floats may not
        canonical, r_exc = _run(_driver("serialize"), T, want, PV)
        expected = raw if r_exc is not None or subtype in ("float", "double") else canonical
        assert again == expected, (subtype, raw.hex(), again.hex(), expected, r_exc)
        assert c.serialize_many(got[None, :] if got.dtype.kind != "O" else [got]) == [again]


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    subtype = SUBTYPES[data[0] % len(SUBTYPES)]
    mode = data[1] & 3
    dim = 1 + (data[1] >> 2)
    payload = data[2:]
    if mode == 1:
        size = codec(subtype, 1).serialized_size
        if size is not None:
            if len(payload) < size:
                return
            dim = len(payload) // size
            payload = payload[:dim * size]
    elif mode == 2:
        payload = bytearray(payload)
    elif mode == 3:
        payload = memoryview(payload)
    check(subtype, dim, payload)


if __name__ == "__main__":
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
