"""Transaction coordinators on a real ZooKeeper with three real brokers: ``__transaction_state`` is a cluster
topic (made by the first FindCoordinator for a transactional id, replicated on all three), an id's coordinator is
the leader of its partition and the other brokers answer NOT_COORDINATOR, and when that broker is SIGKILLed the
partition's new leader loads the id and coordinates it. librdkafka's transactional producer commits and aborts
before, across and after the kill, and a read_committed consumer sees exactly the committed records; a
consume-transform-produce loop (send_offsets_to_transaction) whose coordinator is killed inside a transaction
writes every input record to its output exactly once. With fewer live brokers than
transaction.state.log.replication.factor, FindCoordinator refuses and makes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import request
from support.zkcluster import (
    PartitionView,
    agreed_controller,
    agreed_topic,
    read_numbers,
    running_cluster,
    topic_view,
    txn_coordinator,
)

from headwater.broker.txn.store import txn_partition
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 3
TXN_PARTITIONS = 5
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16
TXN_STATE = "__transaction_state"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    with running_cluster(tmp_path_factory.mktemp("zk-txn"), f"{zookeeper.connect}/{unique('hw')}", IDS,
                         SESSION_TIMEOUT_MS, f"transaction.state.log.num.partitions={TXN_PARTITIONS}",
                         "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0",
                         first={1, 2}) as brokers:  # the test starts the third once two have refused
        yield brokers


def _bootstrap(cluster: dict[int, BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in cluster.values())


def _live(cluster: dict[int, BrokerProcess]) -> list[BrokerProcess]:
    return [b for b in cluster.values() if b.running]


def _make_topics(cluster: dict[int, BrokerProcess], *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
                                       for t in topics]).values():
        future.result(30)
    for t in topics:
        _wait_for_leaders(cluster, t)


def _wait_for_leaders(cluster: dict[int, BrokerProcess], topic: str) -> dict[int, PartitionView]:
    return wait_until(lambda: agreed_topic(_live(cluster), topic, lambda v: all(p[0] > 0 for p in v.values())),
                      f"{topic}'s leaders on every broker", timeout=20)


def _txn_producer(cluster: dict[int, BrokerProcess], tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": _bootstrap(cluster), "transactional.id": tid,
                         "transaction.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 500})
    producer.init_transactions(30)
    return producer


def _end(producer: Producer, commit: bool) -> bool:
    """Commit (or abort) the open transaction as an application does while its coordinator moves: what is
    retriable is retried, what needs an abort is aborted. Whether it committed."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            return commit
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                commit = False
            elif not error.retriable() or time.monotonic() > deadline:
                raise


