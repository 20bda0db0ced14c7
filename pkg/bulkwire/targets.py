"""Where a load goes, as a value: one constructor per kind of target, and the registry of the
kinds by name.

Each constructor judges its arguments at once and returns a frozen, picklable description
(a worker process receives it), which :func:`bulkwire.load_parquet` and
:func:`bulkwire.load_arrow` take as ``target``. A description holds the options of its kind,
their defaults written once, in the constructor's signature; an option the kind does not
read is a ``TypeError`` naming the option and the kind.

- :func:`ravendb`: a RavenDB database (bulk insert), with the document options.
- :func:`request_file`: the bulk insert's exact request body, written to a file.
- :func:`cql`: a Cassandra or Scylla table (prepared INSERTs).

and every other kind of :data:`KINDS`, each an attribute of this module by its name.

>>> from bulkwire import targets
>>> {"ravendb", "request_file", "cql"} <= set(targets.KINDS)
True
>>> [option.name for option in targets.options("request_file")][:3]
['out', 'collection', 'id_column']
>>> targets.cql("db1", "ks", "t", compress="gzip")
Traceback (most recent call last):
...
TypeError: compress is not an option of the cql target (its options: hosts, keyspace, table, consistency, username, password, tls, certificate, ca, window, retries, timeout, address_map, local_dc, ttl, timestamp, ttl_column, timestamp_column, nulls)

A front end that has only strings (a command line, a Spark data source's options) lists a
kind's options with :func:`options` and builds its description with :func:`make`:

>>> targets.make("cql", hosts="db1,db2:9043", keyspace="ks", table="t", window="4").window
4

Adding a kind: a module of its own that defines a constructor named as the kind (decorated
with :func:`bulkwire.load.interface.kind_constructor`) returning a description of
:class:`bulkwire.load.interface.TargetDescription`, and one line in :data:`_KIND_MODULES`.
"""
from __future__ import annotations

import collections.abc
import importlib
import inspect
import json
import typing
from typing import Any, Callable, List, NamedTuple

__all__ = ["KINDS", "Option", "REQUIRED", "make", "options"]

#: The module that defines each kind's constructor (a function named as the kind).
_KIND_MODULES = {
    "ravendb": "bulkwire.load.ravendb_target",
    "request_file": "bulkwire.load.ravendb_target",
    "cql": "bulkwire.load.cql_target",
    "jsonl": "bulkwire.load.jsonl_target",
}



class _Kinds(collections.abc.Mapping):
    """Each kind's constructor by name, its module imported the first time the kind is
    asked for: a load into a file does not import the CQL loader."""

    def __getitem__(self, kind: str) -> Callable[..., Any]:
        return getattr(importlib.import_module(_KIND_MODULES[kind]), kind)

    def __iter__(self):
        return iter(_KIND_MODULES)

    def __len__(self) -> int:
        return len(_KIND_MODULES)

    def __repr__(self) -> str:
        return f"KINDS({', '.join(_KIND_MODULES)})"


#: Each kind's constructor, by name: what a front end (the command line, a data source of
#: another engine) lists and builds targets from.
KINDS: collections.abc.Mapping = _Kinds()


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_KIND_MODULES))

#: The default of an option that has none (it must be given).
REQUIRED = inspect.Parameter.empty


class Option(NamedTuple):
    """An option of a kind: its ``name``, its ``default`` (:data:`REQUIRED`: none) and its
    ``annotation`` (the type it takes)."""

    name: str
    default: Any
    annotation: Any


def _constructor(kind: str) -> Callable[..., Any]:
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown target kind {kind!r} (the kinds: "
                         f"{', '.join(sorted(KINDS))})") from None


def options(kind: str) -> List[Option]:
    """The options of the kind named ``kind``, in the constructor's order: the required ones
    first (their default :data:`REQUIRED`). ``ValueError`` naming the kinds for an unknown
    one.

    >>> from bulkwire import targets
    >>> [o for o in targets.options("cql") if o.name == "window"]  # doctest: +ELLIPSIS
    [Option(name='window', default=2, annotation=<class 'int'>)]
    """
    constructor = _constructor(kind)
    hints = typing.get_type_hints(inspect.unwrap(constructor))
    return [Option(name, parameter.default, hints.get(name, Any))
            for name, parameter in inspect.signature(constructor).parameters.items()]


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _from_text(name: str, text: str, annotation: Any) -> Any:
    """``text`` (option ``name``'s value as a front end has it) as the type ``annotation``
    says: an int, a float, a bool (``true``/``false``, ``yes``/``no``, ``1``/``0``), None
    (``none`` or empty, where the option takes None), a mapping (JSON), a list (comma
    separated), else the text itself."""
    args = set(typing.get_args(annotation)) or {annotation}
    if type(None) in args and text.strip().lower() in ("", "none"):
        return None
    if int in args and bool not in args and float not in args:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name} must be an int, not {text!r}") from None
    if float in args:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{name} must be a number, not {text!r}") from None
    if bool in args and str not in args:
        word = text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ValueError(f"{name} must be true or false, not {text!r}")
    origins = [origin for origin in map(typing.get_origin, args) if isinstance(origin, type)]
    if any(issubclass(origin, collections.abc.Mapping) for origin in origins):
        try:
            return json.loads(text)
        except ValueError:
            raise ValueError(f"{name} must be a JSON object, not {text!r}") from None
    if any(issubclass(origin, collections.abc.Sequence) for origin in origins):
        parts = [part.strip() for part in text.split(",")]
        return parts[0] if len(parts) == 1 else parts
    return text


def make(kind: str, **values: Any) -> Any:
    """The description of the kind named ``kind``, from ``values``: each value that is a
    ``str`` is read as its option's type says (:func:`options`: an int from ``"4"``, a list
    from ``"a,b"``, a mapping from JSON, ...), any other as it is; then the kind's
    constructor judges them all, as if called with them.

    >>> from bulkwire import targets
    >>> targets.make("request_file", out="x.bulk.json", compress="zstd").compress
    'zstd'
    """
    constructor = _constructor(kind)
    annotations = {o.name: o.annotation for o in options(kind)}
    converted = {name: (_from_text(name, value, annotations[name])
                        if isinstance(value, str) and name in annotations else value)
                 for name, value in values.items()}
    return constructor(**converted)


def refuse_options(target: Any, names: Any) -> None:
    """A ``TypeError`` naming the first of ``names`` (options a load or a sink was given
    besides ``target``), when there is one: an option of the target's kind belongs to the
    target ("give it to bulkwire.targets.<kind>(...)"), any other is not the kind's."""
    names = list(names)
    if not names:
        return
    name, kind = names[0], getattr(target, "kind", type(target).__name__)
    constructor = KINDS.get(kind)
    if constructor is not None and name in inspect.signature(constructor).parameters:
        raise TypeError(f"{name} is an option of the {kind} target, not of the load: give it "
                        f"to bulkwire.targets.{kind}(..., {name}=...)")
    raise TypeError(f"{name} is not an option of the {kind} target")


def __getattr__(name: str) -> Any:
    """``targets.ravendb``, ``targets.cql``, ...: a kind's constructor, by the kind's name
    (:data:`KINDS`: its module imported on first use)."""
    try:
        return KINDS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
