"""FileStreamSink: writes each record's value as a line (Kafka's ``file``; unset: stdout).

``flush`` also fsyncs, so the offsets committed after it cover data that is on disk. A file
that cannot be opened or written (permissions, a full disk, a size limit) fails the task with a
message naming the file and the fix; a put whose write fails part-way takes its partial bytes
back out of the file first, so the records redelivered after the restart are written once, whole.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from headwater.connect.api import SinkConnector, SinkConnectorConfig, SinkRecord, SinkTask, TopicPartition, check_path
from headwater.connect.api.batch import EncodedSinkBatch, SinkBatch
from headwater.connect.api.data import java_str

from .encoded import LineWire, keys_never_fail
from .errors import file_error

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask"]

log = logging.getLogger(__name__)


class FileStreamSinkConfig(SinkConnectorConfig):
    file: str = Field("", alias="file", description="Destination filename. If not specified, the standard output "
                                                    "will be used")

    @model_validator(mode="after")
    def _bounded(self) -> FileStreamSinkConfig:
        if self.file:
            check_path("file", self.file, "write")
        return self


class FileStreamSinkConnector(SinkConnector):
    config_class: ClassVar[type[SinkConnectorConfig]] = FileStreamSinkConfig
    aliases: ClassVar[tuple[str, ...]] = ("org.apache.kafka.connect.file.FileStreamSinkConnector", "FileStreamSink")

    def start(self, config: FileStreamSinkConfig) -> None:
        self.config = config

    def task_class(self) -> type[SinkTask]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"file": self.config.file} for _ in range(max_tasks)]


def _line(value: Any) -> str:
    """What Kafka's sink writes: ``println(value)``, i.e. Java's toString of the Connect value."""
    return value if type(value) is str else java_str(value)


class FileStreamSinkTask(SinkTask):
    fd: int | None = None  # the file (None: stdout, or not started)
    wire: LineWire | None = None  # set when the worker's converters are ones put_encoded reads
    keys_checked = True  # whether put_encoded must see null keys (the key converter may reject others)

    def start(self, config: dict[str, str]) -> None:
        self.filename = config.get("file", "")
        self.fd: int | None = None
        if self.filename:
            check_path("file", self.filename, "write")  # again where it is opened: task configs travel
            try:
                Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
                self.fd = os.open(self.filename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as exc:
                raise file_error("FileStreamSink", "open for appending", self.filename, exc) from exc

    def put(self, records: list[SinkRecord]) -> None:
        self._write([r.value for r in records])

    def put_batch(self, batch: SinkBatch) -> None:
        self._write(batch.values)

    # -- the encoded path: values as the consumer read them, lines taken from the bytes as a whole ---------

    def decode_with(self, key_converter: Any, value_converter: Any) -> bool:
        """Yes for a file (not stdout) with StringConverter (UTF-8) or JsonConverter values."""
        self.wire = LineWire.of(value_converter) if self.fd is not None else None
        self.keys_checked = not keys_never_fail(key_converter)
        return self.wire is not None

    def put_encoded(self, batch: EncodedSinkBatch) -> bool:
        assert self.wire is not None
        if self.keys_checked:
            keys = batch.keys
            if keys.count(None) != len(keys):
                return False  # the converters say whether these keys convert
        data = self.wire.lines(batch.values)
        if data is None:
            return False  # not all plain lines: the converters read them
        self._write_bytes(data)
        return True

    def _write(self, values: list[Any]) -> None:
        if not values:
            return
        try:
            text = "\n".join(values)
        except TypeError:  # nulls or non-strings among them
            text = "\n".join([_line(v) for v in values])
        text += "\n"
        if self.fd is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        self._write_bytes(text.encode("utf-8"))

    def _write_bytes(self, data: bytes) -> None:
        """One write (visible to readers at once; durability stays with flush's fsync)."""
        assert self.fd is not None
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, data[written:] if written else data)
        except OSError as exc:
            self._take_back(written)
            raise file_error("FileStreamSink", "write to", self.filename, exc) from exc

    def _take_back(self, written: int) -> None:
        """Remove the ``written`` bytes of a failed put from the end of the file."""
        if not written or self.fd is None:
            return
        try:
            os.ftruncate(self.fd, os.fstat(self.fd).st_size - written)
        except OSError:
            log.exception("FileStreamSink could not take %d bytes of a failed write back out of %s", written,
                          self.filename)

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        if self.fd is not None:
            try:
                os.fsync(self.fd)
            except OSError as exc:
                raise file_error("FileStreamSink", "sync", self.filename, exc) from exc

    def stop(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
