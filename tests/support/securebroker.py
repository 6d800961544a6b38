"""A broker with every kind of listener, for the security tests and the TLS bench: PLAINTEXT, SSL (one-way
TLS), MTLS (SSL with ``ssl.client.auth=required`` and a principal mapping rule), SASL_PLAINTEXT and
SASL_SSL with PLAIN; and the settings each client library takes to reach each listener."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority, Issued

__all__ = ["PLAIN_JAAS", "PLAIN_USERS", "SecureBroker", "start_secure_broker"]

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
         'username="admin" password="admin-secret" '
         + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")
# MTLS: CN=alice,OU=...,O=... -> alice (lower-cased), anything else as its whole DN
MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT"


@dataclass
class SecureBroker:
    proc: BrokerProcess
    ca: CertificateAuthority
    clients: dict[str, Issued]  # client certificates by name (alice, mallory)

    def port(self, listener: str) -> int:
        return self.proc.ports[listener]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.port(listener)}"

    # -- client settings, per library ----------------------------------------------------------------

    def confluent(self, listener: str, user: str = "alice", password: str | None = None,
                  cert: str = "alice") -> dict[str, Any]:
        """librdkafka's properties (confluent-kafka, kcat ``-X``) for ``listener``."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener)}
        protocol = "SSL" if listener == "MTLS" else listener
        conf["security.protocol"] = protocol
        if protocol in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.ca.cert)
        if listener == "MTLS":
            conf["ssl.certificate.location"] = str(self.clients[cert].cert)
            conf["ssl.key.location"] = str(self.clients[cert].key)
        if protocol.startswith("SASL"):
            conf.update({"sasl.mechanism": "PLAIN", "sasl.username": user,
                         "sasl.password": PLAIN_USERS[user] if password is None else password})
        return conf

    def kafka_python(self, listener: str, user: str = "alice", password: str | None = None,
                     cert: str = "alice") -> dict[str, Any]:
        """kafka-python's (and, with ssl_context, aiokafka's) keyword arguments for ``listener``."""
        protocol = "SSL" if listener == "MTLS" else listener
        kw: dict[str, Any] = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            kw["ssl_context"] = self.ssl_context(cert if listener == "MTLS" else None)
        if protocol.startswith("SASL"):
            kw.update({"sasl_mechanism": "PLAIN", "sasl_plain_username": user,
                       "sasl_plain_password": PLAIN_USERS[user] if password is None else password})
        return kw

    def ssl_context(self, cert: str | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca.cert))
        if cert is not None:
            ctx.load_cert_chain(str(self.clients[cert].cert), str(self.clients[cert].key))
        return ctx


def start_secure_broker(base: Path, *extra: str) -> SecureBroker:
    """A started broker with the five listeners (ports chosen by the system); ``extra`` are more --set's."""
    ca = CertificateAuthority(base / "certs")
    server = ca.issue("server", server=True, key_password="server-key-pw", CN="localhost", O="Headwater")
    clients = {"alice": ca.issue("alice", CN="alice", OU="eng", O="Headwater"),
               "mallory": ca.issue("mallory", CN="Mallory", OU="ops", O="Elsewhere")}
    proc = BrokerProcess(
        base / "data",
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL",
        "inter.broker.listener.name=PLAINTEXT",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}", "ssl.key.password=server-key-pw",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={ca.cert}",
        "listener.name.mtls.ssl.client.auth=required",
        f"listener.name.mtls.ssl.principal.mapping.rules={MAPPING_RULES}",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
        "num.partitions=1", "group.initial.rebalance.delay.ms=0",
        *extra)
    proc.start()
    return SecureBroker(proc, ca, clients)
