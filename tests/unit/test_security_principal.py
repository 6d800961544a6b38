"""Issue 26: a TLS client's principal as Kafka derives it: the subject DN as Java's X500Principal.getName()
writes it (RFC 2253), mapped by ssl.principal.mapping.rules (Kafka's SslPrincipalMapper); the JAAS values
PLAIN reads its users from."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from headwater.broker.config.broker_config import load_broker_config
from headwater.broker.security.mechanism import AuthenticationFailed
from headwater.broker.security.plain import PlainServer, plain_users
from headwater.broker.security.principal import NoMatchingRule, SslPrincipalMapper, rfc2253
from headwater.kafka.jaas import JaasError, parse_jaas


def test_subject_is_written_as_java_writes_it() -> None:
    """The reference's measured case: Java prints the e-mail attribute as OID=#DER hex, CN first."""
    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                      x509.NameAttribute(NameOID.LOCALITY_NAME, "SF"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Org, Inc"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "U"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                      x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c")])
    assert rfc2253(name) == "1.2.840.113549.1.9.1=#16056140622e63,CN=alice,OU=U,O=Org\\, Inc,L=SF,ST=CA,C=US"


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("DEFAULT", "CN=writeuser,OU=Unknown,O=Unknown", "CN=writeuser,OU=Unknown,O=Unknown"),
    # Kafka's documentation example
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
     "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT", "CN=x,O=y", "CN=x,O=y"),
    ("RULE:^CN=([^,]+).*$/$1/U", "CN=bob,O=z", "BOB"),
    ("RULE:^CN=([^,]+),OU=([^,]+).*$/$2\\/$1/", "CN=bob,OU=ops,O=z", "ops/bob"),  # an escaped slash
    ("RULE:^CN=([^,]+).*$/$12/", "CN=bob,O=z", "bob2"),  # $12 with one group: group 1, then "2" (Kafka)
    (" RULE:^O=(.*)$/$1/ , DEFAULT ", "CN=bob", "CN=bob"),  # spaces around rules
])
def test_mapping_rules_as_kafka_applies_them(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_matching_rule_refuses() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=only")


@pytest.mark.parametrize("rules", ["RULE:abc", "RULE:^(x/$1/Q", "NOPE"])
def test_a_bad_rule_is_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        SslPrincipalMapper(rules)


def test_jaas_values_with_comments_escapes_and_several_modules() -> None:
    modules = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required /* users */\n'
                         '  username="admin" password="a\\"b" user_alice="alice-secret"; // broker\n'
                         'other.Module optional debug=true;')
    assert [(m.class_name, m.flag) for m in modules] == [
        ("org.apache.kafka.common.security.plain.PlainLoginModule", "required"), ("other.Module", "optional")]
    assert modules[0].options == {"username": "admin", "password": 'a"b', "user_alice": "alice-secret"}
    assert modules[1].options == {"debug": "true"}


@pytest.mark.parametrize("text", ["", "only.Class", "a.B mandatory;", 'a.B required user="x"', "a.B required x=;"])
def test_bad_jaas_is_refused_without_quoting_values(text: str) -> None:
    with pytest.raises(JaasError) as info:
        parse_jaas(text)
    assert '"x"' not in str(info.value)


@pytest.mark.parametrize(("token", "ok"), [
    (b"\0alice\0alice-secret", True),
    (b"alice\0alice\0alice-secret", True),  # authzid = the user
    (b"bob\0alice\0alice-secret", False),  # authzid another user
    (b"\0alice\0wrong", False),
    (b"\0nobody\0alice-secret", False),
    (b"\0\0alice-secret", False),
    (b"\0alice\0", False),
    (b"\0alice\0alice-secret\0x", False),
])
def test_plain_exchange(token: bytes, ok: bool) -> None:
    server = PlainServer({"alice": b"alice-secret"})
    if ok:
        assert server.step(token) == b"" and server.complete and server.principal == "User:alice"
    else:
        with pytest.raises(AuthenticationFailed):
            server.step(token)
        assert not server.complete


def test_a_kafka_properties_file_with_a_continued_jaas_line(tmp_path: Path) -> None:
    """The SASL_PLAINTEXT example of docs/SECURITY.md, as Kafka's files write it (a value over two lines)."""
    path = tmp_path / "server.properties"
    path.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
                    "sasl.enabled.mechanisms=PLAIN\n"
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                    '    username="admin" password="admin-secret" user_admin="admin-secret" '
                    'user_alice="alice-secret";\n')
    [settings] = load_broker_config(path).listener_settings().values()
    assert plain_users(settings) == {"admin": b"admin-secret", "alice": b"alice-secret"}
