"""read_committed against the broker over TCP: transactional batches appended on the broker's event loop as
Produce appends them (check, append, producer state) and markers written as the transaction coordinator
writes them (Partition.append_marker), read back by confluent-kafka (librdkafka) and aiokafka consumers; a
broker SIGKILLed with a transaction open that came through Produce."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from support.hwclients import confluent_consumer, unique
from support.rawkafka import create_topic, fetch_req, list_offsets_req, produce, request

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.log.control import marker_batch
from headwater.broker.server.broker_server import BrokerServer
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    Record,
    build_batch,
    decode_batch_records,
    parse_header,
)


@dataclass
class InProcessBroker:
    server: BrokerServer
    loop: asyncio.AbstractEventLoop
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def txn_records(self, topic: str, pid: int, values: list[bytes], seq: int = 0) -> int:
        """Append a transactional batch of ``pid`` as Produce does once the coordinator let it through."""
        batch = txn_batch(pid, values, seq)

        async def write() -> int:
            cluster = self.server.cluster
            partition = cluster.partition(topic, 0)
            header = parse_header(batch)
            assert partition.producers.check(header) == (0, -1)
            base = partition.log.append(bytearray(batch), header)
            partition.producers.update(header, base)
            cluster.notify_data()
            return base
        return asyncio.run_coroutine_threadsafe(write(), self.loop).result(10)

    def marker(self, topic: str, producer_id: int, commit: bool, epoch: int = 0) -> int:
        """Write a marker on the broker's event loop, as the coordinator does."""
        async def write() -> int:
            return self.server.cluster.partition(topic, 0).append_marker(producer_id, epoch, commit, 0)
        return asyncio.run_coroutine_threadsafe(write(), self.loop).result(10)


@pytest.fixture
def inproc_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    loop = asyncio.new_event_loop()
    started: Future[BrokerServer] = Future()
    stop = asyncio.Event()

    async def main() -> None:
        server = BrokerServer(BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0",
                                                           "log.dirs": str(tmp_path / "data")}))
        await server.start()
        started.set_result(server)
        await stop.wait()
        await server.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    server = started.result(60)
    yield InProcessBroker(server, loop, server.bound[0].port)
    loop.call_soon_threadsafe(stop.set)
    thread.join(30)


def txn_batch(pid: int, values: list[bytes], seq: int = 0) -> bytes:
    records = [Record(i, int(time.time() * 1000), b"k", v) for i, v in enumerate(values)]
    return build_batch(records, attributes=ATTR_TRANSACTIONAL, producer_id=pid, producer_epoch=0, base_sequence=seq)


def plain_records(port: int, topic: str, values: list[bytes]) -> None:
    answer = produce(port, topic, build_batch([Record(i, int(time.time() * 1000), b"k", v)
                                               for i, v in enumerate(values)]))
    assert answer.error_code == 0, answer


def consume_confluent(bootstrap: str, topic: str, level: str, seconds: float) -> list[bytes]:
    """What a consumer of ``level`` reads in ``seconds`` (to the end it is allowed to see)."""
    c = confluent_consumer(bootstrap, **{"isolation.level": level})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            err = m.error()
            assert err is None or err.code() == KafkaError._PARTITION_EOF, err
            value = m.value()
            if err is None and value is not None:
                got.append(value)
    finally:
        c.close()
    return got


