"""Client quotas with real clients: AlterClientQuotas/DescribeClientQuotas over the wire (Kafka's entity
filters, validation per entry, kept across a restart), and a producer and a consumer over their byte-rate
quotas throttled to them (throttle times reported to the client), while an unquota'd client beside them is
not slowed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from brokerproc import BrokerProcess
from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from rawkafka import Conn

pytestmark = pytest.mark.timeout(180)
INVALID_REQUEST = 42
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def alter(port: int, changes: list[tuple[list[tuple[str, str | None]], dict[str, float | None]]],
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
        assert "greater than 0" in results[0][1] and "no_such_quota" in results[1][1]
        assert "producer_byte_rate" in results[2][1] and "Empty user" in results[3][1]
        assert "fractional" in results[4][1]
        assert alter(port, [([("client-id", "c4")], {"consumer_byte_rate": 5.0})], validate_only=True) == [(0, None)]
        assert (("client-id", "c4"),) not in describe(port, [])
        assert alter(port, [([("client-id", "c1")], {"producer_byte_rate": None})]) == [(0, None)]
    with BrokerProcess(tmp_path / "data") as proc:  # kept across a restart
        kept = describe(proc.port, [("client-id", SPECIFIED, None)])
        assert kept[(("client-id", "c1"),)] == {"consumer_byte_rate": 2048.0}
        assert kept[(("client-id", "c3"),)] == {"consumer_byte_rate": 999.0}


def _rate(samples: list[tuple[float, int]], start: float) -> float:
    """Bytes per second between the first sample at or after ``start`` and the last."""
    (t0, b0) = next(s for s in samples if s[0] >= start)
    (t1, b1) = samples[-1]
    return (b1 - b0) / (t1 - t0)


def test_a_consumer_over_its_quota_is_throttled_and_its_neighbour_is_not(tmp_path: Path) -> None:
    quota = 1_000_000.0
    with BrokerProcess(tmp_path / "data", "num.partitions=1") as proc:
        topic = "quota-data"
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 20, "compression.type": "none"})
        payload = bytes(1000)
        for _ in range(40_000):  # 40 MB to read
            producer.produce(topic, payload)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert alter(proc.port, [([("client-id", "slow-reader")], {"consumer_byte_rate": quota})]) == [(0, None)]
        throttles: dict[str, list[float]] = {"slow-reader": [], "free-reader": []}
        rates: dict[str, list[tuple[float, int]]] = {"slow-reader": [], "free-reader": []}

        def read(client_id: str, seconds: float) -> None:
            consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": client_id, "client.id": client_id,
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                 "throttle_cb": lambda event: throttles[client_id].append(event.throttle_time)})
            consumer.subscribe([topic])
            got, started = 0, time.monotonic()
            try:
                while time.monotonic() - started < seconds and got < 40_000_000:
                    for msg in consumer.consume(1000, 0.2):
                        if not msg.error():
                            got += len(msg.value())
                    rates[client_id].append((time.monotonic() - started, got))
            finally:
                consumer.close()

        threads = [threading.Thread(target=read, args=(c, 16.0)) for c in rates]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        slow = _rate(rates["slow-reader"], 6.0)  # after the burst credit (10 s of quota) is spent
        free_total = rates["free-reader"][-1][1]
        print(f"\nconsumer quota {quota / 1e6:.1f} MB/s: read at {slow / 1e6:.3f} MB/s from 6 s on; "
              f"{len(throttles['slow-reader'])} throttle events; the free reader read {free_total / 1e6:.0f} MB")
        assert abs(slow - quota) / quota < 0.10, slow
        assert throttles["slow-reader"] and max(throttles["slow-reader"]) > 0
        assert free_total == 40_000_000 and not throttles["free-reader"]


def test_a_producer_over_its_quota_is_throttled_and_its_neighbour_is_not(tmp_path: Path) -> None:
    quota = 1_000_000.0
    seconds, steady_from = 16.0, 6.0
    with BrokerProcess(tmp_path / "data", "num.partitions=1") as proc:
        assert alter(proc.port, [([("client-id", "slow-writer")], {"producer_byte_rate": quota})]) == [(0, None)]
        throttles: dict[str, list[float]] = {"slow-writer": [], "free-writer": []}
        acked: dict[str, list[tuple[float, int]]] = {"slow-writer": [], "free-writer": []}

        def write(client_id: str) -> None:
            producer = Producer({"bootstrap.servers": proc.bootstrap, "client.id": client_id, "linger.ms": 5,
                                 "compression.type": "none", "queue.buffering.max.kbytes": 4096,
                                 "throttle_cb": lambda event: throttles[client_id].append(event.throttle_time)})
            sent, started = [0], time.monotonic()

            def delivered(err: Any, msg: Any) -> None:
                if err is None:
                    sent[0] += len(msg.value())
            payload = bytes(1000)
            while time.monotonic() - started < seconds:
                try:  # as fast as the client's queue takes them
                    producer.produce(f"quota-{client_id}", payload, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)
                if not acked[client_id] or time.monotonic() - started - acked[client_id][-1][0] >= 0.2:
                    acked[client_id].append((time.monotonic() - started, sent[0]))
            producer.purge()
            producer.flush(5)

        threads = [threading.Thread(target=write, args=(c,)) for c in acked]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        slow = _rate(acked["slow-writer"], steady_from)  # after the burst credit (10 s of quota) is spent
        free = _rate(acked["free-writer"], steady_from)
        longest = max(throttles["slow-writer"], default=0)
        print(f"\nproducer quota {quota / 1e6:.1f} MB/s: acknowledged {slow / 1e6:.3f} MB/s from {steady_from:.0f} s "
              f"on, {len(throttles['slow-writer'])} throttle events (longest {longest:.3f} s); the free writer beside "
              f"it {free / 1e6:.1f} MB/s")
        assert abs(slow - quota) / quota < 0.10, slow
        assert throttles["slow-writer"] and max(throttles["slow-writer"]) > 0
        assert not throttles["free-writer"] and free > 3 * quota
