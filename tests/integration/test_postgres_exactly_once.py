"""Postgres CDC exactly once (KIP-618, Debezium's exactly-once mode): a distributed worker subprocess with
``exactly.once.source.support=enabled`` runs the Postgres source with ``exactly.once.support=required``; it is
SIGKILLed three times while a workload of inserts, updates and deletes commits in many Postgres transactions,
and a read_committed consumer of the change topics sees every change exactly once, in commit order."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess
from test_postgres_cdc import source

pytestmark = pytest.mark.timeout(420)

TABLES = ("accounts", "orders")
Change = tuple[Any, ...]  # ("c"|"u"|"r", id, seq), ("d", id) or ("tombstone", id)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """A broker of the module's own that allows the workers' short sessions (workerproc.fast_settings)."""
    base = tmp_path_factory.mktemp("pg-eos-broker")
    with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


@pytest.fixture
def database(postgres) -> str:
    name = "eos_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(postgres.dsn(name), autocommit=True) as db:
        for table in TABLES:
            db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, seq int NOT NULL, note text)")
    return name


class Workload(threading.Thread):
    """Transactions of 1-6 inserts, updates and deletes over both tables, one after another on one connection
    (so their commit order is the order they are run in), until ``stop`` is set and at least ``minimum``
    committed. ``expected[table]`` lists the change events each should give, in commit order: every insert
    and update writes a new ``seq``, ids are never reused, so every event is told apart from every other."""

    def __init__(self, dsn: str, minimum: int, seed: int = 29) -> None:
        super().__init__(daemon=True)
        self.dsn, self.minimum, self.rng = dsn, minimum, random.Random(seed)
        self.stop = threading.Event()
        self.expected: dict[str, list[Change]] = {t: [] for t in TABLES}
        self.committed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # surfaced by the test (join, then check)
            self.error = exc

    def _run(self) -> None:
        rng, ids, seq, next_id = self.rng, {t: list[int]() for t in TABLES}, 0, 1
        with psycopg.connect(self.dsn, autocommit=True) as db:
            while not (self.stop.is_set() and self.committed >= self.minimum):
                changes: dict[str, list[Change]] = {t: [] for t in TABLES}
                with db.transaction():
                    for _ in range(rng.randint(1, 6)):
                        table, roll = rng.choice(TABLES), rng.random()
                        seq += 1
                        if roll < 0.5 or len(ids[table]) < 3:
                            db.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", (next_id, seq, f"n{seq}"))
                            changes[table].append(("c", next_id, seq))
                            ids[table].append(next_id)
                            next_id += 1
                        elif roll < 0.8:
                            row = rng.choice(ids[table])
                            db.execute(f"UPDATE {table} SET seq = %s, note = %s WHERE id = %s", (seq, f"u{seq}", row))
                            changes[table].append(("u", row, seq))
                        else:
                            row = ids[table].pop(rng.randrange(len(ids[table])))
                            db.execute(f"DELETE FROM {table} WHERE id = %s", (row,))
                            changes[table] += [("d", row), ("tombstone", row)]
                for table in TABLES:
                    self.expected[table] += changes[table]
                self.committed += 1
                time.sleep(rng.uniform(0, 0.01))


def change(key: bytes | None, value: bytes | None) -> Change:
    """A change event (JsonConverter, schemas disabled) as the workload's Change."""
    if value is None:
        return ("tombstone", json.loads(key or b"null")["id"])
    event = json.loads(value)
    if event["op"] == "d":
        return ("d", event["before"]["id"])
    return (event["op"], event["after"]["id"], event["after"]["seq"])


class CommittedReader:
    """A read_committed consumer of partition 0 of each topic, from the beginning (topics that do not exist
    yet are read once the connector creates them)."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-reader"),
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "isolation.level": "read_committed", "topic.metadata.refresh.interval.ms": 500,
                                  "fetch.wait.max.ms": 50})
        self.consumer.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
        self.got: dict[str, list[tuple[bytes | None, bytes | None]]] = {t: [] for t in topics}

    def poll(self) -> int:
        """Read what is there now; returns how many records have been read in all."""
        for m in self.consumer.consume(10000, timeout=0.2):
            if m.error() is None:
                self.got[m.topic()].append((m.key(), m.value()))
        return self.total

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.got.values())

    def close(self) -> None:
        self.consumer.close()


def counts(got: list[Change], expected: list[Change]) -> tuple[int, int, int]:
    """Events received more than once (the extra copies), expected events never received, and events received
    that no change made (every expected event is distinct)."""
    have, want = set(got), set(expected)
    return len(got) - len(have), len(want - have), len(have - want)


def kill_and_restart(cluster: Cluster, worker: WorkerProcess, name: str) -> None:
    worker.kill()  # SIGKILL: an open Kafka transaction is left behind, nothing is flushed
    worker.start()
    cluster.wait_running(name, 1, timeout=90)


def test_cdc_is_exactly_once_across_three_sigkills(broker: BrokerProcess, postgres, database: str,
                                                    tmp_path: Path) -> None:
    prefix = unique("pgeos")
    topics = [f"{prefix}.public.{t}" for t in TABLES]
    name = unique("pg-eos")
    config = source(postgres, database, prefix, **{
        "exactly.once.support": "required", "transaction.boundary": "poll", "snapshot.mode": "no_data",
        "max.batch.size": "64"})  # small polls: many transactions, kills land between and inside them
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        worker = cluster.start(1, **{"exactly.once.source.support": "enabled"})[0]
        worker.ok("PUT", f"/connectors/{name}/config", config)
        cluster.wait_running(name, 1, timeout=60)
        reader = CommittedReader(broker.bootstrap, topics)
        workload = Workload(postgres.dsn(database), minimum=600)
        try:
            workload.start()
            kills = []
            for _ in range(3):
                seen, started = reader.total, time.monotonic()
                # the kill comes once the restarted task has run a while (offsets stored, records delivered)
                wait_for(lambda seen=seen: reader.poll() >= seen + 150 or None, 90, 0.05,
                         "the change topics to grow", cluster.logs)
                while time.monotonic() < started + random.uniform(2, 4):
                    reader.poll()
                assert workload.is_alive(), f"the workload ended before kill {len(kills) + 1}: {workload.error}"
                kills.append((workload.committed, reader.total))
                kill_and_restart(cluster, worker, name)
            workload.stop.set()
            workload.join(120)
            assert not workload.is_alive() and workload.error is None, workload.error
            want = sum(len(v) for v in workload.expected.values())
            wait_for(lambda: reader.poll() >= want or None, 120, 0.05,
                     f"{want} change events on the change topics", cluster.logs)
            settle = time.monotonic() + 3  # anything sent twice would arrive by now
            while time.monotonic() < settle:
                reader.poll()
        finally:
            workload.stop.set()
            reader.close()
        status = cluster.status(name)
    assert status is not None and status["tasks"][0]["state"] == "RUNNING", status
    report = []
    for table, topic in zip(TABLES, topics, strict=True):
        got = [change(k, v) for k, v in reader.got[topic]]
        expected = workload.expected[table]
        duplicates, missing, unexpected = counts(got, expected)
        report.append(f"{table}: {len(expected)} changes, {duplicates} duplicates, {missing} missing, "
                      f"{unexpected} unexpected")
        assert (duplicates, missing, unexpected) == (0, 0, 0), report
        assert got == expected, f"{table}: not in commit order"
    print(f"\nexactly once across 3 SIGKILLs ({workload.committed} Postgres transactions; kills at "
          f"(transactions, events read) {kills}): {'; '.join(report)}")
