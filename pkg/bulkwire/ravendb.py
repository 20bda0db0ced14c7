"""The official RavenDB Python client's bulk insert, accelerated by bulkwire.

Existing code keeps its calls; two lines make ``DocumentStore.bulk_insert`` return bulkwire's
operation, with the client's API and behaviour:

>>> import bulkwire.ravendb                                    # doctest: +SKIP
>>> bulkwire.ravendb.install()                                 # doctest: +SKIP
>>> with store.bulk_insert() as bulk:                          # doctest: +SKIP
...     for user in users:
...         bulk.store(user)            # id from the store's HiLo, written back into user

``bulk_insert(store)`` gives the same operation without patching anything, and
``uninstall()`` puts the client's own method back.

The operation takes everything from the store, never from a copy: its urls (the cluster's
topology, failover, the node that issued the operation id), its database, its client
certificate (``certificate_pem_path``) and trust store (``trust_store_path``), its conventions (collection names, the Python type name, the identity property, ids through
the store's HiLo generator, the JSON default hook). Documents are encoded in C by bulkwire's
writer and streamed by its sender (:class:`bulkwire.BulkInsert`); the request body is the
one the client itself sends for the same calls. Errors are the client's exception types:
a failed insert raises ``BulkInsertAbortedException`` (a ``RavenException``), with
bulkwire's error, which names the cause, as ``__cause__`` and ``.cause``.

The ``ravendb`` package itself is needed only by this module.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any, Optional, Tuple

from . import _core
from ._extras import missing_extra
from ._fork_locks import renew_in_child
from .bulk import BulkInsert
from .conventions import check_id, id_problem
from .errors import BulkInsertError

__all__ = ["BulkInsertOperation", "bulk_insert", "install", "uninstall", "installed",
           "CountersBulkInsert", "TimeSeriesBulkInsert", "TypedTimeSeriesBulkInsert",
           "AttachmentsBulkInsert"]

_install_lock = threading.Lock()
renew_in_child(globals(), "_install_lock")  # a forked child gets a lock of its own
_original: Optional[Tuple[bool, Any]] = None  # (defined on DocumentStore itself, the method)


def _client_module(name: str) -> Any:
    """One of the official client's modules (``name`` is its dotted path), imported on first
    need; without the ``ravendb`` package, an ``ImportError`` that says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise missing_extra("RavenDB drop-in", "ravendb", "ravendb") from exc


def _client() -> Any:
    """The client's bulk insert module."""
    return _client_module("ravendb.documents.bulk_insert_operation")


def _aborted(error: BaseException) -> Exception:
    """The client's exception for a bulk insert that failed, with bulkwire's as its cause."""
    aborted = _client_module("ravendb.exceptions.documents.bulkinsert").BulkInsertAbortedException
    exc = aborted(str(error), error)
    exc.__cause__ = error
    return exc


