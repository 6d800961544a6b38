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

    def __init__(self, dsn: str, minimum: int, rows: dict[str, list[int]] | None = None, seed: int = 29) -> None:
        super().__init__(daemon=True)
        self.dsn, self.minimum, self.rng = dsn, minimum, random.Random(seed)
        self.ids = rows or {t: [] for t in TABLES}  # the rows there are, by table
        self.stop = threading.Event()
        self.expected: dict[str, list[Change]] = {t: [] for t in TABLES}
        self.event_counts: list[int] = []  # per transaction, its change events (tombstones aside)
        self.committed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # surfaced by the test (join, then check)
            self.error = exc

    def _run(self) -> None:
        rng, ids, seq = self.rng, self.ids, 0
        next_id = max((i for rows in ids.values() for i in rows), default=0) + 1
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
                self.event_counts.append(sum(c[0] != "tombstone" for t in TABLES for c in changes[t]))
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
                self.got[str(m.topic())].append((m.key(), m.value()))
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


def written(bootstrap: str, topics: list[str]) -> int:
    """Records in the topics' logs, committed or not (the high watermarks, read_uncommitted)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-watermark"),
                         "isolation.level": "read_uncommitted"})
    total = 0
    try:
        for topic in topics:
            try:
                total += consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
            except KafkaException:
                pass  # not created yet: nothing written to it
        return total
    finally:
        consumer.close()


def kill_and_restart(cluster: Cluster, worker: WorkerProcess, name: str) -> None:
    worker.kill()  # SIGKILL: an open Kafka transaction is left behind, nothing is flushed
    worker.start()
    cluster.wait_running(name, 1, timeout=90)


def kill_mid_workload(cluster: Cluster, worker: WorkerProcess, name: str, reader: CommittedReader,
                      workload: Workload) -> tuple[int, int]:
    """SIGKILL the worker once the task has run a while since its last start (offsets stored, records
    delivered) while the workload goes on, and restart it; returns (transactions, events read) at the kill."""
    seen, started = reader.total, time.monotonic()
    wait_for(lambda: reader.poll() >= seen + 150 or None, 90, 0.05, "the change topics to grow", cluster.logs)
    while time.monotonic() < started + random.uniform(2, 4):
        reader.poll()
    assert workload.is_alive(), f"the workload ended before the kill: {workload.error}"
    at = (workload.committed, reader.total)
    kill_and_restart(cluster, worker, name)
    return at


def finish(cluster: Cluster, reader: CommittedReader, workload: Workload, before: int = 0,
           per_transaction: int = 0) -> None:
    """Stop the workload and read until every change it made arrived (and ``before`` records more, and
    ``per_transaction`` more per transaction), then a few seconds more: anything sent twice would arrive by
    then."""
    workload.stop.set()
    workload.join(120)
    assert not workload.is_alive() and workload.error is None, workload.error
    want = before + per_transaction * workload.committed + sum(len(v) for v in workload.expected.values())
    wait_for(lambda: reader.poll() >= want or None, 120, 0.05, f"{want} records on the topics", cluster.logs)
    settle = time.monotonic() + 3
    while time.monotonic() < settle:
        reader.poll()


def compare(reader: CommittedReader, topics: list[str], expected: dict[str, list[Change]]) -> list[str]:
    """Per table: every change once (0 duplicates, 0 missing, 0 unexpected) and the streamed ones in commit
    order (a snapshot's ``r`` rows come in the table's scan order)."""
    report = []
    for table, topic in zip(TABLES, topics, strict=True):
        got = [change(k, v) for k, v in reader.got[topic]]
        duplicates, missing, unexpected = counts(got, expected[table])
        report.append(f"{table}: {len(expected[table])} changes, {duplicates} duplicates, {missing} missing, "
                      f"{unexpected} unexpected")
        assert (duplicates, missing, unexpected) == (0, 0, 0), report
        assert [c for c in got if c[0] != "r"] == [c for c in expected[table] if c[0] != "r"], \
            f"{table}: not in commit order"
    return report


def test_cdc_is_exactly_once_across_three_sigkills(broker: BrokerProcess, postgres, database: str,
                                                    tmp_path: Path) -> None:
    prefix = unique("pgeos")
    topics = [f"{prefix}.public.{t}" for t in TABLES]
    name = unique("pg-eos")
    config = source(postgres, database, prefix, **{
        "exactly.once.support": "required", "transaction.boundary": "poll", "snapshot.mode": "no_data",
        "max.batch.size": "64"})  # small polls: many transactions, kills land between and inside them
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        worker = cluster.new_worker(**{"exactly.once.source.support": "enabled"}).start()
        worker.ok("PUT", f"/connectors/{name}/config", config)
        cluster.wait_running(name, 1, timeout=60)
        reader = CommittedReader(broker.bootstrap, topics)
        workload = Workload(postgres.dsn(database), minimum=600)
        try:
            workload.start()
            kills = [kill_mid_workload(cluster, worker, name, reader, workload) for _ in range(3)]
            finish(cluster, reader, workload)
        finally:
            workload.stop.set()
            reader.close()
        status = cluster.status(name)
    assert status is not None and status["tasks"][0]["state"] == "RUNNING", status
    report = compare(reader, topics, workload.expected)
    print(f"\nexactly once across 3 SIGKILLs ({workload.committed} Postgres transactions; kills at "
          f"(transactions, events read) {kills}): {'; '.join(report)}")


ROWS = 30_000  # per table, there before the connector: its snapshot reads 60,000 rows


def test_connector_boundaries_exactly_once_across_a_kill_mid_snapshot_and_two_mid_stream(
        broker: BrokerProcess, postgres, database: str, tmp_path: Path) -> None:
    """transaction.boundary=connector: the snapshot is one Kafka transaction, so a SIGKILL in its middle leaves
    nothing of it visible and the snapshot taken again sends each row once; then each Postgres transaction
    commits whole, its BEGIN and END (provide.transaction.metadata) once each, across two more SIGKILLs."""
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        for n, table in enumerate(TABLES):
            db.execute(f"INSERT INTO {table} SELECT g, -g, 'row ' || g FROM generate_series(%s::int, %s::int) g",
                       (n * ROWS + 1, (n + 1) * ROWS))
    rows = {t: list(range(n * ROWS + 1, (n + 1) * ROWS + 1)) for n, t in enumerate(TABLES)}
    snapshot = {t: [("r", i, -i) for i in ids] for t, ids in rows.items()}
    prefix, name = unique("pgeosc"), unique("pg-eos-c")
    topics = [f"{prefix}.public.{t}" for t in TABLES]
    metadata = f"{prefix}.transaction"
    config = source(postgres, database, prefix, **{
        "exactly.once.support": "required", "transaction.boundary": "connector", "snapshot.mode": "initial",
        "provide.transaction.metadata": "true", "snapshot.fetch.size": "500", "max.batch.size": "200",
        "producer.override.transaction.timeout.ms": "300000"})  # the snapshot's transaction, on a slow machine
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        worker = cluster.new_worker(**{"exactly.once.source.support": "enabled"}).start()
        worker.ok("PUT", f"/connectors/{name}/config", config)
        cluster.wait_running(name, 1, timeout=60)
        reader = CommittedReader(broker.bootstrap, [*topics, metadata])
        workload = Workload(postgres.dsn(database), minimum=300, rows=rows)
        try:
            def snapshot_under_way() -> bool:
                got = worker.call("GET", f"/connectors/{name}/tasks/0/metrics", timeout=5)
                snap = got.json["metrics"].get("snapshot", {}) if got.status == 200 else {}
                return snap.get("running", False) and snap["rows.scanned"] >= 2000

            wait_for(snapshot_under_way, 90, 0.02, "the snapshot under way", cluster.logs)
            visible = reader.poll()  # before the metrics: the snapshot's transaction was open then
            during = worker.ok("GET", f"/connectors/{name}/tasks/0/metrics")["metrics"]
            worker.kill()
            in_log = written(broker.bootstrap, topics)
            kill_and_restart(cluster, worker, name)
            wait_for(lambda: reader.poll() >= 2 * ROWS or None, 180, 0.05, "the snapshot taken again",
                     cluster.logs)
            workload.start()
            kills = [kill_mid_workload(cluster, worker, name, reader, workload) for _ in range(2)]
            finish(cluster, reader, workload, before=2 * ROWS, per_transaction=2)  # BEGIN, END
        finally:
            workload.stop.set()
            reader.close()
        status = cluster.status(name)
    assert status is not None and status["tasks"][0]["state"] == "RUNNING", status
    assert during["phase"] == "snapshot" and during["snapshot"]["running"], during  # the first kill: mid-snapshot
    assert in_log > 0 and visible == 0, f"{visible} of the {in_log} records of the open snapshot transaction visible"
    report = compare(reader, topics, {t: snapshot[t] + workload.expected[t] for t in TABLES})
    tx = [json.loads(v or b"null") for _, v in reader.got[metadata]]
    ends = [v for v in tx if v["status"] == "END"]
    tx_dups = len(ends) - len({v["id"] for v in ends})
    report.append(f"transactions: {workload.committed}, {len(ends)} END records, {tx_dups} duplicates")
    assert [v["status"] for v in tx] == ["BEGIN", "END"] * workload.committed, report
    assert [b["id"] for b in tx[::2]] == [e["id"] for e in ends] and tx_dups == 0, report
    assert [e["event_count"] for e in ends] == workload.event_counts, report
    print(f"\nexactly once, connector boundaries, killed mid-snapshot ({in_log} of {2 * ROWS} rows written, none "
          f"visible) and mid-stream at (transactions, records read) {kills}: {'; '.join(report)}")
