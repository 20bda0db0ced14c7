"""bulkwire: fast, exact, memory-bounded bulk loading of documents and embeddings.

The C core (``bulkwire._core``) does the per-element work; this package composes it.

>>> import bulkwire
>>> bulkwire.dumps({"name": "a", "v": [0.5, 1.0]})
b'{"name": "a", "v": [0.5, 1.0]}'
"""
from ._core import ENTITY, MAX_DEPTH
from .encoding import Encoder, dumps, to_builtins

__all__ = ["ENTITY", "MAX_DEPTH", "Encoder", "dumps", "to_builtins"]
from ._version import __version__  # noqa: E402

# Vectors: the CQL vector codec; the driver drop-in is bulkwire.cql.
from .vectors import VectorCodec, VectorRows  # noqa: E402

__all__ += ["VectorCodec", "VectorRows"]

# What this build has: the optional C libraries and each feature's backend.
from .config import BuildConfig, build_config, show_config  # noqa: E402

__all__ += ["BuildConfig", "build_config", "show_config"]

# Bulk insert; its exceptions, one hierarchy under BulkInsertError: bulkwire.errors
from .bulk import BulkInsert, BulkStats, BulkWriter  # noqa: E402
from .errors import (BulkInsertAborted, BulkInsertError, ConnectError,  # noqa: E402
                     ConnectionLostError, CqlServerError, EarlyResponse, ProtocolError,
                     SchemaMismatchError, ServerError,
                     TLSError, TLSFileError, TransportError, TransportTimeoutError,
                     UnsupportedByServer)

__all__ += ["BulkInsert", "BulkInsertAborted", "BulkInsertError", "BulkStats", "BulkWriter",
            "ConnectError", "ConnectionLostError", "CqlServerError", "EarlyResponse",
            "ProtocolError", "SchemaMismatchError", "ServerError",
            "TLSError", "TLSFileError", "TransportError", "TransportTimeoutError",
            "UnsupportedByServer"]

# Parquet and Arrow sources; pyarrow itself is imported only when they are used.
from .load import LoadResult, load_arrow, load_parquet  # noqa: E402
from .load_options import LoadOptions  # noqa: E402
from .parquet import TableFile, sample_parquet, take  # noqa: E402

from .errors import BulkwireError, MalformedFileError, ResumeStateError, RowError  # noqa: E402

# every exception of an operation that failed is a BulkwireError: bulkwire.errors
__all__ += ["BulkwireError"]
__all__ += ["LoadOptions", "LoadResult", "MalformedFileError", "ResumeStateError", "RowError", "TableFile", "load_arrow",
            "load_parquet", "sample_parquet", "take"]
