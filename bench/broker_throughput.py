"""Broker throughput, latency and memory benchmark (prints a table; not a test).

Starts its own broker (tests/support/brokerproc.py's BrokerProcess, temp log dir) and measures:

- produce: N records of 100 B into a 1-partition and a 6-partition topic, driven from C
  (kcat, acks=1, linger.ms=5, batch.size=1 MiB), timed from kcat's start to its exit, then
  the end offsets checked;
- consume: the same records read back with ``kcat -C -f '\\n' -o 0 -c COUNT`` (lines
  counted by ``wc -l``), by one kcat and by several at once (1 partition: two offset
  ranges; 6 partitions: one kcat per partition), timed the same way;
- latency: a confluent-kafka producer process sends timestamped records at a fixed rate
  (10k/s for 10 s; linger.ms 0 and 1) while a confluent-kafka consumer process reads them
  and computes produce->consume latency (p50/p99/max; the first second is warm-up);
- the broker's peak RSS (VmRSS polled every 50 ms, and VmHWM at the end), and the CPU
  seconds the broker, the clients and everything else on the machine used in each phase
  (they all share the machine's cores; other CPU means the figures are disturbed).

Throughput rounds are repeated (``--repeat``, median and best shown). Before each timed
phase the benchmark waits up to ``--wait-quiet`` seconds for the machine to be idle.
With ``--profile DIR`` extra, untimed produce, consume and latency runs are recorded with
py-spy (attached to the broker) and the hottest functions are printed.

    python bench/broker_throughput.py                  # 1M records
    python bench/broker_throughput.py --quick          # 100k records, 3 s latency runs
    python bench/broker_throughput.py --repeat 0 --latency-seconds 5 --linger-ms 0 --profile /tmp/hw-profile
"""

from __future__ import annotations

import argparse
import collections
import gc
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KCAT = shutil.which("kcat") or "/usr/bin/kcat"
CLK_TCK = os.sysconf("SC_CLK_TCK")

KCAT_PRODUCE = [
    "-X",
    "linger.ms=5",
    "-X",
    "batch.size=1048576",
    "-X",
    "acks=1",
    "-X",
    "batch.num.messages=1000000",
    "-X",
    "message.max.bytes=1048588",
    "-X",
    "queue.buffering.max.messages=2000000",
    "-X",
    "queue.buffering.max.kbytes=2097151",
]
# Default fetch sizes (1 MiB per partition): larger ones only raise the broker's RSS (every
# response is copied several times and kafka-python's encode buffer keeps its largest size).
KCAT_CONSUME = ["-X", "queued.min.messages=1000000", "-X", "fetch.wait.max.ms=10"]


