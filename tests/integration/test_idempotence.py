"""Idempotent producers: sequence checks and dedupe over raw frames, across broker restarts,
and with real clients.

Raw frames use kafka-python's request classes and the broker's own ``build_batch``: a batch
resent with the same producer id, epoch and sequence is acknowledged with its original base
offset and stored once; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
INVALID_PRODUCER_EPOCH. The dedupe state survives a clean restart and a SIGKILL, and producer
ids are never handed out twice. kafka-python, confluent-kafka and aiokafka idempotent
producers store exactly what they sent, in order per key.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse
from support.brokerproc import BrokerProcess
from support.confluent import position
from support.hwclients import TIMEOUT, confluent_consumer, consume_confluent, create_topic, poll_messages, unique
from support.rawkafka import Conn

from headwater.kafka.records import Record, build_batch, iter_batches

pytestmark = pytest.mark.timeout(120)

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


# --------------------------------------------------------------------------- raw frames


RawConn = partial(Conn, timeout=15.0, client_id="hw-idem")


def init_producer_id(conn: Conn) -> tuple[int, int]:
    resp = conn.call(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60000),
                     InitProducerIdResponse)
    assert resp.error_code == NONE
    return resp.producer_id, resp.producer_epoch


class Batch:
    """One idempotent batch: its bytes are built once, so a resend is byte-identical."""

    def __init__(self, pid: int, epoch: int, seq: int, values: list[bytes]) -> None:
        now = int(time.time() * 1000)
        self.values = values
        self.seq = seq
        self.data = build_batch([Record(offset=i, timestamp=now, key=b"k", value=v) for i, v in enumerate(values)],
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce(conn: Conn, topic: str, batch: Batch, partition: int = 0) -> tuple[int, int]:
    """(error code, base offset) of a Produce v8, acks=-1."""
    p = conn.produce(topic, batch.data, partition, acks=-1)
    return p.error_code, p.base_offset


def consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    """Every record of one partition as (offset, value), read to the end."""
    c = confluent_consumer(bootstrap, **{"enable.partition.eof": True})
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        for m in poll_messages(c):
            if err := m.error():
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(err)
            got.append((position(m)[1], m.value() or b""))
        else:
            raise AssertionError(f"no end of partition within {TIMEOUT}s ({len(got)} records)")
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        assert (low, high) == (0, len(got)), f"watermarks {(low, high)} for {len(got)} records"
    finally:
        c.close()
    return got


def stored(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    return consume_all(bootstrap, topic, 0)


def expected_log(batches: list[Batch]) -> list[tuple[int, bytes]]:
    values = [v for b in batches for v in b.values]
    return list(enumerate(values))


@pytest.fixture(scope="module")
def idem_broker(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("idempotence")
    with BrokerProcess(base / "data", "num.partitions=1") as proc:
        yield proc


# --------------------------------------------------------------------------- 6. raw checks


def test_resends_are_deduplicated_and_sequences_checked(idem_broker: BrokerProcess) -> None:
    topic = unique("idem-raw")
    create_topic("confluent", idem_broker.bootstrap, topic, 1)
    with RawConn(idem_broker.port) as conn:
        pid, epoch = init_producer_id(conn)
        assert pid >= 0 and epoch == 0
        other_pid, _ = init_producer_id(conn)
        assert other_pid != pid

        sizes = [3, 1, 2, 4, 1, 2, 3]
        batches, seq, offsets = [], 0, []
        for i, n in enumerate(sizes):
            b = Batch(pid, 0, seq, [f"b{i}-r{j}".encode() for j in range(n)])
            code, base = produce(conn, topic, b)
            assert (code, base) == (NONE, sum(sizes[:i])), f"batch {i}"
            batches.append(b)
            offsets.append(base)
            seq += n

        # the same batch again: acknowledged with its original base offset, not stored again
        assert produce(conn, topic, batches[-1]) == (NONE, offsets[-1])
        assert produce(conn, topic, batches[-1]) == (NONE, offsets[-1])
        # any of the last five batches
        for i in (2, 5, 3, 6, 4):
            assert produce(conn, topic, batches[i]) == (NONE, offsets[i]), f"resend of batch {i}"
        # older than the last five: Kafka no longer knows it, and its sequence is out of order
        code, _ = produce(conn, topic, batches[1])
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert stored(idem_broker.bootstrap, topic) == expected_log(batches)

        # a gap in the sequence
        code, _ = produce(conn, topic, Batch(pid, 0, seq + 1, [b"gap"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        # a batch overlapping the last one but not equal to it
        code, _ = produce(conn, topic, Batch(pid, 0, seq - 1, [b"overlap-1", b"overlap-2"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = Batch(pid, 0, seq, [b"next"])
        assert produce(conn, topic, nxt) == (NONE, sum(sizes))
        batches.append(nxt)
        seq += 1

        # a new epoch starts at sequence 0; afterwards the old epoch is fenced
        bumped = Batch(pid, 1, 0, [b"epoch1-a", b"epoch1-b"])
        assert produce(conn, topic, bumped) == (NONE, sum(sizes) + 1)
        batches.append(bumped)
        code, _ = produce(conn, topic, Batch(pid, 0, seq, [b"stale-epoch"]))
        assert code == INVALID_PRODUCER_EPOCH
        code, _ = produce(conn, topic, nxt)  # even a resend of an old-epoch batch
        assert code == INVALID_PRODUCER_EPOCH
        code, _ = produce(conn, topic, Batch(pid, 1, 5, [b"epoch1-gap"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(conn, topic, bumped) == (NONE, sum(sizes) + 1)

        # another producer id has its own sequences on the same partition
        mine = Batch(other_pid, 0, 0, [b"other-0"])
        assert produce(conn, topic, mine) == (NONE, sum(sizes) + 3)
        batches.append(mine)
        assert produce(conn, topic, mine) == (NONE, sum(sizes) + 3)

        # non-idempotent batches (producer id -1) are never deduplicated
        plain = Batch(-1, -1, -1, [b"plain"])
        assert produce(conn, topic, plain) == (NONE, sum(sizes) + 4)
        assert produce(conn, topic, plain) == (NONE, sum(sizes) + 5)
        batches += [plain, plain]

    assert stored(idem_broker.bootstrap, topic) == expected_log(batches)


def test_dedupe_survives_clean_restart_and_sigkill(fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker.start()
    topic = unique("idem-restart")
    create_topic("confluent", broker.bootstrap, topic, 1)
    pids: list[int] = []
    batches: list[Batch] = []
    offsets: list[int] = []

    def send_new(conn: Conn, pid: int, n: int) -> None:
        seq = sum(len(b.values) for b in batches)
        b = Batch(pid, 0, seq, [f"r{seq + j}".encode() for j in range(n)])
        code, base = produce(conn, topic, b)
        assert (code, base) == (NONE, seq)
        batches.append(b)
        offsets.append(base)

    def check_resends(conn: Conn, which: list[int]) -> None:
        for i in which:
            assert produce(conn, topic, batches[i]) == (NONE, offsets[i]), f"resend of batch {i}"

    with RawConn(broker.port) as conn:
        pid, _ = init_producer_id(conn)
        pids += [pid, init_producer_id(conn)[0]]
        for n in (2, 3, 1):
            send_new(conn, pid, n)
        check_resends(conn, [2])

    # clean restart: the producer state is snapshotted on shutdown
    assert broker.stop() == 0
    broker.start()
    with RawConn(broker.port) as conn:
        check_resends(conn, [2, 0, 1])
        code, _ = produce(conn, topic, Batch(pid, 0, sum(len(b.values) for b in batches) + 3, [b"gap"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        send_new(conn, pid, 2)
        send_new(conn, pid, 1)
        check_resends(conn, [4])
        pids += [init_producer_id(conn)[0] for _ in range(2)]
    assert stored(broker.bootstrap, topic) == expected_log(batches)

    # SIGKILL: the batches since the snapshot are replayed from the log
    broker.kill()
    broker.start()
    with RawConn(broker.port) as conn:
        check_resends(conn, [4, 3, 1, 2, 0])  # the last five, in any order
        code, _ = produce(conn, topic, Batch(pid, 0, sum(len(b.values) for b in batches) + 1, [b"gap"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        send_new(conn, pid, 3)
        check_resends(conn, [5])
        pids += [init_producer_id(conn)[0] for _ in range(2)]
    # one more SIGKILL right after the last append: the resend is still recognised
    broker.kill()
    broker.start()
    with RawConn(broker.port) as conn:
        check_resends(conn, [5])
        pids.append(init_producer_id(conn)[0])
    assert stored(broker.bootstrap, topic) == expected_log(batches)
    # producer ids are never reused, across clean and unclean restarts
    assert len(set(pids)) == len(pids), pids
    assert pids == sorted(pids), pids


# --------------------------------------------------------------------------- 7. real clients

N_RECORDS = 5000
N_KEYS = 20
PARTITIONS = 3


def keyed_records(tag: str) -> list[tuple[bytes, bytes]]:
    counters: dict[int, int] = defaultdict(int)
    out = []
    for i in range(N_RECORDS):
        k = i % N_KEYS
        out.append((f"key-{k:02d}".encode(), f"{tag}:key-{k:02d}:{counters[k]:05d}".encode()))
        counters[k] += 1
    return out


def produce_kafka_python(bootstrap: str, topic: str, recs: list[tuple[bytes, bytes]]) -> None:
    from kafka import KafkaProducer

    assert KafkaProducer.DEFAULT_CONFIG["enable_idempotence"] is True  # idempotent by default in 3.x
    prod = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                         batch_size=16384, max_block_ms=int(TIMEOUT * 1000), request_timeout_ms=15000)
    try:
        assert prod.config["enable_idempotence"] is True
        futs = [prod.send(topic, key=k, value=v) for k, v in recs]
        prod.flush(timeout=TIMEOUT)
        metas = [f.get(timeout=TIMEOUT) for f in futs]
    finally:
        prod.close(timeout=10)
    assert len(metas) == len(recs)


def produce_confluent(bootstrap: str, topic: str, recs: list[tuple[bytes, bytes]]) -> None:
    prod = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                     "message.timeout.ms": int(TIMEOUT * 1000)})
    errors: list[Any] = []
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            errors.append(err)
        else:
            acked += 1

    for k, v in recs:
        while True:
            try:
                prod.produce(topic, key=k, value=v, on_delivery=on_delivery)
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
    assert prod.flush(TIMEOUT) == 0
    assert not errors, errors[:3]
    assert acked == len(recs)


def produce_aiokafka(bootstrap: str, topic: str, recs: list[tuple[bytes, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                                request_timeout_ms=15000)
        await prod.start()
        try:
            futs = [await prod.send(topic, key=k, value=v) for k, v in recs]
            await asyncio.gather(*futs)
        finally:
            await prod.stop()

    asyncio.run(asyncio.wait_for(go(), TIMEOUT * 2))


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent": produce_confluent, "aiokafka": produce_aiokafka}


def stored_batches(log_dir: Path, topic: str, partition: int) -> list[Any]:
    out = []
    for seg in sorted((Path(log_dir) / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        out += [h for _, h in iter_batches(data)]
    return out


@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_idempotent_client_stores_exactly_once_in_key_order(broker: BrokerProcess, client: str) -> None:
    topic = unique(f"idem-{client}")
    create_topic("confluent", broker.bootstrap, topic, PARTITIONS)
    recs = keyed_records(client)
    PRODUCERS[client](broker.bootstrap, topic, recs)

    got = [(g.partition, g.offset, g.key or b"", g.value or b"")  # every record here has both
           for g in consume_confluent(broker.bootstrap, topic, PARTITIONS, N_RECORDS)]

    assert len(got) == N_RECORDS, f"{len(got)} records stored for {N_RECORDS} sent"
    assert sorted(v for *_, v in got) == sorted(v for _, v in recs), "records lost or duplicated"
    per_key: dict[bytes, list[bytes]] = defaultdict(list)
    key_partition: dict[bytes, set[int]] = defaultdict(set)
    for p, _off, k, v in sorted(got):  # partition, then offset order
        per_key[k].append(v)
        key_partition[k].add(p)
    want: dict[bytes, list[bytes]] = defaultdict(list)
    for k, v in recs:
        want[k].append(v)
    assert per_key == want, "a key's records are out of order"
    assert all(len(ps) == 1 for ps in key_partition.values())

    # what the broker stored really came from one idempotent producer, with gapless sequences
    for p in range(PARTITIONS):
        batches = stored_batches(broker.log_dir, topic, p)
        assert len({h.producer_id for h in batches}) == 1, {h.producer_id for h in batches}
        assert all(h.producer_id >= 0 and h.producer_epoch == 0 for h in batches)
        seq = 0
        for h in batches:
            assert h.base_sequence == seq, f"partition {p}: sequence {h.base_sequence}, wanted {seq}"
            seq += h.record_count
        assert seq == sum(1 for g in got if g[0] == p)
