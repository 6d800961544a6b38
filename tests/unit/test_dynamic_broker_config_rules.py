"""Dynamic broker configs on a Cluster of its own: the levels, the checks that name what they refuse, the
effect on topics, and the file they are kept in."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.broker.apis.configs import describe_broker
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.config.dynamic_configs import DYNAMIC_BROKER_CONFIGS, PER_BROKER_ONLY
from headwater.broker.topics.cluster import Cluster
from headwater.kafka.errors import ErrorCode, KafkaError


def _cluster(tmp_path: Path, **props: str) -> Cluster:
    cluster = Cluster(BrokerConfig(**{"log.dirs": str(tmp_path), **props}))
    cluster.load()
    return cluster


def test_the_dynamic_keys_follow_kafka() -> None:
    """The first synonym of each topic config is dynamic, the others and log.message.format.version are not."""
    assert {"log.retention.ms", "log.roll.ms", "log.segment.bytes", "message.max.bytes",
            "log.cleanup.policy"} <= set(DYNAMIC_BROKER_CONFIGS)
    assert not {"log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.message.format.version",
                "log.dirs", "num.partitions", "listeners"} & set(DYNAMIC_BROKER_CONFIGS)
    assert "sasl.kerberos.min.time.before.relogin" in PER_BROKER_ONLY


def test_levels_apply_in_kafkas_order_and_persist(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, **{"log.retention.ms": "1000"})
    topic = cluster.create_topic("t", 2)
    cluster.alter_broker_configs("", {"log.retention.ms": "2000", "log.segment.bytes": "1048576"})
    cluster.alter_broker_configs("1", {"log.retention.ms": "3000"})
    assert (topic.config.retention_ms, topic.config.segment_bytes) == (3000, 1048576)
    assert all(p.log.config.retention_ms == 3000 for p in topic.partitions)
    cluster.alter_broker_configs("1", {})
    assert topic.config.retention_ms == 2000
    cluster.close()

    again = _cluster(tmp_path, **{"log.retention.ms": "1000"})
    assert (again.dynamic.default, again.dynamic.per_broker) == (
        {"log.retention.ms": "2000", "log.segment.bytes": "1048576"}, {})
    assert again.get_topic("t").config.retention_ms == 2000
    again.close()


def test_refusals_name_what_they_refuse(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    cluster.create_topic("lagged", 1, overrides={"min.compaction.lag.ms": "1000"})
    cases = [
        ("1", {"log.cleaner.max.compaction.lag.ms": "500"}, ErrorCode.INVALID_CONFIG, "topic lagged: conflict topic "
         "config setting min.compaction.lag.ms (1000) > max.compaction.lag.ms (500)"),
        ("1", {"log.dirs": "/x"}, ErrorCode.INVALID_REQUEST, "Invalid config value for resource "
         "ConfigResource(type=BROKER, name='1'): Cannot update these configs dynamically: Set(log.dirs)"),
        ("", {"sasl.kerberos.min.time.before.relogin": "1"}, ErrorCode.INVALID_REQUEST, "Cannot update these "
         "configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)"),
        ("1", {"background.threads": "many"}, ErrorCode.INVALID_CONFIG,
         "Invalid value many for configuration background.threads: Not a number of type INT"),
        ("1", {"no.such": "1"}, ErrorCode.INVALID_CONFIG, "Unknown broker config name: no.such"),
    ]
    for level, values, code, text in cases:
        with pytest.raises(KafkaError) as info:
            cluster.alter_broker_configs(level, values)
        assert info.value.code == code and text in info.value.message, (values, info.value.message)
    assert (cluster.dynamic.default, cluster.dynamic.per_broker) == ({}, {})
    assert not cluster.dynamic.path.exists()
    cluster.close()


def test_a_brokers_secrets_are_described_null_and_sensitive(tmp_path: Path) -> None:
    """DescribeConfigs of a broker lists each listener security setting under its own name, and answers those
    holding a secret (a JAAS entry with passwords, an ssl password) null, sensitive and PASSWORD-typed, as
    Kafka: the values never leave the broker."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="s3cret-admin" user_admin="s3cret-admin";')
    cluster = _cluster(tmp_path, **{"node.id": "1", "sasl.enabled.mechanisms": "PLAIN",
                                    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                                    "ssl.keystore.password": "s3cret-store"})
    entries = {e["name"]: e for e in describe_broker(cluster, "1", None, include_synonyms=True)}
    assert "s3cret" not in repr(entries)
    for name in ("listener.name.sasl_plaintext.plain.sasl.jaas.config", "ssl.keystore.password"):
        assert entries[name]["value"] is None and entries[name]["is_sensitive"], entries[name]
        assert entries[name]["config_type"] == 9
        assert all(s["value"] is None for s in entries[name]["synonyms"])
    assert entries["sasl.enabled.mechanisms"]["value"] == "PLAIN"
    assert not entries["sasl.enabled.mechanisms"]["is_sensitive"]
    assert "security_properties" not in entries