class BulkInsertOperation:
    """A bulk insert into ``database`` of ``store``, with the official client's API (what
    ``DocumentStore.bulk_insert`` returns once :func:`install` ran).

    ``options``: the client's ``BulkInsertOptions``; ``use_compression`` sends the body as
    one gzip stream (bulkwire's fastest gzip backend: the same body, other compressed bytes),
    ``skip_overwrite_if_unchanged`` asks the server to leave documents that did not change
    as they are (the request's ``skipOverwriteIfUnchanged=true``).

    >>> from ravendb import DocumentStore                      # doctest: +SKIP
    >>> store = DocumentStore(urls=["http://127.0.0.1:8080"], database="shop").initialize()  # doctest: +SKIP
    >>> with BulkInsertOperation("shop", store) as bulk:       # doctest: +SKIP
    ...     bulk.store(User("ann"))
    'users/1-A'
    """

    def __init__(self, database: Optional[str] = None, store: Any = None, options: Any = None) -> None:
        if not database or database.isspace():
            raise RuntimeError(
                "Cannot start bulk insert operation without specifying a name of a database to "
                "operate on. Database name can be passed as an argument when bulk insert is being "
                "created or default database can be defined using 'DocumentStore.database' "
                "property.")
        DocumentConventions = _client_module("ravendb.documents.conventions").DocumentConventions
        GenerateEntityIdOnTheClient = _client_module(
            "ravendb.documents.identity.hilo").GenerateEntityIdOnTheClient

        options = options if options is not None else _client().BulkInsertOptions()
        self.use_compression = bool(options.use_compression)
        self._database = database
        self._store = store
        conventions = store.conventions
        self._conventions = conventions
        # ids exactly as the client makes them: the entity's identity property when it holds
        # a str, else the store's generator (HiLo), written back into the entity
        self._ids = GenerateEntityIdOnTheClient(
            conventions, lambda entity: conventions.generate_document_id(database, entity))
        hook = conventions.json_default_method
        # the client's own hook is what bulkwire's entity conventions do in C; any other
        # hook is called by the C walker as json.dumps(default=...) would call it
        default = _core.ENTITY if hook is DocumentConventions.json_default else hook
        self._insert = BulkInsert(
            _servers(store), database, compress=self.use_compression,
            skip_overwrite_if_unchanged=bool(options.skip_overwrite_if_unchanged),
            certificate=store.certificate_pem_path, ca=store.trust_store_path,
            default=default, class_info=self._class_info)
        self._storing = False  # a store() is under way

    # ---- the conventions, once per entity class ----

    def _class_info(self, cls: type) -> tuple:
        """What the C writer needs for entities of ``cls``: no id prefix (ids are always
        given), ``@collection`` and ``Raven-Python-Type`` from the store's conventions, and the
        members the body leaves out (the identity property, ``@metadata``)."""
        conventions = self._conventions
        defaults = {}
        collection = conventions.get_collection_name(cls)
        if collection is not None:
            defaults["@collection"] = collection
        python_type = conventions.get_python_class_name(cls)
        if python_type is not None:
            defaults["Raven-Python-Type"] = python_type
        identity = conventions.get_identity_property_name(cls)
        excluded = ("@metadata",) if identity is None else (identity, "@metadata")
        return "", defaults, excluded

    # ---- the client's API ----

    def __enter__(self) -> "BulkInsertOperation":
        self._insert._check_process()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # as the client does: what was stored is committed, also when the block raised (in
        # a forked child: RuntimeError, and the parent's operation is left alone)
        try:
            self._insert.close()
        except BulkInsertError as error:
            raise _aborted(error) from error

    def store(self, entity: Any, metadata: Any = None) -> str:
        """Store ``entity``; returns its id: ``metadata["@id"]`` when given, else the
        entity's identity property (``Id``) when it holds a str, else a new id from the
        store's generator (HiLo), which is written into the entity's identity property.
        ``metadata`` (a dict or ``MetadataAsDictionary``) goes into the document's
        ``@metadata``, with the collection and the Python type added where not given.

        One call at a time: a store from inside another (a callback run while the store's
        HiLo asks the server for ids) raises ``RuntimeError``, as does any call in a forked
        child; neither asks the server for anything."""
        self._insert._claim()
        if self._storing:
            raise RuntimeError("this bulk insert is in the middle of a store(): a store from "
                               "inside it (a hook, __del__, a gc or weakref callback, a signal "
                               "handler) cannot use the same bulk insert")
        self._storing = True
        try:
            if metadata is not None and "@id" in metadata:
                key = metadata["@id"]
            else:
                key = self._get_id(entity)
            self.store_as(entity, key, metadata)
        finally:
            self._storing = False
        return key

    def store_as(self, entity: Any, key: str, metadata: Any = None) -> None:
        """Store ``entity`` under the id ``key``; ``metadata`` as for :meth:`store`."""
        _check_key(key, "Document id must have a non empty value")
        try:
            self._insert.store(entity, key, metadata)
        except BulkInsertError as error:
            raise _aborted(error) from error

    def abort(self) -> None:
        """Kill the operation on the server; nothing to do before the first store. Leaving
        the ``with`` block afterwards raises ``BulkInsertAbortedException``; ``RuntimeError``
        in a forked child (the operation is the parent's)."""
        self._insert._check_process()
        if self._insert.operation_id is None:
            return  # as the client: nothing was started, nothing to kill, the insert goes on
        try:
            self._insert.abort()
        except BulkInsertError as error:
            raise _aborted(error) from error

    def counters_for(self, id_: str) -> "CountersBulkInsert":
        """The counters of the document ``id_``: ``counters_for(id_).increment(name, delta=1)``."""
        _check_key(id_, "Document id cannot be None or empty.")
        return CountersBulkInsert(self._insert.counters_for(id_))

    def time_series_for(self, id_: str, name: str) -> "TimeSeriesBulkInsert":
        """The time series ``name`` of the document ``id_``, as a context manager:
        ``append_single(timestamp, value, tag=None)``, ``append(timestamp, values, tag=None)``."""
        _check_key(id_, "Document id cannot be None or empty")
        if not name:
            raise ValueError("Time series name cannot be None or empty")
        return TimeSeriesBulkInsert(_client_call(self._insert.time_series_for, id_, name))

    def typed_time_series_for(self, object_type: type, id_: str,
                              name: Optional[str] = None) -> "TypedTimeSeriesBulkInsert":
        """A time series of ``object_type`` entries (the client's ``ITimeSeriesValuesBindable``:
        ``get_time_series_mapping()``); ``name`` defaults to what the store's conventions
        name the type's collection."""
        _check_key(id_, "Document id cannot be None or empty")
        if name is None:
            name = self._conventions.find_collection_name(object_type)
        if not name:
            raise ValueError("Time series name cannot be None or empty")
        return TypedTimeSeriesBulkInsert(
            _client_call(self._insert.typed_time_series_for, object_type, id_, name))

    def attachments_for(self, key: str) -> "AttachmentsBulkInsert":
        """The attachments of the document ``key``:
        ``attachments_for(key).store(name, attachment_bytes, content_type=None)``."""
        _check_key(key, "Document id cannot be None or empty.")
        return AttachmentsBulkInsert(self._insert.attachments_for(key))

    def _get_id(self, entity: Any) -> str:
        ids = self._ids
        found, key = ids.try_get_id_from_instance(entity)
        if found:
            return key
        key = ids.generate_document_key_for_storage(entity)
        ids.try_set_identity(entity, key)
        return key

    # ---- what bulkwire adds ----

    @property
    def stats(self) -> Any:
        """bulkwire's :class:`~bulkwire.BulkStats` of this insert."""
        return self._insert.stats


