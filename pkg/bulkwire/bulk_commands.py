"""Counters, time series and attachments in a bulk insert, with the official client's names
and call shapes: ``counters_for(id).increment(name, delta=1)``,
``time_series_for(id, name)`` (a context manager) with ``append_single(timestamp, value,
tag=None)`` and ``append(timestamp, values, tag=None)``, ``typed_time_series_for(object_type,
id, name=None)``, and ``attachments_for(id).store(name, attachment_bytes, content_type=None)``.

The objects returned here only remember their document id (and series name); every command
is framed by the writer they came from (:class:`bulkwire.BulkWriter` or
:class:`bulkwire.BulkInsert`), in C, into the same buffers as the documents.
"""
from __future__ import annotations

import weakref
from datetime import datetime
from typing import Any, Optional, Sequence, Tuple

from . import _core
from .conventions import collection_name

__all__ = ["CountersBulkInsert", "TimeSeriesBulkInsert", "TypedTimeSeriesBulkInsert",
           "AttachmentsBulkInsert"]


def _check_document_id(id: Any) -> str:
    """``id`` when the one id rule (:func:`bulkwire.conventions.check_id`) accepts it."""
    return _core.check_id(id, "id")


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} must not be empty")
    return name


class CountersBulkInsert:
    """The counters of one document in a bulk insert.

    >>> from bulkwire import BulkWriter
    >>> w = BulkWriter()
    >>> w.counters_for("users/1").increment("likes", 3)
    >>> w.close()
    >>> b"".join(bytes(piece) for piece in w.pieces())
    b'[{"Id":"users/1","Type":"Counters","Counters":{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"likes","Delta":3}]}}]'
    """

    __slots__ = ("_sink", "_id")

    def __init__(self, sink: Any, id: str) -> None:
        self._sink = sink
        self._id = _check_document_id(id)

    def increment(self, name: str, delta: int = 1) -> None:
        """Add ``delta`` (an int within 64 bits, negative to decrement) to the counter
        ``name`` of the document. Increments of one document that follow each other go into
        one command (at most 1024 per command)."""
        self._sink._increment(self._id, name, delta)


class TimeSeriesBulkInsert:
    """Appends to one time series of one document, as a context manager: while it is open
    the bulk insert takes nothing else (documents, counters, attachments, other series).

    ``timestamp`` is a ``datetime`` (naive ones are UTC), sent as Unix milliseconds;
    ``values`` are ints or floats (finite; ``None`` is sent as ``null``); ``tag`` a str.

    >>> from datetime import datetime, timezone
    >>> from bulkwire import BulkWriter
    >>> w = BulkWriter()
    >>> with w.time_series_for("users/1", "Heartrate") as ts:
    ...     ts.append_single(datetime(2024, 1, 1, tzinfo=timezone.utc), 72.5, "watch")
    >>> w.close()
    >>> b"".join(bytes(piece) for piece in w.pieces())
    b'[{"Id":"users/1","Type":"TimeSeriesBulkInsert","TimeSeries":{"Name":"Heartrate","TimeFormat":"UnixTimeInMs","Appends":[[1704067200000,1,72.5,"watch"]]}}]'
    """

    def __init__(self, sink: Any, id: str, name: str) -> None:
        self._sink = sink
        self._id = _check_document_id(id)
        self._name = _check_name(name, "name")
        self._open = True
        sink._series_begin(self, self._id, self._name)

    def append_single(self, timestamp: datetime, value: Any, tag: Optional[str] = None) -> None:
        """Append one entry of one value."""
        self._append(timestamp, (value,), tag)

    def append(self, timestamp: datetime, values: Sequence[Any], tag: Optional[str] = None) -> None:
        """Append one entry of several values (a list or tuple)."""
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"values must be a list or tuple, not {type(values).__name__}")
        self._append(timestamp, values, tag)

    def _append(self, timestamp: Any, values: Any, tag: Any) -> None:
        if not self._open:
            raise ValueError(f"append to the time series {self._name!r} of {self._id!r} after "
                             "it was closed")
        self._sink._series_append(self, timestamp, values, tag)

    def close(self) -> None:
        """End the series' command; the bulk insert takes other commands again. Closing
        twice does nothing."""
        if self._open:
            self._sink._series_end(self)
            self._open = False

    def __enter__(self) -> "TimeSeriesBulkInsert":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()


# per class, weakly: a class (and what its methods' globals hold) must not outlive its use
_MAPPINGS: "weakref.WeakKeyDictionary[type, Tuple[str, ...]]" = weakref.WeakKeyDictionary()


