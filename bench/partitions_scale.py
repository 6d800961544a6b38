"""Partitions on one broker under a small open-files limit (issue 31): create, write, read, restart.

The broker runs as a subprocess whose RLIMIT_NOFILE is set to ``--open-files`` soft and hard (what
`ulimit -n 1024` in a shell does), with default settings. A confluent-kafka (librdkafka) admin creates
``--partitions`` partitions in topics of ``--per-topic``, a producer writes one record to each, a consumer
assigned to all of them reads every record back; the broker is stopped (SIGTERM) and started again, timed
until a Metadata answer lists every partition, and everything is read again. Printed: each phase's time, the
broker's RSS and open descriptors, Metadata for all topics (median of 5), the limits the run had (`ulimit -n`
soft/hard of the broker, inotify limits) and the machine's load.

A phase that fails (the broker refusing or dropping a CreateTopics, records missing) is printed with what
failed, and the later phases are skipped. ``--against REV`` runs the same on a broker from another commit
first (latency.py's ``git archive`` tree), for the figures before a change.

    python bench/partitions_scale.py                         # 20,000 partitions, ulimit -n 1024
    python bench/partitions_scale.py --against main --partitions 2000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import broker_throughput as bt
from latency import check_imports, python_path, source_tree

BrokerProcess = bt._load_broker_process()
GOALS = "goals: RSS <= 512 MB, restart to metadata <= 10 s, metadata for all topics <= 200 ms"


def _limits(pid: int) -> str:
    """The broker's open-files limit (after its own raise) and the machine's inotify limits."""
    nofile = "?"
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            nofile = f"{soft}/{hard}"
    inotify = {name: Path(f"/proc/sys/fs/inotify/{name}").read_text().strip()
               for name in ("max_user_instances", "max_user_watches")}
    return (f"broker ulimit -n (soft/hard) {nofile}; inotify max_user_instances {inotify['max_user_instances']}, "
            f"max_user_watches {inotify['max_user_watches']}")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_mb(pid: int) -> float:
    return bt._status_kb(pid, "VmRSS") / 1024


def _topics(args: argparse.Namespace) -> list[tuple[str, int]]:
    full, rest = divmod(args.partitions, args.per_topic)
    return [(f"scale-{i:05d}", args.per_topic) for i in range(full)] + ([(f"scale-{full:05d}", rest)] if rest else [])


def create(bootstrap: str, topics: list[tuple[str, int]], per_request: int) -> tuple[int, str | None]:
    """Create ``topics`` in requests of at most ``per_request`` partitions; (partitions created, first error)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = 0
    batch: list[tuple[str, int]] = []

    def send() -> str | None:
        nonlocal created
        futures = admin.create_topics([NewTopic(n, p, 1) for n, p in batch], operation_timeout=60,
                                      request_timeout=120)
        for (name, parts), future in zip(batch, futures.values(), strict=True):
            try:
                future.result(180)
                created += parts
            except Exception as exc:  # the figure is where and how it failed
                return f"{name}: {exc}"
        return None

    for topic in topics:
        batch.append(topic)
        if sum(p for _, p in batch) >= per_request:
            error = send()
            if error:
                return created, error
            batch = []
    if batch:
        error = send()
        if error:
            return created, error
    return created, None


def write(bootstrap: str, topics: list[tuple[str, int]]) -> int:
    """One record to every partition; how many were acknowledged."""
    from confluent_kafka import Producer

    acked = 0

    def done(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": 1,
                         "queue.buffering.max.messages": 1_000_000})
    for name, parts in topics:
        for p in range(parts):
            producer.produce(name, value=f"{name}-{p}".encode(), partition=p, on_delivery=done)
        producer.poll(0)
    producer.flush(300)
    return acked


def read(bootstrap: str, topics: list[tuple[str, int]], timeout: float) -> int:
    """Every partition read from its start (one consumer assigned to all); the records whose value names their
    partition, at most one per partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "partitions-scale", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 65536})
    # offset 0, the log start of a new topic: OFFSET_BEGINNING would cost a ListOffsets per partition first
    consumer.assign([TopicPartition(n, p, 0) for n, parts in topics for p in range(parts)])
    want = sum(parts for _, parts in topics)
    seen: set[tuple[str | None, int | None]] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < want and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None and msg.value() == f"{msg.topic()}-{msg.partition()}".encode():
                    seen.add((msg.topic(), msg.partition()))
    finally:
        consumer.close()
    return len(seen)


def metadata_ms(bootstrap: str, want: int, runs: int = 5) -> tuple[float, int]:
    """Median time of a Metadata request for all topics, and the partitions the last one listed."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=60)  # connected before timing
    times, listed = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=60)
        times.append((time.perf_counter() - t0) * 1000)
        listed = sum(len(t.partitions) for name, t in md.topics.items() if name.startswith("scale-"))
    return statistics.median(times), listed


