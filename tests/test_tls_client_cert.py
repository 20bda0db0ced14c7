"""Bulk insert over HTTPS to a server that requires a client certificate (the loopback server,
and the fault server for the failure cases), with a CA, server and client certificates made
here. bulkwire's own TLS (the C core, linked with OpenSSL) carries the body through the pump
with the GIL released; ``ssl_context=`` goes through Python's ssl."""
import os
import signal
import socket
import ssl
import threading
import time

import pytest

import bulkwire
import bulkwire.transport
from bulkwire import _core, errors
from bulkwire.bulk import BulkWriter, compression_backends
from bulkwire.testing import LoopbackServer
from fault_server import FaultServer, hold_the_end_until, shrink_send_buffers
from bulkwire.testing.pki import make_pki, server_context
from build_extras import needs

# bulkwire's own TLS client, its pump and its file errors: a build without OpenSSL has none
# of them (its HTTPS goes through Python's ssl module, tested with ssl_context= here too)
pytestmark = needs("openssl")

TIMEOUT = 10.0
NOISE = os.urandom(1 << 16).hex()  # text gzip cannot shrink much
DOCS = [{"i": i, "name": f"caf\u00e9 {i}", "v": [i / 7, -i * 1e-3], "pad": "t" * (i % 90)}
        for i in range(600)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture
def secure(pki):
    """The loopback server on HTTPS, requiring a client certificate signed by the test CA."""
    with LoopbackServer(ssl_context=server_context(pki)) as server:
        yield server
        assert server.unexpected_errors == []


@pytest.fixture
def pump_calls(monkeypatch):
    """The tls argument of every BulkWriter.pump call."""
    calls = []
    real = BulkWriter.pump

    def pump(self, fd, timeout, tls=None):
        calls.append(tls)
        return real(self, fd, timeout, tls)

    monkeypatch.setattr(BulkWriter, "pump", pump)
    return calls


def expected_body(compress):
    """The body BulkWriter makes for DOCS (decompressed: the server records it so)."""
    writer = BulkWriter(compress=False, buffer_size=1 << 22)  # one buffer: nothing waits
    for i, doc in enumerate(DOCS):
        writer.store(doc, id=f"t/{i}")
    writer.close()
    return b"".join(bytes(piece) for piece in writer.pieces())


def test_the_c_core_is_built_with_openssl():
    """The TLS tests below are about the C sender: a build without libssl would pass them
    through Python's ssl and prove nothing about it."""
    assert _core.TLS_LIBRARY is not None and "OpenSSL" in _core.TLS_LIBRARY


@pytest.mark.parametrize("compress", [False, *compression_backends()])
@pytest.mark.parametrize("form", ["one-file", "pair"])
def test_documents_arrive_byte_exact_through_the_pump(secure, pki, pump_calls, compress, form):
    certificate = pki.client if form == "one-file" else (pki.client_cert, pki.client_key)
    with bulkwire.BulkInsert(secure.url, secure.database, certificate=certificate, ca=pki.ca,
                             compress=compress, buffer_size=4096, timeout=TIMEOUT) as bulk:
        for i, doc in enumerate(DOCS):
            bulk.store(doc, id=f"t/{i}")
    request = secure.requests[-1]
    assert request.complete and request.error is None
    assert bytes(request.body) == expected_body(compress)
    assert (request.headers.get("Content-Encoding") == "gzip") == bool(compress)
    assert bulk.stats.wire_bytes == sum(request.wire_chunks) and bulk.stats.pieces > 10
    if BulkWriter(compress=compress)._can_pump:  # the C sender, through bulkwire's own TLS
        assert len(pump_calls) == 1 and isinstance(pump_calls[0], _core.TlsConnection)
    assert secure.tls_failures == []


def test_load_parquet_and_the_cli_over_tls(secure, pki, tmp_path, capsys):
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=300, dim=8)
    r = bulkwire.load_parquet(src,
                              bulkwire.targets.ravendb(secure.url, secure.database, certificate=pki.client, ca=pki.ca, buffer_size=2048),
                              batch_rows=64)
    body = open(bulkwire.load_parquet(src, bulkwire.targets.request_file(str(tmp_path / "b.json"))).target, "rb").read()
    assert r.rows == 300 and bytes(secure.requests[-1].body) == body
    from bulkwire.cli import main
    code = main(["load", str(src), "--url", secure.url, "--database", secure.database,
                 "--certificate", pki.client_cert, "--key", pki.client_key, "--ca", pki.ca, "-q"])
    assert code == 0 and bytes(secure.requests[-1].body) == body
    code = main(["load", str(src), "--url", secure.url, "--database", secure.database,
                 "--certificate", pki.client, "--insecure", "-q"])
    assert code == 0 and len(secure.requests) == 3
    code = main(["load", str(src), "--url", secure.url, "--database", secure.database, "-q",
                 "--ca", pki.ca])  # no client certificate: refused
    assert code == 3 and "certificate required" in capsys.readouterr().err
    with pytest.warns(DeprecationWarning, match=r"load_parquet\(certificate=\.\.\.\) is "
                                                r"deprecated"), \
            pytest.raises(ValueError, match="certificate need url"):  # the former spelling
        bulkwire.load_parquet(src, certificate=pki.client)


