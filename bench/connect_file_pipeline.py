"""Connect file pipeline benchmark: FileStreamSource -> topic -> FileStreamSink (prints a table; not a test).

N lines of ``--line-bytes`` characters (plus ``\\n``) are written to an input file first; then the
source and sink connectors are created over REST (POST /connectors) and the clock runs from the
first POST until the output file holds all N lines (its size is polled every 5 ms; every line has
the same length, so size / line length is the line count). The output is compared byte for byte
with the input afterwards. Records/s are counted at the output file; MB/s is output bytes per
second (10^6 B).

Modes (``--mode``, a comma list; default ``up,split``):

- ``up``: one ``headwater up`` process (broker + worker + REST in one process and one event loop,
  as users run it; its defaults: StringConverter for key and value, offset.flush.interval.ms=5000);
- ``split``: ``headwater broker`` in one process and ``headwater connect standalone`` in another
  (a temp worker.properties with the same converters and flush interval, REST on port 0), so the
  broker and the worker can use both cores;
- ``split3`` (not in the default): a broker and two standalone workers, one running the source and
  one the sink, so the two tasks run on different cores.

For each mode, fresh processes (new data dir) also measure each side alone:

- ``source-only``: lines -> topic; timed from the POST until the topic's end offset (ListOffsets via
  confluent-kafka ``get_watermark_offsets``, polled every 20 ms) reaches N;
- ``sink-only``: the topic the source-only phase filled (the source connector is deleted first) ->
  a new file, timed like the pipeline.

Reported per phase: records/s end to end; the rate without the longest stall; the steady rate
(output between 10 % and 90 % of N); the time to the first output; the longest stall, the longest
time the output did not grow between the first output and the last (FileStreamSink flushes each
put to the file, so a long stall means the pipeline itself paused); the CPU seconds of each process
(utime + stime, all threads)
during the phase and their sum per record; the minor page faults per record (fresh memory pages, mostly:
buffers the C library took from the kernel again); the busiest process's share of one core; "other load",
the share of the machine's cores that processes outside this benchmark used meanwhile (the machine
may be shared: compare runs with low other load); and each process's peak RSS (VmHWM, reset through
/proc/PID/clear_refs before the phase).

``--converters string,json`` runs each pipeline once per converter set, the order alternating per
repeat (``json``: JsonConverter with ``schemas.enable=true`` for keys and values of both connectors;
``string``: the worker's StringConverter), and prints each set's rate and CPU per record against the
first's (the anchor, measured in the same minutes).

``--source-set``/``--sink-set KEY=VALUE`` add connector settings (e.g.
``producer.override.linger.ms=0``). With ``--profile DIR`` extra, untimed runs are recorded with
py-spy (``--format raw --function --threads``, attached to every process of the mode for the
pipeline, to the worker for each side) and the hottest functions (self and inclusive, with the
share of each thread) are printed.

    .venv/bin/python bench/connect_file_pipeline.py                        # 1M lines, up and split
    .venv/bin/python bench/connect_file_pipeline.py --mode up --lines 200000 --phases pipeline
    .venv/bin/python bench/connect_file_pipeline.py --mode split3 --repeat 3
    .venv/bin/python bench/connect_file_pipeline.py --mode up --phases pipeline --converters string,json --repeat 4
    .venv/bin/python bench/connect_file_pipeline.py --profile /tmp/hw-pipeline-profile
"""

from __future__ import annotations

import argparse
import collections
import filecmp
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
FLUSH_INTERVAL_MS = 5000  # what ``headwater up`` uses; the split worker gets the same

_UP_READY = re.compile(r"Headwater is up: Kafka bootstrap (\S+), Connect REST API (http://\S+/)")
_BROKER_READY = re.compile(r"listening on PLAINTEXT://([^:\s]+:\d+)")
_WORKER_READY = re.compile(r"REST API at (http://\S+/)")


# -- processes ----------------------------------------------------------------------------------


