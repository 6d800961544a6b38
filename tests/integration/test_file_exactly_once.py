"""The file and spool-dir sources with exactly-once support (KIP-618): a distributed worker subprocess with
``exactly.once.source.support=enabled`` runs FileStreamSource and SpoolDirLineDelimitedSourceConnector with
``exactly.once.support=required`` while lines are appended and files dropped in, and is SIGKILLed three times;
a read_committed consumer sees every line once, and every spooled file ends in finished.path."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.eoskit import copies, end_offsets, read_isolated
from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings

pytestmark = pytest.mark.timeout(420)

KILLS = 3
SPOOL = "com.github.jcustenborder.kafka.connect.spooldir.SpoolDirLineDelimitedSourceConnector"
LINES_PER_FILE = 300


@pytest.fixture(scope="module")
def eos_broker(tmp_path_factory: pytest.TempPathFactory):
    with BrokerProcess(tmp_path_factory.mktemp("file-eos-broker") / "data", *BROKER_OVERRIDES) as proc:
        yield proc


class Writers:
    """Lines appended to one file and files of LINES_PER_FILE lines dropped into a spool folder (written
    under another name, then renamed in: the pattern only sees whole files), every 0.1 s until stopped."""

    def __init__(self, appended: Path, spool: Path) -> None:
        self.appended, self.spool = appended, spool
        self.lines = 0
        self.files = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with open(self.appended, "a", encoding="utf-8") as out:
            while not self.stop.is_set():
                out.write("".join(f"line-{self.lines + i}\n" for i in range(200)))
                out.flush()
                self.lines += 200
                name = f"f{self.files:05d}"
                part = self.spool / f"{name}.part"
                part.write_text("".join(f"{name}-{i}\n" for i in range(LINES_PER_FILE)), encoding="utf-8")
                os.rename(part, self.spool / f"{name}.txt")
                self.files += 1
                time.sleep(0.1)

    def expected_file_lines(self) -> list[str]:
        return [f"line-{i}" for i in range(self.lines)]

    def expected_spool_lines(self) -> list[str]:
        return [f"f{n:05d}-{i}" for n in range(self.files) for i in range(LINES_PER_FILE)]


def values(bootstrap: str, topic: str) -> list[str]:
    return [json.loads(r.value) for r in read_isolated(bootstrap, topic, "read_committed") if r.value is not None]


def test_file_and_spooldir_sources_exactly_once_through_three_worker_kills(eos_broker: BrokerProcess,
                                                                           tmp_path: Path) -> None:
    folders = {k: tmp_path / "spool" / k for k in ("input", "finished", "error")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    appended = tmp_path / "spool" / "appended.txt"
    appended.touch()
    file_topic, spool_topic = unique("eos-file"), unique("eos-spool")
    tag = unique("file-eos")
    bootstrap = eos_broker.bootstrap
    writers = Writers(appended, folders["input"])
    with Cluster(tmp_path / "workers", bootstrap, tag,
                 {**fast_settings(tag), "exactly.once.source.support": "enabled"}) as cluster:
        (worker,) = cluster.start(1)
        worker.ok("PUT", "/connectors/eos-file/config", {
            "connector.class": "FileStreamSource", "file": str(appended), "topic": file_topic, "batch.size": "150",
            "exactly.once.support": "required"})
        worker.ok("PUT", "/connectors/eos-spool/config", {
            "connector.class": SPOOL, "topic": spool_topic, "input.path": str(folders["input"]),
            "finished.path": str(folders["finished"]), "error.path": str(folders["error"]),
            "input.file.pattern": r"f\d+\.txt", "batch.size": "100", "empty.poll.wait.ms": "100",
            "exactly.once.support": "required"})
        cluster.wait_running("eos-file", 1, timeout=60)
        cluster.wait_running("eos-spool", 1, timeout=60)
        writers.thread.start()

        def progress() -> tuple[int, int]:
            return end_offsets(bootstrap, file_topic), end_offsets(bootstrap, spool_topic)

        try:
            for _ in range(KILLS):
                before = progress()

                def both_wrote(before: tuple[int, int] = before) -> bool:  # mid-workload, since the (re)start
                    return all(now >= was + 1000 for now, was in zip(progress(), before, strict=True))

                wait_for(both_wrote, 90, 0.2, "both sources writing", cluster.logs)
                worker.kill()
                worker.start()
                cluster.wait_running("eos-file", 1, timeout=90)
                cluster.wait_running("eos-spool", 1, timeout=90)
        finally:
            writers.stop.set()
            writers.thread.join(30)
        want_file, want_spool = writers.expected_file_lines(), writers.expected_spool_lines()

        def caught_up() -> bool:
            left = [p for p in folders["input"].iterdir()]
            return (not left and len(values(bootstrap, file_topic)) >= len(want_file)
                    and len(values(bootstrap, spool_topic)) >= len(want_spool))

        wait_for(caught_up, 120, 1.0, "every line read and every file cleaned up", cluster.logs)
        time.sleep(2.0)  # anything read again after catching up would show as a duplicate now
        got_file, got_spool = values(bootstrap, file_topic), values(bootstrap, spool_topic)
        cluster.wait_running("eos-file", 1)
        cluster.wait_running("eos-spool", 1)
    file_counts = copies(want_file, got_file)
    spool_counts = copies(want_spool, got_spool)
    print(f"\nfile source exactly-once: {len(want_file)} lines, {len(got_file)} read_committed: "
          f"duplicates={file_counts[0]} missing={file_counts[1]} foreign={file_counts[2]}")
    print(f"spool-dir exactly-once: {writers.files} files, {len(want_spool)} lines, {len(got_spool)} read_committed: "
          f"duplicates={spool_counts[0]} missing={spool_counts[1]} foreign={spool_counts[2]}")
    assert file_counts == (0, 0, 0)
    assert spool_counts == (0, 0, 0)
    assert got_file == want_file  # in order
    assert got_spool == want_spool  # files oldest first, lines in order
    assert sorted(p.name for p in folders["finished"].iterdir()) == [f"f{n:05d}.txt" for n in range(writers.files)]
    assert not list(folders["error"].iterdir())
