"""Leader epochs on a single-node broker, over TCP: OffsetForLeaderEpoch (key 23) answered from the partition's
leader-epoch cache, the current-leader-epoch checks of Fetch v9+ / ListOffsets v4+, every batch stamped with
epoch 0, and librdkafka consumers, which send epochs in Fetch and validate positions with OffsetForLeaderEpoch,
working as against Kafka."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from kafka.protocol.consumer import (
    FetchResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from support.hwclients import TIMEOUT, confluent_consumer, poll_messages, unique
from support.rawkafka import Conn, create_topic, fetch_req, list_offsets_req, produce

from headwater.kafka.records import Record, build_batch, iter_batches

pytestmark = pytest.mark.timeout(120)

NONE, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 0, 3, 74, 75
RawConn = partial(Conn, timeout=15.0, client_id="hw-epochs")


def epoch_request(version: int, topic: str, leader_epoch: int, current: int = -1, partition: int = 0,
                  replica_id: int = -1) -> Any:
    T = OffsetForLeaderEpochRequest[version].OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest[version](
        replica_id=replica_id,
        topics=[T(topic=topic, partitions=[T.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current, leader_epoch=leader_epoch)])])


def end_offset_for(c: Conn, version: int, topic: str, leader_epoch: int, **kw: Any) -> tuple[int, int, int]:
    """(error code, leader epoch, end offset) of one partition's answer."""
    resp = c.call(epoch_request(version, topic, leader_epoch, **kw), OffsetForLeaderEpochResponse)
    [t] = resp.topics
    [p] = t.partitions
    assert t.topic == topic
    return p.error_code, (p.leader_epoch if version >= 1 else -1), p.end_offset


def records(n: int, tag: str) -> bytes:
    return build_batch([Record(offset=i, timestamp=1000 + i, key=None, value=f"{tag}{i}".encode()) for i in range(n)])


def test_offset_for_leader_epoch_over_the_wire(broker: Any) -> None:
    topic = unique("epochs")
    create_topic(broker.port, topic)
    with RawConn(broker.port) as c:
        served = {k.api_key: (k.min_version, k.max_version)
                  for k in c.call(ApiVersionsRequest[0](), ApiVersionsResponse).api_keys}
        assert served[23] == (0, 4)
        # An empty partition: the current epoch (0 on one node) starts at its end.
        for version in range(5):
            assert end_offset_for(c, version, topic, 0) == (NONE, 0 if version >= 1 else -1, 0), version
        # Batches sent with no epoch (-1) are stored stamped with the leader's.
        assert produce(broker.port, topic, records(3, "a")).error_code == NONE
        assert produce(broker.port, topic, records(4, "b")).error_code == NONE
        data = bytes(c.call(fetch_req(topic), FetchResponse).responses[0].partitions[0].records)
        assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [0, 0]
        for version in range(5):
            assert end_offset_for(c, version, topic, 0)[::2] == (NONE, 7), version
        assert end_offset_for(c, 4, topic, 0, current=0) == (NONE, 0, 7)
        assert end_offset_for(c, 3, topic, 1) == (NONE, -1, -1)  # an epoch above every one: undefined
        assert end_offset_for(c, 3, topic, -1) == (NONE, -1, -1)
        assert end_offset_for(c, 3, topic, 0, replica_id=-2) == (NONE, 0, 7)  # the debugging replica id
        # current_leader_epoch (v2+) is checked as Kafka does: newer is unknown here, older is fenced.
        assert end_offset_for(c, 2, topic, 0, current=1)[0] == UNKNOWN_LEADER_EPOCH
        assert end_offset_for(c, 4, topic, 0, current=-2)[0] == FENCED_LEADER_EPOCH
        assert end_offset_for(c, 1, topic, 0, current=5) == (NONE, 0, 7)  # v1 has no current epoch
        assert end_offset_for(c, 4, unique("missing"), 0)[0] == UNKNOWN_TOPIC_OR_PARTITION

        # Fetch v9+ and ListOffsets v4+ check the current leader epoch the same way.
        req = fetch_req(topic, version=11)
        req.topics[0].partitions[0].current_leader_epoch = 1
        assert c.call(req, FetchResponse).responses[0].partitions[0].error_code == UNKNOWN_LEADER_EPOCH
        req.topics[0].partitions[0].current_leader_epoch = 0
        assert c.call(req, FetchResponse).responses[0].partitions[0].error_code == NONE
        req = list_offsets_req(topic, version=5)
        req.topics[0].partitions[0].current_leader_epoch = 1
        assert c.call(req, ListOffsetsResponse).topics[0].partitions[0].error_code == UNKNOWN_LEADER_EPOCH
        req.topics[0].partitions[0].current_leader_epoch = 0
        [answer] = c.call(req, ListOffsetsResponse).topics[0].partitions
        assert (answer.error_code, answer.offset, answer.leader_epoch) == (NONE, 7, 0)


def test_librdkafka_consumers_validate_their_positions(broker: Any) -> None:
    """librdkafka sends the epochs it knows in Fetch, checks a position assigned with an epoch with
    OffsetForLeaderEpoch before fetching from it, and commits and seeks with epochs: all go on undisturbed."""
    topic = unique("epochs-rdkafka")
    create_topic(broker.port, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0

    group = unique("epochs-group")
    c = confluent_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.assign([TopicPartition(topic, 0, 5, leader_epoch=0)])  # validated before the first fetch
        got = []
        for m in poll_messages(c):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value(), m.leader_epoch()))
            if len(got) == 15:
                break
        assert got == [(i, f"v{i}".encode(), 0) for i in range(5, 20)]
        c.commit(offsets=[TopicPartition(topic, 0, 20, leader_epoch=0)], asynchronous=False)
        c.seek(TopicPartition(topic, 0, 2, leader_epoch=0))
        m = next(m for m in poll_messages(c) if m.error() is None)
        assert (m.offset(), m.leader_epoch()) == (2, 0)
    finally:
        c.close()

    for i in range(20, 25):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    # A member of the group resumes from the offset committed with its epoch.
    c = confluent_consumer(broker.bootstrap, **{"group.id": group, "enable.partition.eof": True})
    try:
        c.subscribe([topic])
        offsets: list[int | None] = []
        for m in poll_messages(c):
            err = m.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                if len(offsets) == 5:
                    break
                continue
            offsets.append(m.offset())
        assert offsets == list(range(20, 25))
    finally:
        c.close()
