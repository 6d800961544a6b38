"""MirrorMaker benchmark: a raw kcat pipe vs. MirrorSourceConnector between two brokers (prints figures; not
a test).

Two Headwater brokers, A (source) and B (target), each its own subprocess with a temp log dir, and a group of
``--workers`` distributed Connect workers on B (tests/support/workerproc.py's ``Cluster``). N records (8-byte ASCII
keys, 100-byte ASCII values: no tab or newline, so the line-based pipe copies them exactly) are produced to a
topic of P partitions on A with confluent-kafka, then copied to B, ``--repeat`` rounds of:

1. **raw pipe**: ``kcat -C -b A -t T -o beginning -e -K '\t' -D '\n' | kcat -P -b B -t copy -K '\t' -D '\n'``
   into a topic of P partitions (key hashing picks the partition again); ``--unbuffered`` also times it with
   ``kcat -C -u``;
2. **mirror**: MirrorSourceConnector A -> B (``<alias>.T``, partitions kept), once per ``--tasks`` value;
   every run gets a source alias of its own (A1, A2, ...), so a fresh target topic and no stored offsets.

With ``--eos`` each mirror run is made twice in the same round: on the worker group above (at-least-once) and
on a second group on B with ``exactly.once.source.support=enabled``, the connector with
``exactly.once.support=required``, ``transaction.boundary=--eos-boundary`` and a read_committed source consumer
(MM2's exactly-once mode: records and offsets in one transaction per poll); the ratio of their medians is printed.

Both are timed from their start (the pipe's processes started, the connector's config PUT) until the target's
end offsets add up to N, polled every 20 ms; "from the first record" starts the clock when B first holds one.
The counts are checked (the mirror's per partition against A's), then the copy (and its connector) deleted.
CPU seconds of each process come from /proc.

Then one more mirror run with py-spy attached to the worker(s) (``--profile-tasks``; left out of the ratios;
the hot spots are printed), and a **latency** phase: with that connector still running, a producer process on
A sends ``--rate`` records/s for ``--latency-seconds``; a consumer process on B computes arrival time minus
the record's timestamp (the producer's CreateTime, copied as is; ms) and minus the send time carried in the
value (ns); a consumer on A does the same for the direct path, for comparison.

    .venv/bin/python bench/mirror_throughput.py --unbuffered        # 1M records, 6 partitions, tasks 1 and 2
    .venv/bin/python bench/mirror_throughput.py --workers 2 --tasks 2
    .venv/bin/python bench/mirror_throughput.py --records 100000 --repeat 1 --latency-seconds 5
    .venv/bin/python bench/mirror_throughput.py --eos --no-pipe --profile-tasks 0 --latency-seconds 0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from broker_throughput import (  # noqa: E402
    KCAT,
    KCAT_CONSUME,
    KCAT_PRODUCE,
    _cpu_seconds,
    _system_busy,
    start_py_spy,
    stop_py_spy,
    summarize_collapsed,
    wait_for_quiet,
)

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
KEY_SIZE = 8
POLL_S = 0.02  # how often the target's end offsets are read while timing


# -- data ------------------------------------------------------------------------------------------------


def key_of(i: int) -> bytes:
    return b"%08d" % i


def value_of(i: int, size: int) -> bytes:
    head = b"%010d " % i
    return head + b"abcdefghijklmnopqrstuvwxyz0123456789"[: size - len(head)].ljust(size - len(head), b"x")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Drop a finished copy: the next ones then do not run beside gigabytes of earlier copies in the page
    cache and the disk's write-back."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped client fails its futures
    admin.delete_topics([topic])[topic].result(30)


def produce_all(bootstrap: str, topic: str, count: int, size: int) -> float:
    """``count`` records as fast as librdkafka takes them (acks=1, 1 MiB batches, no compression: the pipe and
    the mirror then copy the same bytes); returns the seconds until every one was acknowledged."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "batch.num.messages": 100_000, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_097_151, "acks": 1, "enable.idempotence": False})
    started = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, key=key_of(i), value=value_of(i, size))
                break
            except BufferError:
                p.poll(0.01)
        if i % 20_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0, "records left unacknowledged"
    return time.monotonic() - started


