"""The development CA and certificates (qim/dev/certs.py): made once per
directory and reused, remade when they expire (a new CA re-issues every leaf), keys
0600, and the certificates say what the services check (the service name in a SAN URI,
the client port's loopback names)."""

from __future__ import annotations

import datetime
import os
import ssl
import stat
from pathlib import Path

from cryptography import x509

from qim.dev.certs import CLIENT_PORT, DEV_SERVICES, DevCa, ensure_dev_pki
from qim.net.tls import SERVICE_URI_PREFIX, TlsContexts


def pem(path: str) -> bytes:
    return Path(path).read_bytes()


def test_made_once_and_reused(tmp_path):
    pki = ensure_dev_pki(tmp_path)
    files = {name: pem(pki.files(name).cert) for name in (CLIENT_PORT, *DEV_SERVICES)}
    ca = pem(pki.ca_file)
    again = ensure_dev_pki(tmp_path)
    assert pem(again.ca_file) == ca
    assert {name: pem(again.files(name).cert) for name in files} == files
    for name in ("ca", CLIENT_PORT, *DEV_SERVICES):
        assert stat.S_IMODE(os.stat(tmp_path / f"{name}.key").st_mode) == 0o600


def test_leaves_name_their_service_and_the_client_port_names_loopback(tmp_path):
    pki = ensure_dev_pki(tmp_path)
    for service in DEV_SERVICES:
        cert = x509.load_pem_x509_certificate(pem(pki.files(service).cert))
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.UniformResourceIdentifier)
        assert uris == [SERVICE_URI_PREFIX + service]
    port = x509.load_pem_x509_certificate(pem(pki.files(CLIENT_PORT).cert))
    sans = port.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    # what the services load them with accepts them
    TlsContexts(pki.files("writer"))
    TlsContexts(pki.files(CLIENT_PORT))


def test_an_expiring_leaf_is_reissued_and_a_new_ca_reissues_every_leaf(tmp_path):
    pki = ensure_dev_pki(tmp_path)
    ca = DevCa.load(tmp_path / "ca.crt", tmp_path / "ca.key")
    old_writer, old_mailbox = pem(pki.files("writer").cert), pem(pki.files("mailbox").cert)
    # a writer leaf that expires in a day (within RENEW_BEFORE)
    ca.issue("writer", Path(pki.files("writer").cert), Path(pki.files("writer").key), days=1,
             not_before=datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1))
    short = pem(pki.files("writer").cert)
    ensure_dev_pki(tmp_path)
    assert pem(pki.files("writer").cert) not in (short, old_writer)
    assert pem(pki.files("mailbox").cert) == old_mailbox  # the others stay
    # a CA about to expire: a new CA and new leaves under it
    DevCa.create(days=2).save(tmp_path / "ca.crt", tmp_path / "ca.key")
    old_ca = pem(pki.ca_file)
    ensure_dev_pki(tmp_path)
    assert pem(pki.ca_file) != old_ca
    new_ca = x509.load_pem_x509_certificate(pem(pki.ca_file))
    for name in (CLIENT_PORT, *DEV_SERVICES):
        leaf = x509.load_pem_x509_certificate(pem(pki.files(name).cert))
        assert leaf.issuer == new_ca.subject
        leaf.verify_directly_issued_by(new_ca)


def test_a_leaf_of_another_ca_or_a_broken_file_is_reissued(tmp_path):
    pki = ensure_dev_pki(tmp_path)
    other = DevCa.create("someone else")
    other.issue("session", Path(pki.files("session").cert), Path(pki.files("session").key))
    Path(pki.files("gateway").cert).write_text("garbage")
    Path(pki.files("writer").key).write_bytes(Path(pki.files("mailbox").key).read_bytes())  # not its key
    ensure_dev_pki(tmp_path)
    TlsContexts(pki.files("writer"))  # loads again: certificate and key match
    ctx = ssl.create_default_context(cafile=pki.ca_file)
    ca = x509.load_pem_x509_certificate(pem(pki.ca_file))
    for name in ("session", "gateway"):
        x509.load_pem_x509_certificate(pem(pki.files(name).cert)).verify_directly_issued_by(ca)
    assert ctx.get_ca_certs()[0]["subject"] == ((("organizationName", "QIM development"),),
                                                (("commonName", "QIM development CA"),))
