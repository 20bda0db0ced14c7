"""Server URLs: one parser and validator (bulkwire.urls) for every URL given (BulkInsert,
load_parquet / load_arrow, the command line, the RavenDB drop-in, the Dask and Ray sinks) and
every URL a server lists in its topology. A URL is judged when it is given; credentials in
it are refused and never repeated; a cluster never mixes schemes, so an https:// insert is
never sent to an http:// node."""
import contextlib
import io
import ipaddress
import traceback
import urllib.parse

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import bulkwire
import bulkwire.ravendb as dropin
from bulkwire import cli
from bulkwire._arrow_sink import SinkConfig
from bulkwire.errors import ProtocolError
from bulkwire.testing import LoopbackCluster, LoopbackServer
from bulkwire.testing.pki import make_pki, server_context
from bulkwire.topology import parse_topology
from bulkwire.urls import ServerUrl, normalize_url, parse_server_url, server_urls

TIMEOUT = 10.0
# the password of every generated URL holds this: it must never come out again
MARKER = "Pw5ecretQz"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return str(bulkwire.sample_parquet(tmp_path_factory.mktemp("urls") / "s.parquet",
                                       rows=10, dim=4))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def everything_said(exc: BaseException) -> str:
    """Every text an exception carries: its whole chain as a traceback prints it, and each
    linked exception's repr (the suppressed context too)."""
    texts = traceback.format_exception(exc)
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [repr(exc), str(exc), repr(getattr(exc, "__dict__", {}))]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def run_cli(argv):
    """(exit code, stdout + stderr) of the command line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue()


# ---- the validator against urllib's reading of the same text ----

printable = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)
url_like = st.builds(
    lambda scheme, host, port, path, tail: f"{scheme}://{host}{port}{path}{tail}",
    st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "http:", ""]),
    st.sampled_from(["a", "Node-A.example", "127.0.0.1", "[::1]", "[fe80::1]", "x_y.local.",
                     "", "[::1", "[zz]", "a b", "h\u00e9", "a\\b", "xn--bcher-kva.example",
                     "a" * 63, "a" * 64, "a." * 126 + "b", "a." * 127 + "b", "a..b"]),
    st.sampled_from(["", ":8080", ":1", ":65535", ":0", ":65536", ":", ":+80", ":08080",
                     ":\u0668\u0660", ":x", ":1:2"]),
    st.sampled_from(["", "/", "/raven", "/a/b/", "/a%20b", "//"]),
    st.sampled_from(["", "?", "?x=1", "#f", " ", "\t", "\n", "\x00", "\x7f", "\u00a0"]))


@given(st.one_of(url_like, st.text(max_size=40), printable))
def test_a_url_is_accepted_exactly_as_urllib_reads_it_or_refused_naming_the_argument(text):
    """Differential: what the validator accepts, urllib.parse reads to the same scheme, host,
    port and path; what it refuses raises ValueError starting with the argument's name."""
    try:
        url = parse_server_url(text, "the-arg")
    except ValueError as exc:
        assert str(exc).startswith("the-arg"), str(exc)
        return
    reference = urllib.parse.urlsplit(text)
    assert all("!" <= c <= "~" for c in text) and "@" not in text
    assert not reference.query and not reference.fragment and "?" not in text and "#" not in text
    assert url.scheme == reference.scheme and url.scheme in ("http", "https")
    if ":" in url.host:
        assert ipaddress.IPv6Address(url.host) == ipaddress.IPv6Address(reference.hostname)
    else:
        assert url.host == reference.hostname
    assert url.port == (reference.port or {"http": 80, "https": 443}[url.scheme])
    assert 1 <= url.port <= 65535 and url.root == reference.path.rstrip("/")
    assert parse_server_url(str(url)) == url  # the normalized form names the same server
    assert normalize_url(text) == str(url) and str(url).startswith(url.origin)


