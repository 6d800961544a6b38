"""The ZooKeeper cluster's properties (zookeeper.connect, broker.id, ...) and the znodes' JSON in Kafka's layout."""

from __future__ import annotations

import json

import pytest

from headwater.broker.cluster.zk_connect import parse_zookeeper_connect
from headwater.broker.cluster.znodes import broker_registration, controller_data, parse_controller, parse_registration
from headwater.broker.config.broker_config import BrokerConfig, Listener, load_broker_config
from headwater.properties import ConfigError


def test_zookeeper_connect_hosts_and_chroot() -> None:
    assert parse_zookeeper_connect("zk1:2181,zk2:2181/headwater/prod") == ("zk1:2181,zk2:2181", "/headwater/prod")
    assert parse_zookeeper_connect("127.0.0.1:2181") == ("127.0.0.1:2181", "")


@pytest.mark.parametrize("value, problem", [
    ("zk1", "host:port"), ("zk1:abc", "host:port"), ("/chroot", "host:port"),
    ("zk1:2181/a/", "chroot"), ("zk1:2181/a//b", "chroot"), ("zk1:2181/a/../b", "chroot"),
])
def test_bad_zookeeper_connect_is_refused_naming_the_property(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"zookeeper\.connect.*{problem}"):
        load_broker_config(None, [f"zookeeper.connect={value}", "broker.id=1"])


def test_cluster_needs_an_explicit_broker_id() -> None:
    with pytest.raises(ConfigError, match=r"broker\.id.*needs its broker\.id set"):
        load_broker_config(None, ["zookeeper.connect=127.0.0.1:2181"])
    config = load_broker_config(None, ["zookeeper.connect=127.0.0.1:2181/hw", "broker.id=3"])
    assert config.node_id == 3 and config.broker_id == 3
    assert config.zookeeper_session_timeout_ms == 18000 and config.zookeeper_connection_timeout == 18.0
    assert load_broker_config(None, ["zookeeper.connect=127.0.0.1:2181", "node.id=4"]).node_id == 4


def test_broker_id_and_node_id_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"broker\.id \(2\) and node\.id \(3\) differ"):
        load_broker_config(None, ["broker.id=2", "node.id=3"])
    assert load_broker_config(None, ["broker.id=2", "node.id=2"]).node_id == 2


def test_single_node_default_is_unchanged() -> None:
    config = BrokerConfig()
    assert config.zookeeper_connect is None and config.node_id == 1


def test_registration_is_kafkas_json_and_reads_back() -> None:
    endpoints = [Listener(name="PLAINTEXT", host="h1", port=9092), Listener(name="SECURE", host="h1", port=9093)]
    raw = broker_registration(endpoints, {"PLAINTEXT": "PLAINTEXT", "SECURE": "SSL"}, "rack-a")
    data = json.loads(raw)
    assert {k: v for k, v in data.items() if k != "timestamp"} == {
        "version": 4, "host": "h1", "port": 9092, "endpoints": ["PLAINTEXT://h1:9092", "SECURE://h1:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SECURE": "SSL"}, "jmx_port": -1,
        "rack": "rack-a"}
    assert int(data["timestamp"]) > 0
    broker = parse_registration(5, raw)
    assert broker.endpoints == {"PLAINTEXT": ("h1", 9092), "SECURE": ("h1", 9093)} and broker.rack == "rack-a"
    # without a PLAINTEXT listener Kafka writes host null and port -1
    only_tls = json.loads(broker_registration(endpoints[1:], {"SECURE": "SSL"}, None))
    assert only_tls["host"] is None and only_tls["port"] == -1 and "rack" not in only_tls


def test_controller_znode() -> None:
    data = json.loads(controller_data(2))
    assert data["version"] == 1 and data["brokerid"] == 2 and int(data["timestamp"]) > 0
    assert parse_controller(controller_data(2)) == 2
    with pytest.raises(ValueError, match="does not name a broker"):
        parse_controller(b"{}")
