"""Issue 26: listeners by name with Kafka's security properties. A listener the broker cannot secure as
written is a start-up error naming the key (never a silent plaintext fallback); Metadata answers with the
address of the listener the client connected on; PKCS12 keystores and inline PEM truststores; a plaintext
client on a TLS port is refused while the broker serves others; the SASL exchange as Kafka runs it
(SaslHandshake v0 raw tokens and v1 SaslAuthenticate, nothing else before authentication, failures
delayed, refused alike for unknown users and wrong passwords, counted in /metrics), KIP-368 sessions."""

from __future__ import annotations

import logging
import re
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority
from support.rawkafka import Conn, framed, metadata_req, read_exactly
from support.securebroker import SecureBroker, start_secure_broker

from headwater.testing import free_port, wait_until

pytestmark = pytest.mark.timeout(120)

SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 58, 34, 33
REAUTH_MS = 3000  # the SASL_PLAINTEXT listener's connections.max.reauth.ms here
_METRICS_AT = re.compile(r"Prometheus metrics at (http://\S+/metrics)")


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("listeners"), "metrics.listener=http://127.0.0.1:0",
                                 f"listener.name.sasl_plaintext.connections.max.reauth.ms={REAUTH_MS}",
                                 "connection.failed.authentication.delay.ms=300")
    try:
        yield broker
    finally:
        broker.proc.stop()


# -- start-up errors --------------------------------------------------------------------------------------

