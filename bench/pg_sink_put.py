"""Postgres sink's put path against a plain psycopg COPY of the same rows (not a test): the machine's ceiling.

N Debezium change events (JsonConverter without schemas, as the CDC source writes them: ``{"before":null,
"after":{"id":..,"v":..},"source":{...},"op":"c",...}``) are handed to ``PostgresSinkTask.put_encoded`` in
batches (what the worker hands it, minus the consumer and the broker), in alternating rounds with anchors that
do the same work with nothing but psycopg:

- ``copy+merge``: json.loads of each value, COPY of (id, v) into a temporary table, INSERT ... ON CONFLICT into
  the table, the offsets row and COMMIT per batch: what an upsert sink must do at the least.
- ``copy``: the same rows COPYed straight into the table (no merge): what the server takes at the most.

Each round writes into an empty table of a new database. Printed per round: rows/s, and CPU per row of this
process and of the Postgres server (the postmaster's children), with the machine's load. The garbage collector
is set as in a worker's process (``headwater.process.tune_gc``; ``--default-gc`` keeps Python's defaults).

    .venv/bin/python bench/pg_sink_put.py [--rows 100000] [--batch 10000] [--rounds 3] [--mode upsert|insert]
                                          [--pk-mode record_value|record_key] [--default-gc]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import psycopg  # noqa: E402
from support.pgserver import fetch_one, start_postgres  # noqa: E402
from support.taskcontexts import FixedSinkContext  # noqa: E402

from headwater.connect.api import EncodedSinkBatch, TopicPartition  # noqa: E402
from headwater.connect.converters.json.converter import JsonConverter  # noqa: E402
from headwater.connectors.postgres.sink import PostgresSinkTask  # noqa: E402
from headwater.process import tune_gc  # noqa: E402

TOPIC = "bench.public.lat_t"
TICK = os.sysconf("SC_CLK_TCK")


class Message:
    """What the consumer hands the worker (the attributes EncodedSinkBatch reads)."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset: int, key: bytes, value: bytes) -> None:
        self.offset, self.timestamp, self.key, self.value, self.headers = offset, 0, key, value, None


def events(n: int) -> list[Message]:
    out = []
    for i in range(n):
        source = {"version": "2.5.0.Final", "connector": "postgresql", "name": "bench", "ts_ms": 1764316800000 + i,
                  "snapshot": "false", "db": "bench", "sequence": f'["{i * 100}","{i * 100 + 40}"]',
                  "schema": "public", "table": "lat_t", "txId": 1000 + i // 50, "lsn": i * 100 + 40, "xmin": None}
        value = {"before": None, "after": {"id": i, "v": "v"}, "source": source, "op": "c",
                 "ts_ms": 1764316800001 + i, "ts_us": 1764316800001000 + i, "ts_ns": 1764316800001000000 + i,
                 "transaction": None}
        out.append(Message(i, json.dumps({"id": i}, separators=(",", ":")).encode(),
                           json.dumps(value, separators=(",", ":")).encode()))
    return out


class Cpu:
    """CPU seconds of this process and of the server's processes between two readings (the postmaster's
    children alive, and those it has reaped: its cutime and cstime)."""

    def __init__(self, db: psycopg.Connection) -> None:
        backend = fetch_one(db, "SELECT pg_backend_pid()")[0]
        self.postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])

    def read(self) -> tuple[float, float, float]:
        fields = Path(f"/proc/{self.postmaster}/stat").read_text().rsplit(")", 1)[1].split()
        pg = (int(fields[13]) + int(fields[14])) / TICK  # reaped children: the backends of closed connections
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.postmaster:
                    pg += (int(fields[11]) + int(fields[12])) / TICK
        own = resource.getrusage(resource.RUSAGE_SELF)
        return own.ru_utime + own.ru_stime, pg, time.monotonic()


def run_sink(server: Any, dbname: str, messages: list[Message], batch: int, mode: str,
             pk_mode: str = "record_value") -> None:
    task = PostgresSinkTask()
    task.initialize(FixedSinkContext(TopicPartition(TOPIC, 0)))
    task.start({"name": "bench-sink", "topics": TOPIC, "connector.class": "JdbcSinkConnector",
                "connection.url": f"jdbc:postgresql://{server.host}:{server.port}/{dbname}?user={server.user}",
                "table.name.format": "${source.schema}.${source.table}", "insert.mode": mode,
                "primary.key.mode": pk_mode, "primary.key.fields": "id"})
    key, value = JsonConverter(), JsonConverter()
    key.configure({"schemas.enable": "false"}, True)
    value.configure({"schemas.enable": "false"}, False)
    assert task.decode_with(key, value)
    task.open([TopicPartition(TOPIC, 0)])
    for start in range(0, len(messages), batch):
        assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, messages[start:start + batch]))
    task.pre_commit({})
    task.stop()