def wait_metadata(bootstrap: str, want: int, timeout: float) -> bool:
    """Until a Metadata answer lists ``want`` partitions of the bench's topics."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            md = admin.list_topics(timeout=5)
            if sum(len(t.partitions) for name, t in md.topics.items() if name.startswith("scale-")) >= want:
                return True
        time.sleep(0.05)
    return False


def run(name: str, tree: Path | None, work: Path, args: argparse.Namespace) -> None:
    topics = _topics(args)
    want = sum(p for _, p in topics)
    data = work / f"data-{name.replace(' ', '-')}"
    with python_path(tree), contextlib.chdir(work):
        check_imports(name, tree)
        broker = BrokerProcess(data, *args.set, log_file=work / f"{data.name}.log", open_files=args.open_files)
        broker.exit_stop_timeout = 600
        t0 = time.monotonic()
        broker.start(timeout=120)
    pid = broker.proc.pid
    print(f"[{name}] started in {time.monotonic() - t0:.2f}s; {_limits(pid)}; load {os.getloadavg()[0]:.2f}")
    try:
        t0 = time.monotonic()
        created, error = create(broker.bootstrap, topics, args.per_request)
        took = time.monotonic() - t0
        print(f"[{name}] create: {created} of {want} partitions in {took:.2f}s ({len(topics)} topics); "
              f"RSS {_rss_mb(pid):.0f} MB, {_fds(pid) if broker.running else '-'} fds"
              + (f"; FAILED: {error}" if error else ""))
        if error:
            tail = [line for line in broker.log_text(True).splitlines() if "Error" in line or "error" in line]
            print(f"[{name}] broker {'running' if broker.running else 'exited'}; log: {tail[-3:]}")
            return
        t0 = time.monotonic()
        acked = write(broker.bootstrap, topics)
        print(f"[{name}] write: {acked} of {want} records acknowledged in {time.monotonic() - t0:.2f}s; "
              f"RSS {_rss_mb(pid):.0f} MB, {_fds(pid)} fds")
        t0 = time.monotonic()
        got = read(broker.bootstrap, topics, args.read_timeout)
        print(f"[{name}] read: {got} of {want} partitions' records in {time.monotonic() - t0:.2f}s; "
              f"RSS {_rss_mb(pid):.0f} MB, {_fds(pid)} fds")
        md, listed = metadata_ms(broker.bootstrap, want)
        print(f"[{name}] metadata for all topics: {md:.1f} ms median of 5 ({listed} partitions listed); "
              f"RSS {_rss_mb(pid):.0f} MB (peak {bt._status_kb(pid, 'VmHWM') / 1024:.0f} MB)")
        if acked < want or got < want:
            return
        t0 = time.monotonic()
        broker.stop(600)
        stopped = time.monotonic() - t0
        t0 = time.monotonic()
        with python_path(tree), contextlib.chdir(work):
            broker.start(timeout=600)
        ready = wait_metadata(broker.bootstrap, want, 600)
        took = time.monotonic() - t0
        pid = broker.proc.pid
        print(f"[{name}] restart: stopped in {stopped:.2f}s; metadata with all {want} partitions "
              f"{'after' if ready else 'NOT within'} {took:.2f}s; RSS {_rss_mb(pid):.0f} MB, {_fds(pid)} fds")
        t0 = time.monotonic()
        got = read(broker.bootstrap, topics, args.read_timeout)
        md, listed = metadata_ms(broker.bootstrap, want)
        print(f"[{name}] after restart: read {got} of {want} in {time.monotonic() - t0:.2f}s; metadata {md:.1f} ms; "
              f"RSS {_rss_mb(pid):.0f} MB (peak {bt._status_kb(pid, 'VmHWM') / 1024:.0f} MB), {_fds(pid)} fds; "
              f"load {os.getloadavg()[0]:.2f}")
    finally:
        if broker.running:
            try:
                broker.stop(600)
            except AssertionError:
                broker.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--per-request", type=int, default=5_000, help="partitions per CreateTopics request")
    parser.add_argument("--open-files", type=int, default=1024,
                        help="the broker's RLIMIT_NOFILE, soft and hard (ulimit -n)")
    parser.add_argument("--read-timeout", type=float, default=300)
    parser.add_argument("--against", metavar="REV", action="append", default=[],
                        help="also run a broker from this commit, first (e.g. main)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker property")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"{args.partitions} partitions ({args.per_topic} per topic), broker under ulimit -n {args.open_files}; "
          f"this shell: ulimit -n {soft}/{hard}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}; {GOALS}")
    work = Path(tempfile.mkdtemp(prefix="hw-partitions-"))
    try:
        trees: dict[str, Path | None] = {rev: source_tree(rev, work / f"against-{i}")
                                         for i, rev in enumerate(args.against)}
        trees["this tree"] = None
        for name, tree in trees.items():
            run(name, tree, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
