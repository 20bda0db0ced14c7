"""The seeded sample Parquet file (:func:`sample_parquet`), shaped like the feature-vectors
dataset. Imported from :mod:`bulkwire.parquet`, where its names are public."""
from __future__ import annotations

import os

import numpy as np

from ._arrow import PathLike, _pyarrow
from ._arrow_arrays import numeric_array


#: Row-group size of :func:`sample_parquet`: ~4 MiB of 1024-dim float32 vectors per group,
#: so a point lookup decodes a few MiB at most and a load streams in small steps.
DEFAULT_ROW_GROUP_ROWS = 1024


def sample_parquet(path: PathLike, rows: int = 10_000, dim: int = 1024, seed: int = 42, *,
                   row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, id_start: int = 0,
                   vector_column: str = "emb", compression: str = "snappy") -> str:
    """Write a seeded sample shaped like the feature-vectors dataset: an int64 ``id``
    (``id_start`` .. ``id_start + rows - 1``) and a ``fixed_size_list<float32>[dim]`` column
    of values uniform in [0, 1) from ``numpy.random.default_rng(seed)``; samples with
    disjoint id ranges (``id_start``) load side by side without replacing each other's
    documents. It is written one
    row group at a time, so memory stays at one row group whatever ``rows`` is. Returns the
    path as a string.
    """
    pa = _pyarrow()
    for name, value in (("rows", rows), ("dim", dim), ("row_group_rows", row_group_rows)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < (0 if name == "rows" else 1):
            raise ValueError(f"{name} must be {'non-negative' if name == 'rows' else 'positive'}, "
                             f"got {value}")
    if isinstance(id_start, bool) or not isinstance(id_start, int):
        raise TypeError(f"id_start must be an int, not {type(id_start).__name__}")
    if not -2**63 <= id_start <= 2**63 - 1 - max(rows - 1, 0):
        raise ValueError(f"id_start={id_start}: the ids id_start .. id_start + rows - 1 must fit "
                         f"an int64")
    rng = np.random.default_rng(seed)
    schema = pa.schema([("id", pa.int64()),
                        (vector_column, pa.list_(pa.float32(), dim))])
    path = os.fspath(path)
    # written under a temporary name and renamed once whole: an interrupted or failed write
    # (whose writer would still close the file with a valid footer) leaves no short sample
    partial = path + ".partial"
    try:
        sink = open(partial, "wb")
    except OSError as exc:  # named by the path the user gave, not the temporary one
        raise type(exc)(exc.errno, exc.strerror, path) from None
    try:
        with sink, pa.parquet.ParquetWriter(sink, schema, compression=compression) as writer:
            if rows == 0:
                writer.write_table(schema.empty_table())
            for done in range(0, rows, row_group_rows):
                n = min(row_group_rows, rows - done)
                ids = numeric_array(pa, pa.int64(),
                                    np.arange(id_start + done, id_start + done + n, dtype=np.int64))
                values = numeric_array(pa, pa.float32(), rng.random(n * dim, dtype=np.float32))
                vectors = pa.FixedSizeListArray.from_arrays(values, dim)
                writer.write_table(pa.Table.from_arrays([ids, vectors], schema=schema),
                                   row_group_size=n)
        os.replace(partial, path)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
    return path