def _load_broker_process() -> type:
    spec = importlib.util.spec_from_file_location("brokerproc", ROOT / "tests" / "support" / "brokerproc.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BrokerProcess


# -- measuring the broker process ------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class RssSampler(threading.Thread):
    """Polls the broker's VmRSS; ``peak_kb`` is the largest value seen."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_kb = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.peak_kb = max(self.peak_kb, _status_kb(self.pid, "VmRSS"))
            except (FileNotFoundError, ProcessLookupError):
                return
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _system_busy() -> float:
    """CPU seconds all processes spent busy (user, nice, system, irq, softirq, steal) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def wait_for_quiet(max_wait: float, threshold: float = 0.25, window: float = 0.5) -> float:
    """Wait (up to ``max_wait`` s) until the machine is nearly idle: under ``threshold`` cores busy
    over ``window`` s. The machine may be shared (other test runs); returns the busy cores seen last."""
    deadline = time.monotonic() + max_wait
    while True:
        b0 = _system_busy()
        time.sleep(window)
        busy = (_system_busy() - b0) / window
        if busy < threshold or time.monotonic() >= deadline:
            return busy


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Phase:
    name: str
    records: int
    seconds: float
    broker_cpu: float
    client_cpu: float
    other_cpu: float
    record_size: int
    ok: bool = True
    note: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.record_size / self.seconds / 1e6


@dataclass
class Results:
    phases: dict[str, list[Phase]] = field(default_factory=lambda: collections.defaultdict(list))
    latency: list[dict[str, float]] = field(default_factory=list)
    peak_rss_kb: int = 0
    hwm_kb: int = 0
    profiles: dict[str, list[str]] = field(default_factory=dict)


QUIET_WAIT = 0.0  # set from --wait-quiet


def _timed(broker_pid: int, name: str, records: int, record_size: int, run: Callable[[], tuple[bool, str]]) -> Phase:
    if QUIET_WAIT:
        wait_for_quiet(QUIET_WAIT)
    cpu0, child0, sys0, t0 = _cpu_seconds(broker_pid), _children_cpu(), _system_busy(), time.perf_counter()
    ok, note = run()
    seconds = time.perf_counter() - t0
    broker, clients = _cpu_seconds(broker_pid) - cpu0, _children_cpu() - child0
    other = max(0.0, _system_busy() - sys0 - broker - clients)
    return Phase(name, records, seconds, broker, clients, other, record_size, ok, note)


# -- workload pieces -------------------------------------------------------------------------


def write_records_file(path: Path, count: int, size: int) -> None:
    """``count`` lines of ``size`` bytes (plus newline): a sequence number and filler."""
    filler = (b"abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 2))[: size - 10]
    with open(path, "wb") as f:
        chunk = []
        for i in range(count):
            chunk.append(b"%010d%s\n" % (i, filler))
            if len(chunk) == 100_000:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))


def split_records_file(path: Path, parts: int) -> list[Path]:
    """Cut the file into ``parts`` files of consecutive lines (cached next to it)."""
    if parts == 1:
        return [path]
    lines = path.read_bytes().splitlines(keepends=True)
    step = -(-len(lines) // parts)
    out = []
    for p in range(parts):
        part = path.with_name(f"{path.stem}.{parts}-{p}{path.suffix}")
        if not part.exists():
            part.write_bytes(b"".join(lines[p * step : (p + 1) * step]))
        out.append(part)
    return out


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result(30)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets", "enable.auto.commit": False})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def kcat_produce(
    bootstrap: str, topic: str, partitions: int, records_file: Path, producers: int, per_partition: bool
) -> None:
    """Produce every line of ``records_file`` with kcat, from one or several processes at once.

    1 partition: ``producers`` processes, each with its share of the lines, all on -p 0.
    More partitions: ``producers`` processes with the random partitioner, or with
    ``per_partition`` one process per partition, each with its own share.
    """
    base = [KCAT, "-P", "-b", bootstrap, "-t", topic, *KCAT_PRODUCE]
    if partitions > 1 and per_partition:
        plan = [["-p", str(p)] for p in range(partitions)]
    elif partitions == 1:
        plan = [["-p", "0"]] * producers
    else:
        plan = [["-X", "topic.partitioner=random"]] * producers
    files = split_records_file(records_file, len(plan))
    procs = [subprocess.Popen([*base, *extra, "-l", str(f)]) for extra, f in zip(plan, files, strict=True)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"kcat -P exited with {codes}")


