"""Every Kafka topic config through real admin clients (confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient): created with a topic, altered (AlterConfigs and IncrementalAlterConfigs, APPEND/SUBTRACT
on cleanup.policy), described back with Kafka's values, sources, synonyms and types, and refused in
Kafka's words when bad. The per-record effects of the timestamp bounds are in test_record_errors.py."""

from __future__ import annotations

import time
import warnings

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
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from support.hwclients import TIMEOUT, Rec, produce_confluent, unique
from support.rawkafka import request

INVALID_CONFIG = 40
L = "9223372036854775807"

# Kafka 3.9's LogConfig: every key with its default and type as DescribeConfigs gives them.
DEFAULTS = {
    "cleanup.policy": ("delete", "LIST"), "compression.type": ("producer", "STRING"),
    "compression.gzip.level": ("-1", "INT"), "compression.lz4.level": ("9", "INT"),
    "compression.zstd.level": ("3", "INT"), "delete.retention.ms": ("86400000", "LONG"),
    "file.delete.delay.ms": ("60000", "LONG"), "flush.messages": (L, "LONG"), "flush.ms": (L, "LONG"),
    "follower.replication.throttled.replicas": ("", "LIST"), "index.interval.bytes": ("4096", "INT"),
    "leader.replication.throttled.replicas": ("", "LIST"), "local.retention.bytes": ("-2", "LONG"),
    "local.retention.ms": ("-2", "LONG"), "max.compaction.lag.ms": (L, "LONG"),
    "max.message.bytes": ("1048588", "INT"), "message.downconversion.enable": ("true", "BOOLEAN"),
    "message.format.version": ("3.0-IV1", "STRING"), "message.timestamp.after.max.ms": (L, "LONG"),
    "message.timestamp.before.max.ms": (L, "LONG"), "message.timestamp.difference.max.ms": (L, "LONG"),
    "message.timestamp.type": ("CreateTime", "STRING"), "min.cleanable.dirty.ratio": ("0.5", "DOUBLE"),
    "min.compaction.lag.ms": ("0", "LONG"), "min.insync.replicas": ("1", "INT"), "preallocate": ("false", "BOOLEAN"),
    "remote.log.copy.disable": ("false", "BOOLEAN"), "remote.log.delete.on.disable": ("false", "BOOLEAN"),
    "remote.storage.enable": ("false", "BOOLEAN"), "retention.bytes": ("-1", "LONG"),
    "retention.ms": ("604800000", "LONG"), "segment.bytes": ("1073741824", "INT"),
    "segment.index.bytes": ("10485760", "INT"), "segment.jitter.ms": ("0", "LONG"),
    "segment.ms": ("604800000", "LONG"), "unclean.leader.election.enable": ("false", "BOOLEAN"),
}

# A valid value other than the default for each key, and how DescribeConfigs prints it back.
VALID = {
    "cleanup.policy": ("compact, delete", "compact,delete"), "compression.type": ("gzip", "gzip"),
    "compression.gzip.level": ("5", "5"), "compression.lz4.level": ("4", "4"), "compression.zstd.level": ("-5", "-5"),
    "delete.retention.ms": ("1000", "1000"), "file.delete.delay.ms": ("1000", "1000"),
    "flush.messages": ("100000", "100000"), "flush.ms": ("50000", "50000"),
    "follower.replication.throttled.replicas": ("0:1,1:1", "0:1,1:1"), "index.interval.bytes": ("8192", "8192"),
    "leader.replication.throttled.replicas": ("*", "*"), "local.retention.bytes": ("1000", "1000"),
    "local.retention.ms": ("1000", "1000"), "max.compaction.lag.ms": ("600000", "600000"),
    "max.message.bytes": ("2000000", "2000000"), "message.downconversion.enable": ("FALSE", "false"),
    "message.format.version": ("2.8", "2.8"), "message.timestamp.after.max.ms": ("3600000", "3600000"),
    "message.timestamp.before.max.ms": ("86400000", "86400000"),
    "message.timestamp.difference.max.ms": ("172800000", "172800000"),
    "message.timestamp.type": ("LogAppendTime", "LogAppendTime"), "min.cleanable.dirty.ratio": (".25", "0.25"),
    "min.compaction.lag.ms": ("1000", "1000"), "min.insync.replicas": ("2", "2"), "preallocate": ("true", "true"),
    "remote.log.copy.disable": ("true", "true"), "remote.log.delete.on.disable": ("true", "true"),
    "remote.storage.enable": ("false", "false"), "retention.bytes": ("1000000", "1000000"),
    "retention.ms": (" 3600000 ", "3600000"), "segment.bytes": ("1048576", "1048576"),
    "segment.index.bytes": ("4096", "4096"), "segment.jitter.ms": ("1000", "1000"),
    "segment.ms": ("3600000", "3600000"),
    "unclean.leader.election.enable": ("true", "true"),
}

