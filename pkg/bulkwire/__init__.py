"""bulkwire: fast, exact, memory-bounded bulk loading of documents and embeddings.

The C core (``bulkwire._core``) does the per-element work; this package composes it.

>>> import bulkwire
>>> bulkwire.dumps({"name": "a", "v": [0.5, 1.0]})
b'{"name": "a", "v": [0.5, 1.0]}'

``import bulkwire`` loads the encoder alone. Every other public name, and every submodule
(``bulkwire.errors``, ``bulkwire.load``, ...), is imported the first time it is used, so a
program that only encodes never imports the bulk insert's HTTP stack, pyarrow or NumPy.
"""
from ._core import ENTITY, MAX_DEPTH
from .encoding import Encoder, dumps, to_builtins
from ._version import __version__

__all__ = ["ENTITY", "MAX_DEPTH", "Encoder", "dumps", "to_builtins"]

# Each public name imported on first use -> the module that defines it.
_LAZY = {
    # Vectors: the CQL vector codec; the driver drop-in is bulkwire.cql.
    "VectorCodec": "vectors", "VectorRows": "vectors",
    # What this build has: the optional C libraries and each feature's backend.
    "BuildConfig": "config", "build_config": "config", "show_config": "config",
    # Bulk insert; a load's exceptions, one hierarchy under LoadError (a RavenDB bulk
    # insert's under its subclass BulkInsertError): bulkwire.errors
    "BulkInsert": "bulk", "BulkStats": "bulk", "BulkWriter": "bulk", "LoadError": "errors",
    "BulkInsertAborted": "errors", "BulkInsertError": "errors", "ConnectError": "errors",
    "ConnectionLostError": "errors", "CqlServerError": "errors", "EarlyResponse": "errors",
    "ProtocolError": "errors", "SchemaMismatchError": "errors", "ServerError": "errors",
    "TLSError": "errors", "TLSFileError": "errors", "TransportError": "errors",
    "TransportTimeoutError": "errors", "UnsupportedByServer": "errors",
    # a bulk insert's cases of the shared classes (also BulkInsertErrors): bulkwire.errors
    "BulkInsertTransportError": "errors", "BulkInsertConnectError": "errors",
    "BulkInsertTLSError": "errors", "BulkInsertTLSFileError": "errors",
    "BulkInsertConnectionLostError": "errors", "BulkInsertTimeoutError": "errors",
    "BulkInsertServerError": "errors", "BulkInsertProtocolError": "errors",
    # every exception of an operation that failed is a BulkwireError: bulkwire.errors
    "BulkwireError": "errors",
    # Parquet and Arrow sources; pyarrow itself is imported only when they are used.
    "LoadOptions": "load_options", "LoadResult": "load", "MalformedFileError": "errors",
    "ResumeStateError": "errors", "RowError": "errors", "TableFile": "parquet",
    "load_arrow": "load", "load_parquet": "load", "sample_parquet": "parquet",
    "take": "parquet",
}
__all__ += list(_LAZY)

_TYPE_CHECKING = False  # typing is not imported at run time
if _TYPE_CHECKING:  # what type checkers and IDEs read; at run time, __getattr__ below
    from .bulk import BulkInsert, BulkStats, BulkWriter
    from .config import BuildConfig, build_config, show_config
    from .errors import (BulkInsertConnectError, BulkInsertConnectionLostError,
                         BulkInsertProtocolError, BulkInsertServerError, BulkInsertTimeoutError,
                         BulkInsertTLSError, BulkInsertTLSFileError, BulkInsertTransportError)
    from .errors import (BulkInsertAborted, BulkInsertError, BulkwireError, ConnectError,
                         ConnectionLostError, CqlServerError, EarlyResponse, LoadError,
                         MalformedFileError, ProtocolError, ResumeStateError, RowError,
                         SchemaMismatchError, ServerError, TLSError, TLSFileError,
                         TransportError, TransportTimeoutError, UnsupportedByServer)
    from .load import LoadResult, load_arrow, load_parquet
    from .load_options import LoadOptions
    from .parquet import TableFile, sample_parquet, take
    from .vectors import VectorCodec, VectorRows


def __getattr__(name: str) -> object:
    """A public name or a submodule, imported the first time it is asked for, then kept
    here (later lookups are plain attribute reads)."""
    import importlib

    module_name = _LAZY.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:  # bulkwire.errors, bulkwire.load, ...: as if an import had brought them in
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