class Offsets:
    """End offsets of one topic on one broker, all partitions in one ListOffsets request."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, committed: bool = False) -> None:
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        self.slowest = 0.0  # the longest answer while timing: the clock is only as good as this
        # committed: the last stable offsets (read_committed ListOffsets), for a transactional copy
        self.isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions

    def warm(self, exists: bool, timeout: float = 30) -> None:
        """Ask once before the clock starts: the client connects and (``exists``) learns the new topic's
        leaders. A first ListOffsets for a topic just created now and then took 3 s in librdkafka."""
        deadline = time.monotonic() + timeout
        while len(self.ends()) != len(self.request) and exists and time.monotonic() < deadline:
            time.sleep(0.05)

    def ends(self) -> list[int]:
        try:
            got = self.admin.list_offsets(self.request, request_timeout=10, isolation_level=self.isolation)
            return [f.result().offset for _, f in sorted(got.items(), key=lambda kv: kv[0].partition)]
        except Exception:  # the topic may not exist yet (the mirror creates it)
            return []


def _covers(counts: list[int], expect: list[int]) -> bool:
    return all(c >= e for c, e in zip(counts, expect, strict=True))


def committed_counts(offsets: Offsets, expect: list[int], quiet: float = 0.5) -> list[int]:
    """Records per partition a read_committed consumer reads (commit markers take offsets of their own, so
    end offsets overstate a transactional copy): read until each partition has ``expect`` and nothing more
    came for ``quiet`` s."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": offsets.bootstrap, "group.id": f"count-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "fetch.wait.max.ms": 10})
    try:
        c.assign([TopicPartition(offsets.topic, p, 0) for p in range(offsets.partitions)])
        counts = [0] * offsets.partitions
        last = time.monotonic() + 10  # the first records may take a while (a new client connects)
        while time.monotonic() - last < (quiet if _covers(counts, expect) else 3 * quiet):
            msgs = c.consume(100_000, 0.05)
            for m in msgs:
                partition = m.partition()
                if m.error() is None and partition is not None:
                    counts[partition] += 1
            if msgs:
                last = time.monotonic()
        return counts
    finally:
        c.close()


def wait_committed(offsets: Offsets, expect: list[int], timeout: float, cpu: Cpu,
                   alive: Any = None) -> tuple[float | None, float, dict[str, float]]:
    """``wait_total`` for a transactional copy: poll the last stable offsets until they add up to at least the
    records expected and stay put for a few polls, then count what read_committed readers see; when all are
    there, the copy was done when the last stable offsets first showed the values they have now (the CPU
    seconds are those of that moment: the counting reads are left out)."""
    first = None
    seen: dict[int, tuple[float, dict[str, float]]] = {}
    still = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, now = _ends_now(offsets)
        still = still + 1 if got in seen else 0
        if got not in seen:
            seen[got] = (now, cpu.used())
        if got and first is None:
            first = now
        if got >= sum(expect) and still >= 3 and _covers(committed_counts(offsets, expect), expect):
            return first, *seen[got]
        if alive is not None and not alive():
            raise RuntimeError(f"a process exited with {got:,} offsets of {sum(expect):,} records on the target")
        time.sleep(POLL_S)
    raise TimeoutError(f"{sum(offsets.ends()):,} offsets of {sum(expect):,} records on the target after {timeout}s")


def _ends_now(offsets: Offsets) -> tuple[int, float]:
    """The end offsets' sum and when it was read, keeping the slowest read's time."""
    asked = time.monotonic()
    got = sum(offsets.ends())
    now = time.monotonic()
    offsets.slowest = max(offsets.slowest, now - asked)
    return got, now


def wait_total(offsets: Offsets, total: int, timeout: float, alive: Any = None) -> tuple[float | None, float]:
    """Poll until the end offsets add up to ``total``: (when the first record showed, when all had)."""
    first = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, now = _ends_now(offsets)
        if got and first is None:
            first = now
        if got >= total:
            return first, now
        if alive is not None and not alive() and sum(offsets.ends()) < total:
            raise RuntimeError(f"a process exited with {got:,} of {total:,} records on the target")
        time.sleep(POLL_S)
    raise TimeoutError(f"{sum(offsets.ends()):,} of {total:,} records on the target after {timeout}s")


