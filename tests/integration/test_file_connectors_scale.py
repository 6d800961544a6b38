"""Many file connectors in one worker, bounded by work rather than by threads or kernel handles.

Three hundred FileStreamSource tasks share one file-watching service (one inotify instance, one thread) and move
their records, with the worker's threads bounded; a task that runs out of open files fails with a trace naming
``ulimit -n``; and when the kernel refuses inotify watches, a task polls and still delivers its lines.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, consume, http, source_config, unique, values, wait_for

from headwater.connectors.file import watch
from headwater.testing.worker import EmbeddedWorker

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(watch._LIBC is None, reason="inotify is Linux only")]

STRING = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
SOURCES = 300
# The worker's own threads (event loop, broker, REST, ...), the one file-watching thread, and the default
# executor that runs plugins' sync calls (Python bounds it at min(32, cores + 4)); never a thread per task.
MAX_THREADS = 24 + min(32, (os.cpu_count() or 1) + 4)


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads line for {pid}")


def open_files(pid: int) -> dict[int, str]:
    """The process's descriptors and what each names (one closed while listing is left out)."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    return found


def settled_files(pid: int) -> dict[int, str] | None:
    """``open_files`` when the same twice, half a second apart (the test's own connections closed)."""
    first = open_files(pid)
    time.sleep(0.5)
    return first if open_files(pid) == first else None


def task_states(connect: ConnectProcess) -> dict[str, str]:
    expanded = connect.ok("GET", "/connectors", expand="status")
    return {name: (entry["status"]["tasks"] or [{"state": "NO TASK"}])[0]["state"]
            for name, entry in expanded.items()}


@pytest.fixture
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(tmp_path_factory.mktemp("file-scale")) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


def test_300_file_sources_run_in_one_worker_with_bounded_threads(connect: ConnectProcess, tmp_path: Path) -> None:
    topic = unique("scale")
    names = [f"{topic}-{i}" for i in range(SOURCES)]
    for i in range(SOURCES):  # a folder each: 300 watches, one inotify instance
        folder = tmp_path / f"s{i}"
        folder.mkdir()
        (folder / "in.txt").write_text(f"{i}-a\n{i}-b\n")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: connect.create(names[i], source_config(tmp_path / f"s{i}" / "in.txt", topic,
                                                                       **STRING)), range(SOURCES)))

    def all_running() -> bool:
        states = task_states(connect)
        return len(states) == SOURCES and set(states.values()) == {"RUNNING"}

    wait_for(all_running, 60, 0.5, f"{SOURCES} tasks RUNNING", lambda: str(Counter(task_states(connect).values())))
    expected = sorted(f"{i}-{s}" for i in range(SOURCES) for s in "ab")
    assert sorted(values(consume(connect.bootstrap, topic, len(expected), timeout=60))) == expected
    assert connect.proc is not None
    threads = threads_of(connect.proc.pid)
    assert threads <= MAX_THREADS, f"{threads} threads for {SOURCES} idle file tasks"
    assert set(task_states(connect).values()) == {"RUNNING"}


def test_running_out_of_open_files_fails_the_task_naming_the_limit(connect: ConnectProcess, tmp_path: Path) -> None:
    src, topic, name = tmp_path / "rotated.txt", unique("nofile"), unique("nofile")
    src.write_text("n-0\n")
    connect.create(name, source_config(src, topic, **STRING))
    # Delivered: the task's clients are connected, so the next descriptor it needs is the rotated file's
    assert values(consume(connect.bootstrap, topic, 1, timeout=30)) == ["n-0"]
    assert connect.proc is not None
    pid = connect.proc.pid
    fds = wait_for(lambda: settled_files(pid), 30, 0, "the worker's descriptors to settle")  # consumer's closed
    lowest_free = next(n for n in range(len(fds) + 1) if n not in fds)
    held = next(fd for fd, target in fds.items() if target == str(src))
    # A limit no descriptor can be opened under, even the one the task frees when it closes the rotated file
    limit = min(lowest_free, held)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    logged = len(connect.log_text())  # the broker's start-up line names RLIMIT_NOFILE too
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
    try:
        src.rename(src.with_name("rotated.txt.1"))
        src.write_text("n-1\n")
        wait_for(lambda: "RLIMIT_NOFILE" in connect.log_text()[logged:], 30, 0.1, "the task's failure in the log",
                 connect.log_text)
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    task = wait_for(lambda: (t := connect.status(name)["tasks"][0])["state"] == "FAILED" and t, 30, 0.2,
                    f"{name}'s task FAILED", connect.log_text)
    trace = task["trace"]
    assert "Too many open files" in trace and "ulimit -n" in trace and "RLIMIT_NOFILE" in trace, trace
    assert str(src) in trace and f"now {limit} (hard " in trace, trace
    assert connect.call("POST", f"/connectors/{name}/tasks/0/restart").status == 204
    connect.wait_state(name, "RUNNING", tasks=1)  # the limit back where it was, the task runs again


def test_a_source_polls_and_delivers_when_the_kernel_refuses_watches(
        broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refuse(*args: object) -> int:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    # The only stand-in: the inotify limits are machine-wide, so the refusal is made at the kernel boundary.
    monkeypatch.setattr(watch, "_service", watch.WatchService())
    monkeypatch.setattr(watch, "inotify_add_watch", refuse)
    caplog.set_level(logging.WARNING, logger=watch.__name__)
    src, topic, name = tmp_path / "polled.txt", unique("polled"), unique("polled")
    src.write_text("p-0\n")
    # The session broker keeps Kafka's group.min.session.timeout.ms (6 s)
    with EmbeddedWorker(broker.bootstrap, settings={"session.timeout.ms": "10000"}) as worker:
        resp = http("POST", f"{worker.url}/connectors", {"name": name, "config": source_config(src, topic, **STRING)})
        assert resp.status == 201, resp.body

        def state() -> str | None:
            tasks = http("GET", f"{worker.url}/connectors/{name}/status").json["tasks"]
            return tasks[0]["state"] if tasks else None

        wait_for(lambda: state() == "RUNNING", 30, 0.1, f"{name} RUNNING")
        assert values(consume(broker.bootstrap, topic, 1, timeout=30)) == ["p-0"]
        with src.open("a") as f:  # noticed by polling: no event can come
            f.write("p-1\np-2\n")
        assert values(consume(broker.bootstrap, topic, 3, timeout=30)) == ["p-0", "p-1", "p-2"]
        assert state() == "RUNNING"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == watch.__name__]
    assert len(warnings) == 1 and "fs.inotify.max_user_watches" in warnings[0] and str(tmp_path) in warnings[0], \
        warnings