def test_the_cli_documents_the_tls_options():
    from bulkwire.cli import build_parser
    load = build_parser()._subparsers._group_actions[0].choices["load"]
    helps = {a.dest: a.help for a in load._actions}
    for option in ("certificate", "key", "ca", "insecure"):
        assert helps[option], option
    assert load.parse_args(["x", "--insecure"]).insecure is True


@pytest.mark.parametrize("maximum", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
@pytest.mark.parametrize("client", ["missing", "untrusted"])
def test_a_missing_or_untrusted_client_certificate_is_a_tls_error(pki, client, maximum):
    """TLS 1.2 refuses it in the handshake; TLS 1.3 after it (the first read sees the alert):
    either way a TLSError naming the alert, and nothing was stored."""
    certificate = None if client == "missing" else pki.rogue_client
    with LoopbackServer(ssl_context=server_context(pki, maximum=maximum)) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, certificate=certificate,
                                   ca=pki.ca, timeout=TIMEOUT)
        with pytest.raises(errors.TLSError) as raised:
            bulk.store({"a": 1}, id="a/1")
        exc = raised.value
        assert exc.alert and not exc.verify_failed and "refused the TLS session" in str(exc)
        reason = "certificate required" if client == "missing" else "unknown ca"
        if maximum == ssl.TLSVersion.TLSv1_2 and client == "missing":
            reason = "handshake failure"  # TLS 1.2 has no alert of its own for it
        assert reason in exc.reason, exc.reason
        assert isinstance(exc, errors.ConnectError) and "certificate=" in str(exc)
        with pytest.raises(errors.BulkInsertError):  # failed for good
            bulk.close()
        deadline = time.monotonic() + 5  # the server's handler records it on its own thread
        while not server.tls_failures and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.documents == {} and server.tls_failures


@pytest.mark.parametrize("ca", ["system", "rogue"])
def test_a_server_certificate_that_fails_verification_is_refused_unless_ca_is_false(secure, pki, ca):
    with pytest.raises(errors.TLSError, match="certificate failed verification") as raised:
        with bulkwire.BulkInsert(secure.url, secure.database, certificate=pki.client,
                                 ca=None if ca == "system" else pki.rogue_ca, timeout=TIMEOUT) as bulk:
            bulk.store({"a": 1}, id="a/1")
    assert raised.value.verify_failed and "self-signed" in raised.value.reason
    with bulkwire.BulkInsert(secure.url, secure.database, certificate=pki.client, ca=False,
                             timeout=TIMEOUT) as bulk:
        bulk.store({"a": 1}, id="a/1")
    assert secure.documents["a/1"] == {"a": 1, "@metadata": secure.documents["a/1"]["@metadata"]}


