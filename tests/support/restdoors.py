"""What the tests of the REST API's doors share: a CA with a worker certificate (PEM and PKCS12) and a
client certificate, Kafka's JAAS and credentials files for basic authentication, TLS client contexts,
and the worker properties that put them together."""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from pathlib import Path

from .certs import CertificateAuthority, Issued

__all__ = ["BASIC_AUTH_EXTENSION", "Pki", "basic", "basic_auth_files", "https_settings", "make_pki"]

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
USERS = {"admin": "s3cret-Pa55", "ops": "pass:with:colons"}
KEYSTORE_PASSWORD = "keystore-pw"


@dataclass
class Pki:
    ca: CertificateAuthority
    worker: Issued  # for 127.0.0.1 and localhost; also a client's, for worker-to-worker calls
    worker_p12: Path
    client: Issued

    def context(self, client: bool = False, trust: bool = True) -> ssl.SSLContext:
        """A client context trusting the CA (``trust=False``: the system's CAs only), presenting the client
        certificate when ``client``."""
        ctx = ssl.create_default_context(cafile=str(self.ca.cert) if trust else None)
        if client:
            ctx.load_cert_chain(str(self.client.pem))
        return ctx


def make_pki(directory: Path) -> Pki:
    ca = CertificateAuthority(directory)
    worker = ca.issue("worker", server=True, client_too=True, CN="connect-worker")
    return Pki(ca, worker, worker.pkcs12(directory / "worker.p12", KEYSTORE_PASSWORD), ca.issue("client", CN="ops"))


def https_settings(pki: Pki, prefix: str = "listeners.https.", pkcs12: bool = False,
                   client_auth: str = "none") -> dict[str, str]:
    """The keystore (PEM, or PKCS12 with its password), the truststore and ``ssl.client.auth`` under ``prefix``."""
    keystore = ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.worker_p12),
                 "ssl.keystore.password": KEYSTORE_PASSWORD} if pkcs12 else
                {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.worker.pem)})
    settings = {**keystore, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca.cert),
                "ssl.client.auth": client_auth}
    return {prefix + k: v for k, v in settings.items()}


def basic_auth_files(directory: Path, users: dict[str, str] = USERS) -> Path:
    """Kafka's files as its docs write them: the JAAS file (returned) and the ``user: password`` file it names."""
    directory.mkdir(parents=True, exist_ok=True)
    credentials = directory / "connect.password"
    credentials.write_text("# Kafka Connect REST users\n" + "".join(f"{u}: {p}\n" for u, p in users.items()))
    jaas = directory / "connect_jaas.conf"
    jaas.write_text("KafkaConnect {\n"
                    "  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n"
                    f'  file="{credentials}";\n'
                    "};\n")
    return jaas


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