def kcat_consume_count(bootstrap: str, topic: str, counts: list[int], consumers: int) -> int:
    """Read the whole topic (``counts[p]`` records in partition p) with kcat; return the records read.

    ``consumers`` kcat processes at once: a 1-partition topic is split into offset ranges, a topic
    with more partitions gets one kcat per partition. Each kcat stops after its share (``-c``),
    so no time goes into waiting for end-of-partition (``-e`` is kept as a safety net only), and
    prints one newline per record (``-f '\\n'``), counted by ``wc -l``. Offsets are absolute
    (``-o 0``): with ``-o beginning`` kcat's librdkafka 2.0.2 now and then sits 500 ms on its
    offset-query timer ("no current leader for partition") before the first fetch.
    """
    base = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", "\\n", *KCAT_CONSUME]
    total = sum(counts)
    if consumers == 1:
        plan = [["-o", "0", "-c", str(total)]]
    elif len(counts) == 1:
        step = -(-total // consumers)
        plan = [
            ["-p", "0", "-o", str(i * step), "-c", str(min(step, total - i * step))] for i in range(consumers)
        ]
    else:
        plan = [["-p", str(p), "-o", "0", "-c", str(n)] for p, n in enumerate(counts)]
    kcats = [subprocess.Popen([*base, *extra], stdout=subprocess.PIPE) for extra in plan]
    counters = [subprocess.Popen(["wc", "-l"], stdin=k.stdout, stdout=subprocess.PIPE) for k in kcats]
    for k in kcats:
        assert k.stdout is not None
        k.stdout.close()  # wc holds the pipe now
    got = sum(int(c.communicate()[0].split()[0]) for c in counters)
    codes = [k.wait() for k in kcats]
    if any(codes):
        raise RuntimeError(f"kcat -C exited with {codes}")
    return got


# -- latency: two child processes ------------------------------------------------------------


def _requests_sent(stats: list[dict]) -> int:
    """Requests a librdkafka client sent to the broker, from its last statistics (bootstrap connection aside)."""
    if not stats:
        return 0
    return sum(b.get("tx", 0) for name, b in stats[-1]["brokers"].items() if "bootstrap" not in name)


def latency_consumer(bootstrap: str, topic: str, count: int, timeout: float) -> None:
    from confluent_kafka import Consumer, TopicPartition

    stats: list[dict] = []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "fetch.error.backoff.ms": 0,
            "statistics.interval.ms": 500,
            "stats_cb": lambda s: stats.append(json.loads(s)),
        }
    )
    start = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    c.assign([TopicPartition(topic, 0, start)])
    c.poll(0.2)  # connect and fetch before the producer starts
    print("READY", flush=True)
    lat_us: list[tuple[int, float]] = []
    cpu0, t0 = sum(os.times()[:2]), time.monotonic()
    deadline = time.monotonic() + timeout
    while len(lat_us) < count and time.monotonic() < deadline:
        msg = c.poll(0.1)  # one at a time: consume(n, timeout) would hold messages until n arrive
        now = time.time_ns()
        if msg is None or msg.error():
            continue
        seq, sent = (msg.value() or b"")[:40].split(b" ", 2)[:2]
        lat_us.append((int(seq), (now - int(sent)) / 1000))
    cpu, elapsed = sum(os.times()[:2]) - cpu0, time.monotonic() - t0
    c.poll(0.6)  # one more statistics callback
    c.close()
    requests = _requests_sent(stats)
    print(json.dumps({"samples": lat_us, "cpu": cpu, "seconds": elapsed, "requests": requests}), flush=True)


def latency_producer(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, linger_ms: float
) -> None:
    from confluent_kafka import Producer

    stats: list[dict] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": linger_ms,
            "acks": 1,
            "enable.idempotence": False,
            "statistics.interval.ms": 500,
            "stats_cb": lambda s: stats.append(json.loads(s)),
        }
    )
    filler = b"x" * size
    total = int(rate * seconds)
    cpu0 = sum(os.times()[:2])
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            head = b"%d %d " % (sent, time.time_ns())
            p.produce(topic, value=head + filler[len(head) :])
            sent += 1
        p.poll(0)
        sleep = (sent / rate) - (time.perf_counter() - t0)
        if sleep > 0:
            time.sleep(sleep)
    p.flush(30)
    elapsed = time.perf_counter() - t0
    cpu = sum(os.times()[:2]) - cpu0
    p.poll(0.6)  # one more statistics callback
    requests = _requests_sent(stats)
    print(json.dumps({"sent": sent, "seconds": elapsed, "cpu": cpu, "requests": requests}), flush=True)


