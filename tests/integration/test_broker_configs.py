"""Dynamic broker configs (``kafka-configs.sh --entity-type brokers``) through confluent-kafka's and
kafka-python's admin clients: AlterConfigs and IncrementalAlterConfigs on BROKER resources, per broker
(name = node id) and the cluster-wide default (""), their sources in DescribeConfigs, their effect on the
topics, Kafka's refusals, and their persistence across a restart. Both clients refuse an empty broker
name themselves, so the cluster default is reached with raw requests (what kafka-configs.sh
``--entity-default`` sends)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import KafkaAdminClient
from support.hwclients import TIMEOUT, unique
from support.rawkafka import describe_configs, incremental_alter_configs, produce

from headwater.kafka.records import Record, build_batch

pytestmark = pytest.mark.timeout(120)

INVALID_REQUEST, INVALID_CONFIG, MESSAGE_TOO_LARGE = 42, 40, 10
NODE = "1"  # the broker's node.id (its default)
BROKER_DYN, DEFAULT_DYN = ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC, DEFAULT, TOPIC_DYN = (ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG,
                              ConfigSource.DYNAMIC_TOPIC_CONFIG)
SET, DELETE, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                                 AlterConfigOpType.SUBTRACT)


def _describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)


def _value(entries: dict[str, ConfigEntry], key: str) -> tuple[str | None, ConfigSource]:
    return entries[key].value, ConfigSource(entries[key].source)


def _incremental(admin: AdminClient, name: str, *entries: tuple[str, str | None, AlterConfigOpType],
                 validate_only: bool = False) -> None:
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries])
    admin.incremental_alter_configs([res], request_timeout=15, validate_only=validate_only)[res].result(
        timeout=TIMEOUT)


def _refused(admin: AdminClient, name: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        _incremental(admin, name, *entries)
    return info.value.args[0].code(), info.value.args[0].str()


def _legacy_alter(admin: AdminClient, res: ConfigResource) -> None:
    with warnings.catch_warnings():  # confluent-kafka deprecates AlterConfigs; librdkafka's test still sends it
        warnings.simplefilter("ignore", DeprecationWarning)
        admin.alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)


def _alter_raw(port: int, name: str, values: dict[str, str | None],
               validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on BROKER ``name``: SET, or DELETE for None; (error, message)."""
    return incremental_alter_configs(port, 4, name, values, validate_only)


def _set_default(port: int, values: dict[str, str | None], validate_only: bool = False) -> tuple[int, str | None]:
    return _alter_raw(port, "", values, validate_only)