class Proc:
    """A headwater subprocess logging to a file; ``start`` waits for a ready line."""

    def __init__(self, name: str, args: list[str], log_file: Path) -> None:
        self.name, self.args, self.log_file = name, args, log_file
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, ready: re.Pattern[str], timeout: float = 60) -> re.Match[str]:
        out = open(self.log_file, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "headwater", *self.args], cwd=ROOT,
                                     stdout=out, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = ready.search(self.log_file.read_text(errors="replace"))
            if m:
                return m
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.name} did not start within {timeout}s:\n{self.log_text()}")

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, all threads


def minor_faults(pid: int) -> int:
    """Page faults served without I/O (mostly fresh pages of memory the process was given), all threads."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False when not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def system_busy() -> float:
    """CPU seconds all processes spent busy since boot (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def wait_for_quiet(max_wait: float, threshold: float = 0.1, window: float = 1.0) -> float:
    """Wait (up to ``max_wait`` s) until the machine is mostly idle; returns the last busy share seen.

    This machine may be shared: other processes' load is measured per phase and shown as "other load".
    """
    cores = os.cpu_count() or 1
    deadline = time.monotonic() + max_wait
    while True:
        b0 = system_busy()
        time.sleep(window)
        share = (system_busy() - b0) / (window * cores)
        if share < threshold or time.monotonic() > deadline:
            return share


# -- REST and Kafka -------------------------------------------------------------------------------


def rest(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def create_connector(rest_url: str, name: str, config: dict[str, str]) -> None:
    status, body = rest(rest_url + "connectors", "POST", {"name": name, "config": config})
    if status != 201:
        raise RuntimeError(f"POST /connectors {name}: HTTP {status}: {body}")


def delete_connector(rest_url: str, name: str) -> None:
    status, body = rest(rest_url + f"connectors/{name}", "DELETE")
    if status not in (200, 204):
        raise RuntimeError(f"DELETE /connectors/{name}: HTTP {status}: {body}")


SOURCE_EXTRA: dict[str, str] = {}  # --source-set
SINK_EXTRA: dict[str, str] = {}  # --sink-set
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
# --converters: the key and value converters of both connectors, by name (string: the worker's defaults)
CONVERTER_SETS: dict[str, dict[str, str]] = {
    "string": {},
    "json": {"key.converter": JSON_CONVERTER, "key.converter.schemas.enable": "true",
             "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"},
}
CONVERTERS: dict[str, str] = {}  # the set of the run under way


def source_config(path: Path, topic: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(path), "topic": topic, **CONVERTERS, **SOURCE_EXTRA}


def sink_config(path: Path, topic: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(path), "topics": topic, **CONVERTERS, **SINK_EXTRA}


class EndOffsets:
    """The end offset of partition 0 of a topic (ListOffsets, through librdkafka)."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks",
                                  "enable.auto.commit": False})

    def get(self, topic: str) -> int:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            return self.consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)[1]
        except KafkaException:
            return 0  # not created yet

    def close(self) -> None:
        self.consumer.close()


# -- input ----------------------------------------------------------------------------------------


def write_input(path: Path, lines: int, line_bytes: int) -> None:
    """``lines`` lines of exactly ``line_bytes`` ASCII characters (a sequence number, then filler) and \\n."""
    width = min(12, line_bytes)
    filler = b"x" * max(0, line_bytes - width)
    chunk = 100_000
    with open(path, "wb") as f:
        for start in range(0, lines, chunk):
            end = min(lines, start + chunk)
            f.write(b"".join(b"%0*d%s\n" % (width, i % 10**width, filler) for i in range(start, end)))


# -- measuring --------------------------------------------------------------------------------------


@dataclass
class Phase:
    mode: str
    name: str
    records: int
    line_bytes: int
    seconds: float = 0.0
    first: float = 0.0  # until the first output
    steady_seconds: float = 0.0  # between 10 % and 90 % of the records
    longest_stall: float | None = None
    cpu: dict[str, float] = field(default_factory=dict)  # process name -> CPU seconds in the phase
    peak_rss_kb: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)  # process name -> minor page faults in the phase
    system_cpu: float = 0.0  # busy CPU seconds of the whole machine in the phase
    bench_cpu: float = 0.0  # this script's own CPU seconds (polling)
    verified: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def steady_rate(self) -> float:
        return 0.8 * self.records / self.steady_seconds if self.steady_seconds else 0.0

    @property
    def rate_without_stall(self) -> float:
        busy = self.seconds - (self.longest_stall or 0.0)
        return self.records / busy if busy > 0 else 0.0

    @property
    def cpu_us_per_record(self) -> float:
        return 1e6 * sum(self.cpu.values()) / self.records

    @property
    def faults_per_record(self) -> float:
        return sum(self.faults.values()) / self.records

    @property
    def other_load(self) -> float:
        """Busy share of the machine's cores used by processes outside this benchmark."""
        other = self.system_cpu - sum(self.cpu.values()) - self.bench_cpu
        return max(0.0, other) / (self.seconds * (os.cpu_count() or 1)) if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records * (self.line_bytes + 1) / self.seconds / 1e6 if self.seconds else 0.0


class Meter:
    """CPU and peak-RSS accounting of a set of processes over one phase, and what everything else used."""

    def __init__(self, procs: dict[str, Proc]) -> None:
        self.procs = procs

    def __enter__(self) -> Meter:
        self.cpu0 = {n: cpu_seconds(p.pid) for n, p in self.procs.items()}
        self.faults0 = {n: minor_faults(p.pid) for n, p in self.procs.items()}
        self.self0 = cpu_seconds(os.getpid())
        for p in self.procs.values():
            reset_peak_rss(p.pid)
        self.busy0 = system_busy()
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def finish(self, phase: Phase) -> None:
        phase.system_cpu = system_busy() - self.busy0
        phase.bench_cpu = cpu_seconds(os.getpid()) - self.self0
        for n, p in self.procs.items():
            phase.cpu[n] = cpu_seconds(p.pid) - self.cpu0[n]
            phase.faults[n] = minor_faults(p.pid) - self.faults0[n]
            phase.peak_rss_kb[n] = status_kb(p.pid, "VmHWM")


def wait_for_progress(count: Callable[[], int], total: int, t0: float, timeout: float, interval: float,
                      what: str) -> tuple[float, float, float, float, float | None]:
    """Poll ``count`` until it reaches ``total``.

    Returns (done, first, t10, t90, longest_stall), seconds after ``t0``: ``first`` when the count
    first moved, ``longest_stall`` the longest time it stood still between its first and last move.
    """
    first = t10 = t90 = None
    last_value, last_change = 0, t0
    longest_stall: float | None = None
    deadline = t0 + timeout
    while True:
        value = count()
        now = time.monotonic()  # after count(): the first ListOffsets may take a while
        if value != last_value:
            if first is None:
                first = now
            else:
                longest_stall = max(longest_stall or 0.0, now - last_change)
            if value >= total:
                t10 = t10 if t10 is not None else now
                t90 = t90 if t90 is not None else now
                return now - t0, first - t0, t10 - t0, t90 - t0, longest_stall
            last_value, last_change = value, now
            if t10 is None and value >= total * 0.1:
                t10 = now
            if t90 is None and value >= total * 0.9:
                t90 = now
        if now > deadline:
            raise TimeoutError(f"{what}: {value} of {total} after {timeout:.0f}s")
        time.sleep(interval)


def file_lines(path: Path, line_len: int) -> Callable[[], int]:
    def count() -> int:
        try:
            return os.stat(path).st_size // line_len
        except FileNotFoundError:
            return 0
    return count


# -- one deployment (up or split) ------------------------------------------------------------------


class Deployment:
    """The processes of one mode on a fresh data dir.

    ``procs['worker']`` runs the source connector and, except in ``split3``, the sink connector too;
    in ``split3`` a second standalone worker, ``procs['sink-worker']``, runs the sink.
    """

    def __init__(self, mode: str, work: Path, tag: str) -> None:
        self.mode, self.dir = mode, work / f"{mode}-{tag}"
        self.dir.mkdir(parents=True)
        self.procs: dict[str, Proc] = {}
        self.bootstrap = self.rest_url = self.sink_rest_url = ""

    def start(self) -> Deployment:
        try:
            if self.mode == "up":
                up = Proc("worker", ["up", "--data-dir", str(self.dir / "data"), "--kafka-listener", "127.0.0.1:0",
                                     "--rest-listener", "127.0.0.1:0"], self.dir / "up.log")
                self.procs["worker"] = up  # broker + worker in one process
                m = up.start(_UP_READY)
                self.bootstrap, self.rest_url = m.group(1), m.group(2)
            else:
                broker = Proc("broker", ["broker", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
                                         "--set", f"log.dirs={self.dir / 'data' / 'broker'}",
                                         "--set", "group.initial.rebalance.delay.ms=0"], self.dir / "broker.log")
                self.procs["broker"] = broker
                self.bootstrap = broker.start(_BROKER_READY).group(1)
                self.rest_url = self._standalone("worker")
            self.sink_rest_url = self._standalone("sink-worker") if self.mode == "split3" else self.rest_url
        except BaseException:
            self.stop()
            raise
        return self

    def _standalone(self, name: str) -> str:
        props = self.dir / f"{name}.properties"
        props.write_text("\n".join([
            f"bootstrap.servers={self.bootstrap}",
            "listeners=http://127.0.0.1:0",
            f"offset.storage.file.filename={self.dir / 'data' / f'{name}.offsets'}",
            f"offset.flush.interval.ms={FLUSH_INTERVAL_MS}",
            "plugin.path=plugins",
            f"key.converter={STRING_CONVERTER}",
            f"value.converter={STRING_CONVERTER}",
        ]) + "\n")
        worker = self.procs[name] = Proc(name, ["connect", "standalone", str(props)], self.dir / f"{name}.log")
        return worker.start(_WORKER_READY).group(1)

    def stop(self) -> None:
        for name in ("sink-worker", "worker", "broker"):
            if name in self.procs:
                self.procs[name].stop()

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ``--profile-lines``: samples by line (time in C code shows on the Python line that called it), not by function
PROFILE_DETAIL: list[str] = ["--function"]


class Profiler:
    """py-spy attached to some processes for one phase (raw collapsed stacks, per thread)."""

    def __init__(self, out_dir: Path | None, label: str, procs: dict[str, Proc], rate: int, seconds: float) -> None:
        self.spies: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
        if out_dir is None:
            return
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        for name, proc in procs.items():
            out = out_dir / f"{label}-{name}.txt"
            cmd = [py_spy, "record", "--pid", str(proc.pid), "--rate", str(rate), "--format", "raw",
                   *PROFILE_DETAIL, "--threads", "--nonblocking", "--duration", str(int(seconds)),
                   "--output", str(out)]
            self.spies.append((name, out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
        time.sleep(1.0)  # let py-spy attach before the clock starts

    def finish(self) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for name, path, spy in self.spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)
            try:
                spy.wait(60)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
            if path.exists():
                out[name] = path
            else:
                err = spy.stderr.read().decode(errors="replace") if spy.stderr else ""
                print(f"  py-spy wrote nothing for {name}: {err.strip()[-300:]}", file=sys.stderr)
        return out


def run_pipeline(mode: str, work: Path, infile: Path, args: argparse.Namespace, tag: str = "pipeline",
                 profile_dir: Path | None = None) -> tuple[Phase, dict[str, Path]]:
    n, lb = args.lines, args.line_bytes
    phase = Phase(mode, "pipeline", n, lb)
    with Deployment(mode, work, tag) as dep:
        out = dep.dir / "output.txt"
        wait_for_quiet(args.quiet_wait)
        spy = Profiler(profile_dir, f"{mode}-pipeline", dep.procs, args.profile_rate, args.profile_seconds)
        with Meter(dep.procs) as meter:
            t0 = time.monotonic()
            create_connector(dep.rest_url, "bench-source", source_config(infile, "bench-lines"))
            create_connector(dep.sink_rest_url, "bench-sink", sink_config(out, "bench-lines"))
            done, phase.first, t10, t90, phase.longest_stall = wait_for_progress(
                file_lines(out, lb + 1), n, t0, args.timeout, 0.005, f"{mode} pipeline output lines")
            meter.finish(phase)
        profiles = spy.finish()
        phase.seconds, phase.steady_seconds = done, t90 - t10
        phase.verified = "identical" if filecmp.cmp(infile, out, shallow=False) else "DIFFERS"
    return phase, profiles


def run_sides(mode: str, work: Path, infile: Path, args: argparse.Namespace, tag: str = "sides",
              profile_dir: Path | None = None) -> tuple[list[Phase], dict[str, Path]]:
    n, lb = args.lines, args.line_bytes
    src = Phase(mode, "source-only", n, lb)
    snk = Phase(mode, "sink-only", n, lb)
    profiles: dict[str, Path] = {}
    with Deployment(mode, work, tag) as dep:
        offsets = EndOffsets(dep.bootstrap)
        try:
            offsets.get("bench-lines")  # connect now, not inside the timed phase (the topic does not exist yet)
            wait_for_quiet(args.quiet_wait)
            spy = Profiler(profile_dir, f"{mode}-source-only", {"worker": dep.procs["worker"]}, args.profile_rate,
                           args.profile_seconds)
            with Meter(dep.procs) as meter:
                t0 = time.monotonic()
                create_connector(dep.rest_url, "bench-source", source_config(infile, "bench-lines"))
                done, src.first, t10, t90, _ = wait_for_progress(
                    lambda: offsets.get("bench-lines"), n, t0, args.timeout, 0.02, f"{mode} source-only end offset")
                meter.finish(src)
            profiles.update({f"source-only/{k}": v for k, v in spy.finish().items()})
            src.seconds, src.steady_seconds = done, t90 - t10
            src.verified = "end offset = N"
        finally:
            offsets.close()
        delete_connector(dep.rest_url, "bench-source")
        out = dep.dir / "output.txt"
        wait_for_quiet(args.quiet_wait)
        sink_worker = "sink-worker" if mode == "split3" else "worker"
        spy = Profiler(profile_dir, f"{mode}-sink-only", {sink_worker: dep.procs[sink_worker]}, args.profile_rate,
                       args.profile_seconds)
        with Meter(dep.procs) as meter:
            t0 = time.monotonic()
            create_connector(dep.sink_rest_url, "bench-sink", sink_config(out, "bench-lines"))
            done, snk.first, t10, t90, snk.longest_stall = wait_for_progress(
                file_lines(out, lb + 1), n, t0, args.timeout, 0.005, f"{mode} sink-only output lines")
            meter.finish(snk)
        profiles.update({f"sink-only/{k}": v for k, v in spy.finish().items()})
        snk.seconds, snk.steady_seconds = done, t90 - t10
        snk.verified = "identical" if filecmp.cmp(infile, out, shallow=False) else "DIFFERS"
    return [src, snk], profiles


# -- profiles ----------------------------------------------------------------------------------------


def _short(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (pkg/file.py:123)``."""
    name, _, loc = frame.partition(" (")
    loc = loc.rstrip(")")
    path, _, lineno = loc.rpartition(":")
    parts = Path(path).parts
    if "site-packages" in parts:
        short = "/".join(parts[parts.index("site-packages") + 1:])
    elif "/work/" in path or "headwater" in path:
        short = "/".join(parts[-2:])
    else:
        short = parts[-1] if parts else path
    return f"{name} ({short}:{lineno})" if lineno else name


def _thread_label(frame: str) -> str:
    # py-spy --threads puts e.g. "thread (0x7f..)" or "process 123:\"...\"" frames first
    return re.sub(r"\(0x[0-9a-f]+\)", "", frame).strip()


def summarize_collapsed(path: Path, top: int = 20) -> list[str]:
    """Busy samples per thread, then the top functions by self and by inclusive samples."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = stack.split(";")
        i = 0
        while i < len(frames) and (frames[i].startswith("process ") or frames[i].startswith("thread ")):
            i += 1
        threads[_thread_label(frames[i - 1]) if i else "?"] += count
        frames = [_short(f) for f in frames[i:]] or ["?"]
        total += count
        self_counts[frames[-1]] += count
        for f in set(frames):
            incl_counts[f] += count
    if not total:
        return ["(no samples)"]
    lines = [f"{total} busy samples; per thread: "
             + ", ".join(f"{t} {100 * c / total:.0f}%" for t, c in threads.most_common(6))]
    lines.append("self:")
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in self_counts.most_common(top)]
    lines.append("inclusive:")
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in incl_counts.most_common(top + 10)]
    return lines


# -- report -------------------------------------------------------------------------------------------


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    total_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            total_kb = int(line.split()[1])
    return (f"{os.cpu_count()} cores ({model or platform.processor()}), {total_kb / 1048576:.0f} GiB RAM, "
            f"Linux {platform.release()}, Python {platform.python_version()}")


def table(phases: list[Phase]) -> list[str]:
    head = ["mode", "phase", "records", "seconds", "rec/s", "MB/s", "rec/s w/o longest stall", "steady rec/s",
            "first output s", "longest stall s", "CPU s per process", "CPU us/rec", "page faults/rec",
            "busiest process core %", "other load %", "peak RSS MiB", "check"]
    rows = [head]
    for p in phases:
        cpu = ", ".join(f"{k} {v:.1f}" for k, v in p.cpu.items())
        rss = ", ".join(f"{k} {v / 1024:.0f}" for k, v in p.peak_rss_kb.items())
        busiest = max(p.cpu.values()) / p.seconds if p.seconds and p.cpu else 0.0
        rows.append([
            p.mode, p.name, f"{p.records:,}", f"{p.seconds:.2f}", f"{p.rate:,.0f}", f"{p.mb_per_s:.1f}",
            f"{p.rate_without_stall:,.0f}", f"{p.steady_rate:,.0f}" if p.steady_rate else "-", f"{p.first:.2f}",
            "-" if p.longest_stall is None else f"{p.longest_stall:.2f}", cpu, f"{p.cpu_us_per_record:.1f}",
            f"{p.faults_per_record:.3f}", f"{100 * busiest:.0f}", f"{100 * p.other_load:.0f}", rss, p.verified])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000, help="records (default 1,000,000)")
    parser.add_argument("--line-bytes", type=int, default=100, help="characters per line, without \\n (default 100)")
    parser.add_argument("--mode", default="up,split",
                        help="comma list of up (one `headwater up` process), split (broker + worker processes), "
                             "split3 (broker + a source worker + a sink worker), or both (= up,split; the default)")
    parser.add_argument("--phases", default="pipeline,sides",
                        help="comma list of pipeline and sides (source-only + sink-only); default both")
    parser.add_argument("--repeat", type=int, default=1, help="pipeline runs per mode (the table shows each)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per phase before giving up")
    parser.add_argument("--profile", metavar="DIR", help="also record py-spy profiles (extra, untimed runs)")
    parser.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second (default 200)")
    parser.add_argument("--profile-lines", action="store_true",
                        help="profile samples by line, not by function (C code's time shows on the line calling it)")
    parser.add_argument("--profile-seconds", type=float, default=10, help="py-spy duration per phase (default 10)")
    parser.add_argument("--quiet-wait", type=float, default=60,
                        help="before each phase, wait up to this many seconds for the machine to be idle")
    parser.add_argument("--source-set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra source connector config, e.g. batch.size=10000 or producer.override.linger.ms=0")
    parser.add_argument("--sink-set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sink connector config, e.g. consumer.override.max.poll.records=20000")
    parser.add_argument("--converters", default="",
                        help="comma list of string and json (JsonConverter with schemas.enable=true for keys and "
                             "values on both connectors): each pipeline run is made once per set, the order "
                             "alternating per repeat, and the ratio of each to the first is printed (default: the "
                             "worker's converters only)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    args = parser.parse_args()
    if args.line_bytes < 1:
        parser.error("--line-bytes must be >= 1")
    if args.profile_lines:
        PROFILE_DETAIL.clear()
    modes = ["up", "split"] if args.mode == "both" else [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes or not set(modes) <= {"up", "split", "split3"}:
        parser.error("--mode takes up, split and/or split3")
    for extra, pairs in ((SOURCE_EXTRA, args.source_set), (SINK_EXTRA, args.sink_set)):
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                parser.error(f"expected KEY=VALUE, got {pair!r}")
            extra[key.strip()] = value.strip()
    converter_sets = [c.strip() for c in args.converters.split(",") if c.strip()]
    if not set(converter_sets) <= set(CONVERTER_SETS):
        parser.error(f"--converters takes {', '.join(CONVERTER_SETS)}")
    phases_wanted = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not phases_wanted <= {"pipeline", "sides"}:
        parser.error("--phases takes pipeline and/or sides")

    work = Path(tempfile.mkdtemp(prefix="hw-pipeline-"))
    infile = work / "input.txt"
    t = time.monotonic()
    write_input(infile, args.lines, args.line_bytes)
    print(f"{machine()}\ninput: {args.lines:,} lines x {args.line_bytes + 1} B = "
          f"{infile.stat().st_size / 1e6:.1f} MB written in {time.monotonic() - t:.1f}s ({work})", flush=True)
    phases: list[Phase] = []
    try:
        for mode in modes:
            for i in range(args.repeat if "pipeline" in phases_wanted else 0):
                sets = converter_sets or [""]
                by_set: dict[str, Phase] = {}
                for name in sets if i % 2 == 0 else sets[::-1]:
                    CONVERTERS.clear()
                    CONVERTERS.update(CONVERTER_SETS.get(name, {}))
                    phase, _ = run_pipeline(mode, work, infile, args, tag=f"pipeline{i}{name}")
                    phase.name = f"pipeline {name}" if name else "pipeline"
                    by_set[name] = phase
                    phases.append(phase)
                    print(f"  {mode} {phase.name}: {phase.rate:,.0f} rec/s ({phase.seconds:.2f}s, steady "
                          f"{phase.steady_rate:,.0f} rec/s, longest stall {phase.longest_stall or 0:.2f}s, "
                          f"CPU {phase.cpu_us_per_record:.2f} us/rec, {phase.faults_per_record:.3f} faults/rec, "
                          f"other load {100 * phase.other_load:.0f}%, "
                          f"{phase.verified})", flush=True)
                anchor = by_set[sets[0]]
                for name in sets[1:]:
                    p = by_set[name]
                    print(f"  {mode} round {i}: {name} / {sets[0]}: rate {p.rate / anchor.rate:.2f}, "
                          f"CPU per record {p.cpu_us_per_record / anchor.cpu_us_per_record:.2f}", flush=True)
            CONVERTERS.clear()
            for i in range(args.repeat if "sides" in phases_wanted else 0):
                sides, _ = run_sides(mode, work, infile, args, tag=f"sides{i}")
                phases += sides
                for p in sides:
                    print(f"  {mode} {p.name}: {p.rate:,.0f} rec/s ({p.seconds:.2f}s, steady "
                          f"{p.steady_rate:,.0f} rec/s, other load {100 * p.other_load:.0f}%)", flush=True)
        print()
        print("\n".join(table(phases)))
        if args.profile:
            prof_dir = Path(args.profile)
            prof_dir.mkdir(parents=True, exist_ok=True)
            for mode in modes:
                if "pipeline" in phases_wanted:
                    _, profiles = run_pipeline(mode, work, infile, args, tag="pipeline-profile", profile_dir=prof_dir)
                    for name, path in profiles.items():
                        print(f"\npy-spy, {mode} pipeline, {name} process ({path}):")
                        print("\n".join(summarize_collapsed(path)))
                if "sides" in phases_wanted:
                    _, profiles = run_sides(mode, work, infile, args, tag="sides-profile", profile_dir=prof_dir)
                    for name, path in profiles.items():
                        phase_name, _, proc_name = name.partition("/")
                        print(f"\npy-spy, {mode} {phase_name}, {proc_name} process ({path}):")
                        print("\n".join(summarize_collapsed(path)))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
