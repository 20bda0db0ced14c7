"""What the fuzz targets and the tests both ask of the references: NaN-aware equality of
decoded JSON, and the scylla-driver's own vector type for a CQL subtype (importable without
atheris)."""
from __future__ import annotations

import math

# the driver's marshal class for each CQL subtype bulkwire supports
DRIVER_NAMES = {
    "float": "FloatType", "double": "DoubleType", "int": "Int32Type", "bigint": "LongType",
    "boolean": "BooleanType", "timestamp": "TimestampType", "uuid": "UUIDType",
    "timeuuid": "TimeUUIDType", "smallint": "ShortType", "tinyint": "ByteType",
    "date": "SimpleDateType", "time": "TimeType", "text": "UTF8Type", "varchar": "VarcharType",
    "ascii": "AsciiType", "blob": "BytesType", "varint": "IntegerType",
}

_driver_types: dict[tuple[str, int], object] = {}


def driver_vector_type(subtype: str, dim: int):
    """The scylla-driver's ``VectorType`` for ``vector<subtype, dim>`` (cached)."""
    key = (subtype, dim)
    if key not in _driver_types:
        import cassandra.cqltypes as ct

        _driver_types[key] = ct.lookup_casstype(
            "org.apache.cassandra.db.marshal.VectorType("
            f"org.apache.cassandra.db.marshal.{DRIVER_NAMES[subtype]}, {dim})")
    return _driver_types[key]


def same(a, b) -> bool:
    """Equal decoded JSON values, with NaN equal to NaN and dict member order significant."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b
