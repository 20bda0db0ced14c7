"""Drop-in acceleration for the Cassandra/Scylla Python driver's ``VectorType``.

>>> import bulkwire.cql
>>> bulkwire.cql.install()          # doctest: +SKIP
>>> bulkwire.cql.uninstall()        # doctest: +SKIP

``install()`` replaces ``cassandra.cqltypes.VectorType.serialize`` and ``.deserialize`` with
versions that hand the subtypes bulkwire covers to ``bulkwire.VectorCodec``. The contract is
"same bytes, same exceptions as the driver's own code, only faster":

- the fast path is taken only for input shapes whose result provably equals the driver's
  (exact ``list``/``tuple``, and 1-D ``numpy.ndarray`` for numeric subtypes whose elements
  the driver's ``struct`` packing would convert the same way);
- whenever the fast path cannot produce the value (any error: wrong length, ``None``,
  overflow, a type it does not take), the driver's original code runs on the same input and
  raises its own exception, type and message unchanged. The input is therefore iterated
  twice on error paths; a custom ``__float__``/``__index__`` with side effects would see two
  calls;
- a row of ``VectorCodec.serialize_rows`` (a ``memoryview`` whose object is a ``VectorRows``)
  written for the same subtype and dimension is returned as it is: already serialized, it is
  sent without a copy. Other memoryviews, casts or slices of the rows go to the driver;
- everything else (bytes input, unknown subtypes, other sequence types) goes straight to the
  driver's code.

Decoding returns what the driver returns (lists) unless ``install(numpy_results=True)``,
which makes numeric vectors come back as NumPy arrays. Arrays of float, double, int and
bigint are views of the received bytes, without a copy, so their dtypes are big-endian as
the protocol writes them (``>f4``, ``>i8``, ...): they compare and compute as any array, but
``arr.dtype == numpy.float32`` is false and some libraries copy or refuse non-native arrays.
(smallint and tinyint elements each carry a length on the wire: they are decoded into new
arrays, in the machine's order.)
``install(numpy_results="native")`` returns arrays in the machine's own byte order instead
(``float32``, ``int64``, ...), at the cost of one copy per vector.

>>> import bulkwire.cql
>>> bulkwire.cql._result_order("native")
'native'
>>> bulkwire.cql._result_order("little")
Traceback (most recent call last):
...
ValueError: numpy_results must be False, True or "native", not 'little'
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Sequence

from ._extras import missing_extra
from ._fork_locks import renew_in_child
from .vectors import VectorCodec

__all__ = ["install", "uninstall", "installed", "load_parquet", "load_arrow"]

_lock = threading.Lock()
renew_in_child(globals(), "_lock")  # a forked child gets a lock of its own
_state: dict[str, Any] = {}

# ndarray dtype kinds the fast path takes per subtype: exactly those for which the driver's
# per-element struct packing gives the same bytes (see tests/test_vector_cql.py).
_ARRAY_KINDS = {
    "float": "fiub",
    "double": "fiub",
    "int": "iu",
    "bigint": "iu",
    "smallint": "iu",
    "tinyint": "iu",
}
# Subtypes whose decoding we reproduce (lists of Python floats/ints).
_LIST_DECODE = frozenset(("float", "double", "int", "bigint", "smallint", "tinyint"))


def _subtype_names(ct: Any) -> dict[Any, str]:
    names = {
        "FloatType": "float", "DoubleType": "double", "Int32Type": "int", "LongType": "bigint",
        "BooleanType": "boolean", "DateType": "timestamp", "TimestampType": "timestamp",
        "UUIDType": "uuid", "TimeUUIDType": "timeuuid", "ShortType": "smallint",
        "ByteType": "tinyint", "SimpleDateType": "date", "TimeType": "time",
        "UTF8Type": "text", "VarcharType": "varchar", "AsciiType": "ascii", "BytesType": "blob",
        "IntegerType": "varint",
    }
    return {getattr(ct, cls): name for cls, name in names.items() if hasattr(ct, cls)}


def _result_order(numpy_results: bool | str) -> str | None:
    """What ``numpy_results`` asks for: None (the driver's lists), "big" (arrays viewing the
    received bytes) or "native" (arrays in the machine's byte order)."""
    if isinstance(numpy_results, str):
        if numpy_results == "native":
            return "native"
        raise ValueError(f'numpy_results must be False, True or "native", not {numpy_results!r}')
    if numpy_results is None or (isinstance(numpy_results, (bool, int)) and numpy_results in (0, 1)):
        return "big" if numpy_results else None
    warnings.warn(f"numpy_results={numpy_results!r} is read as {bool(numpy_results)}; pass "
                  f'False, True or "native"', DeprecationWarning, stacklevel=3)
    return "big" if numpy_results else None


def install(*, numpy_results: bool | str = False) -> None:
    """Patch ``cassandra.cqltypes.VectorType``. Idempotent; a second call only updates
    ``numpy_results``: False (lists, as the driver), True (NumPy arrays viewing the received
    big-endian bytes) or ``"native"`` (NumPy arrays in the machine's byte order, one copy
    each)."""
    order = _result_order(numpy_results)
    try:
        import cassandra.cqltypes as ct
    except ImportError as exc:
        raise missing_extra("CQL driver drop-in", "scylla-driver", "cql") from exc

    with _lock:
        vt = ct.VectorType
        if not _state:
            _state["serialize"] = vt.__dict__["serialize"]
            _state["deserialize"] = vt.__dict__["deserialize"]
        _state["numpy_results"] = order
        names = _subtype_names(ct)
        # (subtype class, size) -> (codec, ndarray kinds it takes, decodes lists) or None
        entries: dict[tuple[Any, Any], Any] = {}
        orig_serialize = _state["serialize"].__func__
        orig_deserialize = _state["deserialize"].__func__

        def entry_for(cls: Any) -> Any:
            key = (cls.subtype, cls.vector_size)
            try:
                return entries[key]
            except KeyError:
                pass
            name = names.get(cls.subtype)
            size = cls.vector_size
            entry = None
            if name is not None and type(size) is int and 1 <= size <= (1 << 24):
                entry = (VectorCodec(name, size, driver_compat=True), _ARRAY_KINDS.get(name, ""),
                         name in _LIST_DECODE)
            entries[key] = entry
            return entry

        def serialize(cls: Any, v: Any, protocol_version: Any) -> Any:
            entry = entry_for(cls)
            if entry is not None:
                # bytes (or a VectorRows row as it is), or None when the input is not one the
                # fast path takes or the codec raised: then the driver's own code runs (and
                # raises its own error)
                out = entry[0]._driver_serialize(v, entry[1])
                if out is not None:
                    return out
            return orig_serialize(cls, v, protocol_version)

        def deserialize(cls: Any, byts: Any, protocol_version: Any) -> Any:
            entry = entry_for(cls)
            if entry is not None and entry[2]:
                order = _state.get("numpy_results")
                out = entry[0]._driver_deserialize(byts, order is not None)
                if out is not None:
                    if order == "native" and not out.dtype.isnative:
                        out = out.astype(out.dtype.newbyteorder("="))
                    return out
            return orig_deserialize(cls, byts, protocol_version)

        serialize.__doc__ = "bulkwire-accelerated VectorType.serialize (bulkwire.cql)"
        deserialize.__doc__ = "bulkwire-accelerated VectorType.deserialize (bulkwire.cql)"
        _state["patched"] = (serialize, deserialize)
        vt.serialize = classmethod(serialize)
        vt.deserialize = classmethod(deserialize)


def uninstall() -> None:
    """Restore the driver's own ``VectorType.serialize``/``deserialize``. Idempotent."""
    import cassandra.cqltypes as ct

    with _lock:
        if not _state:
            return
        ct.VectorType.serialize = _state["serialize"]
        ct.VectorType.deserialize = _state["deserialize"]
        _state.clear()


def installed() -> bool:
    """Whether ``install()`` is in effect."""
    return bool(_state)


def load_parquet(path: Any, hosts: str | Sequence[str], keyspace: str, table: str,
                 **options: Any) -> Any:
    """Deprecated: ``bulkwire.load_parquet(path, target=bulkwire.targets.cql(hosts, keyspace,
    table, ...))``. The connection's options (``consistency``, ``username``, ``password``,
    ``tls``, ``certificate``, ``ca``, ``window``, ``retries``, ``timeout``, ``address_map``,
    ``local_dc``) go to :func:`bulkwire.targets.cql`, the others (``columns``,
    ``batch_rows``, ``take``, ``progress``, ``workers``, ``threads``, ``resume``) to
    :func:`bulkwire.load_parquet`."""
    from ._deprecated import warn_deprecated

    warn_deprecated("bulkwire.cql.load_parquet(path, hosts, keyspace, table, ...)",
                    "bulkwire.load_parquet(path, target=bulkwire.targets.cql(hosts, keyspace, "
                    "table, ...))")
    return _load("load_parquet", path, hosts, keyspace, table, options)


def load_arrow(data: Any, hosts: str | Sequence[str], keyspace: str, table: str,
               **options: Any) -> Any:
    """Deprecated: ``bulkwire.load_arrow(data, target=bulkwire.targets.cql(hosts, keyspace,
    table, ...))``; :func:`load_parquet`'s options but ``workers``, ``resume`` and
    ``take``."""
    from ._deprecated import warn_deprecated
    from .load.entry import _check_arrow_data

    warn_deprecated("bulkwire.cql.load_arrow(data, hosts, keyspace, table, ...)",
                    "bulkwire.load_arrow(data, target=bulkwire.targets.cql(hosts, keyspace, "
                    "table, ...))")
    _check_arrow_data(data, options)
    return _load("load_arrow", data, hosts, keyspace, table, options)


def _load(entry: str, data: Any, hosts: Any, keyspace: str, table: str,
          options: dict) -> Any:
    """The load of the former spelling: the connection's options to the target, the rest to
    the load (an option of neither: ``TypeError`` naming it and ``entry``)."""
    import inspect

    from .load import entry as _entry
    from .load.cql_target import cql

    connection = {name: options.pop(name) for name in list(options)
                  if name in inspect.signature(cql).parameters}
    pipeline = ("columns", "batch_rows", "take", "progress", "workers", "threads", "resume")
    unknown = sorted(set(options) - set(pipeline))
    if unknown:
        raise TypeError(f"{entry}() got an unexpected keyword argument {unknown[0]!r}")
    target = cql(hosts, keyspace, table, **connection)
    if entry == "load_arrow":
        return _entry.load_arrow(data, target, **{k: v for k, v in options.items()
                                                  if k not in ("workers", "resume", "take")})
    return _entry.load_parquet(data, target, **options)
