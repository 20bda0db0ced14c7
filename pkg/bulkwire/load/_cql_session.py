"""The CQL target's session: one connection per node (and per shard of a ScyllaDB node), a
batch's rows split by the node (and shard) each goes to and sent in parallel, a node found
down left out and its rows sent to the next replica, the rows of a failure named.
"""
from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from .. import _core
from ..cql_statements import Prepared
from ..errors import (ConnectError, ConnectionLostError, CqlServerError, ServerError, TLSError,
                      TransportTimeoutError, _name_source_rows)
from ._cql_options import LOCAL_LEVELS, parse_host
from .cql_shards import ShardRouter


class _CqlSession:
    """One session into the table: the ring and the keyspace's replica placement the load's
    plan read (:class:`_Ring`; read here for a description no plan was made with), one
    connection per node opened when a row first goes to it (the statement prepared
    there), each batch's rows sent to their nodes in parallel (each row to the first replica
    of its token in the local data centre: :meth:`CqlDescription.placement`,
    :meth:`~bulkwire.cql_placement.Placement.route`); :meth:`store` returns once every row
    was acknowledged. A node found down is left out of the session (:meth:`store`)."""

    def __init__(self, target: Any) -> None:  # a CqlDescription
        self.target = target
        ring = getattr(target, "_ring", None)  # read by the load's plan
        if ring is None:
            conn, contact = target.contact()
            with conn:
                ring = target.read_ring(conn, contact)
        self.placement, self.local_dc, self.contact = ring.placement, ring.local_dc, ring.contact
        offered = ring.supported  # the cluster's extensions (SUPPORTED)
        #: the host_id of every node the ring was read with (a connection must reach one)
        self.members = ring.members
        #: (host, port) of each node, as it is reached; the placement names it HOST:PORT
        self.nodes = [parse_host(name) for name in self.placement.addresses]
        self.index = {name: i for i, name in enumerate(self.placement.addresses)}
        self.local_only = target.consistency in LOCAL_LEVELS
        self.dead: set[str] = set()
        self.live = self.placement.route(self.local_dc, (), self.local_only)
        #: the connections by (node, shard), and the tablets learned (ScyllaDB)
        self.router = ShardRouter(self._open, target.tls is not None, {
            host_id: self.index[address] for host_id, address in ring.hosts
            if address in self.index}, self._usable, offered)
        self.prepared: tuple[bytes, Sequence[str]] | None = None
        #: every connection of the session watches it: abort() ends each wait at once, in
        #: any thread, those of connections still being made or preparing included
        self.cancel = _core.CqlCancel()
        self.lock = threading.Lock()
        # a job per node, or per shard of a ScyllaDB node
        self.pool = ThreadPoolExecutor(min(64, 8 * len(self.nodes)),
                                       thread_name_prefix="bulkwire-cql")
        self.body_bytes = self.wire_bytes = 0
        self.retries = 0
        #: of the retries, those after an "overloaded" answer
        self.overloaded = 0

    #: with rejected rows (``max_errors``), called with the batch's row a node refused and
    #: why, before the batch's other rows go on; None: a refused row fails the load
    on_refused: Any = None

    def _open(self, node: int, local_port: int = 0, port: int | None = None) -> Any:
        """A new connection to ``node`` (at ``port``, else where it is reached), identified
        and the statement prepared there."""
        assert self.prepared is not None
        prepared_id, names = self.prepared
        host, reached_port = self.nodes[node]
        conn = self.target.connect(host, reached_port if port is None else port,
                                   cancel=self.cancel, local_port=local_port,
                                   tablets_routing=True)
        try:
            self._identify(conn)
            # the statement's markers of USING TTL ? / TIMESTAMP ? are not columns
            prepared = self.target.prepare(conn, names[:len(names) - self.target.markers()])
            if prepared.id != prepared_id:
                raise ServerError(f"{conn.peer} prepared the INSERT as another statement "
                                  f"(the table changed during the load?)")
        except BaseException:
            conn.close()
            raise
        return conn

    def _usable(self, node: int) -> bool:
        """Whether rows may go to ``node``: alive, and in the local data centre (when
        one is known)."""
        address = self.placement.addresses[node]
        return address not in self.dead and (
            self.local_dc is None or self.placement.locations[address][0] == self.local_dc)

    def _conn(self, node: int, prepared_id: bytes, names: Sequence[str],
              shard: int = -1) -> Any:
        """The connection for ``node``'s rows of ``shard`` (-1: its first connection)."""
        if self.prepared is None:
            self.prepared = (prepared_id, names)
        return self.router.get(node, shard)

    def _identify(self, conn: Any) -> None:
        """Checks that ``conn`` reached a node of the ring (its ``host_id``, which stays with
        a node whatever its address): an address can come to answer as another node (one
        that left or restarted elsewhere, its address taken by another), of this cluster or
        of another. ``ConnectError`` otherwise: the node the ring names is not there."""
        if not self.members:
            return
        rows = self.target.query(conn, "SELECT host_id FROM system.local")["rows"]
        cell = rows[0][0] if len(rows) == 1 and rows[0] else None
        host_id = uuid.UUID(bytes=cell) if cell is not None and len(cell) == 16 else None
        if host_id not in self.members:
            raise ConnectError(f"{conn.peer}: answers as node {host_id}, which is not a node "
                               f"of the cluster {self.contact} lists (its address taken by "
                               f"another node?): not loaded there")

    def _run(self, job: tuple[int, int], encoded: list, rows: Any) -> tuple[int, int]:
        bodies, ends, tokens, _, p = encoded
        node, shard = job
        conn = self._conn(node, p.id, p.names, shard)
        sharding = self.router.sharding.get(node)
        if shard == -1 and sharding is not None and tokens:
            # the node's first connection said now that it shards: its rows by shard
            return self._run_by_shard(node, sharding, encoded, rows)
        return self._send(conn, bodies, ends, rows)

    def _send(self, conn: Any, bodies: Any, ends: Any, rows: Any) -> tuple[int, int]:
        with self.router.using(conn):  # a connection may serve several shards' rows
            before = conn.overloaded
            try:
                return conn.run_packed(_core.CQL_OP_EXECUTE, bodies, ends, rows,
                                       window=self.target.window,
                                       max_retries=self.target.retries)
            finally:
                self.router.learn(conn)
                with self.lock:
                    self.overloaded += conn.overloaded - before

    def _run_by_shard(self, node: int, sharding: Any, encoded: list,
                      rows: Any) -> tuple[int, int]:
        """Sends ``rows`` (None: the batch's) of ``node`` each on the connection of its
        token's shard, one shard after another. A failure names, as not acknowledged
        (``unacknowledged``), every row it leaves so: in flight or never sent."""
        import numpy as np

        bodies, ends, tokens, _, p = encoded
        selection = (np.arange(len(ends) // 8, dtype=np.int32) if rows is None
                     else np.asarray(rows, dtype=np.int32))
        chosen = np.frombuffer(tokens, dtype=np.int64)[selection]
        shards = np.frombuffer(sharding.shards(chosen.tobytes()), dtype=np.int32)
        done, answered, retries = np.zeros(len(selection), dtype=bool), 0, 0
        for shard in np.unique(shards):
            part = np.flatnonzero(shards == shard)
            try:
                conn = self._conn(node, p.id, p.names, int(shard))
                got = self._send(conn, bodies, ends, selection[part])
            except BaseException as exc:
                sent = getattr(exc, "sent", 0) or 0
                in_flight = list(getattr(exc, "unacknowledged", None) or [])
                left = np.concatenate([selection[part][sent:], selection[~done][
                    ~np.isin(np.flatnonzero(~done), part)]])
                exc.unacknowledged = sorted(set(in_flight) | set(left.tolist()))  # type: ignore[attr-defined]
                exc.sent = len(selection)  # type: ignore[attr-defined]
                raise
            done[part] = True
            answered, retries = answered + got[0], retries + got[1]
        return answered, retries

    def store(self, encoded: list, rows: int) -> int:
        """Sends one batch's rows, each to the first replica of its token in the local data
        centre; returns the body bytes once every row was acknowledged. A node that cannot
        be reached, or whose connection is lost or times out, is left out of the session
        while another node is left: its rows not acknowledged go to their next replica up
        in the local data centre (:meth:`~bulkwire.cql_placement.Placement.route` says
        where, when none is), which coordinates their writes at the load's consistency. Any
        other failure (and the last node's) raises the node's error, with the source rows it
        names (``source_row``: the row the server refused; a note lists the rows not
        acknowledged)."""
        if not rows:
            return 0
        import numpy as np

        bodies, ends, tokens, row_base, _ = encoded
        # the batch's rows still to send (None: all of them), and the parts sent after them
        pending, later = self.router.phases(np, tokens, rows)
        while True:
            jobs = self._jobs(np, tokens, pending, encoded[4])
            if self.pool is None or len(jobs) == 1:
                outcomes = [self._outcome(n, encoded, sel) for n, sel in jobs]
            else:
                outcomes = list(self.pool.map(lambda job: self._outcome(job[0], encoded, job[1]),
                                              jobs))
            failures, again = [], []
            for ((node, _), selection), outcome in zip(jobs, outcomes):
                if not isinstance(outcome, BaseException):
                    self.retries += outcome[1]
                elif _node_down(outcome) and len(self.nodes) - len(self.dead) > 1:
                    if self.placement.addresses[node] not in self.dead:
                        self._down(node)
                    again.append(_not_acknowledged(np, outcome, selection, rows))
                elif self.on_refused is not None and _refused_row(outcome):
                    # the row goes to the rejected file; the others not acknowledged again
                    self.on_refused(outcome.row, f"refused by the server: {outcome.failure}")
                    if set(getattr(outcome, "unacknowledged", None) or ()) - {outcome.row}:
                        self._reconnect(node)  # answers still due: the connection is done
                    left = _not_acknowledged(np, outcome, selection, rows)
                    again.append(left[left != outcome.row])
                else:
                    failures.append((outcome, selection))
            if failures:  # every row of the batch not acknowledged: the failed runs', and
                # those of nodes left out, which will not be sent again
                missing = again + [_not_acknowledged(np, e, sel, rows)
                                   for e, sel in failures] + later
                error = _named(failures[0][0], row_base, rows,
                               np.unique(np.concatenate(missing)).tolist())
                # the error's traceback will hold this frame: it must not hold the error
                del outcomes, failures, outcome, missing
                try:
                    raise error
                finally:
                    del error
            again = [left for left in again if len(left)]
            if not again and not later:
                break
            if again:
                pending = np.concatenate(again)
            else:
                parts = self.router.probed(np, tokens, later.pop(0))
                pending, later = parts[0], parts[1:] + later
        self.body_bytes += len(bodies)
        self.wire_bytes += len(bodies) + 9 * rows  # each body in a frame of its own
        return len(bodies)

    def _jobs(self, np: Any, tokens: bytes, pending: Any, p: Prepared) -> list:
        """((node, shard), selection) for each live node (and shard of a ScyllaDB node:
        :class:`~bulkwire.load.cql_shards.ShardRouter`) rows go to: the rows (``pending``, or
        all) whose token it is the route of (selection None: every row of the batch)."""
        if self.prepared is None:
            self.prepared = (p.id, p.names)
        single = len(self.live.used) == 1 and not len(self.router.tablets)
        if single and self.router.sharding.get(self.index[self.live.used[0]]) is None:
            # one node takes every token: its first connection (split by shard there)
            return [((self.index[self.live.used[0]], -1),
                     None if pending is None else pending.astype(np.int32))]
        chosen_tokens = np.frombuffer(tokens, dtype=np.int64)
        if pending is not None:
            chosen_tokens = chosen_tokens[pending]
        to_node = np.array([self.index[a] for a in self.live.addresses], dtype=np.int32)
        owners = to_node[np.frombuffer(self.live.primaries(chosen_tokens.tobytes()),
                                       dtype=np.int32)]
        owners, shards = self.router.split(np, chosen_tokens, owners)
        keys = owners.astype(np.int64) * 65536 + (shards.astype(np.int64) + 1)
        present = np.unique(keys)
        jobs = []
        for key in present:
            job = (int(key) // 65536, int(key) % 65536 - 1)
            if pending is None and len(present) == 1:
                jobs.append((job, None))
            else:
                rows = np.flatnonzero(keys == key)
                selection = rows if pending is None else pending[rows]
                jobs.append((job, selection.astype(np.int32)))
        return jobs

    def _reconnect(self, node: int) -> None:
        """Closes the connections to ``node``: the next row for it opens another."""
        for conn in self.router.drop(node):
            conn.close()

    def _down(self, node: int) -> None:
        """Leaves ``node`` out of the session: its connections closed, the ring without it."""
        for conn in self.router.drop(node):
            conn.close()
        self.dead.add(self.placement.addresses[node])
        self.live = self.placement.route(self.local_dc, sorted(self.dead), self.local_only)

    def _outcome(self, job: tuple[int, int], encoded: list, rows: Any) -> Any:
        try:
            return self._run(job, encoded, rows)
        except BaseException as exc:  # noqa: BLE001 - raised by store, with its rows
            return exc

    def close(self) -> None:
        self._shutdown()

    def abort(self) -> None:
        """Ends the session at once: a connect, a PREPARE or a run still waiting for a node in
        another thread (after Ctrl-C in the main one) ends now, not at its timeout."""
        self.cancel.cancel()
        self._shutdown()

    def _shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        for conn in self.router.all():
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing what failed says nothing more
                pass
        self.cancel.close()  # its pipe closed (every connection that held it is closed)
        self.router.release()  # it held this session's methods


def _refused_row(exc: BaseException) -> bool:
    """Whether ``exc`` is a node refusing one row as invalid (the rows around it unharmed):
    a row that may be set aside."""
    return (isinstance(exc, CqlServerError) and exc.code == 0x2200
            and getattr(exc, "row", None) is not None)


def _node_down(exc: BaseException) -> bool:
    """Whether ``exc`` says the node is gone (unreachable, connection lost, no answer), not
    that it refused something: a TLS failure is the configuration's, not the node's."""
    return (isinstance(exc, (ConnectError, ConnectionLostError, TransportTimeoutError))
            and not isinstance(exc, TLSError))


def _not_acknowledged(np: Any, exc: BaseException, selection: Any, rows: int) -> Any:
    """The batch's rows of a failed run that were not acknowledged: those in flight
    (``unacknowledged``) and those never sent (from ``sent`` on; all of them when the
    connection was never made)."""
    chosen = np.arange(rows, dtype=np.int32) if selection is None else selection
    in_flight = np.array(getattr(exc, "unacknowledged", None) or [], dtype=np.int32)
    return np.concatenate([in_flight, chosen[getattr(exc, "sent", 0) or 0:]])


def _named(exc: BaseException, row_base: int, rows: int, missing: list) -> BaseException:
    """``exc`` in the rows of the source (``errors._name_source_rows``): the refused row (its
    ``row`` in the batch of ``rows`` rows, counted from ``row_base``) and ``missing``, the
    batch's rows not acknowledged (the others were)."""
    if not isinstance(exc, Exception):  # Ctrl-C: nothing of the server's to word
        return exc
    exc._batch_stop = row_base + rows  # type: ignore[attr-defined]
    row = getattr(exc, "row", None)
    _name_source_rows(exc, None if row is None else row_base + row,
                      [row_base + r for r in missing])
    return exc
