"""Brokers in a ZooKeeper cluster (tests/support/zkserver.py) as real subprocesses, and what their Metadata
says about the cluster (its brokers and controller, a topic's partitions), for the cluster tests and
bench/controller_failover.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse, MetadataResponse

from headwater.broker.txn.store import txn_partition
from headwater.kafka.records import iter_batches
from headwater.testing import unique, wait_until

from .brokerproc import BrokerProcess
from .rawkafka import metadata_req, request


def cluster_broker(base: Path, connect: str, broker_id: int, session_timeout_ms: int,
                   *overrides: str) -> BrokerProcess:
    """Broker ``broker_id`` of the cluster at ``connect`` (host:port/chroot), logging beside its log dir."""
    base.mkdir(parents=True, exist_ok=True)
    return BrokerProcess(base / f"b{broker_id}", f"zookeeper.connect={connect}", f"broker.id={broker_id}",
                         f"zookeeper.session.timeout.ms={session_timeout_ms}", *overrides)


@contextmanager
def running_cluster(base: Path, connect: str, ids: set[int], session_timeout_ms: int,
                    *overrides: str, first: set[int] | None = None,
                    each: Callable[[int], tuple[str, ...]] = lambda _: ()) -> Iterator[dict[int, BrokerProcess]]:
    """Brokers ``ids`` of the cluster at ``connect`` (only those of ``first`` when given: the test starts the
    others) started together, once every one's Metadata agrees on them and a controller; SIGKILLed at the end.
    ``each`` gives a broker's own overrides (e.g. its ``broker.rack``) from its id."""
    started = {i: cluster_broker(base, connect, i, session_timeout_ms, *overrides, *each(i)) for i in ids}
    running = ids if first is None else first
    try:
        with ThreadPoolExecutor(len(running)) as starting:  # a broker's start is mostly its interpreter's
            list(starting.map(lambda i: started[i].start(), running))
        every = [started[i] for i in running]
        wait_until(lambda: agreed_controller(every, running), f"brokers {sorted(running)} and a controller",
                   timeout=20)
        yield started
    finally:
        for b in started.values():
            b.kill()


def metadata_view(broker: BrokerProcess) -> tuple[set[int], int] | None:
    """(live broker ids, controller id) from the broker's Metadata answer via librdkafka; None when it fails."""
    try:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
    except Exception:  # not answering (yet): the caller's wait goes on
        return None
    return set(md.brokers), md.controller_id


def agreed_controller(brokers: list[BrokerProcess], ids: set[int]) -> int | None:
    """The controller id once every broker's Metadata lists exactly ``ids`` and the same controller among
    them; None until then."""
    answers = [metadata_view(b) for b in brokers]
    if any(a is None or a[0] != ids for a in answers):
        return None
    controllers = {a[1] for a in answers if a is not None}
    controller = controllers.pop() if len(controllers) == 1 else None
    return controller if controller in ids else None


# (leader, leader epoch, replicas, isr) of each partition, as one broker's Metadata (v8) answers
PartitionView = tuple[int, int, tuple[int, ...], tuple[int, ...]]


def topic_view(broker: BrokerProcess, topic: str) -> dict[int, PartitionView] | None:
    """The topic's partitions in the broker's Metadata; None when it fails or names an error for the topic."""
    try:
        answer = request(broker.port, metadata_req([topic]), MetadataResponse, timeout=5)
    except Exception:  # not answering (yet): the caller's wait goes on
        return None
    entry = answer.topics[0]
    if entry.error_code:
        return None
    return {p.partition_index: (p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes))
            for p in entry.partitions}


def agreed_topic(brokers: list[BrokerProcess], topic: str,
                 wanted: Callable[[dict[int, PartitionView]], bool] = bool) -> dict[int, PartitionView] | None:
    """The topic's partitions once every broker's Metadata answers the same and ``wanted`` holds of it."""
    views = [topic_view(b, topic) for b in brokers]
    first = views[0]
    if first is None or any(v != first for v in views) or not wanted(first):
        return None
    return first


