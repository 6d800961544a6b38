"""Flush benchmark: acks=all against a broker with flush.messages=1, from 1 and from 8 producers.

Every acknowledgement waits for an fsync of the partition. Concurrent producers can share one:
PartitionFlusher starts one flush at a time, and every record appended before it started is
covered by it. Completed flushes are counted without touching the broker: each one ends by
atomically replacing the partition's ``recovery-point`` file, seen here with inotify
(IN_MOVED_TO). A flush is 5 fsync calls (log, offset index, time index, the recovery-point
file, the directory).

Modes: ``sync`` -- each producer has one record in flight (produce, wait for the ack, repeat);
``stream`` -- each producer sends as fast as it can (linger.ms=5, librdkafka batches and
pipelines requests).

    .venv/bin/python bench/flush.py [--seconds 5] [--producers 1,8]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import shutil
import struct
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402

IN_MOVED_TO = 0x80
_EVENT = struct.Struct("iIII")


class RenameCounter:
    """Counts files renamed to ``name`` inside ``directory`` (inotify, Linux)."""

    def __init__(self, directory: Path, name: str) -> None:
        self._libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0 or self._libc.inotify_add_watch(self._fd, str(directory).encode(), IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), "inotify")
        self._name = name.encode()
        self.count = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            pos = 0
            while pos < len(data):
                _wd, _mask, _cookie, length = _EVENT.unpack_from(data, pos)
                name = data[pos + _EVENT.size : pos + _EVENT.size + length].rstrip(b"\0")
                if name == self._name:
                    self.count += 1
                pos += _EVENT.size + length

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        os.close(self._fd)


def producer(bootstrap: str, topic: str, mode: str, start_at: float, seconds: float) -> int:
    """One producer process: returns the number of records acknowledged within the window."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0 if mode == "sync" else 5,
            "message.timeout.ms": 30000}
    prod = Producer(conf)
    acked = 0

    def on_delivery(err, _msg):
        nonlocal acked
        if err is None:
            acked += 1

    value = b"v" * 100
    prod.produce(topic, value=b"warm-up", partition=0)  # connect and fetch metadata first
    prod.flush(30)
    time.sleep(max(start_at - time.time(), 0))
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        try:
            prod.produce(topic, key=b"%d" % i, value=value, partition=0, on_delivery=on_delivery)
        except BufferError:
            prod.poll(0.01)
            continue
        i += 1
        if mode == "sync":
            prod.flush(30)
        else:
            prod.poll(0)
    prod.flush(30)  # the tail in flight at the deadline counts too (the parent's clock includes it)
    return acked


def run(bootstrap: str, log_dir: Path, topic: str, mode: str, producers: int, seconds: float) -> tuple:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    pdir = log_dir / f"{topic}-0"
    while not pdir.exists():
        time.sleep(0.05)
    ctx = get_context("spawn")
    with ProcessPoolExecutor(producers, mp_context=ctx) as pool:
        start_at = time.time() + 3 + 0.3 * producers  # every process connected and warmed up
        futures = [pool.submit(producer, bootstrap, topic, mode, start_at, seconds) for _ in range(producers)]
        time.sleep(max(start_at - time.time(), 0))
        counter = RenameCounter(pdir, "recovery-point")
        started = time.monotonic()
        acked = sum(f.result() for f in futures)
        elapsed = time.monotonic() - started
        time.sleep(0.2)
        counter.close()
    flushes = counter.count
    return (producers, mode, f"{acked:,}", f"{elapsed:.1f}", f"{acked / elapsed:,.0f}", f"{flushes:,}",
            f"{acked / flushes:.1f}" if flushes else "-")


HEADERS = ("producers", "mode", "records acked", "seconds", "records/s", "flushes", "records per flush")


def print_table(rows: list[tuple]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(HEADERS, *rows, strict=True)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", default="1,8")
    parser.add_argument("--modes", default="sync,stream")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hw-flush-"))
    rows = []
    with BrokerProcess(base / "data", "flush.messages=1") as broker:
        for mode in args.modes.split(","):
            for n in (int(x) for x in args.producers.split(",")):
                rows.append(run(broker.bootstrap, base / "data", f"flush-{mode}-{n}", mode, n, args.seconds))
    shutil.rmtree(base, ignore_errors=True)
    print(f"flush.messages=1, acks=all, 1 partition, 100-byte values, {args.seconds:.0f} s per row")
    print_table(rows)


if __name__ == "__main__":
    main()
