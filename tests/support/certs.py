"""Certificates for TLS tests, made with ``cryptography`` at test time (nothing checked in): a CA, a server
certificate for 127.0.0.1 and localhost, and client certificates, written as PEM files (and PKCS12 on
request) with the paths each client library takes."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Issued"]


@dataclass
class Issued:
    """One certificate and its key as files: ``cert`` (PEM), ``key`` (PEM, PKCS#8), ``pem`` (key + cert)."""

    cert: Path
    key: Path
    pem: Path
    subject: x509.Name
    _key: ec.EllipticCurvePrivateKey
    _cert: x509.Certificate

    def pkcs12(self, path: Path, password: str) -> Path:
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"key", self._key, self._cert, None, serialization.BestAvailableEncryption(password.encode())))
        return path


def _name(**parts: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
            "L": NameOID.LOCALITY_NAME, "C": NameOID.COUNTRY_NAME}
    # DER order is the reverse of how the subject reads (C ... CN), as CAs issue them: Java then prints CN first
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(parts.items())])


class CertificateAuthority:
    """A CA in ``directory``: ``ca.pem`` is what clients and the broker trust."""

    def __init__(self, directory: Path, common_name: str = "Headwater Test CA") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(CN=common_name, O="Headwater")
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=2))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.cert = self.dir / "ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, stem: str, server: bool = False, key_password: str | None = None, client_too: bool = False,
              **subject: str) -> Issued:
        """A certificate named ``stem`` for ``subject`` (``CN="alice", O="Org"``); a server one carries the
        subject alternative names 127.0.0.1 and localhost (``client_too``: it may also be presented as a client's,
        as a Connect worker's is when it calls another)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name(**subject)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] * server
                  + [ExtendedKeyUsageOID.CLIENT_AUTH] * (not server or client_too))
        builder = (x509.CertificateBuilder().subject_name(name).issuer_name(self.name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            import ipaddress

            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode()) if key_password
            else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        paths = (self.dir / f"{stem}.crt", self.dir / f"{stem}.key", self.dir / f"{stem}.pem")
        paths[0].write_bytes(cert_pem)
        paths[1].write_bytes(key_pem)
        paths[2].write_bytes(key_pem + cert_pem)
        for p in paths[1:]:
            p.chmod(0o600)
        return Issued(paths[0], paths[1], paths[2], name, key, cert)