def run_anchor(server: Any, dbname: str, messages: list[Message], batch: int, merge: bool) -> None:
    with psycopg.connect(server.dsn(dbname)) as conn:
        write_plainly(conn, messages, batch, merge)


def write_plainly(conn: psycopg.Connection[Any], messages: list[Message], batch: int, merge: bool) -> None:
    """The anchor: what an upsert sink must do at the least, with nothing but json.loads and psycopg."""
    conn.execute("CREATE TABLE lat_t (id text PRIMARY KEY, v text)")
    conn.execute("CREATE TABLE offsets (topic text, partition int, next_offset bigint, "
                 "PRIMARY KEY (topic, partition))")
    conn.commit()
    loads = json.loads
    for start in range(0, len(messages), batch):
        chunk = messages[start:start + batch]
        target = "lat_t"
        if merge:
            conn.execute("CREATE TEMP TABLE stage (LIKE lat_t) ON COMMIT DROP")
            target = "stage"
        with conn.cursor().copy(f"COPY {target} (id, v) FROM STDIN") as copy:
            for m in chunk:
                after = loads(m.value)["after"]
                copy.write_row((after["id"], after["v"]))
        if merge:
            conn.execute("INSERT INTO lat_t SELECT * FROM stage ON CONFLICT (id) DO UPDATE SET v = excluded.v")
        conn.execute("INSERT INTO offsets VALUES (%s, 0, %s) ON CONFLICT (topic, partition) DO UPDATE SET "
                     "next_offset = excluded.next_offset", (TOPIC, chunk[-1].offset + 1))
        conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000, help="records per put (the worker's poll)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="upsert", choices=("upsert", "insert"), help="the sink's insert.mode")
    parser.add_argument("--only", default="sink,copy+merge,copy", help="which runs, in each round's order")
    parser.add_argument("--pk-mode", default="record_value", choices=("record_value", "record_key"),
                        help="the sink's primary.key.mode (the key {\"id\": n} or the row's id)")
    parser.add_argument("--default-gc", action="store_true",
                        help="Python's garbage collector settings, not a worker process's")
    args = parser.parse_args()
    messages = events(args.rows)
    if not args.default_gc:
        tune_gc()  # what `headwater up` and every worker process do at start
    server = start_postgres()
    runs = args.only.split(",")
    results: dict[str, list[tuple[float, float, float]]] = {r: [] for r in runs}
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            cpu = Cpu(admin)
            for n in range(args.rounds):
                for i, what in enumerate(runs):
                    dbname = f"sink_{n}_{i}"
                    admin.execute(f"CREATE DATABASE {dbname}")
                    load = os.getloadavg()[0]
                    own0, pg0, t0 = cpu.read()
                    if what == "sink":
                        run_sink(server, dbname, messages, args.batch, args.mode, args.pk_mode)
                    else:
                        run_anchor(server, dbname, messages, args.batch, merge=what == "copy+merge")
                    t1 = time.monotonic()
                    time.sleep(0.3)  # the closed connection's backend exits and is reaped (its CPU counted)
                    own1, pg1, _ = cpu.read()
                    with psycopg.connect(server.dsn(dbname)) as check:
                        got = fetch_one(check, "SELECT count(*) FROM lat_t")[0]
                    if got != args.rows:
                        raise SystemExit(f"{what}: {got} rows, not {args.rows}")
                    rate, us_own, us_pg = args.rows / (t1 - t0), (own1 - own0) / args.rows * 1e6, \
                        (pg1 - pg0) / args.rows * 1e6
                    results[what].append((rate, us_own, us_pg))
                    print(f"round {n + 1} {what:10s}: {rate:9,.0f} rows/s  CPU/row: python {us_own:5.1f} us, "
                          f"postgres {us_pg:4.1f} us  (load {load:.2f})", flush=True)
                    admin.execute(f"DROP DATABASE {dbname}")
        for what, got in results.items():
            rates = sorted(r for r, _, _ in got)
            own = sorted(o for _, o, _ in got)
            pg = sorted(p for _, _, p in got)
            listed = ", ".join(f"{r:,.0f}" for r in rates)
            print(f"{what:10s}: median {rates[len(rates) // 2]:,.0f} rows/s ({listed}); CPU/row python "
                  f"{own[len(own) // 2]:.1f} us (least {own[0]:.1f}), postgres {pg[len(pg) // 2]:.1f} us "
                  f"(least {pg[0]:.1f})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
