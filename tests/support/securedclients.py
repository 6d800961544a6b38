"""A broker for the secured-client tests: PLAINTEXT (the test's own checks), SASL_SSL with SCRAM-SHA-512 and an
mTLS listener (``MTLS``, SSL with ``ssl.client.auth=required``), certificates by support.certs; and the Kafka
client properties that reach each, as users copy them from Kafka's and their vendors' documentation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority
from support.workerproc import BROKER_OVERRIDES

__all__ = ["PASSWORD", "SCRAM", "USER", "Secured", "secured_broker"]

USER, PASSWORD = "connect", "connect-secret"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass
class Secured:
    """A broker with PLAINTEXT (for the test's own checks), SASL_SSL (SCRAM-SHA-512) and MTLS listeners."""

    proc: BrokerProcess
    ca: CertificateAuthority
    other_ca: CertificateAuthority  # trusted by nobody
    keystore: Path  # the worker's client certificate and key, PKCS12, password "storepw"

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.proc.ports[listener]}"

    def scram(self, password: str = PASSWORD) -> dict[str, str]:
        """A SASL_SSL/SCRAM client's properties, as Confluent Cloud's and MSK's documentation write them."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": f'{SCRAM} required username="{USER}" password="{password}";',
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.cert)}

    def mtls(self) -> dict[str, str]:
        return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.cert),
                "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": "storepw"}


@contextmanager
def secured_broker(base: Path) -> Iterator[Secured]:
    """A started broker with the three listeners and the SCRAM user ``connect``; stopped on leaving."""
    ca, other = CertificateAuthority(base / "pki"), CertificateAuthority(base / "other")
    server = ca.issue("broker", server=True, CN="localhost")
    keystore = ca.issue("worker", CN="worker", O="Headwater").pkcs12(base / "worker.p12", "storepw")
    with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
                       "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
                       "sasl.enabled.mechanisms=SCRAM-SHA-512", "listener.name.mtls.ssl.client.auth=required",
                       "ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}",
                       "ssl.truststore.type=PEM", f"ssl.truststore.location={ca.cert}") as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              PASSWORD.encode())
        admin.alter_user_scram_credentials([upsert])[USER].result(30)
        yield Secured(proc, ca, other, keystore)