@given(st.one_of(url_like, printable), st.sampled_from(["url", "url[1]", "--url"]))
def test_a_url_met_again_gives_what_judging_it_anew_gives(text, argument):
    """parse_server_url remembers the URLs it accepted: asked again (and as a str subclass,
    which is never remembered), it gives what the validator itself gives, and a URL it
    refused is refused again with the same message, naming each time's argument."""
    from bulkwire import urls

    class Text(str):
        pass

    outcomes = []
    for given_text in (text, text, Text(text)):
        try:
            outcomes.append(parse_server_url(given_text, argument))
        except ValueError as exc:
            outcomes.append(str(exc))
    try:
        reference = urls._parse(text, argument)
    except ValueError as exc:
        reference = str(exc)
    assert outcomes == [reference] * 3
    if isinstance(reference, str):
        assert reference.startswith(argument)


def test_what_the_validator_refuses_and_why():
    cases = {
        "http://127.0.0.1:8080/a b": "whitespace (' ' at index 23)",
        "http://127.0.0.1:8080\t": "whitespace",
        " http://127.0.0.1:8080": "whitespace",
        "http://127.0.0.1:8080/\x00": "a control character ('\\x00'",
        "http://127.0.0.1:8080/\x7f": "a control character",
        "http://h\u00e9.example": "not ASCII (give a host in its IDNA form",
        "http://127.0.0.1:8080/?x=1": "no query ('?') or fragment ('#')",
        "http://127.0.0.1:8080#top": "no query ('?') or fragment ('#')",
        "ftp://127.0.0.1": "starts with http:// or https://",
        "127.0.0.1:8080": "starts with http:// or https://",
        "http:/127.0.0.1": "starts with http:// or https://",
        "http://": "needs a host",
        "http://:8080": "needs a host",
        "http://a:0": "from 1 to 65535, not '0'",
        "http://a:65536": "from 1 to 65535",
        "http://a:": "from 1 to 65535, not ''",
        "http://a:+80": "from 1 to 65535",
        "http://a:1:2": "from 1 to 65535, not '1:2'",
        "http://[::1": "must be an IPv6 address",
        "http://[::1]x": "only ':port' may follow",
        "http://a\\b": "is not a host name or IP address",
        "http://a..b": "is not a host name or IP address",
        # DNS's limits: the name could not even be looked up
        "http://" + "a" * 64 + ":1": "labels of 1 to 63 letters",
        "http://" + "a." * 127 + "b:1": "253 characters at most",
    }
    for text, reason in cases.items():
        with pytest.raises(ValueError) as info:
            parse_server_url(text, "url[3]")
        shown = repr(text) + ": " if len(text) <= 200 else repr(text[:200]) + "...: "
        assert str(info.value).startswith(f"url[3] {shown}") and reason in str(info.value), \
            (text, str(info.value))
    with pytest.raises(TypeError, match="^url must be a str, not bytes"):
        parse_server_url(b"http://a")


def test_urls_are_normalized_and_one_server_is_named_once():
    assert normalize_url("HTTP://Node-A.Example") == "http://node-a.example:80"
    assert normalize_url("https://[0:0::1]:8443/raven//") == "https://[::1]:8443/raven"
    with pytest.raises(ValueError, match=r"names the server http://a:80 more than once "
                                         r"\(url\[0\] and url\[2\]\)"):
        server_urls(["http://a", "http://b", "HTTP://A:80/"])
    assert [str(u) for u in server_urls(("http://a:1", "http://b:2/"))] == ["http://a:1",
                                                                             "http://b:2"]
    assert server_urls("https://a") == [ServerUrl("https", "a", 443)]


# ---- checked when given: every entry point ----

BAD = ["http://127.0.0.1:9/a b", "http://127.0.0.1:9/?db=x", "http://127.0.0.1:9\x00",
       "http://127.0.0.1:0", "tcp://127.0.0.1:9"]