def test_the_server_certificate_must_name_the_host(pki):
    """Verification checks the name too: the certificate is for 127.0.0.1, not localhost."""
    with LoopbackServer(ssl_context=server_context(pki)) as server:
        url = server.url.replace("127.0.0.1", "localhost")
        try:
            socket.create_connection(("localhost", int(url.rsplit(":", 1)[1])), 2).close()
        except OSError:
            pytest.fail("localhost does not reach the loopback server")
        with pytest.raises(errors.TLSError, match="verif") as raised:
            with bulkwire.BulkInsert(url, server.database, certificate=pki.client, ca=pki.ca,
                                     timeout=TIMEOUT) as bulk:
                bulk.store({"a": 1}, id="a/1")
        assert raised.value.verify_failed


@pytest.mark.parametrize("compress", [False, "zlib"])
def test_ssl_context_is_used_as_it_is(secure, pki, pump_calls, compress):
    context = ssl.create_default_context(cafile=pki.ca)
    context.load_cert_chain(pki.client_cert, pki.client_key)
    with bulkwire.BulkInsert(secure.url, secure.database, ssl_context=context, compress=compress,
                             buffer_size=4096, timeout=TIMEOUT) as bulk:
        for i, doc in enumerate(DOCS):
            bulk.store(doc, id=f"t/{i}")
    assert bytes(secure.requests[-1].body) == expected_body(compress)
    assert pump_calls == []  # Python's ssl: the Python sender
    bare = ssl.create_default_context(cafile=pki.ca)  # no client certificate: refused
    # Python's ssl may see the connection end before the server's alert (TLS 1.3 tells the
    # client after its handshake): a lost connection then, never a normal return
    with pytest.raises(errors.TransportError):
        with bulkwire.BulkInsert(secure.url, secure.database, ssl_context=bare, timeout=TIMEOUT) as bulk:
            bulk.store({"a": 1}, id="a/1")
    untrusting = ssl.create_default_context()
    untrusting.load_cert_chain(pki.client)
    with pytest.raises(errors.TLSError, match="certificate failed verification"):
        with bulkwire.BulkInsert(secure.url, secure.database, ssl_context=untrusting,
                                 timeout=TIMEOUT) as bulk:
            bulk.store({"a": 1}, id="a/1")


def test_bad_arguments_name_the_argument_and_the_file(pki, tmp_path):
    url = "https://127.0.0.1:9"
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(FileNotFoundError, match=r"certificate='.*missing\.pem' cannot be read"):
        bulkwire.BulkInsert(url, "db", certificate=missing)
    with pytest.raises(FileNotFoundError, match=r"^\[Errno 2\] ca='.*missing\.pem'"):
        bulkwire.BulkInsert(url, "db", ca=missing)
    with pytest.raises(IsADirectoryError, match="certificate key="):
        bulkwire.BulkInsert(url, "db", certificate=(pki.client_cert, str(tmp_path)))
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a PEM file\n")
    with pytest.raises(errors.TLSFileError, match=r"^certificate='.*garbage\.pem': .*no start line"):
        bulkwire.BulkInsert(url, "db", certificate=str(garbage))
    with pytest.raises(errors.TLSFileError, match=r"^ca='.*garbage\.pem': "):
        bulkwire.BulkInsert(url, "db", ca=str(garbage))
    with pytest.raises(errors.TLSFileError, match=r"^certificate='.*client\.crt': "):  # no key
        bulkwire.BulkInsert(url, "db", certificate=pki.client_cert)
    with pytest.raises(errors.TLSFileError, match=r"^certificate key='.*client-encrypted\.key': "):
        bulkwire.BulkInsert(url, "db", certificate=(pki.client_cert, pki.client_key_encrypted))
    with pytest.raises(errors.TLSFileError, match=r"^certificate key='.*rogue-client\.pem': .*"
                                                  r"does not match the certificate"):
        bulkwire.BulkInsert(url, "db", certificate=(pki.client_cert, pki.rogue_client))
    with pytest.raises(ValueError, match="a tuple of 3"):
        bulkwire.BulkInsert(url, "db", certificate=(pki.client, pki.client, pki.client))
    with pytest.raises(TypeError, match="certificate must be a path, not int"):
        bulkwire.BulkInsert(url, "db", certificate=3)
    context = ssl.create_default_context()
    with pytest.raises(ValueError, match="ssl_context cannot be combined with certificate and ca"):
        bulkwire.BulkInsert(url, "db", ssl_context=context, certificate=pki.client, ca=pki.ca)
    with pytest.raises(ValueError, match="ssl_context cannot be combined with ca"):
        bulkwire.BulkInsert(url, "db", ssl_context=context, ca=False)
    with pytest.raises(TypeError, match="ssl_context must be an ssl.SSLContext, not str"):
        bulkwire.BulkInsert(url, "db", ssl_context="context")
    with pytest.raises(ValueError, match="need an https:// URL"):
        bulkwire.BulkInsert("http://127.0.0.1:9", "db", certificate=pki.client)