def _start_fails(tmp_path: Path, *settings: str) -> str:
    done = subprocess.run([sys.executable, "-m", "headwater", "broker", "--set", f"log.dirs={tmp_path / 'data'}",
                           *[a for s in settings for a in ("--set", s)]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "invalid configuration" in done.stderr
    return done.stderr


@pytest.mark.parametrize(("settings", "named"), [
    (["listeners=SASL_SSL_X://127.0.0.1:0"], "listener name SASL_SSL_X has no security protocol"),
    (["listener.security.protocol.map=PLAINTEXT:TLS"], "listener.security.protocol.map"),
    (["listener.name.nosuch.ssl.keystore.location=/x"], "listener.name.nosuch.ssl.keystore.location: no listener"),
    (["listener.name.plaintext.ssl.keystore.colour=red"], "listener.name.plaintext.ssl.keystore.colour: unknown"),
    (["ssl.keystore.colour=red"], "ssl.keystore.colour: unknown property"),
    (["inter.broker.listener.name=INTERNAL"], "inter.broker.listener.name: INTERNAL is not a listener"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI"],
     "sasl.enabled.mechanisms: GSSAPI: Kerberos is not supported"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0"], "listener.name.sasl_plaintext.plain.sasl.jaas.config: required"),
    (["listeners=SSL://127.0.0.1:0"], "ssl.keystore.location: required"),
])
def test_a_listener_that_cannot_be_served_as_written_stops_the_start(tmp_path: Path, settings: list[str],
                                                                     named: str) -> None:
    assert named in _start_fails(tmp_path, *settings)


def test_a_jks_keystore_is_refused_with_how_to_convert_it(tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 64)
    err = _start_fails(tmp_path, "listeners=SSL://127.0.0.1:0", f"ssl.keystore.location={jks}",
                       "ssl.keystore.password=secret-store-pw")
    assert "ssl.keystore.location:" in err and "keytool -importkeystore" in err
    assert "secret-store-pw" not in err


def test_a_wrong_key_password_names_the_key_and_not_the_password(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("server", server=True, key_password="right-pw", CN="localhost")
    err = _start_fails(tmp_path, "listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PEM",
                       f"ssl.keystore.location={server.pem}", "ssl.key.password=wrong-pw")
    assert "ssl.keystore.location:" in err and "wrong-pw" not in err


# -- listeners and addresses ------------------------------------------------------------------------------

def test_metadata_answers_with_the_listener_the_client_connected_on(tmp_path: Path) -> None:
    """advertised.listeners by name: the TLS clients are told localhost (the certificate's name), the
    plaintext ones 127.0.0.1, each with its own listener's port."""
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("server", server=True, CN="localhost")
    plain, tls = free_port(), free_port()
    with BrokerProcess(tmp_path / "data", f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
                       f"advertised.listeners=SSL://localhost:{tls},PLAINTEXT://127.0.0.1:{plain}",
                       "ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}", port=plain):
        plain_admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        tls_admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls}", "security.protocol": "SSL",
                                 "ssl.ca.location": str(ca.cert)})
        over_plain, over_tls = plain_admin.list_topics(timeout=20), tls_admin.list_topics(timeout=20)
        assert [(b.host, b.port) for b in over_plain.brokers.values()] == [("127.0.0.1", plain)]
        assert [(b.host, b.port) for b in over_tls.brokers.values()] == [("localhost", tls)]
        described = tls_admin.describe_cluster(request_timeout=20).result(30)  # DescribeCluster too
        assert [(n.host, n.port) for n in described.nodes] == [("localhost", tls)]


def test_unadvertised_listeners_advertise_their_bound_ports(secure: SecureBroker) -> None:
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with Conn(secure.port(listener)) as conn:
            if listener == "SASL_PLAINTEXT":
                _authenticate(conn, "alice", "alice-secret")
            resp = conn.call(metadata_req([]), MetadataResponse)
            coordinator = conn.call(FindCoordinatorRequest[2](key="any-group", key_type=0),
                                    FindCoordinatorResponse)
        assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", secure.port(listener))]
        assert (coordinator.host, coordinator.port) == ("127.0.0.1", secure.port(listener))


def test_pkcs12_keystore_and_inline_pem_truststore(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("server", server=True, CN="localhost")
    client = ca.issue("client", CN="carol", O="Headwater")
    store = server.pkcs12(tmp_path / "server.p12", "store-pw")
    with BrokerProcess(tmp_path / "data", "listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PKCS12",
                       f"ssl.keystore.location={store}", "ssl.keystore.password=store-pw",
                       "ssl.truststore.type=PEM", f"ssl.truststore.certificates={ca.cert.read_text()}",
                       "ssl.client.auth=required") as proc:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{proc.ports['SSL']}", "security.protocol": "SSL",
                          "ssl.ca.location": str(ca.cert), "ssl.certificate.location": str(client.cert),
                          "ssl.key.location": str(client.key)}).list_topics(timeout=20)
        assert md.brokers


def test_a_plaintext_client_on_a_tls_port_is_refused_and_others_are_served(secure: SecureBroker) -> None:
    with Conn(secure.port("SSL"), timeout=10) as conn:
        conn.send(ApiVersionsRequest[0]())
        conn.assert_closed(10)
    with Conn(secure.port("PLAINTEXT")) as conn:
        assert conn.call(metadata_req([]), MetadataResponse).brokers
    assert AdminClient(secure.confluent("SSL")).list_topics(timeout=20).brokers


# -- the SASL exchange --------------------------------------------------------------------------------------

def _plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def _authenticate(conn: Conn, user: str, password: str, version: int = 2) -> SaslAuthenticateResponse:
    handshake = conn.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == 0 and handshake.mechanisms == ["PLAIN"]
    return conn.call(SaslAuthenticateRequest[version](auth_bytes=_plain_token(user, password)),
                     SaslAuthenticateResponse)


def _scrape(secure: SecureBroker) -> str:
    m = wait_until(lambda: _METRICS_AT.search(secure.proc.log_text(since_start=True)), "the metrics log line")
    with urllib.request.urlopen(m.group(1), timeout=10) as resp:
        return resp.read().decode()


def _failed_authentications(secure: SecureBroker, listener: str) -> float:
    m = re.search(rf'kafka_server_socket_server_metrics_failed_authentication_total{{listener="{listener}"}} (\S+)',
                  _scrape(secure))
    return float(m.group(1)) if m else 0.0


