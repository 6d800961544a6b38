"""MirrorMaker with exactly-once source support (KIP-618): two real brokers (A and B) and a distributed worker
subprocess on B with ``exactly.once.source.support=enabled``, MirrorSourceConnector with
``exactly.once.support=required``. The worker is SIGKILLed mid-stream, three times; a read_committed consumer
of B sees every committed record of A once, in order per partition, and none of A's aborted transactions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.eoskit import copies, end_offsets, read_isolated
from support.mirrorkit import Rec, by_partition, create, mirror_config, produce_keyed
from support.txnmix import write_interleaved
from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings

pytestmark = pytest.mark.timeout(420)

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
KILLS = 3
BACKLOG = 50_000
RATE = 10_000  # records/s produced on A while the worker is killed and restarted


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("mirror-eos-brokers")
    with BrokerProcess(base / "a", *BROKER_OVERRIDES) as a, BrokerProcess(base / "b", *BROKER_OVERRIDES) as b:
        yield a, b


def eos_worker_settings(tag: str) -> dict[str, str]:
    return {**fast_settings(tag), "exactly.once.source.support": "enabled"}


def test_mirror_exactly_once_through_three_worker_kills(brokers: tuple[BrokerProcess, BrokerProcess],
                                                        tmp_path: Path) -> None:
    a, b = brokers
    topic, name = unique("eos-orders"), "eos-mirror"
    remote = f"A.{topic}"
    create(a.bootstrap, topic, 4)
    # aborted transactions on the source: a read_committed source consumer never copies them
    mix = write_interleaved(a.bootstrap, topic, rounds=3)
    # a backlog, and a stream of RATE records/s the whole time: each restart finds what was produced while
    # the worker was down, and is killed again while copying it (small fetches: many transactions)
    produce_keyed(a.bootstrap, topic, BACKLOG, pad=40)
    produced = [BACKLOG]
    stop = threading.Event()

    def keep_producing() -> None:
        p = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        started = time.monotonic()
        while not stop.is_set():
            for i in range(produced[0], produced[0] + 1000):
                p.produce(topic, key=f"k{i % 50}".encode(), value=f"v{i}".encode() + b"." * 40,
                          headers=[("n", str(i).encode())], timestamp=1_700_000_000_000 + i)
            p.poll(0)
            produced[0] += 1000
            time.sleep(max(0.0, started + (produced[0] - BACKLOG) / RATE - time.monotonic()))
        assert p.flush(60) == 0

    tag = unique("mm-eos")
    at_kill: list[tuple[int, int]] = []
    with Cluster(tmp_path, b.bootstrap, tag, eos_worker_settings(tag)) as cluster:
        (worker,) = cluster.start(1)
        producer = threading.Thread(target=keep_producing, daemon=True)
        producer.start()
        worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
            name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, tasks_max=2,
            exactly_once_support="required", **{"source.consumer.isolation.level": "read_committed",
                                                "source.consumer.max.partition.fetch.bytes": "32768",
                                                "source.consumer.fetch.max.bytes": "131072",
                                                "sync.topic.configs.enabled": "false"}))
        try:
            for _ in range(KILLS):
                before = end_offsets(b.bootstrap, remote)

                def copying(before: int = before) -> bool:  # mid-workload: the tasks are a few transactions in
                    return end_offsets(b.bootstrap, remote) >= before + 5000

                wait_for(copying, 90, 0.1, "the mirror writing records", cluster.logs)
                worker.kill()
                at_kill.append((produced[0], end_offsets(b.bootstrap, remote)))
                worker.start()
            cluster.wait_running(name, 2, timeout=90)
            last = end_offsets(b.bootstrap, remote)
            wait_for(lambda: end_offsets(b.bootstrap, remote) >= last + 20_000, 90, 0.2,
                     "the mirror writing records after the last restart", cluster.logs)
        finally:
            stop.set()
            producer.join(60)
        total = produced[0] + len(mix.committed) + 1
        source = read_isolated(a.bootstrap, topic, "read_committed")
        assert len(source) == total, (len(source), total)

        def caught_up() -> list[Rec] | None:
            target = read_isolated(b.bootstrap, remote, "read_committed")
            return target if len(target) >= len(source) else None

        wait_for(caught_up, 120, 1.0, f"{len(source)} records on B", cluster.logs)
        cluster.wait_running(name, 2)
        time.sleep(2.0)  # anything re-sent after catching up would show as a duplicate now
        target = read_isolated(b.bootstrap, remote, "read_committed")
        uncommitted = read_isolated(b.bootstrap, remote, "read_uncommitted")
    duplicates, missing, foreign = copies([(r.partition, r.key, r.value) for r in source],
                                          [(r.partition, r.key, r.value) for r in target])
    print(f"\nmirror exactly-once: {len(source)} source records, {len(target)} on B read_committed, "
          f"{len(uncommitted) - len(target)} more read_uncommitted (of transactions a kill left open, aborted); "
          f"kills at (produced, on B) {at_kill}: duplicates={duplicates} missing={missing} foreign={foreign}")
    assert (duplicates, missing, foreign) == (0, 0, 0)
    assert by_partition(target) == by_partition(source)  # key, value, headers, timestamp, order per partition
    assert not {r.value for r in target} & set(mix.aborted)