# ---- TLS files that cannot be used: a TLSFileError naming the file, before any request ----

@pytest.fixture(scope="module")
def bad_files(pki, tmp_path_factory):
    """case -> (certificate, ca, argument named, file named, what the reason says)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    folder = tmp_path_factory.mktemp("bad")

    def write(name, *parts):
        path = folder / name
        path.write_bytes(b"".join(open(p, "rb").read() if isinstance(p, str) else p for p in parts))
        return str(path)

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    mismatched = write("mismatched.pem", pki.client_cert, pki.server_key)
    encrypted = write("encrypted.pem", pki.client_cert, pki.client_key_encrypted)
    rsa_path = write("rsa.key", rsa_key)
    empty = write("empty.pem", b"")
    der = write("der.crt", b"\x30\x82\x01\x00" + bytes(range(256)))
    fifo = str(folder / "fifo.pem")
    os.mkfifo(fifo)
    huge = str(folder / "huge.pem")
    with open(huge, "wb") as f:
        f.truncate(17 << 20)  # sparse: larger than any PEM file taken
    match = "the private key does not match the certificate"
    no_key = "it holds no PEM private key that can be read"
    no_cert = "it holds no PEM certificate that can be read"
    no_ca = "it holds no PEM CA certificate that can be read"
    return {
        "mismatched key, pair": ((pki.client_cert, pki.server_key), pki.ca, "certificate key",
                                 pki.server_key, match),
        "mismatched key, one file": (mismatched, pki.ca, "certificate", mismatched, match),
        "key of another type": ((pki.client_cert, rsa_path), pki.ca, "certificate key",
                                rsa_path, match),
        "encrypted key, pair": ((pki.client_cert, pki.client_key_encrypted), pki.ca,
                                "certificate key", pki.client_key_encrypted, "is encrypted"),
        "encrypted key, one file": (encrypted, pki.ca, "certificate", encrypted, "is encrypted"),
        "no key in the file": (pki.client_cert, pki.ca, "certificate", pki.client_cert, no_key),
        "a key as the certificate": (pki.client_key, pki.ca, "certificate", pki.client_key,
                                     no_cert),
        "a CA as the key": ((pki.client_cert, pki.ca), pki.ca, "certificate key", pki.ca, no_key),
        "an empty certificate": (empty, pki.ca, "certificate", empty, no_cert),
        "DER, not PEM": (der, pki.ca, "certificate", der, no_cert),
        "expired": (pki.client_expired, pki.ca, "certificate", pki.client_expired,
                    "the certificate has expired: it was valid until 2"),
        "not valid yet": (pki.client_not_yet_valid, pki.ca, "certificate",
                          pki.client_not_yet_valid, "the certificate is not valid yet: it is "
                                                    "valid from 2"),
        "a pipe as the certificate": (fifo, pki.ca, "certificate", fifo, "not a regular file"),
        "a device as the key": ((pki.client_cert, "/dev/zero"), pki.ca, "certificate key",
                                "/dev/zero", "not a regular file"),
        "a huge certificate": (huge, pki.ca, "certificate", huge, "larger than any PEM file"),
        "a key as the CA bundle": (pki.client, pki.client_key, "ca", pki.client_key, no_ca),
        "an empty CA bundle": (pki.client, empty, "ca", empty, no_ca),
        "a pipe as the CA bundle": (pki.client, fifo, "ca", fifo, "not a regular file"),
    }


def _within(seconds, call):
    """call()'s exception, once it raised within ``seconds``; a hang or a normal return
    fails the test."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "it hangs"
    assert "error" in outcome, f"it returned normally: {outcome.get('value')!r}"
    return outcome["error"]


