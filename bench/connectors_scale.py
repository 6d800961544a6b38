"""Many file connectors in one ``headwater up``: time to all RUNNING, threads, RSS, records moved (prints; not a test).

``--sources`` FileStreamSource connectors (default 500), each reading its own file of ``--lines`` lines in its own
folder (``--shared-folder``: all in one folder) into its own topic, and ``--sinks`` FileStreamSink connectors
(default 500), sink i reading source i's topic into its own file (a sink beyond the sources reads topic 0). All are
created through the REST API (POST /connectors, ``--posters`` at a time). The clock runs from the first POST until
every connector and task reports RUNNING (GET /connectors?expand=status, every 0.5 s); then until every sink file
holds its source's lines. Printed: time to all RUNNING (and FAILED tasks with the first trace line of each kind),
the process's threads (/proc/PID/status Threads; the peak while starting and the figure once idle), RSS (VmRSS idle,
VmHWM peak), the CPU the process spends once idle (share of one core), records moved, and the limits the run had:
``ulimit -n`` of the child (its soft limit is raised to the hard one before ``headwater up`` starts unless
``--keep-nofile``: the broker keeps a few descriptors per partition open, and the sink files and sockets need
their own), and fs.inotify.max_user_instances / max_user_watches.

    .venv/bin/python bench/connectors_scale.py                          # 500 sources + 500 sinks
    .venv/bin/python bench/connectors_scale.py --sources 200 --sinks 0  # the issue's 200 sources
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
_UP_READY = re.compile(r"Headwater is up: Kafka bootstrap (\S+), Connect REST API (http://\S+/)")


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def threads(pid: int) -> int:
    return status_kb(pid, "Threads")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, all threads


def inotify_limit(name: str) -> str:
    try:
        return Path(f"/proc/sys/fs/inotify/{name}").read_text().strip()
    except OSError:
        return "n/a"


def child_nofile(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return f"{soft} (hard {hard})"
    return "n/a"


def request(method: str, url: str, body: dict[str, object] | None = None, timeout: float = 60) -> object:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


class Up:
    """``headwater up`` in a fresh data dir, logging to a file."""

    def __init__(self, workdir: Path, raise_nofile: bool, sets: list[str]) -> None:
        self.log_file = workdir / "up.log"
        args = ["up", "--data-dir", str(workdir / "data"), "--kafka-listener", "127.0.0.1:0",
                "--rest-listener", "127.0.0.1:0", "--plugin-path", str(workdir / "plugins")]
        for s in sets:
            args += ["--set", s]
        out = open(self.log_file, "ab")

        def raise_soft_limit() -> None:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

        self.proc = subprocess.Popen([sys.executable, "-m", "headwater", *args], cwd=ROOT, stdout=out,
                                     stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=raise_soft_limit if raise_nofile else None)
        out.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = _UP_READY.search(self.log_file.read_text(errors="replace"))
            if m:
                self.bootstrap, self.rest = m.group(1), m.group(2).rstrip("/")
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"headwater up exited with {self.proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"headwater up did not start within 60 s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def create_topics(bootstrap: str, topics: list[str]) -> None:
    """The sources' topics in one CreateTopics request, before the clock starts (``--create-topics``)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics], request_timeout=120).values():
        future.result(120)
    print(f"created {len(topics)} topics in one CreateTopics in {time.monotonic() - started:.1f} s (not timed)")


def line_count(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="hw-connectors-scale-"))
    try:
        return _run(args, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir}")