def test_sasl_v1_exchange_then_requests(secure: SecureBroker) -> None:
    with Conn(secure.port("SASL_PLAINTEXT")) as conn:
        resp = _authenticate(conn, "alice", "alice-secret", version=1)
        assert (resp.error_code, resp.session_lifetime_ms) == (0, REAUTH_MS)
        assert conn.call(metadata_req([]), MetadataResponse).brokers


@pytest.mark.parametrize("user", ["alice", "nobody"])
def test_a_refused_authentication_says_the_same_for_unknown_users_is_delayed_counted_and_closes(
        secure: SecureBroker, user: str) -> None:
    before = _failed_authentications(secure, "SASL_PLAINTEXT")
    with Conn(secure.port("SASL_PLAINTEXT")) as conn:
        started = time.monotonic()
        resp = _authenticate(conn, user, "wrong-password")
        assert time.monotonic() - started >= 0.29  # connection.failed.authentication.delay.ms=300
        assert (resp.error_code, resp.error_message) == (SASL_AUTHENTICATION_FAILED,
                                                         "Authentication failed: Invalid username or password")
        conn.assert_closed(10)
    assert _failed_authentications(secure, "SASL_PLAINTEXT") == before + 1
    assert "wrong-password" not in secure.proc.log_text()


def test_sasl_v0_handshake_then_raw_tokens(secure: SecureBroker) -> None:
    """After a v0 SaslHandshake the tokens go bare, as old clients send them: PLAIN's success is an empty
    frame; a refusal closes the connection without an answer."""
    with Conn(secure.port("SASL_PLAINTEXT")) as conn:
        assert conn.call(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
        conn.send_raw(framed(_plain_token("alice", "alice-secret")))
        assert read_exactly(conn.sock, 4) == struct.pack(">i", 0)
        assert conn.call(metadata_req([]), MetadataResponse).brokers
    with Conn(secure.port("SASL_PLAINTEXT")) as conn:
        assert conn.call(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
        conn.send_raw(framed(_plain_token("alice", "wrong")))
        assert conn.assert_closed(10) == b""


def test_only_authentication_is_served_before_it(secure: SecureBroker) -> None:
    with Conn(secure.port("SASL_PLAINTEXT"), timeout=10) as conn:
        conn.send(ApiVersionsRequest[0]())
        assert conn.recv_frame()  # ApiVersions is answered
        conn.send(metadata_req([]))
        assert conn.assert_closed(10) == b""
    with Conn(secure.port("SASL_PLAINTEXT"), timeout=10) as conn:
        resp = conn.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-512"), SaslHandshakeResponse)
        assert (resp.error_code, resp.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        conn.assert_closed(10)


def test_sasl_on_a_listener_without_it_is_an_illegal_state(secure: SecureBroker) -> None:
    with Conn(secure.port("PLAINTEXT")) as conn:
        resp = conn.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
        assert resp.error_code == ILLEGAL_SASL_STATE


def test_an_expired_session_is_closed_and_a_reauthenticated_one_goes_on(secure: SecureBroker) -> None:
    """KIP-368: past connections.max.reauth.ms the next request closes the connection, unless the client
    authenticated again on it in time (SaslHandshake + SaslAuthenticate, same principal)."""
    port = secure.port("SASL_PLAINTEXT")
    with Conn(port) as stale, Conn(port) as renewed:
        assert _authenticate(stale, "alice", "alice-secret").error_code == 0
        assert _authenticate(renewed, "alice", "alice-secret").error_code == 0
        time.sleep(REAUTH_MS / 2000)
        again = _authenticate(renewed, "alice", "alice-secret")
        assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        time.sleep(REAUTH_MS / 2000 + 0.5)  # past the first sessions' end, within the renewed one
        assert renewed.call(metadata_req([]), MetadataResponse).brokers
        stale.send(metadata_req([]))
        assert stale.assert_closed(10) == b""


def test_reauthentication_cannot_change_the_principal(secure: SecureBroker) -> None:
    with Conn(secure.port("SASL_PLAINTEXT")) as conn:
        assert _authenticate(conn, "alice", "alice-secret").error_code == 0
        resp = _authenticate(conn, "admin", "admin-secret")
        assert resp.error_code == SASL_AUTHENTICATION_FAILED
        # The refusal is not followed at once by the end of the stream (the client gets to read it and leave;
        # the broker closes after up to 1 s), as for a refused first authentication
        assert conn.wait_closed(0.2) == (False, b"")
        conn.assert_closed(10)


def test_kafka_python_reauthenticates_and_keeps_producing(secure: SecureBroker) -> None:
    """A client that follows KIP-368 (kafka-python here) authenticates again on its connection before the
    session's end, and the broker accepts it: its sends go on over two lifetimes."""
    from confluent_kafka.admin import NewTopic
    from kafka import KafkaProducer

    topic = f"reauth-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    logger = logging.getLogger("kafka.net.connection")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    sent = 0
    try:
        producer = KafkaProducer(**secure.kafka_python("SASL_PLAINTEXT"))
        try:
            deadline = time.monotonic() + 2.2 * REAUTH_MS / 1000
            while time.monotonic() < deadline:
                producer.send(topic, b"%d" % sent).get(30)
                sent += 1
                time.sleep(0.2)
        finally:
            producer.close(10)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any("Beginning SASL re-authentication" in m for m in seen), seen
    assert not any("re-authentication failed" in m for m in seen), seen
    with Conn(secure.port("PLAINTEXT")) as conn:
        from kafka.protocol.consumer import ListOffsetsResponse
        from support.rawkafka import list_offsets_req

        resp = conn.call(list_offsets_req(topic), ListOffsetsResponse)
        assert resp.topics[0].partitions[0].offset == sent


def test_inline_pem_keystore_protocols_and_cipher_suites(tmp_path: Path) -> None:
    """KIP-651's inline PEM (an encrypted key and its chain as values), ssl.enabled.protocols and
    ssl.cipher.suites in Kafka's (IANA) names, ssl.client.auth=requested."""
    import socket
    import ssl

    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("server", server=True, key_password="inline-pw", CN="localhost")
    with BrokerProcess(tmp_path / "data", "listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PEM",
                       f"ssl.keystore.certificate.chain={server.cert.read_text()}",
                       f"ssl.keystore.key={server.key.read_text()}", "ssl.key.password=inline-pw",
                       "ssl.enabled.protocols=TLSv1.2",
                       "ssl.cipher.suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                       "ssl.truststore.type=PEM", f"ssl.truststore.location={ca.cert}",
                       "ssl.client.auth=requested") as proc:
        port = proc.ports["SSL"]

        def handshake(ctx: ssl.SSLContext) -> tuple[str, str]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                cipher = tls.cipher()
                assert cipher is not None
                return tls.version() or "", cipher[0]

        ctx = ssl.create_default_context(cafile=str(ca.cert))  # no client certificate: requested, not required
        assert handshake(ctx) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
        only13 = ssl.create_default_context(cafile=str(ca.cert))
        only13.minimum_version = ssl.TLSVersion.TLSv1_3
        with pytest.raises(ssl.SSLError):
            handshake(only13)
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                          "ssl.ca.location": str(ca.cert)}).list_topics(timeout=20)
        assert md.brokers


def test_a_cipher_suite_python_cannot_offer_is_a_start_up_error(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("server", server=True, CN="localhost")
    err = _start_fails(tmp_path, "listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PEM",
                       f"ssl.keystore.location={server.pem}", "ssl.cipher.suites=TLS_FAKE_WITH_NOTHING_SHA1")
    assert "ssl.cipher.suites:" in err