def _check_key(key: Any, empty_message: str) -> None:
    """The one id rule (:func:`bulkwire.conventions.check_id`) on a document id given to the
    drop-in, refusing with the client's own exception and words where the client has them:
    ``ValueError(empty_message)`` (the calling method's) for None, an empty or a blank id, the
    client's ``RuntimeError`` for an id ending with ``|`` (from every method: the client
    refuses it in ``store`` only, and the server could not use it elsewhere either);
    bulkwire's ``TypeError`` / ``ValueError`` otherwise."""
    if key is None:
        raise ValueError(empty_message)
    if not isinstance(key, str):
        check_id(key)  # TypeError naming the id's type
    problem = id_problem(key)
    if problem in ("empty", "blank"):
        raise ValueError(empty_message)
    if problem == "ends_with_pipe":
        raise RuntimeError(f"Document ids cannot end with '|', but was called with {key}")
    if problem is not None:
        check_id(key)  # bulkwire's ValueError, naming the problem


def _client_call(method: Any, *args: Any) -> Any:
    """``method(*args)``, a failed insert raised as the client's exception."""
    try:
        return method(*args)
    except BulkInsertError as error:
        raise _aborted(error) from error


class CountersBulkInsert:
    """The counters of one document (``BulkInsertOperation.counters_for``)."""

    __slots__ = ("_counters",)

    def __init__(self, counters: Any) -> None:
        self._counters = counters

    def increment(self, name: str, delta: int = 1) -> None:
        """Add ``delta`` to the counter ``name``."""
        _client_call(self._counters.increment, name, delta)


class TimeSeriesBulkInsert:
    """Appends to one time series of one document, as a context manager; while it is open,
    the bulk insert takes nothing else (``RuntimeError``, as with the client)."""

    def __init__(self, series: Any) -> None:
        self._series = series

    def append_single(self, timestamp: Any, value: Any, tag: Optional[str] = None) -> None:
        """Append one entry of one value."""
        _client_call(self._series.append_single, timestamp, value, tag)

    def append(self, timestamp: Any, values: Any, tag: Optional[str] = None) -> None:
        """Append one entry of several values."""
        _client_call(self._series.append, timestamp, values, tag)

    def __enter__(self) -> "TimeSeriesBulkInsert":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _client_call(self._series.close)