# A bad value for each key and Kafka's error text for it (a LIST value prints as Java prints a list).
RANGE = "Invalid value {v} for configuration {k}: "
THROTTLED = ("{k} must be the literal '*' or a list of replicas in the following format: "
             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
BAD = {
    "cleanup.policy": ("shred", RANGE + "String must be one of: compact, delete"),
    "compression.type": ("brotli", RANGE + "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    "compression.gzip.level": ("0", RANGE + "Value must be between 1 and 9 or equal to -1"),
    "compression.lz4.level": ("18", RANGE + "Value must be no more than 17"),
    "compression.zstd.level": ("23", RANGE + "Value must be no more than 22"),
    "delete.retention.ms": ("-1", RANGE + "Value must be at least 0"),
    "file.delete.delay.ms": ("-1", RANGE + "Value must be at least 0"),
    "flush.messages": ("0", RANGE + "Value must be at least 1"),
    "flush.ms": ("-1", RANGE + "Value must be at least 0"),
    "follower.replication.throttled.replicas": ("1-2", "Invalid value [1-2] for configuration {k}: " + THROTTLED),
    "index.interval.bytes": ("-1", RANGE + "Value must be at least 0"),
    "leader.replication.throttled.replicas": ("0:1,x", "Invalid value [0:1, x] for configuration {k}: " + THROTTLED),
    "local.retention.bytes": ("-3", RANGE + "Value must be at least -2"),
    "local.retention.ms": ("-3", RANGE + "Value must be at least -2"),
    "max.compaction.lag.ms": ("0", RANGE + "Value must be at least 1"),
    "max.message.bytes": ("-5", RANGE + "Value must be at least 0"),
    "message.downconversion.enable": ("maybe", RANGE + "Expected value to be either true or false"),
    "message.format.version": ("9.9", RANGE + "Version 9.9 is not a valid version"),
    "message.timestamp.after.max.ms": ("-1", RANGE + "Value must be at least 0"),
    "message.timestamp.before.max.ms": ("-1", RANGE + "Value must be at least 0"),
    "message.timestamp.difference.max.ms": ("-1", RANGE + "Value must be at least 0"),
    "message.timestamp.type": ("WallClock", RANGE + "String must be one of: CreateTime, LogAppendTime"),
    "min.cleanable.dirty.ratio": ("1.5", RANGE + "Value must be no more than 1"),
    "min.compaction.lag.ms": ("-1", RANGE + "Value must be at least 0"),
    "min.insync.replicas": ("0", RANGE + "Value must be at least 1"),
    "preallocate": ("yes", RANGE + "Expected value to be either true or false"),
    "remote.log.copy.disable": ("2", RANGE + "Expected value to be either true or false"),
    "remote.log.delete.on.disable": ("no", RANGE + "Expected value to be either true or false"),
    "remote.storage.enable": ("true", "Tiered Storage functionality is disabled in the broker. "
                                      "Topic cannot be configured with remote log storage."),
    "retention.bytes": ("lots", RANGE + "Not a number of type LONG"),
    "retention.ms": ("-2", RANGE + "Value must be at least -1"),
    "segment.bytes": ("13", RANGE + "Value must be at least 14"),
    "segment.index.bytes": ("3", RANGE + "Value must be at least 4"),
    "segment.jitter.ms": ("-1", RANGE + "Value must be at least 0"),
    "segment.ms": ("0", RANGE + "Value must be at least 1"),
    "unclean.leader.election.enable": ("sometimes", RANGE + "Expected value to be either true or false"),
}


def _bad_message(key: str) -> str:
    value, text = BAD[key]
    return text.format(v=value, k=key)


def _create(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=15)[topic].result(timeout=TIMEOUT)


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)


def _kdescribe(kadmin: KafkaAdminClient, topic: str) -> dict[str, dict]:
    out = kadmin.describe_configs([KConfigResource("TOPIC", topic)], include_synonyms=True, config_filter="all")
    return out["topic"][topic]


def _state(admin: AdminClient, topic: str) -> dict[str, tuple[str | None, ConfigSource]]:
    return {k: (e.value, ConfigSource(e.source)) for k, e in _describe(admin, topic).items()}


def _incremental(admin: AdminClient, topic: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> None:
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries])
    admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)