def run_latency(
    bootstrap: str,
    rate: int,
    seconds: float,
    size: int,
    warmup: float,
    linger_ms: float,
    topic: str | None = None,
) -> dict[str, float]:
    topic = topic or f"bench-latency-{linger_ms:g}ms"
    create_topic(bootstrap, topic, 1)
    count = int(rate * seconds)
    me = [sys.executable, os.path.abspath(__file__), "--bootstrap", bootstrap, "--topic", topic]
    consumer = subprocess.Popen(
        [*me, "--role", "latency-consumer", "--records", str(count), "--timeout", str(seconds + 30)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert consumer.stdout is not None
    if consumer.stdout.readline().strip() != "READY":
        raise RuntimeError("latency consumer did not start")
    producer = subprocess.run(
        [
            *me,
            "--role",
            "latency-producer",
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            "--record-size",
            str(size),
            "--linger-ms",
            repr(linger_ms),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    sent = json.loads(producer.stdout.strip().splitlines()[-1])
    out, _ = consumer.communicate(timeout=seconds + 60)
    got = json.loads(out.strip().splitlines()[-1])
    samples = got["samples"]
    skip = int(rate * warmup)
    lat = sorted(us for seq, us in samples if seq >= skip)
    if not lat:
        raise RuntimeError("no latency samples")

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] / 1000

    return {
        "linger_ms": linger_ms,
        "sent": sent["sent"],
        "send_seconds": sent["seconds"],
        "producer_cores": sent["cpu"] / sent["seconds"],
        "consumer_cores": got["cpu"] / got["seconds"],
        "requests_per_s": sent["requests"] / sent["seconds"],
        "produce_requests": sent["requests"],
        "consumer_requests": got["requests"],
        "received": len(samples),
        "measured": len(lat),
        "p50": pct(0.50),
        "p90": pct(0.90),
        "p99": pct(0.99),
        "p999": pct(0.999),
        "max": lat[-1] / 1000,
        "mean": statistics.fmean(lat) / 1000,
    }


# -- profiling ------------------------------------------------------------------------------


def start_py_spy(pid: int, out: Path, rate: int) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    cmd = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        str(out),
        "--nonblocking",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # let it attach
    return proc


def stop_py_spy(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def summarize_collapsed(path: Path, top: int = 15) -> list[str]:
    """Top functions by self and by inclusive samples from py-spy's raw (collapsed) output.

    Samples are summed per function (all its lines together); "self" is where the thread was,
    "inclusive" counts a function once per sample it appears in (callees included).
    """
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        self_counts[frames[-1]] += count
        for f in set(frames):
            incl_counts[f] += count
    if not total:
        return ["(no samples)"]
    lines = [f"{total} samples (busy time only)", "self time:"]
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in self_counts.most_common(top)]
    lines.append("inclusive time:")
    lines += [
        f"  {100 * c / total:5.1f}%  {f}"
        for f, c in incl_counts.most_common(top + 20)
        if not f.startswith(_ROOT_FRAMES)  # main(), the event loop: in (nearly) every sample
    ][:top]
    return lines


_ROOT_FRAMES = (
    "<module> ",
    "_run_code ",
    "_run_module_as_main ",
    "main (cli",
    "_broker ",
    "run_broker ",
    "run (",
    "Runner.run ",
)


def _short(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (pkg/file.py)``: one entry per function."""
    name, _, loc = frame.partition(" (")
    path = loc.rstrip(")").rpartition(":")[0] or loc.rstrip(")")
    parts = Path(path).parts
    ours = "/work/" in path or "headwater" in path
    short = "/".join(parts[-2:]) if ours else (parts[-1] if parts else path)
    return f"{name} ({short})"


# -- main -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> Results:
    BrokerProcess = _load_broker_process()
    results = Results()
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-"))
    records_file = tmp / "records.txt"
    write_records_file(records_file, args.records, args.record_size)
    overrides = ["num.partitions=1", "auto.create.topics.enable=false"] + [f"{o}" for o in args.set]
    broker = BrokerProcess(tmp / "data", *overrides, log_file=tmp / "broker.log")
    broker.start()
    pid = broker.proc.pid
    sampler = RssSampler(pid)
    sampler.start()
    print(f"broker pid {pid} on {broker.bootstrap}; log dir {tmp / 'data'}", file=sys.stderr)
    try:
        for round_no in range(args.repeat if args.records else 0):
            for partitions in args.partitions:
                topic = f"bench-p{partitions}-r{round_no}"
                create_topic(broker.bootstrap, topic, partitions)

                def produce(topic: str = topic, partitions: int = partitions) -> tuple[bool, str]:
                    kcat_produce(
                        broker.bootstrap, topic, partitions, records_file, args.producers, args.per_partition
                    )
                    stored = sum(end_offsets(broker.bootstrap, topic, partitions))
                    return stored == args.records, f"stored {stored}"

                p = _timed(pid, f"produce {partitions}p", args.records, args.record_size, produce)
                results.phases[p.name].append(p)
                line = f"round {round_no}: {p.name} {p.rate:,.0f} rec/s ({p.note})"
                parallel = args.consumers if partitions == 1 else partitions
                for consumers in sorted({1, parallel}):

                    def consume(
                        topic: str = topic, partitions: int = partitions, consumers: int = consumers
                    ) -> tuple[bool, str]:
                        counts = end_offsets(broker.bootstrap, topic, partitions)
                        got = kcat_consume_count(broker.bootstrap, topic, counts, consumers)
                        return got == args.records, f"read {got}"

                    c = _timed(
                        pid, f"consume {partitions}p x{consumers}", args.records, args.record_size, consume
                    )
                    results.phases[c.name].append(c)
                    line += f"; {c.name} {c.rate:,.0f} rec/s ({c.note})"
                print(line, file=sys.stderr)
        lat_runs = (
            [lg for lg in args.linger_ms for _ in range(args.latency_repeat)]
            if args.latency_seconds > 0
            else []
        )
        for run_no, linger_ms in enumerate(lat_runs):
            if QUIET_WAIT:
                wait_for_quiet(QUIET_WAIT)
            cpu0, sys0, t0 = _cpu_seconds(pid), _system_busy(), time.perf_counter()
            lat = run_latency(
                broker.bootstrap,
                args.rate,
                args.latency_seconds,
                args.record_size,
                args.warmup,
                linger_ms,
                topic=f"bench-latency-{run_no}",
            )
            elapsed = time.perf_counter() - t0
            lat["broker_cores"] = (_cpu_seconds(pid) - cpu0) / elapsed
            lat["all_cores"] = (_system_busy() - sys0) / elapsed
            lat["other_cores"] = max(
                0.0, lat["all_cores"] - lat["broker_cores"] - lat["producer_cores"] - lat["consumer_cores"]
            )
            results.latency.append(lat)
            print(
                f"latency linger.ms={linger_ms:g}: p50 {lat['p50']:.2f} ms p99 {lat['p99']:.2f} ms",
                file=sys.stderr,
            )
        if args.profile:
            out_dir = Path(args.profile)
            out_dir.mkdir(parents=True, exist_ok=True)
            for partitions in args.partitions:
                topic = f"bench-profile-p{partitions}"
                create_topic(broker.bootstrap, topic, partitions)
                raw = out_dir / f"produce-{partitions}p.txt"
                spy = start_py_spy(pid, raw, args.profile_rate)
                for _ in range(args.profile_rounds):
                    kcat_produce(
                        broker.bootstrap, topic, partitions, records_file, args.producers, args.per_partition
                    )
                stop_py_spy(spy)
                results.profiles[f"produce {partitions}p"] = (
                    summarize_collapsed(raw) if raw.exists() else ["(py-spy wrote nothing)"]
                )
                raw = out_dir / f"consume-{partitions}p.txt"
                consumers = args.consumers if partitions == 1 else partitions
                spy = start_py_spy(pid, raw, args.profile_rate)
                counts = end_offsets(broker.bootstrap, topic, partitions)
                for _ in range(args.profile_rounds):
                    kcat_consume_count(broker.bootstrap, topic, counts, consumers)
                stop_py_spy(spy)
                results.profiles[f"consume {partitions}p"] = (
                    summarize_collapsed(raw) if raw.exists() else ["(py-spy wrote nothing)"]
                )
            if args.latency_seconds > 0:
                linger_ms = args.linger_ms[0]
                raw = out_dir / f"latency-linger{linger_ms:g}.txt"
                spy = start_py_spy(pid, raw, args.profile_rate)
                run_latency(
                    broker.bootstrap,
                    args.rate,
                    min(args.latency_seconds, 5.0),
                    args.record_size,
                    0.0,
                    linger_ms,
                    topic=f"bench-profile-latency-{linger_ms:g}ms",
                )
                stop_py_spy(spy)
                results.profiles[f"latency run (linger.ms={linger_ms:g}, small requests)"] = (
                    summarize_collapsed(raw) if raw.exists() else ["(py-spy wrote nothing)"]
                )
        results.hwm_kb = _status_kb(pid, "VmHWM")
    finally:
        try:
            sampler.stop()
            results.peak_rss_kb = sampler.peak_kb
        finally:
            try:
                broker.stop(30)
            except Exception:
                broker.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}", file=sys.stderr)
    return results


def _versions() -> str:
    out = []
    try:
        import confluent_kafka

        out.append(
            f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
        )
    except ImportError:
        pass
    kcat_v = subprocess.run([KCAT, "-V"], capture_output=True, text=True)
    for line in (kcat_v.stdout + kcat_v.stderr).splitlines():
        if line.startswith("Version"):
            words = line.replace("(", " ").replace(")", " ").split()
            librdkafka = words[words.index("librdkafka") + 1] if "librdkafka" in words else "?"
            out.append(f"kcat {words[1]} (librdkafka {librdkafka})")
    return "; ".join(out)


def print_report(args: argparse.Namespace, r: Results) -> None:
    print()
    print(
        f"Headwater broker benchmark — {time.strftime('%Y-%m-%d %H:%M')} — {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"clients: {_versions()}; load average at start {args.loadavg}")
    print(
        f"{args.records:,} records of {args.record_size} B, kcat linger.ms=5 batch.size=1048576 acks=1; "
        f"{args.repeat} round(s), median shown (best in brackets)"
    )
    producers = f"{args.producers} kcat" + (
        " per partition" if args.per_partition else ", random partitioner"
    )
    print(
        f"produce: 1p {args.producers} kcat; 6p {producers}. "
        "consume (kcat -f '\\n', queued.min.messages=1000000): "
        f"xN = N kcat processes at once (1p: offset ranges, 6p: one per partition)"
    )
    print()
    print(
        f"{'phase':<14} {'records/s':>12} {'(best)':>12} {'MB/s':>8} {'seconds':>8} {'broker CPU':>11} "
        f"{'client CPU':>11} {'other CPU':>10}  check"
    )
    for name, runs in r.phases.items():
        med = sorted(runs, key=lambda p: p.seconds)[len(runs) // 2]
        best = min(runs, key=lambda p: p.seconds)
        check = "ok" if all(p.ok for p in runs) else "; ".join(p.note for p in runs if not p.ok)
        print(
            f"{name:<14} {med.rate:>12,.0f} {best.rate:>12,.0f} {med.mb_per_s:>8.1f} {med.seconds:>8.2f} "
            f"{med.broker_cpu:>10.2f}s {med.client_cpu:>10.2f}s {med.other_cpu:>9.2f}s  {check}"
        )
    if r.latency:
        print()
        print(
            f"latency: confluent-kafka producer process at {args.rate:,} msg/s for "
            f"{args.latency_seconds:g} s (acks=1), consumer process (fetch.wait.max.ms=100); "
            f"first {args.warmup:g} s not counted"
        )
        print(
            f"{'linger.ms':>9} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7} {'mean ms':>7} "
            f"{'produce req/s':>13}   cores: {'broker':>6} {'producer':>8} {'consumer':>8} {'other':>6}"
        )
        for lat in r.latency:
            print(
                f"{lat['linger_ms']:>9g} {lat['p50']:>7.2f} {lat['p99']:>7.2f} {lat['p999']:>8.2f} "
                f"{lat['max']:>7.2f} {lat['mean']:>7.2f} {lat['requests_per_s']:>13,.0f}          "
                f"{lat['broker_cores']:>6.2f} {lat['producer_cores']:>8.2f} {lat['consumer_cores']:>8.2f} "
                f"{lat['other_cores']:>6.2f}"
            )
    print()
    print(f"broker peak RSS: {r.peak_rss_kb / 1024:.1f} MiB polled VmRSS, {r.hwm_kb / 1024:.1f} MiB VmHWM")
    print()
    targets = []
    for name, runs in r.phases.items():
        med = sorted(runs, key=lambda p: p.seconds)[len(runs) // 2]
        goal = 1.2e6 if name.startswith("produce") else 1.5e6
        targets.append(f"{name} {'met' if med.rate >= goal else 'MISSED'} (>= {goal / 1e6:.1f}M rec/s)")
    for linger_ms in dict.fromkeys(lat["linger_ms"] for lat in r.latency):
        p99 = statistics.median(lat["p99"] for lat in r.latency if lat["linger_ms"] == linger_ms)
        targets.append(
            f"p99 at linger.ms={linger_ms:g} {'met' if p99 <= 3 else 'MISSED'} (<= 3 ms, median run)"
        )
    targets.append(f"RSS {'met' if max(r.hwm_kb, r.peak_rss_kb) <= 200 * 1024 else 'MISSED'} (<= 200 MB)")
    print("targets: " + "; ".join(targets))
    for name, lines in r.profiles.items():
        print()
        print(f"py-spy profile of the broker during {name}:")
        for line in lines:
            print("  " + line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100k records, 3 s latency run")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 6])
    parser.add_argument("--repeat", type=int, default=3, help="throughput rounds (median reported)")
    parser.add_argument("--producers", type=int, default=1, help="kcat producer processes per topic")
    parser.add_argument(
        "--per-partition", action="store_true", help="one kcat producer per partition (6p topic)"
    )
    parser.add_argument(
        "--consumers",
        type=int,
        default=2,
        help="parallel kcat consumers for the 1-partition topic (offset ranges); "
        "the 6-partition topic gets one per partition",
    )
    parser.add_argument("--rate", type=int, default=10_000, help="latency run: messages per second")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="0 skips the latency run")
    parser.add_argument(
        "--linger-ms",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[0.0, 1.0],
        help="latency runs: the producer's linger.ms, one run per value (default 0,1)",
    )
    parser.add_argument("--latency-repeat", type=int, default=1, help="latency runs per linger.ms value")
    parser.add_argument("--warmup", type=float, default=1.0, help="latency run: seconds not counted")
    parser.add_argument("--profile", metavar="DIR", help="also profile the broker with py-spy (untimed runs)")
    parser.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--profile-rounds", type=int, default=3, help="kcat runs per profiled phase")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="broker property override"
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=60,
        metavar="SECONDS",
        help="before each timed phase wait up to this long for the machine to be idle (0: don't)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp dir (records file, log, broker log)"
    )
    # internal: the latency run's child processes
    parser.add_argument("--role", choices=["latency-consumer", "latency-producer"], help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=60, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role in ("latency-consumer", "latency-producer"):
        # the measuring clients keep 100k samples and little else: no collector pauses of their own in the figures
        gc.disable()
    if args.role == "latency-consumer":
        latency_consumer(args.bootstrap, args.topic, args.records, args.timeout)
        return 0
    if args.role == "latency-producer":
        latency_producer(
            args.bootstrap, args.topic, args.rate, args.seconds, args.record_size, args.linger_ms[0]
        )
        return 0
    global QUIET_WAIT
    QUIET_WAIT = args.wait_quiet
    args.loadavg = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if args.quick:
        args.records = 100_000
        args.latency_seconds = min(args.latency_seconds, 3.0)
    print_report(args, run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
