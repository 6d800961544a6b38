"""Admin APIs through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import KafkaAdminClient
from support.hwclients import (
    TIMEOUT,
    Rec,
    check_consumed,
    confluent_consumer,
    consume_confluent,
    create_topic,
    make_records,
    offset_reset_error,
    produce_confluent,
    unique,
)

TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_PARTITIONS = 36, 17, 40, 37
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE = 3, 1


def _create_error(admin: AdminClient, topic: NewTopic, **kw) -> KafkaError | None:
    fs = admin.create_topics([topic], operation_timeout=10, request_timeout=15, **kw)
    try:
        fs[topic.topic].result(timeout=TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)  # all topics: a null list never auto-creates


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)


def _values(entries: dict[str, ConfigEntry], keys) -> dict[str, tuple[str | None, ConfigSource]]:
    return {k: (entries[k].value, ConfigSource(entries[k].source)) for k in keys}


DYN, DEF = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG


def test_create_with_configs_and_describe(admin, kadmin, broker) -> None:
    topic = unique("cfg")
    assert _create_error(admin, NewTopic(topic, 2, 1, config={"cleanup.policy": "compact",
                                                             "retention.ms": "1000"})) is None
    md = admin.list_topics(timeout=10).topics[topic]
    assert sorted(md.partitions) == [0, 1]
    assert all(p.leader == 1 and p.replicas == [1] and p.isrs == [1] for p in md.partitions.values())

    entries = _describe(admin, topic)
    assert _values(entries, ["cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes"]) == {
        "cleanup.policy": ("compact", DYN),
        "retention.ms": ("1000", DYN),
        "segment.bytes": ("1073741824", DEF),
        "max.message.bytes": ("1048588", DEF),
    }
    assert not entries["cleanup.policy"].is_default and entries["segment.bytes"].is_default

    # kafka-python: the default filter keeps only the modified keys.
    modified = kadmin.describe_configs([KConfigResource("TOPIC", topic)])["topic"][topic]
    assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
        "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("1000", "DYNAMIC_TOPIC_CONFIG"),
    }
    every = kadmin.describe_configs([KConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
    assert every["segment.bytes"]["value"] == "1073741824"
    assert every["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    # Only asked-for keys come back.
    some = kadmin.describe_configs([KConfigResource("TOPIC", topic, ["retention.ms"])], config_filter="all")
    assert list(some["topic"][topic]) == ["retention.ms"]


def test_describe_config_types(kadmin, broker) -> None:
    """ConfigType of DescribeConfigs v3: Kafka calls retention.ms LONG and the ratio DOUBLE (6)."""
    topic = unique("cfgtype")
    create_topic("kafka-python", broker.bootstrap, topic, 1)
    every = kadmin.describe_configs([KConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
    assert every["retention.ms"]["config_type"] == "LONG"
    assert every["min.cleanable.dirty.ratio"]["value"] == "0.5"
    assert every["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"


def test_validate_only_creates_nothing(admin, kadmin, broker) -> None:
    topic = unique("vo")
    assert _create_error(admin, NewTopic(topic, 3, 1, config={"retention.ms": "1000"}), validate_only=True) is None
    res = kadmin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
    assert [t["error_code"] for t in res["topics"]] == [0]
    assert topic not in _topics(admin)
    assert topic not in kadmin.list_topics()
    assert not list(Path(broker.log_dir).glob(f"{topic}-*"))
    # ... but validate_only still validates.
    err = _create_error(admin, NewTopic(topic, 1, 1, config={"retention.ms": "soon"}), validate_only=True)
    assert err is not None and err.code() == INVALID_CONFIG


def test_create_errors(admin, kadmin, broker) -> None:
    topic = unique("dup")
    assert _create_error(admin, NewTopic(topic, 1, 1)) is None
    err = _create_error(admin, NewTopic(topic, 1, 1))
    assert err is not None and err.code() == TOPIC_ALREADY_EXISTS
    res = kadmin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
    assert [t["error_code"] for t in res["topics"]] == [TOPIC_ALREADY_EXISTS]

    before = _topics(admin)
    for bad in ["bad name", "bad/name", "..", "x" * 250, "tab\tname"]:
        err = _create_error(admin, NewTopic(bad, 1, 1))
        assert err is not None and err.code() == INVALID_TOPIC_EXCEPTION, (bad, err)
    res = kadmin.create_topics({"no*stars": {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
    assert [t["error_code"] for t in res["topics"]] == [INVALID_TOPIC_EXCEPTION]

    bad_cfg = unique("badcfg")
    for cfg in ({"retention.ms": "tomorrow"}, {"cleanup.policy": "shred"}, {"no.such.config": "1"},
                {"segment.bytes": "1"}):
        err = _create_error(admin, NewTopic(bad_cfg, 1, 1, config=cfg))
        assert err is not None and err.code() == INVALID_CONFIG, (cfg, err)
    res = kadmin.create_topics({bad_cfg: {"num_partitions": 1, "replication_factor": 1,
                                          "configs": {"max.message.bytes": "-5"}}}, raise_errors=False)
    assert [t["error_code"] for t in res["topics"]] == [INVALID_CONFIG]

    err = _create_error(admin, NewTopic(bad_cfg, 0, 1))
    assert err is not None and err.code() == INVALID_PARTITIONS
    err = _create_error(admin, NewTopic(bad_cfg, 1, 3))
    assert err is not None and err.code() == 38  # INVALID_REPLICATION_FACTOR

    assert _topics(admin) == before  # nothing was created by any failed request
    assert not list(Path(broker.log_dir).glob(f"{bad_cfg}-*"))


def _alter_topic(admin: AdminClient, topic: str, incremental: list[ConfigEntry] | None = None,
                 set_config: dict | None = None) -> None:
    res = ConfigResource(ResourceType.TOPIC, topic, set_config=set_config, incremental_configs=incremental)
    if incremental is not None:
        fs = admin.incremental_alter_configs([res], request_timeout=15)
    else:
        with warnings.catch_warnings():  # the legacy API is deprecated in the client, still served by brokers
            warnings.simplefilter("ignore", DeprecationWarning)
            fs = admin.alter_configs([res], request_timeout=15)
    fs[res].result(timeout=TIMEOUT)


def test_admin_changes_persist_across_restart(fresh_broker) -> None:
    """Alter/IncrementalAlter configs, CreatePartitions and DeleteTopics all survive a restart."""
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic, gone = unique("alter"), unique("gone")
    assert _create_error(admin, NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})) is None
    assert _create_error(admin, NewTopic(gone, 2, 1)) is None
    produce_confluent(b.bootstrap, gone, make_records(10, 2, "gone"))
    admin.delete_topics([gone], request_timeout=15)[gone].result(timeout=TIMEOUT)
    admin.create_partitions([NewPartitions(topic, 3)], request_timeout=15)[topic].result(timeout=TIMEOUT)

    # Legacy AlterConfigs replaces the whole set: cleanup.policy returns to its default.
    _alter_topic(admin, topic, set_config={"retention.ms": "5000"})
    assert _values(_describe(admin, topic), ["retention.ms", "cleanup.policy"]) == {
        "retention.ms": ("5000", DYN), "cleanup.policy": ("delete", DEF)}

    # Incremental: SET, APPEND to a list, and DELETE (back to the default).
    _alter_topic(admin, topic, incremental=[
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", "200000", incremental_operation=AlterConfigOpType.SET),
    ])
    _alter_topic(admin, topic, incremental=[
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    # APPEND adds to Kafka's default, in order (as Kafka's controller does).
    want = {"retention.ms": ("5000", DYN), "segment.bytes": ("1048576", DYN),
            "cleanup.policy": ("delete,compact", DYN), "max.message.bytes": ("1048588", DEF)}
    assert _values(_describe(admin, topic), want) == want

    # A bad value changes nothing (the whole request is validated first).
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "lots", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)
    assert info.value.args[0].code() == INVALID_CONFIG
    assert _values(_describe(admin, topic), want) == want

    # kafka-python's alter_configs (it picks IncrementalAlterConfigs).
    k = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
    try:
        out = k.alter_configs([KConfigResource("TOPIC", topic, {"delete.retention.ms": "1234"})])
        assert out == {"topic": {topic: "OK"}}
    finally:
        k.close()
    want["delete.retention.ms"] = ("1234", DYN)

    b.stop()
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert _values(_describe(admin, topic), want) == want
    topics = admin.list_topics(timeout=10).topics
    assert gone not in topics and not list(Path(b.log_dir).glob(f"{gone}-*"))
    assert sorted(topics[topic].partitions) == [0, 1, 2]
    acked = produce_confluent(b.bootstrap, topic, [Rec(2, b"k", b"on-new-partition")])
    assert [(a.partition, a.offset) for a in acked] == [(2, 0)]


def test_create_partitions(admin, broker) -> None:
    topic = unique("cp")
    create_topic("confluent", broker.bootstrap, topic, 3)
    recs = make_records(30, 3, "before")
    produce_confluent(broker.bootstrap, topic, recs)

    fs = admin.create_partitions([NewPartitions(topic, 6)], request_timeout=15)
    fs[topic].result(timeout=TIMEOUT)
    assert sorted(admin.list_topics(timeout=10).topics[topic].partitions) == list(range(6))
    assert (Path(broker.log_dir) / f"{topic}-5").is_dir()

    more = [Rec(5, b"k5-%d" % i, b"v5-%d" % i) for i in range(7)]
    acked = produce_confluent(broker.bootstrap, topic, more)
    assert [(a.partition, a.offset) for a in acked] == [(5, i) for i in range(7)]
    got = consume_confluent(broker.bootstrap, topic, 6, len(recs) + len(more))
    check_consumed(got, recs + more, 6, headers=False)

    for count in (6, 4):  # not an increase
        fs = admin.create_partitions([NewPartitions(topic, count)], request_timeout=15)
        with pytest.raises(KafkaException) as info:
            fs[topic].result(timeout=TIMEOUT)
        assert info.value.args[0].code() == INVALID_PARTITIONS
    fs = admin.create_partitions([NewPartitions(unique("nope"), 2)], request_timeout=15)
    with pytest.raises(KafkaException) as info:
        list(fs.values())[0].result(timeout=TIMEOUT)
    assert info.value.args[0].code() == UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics(admin, kadmin, broker) -> None:
    topic, other = unique("del"), unique("del-k")
    create_topic("confluent", broker.bootstrap, topic, 2)
    create_topic("kafka-python", broker.bootstrap, other, 1)
    produce_confluent(broker.bootstrap, topic, make_records(10, 2, "d"))
    assert (Path(broker.log_dir) / f"{topic}-0").is_dir()

    admin.delete_topics([topic], operation_timeout=10, request_timeout=15)[topic].result(timeout=TIMEOUT)
    assert topic not in _topics(admin)
    assert not list(Path(broker.log_dir).glob(f"{topic}-*"))

    res = kadmin.delete_topics([other])
    assert [(t["name"], t["error_code"]) for t in res["topics"]] == [(other, 0)]
    assert other not in kadmin.list_topics()
    assert not list(Path(broker.log_dir).glob(f"{other}-*"))

    with pytest.raises(KafkaException) as info:
        admin.delete_topics([topic], request_timeout=15)[topic].result(timeout=TIMEOUT)
    assert info.value.args[0].code() == UNKNOWN_TOPIC_OR_PARTITION

    # The name can be reused, starting from offset 0 again.
    assert _create_error(admin, NewTopic(topic, 1, 1)) is None
    acked = produce_confluent(broker.bootstrap, topic, [Rec(0, b"k", b"again")])
    assert [(a.partition, a.offset) for a in acked] == [(0, 0)]


def test_delete_records(admin, broker) -> None:
    topic = unique("dr")
    create_topic("confluent", broker.bootstrap, topic, 2)
    recs = make_records(200, 2, "dr", headers="none")
    produce_confluent(broker.bootstrap, topic, recs)

    tp0 = TopicPartition(topic, 0, 40)
    out = admin.delete_records([tp0], request_timeout=15)
    assert out[tp0].result(timeout=TIMEOUT).low_watermark == 40
    c = confluent_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (40, 100)
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 100)
    finally:
        c.close()

    # Offset 0 is gone: with auto.offset.reset=error the consumer reports it ...
    err = offset_reset_error(broker.bootstrap, topic, 0, timeout=15)
    assert err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), err
    # ... and with earliest it restarts at the new low watermark.
    earliest: dict[str, Any] = {"auto.offset.reset": "earliest"}
    got = consume_confluent(broker.bootstrap, topic, 1, 60, start=0, **earliest)
    want = [r for r in recs if r.partition == 0][40:]
    assert [(g.offset, g.value) for g in got] == [(40 + i, r.value) for i, r in enumerate(want)]

    # kafka-python's delete_records, then its consumer with auto_offset_reset none / earliest.
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    k = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        res = k.delete_records({KTP(topic, 1): 70})
        assert [(tp.partition, v["low_watermark"]) for tp, v in res.items()] == [(1, 70)]
        # Beyond the high watermark: OFFSET_OUT_OF_RANGE, low watermark unchanged.
        with pytest.raises(OffsetOutOfRangeError):
            k.delete_records({KTP(topic, 1): 101})
    finally:
        k.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="none", request_timeout_ms=15000)
    try:
        tp = KTP(topic, 1)
        kc.assign([tp])
        assert kc.beginning_offsets([tp]) == {tp: 70}
        kc.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                assert kc.poll(timeout_ms=200) == {}
    finally:
        kc.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="earliest", request_timeout_ms=15000)
    try:
        kc.assign([tp])
        kc.seek(tp, 0)
        first: list[Any] = []
        deadline = time.monotonic() + 15
        while not first and time.monotonic() < deadline:
            for msgs in kc.poll(timeout_ms=200).values():
                first += msgs
        assert first and first[0].offset == 70
    finally:
        kc.close()

    # Everything: -1 means "up to the high watermark".
    tp_all = TopicPartition(topic, 0, -1)
    out = admin.delete_records([tp_all], request_timeout=15)
    assert out[tp_all].result(timeout=TIMEOUT).low_watermark == 100


def test_describe_cluster_kafka_python(kadmin, broker) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    info = kadmin.describe_cluster()
    assert info["controller_id"] == 1
    assert info["cluster_id"] == "headwater-cluster"
    assert [(b["broker_id"], b["port"]) for b in info["brokers"]] == [(1, port)]


def test_describe_cluster_confluent(admin, broker) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    res = admin.describe_cluster(request_timeout=15).result(timeout=TIMEOUT)
    assert res.controller.id == 1
    assert [(n.id, n.port) for n in res.nodes] == [(1, port)]
    assert res.cluster_id == "headwater-cluster"
