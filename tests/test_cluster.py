"""Bulk insert into a cluster: several URLs, the topology asked of the first that answers,
failover to the next node, the bulk insert sent to the node that issued the operation id,
clear errors when no node serves. Against LoopbackCluster, and against the official client's
own requests on the same cluster."""
import json
import pathlib
import re
import socket
import time

import pytest
import ravendb
from ravendb.json.metadata_as_dictionary import MetadataAsDictionary
from hypothesis import given, strategies as st

import bulkwire
from bulkwire.bulk import BulkWriter
from bulkwire.cli import main as cli_main
from bulkwire.errors import (BulkInsertAborted, BulkInsertError, ConnectError, ProtocolError,
                             ServerError, TransportError, TransportTimeoutError)
from bulkwire.testing import LoopbackCluster
from bulkwire.topology import ServerNode, Servers, parse_topology, server_urls
from bulkwire.urls import parse_server_url

TIMEOUT = 30.0  # every test client's socket timeout: nothing can hang for long
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"

TOPOLOGY = "GET /topology?name=db"
NEXT_ID = "GET /databases/db/operations/next-operation-id"


def post(op_id=1):
    return f"POST /databases/db/bulk_insert?id={op_id}&skipOverwriteIfUnchanged=false"


def entities(n=40):
    return [{"Name": f"n\u00e9 {i}", "Rank": i, "Score": i / 7, "Tags": ["a", str(i)],
             "Vector": [j / 3 + i for j in range(16)]} for i in range(n)]


def expected_body(docs):
    """The body BulkWriter writes for ``docs`` (ids things/0...): what the node must get."""
    writer = BulkWriter()  # one buffer holds it all: no consumer needed while storing
    for i, doc in enumerate(docs):
        writer.store(doc, id=f"things/{i}")
    writer.close()
    return b"".join(bytes(piece) for piece in writer.pieces())


def load(urls, docs, **options):
    with bulkwire.BulkInsert(urls, "db", timeout=options.pop("timeout", TIMEOUT),
                             buffer_size=512, **options) as bulk:
        for i, doc in enumerate(docs):
            bulk.store(doc, id=f"things/{i}")
    return bulk


def received(cluster):
    """``(node index, body)`` of every bulk insert request the cluster received."""
    return [(i, bytes(r.body)) for i, server in enumerate(cluster.servers)
            for r in server.requests]


@pytest.fixture
def cluster():
    with LoopbackCluster(3) as c:
        yield c
        assert not c.unexpected_errors


# ---- where the requests go ----

@pytest.mark.parametrize("compress", [False, True])
def test_topology_from_the_first_url_and_the_body_on_the_issuing_node(cluster, compress):
    docs = entities()
    bulk = load(cluster.urls, docs, compress=compress)
    assert cluster.sequence() == [(0, TOPOLOGY), (0, NEXT_ID), (0, post())]
    assert received(cluster) == [(0, expected_body(docs))]
    assert bulk.stats.documents == len(docs)


def test_a_single_str_is_that_server_alone(cluster):
    docs = entities(3)
    load(cluster.urls[1], docs)
    assert cluster.sequence() == [(1, NEXT_ID), (1, post())]  # no topology: as before
    assert received(cluster) == [(1, expected_body(docs))]


def test_the_topology_order_chooses_the_node_not_the_order_of_the_urls(cluster):
    docs = entities(5)
    load(cluster.urls[::-1], docs)  # asked of C first, but A leads the topology
    assert cluster.sequence() == [(2, TOPOLOGY), (0, NEXT_ID), (0, post())]
    assert received(cluster) == [(0, expected_body(docs))]


@pytest.mark.parametrize("compress", [False, True])
def test_a_dead_first_url_fails_over_to_the_next(cluster, compress):
    cluster.kill(0)
    docs = entities()
    load(cluster.urls, docs, compress=compress)
    # A is refused for the topology and again for the operation id: B serves both
    assert cluster.sequence() == [(1, TOPOLOGY), (1, NEXT_ID), (1, post())]
    assert received(cluster) == [(1, expected_body(docs))]


