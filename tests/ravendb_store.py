"""The official ``ravendb`` client's DocumentStore on a loopback server, for the tests of
``bulkwire.ravendb``: one server, no topology updates, closed at the end."""
from __future__ import annotations

import contextlib

from ravendb import DocumentStore


@contextlib.contextmanager
def store_on(server, configure=None):
    """An initialized DocumentStore of ``server``'s database; ``configure(conventions)``
    first, when given."""
    store = DocumentStore(urls=[server.url], database=server.database)
    store.conventions.disable_topology_updates = True
    store.conventions.disable_topology_cache = True
    if configure is not None:
        configure(store.conventions)
    store.initialize()
    try:
        yield store
    finally:
        store.close()


class Person:
    """An entity as the client stores it: ``Id`` is its identity property (None: the
    store's HiLo gives it one)."""

    def __init__(self, Name=None):
        self.Name = Name
        self.Id = None