def _alter_error(admin: AdminClient, topic: str, *entries: tuple[str, str | None, AlterConfigOpType]):
    with pytest.raises(KafkaException) as info:
        _incremental(admin, topic, *entries)
    return info.value.args[0]


def test_every_config_described_with_kafkas_defaults_and_types(admin, kadmin, broker) -> None:
    topic = unique("every")
    _create(admin, topic, {})
    described = _kdescribe(kadmin, topic)
    assert {k: (v["value"], v["config_type"]) for k, v in described.items()} == DEFAULTS
    assert all(not v["read_only"] and not v["is_sensitive"] for v in described.values())
    assert {v["config_source"] for v in described.values()} == {"DEFAULT_CONFIG"}
    # The dropWhile rule: retention.ms's only broker entry is log.retention.hours, so no synonyms.
    assert described["retention.ms"]["synonyms"] == []
    assert described["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"}]
    assert described["remote.storage.enable"]["synonyms"] == []  # no broker default in Kafka
    entries = _describe(admin, topic)
    assert {k: e.value for k, e in entries.items()} == {k: v for k, (v, _) in DEFAULTS.items()}
    assert list(entries["min.insync.replicas"].synonyms) == ["min.insync.replicas"]


def test_create_with_every_config(admin, kadmin, broker) -> None:
    """kafka-python creates, confluent-kafka creates: every key is stored and described back as given."""
    configs = {k: v for k, (v, _) in VALID.items()}
    want = {k: shown for k, (_, shown) in VALID.items()}
    by_kafka_python = unique("allkp")
    res = kadmin.create_topics({by_kafka_python: {"num_partitions": 1, "replication_factor": 1, "configs": configs}},
                               raise_errors=False)
    assert [(t["error_code"], t["error_message"]) for t in res["topics"]] == [(0, None)]
    by_confluent = unique("allcf")
    _create(admin, by_confluent, configs)
    for topic in (by_kafka_python, by_confluent):
        described = _kdescribe(kadmin, topic)
        assert {k: v["value"] for k, v in described.items()} == want
        assert {v["config_source"] for v in described.values()} == {"DYNAMIC_TOPIC_CONFIG"}
        for key, v in described.items():
            assert v["synonyms"][0] == {"name": key, "value": want[key], "source": "DYNAMIC_TOPIC_CONFIG"}
        assert described["retention.ms"]["synonyms"][1:] == []
        assert described["segment.bytes"]["synonyms"][1:] == [
            {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"}]
        assert _state(admin, topic) == {k: (v, ConfigSource.DYNAMIC_TOPIC_CONFIG) for k, v in want.items()}


def test_alter_every_config_both_apis(admin, kadmin, broker) -> None:
    topic = unique("alterall")
    _create(admin, topic, {})
    want = {k: shown for k, (_, shown) in VALID.items()}
    # Legacy AlterConfigs (confluent) sets them all at once...
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={k: v for k, (v, _) in VALID.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        admin.alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)
    assert _state(admin, topic) == {k: (v, ConfigSource.DYNAMIC_TOPIC_CONFIG) for k, v in want.items()}
    # ... IncrementalAlterConfigs DELETE returns every one to its default...
    _incremental(admin, topic, *[(k, None, AlterConfigOpType.DELETE) for k in VALID])
    assert _state(admin, topic) == {k: (v, ConfigSource.DEFAULT_CONFIG) for k, (v, _) in DEFAULTS.items()}
    # ... and kafka-python's alter_configs (IncrementalAlterConfigs SET) sets them again.
    out = kadmin.alter_configs([KConfigResource("TOPIC", topic, {k: v for k, (v, _) in VALID.items()})],
                               raise_on_unknown=False)
    assert out == {"topic": {topic: "OK"}}
    assert {k: v["value"] for k, v in _kdescribe(kadmin, topic).items()} == want


def test_bad_values_refused_in_kafkas_words(admin, kadmin, broker) -> None:
    """Each bad value is INVALID_CONFIG naming the key and the reason, at create and at alter, and
    changes nothing."""
    names = {key: unique("bad") for key in BAD}
    res = kadmin.create_topics({names[k]: {"num_partitions": 1, "replication_factor": 1, "configs": {k: v}}
                                for k, (v, _) in BAD.items()}, raise_errors=False)
    got = {t["name"]: (t["error_code"], t["error_message"]) for t in res["topics"]}
    assert got == {names[k]: (INVALID_CONFIG, _bad_message(k)) for k in BAD}
    assert not set(names.values()) & set(admin.list_topics(timeout=10).topics)

    topic = unique("badalter")
    _create(admin, topic, {"retention.ms": "5000"})
    before = _state(admin, topic)
    for key, (value, _) in BAD.items():
        other = "segment.ms" if key != "segment.ms" else "segment.bytes"  # a good change beside it: not applied
        err = _alter_error(admin, topic, (other, "1048576", AlterConfigOpType.SET), (key, value, AlterConfigOpType.SET))
        assert err.code() == INVALID_CONFIG and _bad_message(key) in err.str(), (key, err)
    assert _state(admin, topic) == before


def test_unknown_names_and_cross_checks(admin, kadmin, broker) -> None:
    topic = unique("unknown")
    res = kadmin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1,
                                        "configs": {"retention.ms": "1000", "no.such.config": "1"}}},
                               raise_errors=False)
    assert [(t["error_code"], t["error_message"]) for t in res["topics"]] == [
        (INVALID_CONFIG, "Unknown topic config name: no.such.config")]
    _create(admin, topic, {"max.compaction.lag.ms": "60000"})
    before = _state(admin, topic)
    err = _alter_error(admin, topic, ("no.such.config", "1", AlterConfigOpType.SET))
    assert err.code() == INVALID_CONFIG and "Unknown topic config name: no.such.config" in err.str()
    err = _alter_error(admin, topic, ("min.compaction.lag.ms", "70000", AlterConfigOpType.SET))
    assert "conflict topic config setting min.compaction.lag.ms (70000) > max.compaction.lag.ms (60000)" in err.str()
    err = _alter_error(admin, topic, ("retention.ms", "1", AlterConfigOpType.APPEND))
    assert "Can't APPEND to key retention.ms because its type is not LIST." in err.str()
    assert _state(admin, topic) == before
    # kafka-python refuses unknown names itself unless told not to; the broker then refuses them.
    with pytest.raises(ValueError):
        kadmin.alter_configs([KConfigResource("TOPIC", topic, {"no.such.config": "1"})])
    out = kadmin.alter_configs([KConfigResource("TOPIC", topic, {"no.such.config": "1"})], raise_on_unknown=False)
    assert out["topic"][topic] != "OK"
    assert _state(admin, topic) == before


