"""A small PKI for trying TLS against the loopback server (:mod:`bulkwire.testing`), made
with the ``cryptography`` package (``pip install cryptography``): a CA, a server certificate
for 127.0.0.1 and a client certificate signed by it, and a second, untrusted CA with a client
certificate of its own. Keys are EC P-256; certificates are valid for a day.

>>> import tempfile
>>> pki = make_pki(tempfile.mkdtemp())
>>> context = server_context(pki)   # requires a client certificate signed by pki.ca
>>> open(pki.client, "rb").read().count(b"-----BEGIN")
2
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from types import SimpleNamespace

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _pem_key(key, password=None):
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _certificate(subject, issuer_name, issuer_key, public_key, *, ca, usage, ip=None,
                 valid_from=datetime.timedelta(minutes=-5), valid_for=datetime.timedelta(days=1)):
    """A certificate valid from ``valid_from`` after now, for ``valid_for``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now + valid_from)
               .not_valid_after(now + valid_from + valid_for)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if ip is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path, *parts):
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)
    return path


def make_pki(directory: str) -> SimpleNamespace:
    """Writes the PKI's files into ``directory``; returns their paths: ``ca``,
    ``server_cert``, ``server_key``, ``client`` (certificate and key in one PEM),
    ``client_cert``, ``client_key``, ``client_key_encrypted`` (passphrase ``secret``),
    ``rogue_ca``, ``rogue_client`` (signed by ``rogue_ca``), ``client_expired`` (signed by
    ``ca``, valid for a day that ended yesterday) and ``client_not_yet_valid`` (valid from
    tomorrow), each a certificate and its key in one PEM."""
    def path(name):
        return os.path.join(directory, name)

    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("bulkwire test CA", "bulkwire test CA", ca_key, ca_key.public_key(),
                      ca=True, usage=None)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _certificate("127.0.0.1", "bulkwire test CA", ca_key, server_key.public_key(),
                          ca=False, ip="127.0.0.1",
                          usage=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _certificate("bulkwire client", "bulkwire test CA", ca_key, client_key.public_key(),
                          ca=False, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue_ca = _certificate("rogue CA", "rogue CA", rogue_key, rogue_key.public_key(), ca=True,
                            usage=None)
    rogue_client_key = ec.generate_private_key(ec.SECP256R1())
    rogue_client = _certificate("bulkwire client", "rogue CA", rogue_key,
                                rogue_client_key.public_key(), ca=False,
                                usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    day = datetime.timedelta(days=1)
    expired_key = ec.generate_private_key(ec.SECP256R1())
    expired = _certificate("bulkwire client", "bulkwire test CA", ca_key,
                           expired_key.public_key(), ca=False,
                           usage=[ExtendedKeyUsageOID.CLIENT_AUTH], valid_from=-2 * day)
    early_key = ec.generate_private_key(ec.SECP256R1())
    early = _certificate("bulkwire client", "bulkwire test CA", ca_key, early_key.public_key(),
                         ca=False, usage=[ExtendedKeyUsageOID.CLIENT_AUTH], valid_from=day)
    return SimpleNamespace(
        ca=_write(path("ca.pem"), ca.public_bytes(pem)),
        server_cert=_write(path("server.pem"), server.public_bytes(pem)),
        server_key=_write(path("server.key"), _pem_key(server_key)),
        client=_write(path("client.pem"), client.public_bytes(pem), _pem_key(client_key)),
        client_cert=_write(path("client.crt"), client.public_bytes(pem)),
        client_key=_write(path("client.key"), _pem_key(client_key)),
        client_key_encrypted=_write(path("client-encrypted.key"), _pem_key(client_key, b"secret")),
        rogue_ca=_write(path("rogue-ca.pem"), rogue_ca.public_bytes(pem)),
        rogue_client=_write(path("rogue-client.pem"), rogue_client.public_bytes(pem),
                            _pem_key(rogue_client_key)),
        client_expired=_write(path("client-expired.pem"), expired.public_bytes(pem),
                              _pem_key(expired_key)),
        client_not_yet_valid=_write(path("client-not-yet-valid.pem"), early.public_bytes(pem),
                                    _pem_key(early_key)),
    )


def server_context(pki: SimpleNamespace, *, require_client: bool = True,
                   maximum: "ssl.TLSVersion | None" = None) -> ssl.SSLContext:
    """The server's side, for ``LoopbackServer(ssl_context=...)``: its certificate and, with
    ``require_client``, a client certificate signed by ``pki.ca`` required; ``maximum``
    caps the TLS version."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    if maximum is not None:
        context.maximum_version = maximum
    return context