def test_a_node_that_is_not_serving_is_skipped_for_the_operation_id(cluster):
    cluster.fail(0, 503)
    docs = entities(7)
    load(cluster.urls, docs)
    assert cluster.sequence() == [(0, TOPOLOGY), (1, TOPOLOGY), (0, NEXT_ID), (1, NEXT_ID),
                                  (1, post())]
    assert received(cluster) == [(1, expected_body(docs))]


def test_members_are_asked_before_other_nodes(cluster):
    cluster.roles[0] = "Promotable"
    docs = entities(3)
    load(cluster.urls, docs)
    assert cluster.sequence() == [(0, TOPOLOGY), (1, NEXT_ID), (1, post())]


def test_without_members_the_topology_order_is_followed(cluster):
    cluster.roles[:] = ["Rehab", "Promotable", "Rehab"]
    cluster.kill(0)
    load(cluster.urls, entities(2))
    assert cluster.sequence() == [(1, TOPOLOGY), (1, NEXT_ID), (1, post())]


def test_the_bulk_insert_goes_to_the_node_named_by_the_node_tag(cluster):
    cluster.servers[0].node_tag = "C"  # A hands out an operation id of node C
    docs = entities()
    bulk = load(cluster.urls, docs)
    assert cluster.sequence() == [(0, TOPOLOGY), (0, NEXT_ID), (2, post())]
    assert received(cluster) == [(2, expected_body(docs))]
    assert bulk.operation_id == 1


def test_kill_goes_to_the_issuing_node(cluster):
    cluster.servers[0].node_tag = "B"
    bulk = bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT)
    bulk.store({"a": 1}, id="things/0")
    # A only lends B's tag: B learns of the operation from the request itself
    deadline = time.monotonic() + 10
    while not cluster.servers[1].requests and time.monotonic() < deadline:
        time.sleep(0.01)
    bulk.abort()
    with pytest.raises(BulkInsertAborted):
        bulk.close()
    assert (1, "POST /databases/db/operations/kill?id=1") in cluster.sequence()
    assert cluster.servers[1].killed == {1}


def test_the_issuing_nodes_failure_is_explained_by_that_node(cluster):
    cluster.servers[0].node_tag = "C"
    cluster.servers[2].fail_after_bytes = 0
    cluster.servers[2].fail_message = "node C refused the documents"
    with pytest.raises(ServerError, match="node C refused the documents"):
        load(cluster.urls, entities())
    assert not cluster.servers[0].requests and not cluster.servers[1].requests


def test_an_unknown_node_tag_is_a_clear_error_and_nothing_is_sent(cluster):
    cluster.servers[0].node_tag = "Z"
    bulk = bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT)
    with pytest.raises(ProtocolError, match="issued by node 'Z'.*lists 'A', 'B', 'C'"):
        bulk.store({"a": 1}, id="things/0")
    with pytest.raises(ProtocolError):  # failed for good: it does not start over
        bulk.close()
    assert received(cluster) == []


# ---- when no node serves ----

def test_all_nodes_dead_is_a_connect_error_naming_every_url(cluster):
    for i in range(3):
        cluster.kill(i)
    started = time.monotonic()
    bulk = bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT)
    with pytest.raises(ConnectError) as info:
        bulk.store({"a": 1}, id="things/0")
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert all(url in message for url in cluster.urls), message
    assert "none of the 3 servers" in message and "/topology?name=db" in message
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(ConnectError):  # and again at close
        bulk.close()


def test_no_node_gives_an_operation_id(cluster):
    # A answers the topology, which lists only B and C: both dead
    listed = cluster.topology()
    listed["Nodes"] = listed["Nodes"][1:]
    cluster.answer_topology(0, listed)
    cluster.kill(1)
    cluster.kill(2)
    with pytest.raises(ConnectError) as info:
        load(cluster.urls[:1], entities(1))
    message = str(info.value)
    assert "next-operation-id" in message
    assert cluster.urls[1] in message and cluster.urls[2] in message


def test_mixed_failures_raise_their_nearest_common_class(cluster):
    cluster.kill(0)
    cluster.answer_topology(1, b"<html>not a topology</html>")
    cluster.fail(2, 502)
    with pytest.raises(BulkInsertError) as info:
        load(cluster.urls, entities(1))
    assert type(info.value) is BulkInsertError  # refused, not a topology, 502
    for url in cluster.urls:
        assert url in str(info.value)