def test_cleanup_policy_lists(admin, kadmin, broker) -> None:
    """An empty cleanup.policy (neither compact nor delete) is accepted; APPEND/SUBTRACT keep the order;
    duplicates are refused (Kafka 4.x)."""
    topic = unique("policy")
    _create(admin, topic, {"cleanup.policy": ""})
    assert _state(admin, topic)["cleanup.policy"] == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    append, subtract = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    steps = [("compact", append, "compact"), ("delete", append, "compact,delete"), ("delete", append, "compact,delete"),
             ("compact", subtract, "delete"), ("compact", append, "delete,compact"), ("delete,compact", subtract, "")]
    for value, op, want in steps:
        _incremental(admin, topic, ("cleanup.policy", value, op))
        assert _state(admin, topic)["cleanup.policy"] == (want, ConfigSource.DYNAMIC_TOPIC_CONFIG), (value, op)
    # APPEND with no override starts from Kafka's default, delete.
    _incremental(admin, topic, ("cleanup.policy", None, AlterConfigOpType.DELETE))
    _incremental(admin, topic, ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert _state(admin, topic)["cleanup.policy"] == ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    err = _alter_error(admin, topic, ("cleanup.policy", "compact,compact", AlterConfigOpType.SET))
    assert "Configuration 'cleanup.policy' values must not be duplicated." in err.str()
    err = _alter_error(admin, topic, ("cleanup.policy", "compact,", AlterConfigOpType.SET))
    assert "Configuration 'cleanup.policy' values must not be empty." in err.str()
    out = kadmin.alter_configs([KConfigResource("TOPIC", topic, {"cleanup.policy": ("APPEND", "delete")})])
    assert out == {"topic": {topic: "OK"}}
    assert _state(admin, topic)["cleanup.policy"] == ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)