def _describe_raw(port: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    """DescribeConfigs v4 with synonyms of BROKER ``name``: {key: (value, source, [(name, value, source)])}
    (confluent-kafka keys synonyms by name, so it shows one of a name's several sources)."""
    result = describe_configs(port, 4, name, keys)
    assert result.error_code == 0, result
    return {c.name: (c.value, ConfigSource(c.config_source),
                     [(y.name, y.value, ConfigSource(y.source)) for y in c.synonyms]) for c in result.configs}


def _describe_default(port: int) -> dict[str, tuple[str | None, ConfigSource]]:
    return {k: (value, source) for k, (value, source, _) in _describe_raw(port, "").items()}


def _oversized_produce_error(port: int, topic: str, size: int) -> int:
    batch = build_batch([Record(offset=0, timestamp=0, key=None, value=b"x" * size)])
    return int(produce(port, topic, batch).error_code)


def test_dynamic_broker_configs_take_effect_and_persist(fresh_broker) -> None:
    b = fresh_broker
    b.overrides.append("log.retention.ms=3600000")
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    plain, own = unique("dyn-plain"), unique("dyn-own")
    fs = admin.create_topics([NewTopic(plain, 1, 1), NewTopic(own, 1, 1, config={"retention.ms": "1000"})],
                             request_timeout=15)
    for f in fs.values():
        f.result(timeout=TIMEOUT)
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "log.retention.ms") == ("3600000", STATIC)
    assert entries["log.retention.ms"].is_read_only is False
    assert entries["log.dirs"].is_read_only is True
    assert _describe_default(b.port) == {}

    # the cluster-wide default: over the properties file, under each topic's own override
    assert _set_default(b.port, {"log.retention.ms": "7200000", "message.max.bytes": "2000"}) == (0, None)
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "log.retention.ms") == ("7200000", DEFAULT_DYN)
    assert _describe_raw(b.port, NODE, ["log.retention.ms"])["log.retention.ms"][2] == [
        ("log.retention.ms", "7200000", DEFAULT_DYN), ("log.retention.ms", "3600000", STATIC),
        ("log.retention.hours", "168", DEFAULT)]
    assert _describe_default(b.port) == {
        "log.retention.ms": ("7200000", DEFAULT_DYN), "message.max.bytes": ("2000", DEFAULT_DYN)}
    assert _value(_describe(admin, ResourceType.TOPIC, plain), "retention.ms") == ("7200000", DEFAULT_DYN)
    assert _value(_describe(admin, ResourceType.TOPIC, own), "retention.ms") == ("1000", TOPIC_DYN)
    # in effect at once: the topics' max.message.bytes follows message.max.bytes
    assert _value(_describe(admin, ResourceType.TOPIC, plain), "max.message.bytes") == ("2000", DEFAULT_DYN)
    assert _oversized_produce_error(b.port, plain, 3000) == MESSAGE_TOO_LARGE

    # per broker, over the default (legacy AlterConfigs replaces this level's whole set)
    res = ConfigResource(ResourceType.BROKER, NODE, set_config={
        "log.retention.ms": "1800000", "sasl.kerberos.min.time.before.relogin": "58000"})
    _legacy_alter(admin, res)
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "log.retention.ms") == ("1800000", BROKER_DYN)
    assert _describe_raw(b.port, NODE, ["log.retention.ms"])["log.retention.ms"][2][:2] == [
        ("log.retention.ms", "1800000", BROKER_DYN), ("log.retention.ms", "7200000", DEFAULT_DYN)]
    assert _value(entries, "sasl.kerberos.min.time.before.relogin") == ("58000", BROKER_DYN)
    assert _value(_describe(admin, ResourceType.TOPIC, plain), "retention.ms") == ("1800000", BROKER_DYN)

    # validate_only changes nothing
    _incremental(admin, NODE, ("log.retention.ms", "60000", SET), validate_only=True)
    assert _value(_describe(admin, ResourceType.BROKER, NODE), "log.retention.ms") == ("1800000", BROKER_DYN)

    # Kafka's refusals; none of them changes anything
    code, text = _refused(admin, NODE, ("log.dirs", "/elsewhere", SET), ("num.partitions", "3", SET))
    assert code == INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs, num.partitions)" in text
    code, answer = _set_default(b.port, {"sasl.kerberos.min.time.before.relogin": "1000"})
    assert code == INVALID_REQUEST and answer is not None and "broker id must be specified" in answer
    assert _set_default(b.port, {"log.retention.ms": "60000"}, validate_only=True) == (0, None)
    code, text = _refused(admin, NODE, ("log.retention.ms", "soon", SET))
    assert (code, text) == (INVALID_CONFIG, "Invalid value soon for configuration log.retention.ms: "
                                            "Not a number of type LONG")
    code, text = _refused(admin, NODE, ("log.segment.bytes", "10", SET))
    assert code == INVALID_CONFIG and "log.segment.bytes" in text
    code, text = _refused(admin, NODE, ("no.such.config", "1", SET))
    assert (code, text) == (INVALID_CONFIG, "Unknown broker config name: no.such.config")
    assert _alter_raw(b.port, "7", {"log.retention.ms": "1000"}) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 7")
    assert _value(_describe(admin, ResourceType.BROKER, NODE), "log.retention.ms") == ("1800000", BROKER_DYN)

    # kept across a restart, and in effect again
    b.stop()
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "log.retention.ms") == ("1800000", BROKER_DYN)
    assert _value(entries, "message.max.bytes") == ("2000", DEFAULT_DYN)
    assert _value(entries, "sasl.kerberos.min.time.before.relogin") == ("58000", BROKER_DYN)
    assert _value(_describe(admin, ResourceType.TOPIC, plain), "retention.ms") == ("1800000", BROKER_DYN)
    assert _oversized_produce_error(b.port, plain, 3000) == MESSAGE_TOO_LARGE

    # DELETE returns to the level below
    _incremental(admin, NODE, ("log.retention.ms", None, DELETE))
    assert _set_default(b.port, {"log.retention.ms": None, "message.max.bytes": None}) == (0, None)
    assert _value(_describe(admin, ResourceType.TOPIC, plain), "retention.ms") == ("3600000", STATIC)
    assert _oversized_produce_error(b.port, plain, 3000) == 0


def test_librdkafka_admin_test_broker_requests(fresh_broker) -> None:
    """What librdkafka's test 0081 sends on a BROKER resource: AlterConfigs and IncrementalAlterConfigs
    of sasl.kerberos.min.time.before.relogin, SET/DELETE background.threads with APPEND/SUBTRACT of
    log.cleanup.policy, and a DescribeConfigs of the broker without names. A broker of its own: a
    failure half-way must not leave the session broker's topics with another default cleanup.policy."""
    broker = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, NODE, set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    _legacy_alter(admin, res)
    _incremental(admin, NODE, ("sasl.kerberos.min.time.before.relogin", "58000", SET))
    _incremental(admin, NODE, ("background.threads", "9", SET), ("log.cleanup.policy", "compact", APPEND))
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "background.threads") == ("9", BROKER_DYN)
    assert _value(entries, "log.cleanup.policy") == ("delete,compact", BROKER_DYN)
    _incremental(admin, NODE, ("background.threads", "", DELETE), ("log.cleanup.policy", "compact", SUBTRACT))
    entries = _describe(admin, ResourceType.BROKER, NODE)
    assert _value(entries, "background.threads") == ("10", DEFAULT)
    assert _value(entries, "log.cleanup.policy") == ("delete", BROKER_DYN)
    _incremental(admin, NODE, ("log.cleanup.policy", None, DELETE))
    assert _value(_describe(admin, ResourceType.BROKER, NODE), "log.cleanup.policy") == ("delete", DEFAULT)


def test_kafka_python_alters_and_describes_a_broker(fresh_broker) -> None:
    broker = fresh_broker.start()
    k = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        out = k.alter_configs([KConfigResource("BROKER", NODE, {"log.cleaner.threads": "2"})])
        assert out == {"broker": {NODE: "OK"}}, out
        described = k.describe_configs([KConfigResource("BROKER", NODE, ["log.cleaner.threads"])])
        assert described["broker"][NODE]["log.cleaner.threads"]["value"] == "2", described
        k.alter_configs([KConfigResource("BROKER", NODE, {"log.cleaner.threads": None})])
    finally:
        k.close()