def test_an_error_that_another_node_would_not_fix_stops_at_once(cluster):
    cluster.fail(0, 500)  # A answers the topology badly (skipped) and the id request badly
    with pytest.raises(ServerError) as info:
        load(cluster.urls, entities(1))
    assert info.value.status == 500 and cluster.urls[0] in str(info.value)
    assert cluster.sequence() == [(0, TOPOLOGY), (1, TOPOLOGY), (0, NEXT_ID)]  # as the official client


def test_a_refused_client_is_not_retried_elsewhere(cluster):
    cluster.fail(0, 403)
    with pytest.raises(ServerError) as info:
        load(cluster.urls, entities(1))
    assert info.value.status == 403
    assert cluster.sequence() == [(0, TOPOLOGY)]


GARBAGE = [b"garbage", b"", b"[" * 100_000, json.dumps([1, 2]).encode(), {"Nodes": 3}, {"Nodes": []},
           {"Etag": 1}, {"Nodes": [None]}, {"Nodes": [{"Url": "ftp://a"}]},
           {"Nodes": [{"Url": "http://a:port"}]}, {"Nodes": [{"Url": 5}]},
           {"Nodes": [{"Url": "http://a:1", "ClusterTag": ["A"]}]},
           {"Nodes": [{"Url": "http://a:1", "ServerRole": 1}]}]


@pytest.mark.parametrize("answer", GARBAGE, ids=range(len(GARBAGE)))
def test_a_garbage_topology_is_a_clear_protocol_error_never_a_hang(answer):
    with LoopbackCluster(2) as cluster:
        cluster.answer_topology(0, answer)
        cluster.answer_topology(1, answer)
        started = time.monotonic()
        with pytest.raises(ProtocolError) as info:
            load(cluster.urls, entities(1))
        assert time.monotonic() - started < 10
        message = str(info.value)
        assert cluster.urls[0] in message and cluster.urls[1] in message
        assert received(cluster) == []
        assert not cluster.unexpected_errors


def test_a_garbage_topology_on_the_first_url_is_skipped(cluster):
    cluster.answer_topology(0, b"garbage")
    docs = entities(4)
    load(cluster.urls, docs)
    assert cluster.sequence() == [(0, TOPOLOGY), (1, TOPOLOGY), (0, NEXT_ID), (0, post())]
    assert received(cluster) == [(0, expected_body(docs))]


def test_a_silent_node_times_out_and_the_next_one_answers(cluster):
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent_url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        started = time.monotonic()
        load([silent_url, cluster.urls[0]], entities(2), timeout=0.5)
        assert time.monotonic() - started < 10
        with pytest.raises(TransportTimeoutError, match="timed out"):
            load([silent_url], entities(2), timeout=0.5)
    assert cluster.sequence() == [(0, TOPOLOGY), (0, NEXT_ID), (0, post())]


# ---- arguments ----

@pytest.mark.parametrize("url, error, match", [
    ([], ValueError, "at least one URL"),
    (("http://a:1", 5), TypeError, r"url\[1\] must be a str"),
    (["http://a:1", "http://a:1"], ValueError, "more than once"),
    (["http://a:1", "ftp://b"], ValueError, "http:// or https://"),
    ({"http://a:1"}, TypeError, "str or a list"),
    (b"http://a:1", TypeError, "str or a list"),
])
def test_bad_url_arguments_raise_before_any_request(url, error, match):
    with pytest.raises(error, match=match):
        bulkwire.BulkInsert(url, "db")


def test_server_urls():
    assert [str(u) for u in server_urls("http://a:1")] == ["http://a:1"]
    assert [str(u) for u in server_urls(("http://a:1", "http://b:2"))] == ["http://a:1",
                                                                           "http://b:2"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from(["http://a:1", "https://b", "Member", "A", "ftp://c", "http://d:x"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["Nodes", "Url", "ClusterTag", "ServerRole", "Etag", "x"]),
                      inner, max_size=4),
    max_leaves=20)


node_objects = st.fixed_dictionaries(
    {"Url": st.sampled_from(["http://a:1", "https://b", "HTTP://C:2/", "ftp://c", "http://d:x"])},
    optional={"ClusterTag": st.sampled_from(["A", "B", None, 1]),
              "ServerRole": st.sampled_from(["Member", "Rehab", None, []])})