def test_broker_synonyms_sources_and_documentation(fresh_broker) -> None:
    """Broker properties supply topic defaults under Kafka's names, and DescribeConfigs lists them in
    Kafka's order (static before default, leading entries that are not the first synonym dropped)."""
    b = fresh_broker
    b.overrides += ["log.retention.ms=3600000", "log.roll.hours=2", "log.flush.interval.messages=5000",
                    "log.message.timestamp.before.max.ms=86400000", "min.insync.replicas=2"]
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
    try:
        topic = unique("syn")
        _create(admin, topic, {"retention.ms": "1000"})
        got = {k: (v["value"], v["config_source"], [(s["name"], s["value"], s["source"]) for s in v["synonyms"]])
               for k, v in _kdescribe(kadmin, topic).items()}
    finally:
        kadmin.close()
    assert got["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG", [
        ("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    # log.roll.hours supplies segment.ms, but Kafka lists nothing before log.roll.ms's own entry.
    assert got["segment.ms"] == ("7200000", "DEFAULT_CONFIG", [])
    assert got["flush.messages"] == ("5000", "STATIC_BROKER_CONFIG", [
        ("log.flush.interval.messages", "5000", "STATIC_BROKER_CONFIG"),
        ("log.flush.interval.messages", L, "DEFAULT_CONFIG")])
    assert got["message.timestamp.before.max.ms"][:2] == ("86400000", "STATIC_BROKER_CONFIG")
    assert got["min.insync.replicas"][:2] == ("2", "STATIC_BROKER_CONFIG")

    # DescribeConfigs v4 (flexible) with documentation, through kafka-python's protocol classes.
    resource = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest[4](resources=[
        resource(resource_type=2, resource_name=topic, configuration_keys=["retention.ms", "no.such.config"]),
        resource(resource_type=2, resource_name="no-such-topic", configuration_keys=None)],
        include_synonyms=False, include_documentation=True)
    result, unknown = request(b.port, req, DescribeConfigsResponse).results
    assert (unknown.error_code, unknown.error_message, list(unknown.configs)) == (3, None, [])
    [entry] = result.configs
    assert (result.error_code, entry.name, entry.value, entry.config_source, entry.config_type) == (
        0, "retention.ms", "1000", 1, 5)
    assert list(entry.synonyms) == []
    assert entry.documentation.startswith("This configuration controls the maximum time we will retain a log")


def test_min_insync_replicas_on_one_node(admin, broker) -> None:
    """Kafka (3.7+, KAFKA-15583) caps min.insync.replicas at the replica count, so on a single-replica
    topic acks=all is still answered: a one-node broker never has too few in-sync replicas."""
    topic = unique("minisr")
    _create(admin, topic, {"min.insync.replicas": "3"})
    acked = produce_confluent(broker.bootstrap, topic, [Rec(0, b"k", b"v")])
    assert [a.offset for a in acked] == [0]


def test_file_delete_delay_ms_keeps_removed_segments_that_long(admin, broker) -> None:
    """Segments DeleteRecords removes are renamed ``.deleted`` and unlinked once file.delete.delay.ms passed."""
    from confluent_kafka import TopicPartition

    topic = unique("delay")
    _create(admin, topic, {"segment.bytes": "1024", "file.delete.delay.ms": "2000"})
    produce_confluent(broker.bootstrap, topic, [Rec(0, f"k{i}".encode(), bytes(200)) for i in range(60)],
                      one_by_one=True)
    partition_dir = broker.log_dir / f"{topic}-0"
    live_before = sorted(partition_dir.glob("*.log"))
    assert len(live_before) > 3
    started = time.monotonic()  # before the request: a slow answer must not eat into the 2 s measured
    admin.delete_records([TopicPartition(topic, 0, 30)])[TopicPartition(topic, 0, 30)].result(10)
    deleted = sorted(partition_dir.glob("*.log.deleted"))
    assert deleted and len(sorted(partition_dir.glob("*.log"))) < len(live_before)
    while list(partition_dir.glob("*.deleted")) and time.monotonic() - started < 30:
        time.sleep(0.1)
    waited = time.monotonic() - started
    assert not list(partition_dir.glob("*.deleted")) and waited >= 1.0, waited  # not at once, and not kept