@pytest.mark.parametrize("bad", BAD)
def test_a_bad_url_is_refused_when_it_is_given_by_every_entry_point(bad, sample):
    """A ValueError naming the argument, before any file is read or request made; the
    command line exits 2 (usage), never 3 (the server)."""
    for make in (lambda: bulkwire.BulkInsert(bad, "db"),
                 lambda: bulkwire.BulkInsert(["http://127.0.0.1:9", bad], "db"),
                 lambda: bulkwire.load_parquet("/nonexistent/x.parquet",
                                               bulkwire.targets.ravendb(bad, "db")),
                 lambda: bulkwire.load_arrow(pa.table({"id": [1]}),
                                             bulkwire.targets.ravendb([bad], "db")),
                 lambda: SinkConfig(url=bad, database="db")):
        with pytest.raises(ValueError, match=r"^url(\[\d\])? "):
            make()
    code, said = run_cli(["load", sample, "--url", bad, "--database", "db", "-q"])
    assert code == 2 and "argument --url: URL " in said, said


def test_a_url_with_a_space_is_a_usage_error_not_the_servers(sample):
    """http.client refuses to send such a URL: judged late, it was reported as a server that
    does not speak HTTP/1.1 (exit 3)."""
    with LoopbackServer() as server:
        code, said = run_cli(["load", sample, "--url", server.url + "/a b", "--database", "db",
                              "-q"])
        assert code == 2 and "whitespace" in said and "HTTP/1.1" not in said, said
        assert server.requests == []


def test_the_drop_ins_urls_go_through_the_validator():
    with pytest.raises(ValueError, match=r"^url\[0\] 'http://127.0.0.1:9/a b': a URL cannot "
                                         r"hold whitespace"):
        drop_in_insert("http://127.0.0.1:9/a b")


GARBAGE_URLS = ["http://127.0.0.1:1/a b", "http://127.0.0.1:1/?x", "http://u:p@127.0.0.1:1",
                "http://127.0.0.1:99999", "http://h\u00e9:1", "", "http://"]


@pytest.mark.parametrize("bad", GARBAGE_URLS)
def test_a_bad_url_in_a_topology_is_the_servers_fault(bad):
    """The same validator judges a topology's URLs: a ProtocolError naming the server that
    answered and the node; no request goes anywhere else."""
    with LoopbackCluster(2) as cluster:
        answer = cluster.topology()
        answer["Nodes"][1]["Url"] = bad
        cluster.answer_topology(0, answer)
        cluster.answer_topology(1, answer)
        with pytest.raises(ProtocolError) as info:
            with bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"a": 1}, id="a/1")
        message = str(info.value)
        assert f"GET {cluster.urls[0]}/topology" in message and "node 1 ('B')" in message
        assert [line for _, line in cluster.sequence()] == ["GET /topology?name=db"] * 2
        assert not cluster.unexpected_errors


# ---- one scheme per cluster ----

def test_the_urls_given_never_mix_schemes(sample):
    for make in (lambda: bulkwire.BulkInsert(["https://127.0.0.1:9", "http://127.0.0.1:8"], "db"),
                 lambda: bulkwire.load_parquet(sample,
                                               bulkwire.targets.ravendb(["https://127.0.0.1:9",
                                                            "http://127.0.0.1:8"], "db"))):
        with pytest.raises(ValueError, match=r"^url\[1\] is http://127.0.0.1:8, whose scheme "
                                             r"\(http://\) differs from the cluster's \(https://\)"):
            make()
    code, said = run_cli(["load", sample, "--url", "https://127.0.0.1:9,http://127.0.0.1:8",
                          "--database", "db", "-q"])
    # the same message, in the command line's words: the second of --url's URLs
    assert code == 2 and "--url (name 2) is http://127.0.0.1:8, whose scheme" in said, said