@given(json_values | st.fixed_dictionaries({"Nodes": st.lists(node_objects, max_size=4)}))
def test_parse_topology_returns_nodes_or_raises_protocol_error(data):
    try:
        nodes = parse_topology(data, "GET /topology")
    except ProtocolError as exc:
        assert str(exc).startswith("GET /topology: ")
        return
    assert nodes and all(isinstance(node, ServerNode) for node in nodes)
    for node, raw in zip(nodes, data["Nodes"]):
        assert node.url == parse_server_url(raw["Url"])  # the one validator's reading
        assert node.tag == raw.get("ClusterTag") and node.role == raw.get("ServerRole")


# ---- load_parquet and the CLI ----

def test_load_parquet_and_the_cli_take_several_urls(cluster, tmp_path, capsys):
    src = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=20, dim=4)
    cluster.kill(0)
    result = bulkwire.load_parquet(src, bulkwire.targets.ravendb(cluster.urls, "db"))
    assert result.rows == 20 and len(cluster.servers[1].documents) == 20
    assert cluster.urls[0] in result.target
    # repeated and comma-separated --url: the same cluster
    for args in (["--url", cluster.urls[0], "--url", ",".join(cluster.urls[1:])],
                 ["--url", ",".join(cluster.urls)]):
        cluster.servers[1].documents.clear()
        assert cli_main(["load", src, *args, "--database", "db", "-q"]) == 0
        assert len(cluster.servers[1].documents) == 20
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:  # argparse: the command's usage line, exit 2
        cli_main(["load", src, "--url", cluster.urls[1] + ",", "--database", "db"])
    assert usage.value.code == 2
    assert "empty URL" in capsys.readouterr().err


# ---- the official client, on the same cluster ----

def official_sequence(cluster, docs):
    store = ravendb.DocumentStore(urls=cluster.urls, database="db")
    store.initialize()
    try:
        with store.bulk_insert() as bulk:
            for i, doc in enumerate(docs):
                # a fresh metadata each call: the client's default argument is one shared
                # MetadataAsDictionary, which keeps what an earlier store (of a dict, in
                # another test) put into it
                bulk.store_as(doc, f"things/{i}", MetadataAsDictionary())
    finally:
        store.close()


def normalized(sequence):
    """The official client adds tags of its own to the topology request's query."""
    return [(node, re.sub(r"^(GET /topology\?name=[^&]*)&.*", r"\1", line))
            for node, line in sequence]


SCENARIOS = {
    "healthy": lambda c: None,
    "first dead": lambda c: c.kill(0),
    "first two dead": lambda c: (c.kill(0), c.kill(1)),
    "first failing": lambda c: c.fail(0, 503),
    "first garbage": lambda c: c.answer_topology(0, b"garbage"),
    "node tag of another node": lambda c: setattr(c.servers[0], "node_tag", "C"),
    "topology order": lambda c: c.answer_topology(0, {"Nodes": c.topology()["Nodes"][::-1],
                                                      "Etag": 1}),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_node_and_requests_as_the_official_client(scenario):
    docs = [{"Name": f"n\u00e9 {i}", "Rank": i, "Vector": [i / 3, 0.5]} for i in range(25)]
    runs = []
    for client in ("official", "bulkwire"):
        with LoopbackCluster(3) as cluster:
            SCENARIOS[scenario](cluster)
            if client == "official":
                official_sequence(cluster, docs)
            else:
                load(cluster.urls, docs)
            runs.append((normalized(cluster.sequence()), received(cluster)))
            assert not cluster.unexpected_errors
    (official, official_bodies), (ours, our_bodies) = runs
    assert ours == official
    assert our_bodies == official_bodies  # same node, byte-identical body
    assert len(our_bodies) == 1


# ---- the documentation's example runs ----

def test_the_cluster_example_of_the_docs_runs():
    text = (DOCS / "bulk_insert.md").read_text()
    section = text.split("## Clusters", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "docs/bulk_insert.md: the Clusters section has no python example"
    exec(compile(blocks[0], "docs/bulk_insert.md (Clusters)", "exec"), {})


def test_the_api_doc_names_the_new_argument_forms():
    text = (DOCS / "api.md").read_text()
    assert "BulkInsert(url, database" in text and "list (or\ntuple) of node URLs" in text
