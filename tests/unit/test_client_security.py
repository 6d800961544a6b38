"""Kafka client security properties (a ``--command-config`` file) mapped to aiokafka's settings: SASL
credentials out of ``sasl.jaas.config``, TLS trust and client certificates from PEM and PKCS12 stores (made
by tests/support/certs.py), and every key that is unknown, unsupported or inconsistent refused by name."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from support.certs import CertificateAuthority

from headwater.connect.kafka.security import client_security, parse_jaas_config, security_settings

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_plaintext_and_neutral_keys() -> None:
    assert security_settings({}) == {"security_protocol": "PLAINTEXT"}
    assert security_settings({"security.protocol": "plaintext", "client.id": "ops"}) == \
        {"security_protocol": "PLAINTEXT"}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_from_jaas_config(mechanism: str) -> None:
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
             "sasl.jaas.config": f'{SCRAM} required username="alice" password="a;b \\"c\\"";'}
    assert security_settings(props) == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                                        "sasl_plain_username": "alice", "sasl_plain_password": 'a;b "c"'}


def test_plain_and_librdkafka_names() -> None:
    got = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "bob", "sasl.password": "pw"})
    assert (got["sasl_mechanism"], got["sasl_plain_username"], got["sasl_plain_password"]) == ("PLAIN", "bob", "pw")
    assert parse_jaas_config(f"{PLAIN} required\n  username=bob\n  password=\"x y\";") == \
        (PLAIN, {"username": "bob", "password": "x y"})


@pytest.mark.parametrize(("props", "named"), [
    ({"bootstrap.servers": "x:1"}, "bootstrap.servers"),
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"security.protocol": "TLS"}, "security.protocol=TLS"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config: required"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b";'}, "does not serve sasl.mechanism=PLAIN"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": f'{SCRAM} required username="a";'}, "password missing"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b" tokenauth="true";'}, "tokenauth"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": 'com.example.Other required username="a" password="b";'}, "com.example.Other"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": f'{SCRAM} username="a" password="b"'}, "sasl.jaas.config: expected"),
    ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism: a SASL setting, but security.protocol=PLAINTEXT"),
    ({"ssl.truststore.location": "/x"}, "ssl.truststore.location: a TLS setting"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks", "ssl.truststore.type": "JKS"},
     "ssl.truststore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.pem"},
     "ssl.truststore.location=/nonexistent.pem"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
     "ssl.endpoint.identification.algorithm=dns"),
])
def test_bad_properties_are_refused_by_name(props: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError) as info:
        security_settings(props)
    assert named in str(info.value)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(d)
    client = ca.issue("client", key_password="keypw", CN="alice")
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    truststore = d / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], serialization.BestAvailableEncryption(b"storepw")))
    return {"ca.pem": ca.cert, "client.pem": client.pem, "truststore.p12": truststore,
            "keystore.p12": client.pkcs12(d / "keystore.p12", "storepw")}


def _subjects(context: ssl.SSLContext) -> list[str]:
    """The common names of the certificates the context trusts."""
    certs: list[dict[str, Any]] = context.get_ca_certs()
    return [value for c in certs for rdn in c["subject"] for key, value in rdn if key == "commonName"]


def test_pem_truststore_and_keystore(pki: dict[str, Path]) -> None:
    got = security_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.jaas.config": f'{SCRAM} required username="a" password="b";',
                             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["ca.pem"]),
                             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["client.pem"]),
                             "ssl.key.password": "keypw"})
    context = got["ssl_context"]
    assert got["security_protocol"] == "SASL_SSL" and _subjects(context) == ["Headwater Test CA"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    with pytest.raises(ValueError, match="ssl.keystore"):  # the key's password is wrong
        security_settings({"security.protocol": "SSL", "ssl.keystore.location": str(pki["client.pem"]),
                           "ssl.key.password": "nope"})


def test_pkcs12_stores_and_no_hostname_check(pki: dict[str, Path]) -> None:
    context = security_settings({"security.protocol": "SSL", "ssl.truststore.location": str(pki["truststore.p12"]),
                                 "ssl.truststore.type": "PKCS12", "ssl.truststore.password": "storepw",
                                 "ssl.keystore.location": str(pki["keystore.p12"]), "ssl.keystore.type": "PKCS12",
                                 "ssl.keystore.password": "storepw",
                                 "ssl.endpoint.identification.algorithm": ""})["ssl_context"]
    assert _subjects(context) == ["Headwater Test CA"] and not context.check_hostname
    with pytest.raises(ValueError, match="ssl.truststore.location=.*PKCS12"):
        security_settings({"security.protocol": "SSL", "ssl.truststore.location": str(pki["truststore.p12"]),
                           "ssl.truststore.password": "wrong"})


def test_enabled_protocols_bound_the_tls_versions(pki: dict[str, Path]) -> None:
    base = {"security.protocol": "SSL", "ssl.truststore.location": str(pki["ca.pem"])}
    context = security_settings(base)["ssl_context"]
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    context = security_settings({**base, "ssl.enabled.protocols": "TLSv1.3"})["ssl_context"]
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(ValueError, match="ssl.enabled.protocols=TLSv1.1"):
        security_settings({**base, "ssl.enabled.protocols": "TLSv1.1"})


def test_client_security_reads_only_the_security_keys_of_a_clients_config() -> None:
    props = {"acks": "all", "linger.ms": "5", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": f'{PLAIN} required username="u" password="p";'}
    assert client_security(props) == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                                      "sasl_plain_username": "u", "sasl_plain_password": "p"}
    assert client_security({"acks": "all"}) == {"security_protocol": "PLAINTEXT"}
    with pytest.raises(ValueError, match="sasl.kerberos.service.name"):  # an unknown sasl.* key is not ignored
        client_security({"security.protocol": "SASL_SSL", "sasl.kerberos.service.name": "kafka"})
