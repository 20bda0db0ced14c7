"""Parquet / Arrow IPC -> a target (:mod:`bulkwire.targets`): :func:`load_parquet`,
:func:`load_arrow` and the ``bulkwire load`` command.

The file is read batch by batch with pyarrow; each record batch is imported and validated
in C (``bulkwire._core.prepare_batch``) through the Arrow PyCapsule interface, and handed to
a :class:`bulkwire.BulkWriter` in one call, which writes one bulk insert command per row
straight from the Arrow buffers into its own buffers — no Python object per row or per
float, no copy of the commands. The writer frames the body; its pieces go either to a file holding the exact request body (replayable
to a server later) or, with ``url``, to the server through :class:`bulkwire.BulkInsert`.

The package's modules, along the path of a load:

- :mod:`bulkwire.load.entry`: :func:`load_parquet`, :func:`load_arrow`; the arguments judged
  and the parts composed (:class:`LoadResult` and the run report in ``_result``, progress in
  ``_progress``, the sending half in ``_sending``).
- :mod:`bulkwire.load.plan`: the schema judged, the plan of columns, the encoder.
- :mod:`bulkwire.load.datasets`: files, directories and globs; footers; units of work;
  record batches read from files or from Arrow data.
- :mod:`bulkwire.load.pipeline`: batches encoded in order, stored into a target as one
  request; units sent.
- :mod:`bulkwire.load.interface`: what the pipeline knows of a target (the protocols).
- :mod:`bulkwire.load.mapping`: columns loaded under the target's names, constant columns.
- :mod:`bulkwire.load.ravendb_target`: the RavenDB server and request file targets
  (:mod:`bulkwire.load.targets`: their former module, with the protocols).
- :mod:`bulkwire.load.jsonl_target`: a JSON Lines file.
- :mod:`bulkwire.load.cql_target`: a CQL table: its description and constructor (its
  options judged in ``_cql_options``, its plan and encoder in ``_cql_rows``, its session in
  ``_cql_session``, ScyllaDB's shards in :mod:`bulkwire.load.cql_shards`).
- :mod:`bulkwire.load.resume`: the resume state file.
- :mod:`bulkwire.load.workers`: worker processes.
"""
from __future__ import annotations

from .datasets import DATA_SUFFIXES, RESUME_UNIT_ROWS
from .entry import LoadResult, load_arrow, load_parquet
from .resume import RESUME_VERSION
from .._deprecated import renamed_module_attributes
from ..load_options import RENAMED_CONSTANTS
from ..document_options import DEFAULT_BUFFER_SIZE
from .ravendb_target import default_out

__all__ = ["DATA_SUFFIXES", "DEFAULT_BUFFER_SIZE", "LoadResult", "RESUME_UNIT_ROWS",
           "RESUME_VERSION", "default_out", "load_arrow", "load_parquet"]

__getattr__ = renamed_module_attributes(__name__, RENAMED_CONSTANTS)