def _cli(argv):
    """(exit code, what it printed)."""
    import contextlib
    import io

    from bulkwire.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def _dropin_insert(server, certificate, ca):
    """The drop-in's bulk insert of a DocumentStore with certificate_pem_path and
    trust_store_path; it stores a document when it gets that far."""
    from ravendb import DocumentStore

    import bulkwire.ravendb as dropin
    store = DocumentStore(urls=[server.url], database=server.database)
    store.certificate_pem_path = certificate
    store.trust_store_path = ca
    store.conventions.disable_topology_updates = True
    store.initialize()
    dropin.install()
    try:
        with store.bulk_insert() as bulk:
            bulk.store({"Name": "x"}, {"@id": "things/1"})
    finally:
        dropin.uninstall()
        store.close()


CASES = ["mismatched key, pair", "mismatched key, one file", "key of another type",
         "encrypted key, pair", "encrypted key, one file", "no key in the file",
         "a key as the certificate", "a CA as the key", "an empty certificate", "DER, not PEM",
         "expired", "not valid yet", "a pipe as the certificate", "a device as the key",
         "a huge certificate", "a key as the CA bundle", "an empty CA bundle",
         "a pipe as the CA bundle"]
# the official client's certificate_pem_path setter reads the file itself and takes only one
# PEM holding "BEGIN CERTIFICATE" and "PRIVATE KEY"; trust_store_path it takes as it is
DROP_IN_CASES = ["mismatched key, one file", "encrypted key, one file", "expired",
                 "not valid yet", "a key as the CA bundle", "an empty CA bundle",
                 "a pipe as the CA bundle"]
# Python's ssl (a build without OpenSSL) does not read a certificate's dates: the server
# refuses it, a TLSError naming the request
PYTHON_SSL_CASES = [case for case in CASES if case not in ("expired", "not valid yet")]


@pytest.mark.parametrize("case, entry", [
    *((case, entry) for entry in ("BulkInsert", "load_arrow", "cli") for case in CASES),
    *((case, "drop-in") for case in DROP_IN_CASES),
    *((case, "python ssl") for case in PYTHON_SSL_CASES)])
