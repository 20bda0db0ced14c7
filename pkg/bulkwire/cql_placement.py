"""Replica placement of a keyspace and the node each row of a load goes to.

:class:`Replication` is a keyspace's replication as ``system_schema.keyspaces`` stores it
(its class and options). :class:`Placement` computes, for every range of the Murmur3 ring,
the replicas Cassandra places there: SimpleStrategy (the first ``replication_factor``
distinct nodes clockwise), NetworkTopologyStrategy (per data centre, its factor of distinct
nodes clockwise, one per rack first), and LocalStrategy / EverywhereStrategy (every node).
:meth:`Placement.route` then chooses one node per range, the first replica in the local data
centre that is up, and gives a ``_core.CqlRing`` that looks a whole batch's tokens up in C.

>>> nodes = {"a": [0], "b": [100], "c": [200]}
>>> where = {"a": ("dc1", "r1"), "b": ("dc2", "r1"), "c": ("dc1", "r2")}
>>> placement = Placement(nodes, where, Replication.of(
...     {"class": "NetworkTopologyStrategy", "dc1": "2", "dc2": "1"}))
>>> placement.replicas(50)
['b', 'c', 'a']
>>> routes = placement.route("dc1")
>>> [routes.addresses[i] for i in routes.primaries(array.array("q", [50, 150, 250]))]
['c', 'c', 'a']
"""
from __future__ import annotations

import array
import dataclasses
from typing import Any, Mapping, Sequence

from . import _core
from .errors import BulkwireError
from .cql_statements import decode_text_items

#: The strategies whose placement is computed; any other class places as EverywhereStrategy
#: does here (the route is then the first node up clockwise in the local data centre).
STRATEGIES = ("SimpleStrategy", "NetworkTopologyStrategy", "LocalStrategy",
              "EverywhereStrategy")


def decode_text_map(value: bytes) -> dict[str, str]:
    """A CQL ``map<text, text>`` value: [int n], then n pairs of [bytes] UTF-8 key and value.
    ``ValueError`` when the bytes do not hold exactly that.

    >>> decode_text_map(b"\\x00\\x00\\x00\\x01\\x00\\x00\\x00\\x01k\\x00\\x00\\x00\\x02vv")
    {'k': 'vv'}
    """
    items = decode_text_items(value, 2, "map<text, text>")
    return dict(zip(items[::2], items[1::2]))


def _factor(text: str, what: str) -> int:
    """The full replicas of a replication factor: ``N``, or ``N/T`` (N replicas of which T
    transient: N - T full ones)."""
    total, _, transient = text.strip().partition("/")
    try:
        full = int(total) - (int(transient) if transient else 0)
    except ValueError:
        raise ValueError(f"the replication factor {what} is {text!r}, not a number") from None
    if full < 0:
        raise ValueError(f"the replication factor {what} is {text!r}, below 0")
    return full


@dataclasses.dataclass(frozen=True)
class Replication:
    """A keyspace's replication: ``strategy``, the class's short name; ``factors``, the
    replicas per data centre (NetworkTopologyStrategy), or ``{"": n}`` (SimpleStrategy), or
    empty; ``options``, every option as stored (for messages).

    >>> Replication.of({"class": "org.apache.cassandra.locator.SimpleStrategy",
    ...                 "replication_factor": "3"}).factors
    {'': 3}
    """

    strategy: str
    factors: Mapping[str, int]
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, str]) -> "Replication":
        """From the ``replication`` map of ``system_schema.keyspaces`` (``ValueError`` when it
        names no class, or a factor that is not a number)."""
        if "class" not in options:
            raise ValueError(f"the replication {dict(options)} names no class")
        strategy = options["class"].rsplit(".", 1)[-1]
        if strategy == "SimpleStrategy":
            factors = {"": _factor(options.get("replication_factor", "1"), "")}
        elif strategy == "NetworkTopologyStrategy":
            factors = {dc: _factor(rf, f"of {dc}") for dc, rf in options.items()
                       if dc not in ("class", "replication_factor")}
        else:
            factors = {}
        return cls(strategy, factors, tuple(sorted(options.items())))

    def __str__(self) -> str:
        """As CQL writes it: ``{'class': 'NetworkTopologyStrategy', 'dc1': '1'}``."""
        given = dict(self.options)
        items = [("class", given.pop("class", self.strategy))] + sorted(given.items())
        return "{" + ", ".join(f"'{k}': '{v}'" for k, v in items) + "}"


class NoLocalReplica(ValueError, BulkwireError):
    """The local data centre holds no replica of some token, and the consistency is a
    LOCAL_* one: no coordinator there could write it."""