@pytest.fixture
def https_cluster(pki, monkeypatch):
    """Two https:// nodes (no client certificate required) whose certificate the system's
    trusted CAs (SSL_CERT_FILE) verify, and a plain http:// server that records every
    request it is sent."""
    monkeypatch.setenv("SSL_CERT_FILE", pki.ca)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with LoopbackCluster(2, ssl_context=server_context(pki, require_client=False)) as cluster, \
            LoopbackServer() as plain:
        plain.node_tag = "P"  # it would issue the operation id in its own name
        plain.journal = []
        yield cluster, plain
        assert not cluster.unexpected_errors and not plain.unexpected_errors


@pytest.mark.parametrize("tls", ["system CAs", "ca", "certificate and ca"])
@pytest.mark.parametrize("where", ["first topology", "every topology", "every topology, alone"])
def test_an_https_insert_never_follows_an_http_node_of_the_topology(https_cluster, pki, tls, where):
    """A topology listing an http:// node is refused as the server's fault: with the
    system's CAs (no TLS argument) it used to send the body there in clear text, with ca=
    it was refused by another rule. Not one request, so not one byte of the body, reaches
    the http:// node."""
    cluster, plain = https_cluster
    options = {"system CAs": {}, "ca": {"ca": pki.ca},
               "certificate and ca": {"ca": pki.ca, "certificate": pki.client}}[tls]
    downgraded = cluster.topology()
    node = {"Url": plain.url, "ClusterTag": "P", "ServerRole": "Member"}
    downgraded["Nodes"] = [node] + ([] if where.endswith("alone") else downgraded["Nodes"])
    cluster.answer_topology(0, downgraded)
    if where != "first topology":
        cluster.answer_topology(1, downgraded)
    docs = [{"Secret": f"clear text {i}"} for i in range(50)]

    def insert():
        with bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT, **options) as bulk:
            for i, doc in enumerate(docs):
                bulk.store(doc, id=f"s/{i}")

    if where == "first topology":  # the second node's own topology is sound: it is followed
        insert()
        assert len(cluster.servers[1].documents) + len(cluster.servers[0].documents) == 50
    else:
        with pytest.raises(ProtocolError) as info:
            insert()
        message = str(info.value)
        assert (f"node 0 ('P') of the topology is {plain.url}, whose scheme (http://) differs "
                f"from the cluster's (https://)") in message
        assert f"GET {cluster.urls[0]}/topology?name=db" in message
    assert plain.journal == [] and plain.requests == [] and plain.documents == {}


def test_an_http_cluster_does_not_follow_an_https_node_either():
    with LoopbackCluster(1) as cluster:
        answer = cluster.topology()
        answer["Nodes"].insert(0, {"Url": "https://127.0.0.1:9", "ClusterTag": "X"})
        cluster.answer_topology(0, answer)
        with pytest.raises(ProtocolError, match=r"node 0 \('X'\) of the topology is "
                                                r"https://127.0.0.1:9, whose scheme \(https://\)"):
            with bulkwire.BulkInsert(cluster.urls, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"a": 1}, id="a/1")


def test_parse_topology_checks_the_scheme_it_is_given():
    answer = {"Nodes": [{"Url": "https://a", "ClusterTag": "A"}, {"Url": "http://b"}]}
    assert [str(n.url) for n in parse_topology(answer, "GET /topology")] == ["https://a:443",
                                                                             "http://b:80"]
    with pytest.raises(ProtocolError, match=r"^GET /topology: node 1 of the topology is "
                                            r"http://b:80, whose scheme"):
        parse_topology(answer, "GET /topology", scheme="https")


# ---- credentials: refused, never repeated ----

any_text = st.text(max_size=8)
userinfo = st.one_of(
    st.builds(lambda user, before, after: f"{user}:{before}{MARKER}{after}", any_text, any_text,
              any_text),
    st.builds(lambda before, after: f"{before}{MARKER}{after}", any_text, any_text))