def test_a_tls_file_that_cannot_be_used_is_a_tls_file_error_naming_it(
        bad_files, secure, tmp_path, monkeypatch, case, entry):
    """Every way of giving the TLS files: a TLSFileError (a TLSError) naming the argument and
    the file and saying what is wrong, raised before any connection, so before any
    document; never a hang (a pipe is not waited on), never a normal return. The command
    line exits 2 (usage)."""
    certificate, ca, argument, path, reason = bad_files[case]
    pair = isinstance(certificate, tuple)
    if entry == "python ssl":
        monkeypatch.setattr(_core, "TLS_LIBRARY", None)
    secure.journal = []
    if entry == "cli":
        src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=5, dim=2)
        argv = ["load", str(src), "--url", secure.url, "--database", secure.database, "-q",
                "--ca", ca, "--certificate", certificate[0] if pair else certificate]
        code, said = _cli(argv + (["--key", certificate[1]] if pair else []))
        assert code == 2, said
        # the Python API's "argument='path': " in the command line's words ("--ca path: ")
        from bulkwire.cli import in_cli_words

        named = in_cli_words(f"{argument}={path!r}: {reason}")
        assert named != f"{argument}={path!r}: {reason}" or " " in argument, named
        assert named.split(": ")[0] + ": " in said and reason in said, said
    else:
        call = {
            "BulkInsert": lambda: bulkwire.BulkInsert(secure.url, secure.database,
                                                      certificate=certificate, ca=ca),
            "python ssl": lambda: bulkwire.BulkInsert(secure.url, secure.database,
                                                      certificate=certificate, ca=ca),
            "load_arrow": lambda: bulkwire.load_arrow(__import__("pyarrow").table({"id": [1, 2]}),
                                                      bulkwire.targets.ravendb(secure.url, secure.database, certificate=certificate, ca=ca)),
            "drop-in": lambda: _dropin_insert(secure, certificate, ca),
        }[entry]
        exc = _within(20.0, call)
        assert isinstance(exc, errors.TLSFileError) and isinstance(exc, errors.TLSError), repr(exc)
        assert isinstance(exc, ValueError) and repr(path) in str(exc)
        # a pipe, a device, a huge file: refused before any TLS library reads it
        prechecked = "regular file" in reason or "larger than" in reason
        if entry == "python ssl" and pair and argument == "certificate key" and not prechecked:
            # Python's ssl loads the pair at once and does not say which file it refused
            assert exc.argument == "certificate" and exc.path == certificate[0]
            assert str(exc).startswith(f"certificate={certificate[0]!r}: ")
        else:
            assert exc.path == path and exc.argument == argument
            assert str(exc).startswith(f"{argument}={path!r}: "), str(exc)
        if entry != "python ssl" or prechecked:  # Python's ssl words the rest its own way
            assert reason in str(exc), str(exc)
    assert secure.journal == [] and secure.requests == [] and secure.tls_failures == []


# ---- the failures of docs/reliability.md, over TLS ----

@pytest.fixture
def tls_faults(pki, monkeypatch):
    """FaultServer(faults, ...) on HTTPS, requiring the client certificate. The client's
    sockets get a small send buffer, like the server's receive buffer: otherwise the kernel's
    buffers take a whole compressed body before a server that holds it answers early."""
    shrink_send_buffers(monkeypatch)

    def make(faults, **kwargs):
        return FaultServer(faults, ssl_context=server_context(pki), **kwargs)
    return make


def _insert(server, pki, documents, before_close=None, **kwargs):
    """(closed normally, the BulkInsertError raised or None). ``before_close`` runs after the
    last store: a test of an early answer waits there until the answer went out, because once
    the whole body sits in the kernel's buffers a 2xx is an ordinary answer to the request
    (a compressed body can fit, and a fast encoder gets there before the server answers)."""
    bulk = bulkwire.BulkInsert(server.url, server.database, certificate=pki.client, ca=pki.ca,
                               buffer_size=16 << 10, max_buffers=2, **kwargs)
    try:
        for i in range(documents):
            bulk.store({"i": i, "text": NOISE[i % 1000:][:1400]}, id=f"d/{i}")
        if before_close is not None:
            before_close()
        bulk.close()
    except errors.BulkInsertError as exc:
        return bulk, exc
    return bulk, None


@pytest.mark.parametrize("compress", [False, "zlib"])
@pytest.mark.parametrize("fault, error", [
    ("stall", errors.TransportTimeoutError),
    ("early_2xx", errors.EarlyResponse),
    ("early_5xx", errors.ServerError),
    ("reset", errors.TransportError),
    ("disconnect", errors.BulkInsertError),
    ("5xx", errors.ServerError),
])
def test_a_failing_server_never_lets_a_tls_insert_return_normally(tls_faults, pki, fault, error, compress):
    release = threading.Event()
    with tls_faults({"bulk_insert": fault}, release=release, stall_seconds=8.0) as server:
        started = time.monotonic()
        timer = threading.Timer(0.5, release.set)
        timer.start()
        try:
            early = fault in ("early_2xx", "early_5xx")
            bulk, exc = _insert(server, pki, 3000, compress=compress,
                                before_close=(lambda: server.answered_early.wait(10)) if early else None,
                                timeout=0.5 if fault == "stall" else TIMEOUT)
        finally:
            timer.cancel()
        assert isinstance(exc, error), repr(exc)
        assert "https://127.0.0.1:" in str(exc) or isinstance(exc, errors.EarlyResponse), str(exc)
        assert not server.ok_to_whole_body(bulk.operation_id)
        assert time.monotonic() - started < 8.0
        with pytest.raises(errors.BulkInsertError):
            bulk.close()