class _Pipeline:
    """A consume-transform-produce loop as Kafka's exactly-once applications write it: each transaction holds
    what the consumer read, written to ``sink``, and the consumer's positions (send_offsets_to_transaction); an
    aborted one rewinds the consumer to the group's committed offsets."""

    def __init__(self, cluster: dict[int, BrokerProcess], source: str, sink: str, tid: str, total: int) -> None:
        self.source, self.sink, self.total = source, sink, total
        self.consumer = Consumer({"bootstrap.servers": _bootstrap(cluster), "group.id": unique("ctp"),
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "isolation.level": "read_committed"})
        self.consumer.subscribe([source])
        self.producer = _txn_producer(cluster, tid)
        self.transactions = 0

    def send(self) -> bool:
        """Begin a transaction with what the consumer reads next, its records sent; False when it read nothing."""
        messages = [m for m in self.consumer.consume(100, timeout=0.5) if m.error() is None]
        if not messages:
            return False
        self.producer.begin_transaction()
        for m in messages:
            self.producer.produce(self.sink, m.value(), partition=m.partition() or 0)
        return True

    def commit(self) -> None:
        """The open transaction's offsets sent and the transaction committed (else aborted and rewound)."""
        try:
            self.producer.send_offsets_to_transaction(self.consumer.position(self.consumer.assignment()),
                                                      self.consumer.consumer_group_metadata(), 30)
            commit = True
        except KafkaException as exc:
            if not (exc.args[0].txn_requires_abort() or exc.args[0].retriable()):
                raise
            commit = False
        if not _end(self.producer, commit):
            for tp in self.consumer.committed(self.consumer.assignment(), timeout=30):
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        self.transactions += 1

    def step(self) -> bool:
        """One transaction; True once the group's committed offsets cover the whole input."""
        if self.send():
            self.commit()
            return False
        done = self.consumer.committed([TopicPartition(self.source, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(tp.offset, 0) for tp in done) == self.total


def _same_partition(tid: str, prefix: str) -> str:
    """A transactional id starting with ``prefix`` in the same __transaction_state partition as ``tid`` (so that
    one broker coordinates both)."""
    return next(t for t in (f"{prefix}-{i}" for i in range(1000))
                if txn_partition(t, TXN_PARTITIONS) == txn_partition(tid, TXN_PARTITIONS))


def test_transactions_and_an_exactly_once_pipeline_through_the_coordinators_kill(
        cluster: dict[int, BrokerProcess]) -> None:
    """One kill of the coordinator of two ids: one producer's transactions commit and abort before it and
    after it (the kill falls between two of them), a consume-transform-produce loop's transaction is open
    across it (records sent before, offsets and commit after)."""
    topic, source, sink, tid = unique("txn-out"), unique("ctp-in"), unique("ctp-out"), unique("tid")
    # fewer live brokers than transaction.state.log.replication.factor (3): no coordinator, nothing made
    refused = request(cluster[1].port, FindCoordinatorRequest[2](key=tid, key_type=1), FindCoordinatorResponse)
    assert refused.error_code == COORDINATOR_NOT_AVAILABLE
    assert "transaction.state.log.replication.factor" in refused.error_message
    assert topic_view(cluster[2], TXN_STATE) is None
    cluster[3].start()
    wait_until(lambda: agreed_controller(_live(cluster), IDS), "three brokers and a controller", timeout=20)
    _make_topics(cluster, topic, source, sink)
    total = 600
    loader = Producer({"bootstrap.servers": _bootstrap(cluster), "enable.idempotence": True})
    for n in range(total):
        loader.produce(source, str(n).encode(), partition=n % PARTITIONS)
    assert loader.flush(30) == 0
    producer = _txn_producer(cluster, tid)  # its FindCoordinator made __transaction_state
    view = _wait_for_leaders(cluster, TXN_STATE)
    assert len(view) == TXN_PARTITIONS and all(len(p[2]) == 3 for p in view.values())  # replicated on all three
    coordinator = wait_until(lambda: txn_coordinator(_live(cluster), tid), "the id's coordinator", timeout=20)
    for broker_id, broker in cluster.items():  # the others refuse to coordinate it
        if broker_id != coordinator:
            answer = request(broker.port, InitProducerIdRequest[1](transactional_id=tid, transaction_timeout_ms=30000),
                             InitProducerIdResponse)
            assert answer.error_code == NOT_COORDINATOR

    committed: set[int] = set()
    aborted: set[int] = set()
    first = 0

    def transaction(commit: bool) -> None:
        nonlocal first
        numbers = range(first, first + 30)
        first += 30
        producer.begin_transaction()
        for n in numbers:
            producer.produce(topic, str(n).encode(), partition=n % PARTITIONS)
        if not commit:
            producer.flush(30)  # written before the abort (an abort drops what is still queued)
        (committed if _end(producer, commit) else aborted).update(numbers)

    transaction(True)
    transaction(False)
    transaction(True)
    pipeline = _Pipeline(cluster, source, sink, _same_partition(tid, "ctp"), total)
    wait_until(lambda: pipeline.step() or pipeline.transactions >= 2, "the pipeline's first transactions", timeout=30,
               interval=0)
    wait_until(pipeline.send, "a transaction of the pipeline open, its records sent", timeout=20, interval=0)
    cluster[coordinator].kill()
    transaction(True)  # begun after the kill: it waits for the partition's new leader
    moved = wait_until(lambda: txn_coordinator(_live(cluster), tid), "the id's new coordinator", timeout=20)
    assert moved != coordinator
    pipeline.commit()  # the transaction open across the kill: its offsets and commit go to the new coordinator
    transaction(False)
    transaction(True)
    try:
        wait_until(pipeline.step, "the whole input transformed and committed", timeout=60, interval=0)
    finally:
        pipeline.consumer.close()
    producer.flush(30)

    assert committed and aborted
    read = read_numbers(_bootstrap(cluster), topic, PARTITIONS)
    everything = [n for numbers in read.values() for n in numbers]
    assert len(everything) == len(set(everything)), "a committed record read twice"
    assert set(everything) == committed, (f"lost: {sorted(committed - set(everything))[:5]}, "
                                          f"aborted but read: {sorted(set(everything) & aborted)[:5]}")
    uncommitted = read_numbers(_bootstrap(cluster), topic, PARTITIONS, isolation="read_uncommitted")
    assert aborted <= {n for numbers in uncommitted.values() for n in numbers}  # written, and hidden by the aborts
    output = read_numbers(_bootstrap(cluster), sink, PARTITIONS)
    transformed = sorted(n for numbers in output.values() for n in numbers)
    assert transformed == list(range(total)), (f"{len(transformed)} read, {len(set(transformed))} distinct, "
                                               f"missing {sorted(set(range(total)) - set(transformed))[:5]}")
