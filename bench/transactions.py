"""Transactional produce against idempotent produce on one broker (prints a table; not a test).

One broker (tests/support/brokerproc.py, temp log dir). In the same run, alternating mode by mode to share
the machine's state fairly, a confluent-kafka producer sends ``--records`` records of ``--record-size``
bytes (round-robin over a topic of ``--partitions`` partitions, a new topic per round):

- idempotent: ``enable.idempotence=true``, acks=all, timed from the first produce() to the end of flush();
- transactional: ``transactional.id`` (init_transactions before the clock), begin_transaction, produce, and a
  commit_transaction as soon as ``--commit-ms`` have passed since the transaction began (checked between
  records), the last transaction committed at the end; timed the same way. Each commit_transaction is
  timed on its own (p50/p99 over all rounds).

Both modes use the same producer settings (linger.ms, batch size, queue). MB/s is record bytes over wall
time; the ratio is transactional over idempotent (goal: at least 0.7). The broker's CPU seconds per phase
are shown too. After the timed rounds, each transactional round's producer also opens one more transaction
of ``--aborted`` records and aborts it; then a read_committed consumer reads every transactional topic to
its end and must count exactly the committed records (an idempotent topic is checked against its count
with read_uncommitted). Each phase waits up to ``--wait-quiet`` s for the machine to be idle first.

    python bench/transactions.py                       # 1M records of 200 B, 3 rounds each
    python bench/transactions.py --records 50000 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from broker_throughput import (  # noqa: E402
    _cpu_seconds,
    start_py_spy,
    stop_py_spy,
    summarize_collapsed,
    wait_for_quiet,
)
from support.brokerproc import BrokerProcess  # noqa: E402

# librdkafka's queue limits (100k messages) are left at their defaults: a larger queue lets the idempotent
# producer hold a whole round in memory, which costs the client more than it saves
PRODUCER = {"linger.ms": 5, "batch.size": 1048576, "acks": "all", "enable.idempotence": True}
MODES = ("idempotent", "transactional")


@dataclass
class Round:
    mode: str
    topic: str
    seconds: float
    broker_cpu: float
    committed: int  # records in committed transactions (idempotent: all acknowledged)
    commits: list[float] = field(default_factory=list)  # seconds from the commit's start to its end
    end_txns: list[float] = field(default_factory=list)  # of which commit_transaction after the flush
    producer: Producer | None = None  # the transactional producer, kept for the aborted transaction


def _pid(broker: BrokerProcess) -> int:
    assert broker.proc is not None, "the broker is not running"
    return broker.proc.pid


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def _produce(p: Producer, topic: str, value: bytes, partitions: int, i: int) -> None:
    while True:
        try:
            p.produce(topic, value, partition=i % partitions)
            return
        except BufferError:  # the queue is full: let librdkafka send
            p.poll(0.01)


def _round(broker: BrokerProcess, mode: str, args: argparse.Namespace, value: bytes) -> Round:
    topic = f"txn-bench-{mode}-{time.monotonic_ns()}"
    _create_topic(broker.bootstrap, topic, args.partitions)
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    conf: dict[str, object] = {"bootstrap.servers": broker.bootstrap, **PRODUCER, "on_delivery": on_delivery}
    if mode == "transactional":
        conf["transactional.id"] = topic
    p = Producer(conf)
    commit_s = args.commit_ms / 1000
    commits: list[float] = []
    end_txns: list[float] = []
    if mode == "transactional":
        p.init_transactions(30)
    wait_for_quiet(args.wait_quiet)
    cpu0 = _cpu_seconds(_pid(broker))
    started = time.perf_counter()
    if mode == "idempotent":
        for i in range(args.records):
            _produce(p, topic, value, args.partitions, i)
        p.flush(120)
    else:
        p.begin_transaction()
        began = time.perf_counter()
        for i in range(args.records):
            _produce(p, topic, value, args.partitions, i)
            if i % 64 == 0 and time.perf_counter() - began >= commit_s:
                _commit(p, commits, end_txns)
                p.begin_transaction()
                began = time.perf_counter()
        _commit(p, commits, end_txns)
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds(_pid(broker)) - cpu0
    if failures:
        raise RuntimeError(f"{mode}: {len(failures)} records failed, first: {failures[0]}")
    return Round(mode, topic, seconds, cpu, args.records, commits, end_txns,
                 p if mode == "transactional" else None)


def _commit(p: Producer, commits: list[float], end_txns: list[float]) -> None:
    """commit_transaction, timed whole and without its flush (which commit_transaction does first anyway):
    the second part is EndTxn's round trip, the coordinator's share."""
    started = time.perf_counter()
    p.flush(60)
    flushed = time.perf_counter()
    p.commit_transaction(60)
    commits.append(time.perf_counter() - started)
    end_txns.append(time.perf_counter() - flushed)


def _abort_one(r: Round, args: argparse.Namespace, value: bytes) -> None:
    """One more transaction on ``r``'s producer, aborted: a read_committed reader must skip it."""
    assert r.producer is not None
    r.producer.begin_transaction()
    for i in range(args.aborted):
        _produce(r.producer, r.topic, value, args.partitions, i)
    r.producer.flush(60)
    r.producer.abort_transaction(60)
    r.producer = None  # librdkafka's producer closes when the last reference goes, before the broker stops