@pytest.mark.parametrize("compress", [False, "zlib"])
@pytest.mark.parametrize("fault, error", [("2xx_at_array_end", None),
                                          ("garbage_at_array_end", errors.TLSError)])
def test_what_the_server_sends_after_the_last_data_byte_is_read_as_its_answer(
        tls_faults, pki, fault, error, compress):
    """Over bulkwire's TLS, something arrives after the last data byte and before the
    terminating chunk: a 201 is the answer to the whole body (the insert succeeds); bytes
    that are no TLS record are a TLSError naming OpenSSL's reason, which the terminating
    chunk, still sent, must not take away from the read of the answer."""
    with tls_faults({"bulk_insert": fault}) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, certificate=pki.client, ca=pki.ca,
                                   compress=compress, buffer_size=16 << 10, max_buffers=2,
                                   timeout=TIMEOUT)
        hold_the_end_until(bulk, server.answered_at_array_end.is_set)
        for i in range(300):
            bulk.store({"i": i, "text": NOISE[i % 1000:][:1400]}, id=f"d/{i}")
        if error is None:
            bulk.close()
            assert server.ok_to_whole_body(bulk.operation_id)
        else:
            with pytest.raises(error, match="TLS failed: .*(version|record)"):
                bulk.close()
        post, = server.posts
        assert post.answered_before_end and post.documents == 300


@pytest.mark.parametrize("sender", ["pump", "python-isal", "ssl_context"])
def test_a_2xx_while_the_last_data_chunk_is_being_written_over_tls_is_early(tls_faults, pki, sender):
    """As over HTTP (test_faults.py): the one, large data chunk is being written when the
    server answers 2xx, then reads the rest; bulkwire's TLS (the pump, and its session's
    sendall under the Python sender) and Python's ssl see the answer while the write waits."""
    if sender == "python-isal" and "python-isal" not in compression_backends():
        pytest.skip("the isal package is not installed")
    options = {"compress": "python-isal"} if sender == "python-isal" else {}
    if sender == "ssl_context":
        context = ssl.create_default_context(cafile=pki.ca)
        context.load_cert_chain(pki.client_cert, pki.client_key)
        options["ssl_context"] = context
    else:
        options.update(certificate=pki.client, ca=pki.ca)
    with tls_faults({"bulk_insert": "2xx_mid_chunk"}) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=8 << 20,
                                   timeout=TIMEOUT, **options)
        with pytest.raises(errors.EarlyResponse):
            for i in range(1000):  # text gzip cannot shrink much: the chunk stays large
                bulk.store({"i": i, "text": NOISE[(i * 1400) % (len(NOISE) - 1400):][:1400]},
                           id=f"d/{i}")
            bulk.close()
        assert bulk.stats.buffers == 1 and server.answered_early.wait(10)  # set once its send returned
        assert not server.ok_to_whole_body(bulk.operation_id)


def test_a_good_fault_server_over_tls_takes_the_whole_body(tls_faults, pki):
    with tls_faults({}) as server:
        bulk, exc = _insert(server, pki, 500, timeout=TIMEOUT)
        assert exc is None and server.ok_to_whole_body(bulk.operation_id)


