"""A TLS-only PostgreSQL for the tests and the certificates it takes: a CA, a server certificate for
localhost and 127.0.0.1, client certificates whose CN is the database user (certificate authentication),
and a second CA that signed none of them (a wrong root certificate). Keys are EC P-256 (cheap to make).

pg_hba.conf holds ``hostssl`` lines only: a plaintext connection has no line to match.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from support.pgserver import PostgresServer, start_private_postgres

__all__ = ["CERT_USER", "PASSWORD_USER", "Authority", "TlsFiles", "start_tls_postgres"]

CERT_USER = "cdc_cert"  # authenticates with its client certificate (pg_hba: cert)
PASSWORD_USER = "cdc_pw"  # authenticates with a password over TLS (pg_hba: scram-sha-256)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str = "") -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


class Authority:
    """A CA that signs leaf certificates."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False, encipher_only=False,
                                                  decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def issue(self, common_name: str, hosts: tuple[str, ...] = (),
              client: bool = False) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                         else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


@dataclass
class TlsFiles:
    """The client side's files, as a connector config names them."""

    ca: Path  # the CA that signed the server's certificate
    wrong_ca: Path  # a CA that signed nothing here
    cert: Path  # CERT_USER's certificate
    key: Path  # its key, unencrypted (0600)
    encrypted_key: Path  # the same key, encrypted with key_password
    key_password: str


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    path.chmod(0o600)  # libpq refuses a private key others can read
    return path


def start_tls_postgres(folder: Path) -> tuple[PostgresServer, TlsFiles]:
    """A running server with ssl=on and only hostssl lines, its roles made; the client files in ``folder``.
    The superuser (``server.user``) is trusted over TLS, for the tests' own setup connections."""
    ca, wrong = Authority("headwater test CA"), Authority("another CA")
    server_cert, server_key = ca.issue("localhost", ("localhost", "127.0.0.1"))
    client_cert, client_key = ca.issue(CERT_USER, client=True)
    key_password = "key-pass-0b5e"
    files = TlsFiles(ca=_write(folder / "ca.pem", _pem(ca.cert)), wrong_ca=_write(folder / "wrong-ca.pem",
                                                                                   _pem(wrong.cert)),
                     cert=_write(folder / "client.pem", _pem(client_cert)),
                     key=_write(folder / "client.key", _key_pem(client_key)),
                     encrypted_key=_write(folder / "client-encrypted.key", _key_pem(client_key, key_password)),
                     key_password=key_password)
    server = start_private_postgres(
        {"ssl": "on", "ssl_cert_file": "'server.pem'", "ssl_key_file": "'server.key'", "ssl_ca_file": "'ca.pem'",
         "password_encryption": "'scram-sha-256'"},
        hba=["# TLS only: no host or local line, so plaintext matches nothing",
             f"hostssl all {CERT_USER} 127.0.0.1/32 cert",
             "hostssl all postgres 127.0.0.1/32 trust",
             "hostssl all all 127.0.0.1/32 scram-sha-256"],
        files={"server.pem": _pem(server_cert), "server.key": _key_pem(server_key), "ca.pem": _pem(ca.cert)})
    return server, files
