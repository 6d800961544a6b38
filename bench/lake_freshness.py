"""CDC -> lake freshness benchmark (prints figures; not a test).

A private PostgreSQL, ``headwater up``, the shipped CDC source (configs/postgres/source.json) and the
shipped upsert lake (configs/spark/lake-upsert-local.json, or ``--lake-config``), each with only what
points it at this machine changed (database address, slot, publication; lake.path). After the initial
snapshot is in the lake, a burst of ``--transactions`` transactions (an insert and an update each, a
second update in two of three: ~13.3k changes for 5,000) is committed as fast as one connection can;
then a Spark reader (this process's own session) reads the upsert table until it equals Postgres, and
the bench prints how many seconds after the burst's last commit that was.

``--crash`` SIGKILLs ``headwater up`` (broker and worker) halfway through the burst and starts it again
at once; the burst goes on meanwhile.

    .venv/bin/python bench/lake_freshness.py [--transactions 5000] [--crash] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import psycopg  # noqa: E402
from support.connectproc import ConnectProcess, end_offset  # noqa: E402
from support.lake import mid_swap  # noqa: E402
from support.pgserver import start_postgres  # noqa: E402

SOURCE = ROOT / "configs" / "postgres" / "source.json"
LAKE = ROOT / "configs" / "spark" / "lake-upsert-local.json"


def shipped(path: Path) -> dict[str, str]:
    return dict(json.loads(path.read_text())["config"])


def source_config(server: Any, dbname: str) -> dict[str, str]:
    config = shipped(SOURCE)
    config.update({"database.hostname": server.host, "database.port": str(server.port),
                   "database.user": server.user, "database.password": server.password, "database.dbname": dbname})
    if not server.password:
        del config["database.password"]
    return config


def lake_config(path: Path, lake: Path) -> dict[str, str]:
    return {**shipped(path), "lake.path": str(lake)}


def cpu_seconds() -> tuple[float, float]:
    """(busy, total) jiffies of the machine, in seconds."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / 100, sum(fields) / 100


class Reader:
    """The upsert table as a Spark reader sees it."""

    def __init__(self, spark: Any, table: Path) -> None:
        self.spark, self.table = spark, table

    def rows(self) -> dict[int, tuple[Any, ...]] | None:
        if not self.table.exists():
            return None
        try:
            df = self.spark.read.option("mergeSchema", "true").parquet(str(self.table))
            return {r["id"]: (r["name"], r["qty"]) for r in df.select("id", "name", "qty").collect()}
        except Exception as exc:
            if mid_swap(exc):
                return None
            raise


