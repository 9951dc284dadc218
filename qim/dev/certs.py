"""Development CA and certificates for the stack (docs/decisions/0022), made with
`cryptography` (the dev extra; the services themselves only load PEM files with `ssl`).

`ensure_dev_pki(dir)` keeps, under `dir` (the stack's `tls/`):
- `ca.crt`, `ca.key`: the development CA (EC P-256), the trust anchor of the client
  port (QIM_CA_FILE) and of internal RPC (QIM_INTERNAL_CA);
- `client-port.crt/.key`: the gateway's client-port certificate for `localhost`,
  `127.0.0.1` and `::1` (QIM_GATEWAY_TLS_CERT/KEY);
- `<service>.crt/.key` for every name of DEV_SERVICES: every service of qim/topology.py
  that serves or calls internal RPC; the identity of one service on internal RPC, a SAN
  URI `qim://service/<service>` (QIM_INTERNAL_TLS_CERT/KEY, and QIM_QIMCTL_TLS_CERT/KEY
  for the operator's qimctl).
Files are reused across `make up` restarts; a CA or leaf that expires within
RENEW_BEFORE, is unreadable, or a leaf not issued by the current CA, is made again (a new
CA re-issues every leaf). Keys are written mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qim.net.tls import SERVICE_URI_PREFIX, TlsFiles
from qim.topology import QIMCTL, SERVICES, speaks_rpc

DEV_SERVICES = tuple(name for name in SERVICES if speaks_rpc(name))
CLIENT_PORT = "client-port"
CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
_LOOPBACK_SANS = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                  x509.IPAddress(ipaddress.ip_address("::1"))]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "QIM development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass
class DevCa:
    """A CA certificate and its key; `issue()` signs leaves with it."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, cn: str = "QIM development CA", days: int = CA_DAYS) -> "DevCa":
        """A new self-signed CA valid for `days`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return cls(cert, key)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> "DevCa":
        """Read a CA written by `save` (ValueError/OSError when unreadable)."""
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC key")
        return cls(cert, key)

    def save(self, cert_path: Path, key_path: Path) -> None:
        """Write the certificate (PEM) and the key (PEM, 0600)."""
        _write(key_path, _key_pem(self.key), private=True)
        _write(cert_path, self.cert.public_bytes(serialization.Encoding.PEM))

    def pem(self) -> bytes:
        """The CA certificate as PEM."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, service: Optional[str], cert_path: Path, key_path: Path, days: int = LEAF_DAYS,
              not_before: Optional[datetime.datetime] = None) -> None:
        """A leaf for `service` (SAN URI qim://service/NAME, client and server use) or, with
        None, the client-port server certificate; both also name localhost/127.0.0.1/::1."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or (_now() - datetime.timedelta(minutes=5))
        sans: list[x509.GeneralName] = list(_LOOPBACK_SANS)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH]
        if service is not None:
            sans.insert(0, x509.UniformResourceIdentifier(SERVICE_URI_PREFIX + service))
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        cert = (x509.CertificateBuilder().subject_name(_name(service or "localhost")).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        _write(key_path, _key_pem(key), private=True)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _fresh(cert: x509.Certificate) -> bool:
    return cert.not_valid_after_utc - RENEW_BEFORE > _now() >= cert.not_valid_before_utc


def _leaf_ok(ca: DevCa, cert_path: Path, key_path: Path, service: Optional[str]) -> bool:
    """The leaf exists with its own key, is fresh, was signed by `ca` and names `service`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
        cert.verify_directly_issued_by(ca.cert)  # issuer name and signature
        spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
            return False  # a key of another leaf (a half-finished write)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    if service is not None and SERVICE_URI_PREFIX + service not in sans.get_values_for_type(
            x509.UniformResourceIdentifier):
        return False
    return _fresh(cert)


@dataclass(frozen=True)
class DevPki:
    """Paths of the files `ensure_dev_pki` keeps in `dir`."""

    dir: Path

    @property
    def ca_file(self) -> str:
        """The CA certificate (QIM_CA_FILE and QIM_INTERNAL_CA)."""
        return str(self.dir / "ca.crt")

    def files(self, service: str) -> TlsFiles:
        """Certificate, key and CA of `service` (or CLIENT_PORT: no CA, no client certificates)."""
        ca = "" if service == CLIENT_PORT else self.ca_file
        return TlsFiles(str(self.dir / f"{service}.crt"), str(self.dir / f"{service}.key"), ca)

    def service_env(self, service: str) -> dict[str, str]:
        """QIM_INTERNAL_* variables of one service process."""
        f = self.files(service)
        return {"QIM_INTERNAL_CA": f.ca, "QIM_INTERNAL_TLS_CERT": f.cert, "QIM_INTERNAL_TLS_KEY": f.key}

    def client_env(self) -> dict[str, str]:
        """What clients and the operator need: QIM_CA_FILE, and qimctl's identity."""
        f = self.files(QIMCTL)
        return {"QIM_CA_FILE": self.ca_file, "QIM_INTERNAL_CA": f.ca, "QIM_QIMCTL_TLS_CERT": f.cert,
                "QIM_QIMCTL_TLS_KEY": f.key}


def ensure_dev_pki(dir: Path, services: Iterable[str] = DEV_SERVICES) -> DevPki:
    """Create or reuse the development CA and certificates under `dir` (module doc)."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    pki = DevPki(dir)
    ca_cert, ca_key = dir / "ca.crt", dir / "ca.key"
    try:
        ca = DevCa.load(ca_cert, ca_key)
        if not _fresh(ca.cert):
            raise ValueError("expiring")
    except (OSError, ValueError):
        ca = DevCa.create()
        ca.save(ca_cert, ca_key)
    for name in (CLIENT_PORT, *services):
        f = pki.files(name)
        service = None if name == CLIENT_PORT else name
        if not _leaf_ok(ca, Path(f.cert), Path(f.key), service):
            ca.issue(service, Path(f.cert), Path(f.key))
    return pki
