"""What a server of a given version can read (bulkwire.server_features): a body it cannot
read is refused before it is sent, naming the feature and the server's version; one that can,
and one that does not tell its version, get the body as before. The real RavenDB 4.1 cases are
in test_real_ravendb.py; here the loopback server reports the version it is given."""
import json
from datetime import datetime

import pytest

import bulkwire
from bulkwire.server_features import FEATURES, parse_version
from bulkwire.testing import LoopbackServer

from fault_server import FaultServer


def _counters(bulk):
    bulk.counters_for("d/1").increment("likes")


def _time_series(bulk):
    with bulk.time_series_for("d/1", "HR") as series:
        series.append_single(datetime(2024, 5, 1), 60.0)


def _attachments(bulk):
    bulk.attachments_for("d/1").store("a.txt", b"x")


COMMANDS = {"counters": _counters, "time series": _time_series, "attachments": _attachments}


def below(version: tuple) -> str:
    """The last release before ``version`` (as text)."""
    major, minor = version[0], version[1] if len(version) > 1 else 0
    return f"{major}.{minor - 1}.9" if minor else f"{major - 1}.9.9"


@pytest.mark.parametrize("feature", sorted(COMMANDS))
def test_a_command_the_server_cannot_read_fails_the_insert_naming_it(feature):
    first = FEATURES[feature][0]
    with LoopbackServer() as server:
        server.version = below(first)
        bulk = bulkwire.BulkInsert(server.url, server.database)
        with pytest.raises(bulkwire.UnsupportedByServer) as caught:
            with bulk:
                bulk.store({"N": 1}, id="d/1")
                COMMANDS[feature](bulk)
        assert caught.value.feature == feature and caught.value.server_version == server.version
        assert server.version in str(caught.value) and server.url in str(caught.value)
        with pytest.raises(bulkwire.BulkInsertError):
            bulk.close()
        assert "d/1" not in server.documents  # the insert was aborted, never completed
        assert server.log.count("GET /build/version") == 1

        server.version = ".".join(map(str, first))  # the first release that reads it
        with bulkwire.BulkInsert(server.url, server.database) as bulk:
            bulk.store({"N": 1}, id="d/1")
            COMMANDS[feature](bulk)
            COMMANDS[feature](bulk) if feature == "counters" else None
        assert server.documents["d/1"] == {"N": 1, "@metadata": {"@collection": "dicts",
                                                                 "Raven-Python-Type": "builtins.dict"}}
        assert server.log.count("GET /build/version") == 2  # once per insert


def test_zstd_into_an_older_server_is_refused_before_the_body():
    with LoopbackServer() as server:
        server.version = "6.2.3"
        bulk = bulkwire.BulkInsert(server.url, server.database, compress="zstd")
        with pytest.raises(bulkwire.UnsupportedByServer, match=r"RavenDB 6\.2\.3.*zstd"):
            bulk.store({"N": 1}, id="d/1")
        with pytest.raises(bulkwire.UnsupportedByServer):
            bulk.close()
        assert not server.requests  # no body was sent
        with bulkwire.BulkInsert(server.url, server.database, compress=True) as bulk:  # gzip
            bulk.store({"N": 1}, id="d/1")
        assert server.requests[-1].headers["Content-Encoding"] == "gzip"
        assert "GET /build/version" not in server.log[-2:]  # gzip asks nothing

        server.version = "7.0.0"
        with bulkwire.BulkInsert(server.url, server.database, compress="zstd") as bulk:
            bulk.store({"N": 2}, id="d/2")
        assert server.requests[-1].headers["Content-Encoding"] == "zstd"
        assert server.documents["d/2"]["N"] == 2


def test_a_server_that_does_not_tell_its_version_gets_the_body():
    with FaultServer() as server:  # answers 404 to GET /build/version
        with bulkwire.BulkInsert(server.url, "db", compress="zstd", timeout=10) as bulk:
            bulk.store({"N": 1}, id="d/1")
        assert "GET /build/version" in server.log
        assert server.ok_to_whole_body(bulk.operation_id)


@pytest.mark.parametrize("answer, expected", [
    ({"FullVersion": "4.1.0", "ProductVersion": "4.1"}, ((4, 1, 0), "4.1.0")),
    ({"FullVersion": "7.2.0-nightly-20250101", "ProductVersion": "7.2"}, ((7, 2, 0), "7.2.0-nightly-20250101")),
    ({"ProductVersion": "5.4"}, ((5, 4), "5.4")),
    ({"FullVersion": 41, "ProductVersion": "4.1"}, ((4, 1), "4.1")),
    ({"FullVersion": "x"}, None), ([], None), ("4.1", None), ({}, None),
])
def test_parse_version(answer, expected):
    assert parse_version(answer) == expected


def test_a_server_error_names_the_innermost_cause_of_its_stack_trace():
    """RavenDB's failed bulk insert says "Failed to process bulk insert ..." in Message and the
    cause only in Error (RavenDB 4.1 and 7 alike): the message bulkwire raises carries both."""
    from bulkwire.transport import error_message

    body = json.dumps({
        "Type": "System.InvalidOperationException",
        "Message": "Failed to process bulk insert Inserted 115 documents in 1 batches.",
        "Error": "System.InvalidOperationException: Failed to process bulk insert Inserted 115 "
                 "documents in 1 batches. ---> System.AggregateException: x ---> "
                 "Voron.Exceptions.DiskFullException: There is not enough space\n   at Voron.A()\n"
                 " ---> System.IO.IOException: later frames are not the cause"}).encode()
    assert error_message(body) == ("Failed to process bulk insert Inserted 115 documents in 1 "
                                   "batches.: Voron.Exceptions.DiskFullException: There is not "
                                   "enough space")
    plain = json.dumps({"Message": "no such thing", "Error": "no such thing\n   at X()"}).encode()
    assert error_message(plain) == "no such thing"
    said = json.dumps({"Message": "A: b", "Error": "X: y ---> A: b\n   at Z()"}).encode()
    assert error_message(said) == "A: b"  # the message already says it
