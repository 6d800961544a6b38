"""FileStreamSource: each line of a file becomes a record, like ``tail -f``.

Kafka's keys: ``file`` (unset: standard input), ``topic``, ``batch.size`` (2000). The
source partition is ``{"filename": file}`` and the offset ``{"position": n}``, the byte
position after the line (Kafka counts characters; bytes are exact for any encoding).
New data is noticed through file-system events (the worker's one file-watching service,
``watch.py``) and a re-check every second (all there is when the kernel refuses more inotify watches). A
truncated file (shorter than the position) is read again from the start; a rotated
one (the path now names another file) is read to its end first, then the new file
from the start. A file that does not exist (yet, or any more) is waited for, as Kafka's
connector does; one that cannot be read (permissions, a directory, I/O errors) fails the task
with a message naming the file and the fix.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from itertools import accumulate
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from headwater.connect.api import (
    ExactlyOnceSupport,
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
    check_path,
)
from headwater.connect.api.batch import EncodedValues, SourceBatch
from headwater.connect.api.data import STRING_SCHEMA

from .encoded import LineWire
from .errors import file_error
from .watch import FolderWatch

__all__ = ["FileStreamSourceConnector", "FileStreamSourceTask"]

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20
IDLE_WAIT = 1.0


class FileStreamSourceConfig(SourceConnectorConfig):
    file: str = Field("", alias="file",
                      description="Source filename. If not specified, the standard input will be used")
    topic: str = Field(alias="topic", min_length=1, description="The topic to publish data to")
    batch_size: int = Field(2000, alias="batch.size", ge=1,
                            description="The maximum number of records the source task can read from the file each "
                                        "time it is polled")

    @model_validator(mode="after")
    def _bounded(self) -> FileStreamSourceConfig:
        if self.file:
            check_path("file", self.file, "read")
        return self


class FileStreamSourceConnector(SourceConnector):
    config_class: ClassVar[type[SourceConnectorConfig]] = FileStreamSourceConfig
    aliases: ClassVar[tuple[str, ...]] = ("org.apache.kafka.connect.file.FileStreamSourceConnector",
                                          "FileStreamSource")

    def start(self, config: FileStreamSourceConfig) -> None:
        self.config = config

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        """Kafka's answer: exactly once for a file (its byte position is the offset, written in the transaction
        of the lines it covers, so a restart reads on from the first line not committed), as long as the file is
        only appended to; not for standard input, which has no position to store."""
        return ExactlyOnceSupport.SUPPORTED if str(config.get("file") or "").strip() else ExactlyOnceSupport.UNSUPPORTED

    def task_class(self) -> type[SourceTask]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # One file has one reader: always a single task, as Kafka's connector does.
        return [{"file": self.config.file, "topic": self.config.topic, "batch.size": str(self.config.batch_size)}]


class FileStreamSourceTask(SourceTask):
    # What stop() reads, set before start() does: a start that fails early is still stopped cleanly.
    watch: FolderWatch | None = None
    fd: int | None = None
    stopped = False
    filename = ""
    # The encoded lane (``encode_with``): lines read become the value converter's bytes at once.
    wire: LineWire | None = None
    value_converter: Any = None
    key: bytes | None = None
    extra = 0  # with sizes None: each line's size is len(its entry in lines) + 1 - extra

    async def start(self, config: dict[str, str]) -> None:
        self.filename = config.get("file", "")
        if self.filename:
            check_path("file", self.filename, "read")  # again where it is opened: task configs travel
        self.topic = config["topic"]
        self.batch_size = int(config.get("batch.size", "2000"))
        self.partition = {"filename": self.filename}
        self.position = 0
        if self.filename:
            offset = self.context.offset_storage_reader.offset(self.partition)
            if offset and "position" in offset:
                self.position = int(offset["position"])
                log.info("resuming %s from position %d", self.filename, self.position)
        self.fd: int | None = None
        self.inode: tuple[int, int] | None = None
        self.pending = b""
        # Complete lines read but not yet polled: lines[next_line:], with each line's size in
        # bytes including its terminator in sizes (None: every line is ASCII and ends in \n,
        # so its size is len(line) + 1 - extra). On the encoded lane the entries are the lines'
        # values in the converter's wire form (bytes), else the lines (str).
        self.lines: list[Any] = []
        self.sizes: list[int] | None = None
        self.next_line = 0
        self.stopped = False
        self.missing = False
        self.watch: FolderWatch | None = None
        if self.filename:
            # The file's folder, woken for events naming the file (it may not exist yet, or be rotated).
            path = Path(self.filename).resolve()
            self.watch = FolderWatch(path.parent, path.name)
            self.watch.start()

    # -- reading ---------------------------------------------------------------------------------------

    def _open(self) -> bool:
        try:
            fd = os.open(self.filename, os.O_RDONLY)
        except FileNotFoundError:
            # As Kafka's FileStreamSource: wait for the file to appear (said once, not every second).
            if not self.missing:
                log.warning("FileStreamSource: %s does not exist; waiting for it to appear", self.filename)
                self.missing = True
            return False
        except OSError as exc:
            raise file_error("FileStreamSource", "read", self.filename, exc) from exc
        if self.missing:
            log.info("FileStreamSource: %s appeared; reading it", self.filename)
            self.missing = False
        st = os.fstat(fd)
        self.fd, self.inode = fd, (st.st_dev, st.st_ino)
        if st.st_size < self.position:
            log.warning("%s is shorter (%d bytes) than the stored position %d: it was truncated; reading from the "
                        "start", self.filename, st.st_size, self.position)
            self.position = 0
        self.pending = b""
        return True

    def _close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _replaced(self) -> bool:
        try:
            st = os.stat(self.filename)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) != self.inode

    def _read_lines(self) -> None:
        """Read what is new and split complete lines (\n, \r or \r\n) into ``self.lines``."""
        assert self.fd is not None
        size = os.fstat(self.fd).st_size
        read_from = self.position + len(self.pending)
        if size < read_from:  # truncated under us
            log.warning("%s was truncated to %d bytes; reading from the start", self.filename, size)
            self.position, self.pending = 0, b""
            read_from = 0
        if size == read_from:
            return
        try:
            chunk = os.pread(self.fd, READ_CHUNK, read_from)
        except OSError as exc:
            raise file_error("FileStreamSource", "read", self.filename, exc) from exc
        data = self.pending + chunk
        last_cr = data.rfind(b"\r")
        cut = max(data.rfind(b"\n"), last_cr)
        if cut < 0:
            self.pending = data
            return
        if data[cut] == 13 and cut == len(data) - 1:
            # A trailing \r may be the first half of \r\n: wait for the next byte.
            cut = max(data.rfind(b"\n", 0, cut), data.rfind(b"\r", 0, cut))
            if cut < 0:
                self.pending = data
                return
        self.next_line, self.extra = 0, 0
        in_place = self.wire is not None and last_cr < 0 and data.isascii()
        if in_place:
            # The common case, at C speed, on the encoded lane: the records' bytes straight from the chunk's
            # when no line needs a JSON escape, read in place (the complete lines are not copied out first;
            # the partial line after them, checked too, is ASCII without \r as well).
            values = self.wire.values(data, cut)  # type: ignore[union-attr]
            if values is not None:
                self.pending = data[cut + 1:]
                self.lines, self.sizes, self.extra = values, None, self.wire.overhead  # type: ignore[union-attr]
                return
        complete, self.pending = data[: cut + 1], data[cut + 1 :]
        if complete.isascii() and b"\r" not in complete:
            # One decode and one split per chunk; on the encoded lane the records' bytes straight from the
            # chunk's when no line needs a JSON escape (tried above unless the partial line was not ASCII).
            values = self.wire.values(complete) if self.wire is not None and not in_place else None
            if values is not None:
                self.lines, self.sizes, self.extra = values, None, self.wire.overhead  # type: ignore[union-attr]
                return
            self.lines = complete.decode("ascii").split("\n")
            self.lines.pop()  # the empty string after the last \n
            self.sizes = None
        else:
            raw = complete.splitlines(keepends=True)
            self.lines = [line.rstrip(b"\r\n").decode("utf-8", "replace") for line in raw]
            self.sizes = [len(line) for line in raw]
        if self.wire is not None:  # any other lines: the converter writes them, as the batch path would
            if self.sizes is None:
                self.sizes = [len(line) + 1 for line in self.lines]
            self.lines = self.value_converter.from_connect_values(self.topic, STRING_SCHEMA, self.lines)

    async def _fill(self) -> bool:
        """Make sure unpolled lines are ready; False when there are none yet (after waiting a little)."""
        if self.next_line < len(self.lines) or self.stopped:
            return self.next_line < len(self.lines)
        if self.fd is None and not self._open():
            await self.watch.wait(IDLE_WAIT)  # type: ignore[union-attr]
            return False
        while True:
            pending = len(self.pending)
            self._read_lines()
            if self.next_line < len(self.lines):
                return True
            if len(self.pending) == pending:
                break  # nothing new; a read that only grew a long line reads on at once
        if self._replaced():
            log.info("%s was rotated; reading the new file from the start", self.filename)
            self._close_fd()
            self.position = 0
            return False
        await self.watch.wait(IDLE_WAIT)  # type: ignore[union-attr]
        return False

    def _next_range(self) -> tuple[int, int]:
        """Where the next batch of ready lines starts and ends; marks them polled."""
        start = self.next_line
        self.next_line = min(len(self.lines), start + self.batch_size)
        return start, self.next_line

    def _take(self) -> tuple[list[str], list[int]]:
        """The next batch of lines and the byte position after each; advances ``position``."""
        start, end = self._next_range()
        lines = self.lines[start:end]
        sizes = self.sizes[start:end] if self.sizes is not None else [len(line) + 1 for line in lines]
        ends = list(accumulate(sizes, initial=self.position))[1:]
        self.position = ends[-1]
        return lines, ends

    def _take_lines(self) -> list[Any]:
        """The next batch of lines only (the batch and encoded paths: str lines, or their values on the encoded
        lane): ``position`` moves by their total size."""
        start, end = self._next_range()
        lines = self.lines[start:end]
        if self.sizes is not None:
            self.position += sum(self.sizes[start:end])
        else:
            self.position += sum(map(len, lines)) + len(lines) * (1 - self.extra)
        return lines

    async def poll(self) -> list[SourceRecord] | None:
        if not self.filename:
            return await self._poll_stdin()
        if not await self._fill():
            return None
        lines, ends = self._take()
        topic, partition, schema = self.topic, self.partition, STRING_SCHEMA
        return [SourceRecord(topic, line, None, None, None, schema, None, [], partition, {"position": pos})
                for line, pos in zip(lines, ends, strict=True)]

    async def poll_batch(self) -> SourceBatch | None:
        if not self.filename:
            records = await self._poll_stdin()
            return SourceBatch(self.topic, [r.value for r in records], STRING_SCHEMA, {}, {}) if records else None
        if not await self._fill():
            return None
        lines = self._take_lines()
        return SourceBatch(self.topic, lines, STRING_SCHEMA, self.partition, {"position": self.position})

    def encode_with(self, key_converter: Any, value_converter: Any) -> bool:
        """Yes for a file (not standard input) under a value converter ``LineWire`` knows (StringConverter
        in UTF-8, JsonConverter): the lines become its bytes without a Connect value each, by joins and
        replaces over the chunk read when it is ASCII without a line JSON escapes, by the converter's
        ``from_connect_values`` otherwise (tests/unit/test_file_source_encoded.py compares the two). The key
        is the key converter's bytes for a null key."""
        wire = LineWire.of(value_converter) if self.filename else None
        if wire is None or self.lines:
            return False
        try:
            self.key = key_converter.from_connect_data(self.topic, None, None)
        except Exception:  # the record path says what is wrong with it, under errors.tolerance
            log.debug("FileStreamSource: the key converter does not write a null key; records take the batch path",
                      exc_info=True)
            return False
        self.wire, self.value_converter = wire, value_converter
        return True

    async def poll_encoded(self) -> EncodedValues | None:
        if not await self._fill():
            return None
        values = self._take_lines()
        return EncodedValues(self.topic, values, self.key, self.partition, {"position": self.position})

    async def _poll_stdin(self) -> list[SourceRecord] | None:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            await asyncio.sleep(IDLE_WAIT)
            return None
        return [SourceRecord(self.topic, line.rstrip("\r\n"), value_schema=STRING_SCHEMA)]

    def stop(self) -> None:
        self.stopped = True
        if self.watch is not None:
            self.watch.wake()
            self.watch.stop()
        self._close_fd()


