"""The REST doors' pieces that need no worker: listeners as Kafka writes them, which ssl.* keys the REST
listener and the Kafka clients each take, the JAAS file and credentials file of basic authentication, and
the Host names the checks compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.connect.api.errors import ConfigException
from headwater.connect.config import WorkerConfigError, load_worker_config
from headwater.connect.rest.basic_auth import PropertyFileCredentials, login_config_path
from headwater.connect.rest.checks import _host_name
from headwater.connect.rest.listeners import RestListener, parse_listeners
from headwater.kafka.jaas import JaasError, parse_jaas_file
from headwater.testing.names import free_port


def test_listeners_as_kafka_writes_them() -> None:
    assert parse_listeners("http://:8083, https://0.0.0.0:8443,http://[::1]:9", "listeners") == [
        RestListener("http", "", 8083), RestListener("https", "0.0.0.0", 8443), RestListener("http", "::1", 9)]
    assert parse_listeners("", "admin.listeners") == []
    for text, problem in (("ftp://h:1", "scheme 'ftp'"), ("localhost:8083", "scheme://host:port"),
                          ("http://h", "no port"), ("https://h:99999", "no port"), ("http://h:1/api", "no path")):
        with pytest.raises(ValueError, match=problem) as err:
            parse_listeners(text, "admin.listeners")
        assert str(err.value).startswith("admin.listeners: ")


def test_worker_keys_checked_at_load() -> None:
    for overrides, key in ((["listeners=ftp://127.0.0.1:1"], "listeners"), (["listeners="], "listeners"),
                           (["admin.listeners=tcp://h:1"], "admin.listeners"),
                           (["rest.advertised.listener=https"], "rest.advertised.listener"),
                           (["rest.advertised.listener=ftp"], "rest.advertised.listener")):
        with pytest.raises(WorkerConfigError, match=key):
            load_worker_config(None, overrides)
    config = load_worker_config(None, ["listeners=http://127.0.0.1:1,https://127.0.0.1:2"])
    assert config.advertised_listener() == RestListener("http", "127.0.0.1", 1)  # Kafka: http when there is one
    assert load_worker_config(None, ["admin.listeners="]).rest_admin_listeners() == []
    assert load_worker_config(None, []).rest_admin_listeners() is None


def test_the_rest_listener_and_the_kafka_clients_each_get_their_ssl_keys() -> None:
    tls = ["ssl.keystore.type=PEM", "ssl.keystore.location=/k.pem", "ssl.client.auth=required"]
    # a plaintext broker: the worker's ssl.* are the HTTPS listener's (Kafka's plaintext clients ignore them)
    config = load_worker_config(None, ["listeners=https://127.0.0.1:0", *tls])
    assert config.security() == {} and config.client("producer") == {}
    assert config.rest_ssl() == ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
                                  "ssl.client.auth": "required"}, "")
    # listeners.https.* is all or nothing
    config = load_worker_config(None, ["listeners=https://127.0.0.1:0", *tls,
                                       "listeners.https.ssl.keystore.location=/other.p12"])
    assert config.rest_ssl() == ({"ssl.keystore.location": "/other.p12"}, "listeners.https.")
    # without an https listener, a plaintext client with ssl.* is still the mistake it was
    with pytest.raises(WorkerConfigError, match="ssl.keystore"):
        load_worker_config(None, tls)


def test_the_jaas_file_of_basic_auth(tmp_path: Path) -> None:
    sections = parse_jaas_file("""
        // Kafka Connect's REST users
        KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b"; };
        KafkaConnect {
          org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
          file="/etc/kafka/connect.password";
        };""")
    assert list(sections) == ["KafkaServer", "KafkaConnect"]
    assert sections["KafkaConnect"][0].options == {"file": "/etc/kafka/connect.password"}
    for broken in ("KafkaConnect { a.B required; }", "KafkaConnect a.B required; };", "KafkaConnect { };"):
        with pytest.raises(JaasError):
            parse_jaas_file(broken)


def test_where_the_jaas_file_is_named() -> None:
    key = "java.security.auth.login.config"
    env = {"KAFKA_OPTS": "-Xmx1G '-Djava.security.auth.login.config=/etc/my jaas.conf' -Dother=1"}
    assert login_config_path({}, env) == "/etc/my jaas.conf"
    assert login_config_path({key: "/from/worker.conf"}, env) == "/from/worker.conf"
    assert login_config_path({}, {}) is None


def test_credentials_file(tmp_path: Path) -> None:
    path = tmp_path / "connect.password"
    path.write_text("# users\nadmin: s3cret\nops=a:b:c\n")
    users = PropertyFileCredentials(str(path))
    assert users.check("admin", "s3cret") and users.check("ops", "a:b:c")
    assert not users.check("admin", "s3cret ") and not users.check("admin", "") and not users.check("root", "s3cret")
    path.write_text("# nobody yet\n")
    with pytest.raises(ConfigException, match="no 'user: password' line"):
        PropertyFileCredentials(str(path))


def test_host_names_compared_without_the_port() -> None:
    assert _host_name("Example.COM:8083") == "example.com"
    assert _host_name("[::1]:8083") == "::1" and _host_name("[::1]") == "::1"
    assert _host_name("127.0.0.1") == "127.0.0.1"


def test_a_leader_out_of_reach_is_kafkas_500_json_error() -> None:
    """A follower that cannot forward (the leader gone, or its TLS refusing ours) answers Kafka's JSON error,
    not aiohttp's plain-text 500."""
    import asyncio
    from types import SimpleNamespace
    from typing import cast

    from aiohttp.test_utils import TestClient, TestServer

    from headwater.connect.config import WorkerConfig
    from headwater.connect.herder.errors import NotLeader
    from headwater.connect.herder.interface import Herder
    from headwater.connect.rest.app import build_app

    port = free_port()  # nothing listens there

    async def restart_connector(*args: object) -> None:
        raise NotLeader(f"http://127.0.0.1:{port}/")

    async def go() -> tuple[int, dict[str, object]]:
        config = WorkerConfig.model_validate({"bootstrap.servers": "127.0.0.1:1"})
        herder = SimpleNamespace(config=config, restart_connector=restart_connector)
        async with TestClient(TestServer(build_app(cast(Herder, herder)))) as client:
            response = await client.post("/connectors/c/restart")
            return response.status, await response.json()

    status, body = asyncio.run(go())
    assert status == 500 and body["error_code"] == 500
    assert str(body["message"]).startswith("IO Error trying to forward REST request: ClientConnectorError")
