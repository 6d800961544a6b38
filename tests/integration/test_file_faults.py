"""Bad input to the file connectors and the worker: each fault fails the task (or is waited out,
where Kafka's connector waits) with a trace that says what to fix, and once it is fixed and the
task restarted, every record arrives exactly once.

Run as root, the worker runs without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (``setpriv``), so
file permissions apply to it as to any user. The full disk is a 256 KiB tmpfs (root only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, consume, produce, sink_config, source_config, unique, values, wait_for
from support.workerproc import REPO

pytestmark = pytest.mark.timeout(120)

STRING = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
ROOT = os.geteuid() == 0


def _prefix() -> list[str]:
    if not ROOT:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): file permissions would not apply to the worker")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(tmp_path_factory.mktemp("file-faults"), prefix=_prefix()) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


def task(connect: ConnectProcess, name: str) -> dict:
    tasks = connect.status(name)["tasks"]
    return tasks[0] if tasks else {}


def wait_failed(connect: ConnectProcess, name: str) -> str:
    st = wait_for(lambda: task(connect, name).get("state") == "FAILED" and task(connect, name), 30, 0.1,
                  f"{name}'s task FAILED", connect.log_text)
    return st["trace"]


def restart(connect: ConnectProcess, name: str) -> None:
    assert connect.call("POST", f"/connectors/{name}/tasks/0/restart").status == 204
    wait_for(lambda: task(connect, name).get("state") == "RUNNING", 30, 0.1, f"{name}'s task RUNNING again",
             connect.log_text)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_an_unreadable_source_file_fails_the_task_with_the_fix_then_resumes(connect: ConnectProcess,
                                                                            tmp_path: Path) -> None:
    src, topic, name = tmp_path / "locked.txt", unique("unreadable"), unique("unreadable")
    src.write_text("".join(f"u-{i}\n" for i in range(5)))
    src.chmod(0o000)
    connect.create(name, source_config(src, topic, **STRING))
    trace = wait_failed(connect, name)
    assert str(src) in trace and "Permission denied" in trace and "read access" in trace, trace
    src.chmod(0o644)
    restart(connect, name)
    assert values(consume(connect.bootstrap, topic, 5, settle=1)) == [f"u-{i}" for i in range(5)]
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_source_path_that_is_a_directory_fails_the_task_naming_it(connect: ConnectProcess, tmp_path: Path) -> None:
    folder, name = tmp_path / "a-folder", unique("dir-source")
    folder.mkdir()
    connect.create(name, source_config(folder, unique("dir-topic"), **STRING))
    trace = wait_failed(connect, name)
    assert str(folder) in trace and "is a directory" in trace, trace
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_missing_or_vanished_source_file_is_waited_for(connect: ConnectProcess, tmp_path: Path) -> None:
    src, topic, name = tmp_path / "later.txt", unique("vanish"), unique("vanish")
    connect.create(name, source_config(src, topic, **STRING))  # the file does not exist yet
    wait_for(lambda: f"{src} does not exist; waiting for it to appear" in connect.log_text(), 15, 0.1,
             "the warning that the file is waited for")
    assert task(connect, name)["state"] == "RUNNING"
    src.write_text("".join(f"v-{i}\n" for i in range(10)))
    assert len(consume(connect.bootstrap, topic, 10, timeout=20)) == 10
    src.unlink()  # vanishes while the task has it open
    time_to_notice = 1.5
    wait_for(lambda: task(connect, name)["state"] == "RUNNING", time_to_notice, 0.1)
    src.write_text("".join(f"v-{i}\n" for i in range(10, 20)))  # a new file at the same path
    got = values(consume(connect.bootstrap, topic, 20, timeout=20, settle=1))
    assert got == [f"v-{i}" for i in range(20)]  # nothing lost, nothing twice
    assert task(connect, name)["state"] == "RUNNING"
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_sink_folder_without_write_permission_fails_the_task_then_resumes(connect: ConnectProcess,
                                                                          tmp_path: Path) -> None:
    folder, topic, name = tmp_path / "read-only", unique("ro-sink"), unique("ro-sink")
    folder.mkdir()
    folder.chmod(0o555)
    out = folder / "out.txt"
    produce(connect.bootstrap, topic, [(None, f"w-{i}".encode(), []) for i in range(50)])
    connect.create(name, sink_config(out, topic, **STRING))
    trace = wait_failed(connect, name)
    assert str(out) in trace and "Permission denied" in trace and "write access" in trace, trace
    folder.chmod(0o755)
    restart(connect, name)
    wait_for(lambda: len(lines_of(out)) >= 50, 20, 0.1, "50 lines in the sink's file", connect.log_text)
    connect.ok("PUT", f"/connectors/{name}/stop", expect=204)
    assert lines_of(out) == [f"w-{i}" for i in range(50)]
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_sink_and_after_space_is_freed_every_record_is_there_once(
        connect: ConnectProcess, small_disk: Path) -> None:
    topic, name, out = unique("full-disk"), unique("full-disk"), small_disk / "out.txt"
    records = [f"{i:06d}-" + "x" * 93 for i in range(4000)]  # 100 bytes a line: 400 KB into 256 KiB
    produce(connect.bootstrap, topic, [(None, r.encode(), []) for r in records])
    connect.create(name, sink_config(out, topic, **STRING, **{"consumer.override.max.poll.records": "500"}))
    trace = wait_failed(connect, name)
    assert str(out) in trace and "No space left on device" in trace and "free space" in trace, trace
    written = out.read_bytes()
    assert written.endswith(b"\n")  # the failed write's partial line was taken back out
    lines = written.decode().splitlines()
    assert 0 < len(lines) < len(records) and lines == records[: len(lines)]

    subprocess.run(["mount", "-o", "remount,size=2m", str(small_disk)], check=True)  # space freed
    restart(connect, name)
    wait_for(lambda: len(lines_of(out)) >= len(records), 30, 0.1, "every record in the sink's file",
             connect.log_text)
    connect.ok("PUT", f"/connectors/{name}/stop", expect=204)
    assert lines_of(out) == records  # nothing lost, nothing written twice
    print(f"\nfull disk: {len(lines)} of {len(records)} lines written before ENOSPC; all {len(records)} once "
          f"after the restart")
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_corrupt_standalone_offsets_file_stops_the_worker_naming_it(connect: ConnectProcess, tmp_path: Path) -> None:
    offsets = tmp_path / "connect.offsets"
    for corrupt in (b'{"["c",{"filename":"/x"}]": {"position": 4', b"\xff\xfe not text", b'["a list"]'):
        offsets.write_bytes(corrupt)
        done = subprocess.run(
            [sys.executable, "-m", "headwater", "connect", "standalone", str(REPO / "configs" /
                                                                            "worker-standalone.properties"),
             "--set", f"bootstrap.servers={connect.bootstrap}", "--set", "listeners=http://127.0.0.1:0",
             "--set", f"offset.storage.file.filename={offsets}", "--set", f"plugin.path={tmp_path}"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 2, done.stderr[-3000:]
        assert f"The offsets file {offsets} (offset.storage.file.filename) is unusable" in done.stderr, done.stderr
        assert "Restore it from a backup" in done.stderr
        assert offsets.read_bytes() == corrupt  # left as it was, for the user to restore
