"""A TLS-only PostgreSQL for the tests, with certificates from tests/support/certs.py: the server's for
localhost and 127.0.0.1, client certificates whose CN is the database user (certificate authentication),
and a second CA that signed none of them (a wrong root certificate).

pg_hba.conf holds ``hostssl`` lines only: a plaintext connection has no line to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.certs import CertificateAuthority
from support.pgserver import PostgresServer, start_private_postgres

__all__ = ["CERT_USER", "PASSWORD_USER", "TlsFiles", "start_tls_postgres"]

CERT_USER = "cdc_cert"  # authenticates with its client certificate (pg_hba: cert)
PASSWORD_USER = "cdc_pw"  # authenticates with a password over TLS (pg_hba: scram-sha-256)


@dataclass
class TlsFiles:
    """The client side's files, as a connector config names them."""

    ca: Path  # the CA that signed the server's certificate
    wrong_ca: Path  # a CA that signed nothing here
    same_name_ca: Path  # another, of the same name as ``ca`` (a CA made anew): OpenSSL's "signature failure"
    cert: Path  # CERT_USER's certificate, with an unencrypted key (0600)
    key: Path
    encrypted_cert: Path  # another of CERT_USER's, whose key is encrypted with key_password
    encrypted_key: Path
    key_password: str


def start_tls_postgres(folder: Path) -> tuple[PostgresServer, TlsFiles]:
    """A running server with ssl=on and only hostssl lines; the client files in ``folder``. The superuser
    (``server.user``) is trusted over TLS, for the tests' own setup connections."""
    ca, wrong = CertificateAuthority(folder / "ca"), CertificateAuthority(folder / "wrong-ca", "Another CA")
    same_name = CertificateAuthority(folder / "same-name-ca")
    server_cert = ca.issue("server", server=True, CN="localhost")
    client = ca.issue("client", CN=CERT_USER)
    key_password = "key-pass-0b5e"
    encrypted = ca.issue("client-encrypted", key_password=key_password, CN=CERT_USER)
    files = TlsFiles(ca=ca.cert, wrong_ca=wrong.cert, same_name_ca=same_name.cert, cert=client.cert, key=client.key,
                     encrypted_cert=encrypted.cert, encrypted_key=encrypted.key, key_password=key_password)
    server = start_private_postgres(
        {"ssl": "on", "ssl_cert_file": "'server.crt'", "ssl_key_file": "'server.key'", "ssl_ca_file": "'ca.pem'",
         "password_encryption": "'scram-sha-256'"},
        hba=["# TLS only: no host or local line, so plaintext matches nothing",
             f"hostssl all {CERT_USER} 127.0.0.1/32 cert",
             "hostssl all postgres 127.0.0.1/32 trust",
             "hostssl all all 127.0.0.1/32 scram-sha-256"],
        files={"server.crt": server_cert.cert.read_bytes(), "server.key": server_cert.key.read_bytes(),
               "ca.pem": ca.cert.read_bytes()})
    return server, files