def consume_aiokafka(bootstrap: str, topic: str, level: str, seconds: float) -> tuple[list[bytes], int]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def go() -> tuple[list[bytes], int]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=level)
        await c.start()
        got: list[bytes] = []
        try:
            tp = ATP(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    got.extend(m.value for m in msgs)
            end = (await c.end_offsets([tp]))[tp]
        finally:
            await c.stop()
        return got, end

    return asyncio.run(go())


def consume_kafka_python(bootstrap: str, topic: str, level: str, seconds: float) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level=level)
    got: list[bytes] = []
    try:
        c.assign([KTP(topic, 0)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                got.extend(m.value for m in msgs)
    finally:
        c.close()
    return got


def lso_of(port: int, topic: str, level: int) -> tuple[int, int, Any]:
    """(ListOffsets latest, Fetch's last stable offset, Fetch's aborted transactions) at ``level``."""
    [t] = request(port, list_offsets_req(topic, isolation_level=level), ListOffsetsResponse[5]).topics
    fetched = request(port, fetch_req(topic, isolation_level=level), FetchResponse[11])
    p = fetched.responses[0].partitions[0]
    return t.partitions[0].offset, p.last_stable_offset, p.aborted_transactions


def test_read_committed_consumers_see_committed_records_only(inproc_broker: InProcessBroker) -> None:
    port, bootstrap = inproc_broker.port, inproc_broker.bootstrap
    topic = unique("rc")
    inproc_broker.server.cluster.create_topic(topic, 1)
    plain_records(port, topic, [b"plain-0"])  # offset 0
    time.sleep(0.01)
    txn_began = int(time.time() * 1000)
    inproc_broker.txn_records(topic, 11, [b"commit-0", b"commit-1"])  # 1-2
    inproc_broker.txn_records(topic, 12, [b"abort-0", b"abort-1"])  # 3-4
    inproc_broker.txn_records(topic, 11, [b"commit-2"], seq=2)  # 5

    # both transactions open: read_committed stops at the first one's first offset
    assert lso_of(port, topic, 1)[:2] == (1, 1)
    # a timestamp lookup finds no record at or past the LSO for read_committed (Kafka's fetchOffsetForTimestamp)
    for level, expected in ((1, -1), (0, 1)):
        [t] = request(port, list_offsets_req(topic, timestamp=txn_began, isolation_level=level),
                      ListOffsetsResponse[5]).topics
        assert t.partitions[0].offset == expected, (level, t)
    assert lso_of(port, topic, 0)[:2] == (6, 1)  # read_uncommitted: the high watermark, the LSO reported
    assert consume_confluent(bootstrap, topic, "read_committed", 2) == [b"plain-0"]

    inproc_broker.marker(topic, 12, commit=False)  # 6: the abort alone does not move the LSO
    assert lso_of(port, topic, 1)[:2] == (1, 1)
    inproc_broker.marker(topic, 11, commit=True)  # 7
    latest, lso, aborted = lso_of(port, topic, 1)
    assert latest == lso == 8
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(12, 3)]

    committed = [b"plain-0", b"commit-0", b"commit-1", b"commit-2"]
    assert consume_confluent(bootstrap, topic, "read_committed", 3) == committed
    got, end = consume_aiokafka(bootstrap, topic, "read_committed", 3)
    assert (got, end) == (committed, 8)
    assert consume_kafka_python(bootstrap, topic, "read_committed", 3) == committed
    everything = [b"plain-0", b"commit-0", b"commit-1", b"abort-0", b"abort-1", b"commit-2"]
    assert consume_confluent(bootstrap, topic, "read_uncommitted", 3) == everything
    assert consume_aiokafka(bootstrap, topic, "read_uncommitted", 3)[0] == everything


def test_produce_refuses_a_clients_marker(inproc_broker: InProcessBroker) -> None:
    port = inproc_broker.port
    topic = unique("rc-forged")
    inproc_broker.server.cluster.create_topic(topic, 1)
    marker = decode_batch_records(marker_batch(41, 0, True, 0))[1][0]  # forged with a first sequence
    answer = produce(port, topic, build_batch([marker], attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL, producer_id=41,
                                              producer_epoch=0, base_sequence=0))
    assert answer.error_code != 0
    assert lso_of(port, topic, 1)[:2] == (0, 0)  # nothing appended, nothing held back
    plain_records(port, topic, [b"x"])
    assert lso_of(port, topic, 1)[:2] == (1, 1)


def test_a_waiting_read_committed_fetch_wakes_when_the_transaction_commits(inproc_broker: InProcessBroker) -> None:
    port = inproc_broker.port
    topic = unique("rc-wait")
    inproc_broker.server.cluster.create_topic(topic, 1)
    inproc_broker.txn_records(topic, 21, [b"held"])  # 0
    asked = time.monotonic()
    timer = threading.Timer(1.0, inproc_broker.marker, (topic, 21, True))
    timer.start()
    # a long poll of read_committed: nothing below the LSO until the marker, then the record at once
    answer = request(port, fetch_req(topic, isolation_level=1, max_wait_ms=20_000, min_bytes=1), FetchResponse[11],
                     timeout=30)
    waited = time.monotonic() - asked
    timer.join()
    p = answer.responses[0].partitions[0]
    assert p.records and p.last_stable_offset == 2
    assert 0.9 <= waited < 15, waited


def test_sigkill_mid_transaction_shows_nothing_of_it(fresh_broker: Any) -> None:
    """A broker killed while a transaction is open: after the restart its records stay past the LSO (the open
    transaction is rebuilt from the log, no snapshot covering it), while read_uncommitted still sees them."""
    b = fresh_broker.start()
    topic = unique("rc-kill")
    create_topic(b.port, topic)
    plain_records(b.port, topic, [b"before"])  # 0
    answer = produce(b.port, topic, txn_batch(31, [b"unfinished-0", b"unfinished-1"]))  # 1-2
    producer = None
    if answer.error_code == ErrorCode.INVALID_TXN_STATE:  # a coordinator guards Produce: a real transaction
        producer = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid"),
                             "transaction.timeout.ms": 600_000})  # not aborted by timeout during the test
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in (b"unfinished-0", b"unfinished-1"):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
    else:
        assert answer.error_code == 0, answer
    plain_records(b.port, topic, [b"after"])  # 3
    b.restart(kill=True)
    latest, lso, _ = lso_of(b.port, topic, 1)
    assert (latest, lso) == (1, 1)
    assert consume_confluent(b.bootstrap, topic, "read_committed", 3) == [b"before"]
    assert consume_confluent(b.bootstrap, topic, "read_uncommitted", 3) == [b"before", b"unfinished-0",
                                                                            b"unfinished-1", b"after"]
