"""Client quotas with real clients: AlterClientQuotas/DescribeClientQuotas over the wire (Kafka's entity
filters, validation per entry, kept across a restart), and a producer and a consumer over their byte-rate
quotas throttled to them (throttle times reported to the client), while an unquota'd client beside them is
not slowed."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn

pytestmark = pytest.mark.timeout(180)
INVALID_REQUEST = 42
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def alter(port: int, changes: Sequence[tuple[list[tuple[str, str | None]], Mapping[str, float | None]]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:
    E = AlterClientQuotasRequest.EntryData
    entries = [E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                 ops=[E.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])
               for entity, ops in changes]
    with Conn(port) as conn:
        resp = conn.call(AlterClientQuotasRequest[1](entries=entries, validate_only=validate_only),
                         AlterClientQuotasResponse)
    return [(e.error_code, e.error_message) for e in resp.entries]


def describe(port: int, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    C = DescribeClientQuotasRequest.ComponentData
    with Conn(port) as conn:
        resp = conn.call(DescribeClientQuotasRequest[1](
            components=[C(entity_type=t, match_type=m, match=v) for t, m, v in components], strict=strict),
            DescribeClientQuotasResponse)
    if resp.error_code:
        return resp.error_code, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def test_alter_and_describe_client_quotas(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as proc:
        port = proc.port
        assert alter(port, [([("client-id", "c1")], {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}),
                            ([("user", "alice"), ("client-id", None)], {"request_percentage": 50.0}),
                            ([("client-id", None)], {"producer_byte_rate": 10**6})]) == [(0, None)] * 3
        everything = describe(port, [])
        assert everything == {(("client-id", "c1"),): {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0},
                              (("client-id", None), ("user", "alice")): {"request_percentage": 50.0},
                              (("client-id", None),): {"producer_byte_rate": 1e6}}
        assert set(describe(port, [("client-id", EXACT, "c1")])) == {(("client-id", "c1"),)}
        assert set(describe(port, [("client-id", DEFAULT, None)])) == {(("client-id", None), ("user", "alice")),
                                                                       (("client-id", None),)}
        assert set(describe(port, [("client-id", DEFAULT, None)], strict=True)) == {(("client-id", None),)}
        assert set(describe(port, [("user", SPECIFIED, None)])) == {(("client-id", None), ("user", "alice"))}
        assert describe(port, [("client-id", EXACT, None)])[0] == INVALID_REQUEST
        # each bad entry is refused naming the problem; the good one beside it applies; validate_only changes nothing
        results = alter(port, [([("client-id", "c2")], {"producer_byte_rate": -5.0}),
                               ([("client-id", "c2")], {"no_such_quota": 1.0}),
                               ([("ip", "127.0.0.1")], {"producer_byte_rate": 1.0}),
                               ([("user", "")], {"producer_byte_rate": 1.0}),
                               ([("client-id", "c2")], {"producer_byte_rate": 1.5}),
                               ([("client-id", "c3")], {"consumer_byte_rate": 999.0})])
        assert [code for code, _ in results] == [INVALID_REQUEST] * 5 + [0]
        messages = [message or "" for _, message in results]
        assert "greater than 0" in messages[0] and "no_such_quota" in messages[1]
        assert "producer_byte_rate" in messages[2] and "Empty user" in messages[3]
        assert "fractional" in messages[4]
        assert alter(port, [([("client-id", "c4")], {"consumer_byte_rate": 5.0})], validate_only=True) == [(0, None)]
        assert (("client-id", "c4"),) not in describe(port, [])
        assert alter(port, [([("client-id", "c1")], {"producer_byte_rate": None})]) == [(0, None)]
    with BrokerProcess(tmp_path / "data") as proc:  # kept across a restart
        kept = describe(proc.port, [("client-id", SPECIFIED, None)])
        assert kept[(("client-id", "c1"),)] == {"consumer_byte_rate": 2048.0}
        assert kept[(("client-id", "c3"),)] == {"consumer_byte_rate": 999.0}


class Meter:
    """A client's progress (seconds since start, bytes so far) and the throttle times it was told.

    Its steady rate is measured from a second after the first throttle: before that the client spends the
    burst credit an idle client has (10 s of quota with Kafka's default windows), and when that burst
    lands depends on how long joining the group took, so no fixed start time is safe on a loaded machine.
    Bytes arrive in steps of a request's size, up to 1 MB (a second of quota), and a step is followed by
    a throttle as long as its bytes take at the quota. So the total before each step, against the time
    of the step, lies on a line of slope quota whatever the sizes of the steps; the rate is the slope of
    the least-squares line through those points. A rate between two fixed times would be off by up to a
    step (12% of 8 s), depending on where they fall.
    """

    MARGIN, MEASURE, LIMIT = 1.0, 8.0, 40.0

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.samples: list[tuple[float, int]] = []
        self.throttles: list[tuple[float, float]] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def throttled(self, event: Any) -> None:
        self.throttles.append((self.now(), event.throttle_time))

    def sample(self, total: int) -> None:
        """Note the total when it moved."""
        if not self.samples or self.samples[-1][1] != total:
            self.samples.append((self.now(), total))

    def measured_enough(self) -> bool:
        """Whether the steady part is long enough to measure (or the time limit is up)."""
        if self.now() > self.LIMIT:
            return True
        return bool(self.throttles) and self.now() - self.throttles[0][0] > self.MARGIN + self.MEASURE

    def steady_from(self) -> float:
        assert self.throttles, "never throttled"
        return self.throttles[0][0] + self.MARGIN

    def steady_rate(self) -> float:
        """Bytes per second: the slope of the total before each step against its time, from
        ``steady_from()`` on."""
        points: list[tuple[float, int]] = []  # (when a step began, the total before it)
        last, before = -1.0, 0
        for t, b in self.samples:
            if not points or t - last >= 0.05:  # closer samples are one request's bytes handed over in several calls
                points.append((t, before))
            last, before = t, b
        points = [(t, b) for t, b in points if t >= self.steady_from()]
        assert len(points) >= 4 and points[-1][0] - points[0][0] >= self.MEASURE * 0.75, points
        return statistics.linear_regression([t for t, _ in points], [b for _, b in points]).slope


@pytest.mark.slow
def test_a_consumer_over_its_quota_is_throttled_and_its_neighbour_is_not(tmp_path: Path) -> None:
    quota = 1_000_000.0
    with BrokerProcess(tmp_path / "data", "num.partitions=1", "group.initial.rebalance.delay.ms=0") as proc:
        topic = "quota-data"
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 20, "compression.type": "none"})
        payload = bytes(1000)
        for _ in range(40_000):  # 40 MB to read
            producer.produce(topic, payload)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert alter(proc.port, [([("client-id", "slow-reader")], {"consumer_byte_rate": quota})]) == [(0, None)]
        meters = {"slow-reader": Meter(), "free-reader": Meter()}

        def read(client_id: str) -> None:
            meter = meters[client_id]
            consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": client_id, "client.id": client_id,
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                 "throttle_cb": meter.throttled})
            consumer.subscribe([topic])
            got = 0
            try:
                while got < 40_000_000 and not (client_id == "slow-reader" and meter.measured_enough()):
                    for msg in consumer.consume(100_000, 0.05):  # what has arrived, without waiting for a count
                        if not msg.error():
                            got += len(msg.value() or b"")
                    meter.sample(got)
                    if client_id == "free-reader" and meter.now() > Meter.LIMIT:
                        break
            finally:
                consumer.close()

        threads = [threading.Thread(target=read, args=(c,)) for c in meters]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        slow, free = meters["slow-reader"], meters["free-reader"]
        rate = slow.steady_rate()
        print(f"\nconsumer quota {quota / 1e6:.1f} MB/s: read at {rate / 1e6:.3f} MB/s from a second after the "
              f"first throttle ({slow.throttles[0][0]:.1f} s) on; {len(slow.throttles)} throttle events; the free "
              f"reader read {free.samples[-1][1] / 1e6:.0f} MB in {free.samples[-1][0]:.1f} s")
        assert abs(rate - quota) / quota < 0.10, rate
        assert max(throttle for _, throttle in slow.throttles) > 0
        assert free.samples[-1][1] == 40_000_000 and not free.throttles


@pytest.mark.slow
def test_a_producer_over_its_quota_is_throttled_and_its_neighbour_is_not(tmp_path: Path) -> None:
    quota = 1_000_000.0
    with BrokerProcess(tmp_path / "data", "num.partitions=1") as proc:
        assert alter(proc.port, [([("client-id", "slow-writer")], {"producer_byte_rate": quota})]) == [(0, None)]
        meters = {"slow-writer": Meter(), "free-writer": Meter()}
        finished = threading.Event()  # the free writer writes for as long as the slow one is measured

        def write(client_id: str) -> None:
            meter = meters[client_id]
            producer = Producer({"bootstrap.servers": proc.bootstrap, "client.id": client_id, "linger.ms": 5,
                                 "compression.type": "none", "queue.buffering.max.kbytes": 4096,
                                 "throttle_cb": meter.throttled})
            sent = [0]

            def delivered(err: Any, msg: Any) -> None:
                if err is None:
                    sent[0] += len(msg.value())
            payload = bytes(1000)
            while not (finished.is_set() if client_id == "free-writer" else meter.measured_enough()):
                try:  # as fast as the client's queue takes them
                    producer.produce(f"quota-{client_id}", payload, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)
                meter.sample(sent[0])
            if client_id == "slow-writer":
                finished.set()
            producer.purge()
            producer.flush(5)

        threads = [threading.Thread(target=write, args=(c,)) for c in meters]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        slow, free = meters["slow-writer"], meters["free-writer"]
        rate = slow.steady_rate()
        steady_from = slow.steady_from()
        free_rate = (free.samples[-1][1] - next(b for t, b in free.samples if t >= steady_from)) / (
            free.samples[-1][0] - steady_from)
        longest = max(throttle for _, throttle in slow.throttles)
        print(f"\nproducer quota {quota / 1e6:.1f} MB/s: acknowledged {rate / 1e6:.3f} MB/s from {steady_from:.1f} s "
              f"on, {len(slow.throttles)} throttle events (longest {longest:.3f} s); the free writer beside it "
              f"{free_rate / 1e6:.1f} MB/s")
        assert abs(rate - quota) / quota < 0.10, rate
        assert longest > 0
        assert not free.throttles and free_rate > 3 * quota
