"""The lake's own commit log: what makes a Parquet lake exactly once without a table format.

Every flush of a topic-partition first writes its files (or, in upsert mode, the new contents of
the buckets it touches) under ``<lake>/_headwater/tmp/<topic>+<partition>/``, where no reader
looks. Then one small JSON entry, ``<lake>/_headwater/log/<topic>+<partition>/<next offset>.json``,
is written atomically (a temporary name, then a rename): it is the commit. It lists the moves
that publish the flush (staged path -> final path) and the next offset to consume. Then the
moves are made. A task that opens the partition replays the last entry's moves that are still
pending (a rename is idempotent: a staged path that is gone was moved), deletes anything else
staged for it, and seeks to the entry's offset. A crash at any point therefore leaves each flush
either absent (its records are read again) or complete, never half there or there twice.

Paths go through Hadoop's FileSystem API in Spark's JVM, so ``lake.path`` may be any URI Spark
writes (file:/, hdfs://, s3a:// ...).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CommitEntry", "Lake", "LocalLake"]

log = logging.getLogger(__name__)

LOG_DIR = "_headwater/log"
TMP_DIR = "_headwater/tmp"
KEEP_ENTRIES = 3  # older entries are deleted: only the last one is ever replayed


@dataclass
class CommitEntry:
    """One committed flush of a topic-partition."""

    topic: str
    partition: int
    start: int  # the first offset the flush covers
    next: int  # the offset after the last one it covers
    moves: list[tuple[str, str]] = field(default_factory=list)  # staged path -> published path
    table: str = ""  # the table folder the flush wrote
    columns: list[list[str]] = field(default_factory=list)  # the table's columns after it (TableShape JSON)
    replace: bool = False  # moves replace whole folders (upsert buckets) rather than add files

    def to_json(self) -> bytes:
        return json.dumps({"topic": self.topic, "partition": self.partition, "start": self.start, "next": self.next,
                           "moves": self.moves, "table": self.table, "columns": self.columns,
                           "replace": self.replace}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CommitEntry:
        d = json.loads(data)
        return cls(d["topic"], int(d["partition"]), int(d["start"]), int(d["next"]),
                   [(a, b) for a, b in d.get("moves", [])], d.get("table", ""), d.get("columns", []),
                   bool(d.get("replace", False)))


class Lake:
    """``lake.path`` through Hadoop's FileSystem (in the Spark session's JVM)."""

    def __init__(self, spark: Any, root: str) -> None:
        self.spark = spark
        jvm = spark.sparkContext._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self.root = root.rstrip("/")
        self.fs = self._Path(self.root).getFileSystem(conf)
        self._qualified = str(self.fs.makeQualified(self._Path(self.root)).toString())

    def path(self, *parts: str) -> str:
        return "/".join([self._qualified, *[p.strip("/") for p in parts if p]])

    # -- files ---------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._Path(path)))

    def mkdirs(self, path: str) -> None:
        if not self.fs.mkdirs(self._Path(path)):
            raise OSError(f"cannot create {path}")

    def delete(self, path: str) -> None:
        self.fs.delete(self._Path(path), True)

    def rename(self, src: str, dst: str) -> None:
        parent = self._Path(dst).getParent()
        if parent is not None and not self.fs.exists(parent):
            self.fs.mkdirs(parent)
        if not self.fs.rename(self._Path(src), self._Path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def list(self, path: str) -> list[str]:
        """Names in a folder (empty when it does not exist)."""
        p = self._Path(path)
        if not self.fs.exists(p):
            return []
        return [str(s.getPath().getName()) for s in self.fs.listStatus(p)]

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a small file atomically: a hidden temporary name first, then a rename."""
        p = self._Path(path)
        tmp = self._Path(p.getParent(), "." + str(p.getName()) + ".tmp")
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if self.fs.exists(p):
            self.fs.delete(p, False)
        if not self.fs.rename(tmp, p):
            raise OSError(f"cannot rename {tmp} to {path}")

    def read_bytes(self, path: str) -> bytes:
        stream = self.fs.open(self._Path(path))
        try:
            # Py4J hands a Java byte[] back as Python bytes
            return bytes(self.spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    # -- the commit log --------------------------------------------------------------------------------

    def staging(self, topic: str, partition: int) -> str:
        return self.path(TMP_DIR, f"{topic}+{partition}")

    def _log_dir(self, topic: str, partition: int) -> str:
        return self.path(LOG_DIR, f"{topic}+{partition}")

    def last_entry(self, topic: str, partition: int) -> CommitEntry | None:
        names = sorted(n for n in self.list(self._log_dir(topic, partition)) if n.endswith(".json")
                       and not n.startswith("."))
        if not names:
            return None
        return CommitEntry.from_json(self.read_bytes(f"{self._log_dir(topic, partition)}/{names[-1]}"))

    def commit(self, entry: CommitEntry) -> None:
        """Write the entry (the commit point), publish its moves, and drop entries no longer needed."""
        folder = self._log_dir(entry.topic, entry.partition)
        self.write_bytes(f"{folder}/{entry.next:020d}.json", entry.to_json())
        self.publish(entry)
        names = sorted(n for n in self.list(folder) if n.endswith(".json") and not n.startswith("."))
        for old in names[:-KEEP_ENTRIES]:
            self.delete(f"{folder}/{old}")

    def inside(self, path: str) -> bool:
        """Whether ``path`` lies under the lake's root once Hadoop normalised it ('..' removed)."""
        qualified = str(self.fs.makeQualified(self._Path(path)).toString())
        return qualified.startswith(self._qualified.rstrip("/") + "/")

    def publish(self, entry: CommitEntry) -> None:
        """Make the entry's moves that are still pending (idempotent). A move out of the lake is refused: the
        sink never writes one, so the entry was written by something else (a file sink aimed at the log)
        and must not carry a file to where the worker would not let a connector write."""
        for src, dst in entry.moves:
            if not (self.inside(src) and self.inside(dst)):
                raise OSError(f"the commit of {entry.topic}-{entry.partition} up to offset {entry.next} moves {src} "
                              f"to {dst}, outside the lake {self._qualified}: refused (this sink writes no such "
                              f"entry; remove it from {self._log_dir(entry.topic, entry.partition)})")
            if not self.exists(src):
                continue  # moved already
            if entry.replace and self.exists(dst):
                self.delete(dst)
            self.rename(src, dst)

    def recover(self, topic: str, partition: int) -> CommitEntry | None:
        """After whoever wrote this partition before: finish its last commit and drop what it staged
        without committing. Returns the last entry (None: nothing was ever committed)."""
        entry = self.last_entry(topic, partition)
        if entry is not None:
            pending = [src for src, _ in entry.moves if self.exists(src)]
            if pending:
                log.info("%s-%d: publishing %d staged paths of the commit up to offset %d", topic, partition,
                         len(pending), entry.next)
                self.publish(entry)
        self.delete(self.staging(topic, partition))
        return entry


class LocalLake(Lake):
    """A lake in a local folder through the operating system's calls: no JVM needed to commit or recover
    (a restarted task reaches its partitions without waiting for Spark to start). Paths are the ``file:``
    URIs Hadoop gives the same folder, so commit entries read the same through either class."""

    def __init__(self, root: str) -> None:  # not Lake's: that one needs Spark's JVM
        self.spark = None
        local = root[len("file:"):] if root.startswith("file:") else root
        self.local_root = os.path.abspath(local)
        self.root = "file:" + self.local_root
        self._qualified = self.root

    @staticmethod
    def _local(path: str) -> str:
        if not path.startswith("file:"):
            raise OSError(f"{path} is not in the local lake")
        local = path[len("file:"):]
        while local.startswith("//"):
            local = local[1:]
        return local

    def exists(self, path: str) -> bool:
        return os.path.lexists(self._local(path))

    def mkdirs(self, path: str) -> None:
        os.makedirs(self._local(path), exist_ok=True)

    def delete(self, path: str) -> None:
        local = self._local(path)
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local, ignore_errors=True)
        elif os.path.lexists(local):
            os.unlink(local)

    def rename(self, src: str, dst: str) -> None:
        target = self._local(dst)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            raise OSError(f"cannot rename {src} to {dst}: it exists")
        os.rename(self._local(src), target)

    def list(self, path: str) -> list[str]:
        try:
            return os.listdir(self._local(path))
        except FileNotFoundError:
            return []

    def write_bytes(self, path: str, data: bytes) -> None:
        local = self._local(path)
        os.makedirs(os.path.dirname(local), exist_ok=True)  # as Hadoop's create does
        tmp = os.path.join(os.path.dirname(local), "." + os.path.basename(local) + ".tmp")
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, local)

    def read_bytes(self, path: str) -> bytes:
        with open(self._local(path), "rb") as f:
            return f.read()

    def inside(self, path: str) -> bool:
        if not path.startswith("file:"):
            return False
        return os.path.normpath(self._local(path)).startswith(self.local_root.rstrip("/") + "/")