def _run(args: argparse.Namespace, workdir: Path) -> int:
    (workdir / "plugins").mkdir()
    inputs: list[Path] = []
    for i in range(args.sources):
        folder = workdir / "in" if args.shared_folder else workdir / "in" / f"s{i:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"source-{i:04d}.txt"
        path.write_text("".join(f"source {i} line {n}\n" for n in range(args.lines)))
        inputs.append(path)
    outputs = [workdir / "out" / f"sink-{j:04d}.txt" for j in range(args.sinks)]

    up = Up(workdir, not args.keep_nofile, args.set)
    pid = up.proc.pid
    if args.create_topics and args.sources:
        create_topics(up.bootstrap, [f"scale-{i:04d}" for i in range(args.sources)])
    idle_threads, idle_rss = threads(pid), status_kb(pid, "VmRSS")
    print(f"headwater up pid {pid}: {idle_threads} threads, RSS {idle_rss / 1024:.0f} MB before any connector",
          flush=True)
    configs: list[dict[str, object]] = []
    for i, path in enumerate(inputs):
        configs.append({"name": f"source-{i:04d}", "config": {
            "connector.class": "FileStreamSource", "file": str(path), "topic": f"scale-{i:04d}"}})
    for j, path in enumerate(outputs):
        topic = f"scale-{j if j < args.sources else 0:04d}"
        configs.append({"name": f"sink-{j:04d}", "config": {
            "connector.class": "FileStreamSink", "file": str(path), "topics": topic}})
    total = len(configs)
    peak_threads = 0

    def post(body: dict[str, object]) -> str | None:
        try:
            request("POST", f"{up.rest}/connectors", body)
            return None
        except urllib.error.HTTPError as exc:
            return f"{body['name']}: HTTP {exc.code} {exc.read()[:200]!r}"
        except OSError as exc:
            return f"{body['name']}: {exc}"

    started, cpu_started = time.monotonic(), cpu_seconds(pid)
    with ThreadPoolExecutor(args.posters) as pool:
        futures = [pool.submit(post, c) for c in configs]
        while not all(f.done() for f in futures):
            peak_threads = max(peak_threads, threads(pid))
            time.sleep(0.2)
        post_errors = [e for f in futures if (e := f.result())]
    posted = time.monotonic() - started
    for e in post_errors[:5]:
        print("POST failed:", e)

    running_at: float | None = None
    running_cpu = 0.0
    states: Counter[str] = Counter()
    traces: Counter[str] = Counter()
    deadline = started + args.timeout
    while time.monotonic() < deadline:
        peak_threads = max(peak_threads, threads(pid))
        try:
            expanded = request("GET", f"{up.rest}/connectors?expand=status")
        except OSError:
            time.sleep(0.5)
            continue
        assert isinstance(expanded, dict)
        states, traces = Counter(), Counter()
        for entry in expanded.values():
            status = entry["status"]
            tasks = status.get("tasks") or []
            states[f"connector {status['connector']['state']}"] += 1
            if not tasks:
                states["no tasks yet"] += 1
            for task in tasks:
                states[f"task {task['state']}"] += 1
                if task["state"] == "FAILED":
                    lines = [ln for ln in (task.get("trace") or "").strip().splitlines() if ln.strip()]
                    traces[lines[-1][:300] if lines else "(no trace)"] += 1
        if (len(expanded) == total and states["connector RUNNING"] == total and states["task RUNNING"] == total
                and not states["no tasks yet"]):
            running_at = time.monotonic() - started
            running_cpu = cpu_seconds(pid) - cpu_started
            print(f"[progress] all RUNNING after {running_at:.1f} s", flush=True)
            break
        if states["task FAILED"] and len(expanded) == total and \
                states["task FAILED"] + states["task RUNNING"] == total and not states["no tasks yet"]:
            break  # settled with failures
        time.sleep(0.5)

    waited = time.monotonic() - started
    expected = {j: args.lines for j in range(args.sinks)}
    moved_at: float | None = None
    while args.sinks and time.monotonic() < deadline + args.move_timeout:
        peak_threads = max(peak_threads, threads(pid))
        if all(line_count(outputs[j]) >= n for j, n in expected.items()):
            moved_at = time.monotonic() - started
            print(f"[progress] records moved after {moved_at:.1f} s; idle for {args.settle:.0f} s", flush=True)
            break
        time.sleep(0.5)
    moved = sum(min(line_count(outputs[j]), n) for j, n in expected.items())
    complete = sum(1 for j, n in expected.items() if line_count(outputs[j]) >= n)
    cpu_before = cpu_seconds(pid)
    time.sleep(args.settle)  # idle: what the tasks hold and spend while waiting for more
    idle_cpu = (cpu_seconds(pid) - cpu_before) / args.settle
    end_threads, rss, hwm = threads(pid), status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM")
    peak_threads = max(peak_threads, end_threads)
    nofile = child_nofile(pid)
    up.stop()
    ok = not post_errors and running_at is not None and (not args.sinks or moved_at is not None)

    load = os.getloadavg()
    print(f"connectors: {args.sources} FileStreamSource + {args.sinks} FileStreamSink, {args.lines} lines each, "
          f"{'one folder' if args.shared_folder else 'a folder per source'}")
    print(f"limits: ulimit -n {nofile} (soft raised to hard: {'no' if args.keep_nofile else 'yes'}), "
          f"fs.inotify.max_user_instances {inotify_limit('max_user_instances')}, "
          f"max_user_watches {inotify_limit('max_user_watches')}; {os.cpu_count()} cores, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"POSTs: {total} in {posted:.1f} s ({len(post_errors)} failed)")
    if running_at is not None:
        print(f"all RUNNING after {running_at:.1f} s, the process using {running_cpu:.1f} CPU s meanwhile "
              f"({running_cpu / running_at:.0%} of a core: the rest of the time it waited for the CPU or the POSTs)")
    else:
        print(f"NOT all RUNNING after {waited:.1f} s: "
              + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
    for trace, n in traces.most_common(5):
        print(f"  {n} FAILED: {trace}")
    if args.sinks:
        print(f"records moved: {moved:,} of {sum(expected.values()):,} ({complete} of {args.sinks} sink files complete"
              + (f", all after {moved_at:.1f} s)" if moved_at is not None else ")"))
    print(f"threads: {end_threads} idle, {peak_threads} peak (before connectors: {idle_threads})")
    print(f"idle CPU: {idle_cpu:.0%} of a core over {args.settle:.0f} s once the records had moved")
    print(f"RSS: {rss / 1024:.0f} MB idle, {hwm / 1024:.0f} MB peak (before connectors: {idle_rss / 1024:.0f} MB)")
    if not ok:
        print(up.log_tail()[-1500:])
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, default=500)
    parser.add_argument("--sinks", type=int, default=500)
    parser.add_argument("--lines", type=int, default=100, help="lines per source file (default 100)")
    parser.add_argument("--shared-folder", action="store_true", help="all source files in one folder")
    parser.add_argument("--posters", type=int, default=16, help="POSTs in flight at once (default 16)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for all RUNNING (default 180)")
    parser.add_argument("--move-timeout", type=float, default=120,
                        help="further seconds to wait for the records to reach the sink files (default 120)")
    parser.add_argument("--settle", type=float, default=5,
                        help="idle seconds measured for the idle figures (default 5)")
    parser.add_argument("--create-topics", action="store_true",
                        help="create the sources' topics in one CreateTopics before the clock starts (by default "
                             "the first record of each source creates its topic, one at a time)")
    parser.add_argument("--keep-nofile", action="store_true", help="do not raise the child's soft RLIMIT_NOFILE")
    parser.add_argument("--set", action="append", default=[], help="worker property for `headwater up --set`")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