class Placement:
    """The replicas of every range of a ring. ``nodes`` maps each node's address to its
    tokens (a token two nodes claim is the first one's), ``locations`` each address to its
    (data centre, rack), ``replication`` the keyspace's.

    The ring's tokens sorted, the range ending at (and holding) token ``i`` is replicated on
    ``replicas_at[i]``: the nodes met walking clockwise from token ``i``, in the order met."""

    def __init__(self, nodes: Mapping[str, Sequence[int]],
                 locations: Mapping[str, tuple[str | None, str | None]],
                 replication: Replication) -> None:
        self.addresses = list(nodes)
        self.locations = {a: tuple(locations.get(a, (None, None))) for a in self.addresses}
        self.replication = replication
        owned: dict[int, str] = {}
        for address in self.addresses:
            for token in nodes[address]:
                owned.setdefault(int(token), address)
        if not owned:
            raise ValueError("no node owns a token")
        self.tokens = sorted(owned)
        self.owners = [owned[t] for t in self.tokens]
        strategy = replication.strategy
        if strategy == "SimpleStrategy":
            self.replicas_at = self._simple(replication.factors[""])
        elif strategy == "NetworkTopologyStrategy":
            self.replicas_at = self._network(replication.factors)
        else:  # LocalStrategy, EverywhereStrategy: every node holds every row
            self.replicas_at = self._simple(len(self.addresses))

    def _walk(self, i: int) -> Any:
        """The owners met clockwise from token ``i``, each once, in the order met."""
        seen: set[str] = set()
        n = len(self.tokens)
        for j in range(i, i + n):
            owner = self.owners[j % n]
            if owner not in seen:
                seen.add(owner)
                yield owner

    def _simple(self, factor: int) -> list[tuple[str, ...]]:
        count = min(factor, len(set(self.owners)))
        out = []
        for i in range(len(self.tokens)):
            walk = self._walk(i)
            out.append(tuple(next(walk) for _ in range(count)))
        return out

    def _network(self, factors: Mapping[str, int]) -> list[tuple[str, ...]]:
        owning = set(self.owners)
        members: dict[str, set[str]] = {}
        racks: dict[str, set[Any]] = {}
        for address in owning:
            dc, rack = self.locations[address]
            members.setdefault(dc, set()).add(address)
            racks.setdefault(dc, set()).add(rack)
        # per data centre: replicas to place (at most its nodes), and how many may share a
        # rack with one already placed (as many as the racks are too few for)
        wanted = {dc: min(rf, len(members[dc])) for dc, rf in factors.items()
                  if rf > 0 and dc in members}
        out = []
        for i in range(len(self.tokens)):
            left = dict(wanted)
            repeats = {dc: wanted[dc] - len(racks[dc]) for dc in wanted}
            placed: dict[str, set[Any]] = {dc: set() for dc in wanted}
            chosen: list[str] = []
            pending = sum(1 for dc in left if left[dc] > 0)
            for owner in self._walk(i):
                if not pending:
                    break
                dc, rack = self.locations[owner]
                if left.get(dc, 0) <= 0:
                    continue
                if rack in placed[dc]:
                    if repeats[dc] <= 0:
                        continue  # a rack of its own is still to come for the replicas left
                    repeats[dc] -= 1
                placed[dc].add(rack)
                chosen.append(owner)
                left[dc] -= 1
                if not left[dc]:
                    pending -= 1
            out.append(tuple(chosen))
        return out

    def _index(self, token: int) -> int:
        import bisect

        at = bisect.bisect_left(self.tokens, token)
        return at if at < len(self.tokens) else 0

    def replicas(self, token: int) -> list[str]:
        """The replicas of ``token``, in the order met walking clockwise from it."""
        return list(self.replicas_at[self._index(token)])

    def datacenters(self) -> list[str]:
        """The data centres of the nodes, sorted (a node without one left out)."""
        return sorted({dc for dc, _ in self.locations.values() if dc is not None})

    def check_local(self, local_dc: str, local_only: bool, keyspace: str) -> None:
        """``ValueError`` when no node is in ``local_dc`` (naming the data centres there
        are); :class:`NoLocalReplica` when ``local_only`` (a LOCAL_* consistency) and some
        token has no replica in ``local_dc``, naming ``keyspace``, its replication and
        ``local_dc``."""
        if local_dc not in self.datacenters():
            raise ValueError(f"local_dc {local_dc!r} is the data centre of no node; the "
                             f"cluster's data centres are {', '.join(self.datacenters())}")
        if not local_only:
            return
        for replicas in self.replicas_at:
            if not any(self.locations[r][0] == local_dc for r in replicas):
                raise NoLocalReplica(
                    f"keyspace {keyspace} (replication {self.replication}) has no replica "
                    f"in the local data centre {local_dc}: a write at a LOCAL_* consistency "
                    f"cannot succeed there (load at ONE or QUORUM, or give local_dc a data "
                    f"centre that holds replicas)")

    def route(self, local_dc: str | None, down: Sequence[str] = (),
              local_only: bool = False) -> "Routes":
        """The node each range's rows go to, the nodes ``down`` left out: the first replica
        (clockwise) in ``local_dc`` that is up; else, unless ``local_only``, the first
        replica up in another data centre; else the first node up clockwise in
        ``local_dc``, else anywhere (it coordinates the write; the server answers whether
        the consistency can be met). ``ValueError`` when every node is down."""
        out = set(down)
        index = {a: i for i, a in enumerate(self.addresses)}
        chosen = []
        for i, replicas in enumerate(self.replicas_at):
            up = [r for r in replicas if r not in out]
            pick = next((r for r in up if self.locations[r][0] == local_dc), None)
            if pick is None and not local_only and up:
                pick = up[0]
            if pick is None:
                ring = [a for a in self._walk(i) if a not in out]
                pick = next((a for a in ring if self.locations[a][0] == local_dc),
                            ring[0] if ring else None)
            if pick is None:
                raise ValueError("no node of the ring is left")
            chosen.append(index[pick])
        return Routes(self.addresses, self.tokens, chosen)


class Routes:
    """The node each range of the ring goes to (:meth:`Placement.route`): ``addresses``, and
    :meth:`primaries` looking a batch's tokens up in C."""

    def __init__(self, addresses: Sequence[str], tokens: Sequence[int],
                 owners: Sequence[int]) -> None:
        self.addresses = list(addresses)
        self.owners = list(owners)
        #: the addresses some range goes to
        self.used = [self.addresses[i] for i in sorted(set(self.owners))]
        self._ring = _core.CqlRing(list(tokens), self.owners, len(self.addresses), 1)

    def primaries(self, tokens: array.array | bytes) -> array.array:
        """Each token's node, an index into :attr:`addresses` (int32 array)."""
        return array.array("i", self._ring.primaries(tokens))
