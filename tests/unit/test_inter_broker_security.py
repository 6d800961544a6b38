"""The client side of the inter-broker listener (broker/security/inter_broker.py) from a broker's properties, as
Kafka's broker builds it: which listener, its TLS settings as a client, the SASL mechanism and login; every
unusable setting refused at start naming the property."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from support.certs import CertificateAuthority

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.security.inter_broker import inter_broker_listener, inter_broker_security
from headwater.properties import ConfigError

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
BASE = {"listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.external.plain.sasl.jaas.config":
            f'{PLAIN} required username="broker" password="pw" user_broker="pw";'}


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig.model_validate({**BASE, **props})


def test_the_listener_is_named_or_found_by_its_protocol() -> None:
    # no listener named PLAINTEXT: the first one whose protocol is security.inter.broker.protocol's (PLAINTEXT)
    assert inter_broker_listener(_config()) == "INTERNAL"
    assert inter_broker_listener(_config(**{"security.inter.broker.protocol": "SASL_PLAINTEXT"})) == "EXTERNAL"
    plain = inter_broker_security(_config())
    assert (plain.listener, plain.protocol, plain.ssl_context, plain.mechanism) == ("INTERNAL", "PLAINTEXT", None, None)


def test_sasl_takes_the_mechanism_and_the_login_of_the_listeners_jaas_entry() -> None:
    sasl = inter_broker_security(_config(**{"inter.broker.listener.name": "EXTERNAL",
                                            "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
    assert (sasl.protocol, sasl.mechanism, sasl.username, sasl.password) == ("SASL_PLAINTEXT", "PLAIN", "broker", "pw")
    assert "pw" not in repr(sasl)
    scram = inter_broker_security(_config(**{
        "inter.broker.listener.name": "EXTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.external.scram-sha-512.sasl.jaas.config": f'{SCRAM} required username="b2" password="s";'}))
    assert (scram.mechanism, scram.username, scram.password) == ("SCRAM-SHA-512", "b2", "s")


@pytest.mark.parametrize(("props", "error"), [
    ({}, "sasl.mechanism.inter.broker.protocol: required: the inter-broker listener EXTERNAL is SASL_PLAINTEXT"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "sasl.mechanism.inter.broker.protocol: SCRAM-SHA-256 is not enabled on the inter-broker listener EXTERNAL"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     "listener.name.external.scram-sha-512.sasl.jaas.config: required for inter-broker SASL SCRAM-SHA-512"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN",
      "listener.name.external.plain.sasl.jaas.config": f'{PLAIN} required user_broker="pw";'},
     "listener.name.external.plain.sasl.jaas.config: username and password missing: the login this broker uses "
     "towards the other brokers on listener EXTERNAL"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
      "listener.name.external.scram-sha-512.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'},
     "listener.name.external.scram-sha-512.sasl.jaas.config: SCRAM-SHA-512 needs the login "
     f"module {SCRAM}"),
])
def test_unusable_sasl_settings_are_refused_naming_the_property(props: dict[str, str], error: str) -> None:
    with pytest.raises(ConfigError) as info:
        inter_broker_security(_config(**{"inter.broker.listener.name": "EXTERNAL", **props}))
    assert str(info.value).startswith(error)


def test_tls_uses_the_listeners_ssl_settings_as_a_client(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    cert = ca.issue("broker", server=True, client_too=True, CN="broker")
    tls = {"listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SSL",
           "inter.broker.listener.name": "INTERNAL", "ssl.keystore.type": "PEM",
           "ssl.keystore.location": str(cert.pem), "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(ca.cert)}
    context = inter_broker_security(BrokerConfig.model_validate(tls)).ssl_context
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    no_host_check = BrokerConfig.model_validate(
        {**tls, "listener.name.internal.ssl.endpoint.identification.algorithm": ""})
    context = inter_broker_security(no_host_check).ssl_context
    assert context is not None and not context.check_hostname
    assert inter_broker_security(BrokerConfig.model_validate(tls), check_only=True).ssl_context is None
    missing = BrokerConfig.model_validate(
        {**tls, "listener.name.internal.ssl.truststore.location": str(tmp_path / "no")})
    with pytest.raises(ConfigError, match=r"^listener\.name\.internal\.ssl\.truststore\.location: cannot read"):
        inter_broker_security(missing)