def _value_fields(object_type: type, value: Any) -> Tuple[str, ...]:
    """The attribute names of a typed series' values, in order, from
    ``get_time_series_mapping()`` (``{index: (attribute, label)}``, indexes 0..n-1)."""
    fields = _MAPPINGS.get(object_type)
    if fields is None:
        get_mapping = getattr(value, "get_time_series_mapping", None)
        if get_mapping is None:
            raise TypeError(f"{object_type.__name__} has no get_time_series_mapping(): it cannot "
                            "give the values of a typed time series")
        mapping = get_mapping()
        if not isinstance(mapping, dict) or not mapping or \
                sorted(mapping) != list(range(len(mapping))):
            raise ValueError(f"the time series mapping of {object_type.__name__} must be a dict "
                             "with the keys 0, 1, ... n-1")
        fields = tuple(mapping[i][0] for i in range(len(mapping)))
        _MAPPINGS[object_type] = fields
    return fields


class TypedTimeSeriesBulkInsert(TimeSeriesBulkInsert):
    """A time series whose entries are objects of ``object_type``: a class with
    ``get_time_series_mapping()`` returning ``{index: (attribute, label)}``, as the official
    client's ``ITimeSeriesValuesBindable``. The series' name defaults to the collection name
    of ``object_type``.

    >>> from datetime import datetime
    >>> from bulkwire import BulkWriter
    >>> class Pulse:
    ...     def __init__(self, rate=None):
    ...         self.rate = rate
    ...     def get_time_series_mapping(self):
    ...         return {0: ("rate", None)}
    >>> w = BulkWriter()
    >>> with w.typed_time_series_for(Pulse, "users/1") as ts:
    ...     ts.append_single(datetime(2024, 1, 1), Pulse(61.0))
    >>> w.close()
    >>> b"".join(bytes(piece) for piece in w.pieces())
    b'[{"Id":"users/1","Type":"TimeSeriesBulkInsert","TimeSeries":{"Name":"Pulses","TimeFormat":"UnixTimeInMs","Appends":[[1704067200000,1,61.0]]}}]'
    """

    def __init__(self, sink: Any, object_type: type, id: str, name: Optional[str] = None) -> None:
        if not isinstance(object_type, type):
            raise TypeError(f"object_type must be a class, not {type(object_type).__name__}")
        if name is None:
            name = collection_name(object_type)
        self._object_type = object_type
        super().__init__(sink, id, name)

    def append_single(self, timestamp: datetime, value: Any, tag: Optional[str] = None) -> None:
        """Append one entry: the values are ``value``'s mapped attributes."""
        object_type = self._object_type
        if not isinstance(value, object_type):
            raise TypeError(f"value must be a {object_type.__name__}, not {type(value).__name__}")
        fields = _value_fields(object_type, value)
        try:
            attributes = vars(value)
            values = tuple(attributes[f] for f in fields)
        except (TypeError, KeyError) as exc:
            raise ValueError(f"value has no attribute {exc} of its time series mapping") from None
        self._append(timestamp, values, tag)

    def append_entry(self, entry: Any) -> None:
        """Append an entry object with ``timestamp``, ``value`` and ``tag`` attributes (such
        as the official client's ``TypedTimeSeriesEntry``)."""
        self.append_single(entry.timestamp, entry.value, entry.tag)

    def append(self, timestamp: datetime, values: Sequence[Any], tag: Optional[str] = None) -> None:
        raise TypeError("a typed time series takes objects: use append_single(timestamp, value)")


class AttachmentsBulkInsert:
    """The attachments of one document in a bulk insert. Each attachment is one command
    followed by its raw bytes.

    >>> from bulkwire import BulkWriter
    >>> w = BulkWriter()
    >>> w.attachments_for("users/1").store("photo.png", b"\\x89PNG", "image/png")
    >>> w.close()
    >>> b"".join(bytes(piece) for piece in w.pieces())
    b'[{"Id":"users/1","Type":"AttachmentPUT","Name":"photo.png","ContentType":"image/png","ContentLength":4}\\x89PNG]'
    """

    __slots__ = ("_sink", "_id")

    def __init__(self, sink: Any, id: str) -> None:
        self._sink = sink
        self._id = _check_document_id(id)

    def store(self, name: str, attachment_bytes: Any, content_type: Optional[str] = None) -> None:
        """Store ``attachment_bytes`` (any bytes-like object; ``bytes`` of at least
        ``buffer_size`` are sent as they are, others copied) as the attachment ``name``."""
        if isinstance(name, str) and (not name or name.isspace()):
            raise ValueError("name must not be empty or whitespace")
        self._sink._attachment(self._id, name, attachment_bytes, content_type)
