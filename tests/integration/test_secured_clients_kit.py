"""The plugin kit on a secured broker: an ``EmbeddedBroker`` whose only listener is SASL_SSL (PLAIN), its helpers
(create_topic, produce, wait_for_records) and an ``EmbeddedWorker`` given the same ``client_settings`` run a
file source connector."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.certs import CertificateAuthority

from headwater.testing import EmbeddedBroker, EmbeddedWorker
from headwater.testing.rest import ConnectClient

pytestmark = pytest.mark.timeout(120)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_embedded_broker_and_worker_over_sasl_ssl(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("broker", server=True, CN="localhost")
    broker_settings = {
        "listeners": "SASL_SSL://127.0.0.1:0", "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN} required user_kit="kit-secret";',
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem)}
    client_settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                       "sasl.jaas.config": f'{PLAIN} required username="kit" password="kit-secret";',
                       "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert)}
    with EmbeddedBroker(tmp_path / "data", broker_settings, client_settings) as broker:
        topic = broker.create_topic()
        broker.produce(topic, ["a", "b"])
        assert [r.text for r in broker.wait_for_records(topic, 2)] == ["a", "b"]
        worker = EmbeddedWorker(broker.bootstrap, settings=broker.client_settings).start()
        try:
            source, lines = tmp_path / "in.txt", [f"line {i}" for i in range(20)]
            source.write_text("".join(f"{line}\n" for line in lines))
            out = broker.create_topic()
            ConnectClient(worker.url).create("file", {"connector.class": "FileStreamSourceConnector",
                                                      "file": str(source), "topic": out})
            assert [r.json() for r in broker.wait_for_records(out, 20)] == lines  # JsonConverter strings
        finally:
            assert worker.stop() == []
        assert broker.end_offsets(topic) == {0: 2}