hosts = st.sampled_from(["127.0.0.1:9", "db.example", "[::1]:8080", "a:1/raven", "b:2/x?y#z", ""])
ENTRY_POINTS = ["BulkInsert", "BulkInsert list", "load_parquet", "load_arrow", "cli",
                "cli list", "drop-in", "sink", "topology"]


@pytest.fixture(scope="module")
def topology_cluster():
    with LoopbackCluster(1) as cluster:
        yield cluster


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@given(scheme=st.sampled_from(["http", "https", "HTTP"]), info=userinfo, host=hosts,
       entry=st.sampled_from(ENTRY_POINTS))
def test_credentials_in_a_url_are_refused_and_never_repeated(scheme, info, host, entry, sample,
                                                             topology_cluster):
    """Whatever the password holds ('/', '#', '@', ',', whitespace, any character) and
    wherever the URL is given, it is refused, naming the host when there is one, saying
    that RavenDB authenticates with certificates, and nothing it says holds the password."""
    url = f"{scheme}://{info}@{host}"
    host_named = host.split("/")[0]
    said = ""
    if entry in ("cli", "cli list"):
        value = url if entry == "cli" else f"http://127.0.0.1:9,{url}"
        code, said = run_cli(["load", sample, "--url", value, "--database", "db", "-q"])
        assert code == 2
    elif entry == "topology":
        answer = topology_cluster.topology()
        answer["Nodes"][0]["Url"] = url
        topology_cluster.answer_topology(0, answer)
        with pytest.raises(ProtocolError) as raised:
            with bulkwire.BulkInsert(topology_cluster.urls, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"a": 1}, id="a/1")
        said = everything_said(raised.value)
        assert topology_cluster.servers[0].requests == []
    else:
        make = {
            "BulkInsert": lambda: bulkwire.BulkInsert(url, "db"),
            "BulkInsert list": lambda: bulkwire.BulkInsert([f"{scheme}://127.0.0.1:9", url], "db"),
            "load_parquet": lambda: bulkwire.load_parquet(sample,
                                                          bulkwire.targets.ravendb(url, "db")),
            "load_arrow": lambda: bulkwire.load_arrow(pa.table({"id": [1]}),
                                                      bulkwire.targets.ravendb([url], "db")),
            "drop-in": lambda: drop_in_insert(url),
            "sink": lambda: SinkConfig(url=(url,), database="db"),
        }[entry]
        with pytest.raises(ValueError) as raised:
            make()
        said = everything_said(raised.value)
    assert "credentials in a URL are not supported" in said, said
    assert "X.509 certificates" in said and "certificate=" in said
    assert (f"the URL of host {host_named!r} holds" if host_named else "the URL holds") in said
    assert MARKER not in said, said


def drop_in_insert(url):
    """The drop-in's bulk insert of a DocumentStore whose urls are [url]."""
    from ravendb import DocumentStore

    store = DocumentStore(urls=[url], database="db")
    store.initialize()
    try:
        return dropin.bulk_insert(store)
    finally:
        store.close()


def test_results_and_summaries_name_the_normalized_urls(sample):
    """LoadResult.target, the CLI's summary and the sinks' target are made from the
    validated URLs."""
    with LoopbackServer() as server:
        given = server.url.upper().replace("HTTP://", "http://") + "/"
        result = bulkwire.load_parquet(sample, bulkwire.targets.ravendb(given, "db"))
        assert result.target == f"{server.url} (database db)"
        code, said = run_cli(["load", sample, "--url", given, "--database", "db", "-q"])
        assert code == 0 and f"into {server.url} (database db)" in said
        assert SinkConfig(url=[given], database="db").target == f"{server.url} (database db)"


def test_module_examples():
    import doctest

    import bulkwire.tls
    import bulkwire.urls

    for module in (bulkwire.urls, bulkwire.tls):
        failed, tried = doctest.testmod(module)
        assert failed == 0 and tried > 0, module.__name__