def postgres_rows(db: psycopg.Connection) -> dict[int, tuple[Any, ...]]:
    return {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, name, qty FROM items").fetchall()}


def wait_equal(reader: Reader, want: dict[int, tuple[Any, ...]], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reader.rows() == want:
            return time.monotonic()
        time.sleep(0.05)
    got = reader.rows() or {}
    missing = [k for k in want if got.get(k) != want[k]][:5]
    raise SystemExit(f"the lake did not equal Postgres within {timeout}s: {len(got)} rows, {len(want)} expected; "
                     f"e.g. keys {missing}")


def topic_complete(bootstrap: str, topic: str, count: int, out: dict[str, float], timeout: float = 300) -> None:
    """When the topic holds ``count`` records (the CDC source's share of the delay), into ``out["topic"]``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if end_offset(bootstrap, topic) >= count:
                out["topic"] = time.monotonic()
                return
        except Exception:
            pass  # the broker restarting (--crash)
        time.sleep(0.02)


def burst(dsn: str, transactions: int, first_id: int, seed: int, halfway: threading.Event) -> tuple[float, int]:
    """The burst on its own connection: (monotonic time of the last commit, changes committed)."""
    rnd = random.Random(seed)
    changes = 0
    with psycopg.connect(dsn) as db:
        for i in range(transactions):
            new = first_id + i
            with db.transaction():
                db.execute("INSERT INTO items VALUES (%s, %s, 0)", (new, f"item {new}"))
                db.execute("UPDATE items SET qty = qty + 1, name = %s WHERE id = %s",
                           (f"item {new} v{i}", rnd.randrange(new + 1)))
                changes += 2
                if i % 3:
                    db.execute("UPDATE items SET qty = qty + 10 WHERE id = %s", (rnd.randrange(new + 1),))
                    changes += 1
            if i == transactions // 2:
                halfway.set()
        return time.monotonic(), changes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transactions", type=int, default=5000)
    ap.add_argument("--rows", type=int, default=1000, help="rows of the table before the burst (the snapshot)")
    ap.add_argument("--crash", action="store_true", help="SIGKILL headwater up halfway through the burst")
    ap.add_argument("--rounds", type=int, default=1, help="bursts, one after the other")
    ap.add_argument("--lake-config", type=Path, default=LAKE)
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (logs, lake)")
    args = ap.parse_args()
    from headwater.connectors.spark.session import shared_session

    server = start_postgres()
    base = Path(tempfile.mkdtemp(prefix="hw-lake-fresh-"))
    spark = shared_session("local[1]", {"spark.driver.memory": "1g", "spark.ui.enabled": "false"})
    results: list[dict[str, Any]] = []
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE fresh")
        with ConnectProcess(base / "up") as up, psycopg.connect(server.dsn("fresh"), autocommit=True) as db:
            db.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text, qty int)")
            db.execute("INSERT INTO items SELECT g, 'item ' || g, 0 FROM generate_series(0, %s - 1) g", (args.rows,))
            source, lake = shipped(SOURCE), shipped(args.lake_config)
            lake_dir = base / "lake"
            up.create("inventory-cdc", source_config(server, "fresh"))
            up.create("inventory-lake", lake_config(args.lake_config, lake_dir))
            table = lake_dir / lake.get("topics.dir", "topics") / lake.get("table.name.format", "${topic}").replace(
                "${topic}", f"{source['topic.prefix']}.public.items")
            reader = Reader(spark, table)
            t0 = time.monotonic()
            wait_equal(reader, postgres_rows(db), 300)
            print(f"snapshot of {args.rows:,} rows in the lake {time.monotonic() - t0:.1f}s after the connectors' "
                  f"creation", flush=True)
            next_id = args.rows
            for round_ in range(args.rounds):
                halfway = threading.Event()
                outcome: dict[str, Any] = {}

                def run(first: int = next_id, seed: int = round_, flag: threading.Event = halfway,
                        out: dict[str, Any] = outcome) -> None:
                    out["last"], out["changes"] = burst(server.dsn("fresh"), args.transactions, first, seed, flag)

                topic = f"{source['topic.prefix']}.public.items"
                before = end_offset(up.bootstrap, topic)
                busy0, total0 = cpu_seconds()
                started = time.monotonic()
                writer = threading.Thread(target=run)
                writer.start()
                if args.crash:
                    halfway.wait()
                    up.restart(kill=True)
                    print(f"  SIGKILLed and restarted headwater up {time.monotonic() - started:.1f}s into the burst",
                          flush=True)
                writer.join()
                last = outcome["last"]
                want = postgres_rows(db)
                watcher = threading.Thread(target=topic_complete,
                                           args=(up.bootstrap, topic, before + outcome["changes"], outcome))
                watcher.start()
                equal = wait_equal(reader, want, 300)
                watcher.join()
                busy1, total1 = cpu_seconds()
                lag = equal - last
                figure = {"round": round_ + 1, "transactions": args.transactions, "changes": outcome["changes"],
                          "burst_s": round(last - started, 2), "equal_after_last_commit_s": round(lag, 2),
                          "topic_complete_after_last_commit_s": round(outcome.get("topic", float("nan")) - last, 2),
                          "crash": args.crash, "machine_busy": round((busy1 - busy0) / (total1 - total0), 2),
                          "load1": round(os.getloadavg()[0], 2)}
                results.append(figure)
                print(f"round {round_ + 1}: {args.transactions:,} transactions ({outcome['changes']:,} changes) "
                      f"committed in {last - started:.1f}s; the lake equal to Postgres {lag:.2f}s after the last "
                      f"commit{' (across a SIGKILL)' if args.crash else ''} (the topic complete after "
                      f"{figure['topic_complete_after_last_commit_s']:.2f}s); machine busy "
                      f"{figure['machine_busy']:.0%}, load {figure['load1']}", flush=True)
                next_id += args.transactions
    finally:
        spark.stop()
        server.stop()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