class TypedTimeSeriesBulkInsert(TimeSeriesBulkInsert):
    """Appends ``object_type`` entries to one time series of one document."""

    def append_single(self, timestamp: Any, value: Any, tag: Optional[str] = None) -> None:
        """Append one entry: the values of ``value``, an ``object_type`` object."""
        _client_call(self._series.append_single, timestamp, value, tag)

    def append_entry(self, entry: Any) -> None:
        """Append the client's ``TypedTimeSeriesEntry``."""
        _client_call(self._series.append_entry, entry)


class AttachmentsBulkInsert:
    """The attachments of one document (``BulkInsertOperation.attachments_for``)."""

    __slots__ = ("_attachments",)

    def __init__(self, attachments: Any) -> None:
        self._attachments = attachments

    def store(self, name: str, attachment_bytes: bytes, content_type: Optional[str] = None) -> None:
        """Store ``attachment_bytes`` as the attachment ``name``."""
        _client_call(self._attachments.store, name, attachment_bytes, content_type)

    def store_with_parameters(self, parameters: Any) -> None:
        """The client's ``StoreAttachmentParameters`` (remote attachments are not supported)."""
        if getattr(parameters, "remote_parameters", None) is not None:
            raise ValueError("remote attachments (remote_parameters) are not supported by "
                             "bulkwire's bulk insert")
        self.store(parameters.name, parameters.stream, parameters.content_type)


def _servers(store: Any) -> Any:
    """The store's urls as :class:`bulkwire.BulkInsert` takes them: a cluster's entry points
    (a list: the topology is asked of the first that answers, the insert goes to the node
    that issued its operation id), or the one server to talk to when the store asks no
    topology (``conventions.disable_topology_updates`` with a single url)."""
    urls = list(store.urls or ())  # judged by bulkwire.urls, as every URL is
    if not urls:
        raise ValueError("Document URLs cannot be empty.")
    if len(urls) == 1 and store.conventions.disable_topology_updates:
        return urls[0]
    return urls


def bulk_insert(store: Any, database: Optional[str] = None, options: Any = None) -> BulkInsertOperation:
    """bulkwire's bulk insert into ``database`` (default: the store's) of an initialized
    ``DocumentStore``, with the client's API; nothing is patched.

    >>> with bulkwire.ravendb.bulk_insert(store) as bulk:      # doctest: +SKIP
    ...     bulk.store({"Name": "a"})
    'dicts/1-A'
    """
    store.assert_initialized()
    return BulkInsertOperation(store.get_effective_database(database), store, options)


def _patched_bulk_insert(self: Any, database_name: Optional[str] = None,
                         options: Any = None) -> BulkInsertOperation:
    return bulk_insert(self, database_name, options)


def install() -> None:
    """Make ``DocumentStore.bulk_insert`` return bulkwire's operation, for every store.
    Installing again changes nothing; :func:`uninstall` restores the client's own method.

    >>> bulkwire.ravendb.install()                             # doctest: +SKIP
    """
    global _original
    DocumentStore = _client_module("ravendb.documents.store.definition").DocumentStore

    with _install_lock:
        if _original is not None:
            return
        own = "bulk_insert" in vars(DocumentStore)
        _original = (own, vars(DocumentStore)["bulk_insert"] if own else None)
        _patched_bulk_insert.__doc__ = DocumentStore.bulk_insert.__doc__
        DocumentStore.bulk_insert = _patched_bulk_insert


def uninstall() -> None:
    """Put the client's own ``DocumentStore.bulk_insert`` back, exactly as it was; nothing to
    do when not installed.

    >>> bulkwire.ravendb.uninstall()                           # doctest: +SKIP
    """
    global _original
    DocumentStore = _client_module("ravendb.documents.store.definition").DocumentStore

    with _install_lock:
        if _original is None:
            return
        own, method = _original
        if own:
            DocumentStore.bulk_insert = method
        else:
            del DocumentStore.bulk_insert
        _original = None


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _original is not None
