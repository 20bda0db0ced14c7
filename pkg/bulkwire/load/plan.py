"""The plan of a load: which columns are the id, the fields and the vector, judged against
the Arrow schema before any row is read (:func:`_plan`), and the encoder that turns a record
batch into a batch the writer encodes in C (:class:`_Encoder`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .. import _core
from ..document_options import DEFAULT_BUFFER_SIZE
from ..conventions import BODY_EXCLUDED_KEYS, merge_metadata
from ..encoding import dumps
from .._arrow import _pyarrow
from .datasets import _empty_batch


@dataclass
class _Plan:
    id_column: str
    vector_column: str | None
    fields: list[str]
    read_columns: list[str]


def _check_vector(schema, id_column: str, name: str) -> None:
    """Raises the C encoder's ``TypeError`` when column ``name`` cannot be the vector column
    (or the id column cannot be an id)."""
    _core.encode_batch(_empty_batch(schema, [id_column, name]), id_column, [name],
                       vector_column=name)


def _can_be_vector(schema, id_column: str, name: str) -> bool:
    try:
        _check_vector(schema, id_column, name)
    except (TypeError, ValueError):  # ValueError: a type the Arrow import refuses
        return False
    return True


def _plan(schema, source: str, id_column: str, vector_column: str | None,
          columns: Sequence[str] | None) -> _Plan:
    """Checks the arguments against the file's schema, before any row is read. The columns'
    types are the C encoder's to judge (see :class:`_Encoder`)."""
    names = schema.names

    def need(name: str, what: str) -> None:
        if name not in names:
            raise ValueError(f"{what} {name!r} is not a column of {source} "
                             f"(its columns: {', '.join(names)})")

    def excluded(name: str, what: str) -> None:
        if name == "@metadata":
            raise TypeError(f"{what} '@metadata' of {source} cannot be a document field: a "
                            f"document's @metadata is a mapping, written last from metadata= "
                            f"(with @collection and Raven-Python-Type); leave the column out "
                            f"with columns= (--columns)")
        raise ValueError(f"{what} 'Id' of {source} cannot be a document field: a document body "
                         f"never holds an Id member (its id is the command's Id); use it as the "
                         f"id with id_column='Id' (--id-column Id)")

    need(id_column, "id column")
    explicit_vector = vector_column is not None
    if vector_column is None:
        found = [n for n in names if n != id_column and n not in BODY_EXCLUDED_KEYS
                 and _can_be_vector(schema, id_column, n)]
        if len(found) > 1:
            raise ValueError(f"{source} has several vector columns ({', '.join(found)}): "
                             f"choose one with vector_column= (--vector-column)")
        vector_column = found[0] if found else None
    else:
        need(vector_column, "vector column")
        if vector_column in BODY_EXCLUDED_KEYS:
            excluded(vector_column, "vector column")
        _check_vector(schema, id_column, vector_column)
    if columns is None:
        # every column but the id; an "Id" column is left out, as BulkWriter.store leaves a
        # dict's "Id" member out of its document
        fields = [n for n in names if n != id_column and n != "Id"]
        if "@metadata" in fields:
            excluded("@metadata", "column")
    else:
        fields = list(dict.fromkeys(columns))  # names checked by LoadOptions
        for name in fields:
            need(name, "column")
            if name in BODY_EXCLUDED_KEYS:
                excluded(name, "column")
        if explicit_vector and vector_column not in fields:
            fields.append(vector_column)
    if vector_column not in fields:
        vector_column = None  # found, but not asked for
    read = list(dict.fromkeys([id_column, *fields]))
    return _Plan(id_column, vector_column, fields, read)


def _metadata_json(collection: str, python_type: str | None, metadata: Mapping[str, Any] | None) -> bytes:
    """The ``@metadata`` object, merged as ``BulkWriter.store`` merges it: ``metadata``, then
    ``@collection`` and ``Raven-Python-Type`` where ``metadata`` does not give them."""
    defaults = {"@collection": collection}
    if python_type:
        defaults["Raven-Python-Type"] = python_type
    return dumps(merge_metadata(None, metadata, defaults))


@dataclass
class _Encoder:
    """``_core.prepare_batch`` with the load's arguments. It is also the one judge of the
    columns' types: called on a batch without rows, it raises what it would raise on the
    first batch, before any file is written or request made."""

    plan: _Plan
    id_prefix: str
    metadata: bytes
    float32: str
    #: the writer's buffer size: the text written ahead is cut where the writer would cut it
    buffer_size: int = DEFAULT_BUFFER_SIZE

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any:
        """The batch imported and every row validated (a ``PreparedBatch``): the writer
        encodes it into its own buffers in one call (``_store_prepared``)."""
        return self._prepare(batch, dim, row_base, None)

    def ahead(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any:
        """As calling it, on an encoding thread: the batch's text is written too, without
        the GIL, into buffers of the writers' pool, cut where the writer would cut them,
        which the writer takes over without a copy."""
        return self._prepare(batch, dim, row_base, self.buffer_size)

    def _prepare(self, batch: Any, dim: int, row_base: int, buffer_size: int | None) -> Any:
        plan = self.plan
        return _core.prepare_batch(
            batch, plan.id_column, plan.fields, vector_column=plan.vector_column,
            id_prefix=self.id_prefix, metadata=self.metadata, float32=self.float32, dim=dim,
            row_base=row_base, buffer_size=buffer_size)
