"""CQL ``vector<T, N>`` codec: NumPy arrays, Arrow vector columns and sequences to the wire
format and back, in one C pass per batch.

The work happens in ``bulkwire._core.VectorCodec``; this module gives it its public name and
documentation. See ``docs/vectors.md`` for the full contract.

>>> import numpy as np
>>> from bulkwire import VectorCodec
>>> codec = VectorCodec("float", 3)
>>> codec.serialize(np.array([1.0, 2.5, -0.0], dtype="f4")).hex()
'3f8000004020000080000000'
>>> codec.serialize([1.0, 2.5, -0.0]) == np.array([1.0, 2.5, -0.0], ">f4").tobytes()
True
>>> rows = codec.serialize_many(np.zeros((2, 3), dtype="f4"))
>>> len(rows), len(rows[0])
(2, 12)
>>> buf, stride = codec.serialize_into(np.ones((2, 3), dtype="f4"))
>>> len(buf), stride
(24, 12)
>>> vrows = codec.serialize_rows(np.ones((2, 3), dtype="f4"))
>>> len(vrows), vrows.stride, bytes(vrows[1]) == bytes(buf[12:])
(2, 12, True)
>>> codec.deserialize(rows[0])
array([0., 0., 0.], dtype='>f4')
>>> codec.deserialize_many(rows).shape
(2, 3)
>>> codec.to_json_many(np.array([[0.1, 1.0, 2.0]], dtype="f4"), float32="shortest")
[b'[0.1, 1.0, 2.0]']
>>> VectorCodec("smallint", 2).serialize([1, -2]).hex()   # each element behind its vint length
'02000102fffe'
"""
from __future__ import annotations

from . import _core

__all__ = ["VectorCodec", "VectorRows", "SUBTYPES"]

#: What ``VectorCodec.serialize_rows`` returns: the rows back to back in one read-only buffer;
#: ``rows[i]`` is a ``memoryview`` of row ``i`` (no copy), ``rows.stride`` the bytes of a row.
VectorRows = _core.VectorRows

#: CQL subtype names ``VectorCodec`` accepts.
SUBTYPES: tuple[str, ...] = _core.VECTOR_SUBTYPES


class VectorCodec(_core.VectorCodec):
    """``VectorCodec(subtype, dimension, *, driver_compat=False)``: the codec for
    ``vector<subtype, dimension>``.

    Fixed-width subtypes (``float``, ``double``, ``int``, ``bigint``, ``boolean``,
    ``timestamp``, ``uuid``, ``timeuuid``) are N big-endian elements back to back; the others
    (``smallint``, ``tinyint``, ``date``, ``time``, ``text``/``varchar``/``ascii``, ``blob``,
    ``varint``) put each element behind its unsigned-vint byte length. Any other name raises
    ``ValueError``.

    Methods (all in C):

    - ``serialize(v) -> bytes``: a 1-D ndarray of shape ``(N,)`` (any byte order, any
      stride), a sequence of N values, or ready ``bytes``/``bytearray`` of the exact size
      (passed through; not allowed for variable-width subtypes).
    - ``serialize_many(batch) -> list[bytes]``: a 2-D ndarray ``(rows, N)`` in any memory
      order, an object with ``__arrow_c_array__``/``__arrow_c_stream__`` holding
      ``fixed_size_list``/``list``/``large_list`` of float32/float64 (float and double
      vectors), or a sequence of vectors.
    - ``serialize_into(batch) -> (bytearray, stride)``: every row back to back in one new
      ``bytearray``; row ``i`` is ``buf[i * stride:(i + 1) * stride]``. Constant-size
      subtypes only.
    - ``serialize_rows(batch) -> VectorRows``: the same inputs, every row back to back in one
      read-only buffer; ``rows[i]`` is a ``memoryview`` of row ``i`` (no copy), which
      ``bulkwire.cql`` sends to the driver as it is. One allocation per batch, with NumPy's
      huge-page advice for large ones: no per-row ``bytes``, and no fresh-page fault per 4 KiB
      of output. Constant-size subtypes only.
    - ``deserialize(b) -> ndarray``: a zero-copy big-endian view (``numpy.frombuffer``
      semantics) for float/double/int/bigint/timestamp; a native-order copy for the others
      (``date`` -> ``datetime64[D]``, ``time`` -> ``timedelta64[ns]``, uuid/text/blob/varint
      -> object arrays).
    - ``deserialize_many(items) -> ndarray``: 2-D, native byte order, one pass.
    - ``to_json_many(batch, *, float32="widen") -> list[bytes]``: each row of a 2-D float
      ndarray or Arrow vector column as a JSON array, byte-identical to
      ``bulkwire.dumps(row)`` (``"shortest"``: float32 values with the shortest digits that
      round-trip as float32).

    Casting follows NumPy's ``"safe"`` rule (``TypeError`` otherwise, naming the explicit
    cast); ``date`` also reads ``datetime64[D]`` arrays and ``time`` ``timedelta64[ns]``
    arrays. Out-of-range values raise ``OverflowError`` and ``None`` (or ``NaT``) elements
    ``TypeError``, from arrays with the same message as from the equivalent list. Malformed
    payloads raise ``ValueError`` when decoding.

    ``driver_compat=True`` makes float32 values read from memory take the Python driver's
    float32 -> float -> float32 trip (signaling NaNs come out quiet); ``bulkwire.cql`` uses
    it. By default NaN, infinities and -0.0 pass through bit-exact.
    """

    __slots__ = ()
