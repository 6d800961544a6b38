"""Internal topics (issue 26, point 5): clients read ``__consumer_offsets`` but never write, trim or delete it,
and records in it that do not decode are skipped on start instead of keeping the broker down.

Produce and DeleteRecords answer INVALID_TOPIC_EXCEPTION as Kafka's ReplicaManager does; DeleteTopics the
same (Kafka's controller would delete it; the group coordinator's state lives in it here); CreatePartitions
INVALID_REQUEST (a group's partition is its id's hash modulo the count).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from crc32c import crc32c
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTopicPartition
from support import rawkafka
from support.brokerproc import BrokerProcess

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.group.records import OffsetAndMetadata as StoredOffset
from headwater.broker.group.records import encode_offset_key, encode_offset_value, java_string_hash
from headwater.broker.group.store import OFFSETS_TOPIC
from headwater.broker.topics.cluster import Cluster
from headwater.kafka.records import Record, build_batch, parse_header
from headwater.testing import unique

pytestmark = pytest.mark.timeout(120)

INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
OFFSETS_PARTITIONS = 3  # the fresh brokers' offsets.topic.num.partitions


def test_produce_to_consumer_offsets_is_refused(broker: BrokerProcess) -> None:
    forged = build_batch([Record(key=encode_offset_key("victim", "t", 0),
                                 value=encode_offset_value(StoredOffset(999)))])
    with rawkafka.Conn(broker.port) as conn:
        answer = conn.produce(OFFSETS_TOPIC, forged, partition=0)
        assert answer.error_code == INVALID_TOPIC_EXCEPTION
        assert answer.error_message == f"Cannot append to internal topic {OFFSETS_TOPIC}"
        assert conn.produce(OFFSETS_TOPIC, forged, partition=0, version=3).error_code == INVALID_TOPIC_EXCEPTION

    # a real client gets the error of an invalid topic, and ordinary topics are still served
    results: dict[str, str] = {}  # by topic: the two deliveries are reported in whichever order they end
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    producer.produce(OFFSETS_TOPIC, b"forged",
                     on_delivery=lambda err, _m: results.update({OFFSETS_TOPIC: err.name() if err else "ok"}))
    topic = unique("after-internal")
    producer.produce(topic, b"fine", on_delivery=lambda err, _m: results.update({topic: err.name() if err else "ok"}))
    assert producer.flush(30) == 0
    assert results == {OFFSETS_TOPIC: "TOPIC_EXCEPTION", topic: "ok"}


def test_delete_records_and_delete_topics_refuse_consumer_offsets(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records([TopicPartition(OFFSETS_TOPIC, 0, -1)]).values()
    with pytest.raises(KafkaException) as trimmed:
        future.result(30)
    assert trimmed.value.args[0].code() == INVALID_TOPIC_EXCEPTION  # DeleteRecords answers carry no message

    with pytest.raises(KafkaException) as deleted:
        admin.delete_topics([OFFSETS_TOPIC], operation_timeout=10)[OFFSETS_TOPIC].result(30)
    assert deleted.value.args[0].code() == INVALID_TOPIC_EXCEPTION

    with pytest.raises(KafkaException) as grown:
        admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 200)])[OFFSETS_TOPIC].result(30)
    assert grown.value.args[0].code() == INVALID_REQUEST
    assert "internal topic __consumer_offsets cannot be changed" in grown.value.args[0].str()

    metadata = admin.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC]
    assert metadata.error is None and len(metadata.partitions) == 50  # untouched
    # an ordinary topic is still created, trimmed and deleted
    topic = unique("ordinary")
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    [trim] = admin.delete_records([TopicPartition(topic, 0, -1)]).values()
    assert trim.result(30).low_watermark == 0
    admin.delete_topics([topic], operation_timeout=10)[topic].result(30)


def _offsets_partition(group: str) -> int:
    return abs(java_string_hash(group)) % OFFSETS_PARTITIONS


def _with_codec(batch: bytes, codec: int) -> bytes:
    """``batch`` claiming another compression codec than its payload's, with a CRC that matches: a batch
    whose records do not decode, as a bug or a forged produce of earlier releases could leave."""
    buf = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attributes | codec)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        return {(tp.topic, tp.partition): o.offset for tp, o in admin.list_group_offsets(group)[group].items()}
    finally:
        admin.close()


def test_records_that_do_not_decode_are_skipped_and_the_broker_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}"
    topic, before, after = "orders", "group-before", "group-after"
    with BrokerProcess(data, settings) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
        consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=before, enable_auto_commit=False)
        consumer.commit({KTopicPartition(topic, 0): OffsetAndMetadata(7, "", -1),
                         KTopicPartition(topic, 1): OffsetAndMetadata(3, "", -1)})
        consumer.close()
        assert _committed(proc.bootstrap, before) == {(topic, 0): 7, (topic, 1): 3}

        # Through the log layer, with the broker stopped: records of every shape that does not decode, on
        # the partition of the group committed above, then a good commit of another group after them.
        proc.stop()
        cluster = Cluster(BrokerConfig(**{"log.dirs": str(data), "offsets.topic.num.partitions": OFFSETS_PARTITIONS}))
        cluster.load()
        try:
            plog = cluster.partition(OFFSETS_TOPIC, _offsets_partition(before)).log
            good_value = encode_offset_value(StoredOffset(1))
            bad = [
                Record(key=b"\x00\x07garbage", value=good_value),  # unknown key version
                Record(key=encode_offset_key(before, topic, 0), value=b"\x00\x63" + good_value[2:]),  # value v99
                Record(key=encode_offset_key(before, topic, 1), value=good_value[:9]),  # truncated value
                Record(key=b"\x00\x02\x00\x05grp", value=b"\x00\x03\xff"),  # group metadata cut short
                Record(key=b"\x00", value=None),  # a key too short for its version
            ]
            bad = [Record(offset=i, key=r.key, value=r.value) for i, r in enumerate(bad)]
            for batch in (build_batch(bad), _with_codec(build_batch(bad), 1)):  # then a gzip batch that is not
                plog.append(bytearray(batch), parse_header(batch))
            good = build_batch([Record(key=encode_offset_key(after, topic, 1), value=encode_offset_value(
                StoredOffset(42)))])
            after_log = cluster.partition(OFFSETS_TOPIC, _offsets_partition(after)).log
            after_log.append(bytearray(good), parse_header(good))
        finally:
            cluster.close()

        proc.start()
        log = proc.log_text(since_start=True)
        assert log.count("skipped the record") == len(bad), log[-4000:]
        assert "skipped the batch" in log and "gzip payload does not decode" in log, log[-4000:]
        assert _committed(proc.bootstrap, before) == {(topic, 0): 7, (topic, 1): 3}
        assert _committed(proc.bootstrap, after) == {(topic, 1): 42}
        # and groups still commit
        consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=before, enable_auto_commit=False)
        consumer.commit({KTopicPartition(topic, 0): OffsetAndMetadata(8, "", -1)})
        consumer.close()
        assert _committed(proc.bootstrap, before)[(topic, 0)] == 8