class Cpu:
    """CPU seconds of named processes (by pid), of reaped children, and of the whole machine, over a phase."""

    def __init__(self, pids: dict[str, int], children: str = "") -> None:
        self.pids, self.children_label = pids, children
        self.start = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        self.children = _children_cpu()
        self.me = sum(os.times()[:2])
        self.system = _system_busy()

    def used(self) -> dict[str, float]:
        out = {name: _cpu_seconds(pid) - self.start[name] for name, pid in self.pids.items()}
        if self.children_label:  # kcat or py-spy: the only processes reaped during a phase
            out[self.children_label] = _children_cpu() - self.children
        out["bench"] = sum(os.times()[:2]) - self.me
        out["other"] = max(0.0, _system_busy() - self.system - sum(out.values()))
        return {k: round(v, 2) for k, v in out.items()}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# -- raw pipe -------------------------------------------------------------------------------------------


def raw_pipe(a: str, b: str, topic: str, partitions: int, count: int, unbuffered: bool,
             pids: dict[str, int], suffix: str) -> dict[str, Any]:
    target = f"copy{'-u' if unbuffered else ''}-{suffix}-{topic}"
    create_topic(b, target, partitions)
    offsets = Offsets(b, target, partitions)
    offsets.warm(exists=True)
    consume = [KCAT, "-C", "-b", a, "-t", topic, "-o", "beginning", "-e", "-q", "-K", "\t", "-D", "\n",
               *KCAT_CONSUME, *(["-u"] if unbuffered else [])]
    produce = [KCAT, "-P", "-b", b, "-t", target, "-K", "\t", "-D", "\n", *KCAT_PRODUCE]
    cpu = Cpu(pids, "kcat")
    started = time.monotonic()
    reader = subprocess.Popen(consume, stdout=subprocess.PIPE)
    writer = subprocess.Popen(produce, stdin=reader.stdout)
    assert reader.stdout is not None
    reader.stdout.close()  # the writer holds the pipe now
    first, done = wait_total(offsets, count, 300, lambda: writer.poll() is None)
    codes = (reader.wait(30), writer.wait(30))
    used = cpu.used()
    stored = sum(offsets.ends())
    if any(codes) or stored != count:
        raise RuntimeError(f"pipe: kcat exited with {codes}, {stored:,} records stored, expected {count:,}")
    out = result("raw pipe" + (" (-u)" if unbuffered else ""), count, started, first, done, used)
    out["slowest_poll"] = round(offsets.slowest, 3)
    delete_topic(b, target)
    return out


def result(name: str, count: int, started: float, first: float | None, done: float,
           used: dict[str, float]) -> dict[str, Any]:
    first = first if first is not None else done
    total_s, flow_s = done - started, done - first
    # the whole copy seen within two polls: too short to time from the first record
    from_first = round(count / flow_s) if flow_s > 2 * POLL_S else None
    return {"name": name, "records": count, "seconds": round(total_s, 2), "rate": round(count / total_s),
            "first_record_after": round(first - started, 2), "flow_seconds": round(flow_s, 2),
            "rate_from_first": from_first, "cpu": used}


# -- mirror ---------------------------------------------------------------------------------------------