def txn_coordinator(brokers: list[BrokerProcess], transactional_id: str) -> int | None:
    """The id's transaction coordinator once every broker's FindCoordinator (the first one makes
    ``__transaction_state``) answers the same broker and that broker leads the id's ``__transaction_state``
    partition; None meanwhile."""
    try:
        found = {int(request(b.port, FindCoordinatorRequest[2](key=transactional_id, key_type=1),
                             FindCoordinatorResponse, timeout=5).node_id) for b in brokers}
    except Exception:  # a broker not answering (yet): the caller's wait goes on
        return None
    view = topic_view(brokers[0], "__transaction_state")
    if len(found) != 1 or view is None:
        return None
    node = found.pop()
    return node if view[txn_partition(transactional_id, len(view))][0] == node else None


class NumberedProducer(threading.Thread):
    """An idempotent librdkafka producer (acks=all) writing the numbers ``first``, ``first`` + 1, ...
    round-robin over the topic's partitions (or to partition ``only``), ~10k a second, until ``stop``;
    ``acked`` holds each partition's acknowledged numbers (with the wall-clock time of each acknowledgement
    in ``acked_at``), ``failed`` the delivery errors."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, first: int = 0, only: int | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.first, self.only = first, only
        self.acked: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.acked_at: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        def fatal(err: KafkaError) -> None:
            if err.fatal():  # the producer gives up: its outstanding records are never answered
                self.failed.append(f"fatal: {err}")
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 500,
                             "error_cb": fatal})

        def delivered(err: object, msg: Message) -> None:
            if err is not None:
                self.failed.append(str(err))
            else:
                self.acked[msg.partition() or 0].append(int(msg.value() or b""))
                self.acked_at[msg.partition() or 0].append(time.time())
        n = self.first
        while not self.stop.is_set():
            partition = n % self.partitions if self.only is None else self.only
            try:
                producer.produce(self.topic, str(n).encode(), partition=partition, on_delivery=delivered)
            except KafkaException as exc:  # a fatal error: it refuses every record from then on
                self.failed.append(f"produce refused: {exc}")
                producer.poll(0)  # (error_cb then records the fatal error's reason)
                break
            n += 1
            producer.poll(0)
            if n % 200 == 0:
                time.sleep(0.02)
        left = producer.flush(60)
        if left:
            self.failed.append(f"{left} records still unanswered 60 s after the last was written")

    def finish(self, timeout: float = 90) -> None:
        """Stop producing and wait for every outstanding record's answer."""
        self.stop.set()
        self.join(timeout)
        assert not self.is_alive(), "the producer did not finish"


def replica_batches(log_dir: Path, topic: str, partition: int, below: int) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch below ``below`` in a replica's segment files."""
    out = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        for _, h in iter_batches(segment.read_bytes()):
            if h.last_offset < below:
                out.append((h.base_offset, h.last_offset, h.crc))
    return out


def replicas_equal(log_dirs: list[Path], topic: str, highs: dict[int, int]) -> bool:
    """Whether the replicas in ``log_dirs`` hold the same batches below each partition's high watermark (False
    while a segment goes away under the read, e.g. a follower truncating: the caller's wait goes on)."""
    try:
        return all(len({tuple(replica_batches(d, topic, p, high)) for d in log_dirs}) == 1
                   for p, high in highs.items())
    except FileNotFoundError:
        return False


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark, from its leader."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g")})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def read_numbers(bootstrap: str, topic: str, partitions: int, timeout: float = 60,
                 isolation: str = "read_committed") -> dict[int, list[int]]:
    """Every record's number in each partition, read from offset 0 to the end (librdkafka, no group; its
    default isolation, read_committed, unless ``isolation`` says read_uncommitted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True, "isolation.level": isolation})
    read: dict[int, list[int]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            error, index = msg.error(), msg.partition() or 0
            if error is not None:
                if error.code() == -191:  # _PARTITION_EOF
                    ended.add(index)
                continue
            read[index].append(int(msg.value() or b""))
    finally:
        consumer.close()
    return read


def assert_each_acknowledged_once(acked: dict[int, list[int]], read: dict[int, list[int]]) -> None:
    """Every partition read once and in order, holding every number acknowledged to it."""
    for p, numbers in read.items():
        assert len(numbers) == len(set(numbers)), f"partition {p}: duplicates"
        assert numbers == sorted(numbers), f"partition {p}: out of order"
        missing = set(acked[p]) - set(numbers)
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