def _count(bootstrap: str, topic: str, partitions: int, isolation: str) -> int:
    """Records a consumer with ``isolation`` reads from the start of every partition to its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-bench-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                  "isolation.level": isolation})
    c.subscribe([topic])
    count, at_end = 0, set[int]()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                error, partition = m.error(), m.partition()
                if error is None:
                    count += 1
                    at_end.discard(partition)
                elif error.code() == KafkaError._PARTITION_EOF and partition is not None:
                    at_end.add(partition)
                else:
                    raise RuntimeError(f"consuming {topic}: {error}")
    finally:
        c.close()
    if len(at_end) < partitions:
        raise RuntimeError(f"consuming {topic}: only {len(at_end)} of {partitions} partitions reached their end")
    return count


def _profile(broker: BrokerProcess, args: argparse.Namespace, value: bytes) -> list[str]:
    """py-spy on the broker through one transactional round: the hottest functions, and the share of the
    samples spent in the transaction coordinator (broker/txn/) and in its requests' handlers."""
    args.profile.mkdir(parents=True, exist_ok=True)
    raw = args.profile / "transactional.txt"
    spy = start_py_spy(_pid(broker), raw, args.profile_rate)
    try:
        r = _round(broker, "transactional", args, value)
    finally:
        stop_py_spy(spy)
    r.producer = None
    if not raw.exists():
        return ["(py-spy wrote nothing)"]
    total = txn = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            total += int(n)
            txn += int(n) if "/txn/" in stack or "_txn" in stack else 0
    return [f"{len(r.commits)} commits in {r.seconds:.1f} s; samples in broker/txn/ or an apis/k*_txn handler: "
            f"{txn} of {total} ({100 * txn / max(total, 1):.1f} %)", *summarize_collapsed(raw)]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--commit-ms", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--aborted", type=int, default=1000, help="records of the aborted transaction per round")
    parser.add_argument("--wait-quiet", type=float, default=20.0)
    parser.add_argument("--profile", type=Path, help="record an extra, untimed transactional round with py-spy "
                        "attached to the broker (raw output in this directory) and print the hottest functions")
    parser.add_argument("--profile-rate", type=int, default=200)
    parser.add_argument("--broker-set", action="append", default=[], help="a broker setting key=value")
    args = parser.parse_args()
    value = b"x" * args.record_size
    mb = args.records * args.record_size / 1e6
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    with tempfile.TemporaryDirectory(prefix="hw-txn-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", *args.broker_set, log_file=Path(tmp) / "broker.log").start()
        try:
            rounds: list[Round] = []
            for n in range(args.repeat):
                for mode in MODES if n % 2 == 0 else reversed(MODES):
                    r = _round(broker, mode, args, value)
                    rounds.append(r)
                    print(f"round {n + 1} {mode:<13} {args.records / r.seconds:>10,.0f} records/s "
                          f"{mb / r.seconds:6.1f} MB/s  broker CPU {r.broker_cpu:5.2f} s"
                          + (f"  {len(r.commits)} commits" if r.commits else ""), flush=True)
            profile = _profile(broker, args, value) if args.profile else []
            # correctness: one aborted transaction per transactional round, then count what readers see
            differences = 0
            for r in rounds:
                if r.producer is not None:
                    _abort_one(r, args, value)
            for r in rounds:
                isolation = "read_committed" if r.commits else "read_uncommitted"
                seen = _count(broker.bootstrap, r.topic, args.partitions, isolation)
                differences += abs(seen - r.committed)
                print(f"check {r.topic}: {isolation} read {seen} records, produced {r.committed} "
                      f"(difference {seen - r.committed})"
                      + (f" + {args.aborted} aborted" if r.commits else ""))
            errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
        finally:
            broker.stop()
    print(f"\n{args.records} records of {args.record_size} B ({mb:.1f} MB) per round, {args.partitions} partitions, "
          f"{args.repeat} rounds per mode, commit every {args.commit_ms:g} ms; load average {load} at the start, "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])} at the end")
    print(f"{'mode':<14}{'records/s':>12}{'MB/s':>8}{'broker CPU s':>14}   (median; rounds' records/s)")
    rate: dict[str, float] = {}
    for mode in MODES:
        mine = [r for r in rounds if r.mode == mode]
        rate[mode] = args.records / statistics.median(r.seconds for r in mine)
        print(f"{mode:<14}{rate[mode]:>12,.0f}{rate[mode] * args.record_size / 1e6:>8.1f}"
              f"{statistics.median(r.broker_cpu for r in mine):>14.2f}   "
              + ", ".join(f"{args.records / r.seconds:,.0f}" for r in mine))
    per_round = [t.seconds and i.seconds / t.seconds for i, t in
                 zip([r for r in rounds if r.mode == "idempotent"], [r for r in rounds if r.mode == "transactional"],
                     strict=True)]
    commits = [c for r in rounds for c in r.commits]
    print(f"transactional / idempotent: {rate['transactional'] / rate['idempotent']:.2f} (of medians); "
          f"per round {', '.join(f'{x:.2f}' for x in per_round)}, median {statistics.median(per_round):.2f} "
          "(goal >= 0.7)")
    end_txns = [c for r in rounds for c in r.end_txns]
    print(f"commit (flush + commit_transaction): {len(commits)} commits, p50 {_pct(commits, 0.5) * 1000:.1f} ms, "
          f"p99 {_pct(commits, 0.99) * 1000:.1f} ms, max {max(commits) * 1000:.1f} ms; commit_transaction after "
          f"the flush (EndTxn): p50 {_pct(end_txns, 0.5) * 1000:.1f} ms, p99 {_pct(end_txns, 0.99) * 1000:.1f} ms, "
          f"max {max(end_txns) * 1000:.1f} ms")
    print(f"read_committed check: total difference {differences} ({'OK' if differences == 0 else 'MISMATCH'}); "
          f"broker ERROR lines: {len(errors)}")
    for line in errors[:5]:
        print("  " + line)
    if profile:
        print("\nbroker profile, one extra transactional round:\n" + "\n".join(profile))
    if differences:
        sys.exit(1)


if __name__ == "__main__":
    main()