def mirror(cluster: Any, a: str, b: str, topic: str, partitions: int, count: int, tasks: int, alias: str,
           pids: dict[str, int], source_ends: list[int],
           profile: tuple[Path, int] | None = None, eos: str | None = None) -> dict[str, Any]:
    """One timed copy; ``eos``: on a worker with exactly-once source support, with that transaction.boundary
    (``exactly.once.support=required``, the source consumer read_committed, as MM2's exactly-once mode asks)."""
    from support.mirrorkit import mirror_config

    worker = cluster.workers[0]
    name = f"mirror-{alias}"
    remote = f"{alias}.{topic}"
    offsets = Offsets(b, remote, partitions, committed=eos is not None)
    offsets.warm(exists=False)
    config = mirror_config(name, SOURCE, (alias, a), ("B", b), topics=topic, tasks_max=str(tasks))
    if eos is not None:
        config.update({"exactly.once.support": "required", "transaction.boundary": eos,
                       "source.consumer.isolation.level": "read_committed"})
    # py-spy (one per worker) attaches before the clock starts, as it needs a second: the profile covers the
    # connector's start and the whole copy
    spies = []
    if profile is not None:
        spies = [start_py_spy(w.proc.pid, profile[0].with_suffix(f".{k}"), profile[1])
                 for k, w in enumerate(cluster.workers)]
    cpu = Cpu(pids, "py-spy" if spies else "")
    started = time.monotonic()
    worker.ok("PUT", f"/connectors/{name}/config", config)
    try:
        alive = lambda: all(w.running for w in cluster.workers)  # noqa: E731
        if eos is not None:
            first, done, used = wait_committed(offsets, source_ends, 600, cpu, alive)
        else:
            first, done = wait_total(offsets, count, 600, alive)
    finally:
        for spy in spies:
            stop_py_spy(spy)
    if eos is None:
        used = cpu.used()
    if profile is not None:  # one file for all the workers' samples
        parts = [profile[0].with_suffix(f".{k}") for k in range(len(spies))]
        profile[0].write_text("".join(p.read_text() for p in parts if p.exists()))
    time.sleep(1.5)  # a duplicate would show up after the last expected record
    ends = committed_counts(offsets, source_ends) if eos is not None else offsets.ends()
    if ends != source_ends:
        raise RuntimeError(f"{name}: target {'records' if eos else 'end offsets'} {ends}, source {source_ends}")
    out = result(f"mirror{' EOS' if eos else ''} tasks.max={tasks}" + (" (py-spy)" if profile else ""), count,
                 started, first, done, used)
    out["connector"] = name
    out["slowest_poll"] = round(offsets.slowest, 3)
    out["topic"] = remote
    return out


