"""Postgres CDC benchmark (not a test): a private PostgreSQL, ``headwater up``, the CDC source and sink.

1. Streaming: N changes in 1,000-row transactions; events/s from the first commit until the topic
   holds them all, side by side with ``pg_recvlogical`` (pgoutput) reading the same changes from its
   own slot in the same run. ``--phases single``: the same with N single-row transactions (a
   procedure commits after each row). ``--backlog``: the connector is paused while the changes are
   written and timed from its resume, so it reads a backlog as pg_recvlogical does.
2. Snapshot: rows/s of the initial snapshot of an N-row table.
3. Latency: commit -> topic at a steady rate (default 5,000 changes/s), p50 and p99.
4. Sink: rows/s from the topic into another database, and the same rows written with nothing but json.loads
   and psycopg (COPY, INSERT ... ON CONFLICT) in the same run: the anchor.
5. Exactly once (``--phases eos``; always split): streaming events/s of the same connector on a worker with
   ``exactly.once.source.support=enabled`` (``exactly.once.support=required``; transaction.boundary poll, and
   connector) against a worker without it, on the same broker, in alternating rounds of ``--eos-changes``
   changes each; the rate counts events a read_committed reader sees (the last stable offset).

    .venv/bin/python bench/cdc_throughput.py [--changes 1000000] [--rate 5000] [--seconds 20] [--split]
                                             [--phases streaming,single,snapshot,latency,sink,eos] [--backlog]
                                             [--eos-changes 300000] [--eos-rounds 3]

``--split`` runs the broker and a distributed worker as two processes instead of ``headwater up``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import psycopg  # noqa: E402
from support.connectproc import ConnectProcess, end_offset, unique  # noqa: E402
from support.pgserver import fetch_one, find_bindir, start_postgres  # noqa: E402

JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"}


def source(server, db: str, prefix: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "PostgresConnector", "database.hostname": server.host,
            "database.port": str(server.port), "database.user": server.user, "database.dbname": db,
            "topic.prefix": prefix, "slot.name": f"s_{prefix.replace('-', '_')}",
            "publication.name": "bench_pub", "publication.autocreate.mode": "all_tables",
            "max.batch.size": "8192", **JSON, **extra}


class Cpu:
    """CPU seconds used between two readings by the Headwater process, by the Postgres server's processes
    (the postmaster's children alive at the end), and by the whole machine (/proc/stat), so a figure comes with
    what it cost and with how busy the others kept the machine."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, headwater_pid: int, db: psycopg.Connection) -> None:
        self.pid = headwater_pid
        backend = fetch_one(db, "SELECT pg_backend_pid()")[0]
        self.postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        self.start = self._read()

    @classmethod
    def _ticks(cls, pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / cls.TICK  # utime, stime

    def _read(self) -> tuple[float, dict[int, float], float, float]:
        children: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.postmaster:
                    children[int(entry.name)] = (int(fields[11]) + int(fields[12])) / self.TICK
        cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        busy = sum(int(v) for v in cpu[:3]) + sum(int(v) for v in cpu[5:8])  # user nice system irq softirq steal
        return self._ticks(self.pid), children, busy / self.TICK, time.monotonic()

    def report(self, count: int, what: str) -> str:
        hw0, pg0, busy0, t0 = self.start
        hw1, pg1, busy1, t1 = self._read()
        ours = hw1 - hw0
        pg = sum(v - pg0.get(pid, 0.0) for pid, v in pg1.items())
        machine = busy1 - busy0
        cores = os.cpu_count() or 1
        others = max(0.0, machine - ours - pg)
        return (f"  CPU per {what}: headwater {ours / count * 1e6:.1f} us, postgres {pg / count * 1e6:.1f} us; "
                f"the machine {machine / (t1 - t0) / cores:.0%} busy over {t1 - t0:.1f}s, other processes "
                f"{others / (t1 - t0) / cores:.0%} of its {cores} cores")


def headwater_pid(up: ConnectProcess | SplitWorker) -> int:
    """The process whose CPU counts: ``headwater up``'s, or the split mode's worker."""
    proc = up.worker.proc if isinstance(up, SplitWorker) else up.proc
    assert proc is not None
    return proc.pid


def wait_offset(bootstrap: str, topic: str, count: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if end_offset(bootstrap, topic) >= count:
            return time.monotonic()
        time.sleep(0.05)
    raise SystemExit(f"{topic} did not reach {count} records within {timeout}s")


def streaming(server, up: ConnectProcess | SplitWorker, db: psycopg.Connection, dbname: str, changes: int,
              per_tx: int = 1000, backlog: bool = False) -> None:
    """``changes`` changes in transactions of ``per_tx`` rows, through the connector and pg_recvlogical."""
    table = "stream_t" if per_tx > 1 else "single_t"
    db.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, v text, n int)")
    if not fetch_one(db, "SELECT count(*) FROM pg_publication WHERE pubname = 'bench_pub'")[0]:
        db.execute("CREATE PUBLICATION bench_pub FOR ALL TABLES")
    # one transaction per row, made by the server (a client's round trip per transaction would be the limit)
    db.execute(f"CREATE OR REPLACE PROCEDURE bench_rows_{table}(first bigint, last bigint) LANGUAGE plpgsql AS $$ "
               f"BEGIN FOR i IN first..last LOOP INSERT INTO {table} VALUES (i, 'value ' || i, i % 100); "
               f"IF (i - first + 1) % {per_tx} = 0 THEN COMMIT; END IF; END LOOP; COMMIT; END $$")
    db.execute("SELECT pg_create_logical_replication_slot('recvlogical', 'pgoutput')")
    prefix = unique("cdc")
    up.create(prefix, source(server, dbname, prefix, **{"snapshot.mode": "no_data"}))
    up.wait_state(prefix, "RUNNING", tasks=1, timeout=60)
    time.sleep(2)  # streaming
    topic = f"{prefix}.public.{table}"
    if backlog:
        up.ok("PUT", f"/connectors/{prefix}/pause", expect=202)
        time.sleep(2)  # the task has stopped polling
    cpu = Cpu(headwater_pid(up), db)
    started = written = time.monotonic()
    if per_tx == 1000:
        for start in range(0, changes, 1000):
            db.execute("INSERT INTO stream_t SELECT g, 'value ' || g, g %% 100 FROM generate_series(%s::bigint, "
                       "%s::bigint) g", (start, start + 999))
    else:
        db.execute(f"CALL bench_rows_{table}(0, %s)", (changes - 1,))
    committed = time.monotonic()
    if backlog:
        cpu = Cpu(headwater_pid(up), db)  # the reading only
        up.ok("PUT", f"/connectors/{prefix}/resume", expect=202)
        started = time.monotonic()
    end_lsn = fetch_one(db, "SELECT pg_current_wal_lsn()::text")[0]
    done = wait_offset(up.bootstrap, topic, changes, 600)
    ours = changes / (done - started)
    used = cpu.report(changes, "event")

    bindir = find_bindir()
    recv = shutil.which("pg_recvlogical") or (str(bindir / "pg_recvlogical") if bindir else None)
    theirs = None
    if recv:
        t0 = time.monotonic()
        subprocess.run([recv, "-h", server.host, "-p", str(server.port), "-U", server.user, "-d", dbname,
                        "--slot", "recvlogical", "--start", "-o", "proto_version=1", "-o",
                        "publication_names=bench_pub", "--endpos", end_lsn, "-f", "/dev/null", "--no-loop"],
                       check=True, capture_output=True)
        theirs = changes / (time.monotonic() - t0)
    shape = "1,000-row transactions" if per_tx == 1000 else f"{per_tx}-row transactions"
    timed = "from the connector's resume (a backlog)" if backlog else "from the first commit"
    print(f"streaming: {changes:,} changes in {shape} written in {committed - written:.1f}s"
          f"{' (connector paused)' if backlog else ''}; in the topic {done - started:.1f}s {timed}: "
          f"{ours:,.0f} events/s")
    print(used)
    if theirs:
        print(f"  pg_recvlogical (pgoutput, same changes, its own slot, read after the fact): {theirs:,.0f} events/s;"
              f" headwater/pg_recvlogical = {ours / theirs:.2f}")
    up.ok("DELETE", f"/connectors/{prefix}", expect=204)
    db.execute("SELECT pg_drop_replication_slot('recvlogical')")
    return None


def snapshot(server, up: ConnectProcess | SplitWorker, db: psycopg.Connection, dbname: str, rows: int) -> None:
    db.execute("CREATE TABLE snap_t (id bigint PRIMARY KEY, v text, n int, at timestamptz DEFAULT now())")
    db.execute("INSERT INTO snap_t (id, v, n) SELECT g, 'row ' || g, g %% 1000 FROM generate_series(1, %s) g",
               (rows,))
    prefix = unique("snap")
    started = time.monotonic()
    up.create(prefix, source(server, dbname, prefix, **{"table.include.list": "public.snap_t",
                                                        "publication.autocreate.mode": "filtered",
                                                        "publication.name": "snap_pub"}))
    done = wait_offset(up.bootstrap, f"{prefix}.public.snap_t", rows, 600)
    print(f"snapshot: {rows:,} rows in {done - started:.1f}s (from the connector's creation): "
          f"{rows / (done - started):,.0f} rows/s")
    up.ok("DELETE", f"/connectors/{prefix}", expect=204)


def latency(server, up: ConnectProcess | SplitWorker, db: psycopg.Connection, dbname: str, rate: int,
            seconds: int) -> str:
    from confluent_kafka import Consumer, TopicPartition

    db.execute("CREATE TABLE lat_t (id bigint PRIMARY KEY, v text)")
    prefix = unique("lat")
    up.create(prefix, source(server, dbname, prefix, **{"snapshot.mode": "no_data", "poll.interval.ms": "100"}))
    up.wait_state(prefix, "RUNNING", tasks=1, timeout=60)
    time.sleep(2)
    topic = f"{prefix}.public.lat_t"
    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": unique("lat"), "fetch.wait.max.ms": 5,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    delays: list[float] = []
    total = rate * seconds
    stop, warm = threading.Event(), threading.Event()

    def consume() -> None:
        while len(delays) < total and not stop.is_set():
            for m in consumer.consume(500, 0.005):  # short waits: the wait is part of what is measured
                if m.error() is None and m.value():
                    now_ms = time.time() * 1000
                    event = json.loads(m.value() or b"")
                    if event["after"]["id"] < 0:
                        warm.set()  # the topic exists and the consumer reads it: measuring starts
                        continue
                    delays.append(now_ms - event["source"]["ts_ms"])

    reader = threading.Thread(target=consume)
    reader.start()
    # One warm-up change first: the topic is created by the first event, and a consumer finds a new
    # topic only after a metadata refresh (about a second) — not part of the pipeline's latency.
    db.execute("INSERT INTO lat_t VALUES (-1, 'warm-up')")
    if not warm.wait(30):
        raise SystemExit("the warm-up change did not reach the consumer in 30 s")
    batch = max(1, rate // 100)  # 100 transactions a second
    started = time.monotonic()
    for i in range(0, total, batch):
        with db.transaction():
            db.execute("INSERT INTO lat_t SELECT g, 'v' FROM generate_series(%s::bigint, %s::bigint) g",
                       (i, min(i + batch, total) - 1))
        pause = started + (i + batch) / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    reader.join(60)
    stop.set()
    consumer.close()
    delays.sort()
    p50, p99 = delays[len(delays) // 2], delays[int(len(delays) * 0.99)]
    print(f"latency at {rate:,} changes/s for {seconds}s ({len(delays):,} events): commit -> consumer p50 "
          f"{p50:.0f} ms, p99 {p99:.0f} ms, max {delays[-1]:.0f} ms")
    up.ok("DELETE", f"/connectors/{prefix}", expect=204)
    return topic


def sink(server, up: ConnectProcess | SplitWorker, topic: str, count: int) -> float:
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE bench_b")
    name = unique("sink")
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        cpu = Cpu(headwater_pid(up), admin)
    started = time.monotonic()
    up.create(name, {"connector.class": "JdbcSinkConnector",
                     "connection.url": f"jdbc:postgresql://{server.host}:{server.port}/bench_b?user={server.user}",
                     "topics": topic, "table.name.format": "${source.schema}.${source.table}",
                     "primary.key.mode": "record_value", "primary.key.fields": "id",
                     "consumer.override.max.poll.records": "10000",
                     "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                     "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                     "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"})
    first: tuple[float, int] | None = None
    with psycopg.connect(server.dsn("bench_b"), autocommit=True) as b:
        while True:
            try:
                n = fetch_one(b, "SELECT count(*) FROM public.lat_t")[0]
            except psycopg.errors.UndefinedTable:
                n = 0
            if n and first is None:
                first = (time.monotonic(), n)  # the task has started and written its first put
            if n >= count:
                break
            if time.monotonic() - started > 600:
                raise SystemExit(f"the sink wrote {n} of {count} rows in 600 s")
            time.sleep(0.1)
    now = time.monotonic()
    took = now - started
    steady = ""
    if first is not None and now > first[0]:
        steady = f"; after its first put: {(count - first[1]) / (now - first[0]):,.0f} rows/s"
    print(f"sink: {count:,} rows into another database in {took:.1f}s from the connector's creation: "
          f"{count / took:,.0f} rows/s{steady}")
    print(cpu.report(count, "row"))
    return (count - first[1]) / (now - first[0]) if steady and first is not None else count / took


def sink_anchor(server, bootstrap: str, topic: str, count: int) -> float:
    """The same rows written with nothing but psycopg (bench/pg_sink_put.py's anchor: json.loads of each value,
    COPY into a temporary table, INSERT ... ON CONFLICT, the offsets row and COMMIT per 10,000 rows), after
    reading the values from the topic (not timed): what this machine allows a Python sink. Returns rows/s."""
    from confluent_kafka import Consumer, TopicPartition
    from pg_sink_put import Message, write_plainly

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("anchor"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Message] = []
    deadline = time.monotonic() + 120
    while len(messages) < count and time.monotonic() < deadline:
        for m in consumer.consume(10000, 0.5):
            value, offset = m.value(), m.offset()
            if m.error() is None and value and offset is not None:
                messages.append(Message(offset, m.key() or b"", value))
    consumer.close()
    if len(messages) < count:
        raise SystemExit(f"the anchor read {len(messages)} of {count} records of {topic}")
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE bench_anchor")
    with psycopg.connect(server.dsn("bench_anchor")) as conn:
        cpu = Cpu(os.getpid(), conn)  # (read before the connection closes: its backend's CPU is counted)
        started = time.monotonic()
        write_plainly(conn, messages[:count], 10_000, merge=True)
        took = time.monotonic() - started
        report = cpu.report(count, "row").replace("headwater", "python")
    print(f"anchor: the same rows with json.loads and psycopg's COPY + INSERT ... ON CONFLICT per 10,000: "
          f"{count / took:,.0f} rows/s")
    print(report)
    return count / took


def exactly_once(server, up: SplitWorker, db: psycopg.Connection, dbname: str, changes: int, rounds: int) -> None:
    """Streaming events/s at least once against exactly once, same changes, same broker, alternating rounds."""
    eos = up.second_worker(**{"exactly.once.source.support": "enabled"})
    modes: dict[str, tuple[SplitWorker, dict[str, str]]] = {
        "at least once": (up, {}),
        "exactly once, poll": (eos, {"exactly.once.support": "required", "transaction.boundary": "poll"}),
        "exactly once, connector": (eos, {"exactly.once.support": "required", "transaction.boundary": "connector"}),
    }
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    order = list(modes)
    for n in range(rounds):
        for i, mode in enumerate(order[n % 3:] + order[:n % 3]):  # each mode first in one round
            worker, extra = modes[mode]
            table = f"eos_{n}_{i}"
            db.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, v text, n int)")
            prefix = unique("eos")
            worker.create(prefix, source(server, dbname, prefix, **{
                "snapshot.mode": "no_data", "table.include.list": f"public.{table}",
                "publication.autocreate.mode": "filtered", "publication.name": f"pub_{table}", **extra}))
            worker.wait_state(prefix, "RUNNING", tasks=1, timeout=60)
            time.sleep(2)  # streaming
            started = time.monotonic()
            for start in range(0, changes, 1000):
                db.execute(f"INSERT INTO {table} SELECT g, 'value ' || g, g %% 100 FROM generate_series(%s::bigint, "
                           f"%s::bigint) g", (start, start + 999))
            done = wait_offset(up.bootstrap, f"{prefix}.public.{table}", changes, 600)  # read_committed: the LSO
            rates[mode].append(changes / (done - started))
            runtime = worker.worker.ok("GET", f"/connectors/{prefix}/tasks/0/metrics")["runtime"]
            commits = runtime.get("transaction-commit-total")
            print(f"  round {n + 1}, {mode}: {rates[mode][-1]:,.0f} events/s"
                  + (f" ({commits} transactions)" if commits is not None else ""))
            worker.ok("DELETE", f"/connectors/{prefix}", expect=204)
            db.execute(f"DROP TABLE {table}")
    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    best, middle = max(rates["at least once"]), median(rates["at least once"])
    for mode, got in rates.items():
        runs = ", ".join(f"{r:,.0f}" for r in got)
        print(f"{mode}: best {max(got):,.0f} events/s, median {median(got):,.0f} ({runs}); / at least once: "
              f"best {max(got) / best:.2f}, median {median(got) / middle:.2f}")


class SplitWorker:
    """A broker process and one distributed worker, answering what the phases ask of ``headwater up``."""

    def __init__(self, base: Path, broker: Any = None, **settings: str) -> None:
        from support.brokerproc import BrokerProcess
        from support.workerproc import BROKER_OVERRIDES, Cluster

        self.base, self.own_broker = base, broker is None
        self.broker = broker or BrokerProcess(base / "broker", *BROKER_OVERRIDES, "num.partitions=1").start()
        self.bootstrap = self.broker.bootstrap
        self.cluster = Cluster(base / "workers", self.bootstrap)
        self.worker = self.cluster.new_worker(**settings).start()
        self.others: list[SplitWorker] = []

    def second_worker(self, **settings: str) -> SplitWorker:
        """Another worker (a group of its own) on the same broker."""
        other = SplitWorker(self.base / f"other{len(self.others)}", self.broker, **settings)
        self.others.append(other)
        return other

    def create(self, name: str, config: dict[str, str]) -> None:
        self.worker.ok("POST", "/connectors", {"name": name, "config": config}, expect=201)

    def wait_state(self, name: str, state: str, tasks: int, timeout: float) -> None:
        self.cluster.wait_running(name, tasks, timeout=timeout)

    def ok(self, method: str, path: str, expect: int) -> None:
        self.worker.ok(method, path, expect=expect)

    def __enter__(self) -> SplitWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        for other in self.others:
            other.cluster.close()
        self.cluster.close()
        if self.own_broker:
            self.broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--snapshot-rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--split", action="store_true", help="broker and worker as two processes")
    parser.add_argument("--backlog", action="store_true",
                        help="streaming phases: the connector paused while the changes are written, timed from its "
                             "resume")
    parser.add_argument("--eos-changes", type=int, default=300_000, help="changes per round of the eos phase")
    parser.add_argument("--eos-rounds", type=int, default=3)
    parser.add_argument("--phases", default="streaming,snapshot,latency,sink",
                        help="which phases to run (the sink reads what the latency phase wrote)")
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    server = start_postgres()
    base = Path(tempfile.mkdtemp(prefix="hw-cdc-bench-"))
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE bench")
        split = args.split or "eos" in phases  # exactly once needs a distributed worker
        runtime = SplitWorker(base) if split else ConnectProcess(base)
        print("mode:", "split (broker and worker processes)" if split else "headwater up (one process)")
        with runtime as up, psycopg.connect(server.dsn("bench"), autocommit=True) as db:
            if "streaming" in phases:
                streaming(server, up, db, "bench", args.changes, 1000, args.backlog)
            if "single" in phases:
                streaming(server, up, db, "bench", args.changes, 1, args.backlog)
            if "snapshot" in phases:
                snapshot(server, up, db, "bench", args.snapshot_rows)
            if "latency" in phases or "sink" in phases:
                topic = latency(server, up, db, "bench", args.rate, args.seconds)
                if "sink" in phases:
                    rate = sink(server, up, topic, args.rate * args.seconds)
                    ceiling = sink_anchor(server, up.bootstrap, topic, args.rate * args.seconds)
                    print(f"sink after its first put / anchor: {rate / ceiling:.2f}")
            if "eos" in phases:
                assert isinstance(up, SplitWorker)
                exactly_once(server, up, db, "bench", args.eos_changes, args.eos_rounds)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
