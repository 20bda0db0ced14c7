"""Bulk insert over TLS without TLS arguments: bulkwire's own TLS with the system's trusted
CAs (here a self-signed certificate made here, trusted through SSL_CERT_FILE, which OpenSSL
reads for the system's CAs). The C pump sends the body through the TLS session; a body the
pump cannot send (a gzip backend outside the C core) goes as the HTTP chunks framed by the
C core (``BulkWriter.http_chunks``) through the session's ``sendall``. Client certificates,
``ca=`` and ``ssl_context=``: test_tls_client_cert.py."""
import os
import shutil
import ssl
import subprocess
import time

import pytest

import bulkwire
from bulkwire import _core
from bulkwire.bulk import BulkWriter, compression_backends
from bulkwire.testing import LoopbackServer
from build_extras import needs
from test_tls_client_cert import pump_calls  # noqa: F401 - the fixture

TIMEOUT = 30


def make_certificate(directory):
    """(certificate, key) files of a self-signed certificate for 127.0.0.1."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    if shutil.which("openssl"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        return cert, key
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(private.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName(
                       [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(private, hashes.SHA256()))
    with open(cert, "wb") as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key, "wb") as f:
        f.write(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return cert, key


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def https(certificate, monkeypatch):
    """(server, its https:// URL): the loopback server on HTTPS; the system's trusted CAs
    are the certificate alone."""
    cert, key = certificate
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with LoopbackServer(ssl_context=server_side) as server:
        assert server.url.startswith("https://")
        yield server, server.url




@needs("openssl")
@pytest.mark.parametrize("compress", [False, *compression_backends()])
def test_bulk_insert_over_tls_sends_the_c_framed_chunks(https, pump_calls, compress):
    server, url = https
    with bulkwire.BulkInsert(url, server.database, compress=compress, buffer_size=4096,
                             timeout=TIMEOUT) as bulk:
        for i in range(300):
            bulk.store({"i": i, "pad": "t" * 50}, id=f"t/{i}")
    request = server.requests[-1]
    assert request.complete and request.error is None and bulk.operation_id == request.op_id
    assert len(server.documents) == 300 and server.documents["t/299"]["i"] == 299
    assert (request.headers.get("Content-Encoding") == "gzip") == bool(compress)
    stats = bulk.stats
    assert stats.wire_bytes == sum(request.wire_chunks) and stats.pieces == len(request.wire_chunks) > 10
    # the pump sends through the TLS session whenever the body can be pumped
    assert len(pump_calls) == 1 and isinstance(pump_calls[0], _core.TlsConnection)


@needs("openssl")
def test_load_parquet_over_tls_sends_the_file_targets_body(https, pump_calls, tmp_path):
    server, url = https
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=400, dim=8)
    r = bulkwire.load_parquet(src,
                              bulkwire.targets.ravendb(url, server.database, buffer_size=2048),
                              batch_rows=64)
    body = open(bulkwire.load_parquet(src, bulkwire.targets.request_file(str(tmp_path / "b.json"))).target, "rb").read()
    assert r.rows == 400 and bytes(server.requests[-1].body) == body
    assert len(pump_calls) == 1 and isinstance(pump_calls[0], _core.TlsConnection)


def test_without_the_certificate_among_the_system_cas_the_server_is_refused(https, monkeypatch, tmp_path):
    server, url = https
    other = make_certificate(str(tmp_path))[0]
    monkeypatch.setenv("SSL_CERT_FILE", other)
    with pytest.raises(bulkwire.TLSError, match="failed verification"):
        with bulkwire.BulkInsert(url, server.database, timeout=TIMEOUT) as bulk:
            bulk.store({"i": 0}, id="t/0")


def test_tls_failure_reaches_the_producer(https):
    server, url = https
    server.fail_after_bytes = 1 << 14
    with pytest.raises(bulkwire.BulkInsertError, match="Simulated failure on the server"):
        with bulkwire.BulkInsert(url, server.database, buffer_size=4096, timeout=TIMEOUT) as bulk:
            for i in range(2000):
                bulk.store({"i": i, "pad": "f" * 100}, id=f"f/{i}")


def test_an_early_answer_over_tls_is_read_whole(https):
    """The server answers before the end of the body: over TLS the sender tells an answer
    from TLS records of its own (session tickets) by peeking at the decrypted stream, and
    the answer is read whole."""
    server, url = https
    server.finish_after_bytes = 1 << 14
    bulk = bulkwire.BulkInsert(url, server.database, buffer_size=4096, timeout=TIMEOUT)
    with pytest.raises(bulkwire.errors.EarlyResponse, match=r"finished POST .* \(HTTP 2\d\d"):
        for i in range(5000):
            bulk.store({"i": i, "pad": "e" * 100}, id=f"e/{i}")
        # Until the answer went out: once the whole body sits in the kernel's buffers, a 2xx
        # is an ordinary answer to the request, and a fast encoder can get there first.
        deadline = time.monotonic() + TIMEOUT
        while not any(r.error == "finished early" for r in list(server.requests)):
            assert time.monotonic() < deadline, "the server never answered early"
            time.sleep(0.01)
        bulk.close()