def _ctrl_c_after(seconds):
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize("where", ["handshake", "next-operation-id", "close", "kill"])
def test_ctrl_c_at_every_tls_wait(tls_faults, pki, where):
    """Ctrl-C in the handshake (a server that never answers it), waiting for the operation
    id, for the answer to the body, for the kill: KeyboardInterrupt at once, and the insert
    failed for good."""
    if where == "handshake":
        listener = socket.create_server(("127.0.0.1", 0))
        server = None
        url = f"https://127.0.0.1:{listener.getsockname()[1]}"
        database = "db"
    else:
        stalled = {"next-operation-id": "next-operation-id", "close": "bulk_insert",
                   "kill": "kill"}[where]
        server = tls_faults({stalled: "stall"}, stall_seconds=8.0)
        url, database = server.url, server.database
    try:
        bulk = bulkwire.BulkInsert(url, database, certificate=pki.client, ca=pki.ca, timeout=TIMEOUT)
        if where in ("close", "kill"):
            bulk.store({"i": 0}, id="d/0")
        started = time.monotonic()
        timer = _ctrl_c_after(0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                if where == "close":
                    bulk.close()
                elif where == "kill":
                    bulk.abort()
                else:
                    bulk.store({"i": 0}, id="d/0")
        finally:
            timer.join()
        assert time.monotonic() - started < 5.0
        for _ in range(2):
            with pytest.raises(errors.BulkInsertAborted):
                bulk.close()
        if server is not None:
            assert not server.ok_to_whole_body(bulk.operation_id)
    finally:
        if server is not None:
            server.close()
        else:
            listener.close()


def test_a_server_that_never_answers_the_handshake_times_out():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"https://127.0.0.1:{listener.getsockname()[1]}"
        bulk = bulkwire.BulkInsert(url, "db", ca=False, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(errors.TransportTimeoutError):
            bulk.store({"i": 0}, id="d/0")
        assert time.monotonic() - started < 5.0


def test_a_server_that_speaks_no_tls_is_a_tls_error():
    """An http:// server behind an https:// URL: the handshake fails, clearly."""
    with LoopbackServer() as server:
        url = server.url.replace("http://", "https://")
        with pytest.raises(errors.TLSError, match="TLS failed: (wrong version number|packet length too long)"):
            with bulkwire.BulkInsert(url, server.database, ca=False, timeout=TIMEOUT) as bulk:
                bulk.store({"i": 0}, id="d/0")


def test_a_session_is_used_by_one_thread_at_a_time(pki, secure):
    """The pump refuses a session that is in use, and a closed one; the session outlives
    nothing it needs (its context is kept alive by it)."""
    from bulkwire.tls import TlsSettings
    settings = TlsSettings(pki.client, pki.ca)
    host, port = secure.url.rsplit("/", 1)[1].rsplit(":", 1)
    conn = settings.http_connection(host, int(port), 5.0)
    conn.connect()
    session = conn.sock.session
    del settings
    conn.request("GET", f"/databases/{secure.database}/operations/next-operation-id")
    assert conn.getresponse().status == 200
    queue = BulkWriter()._queue
    session.close()
    with pytest.raises(ValueError, match="closed"):
        _core.pump_body(queue, conn.sock.fileno(), None, None, session)
    with pytest.raises(TypeError, match="tls must be a TlsConnection or None"):
        _core.pump_body(queue, conn.sock.fileno(), None, None, "session")
    conn.close()


def test_the_https_example_of_bulk_insert_md_runs():
    """docs/bulk_insert.md's HTTPS example, executed as it is written."""
    import pathlib
    import re
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "bulk_insert.md").read_text()
    section = doc.split("## HTTPS and client certificates", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1 and "make_pki" in blocks[0]
    exec(compile(blocks[0], "docs/bulk_insert.md", "exec"), {})


def test_the_tls_benchmark_runs():
    """benchmarks/bench_tls.py, quoted by docs/performance.md, at a tiny size (not timed)."""
    import os
    import subprocess
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    done = subprocess.run([sys.executable, "bench_tls.py", "--docs", "30", "--dim", "4",
                           "--rounds", "1"], cwd=bench, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split()[:2] for line in done.stdout.splitlines() if line.endswith("x")]
    assert rows == [[m, c] for m in ("plain", "gzip") for c in ("http", "tls", "tls-ssl_context")]
