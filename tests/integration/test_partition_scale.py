"""Partitions bounded by disk, not by descriptors (issue 31, point 1), with real clients over TCP:

- a broker whose open-files limit is smaller than its segment files serves them all: written, read from their
  oldest segments, written again and read after a restart; it raised its soft limit to the hard one and said so;
- a CreateTopics or CreatePartitions the broker cannot serve (``max.broker.partitions``; a partition directory
  it cannot make) is answered with an error code and message on a connection that stays usable, and leaves no
  partition on disk or in metadata, also after a restart;
- a creation cut short by a crash is all or nothing after the restart.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from support.brokerproc import BrokerProcess

from headwater.testing import unique
from headwater.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
SOFT, HARD = 96, 128  # the broker's open-files limit: 128 descriptors once raised
TOPICS, PER_TOPIC, ROUNDS = 3, 50, 6  # 150 partitions, a segment per round each: 2,700 segment files


def _refusal(future: object) -> tuple[int, str]:
    with pytest.raises(KafkaException) as refused:
        future.result(30)  # type: ignore[attr-defined]
    error = refused.value.args[0]
    return error.code(), error.str()


def _partition_dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))


def _read_all(bootstrap: str, topics: list[str]) -> dict[tuple[str | None, int | None], list[bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(PER_TOPIC)])
    got: dict[tuple[str | None, int | None], list[bytes | None]] = {}
    want = len(topics) * PER_TOPIC * ROUNDS
    try:
        for _ in range(60):
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    got.setdefault((msg.topic(), msg.partition()), []).append(msg.value())
            if sum(map(len, got.values())) >= want:
                break
    finally:
        consumer.close()
    return got


def _produce(bootstrap: str, topics: list[str], rounds: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for r in rounds:  # a batch per partition and round
        for t in topics:
            for p in range(PER_TOPIC):
                producer.produce(t, value=f"{t}/{p}/{r}".encode() + b"x" * 200, partition=p)
        assert producer.flush(60) == 0


def test_more_segment_files_than_the_open_files_limit_are_served(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, open_files=(SOFT, HARD)) as broker:
        assert f"open-files limit (RLIMIT_NOFILE) raised from {SOFT} to {HARD} (hard limit {HARD})" in broker.log_text()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [unique("many") for _ in range(TOPICS)]
        # a batch fills a segment: reads start in segments long closed
        for future in admin.create_topics([NewTopic(t, PER_TOPIC, 1, config={"segment.bytes": "300"})
                                           for t in topics]).values():
            future.result(60)
        _produce(broker.bootstrap, topics, range(ROUNDS // 2))
        _produce(broker.bootstrap, topics, range(ROUNDS // 2, ROUNDS))
        files = sum(1 for t in topics for p in range(PER_TOPIC) for _ in (data / f"{t}-{p}").glob("*.log"))
        assert files == ROUNDS * TOPICS * PER_TOPIC and 3 * files > 20 * HARD
        assert broker.proc is not None and len(os.listdir(f"/proc/{broker.proc.pid}/fd")) < HARD
        expected: dict[tuple[str | None, int | None], list[bytes | None]] = {
            (t, p): [f"{t}/{p}/{r}".encode() + b"x" * 200 for r in range(ROUNDS)]
            for t in topics for p in range(PER_TOPIC)}
        assert _read_all(broker.bootstrap, topics) == expected
        broker.restart()
        assert _read_all(broker.bootstrap, topics) == expected
        assert "Too many open files" not in broker.log_text()


def test_partitions_over_max_broker_partitions_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    internal = ("offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1")  # count too
    with BrokerProcess(data, "max.broker.partitions=10", *internal) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        big, small = unique("big"), unique("small")
        code, message = _refusal(admin.create_topics([NewTopic(big, 11, 1)])[big])
        assert code == POLICY_VIOLATION and "max.broker.partitions=10" in message, message
        admin.create_topics([NewTopic(small, 6, 1)])[small].result(30)  # the same client, served
        code, message = _refusal(admin.create_partitions([NewPartitions(small, 11)])[small])
        assert code == POLICY_VIOLATION and "max.broker.partitions=10" in message, message
        for _ in range(2):  # before and after a restart
            topics = admin.list_topics(timeout=30).topics
            assert big not in topics and len(topics[small].partitions) == 6
            assert _partition_dirs(data, big) == [] and len(_partition_dirs(data, small)) == 6
            broker.restart()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})


def test_a_creation_failing_midway_is_answered_and_rolled_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic, grown = unique("midway"), unique("grown")
        (data / f"{topic}-3").write_text("in the way")  # a file where partition 3's directory goes
        code, message = _refusal(admin.create_topics([NewTopic(topic, 6, 1)])[topic])
        assert code == KAFKA_STORAGE_ERROR and f"Could not create partition {topic}-3" in message, message
        admin.create_topics([NewTopic(grown, 2, 1)])[grown].result(30)  # the connection still serves
        (data / f"{grown}-4").write_text("in the way")
        code, message = _refusal(admin.create_partitions([NewPartitions(grown, 6)])[grown])
        assert code == KAFKA_STORAGE_ERROR and f"{grown}-4" in message, message
        for _ in range(2):  # before and after a restart
            topics = admin.list_topics(timeout=30).topics
            assert topic not in topics and len(topics[grown].partitions) == 2
            assert _partition_dirs(data, topic) == [f"{topic}-3"]  # only the file the test put there
            assert _partition_dirs(data, grown) == [f"{grown}-0", f"{grown}-1", f"{grown}-4"]
            broker.restart()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})


def test_a_creation_cut_by_a_crash_is_all_or_nothing_after_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        topic, count = unique("crash"), 3000
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, count, 1)], request_timeout=60)  # not waited for: the broker dies
        wait_until(lambda: any(data.glob(f"{topic}-*")), "the first partition directories")
        broker.restart(kill=True)
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).topics
        dirs = _partition_dirs(data, topic)
        if topic in topics:  # the creation won the race with the kill: whole
            assert len(topics[topic].partitions) == len(dirs) == count
        else:
            assert dirs == [], f"{len(dirs)} partitions of a topic that does not exist were left behind"
        assert "whose creation was interrupted" in broker.log_text(since_start=True) or topic in topics
