"""The document conventions shared by every way bulkwire writes a document: what a valid id
is, which entity members the document body leaves out, and how ``@metadata`` is merged.
:meth:`bulkwire.BulkWriter.store` (one entity) and :func:`bulkwire.load_parquet` (one row
of a file, encoded in C) both follow these rules, so a row and the equivalent dict give the
same bytes.

They are the official Python client's bulk insert conventions, with one addition: an
entity's own ``@metadata`` mapping is merged in (the official client replaces it).

>>> check_id("users/1")
'users/1'
>>> merge_metadata({"Owner": "me"}, {"@collection": "People"},
...                {"@collection": "Users", "Raven-Python-Type": "app.User"})
{'Owner': 'me', '@collection': 'People', 'Raven-Python-Type': 'app.User'}
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from . import _core

__all__ = ["BODY_EXCLUDED_KEYS", "check_id", "merge_metadata"]

#: Members of an entity that its document body never holds: ``Id`` is the document id (the
#: official client removes the identity property too), and ``@metadata`` is written last,
#: merged by :func:`merge_metadata`.
BODY_EXCLUDED_KEYS: tuple = _core.BODY_EXCLUDED_KEYS


def check_id(value: Any, name: str = "id") -> str:
    """``value`` when it is a valid document id: a ``str`` that is not empty, not only
    whitespace (``str.isspace``) and does not end with ``|`` (the server would make up the
    id). Raises ``TypeError`` or ``ValueError`` naming ``name`` otherwise.

    >>> check_id("  ")
    Traceback (most recent call last):
    ...
    ValueError: id must be a non-empty string, not '  '
    """
    return _core.check_id(value, name)


def merge_metadata(own: Optional[Mapping[str, Any]], metadata: Optional[Mapping[str, Any]],
                   defaults: Mapping[str, Any]) -> dict:
    """The ``@metadata`` of a document, as a new dict (nothing given is modified): the
    entity's own ``@metadata`` mapping, then the ``metadata`` argument (a later key wins),
    then each of ``defaults`` (``@collection``, ``Raven-Python-Type``) where not already
    given. ``None`` stands for "not given"; anything else that is not a mapping raises
    ``TypeError``.

    >>> merge_metadata(None, None, {"@collection": "dicts"})
    {'@collection': 'dicts'}
    """
    return _core.merge_metadata(own, metadata, defaults if type(defaults) is dict else dict(defaults))
