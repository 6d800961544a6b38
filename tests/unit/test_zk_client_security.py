"""The ZooKeeper client's security settings (zookeeper.ssl.*, the JAAS Client section, zookeeper.set.acl) and
Kafka's default znode ACLs, without ZooKeeper: every bad setting is refused naming its property."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import ACL, Id, Permissions
from support.certs import CertificateAuthority

from headwater.broker.cluster.zk_security import default_acls, sensitive_path, zk_security
from headwater.broker.config.broker_config import BrokerConfig, load_broker_config
from headwater.properties import ConfigError

CREATOR_ALL = ACL(Permissions.ALL, Id("auth", ""))
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


def _config(*props: str) -> BrokerConfig:
    return load_broker_config(None, ["zookeeper.connect=127.0.0.1:2181", "broker.id=1", *props])


def _jaas(tmp_path: Path, text: str) -> str:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    return f"java.security.auth.login.config={path}"


@pytest.mark.parametrize("path, sensitive", [
    ("/config/users/alice", True), ("/config/users", True), ("/config/brokers/1", True),
    ("/config/brokers/<default>", True), ("/delegation_token/tokens/t1", True),
    ("/config/topics/t", False), ("/brokers/ids/1", False), ("/config/changes/config_change_0000000001", False),
    ("/kafka-acl/Topic/t", False), ("/controller", False),
])
def test_kafkas_default_acls(path: str, sensitive: bool) -> None:
    assert sensitive_path(path) is sensitive
    assert default_acls(True, path) == ([CREATOR_ALL] if sensitive else [CREATOR_ALL, WORLD_READ])
    assert default_acls(False, path) == [ACL(Permissions.ALL, Id("world", "anyone"))]
    assert default_acls(True, "/consumers") == [ACL(Permissions.ALL, Id("world", "anyone"))]  # Kafka keeps it open


def test_sasl_from_the_jaas_client_section(tmp_path: Path) -> None:
    jaas = _jaas(tmp_path, f'KafkaServer {{ x required; }};\nClient {{ {DIGEST} required username="kafka" '
                           'password="s3cret"; };\n')
    security = zk_security(_config(jaas, "zookeeper.set.acl=true"))
    assert security.sasl == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "s3cret"}
    assert security.set_acl and security.tls is None
    assert zk_security(_config(jaas, "zookeeper.sasl.client=false")).sasl is None  # Kafka's switch
    assert zk_security(_config()).sasl is None  # no JAAS file: no SASL, as Kafka


@pytest.mark.parametrize("props, problem", [
    (["zookeeper.set.acl=true"], r"zookeeper\.set\.acl: true, but the ZooKeeper connection has no identity"),
    (["zookeeper.ssl.client.enable=true", "zookeeper.ssl.crl.enable=true"], r"zookeeper\.ssl\.crl\.enable: "),
    (["zookeeper.ssl.client.enable=true", "zookeeper.ssl.truststore.location=/nonexistent/ca.pem"],
     r"zookeeper\.ssl\.truststore\.location: "),
    (["zookeeper.ssl.client.enable=true", "zookeeper.ssl.enabled.protocols=TLSv9"],
     r"zookeeper\.ssl\.enabled\.protocols: TLSv9"),
    (["java.security.auth.login.config=/nonexistent/jaas.conf"], r"java\.security\.auth\.login\.config: cannot read"),
])
def test_bad_settings_name_their_property(props: list[str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        zk_security(_config(*props))


@pytest.mark.parametrize("section, problem", [
    (f'Other {{ {DIGEST} required username="u" password="p"; }};', r"has no 'Client' section"),
    ('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };',
     r"must hold one .*DigestLoginModule"),
    (f'Client {{ {DIGEST} required username="u"; }};', r"needs password"),
    ("Client {", r"is not a JAAS file"),
])
def test_bad_jaas_client_sections(tmp_path: Path, section: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"java\.security\.auth\.login\.config: .*{problem}"):
        zk_security(_config(_jaas(tmp_path, section)))


def test_tls_from_zookeeper_ssl_properties(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    client = ca.issue("broker", CN="broker")
    store = client.pkcs12(tmp_path / "broker.p12", "store-pass")
    # store types unset: from the extension (.p12: PKCS12, .pem: PEM), as ZooKeeper's
    security = zk_security(_config("zookeeper.ssl.client.enable=true", f"zookeeper.ssl.keystore.location={store}",
                                   "zookeeper.ssl.keystore.password=store-pass",
                                   f"zookeeper.ssl.truststore.location={ca.cert}", "zookeeper.set.acl=true"))
    assert security.tls is not None and security.tls.check_hostname  # HTTPS: Kafka's default
    assert security.set_acl and security.describe() == "TLS, secure ACLs"
    with pytest.raises(ConfigError, match=r"zookeeper\.ssl\.keystore\.location: not a PKCS12 store, or the password"):
        zk_security(_config("zookeeper.ssl.client.enable=true", f"zookeeper.ssl.keystore.location={store}",
                            "zookeeper.ssl.keystore.password=wrong"))
    locked = ca.issue("locked", key_password="key-pass", CN="broker")  # a PEM keystore: the password is the key's
    assert zk_security(_config("zookeeper.ssl.client.enable=true", f"zookeeper.ssl.keystore.location={locked.pem}",
                               "zookeeper.ssl.keystore.password=key-pass")).tls is not None
    unchecked = zk_security(_config("zookeeper.ssl.client.enable=true", f"zookeeper.ssl.truststore.location={ca.cert}",
                                    "zookeeper.ssl.endpoint.identification.algorithm="))
    assert unchecked.tls is not None and not unchecked.tls.check_hostname