def delete_connector(cluster: Any, copy: dict[str, Any]) -> None:
    """Delete a mirror run's connector, then its target topic."""
    worker = cluster.workers[0]
    worker.ok("DELETE", f"/connectors/{copy['connector']}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and worker.status(copy["connector"]) is not None:
        time.sleep(0.1)
    delete_topic(cluster.bootstrap, copy["topic"])


# -- latency: child processes ----------------------------------------------------------------------------


def latency_consumer(bootstrap: str, topic: str, partitions: int, count: int, timeout: float) -> None:
    """Reads ``topic`` from its current end; prints (seq, ms after the timestamp, ms after the send) per record."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-latency-{os.getpid()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
                  "fetch.error.backoff.ms": 0})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    for tp in tps:
        tp.offset = c.get_watermark_offsets(tp, timeout=10)[1]
    c.assign(tps)
    c.poll(0.3)  # connected and fetching before the producer starts
    print("READY", flush=True)
    samples: list[tuple[int, float, float]] = []
    cpu0 = sum(os.times()[:2])
    deadline = time.monotonic() + timeout
    while len(samples) < count and time.monotonic() < deadline:
        msg = c.poll(0.1)  # one at a time: consume(n, timeout) would hold records until n arrive
        now_ns = time.time_ns()
        if msg is None or msg.error():
            continue
        seq, sent = (msg.value() or b"")[:40].split(b" ", 2)[:2]
        samples.append((int(seq), now_ns / 1e6 - msg.timestamp()[1], (now_ns - int(sent)) / 1e6))
    c.close()
    print(json.dumps({"samples": samples, "cpu": sum(os.times()[:2]) - cpu0}), flush=True)


def latency_producer(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> None:
    """``rate`` records/s for ``seconds``; the value starts with "<seq> <time_ns> ". linger.ms=1: at linger 0
    librdkafka sends a request per record or two (bench/RESULTS.md, broker latency)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": 1, "enable.idempotence": False})
    filler = b"x" * size
    total = int(rate * seconds)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            head = b"%d %d " % (sent, time.time_ns())
            p.produce(topic, key=key_of(sent), value=head + filler[len(head):])
            sent += 1
        p.poll(0)
        sleep = sent / rate - (time.perf_counter() - t0)
        if sleep > 0:
            time.sleep(sleep)
    p.flush(30)
    print(json.dumps({"sent": sent, "seconds": time.perf_counter() - t0}), flush=True)


def run_latency(a: str, b: str, topic: str, remote: str, partitions: int, args: argparse.Namespace,
                pids: dict[str, int]) -> dict[str, Any]:
    count = int(args.rate * args.latency_seconds)
    me = [sys.executable, os.path.abspath(__file__), "--partitions", str(partitions)]
    readers = {}
    for label, bootstrap, t in (("mirrored (B)", b, remote), ("direct (A)", a, topic)):
        proc = subprocess.Popen([*me, "--role", "latency-consumer", "--bootstrap", bootstrap, "--topic", t,
                                 "--records", str(count), "--timeout", str(args.latency_seconds + 30)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "READY":
            raise RuntimeError(f"latency consumer on {bootstrap} did not start")
        readers[label] = proc
    cpu = Cpu(pids, "clients")  # the producer and both consumers, reaped before the figures are read
    producer = subprocess.run([*me, "--role", "latency-producer", "--bootstrap", a, "--topic", topic,
                               "--rate", str(args.rate), "--seconds", str(args.latency_seconds),
                               "--value-size", str(args.value_size)], capture_output=True, text=True, check=True)
    sent = json.loads(producer.stdout.strip().splitlines()[-1])
    out: dict[str, Any] = {"sent": sent["sent"], "send_seconds": round(sent["seconds"], 2)}
    for label, proc in readers.items():
        got = json.loads(proc.communicate(timeout=args.latency_seconds + 60)[0].strip().splitlines()[-1])
        skip = int(args.rate * args.warmup)
        samples = [s for s in got["samples"] if s[0] >= skip]
        row: dict[str, Any] = {"received": len(got["samples"]), "measured": len(samples)}
        for which, idx in (("timestamp", 1), ("send_ns", 2)):
            lat = sorted(s[idx] for s in samples)
            if not lat:
                continue
            row[which] = {"p50": round(pct(lat, 0.50), 2), "p99": round(pct(lat, 0.99), 2),
                          "p999": round(pct(lat, 0.999), 2), "max": round(lat[-1], 2),
                          "mean": round(statistics.fmean(lat), 2)}
        out[label] = row
    out["cores"] = {k: round(v / sent["seconds"], 2) for k, v in cpu.used().items()}
    return out


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


# -- report ---------------------------------------------------------------------------------------------


def progress(copy: dict[str, Any]) -> str:
    slow = copy["slowest_poll"]
    return (f"{copy['name']}: {copy['rate']:,} records/s (first record after {copy['first_record_after']:.2f}s"
            f"{f'; TIMING DISTURBED: an offsets poll took {slow:.2f}s' if slow > 0.25 else ''})")


def summarize(copies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per configuration: the median (of each column on its own) and the best of its rounds; CPU
    seconds of the median round."""
    rows = []
    for name in dict.fromkeys(c["name"] for c in copies):
        runs = sorted((c for c in copies if c["name"] == name), key=lambda c: c["rate"])
        mid = runs[(len(runs) - 1) // 2]  # the lower median: a real round, not an average of two
        from_first = sorted(c["rate_from_first"] for c in runs if c["rate_from_first"])
        rows.append({"name": name, "rounds": len(runs), "rate": mid["rate"], "best": runs[-1]["rate"],
                     "seconds": mid["seconds"], "first_record_after": mid["first_record_after"],
                     "rate_from_first": from_first[(len(from_first) - 1) // 2] if from_first else None,
                     "cpu": mid["cpu"]})
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'copy':<28} {'rounds':>6} {'records/s':>10} {'best':>10} {'seconds':>8} {'1st rec':>8} "
          f"{'rec/s from 1st':>14}  CPU seconds (median round)")
    for r in rows:
        cpu = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu"].items())
        print(f"{r['name']:<28} {r['rounds']:>6} {r['rate']:>10,} {r['best']:>10,} {r['seconds']:>8.2f} "
              f"{r['first_record_after']:>7.2f}s {r['rate_from_first'] or 0:>14,}  {cpu}")


def log_problems(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r"\b(ERROR|CRITICAL)\b|Traceback", line)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--tasks", default="1,2", help="comma list of tasks.max values, one timed mirror run each")
    ap.add_argument("--workers", type=int, default=1, help="Connect workers (processes) in the group on B")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the timed copies (median and best shown)")
    ap.add_argument("--unbuffered", action="store_true", help="also time the pipe with kcat -C -u")
    ap.add_argument("--profile-tasks", type=int, default=2, help="tasks.max of the profiled run (0: no profile)")
    ap.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second")
    ap.add_argument("--rate", type=int, default=10_000, help="latency phase: records/s")
    ap.add_argument("--latency-seconds", type=float, default=15, help="0: no latency phase")
    ap.add_argument("--warmup", type=float, default=1.0, help="latency: seconds not counted at the start")
    ap.add_argument("--wait-quiet", type=float, default=10, help="wait up to this long for an idle machine")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (logs, profile)")
    ap.add_argument("--eos", action="store_true",
                    help="also time each mirror run on a second worker group with exactly.once.source.support="
                         "enabled (exactly.once.support=required), in the same rounds")
    ap.add_argument("--eos-boundary", default="poll", choices=("poll", "interval"),
                    help="transaction.boundary of the exactly-once runs")
    ap.add_argument("--no-pipe", action="store_true", help="leave the raw kcat pipe out")
    # child process roles (the latency phase)
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role == "latency-consumer":
        return latency_consumer(args.bootstrap, args.topic, args.partitions, args.records, args.timeout)
    if args.role == "latency-producer":
        return latency_producer(args.bootstrap, args.topic, args.rate, args.seconds, args.value_size)

    from support.brokerproc import BrokerProcess
    from support.connectproc import unique
    from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings

    base = Path(tempfile.mkdtemp(prefix="hw-mirror-bench-"))
    n, parts = args.records, args.partitions
    results: dict[str, Any] = {"records": n, "partitions": parts, "workers": args.workers, "key_bytes": KEY_SIZE,
                               "value_bytes": args.value_size, "copies": []}
    copies = results["copies"]
    started = time.monotonic()
    try:
        with BrokerProcess(base / "a", *BROKER_OVERRIDES) as a, BrokerProcess(base / "b", *BROKER_OVERRIDES) as b:
            topic = "orders"
            create_topic(a.bootstrap, topic, parts)
            seconds = produce_all(a.bootstrap, topic, n, args.value_size)
            source_ends = Offsets(a.bootstrap, topic, parts).ends()
            assert sum(source_ends) == n, f"A holds {source_ends}"
            print(f"produced {n:,} records ({KEY_SIZE} B keys, {args.value_size} B values) to A in {seconds:.1f}s "
                  f"= {n / seconds:,.0f} records/s; per partition {source_ends}", flush=True)
            assert a.proc is not None and b.proc is not None
            pids = {"broker A": a.proc.pid, "broker B": b.proc.pid}
            tag = unique("mm-bench")
            cluster = Cluster(base / "workers", b.bootstrap, tag, fast_settings(tag))
            # exactly-once is the worker's choice (exactly.once.source.support): a group of its own
            eos_tag = unique("mm-bench-eos")
            eos_cluster = Cluster(base / "eos-workers", b.bootstrap, eos_tag,
                                  {**fast_settings(eos_tag), "exactly.once.source.support": "enabled"})
            with cluster, eos_cluster:
                workers = cluster.start(args.workers)
                for k, w in enumerate(workers):
                    assert w.proc is not None
                    pids[f"worker{k}" if args.workers > 1 else "worker"] = w.proc.pid
                if args.eos:
                    eos_workers = eos_cluster.start(args.workers)
                    for k, w in enumerate(eos_workers):
                        assert w.proc is not None
                        pids[f"EOS worker{k}" if args.workers > 1 else "EOS worker"] = w.proc.pid
                    workers = workers + eos_workers
                owner: dict[str, Any] = {}  # connector -> the group running it
                aliases = (f"A{i}" for i in range(1, 1000))  # a new alias: a new target topic, no stored offsets
                last = None
                for round_no in range(args.repeat):
                    if last is not None:  # nothing else mirrors while the pipe runs
                        delete_connector(owner[last["connector"]], last)
                        last = None
                    for unbuffered in ([] if args.no_pipe else [False, True] if args.unbuffered else [False]):
                        wait_for_quiet(args.wait_quiet)
                        copies.append(raw_pipe(a.bootstrap, b.bootstrap, topic, parts, n, unbuffered, pids,
                                               f"r{round_no}"))
                        print(f"round {round_no}: {progress(copies[-1])}", flush=True)
                    for tasks in [int(t) for t in args.tasks.split(",") if t]:
                        for group, eos in ([(cluster, None), (eos_cluster, args.eos_boundary)] if args.eos
                                           else [(cluster, None)]):
                            if last is not None:
                                delete_connector(owner[last["connector"]], last)
                            wait_for_quiet(args.wait_quiet)
                            last = mirror(group, a.bootstrap, b.bootstrap, topic, parts, n, tasks, next(aliases),
                                          pids, source_ends, eos=eos)
                            owner[last["connector"]] = group
                            copies.append(last)
                            print(f"round {round_no}: {progress(last)}", flush=True)
                if args.profile_tasks:
                    if last is not None:
                        delete_connector(owner[last["connector"]], last)
                    raw = base / "mirror-profile.txt"
                    wait_for_quiet(args.wait_quiet)
                    last = mirror(cluster, a.bootstrap, b.bootstrap, topic, parts, n, args.profile_tasks,
                                  next(aliases), pids, source_ends, profile=(raw, args.profile_rate))
                    owner[last["connector"]] = cluster
                    copies.append(last)
                    # the CLI's entry frames are in every sample: left out
                    results["profile"] = ([line for line in summarize_collapsed(raw, 20)
                                           if "headwater/cli.py" not in line]
                                          if raw.exists() else ["(py-spy wrote nothing)"])
                if args.latency_seconds and last is not None:
                    time.sleep(2)  # the copy's last offset commit and syncs out of the way
                    wait_for_quiet(args.wait_quiet)
                    results["latency"] = run_latency(a.bootstrap, b.bootstrap, topic, last["topic"], parts, args,
                                                     pids)
                    results["latency"]["connector"] = last["name"]
            # after the worker stopped: its shutdown is checked too
            results["worker_log_problems"] = [p for w in workers for p in log_problems(w.log_text())][:20]
        results["broker_log_problems"] = (log_problems(a.log_text()) + log_problems(b.log_text()))[:20]
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    print()
    print(f"{n:,} records of {KEY_SIZE} B keys + {args.value_size} B values, {parts} partitions; "
          f"{args.workers} worker(s); {os.cpu_count()} CPUs shared by both brokers, the worker(s), the pipe and "
          "this script; "
          f"{time.monotonic() - started:.0f}s in all")
    rows = results["summary"] = summarize(copies)
    print_table(rows)
    pipe = next((r for r in rows if r["name"] == "raw pipe"), None)
    if pipe:
        for r in rows:
            if r["name"].startswith("mirror") and "py-spy" not in r["name"]:
                flow = (f"{r['rate_from_first'] / pipe['rate_from_first']:.2f} x" if r["rate_from_first"]
                        and pipe["rate_from_first"] else "n/a")
                print(f"{r['name']}: {r['rate'] / pipe['rate']:.2f} x the raw pipe (medians; {flow} from the "
                      "first record)")
    if "latency" in results:
        lat = results["latency"]
        print(f"latency at {args.rate:,} records/s for {args.latency_seconds:g}s ({lat['connector']}), "
              f"first {args.warmup:g}s not counted; cores: {lat['cores']}")
        for label in ("mirrored (B)", "direct (A)"):
            row = lat[label]
            for which in ("timestamp", "send_ns"):
                if which in row:
                    s = row[which]
                    print(f"  {label:<13} {which:<9} p50 {s['p50']:8.2f} ms  p99 {s['p99']:8.2f} ms  "
                          f"p99.9 {s['p999']:8.2f} ms  max {s['max']:8.2f} ms  ({row['measured']:,} of "
                          f"{row['received']:,} received)")
    for r in rows:
        if r["name"].startswith("mirror EOS") and "py-spy" not in r["name"]:
            plain = next((p for p in rows if p["name"] == r["name"].replace("mirror EOS", "mirror")), None)
            if plain:
                results.setdefault("eos_ratio", {})[r["name"]] = round(r["rate"] / plain["rate"], 2)
                print(f"{r['name']} (transaction.boundary={args.eos_boundary}): {r['rate'] / plain['rate']:.2f} x "
                      f"at-least-once (medians; goal >= 0.8)")
    for line in results.get("profile", []):
        print(line)
    for key in ("worker_log_problems", "broker_log_problems"):
        if results.get(key):
            print(f"{key}:")
            for line in results[key]:
                print("  " + line[:300])
    print(json.dumps({k: v for k, v in results.items() if k != "profile"}, indent=2))


if __name__ == "__main__":
    main()
