"""FileStreamSink: writes each record's value as a line (Kafka's ``file``; unset: stdout).

``flush`` also fsyncs, so the offsets committed after it cover data that is on disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from headwater.connect.api import SinkConnector, SinkConnectorConfig, SinkRecord, SinkTask, TopicPartition
from headwater.connect.api.batch import SinkBatch
from headwater.connect.api.data import java_str

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask"]


class FileStreamSinkConfig(SinkConnectorConfig):
    file: str = Field("", alias="file", description="Destination filename. If not specified, the standard output "
                                                    "will be used")


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
    def start(self, config: dict[str, str]) -> None:
        self.filename = config.get("file", "")
        if self.filename:
            Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
        self.out = open(self.filename, "a", encoding="utf-8", buffering=1 << 20) if self.filename else sys.stdout

    def put(self, records: list[SinkRecord]) -> None:
        self._write([r.value for r in records])

    def put_batch(self, batch: SinkBatch) -> None:
        self._write(batch.values)

    def _write(self, values: list[Any]) -> None:
        if not values:
            return
        try:
            text = "\n".join(values)
        except TypeError:  # nulls or non-strings among them
            text = "\n".join([_line(v) for v in values])
        self.out.write(text)
        self.out.write("\n")
        self.out.flush()  # visible to readers at once; durability (fsync) stays with flush()

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        self.out.flush()
        if self.out is not sys.stdout:
            os.fsync(self.out.fileno())

    def stop(self) -> None:
        if self.out is not sys.stdout:
            self.out.flush()
            os.fsync(self.out.fileno())
            self.out.close()
