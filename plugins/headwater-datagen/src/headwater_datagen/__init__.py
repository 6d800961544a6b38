"""DataGen: sequence-numbered records at a chosen rate, to prove nothing is lost.

With ``tasks.max`` = n, task i emits the sequence numbers i, i+n, i+2n, ... (below ``max.records``
when set), so all tasks together cover 0, 1, 2, ... with no overlap. The key is ``str(seq)``, the
value ``{"seq": seq, "task": i, "ts": ms}``; the source partition is ``{"task": i}`` and the offset
``{"seq": seq}``: a restarted task resumes right after its last committed number. Under
at-least-once delivery a consumer may see duplicates but never a gap. Keep ``tasks.max`` fixed for
the life of a connector: changing it changes which task owns which numbers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from pydantic import Field

from headwater.connect.api import SourceConnector, SourceConnectorConfig, SourceRecord, SourceTask, hookimpl

__all__ = ["DataGenConfig", "DataGenSourceConnector", "DataGenSourceTask", "headwater_connectors"]

MAX_BATCH = 1000


class DataGenConfig(SourceConnectorConfig):
    topic: str = Field(alias="topic", min_length=1, description="Topic to write to.")
    rate_per_sec: float = Field(10, alias="rate.per.sec", ge=0, description="Records per second per task; 0: as fast "
                                                                            "as possible.")
    max_records: int = Field(-1, alias="max.records", ge=-1, description="Stop below this sequence number; -1: never.")


class DataGenSourceConnector(SourceConnector):
    config_class: ClassVar[type[SourceConnectorConfig]] = DataGenConfig
    aliases: ClassVar[tuple[str, ...]] = ("DataGen",)

    def start(self, config: DataGenConfig) -> None:
        self.config = config

    def task_class(self) -> type[SourceTask]:
        return DataGenSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        c = self.config
        return [{"topic": c.topic, "rate.per.sec": str(c.rate_per_sec), "max.records": str(c.max_records),
                 "datagen.task": str(i), "datagen.tasks": str(max_tasks)} for i in range(max_tasks)]


class DataGenSourceTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        self.topic, self.rate, self.max = config["topic"], float(config["rate.per.sec"]), int(config["max.records"])
        self.id, self.step = int(config.get("datagen.task", "0")), int(config.get("datagen.tasks", "1"))
        self.partition: dict[str, Any] = {"task": self.id}
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.next = int(stored["seq"]) + self.step if stored and "seq" in stored else self.id
        self.started, self.sent = time.monotonic(), 0

    async def poll(self) -> list[SourceRecord] | None:
        if 0 <= self.max <= self.next:
            await asyncio.sleep(0.5)  # done: stay idle
            return None
        count = MAX_BATCH
        if self.rate > 0:
            count = min(MAX_BATCH, int((time.monotonic() - self.started) * self.rate) - self.sent)
            if count <= 0:
                await asyncio.sleep(min(1.0, (self.sent + 1) / self.rate - (time.monotonic() - self.started)))
                return None
        if self.max >= 0:
            count = min(count, -(-(self.max - self.next) // self.step))  # numbers left below max.records
        now, records = int(time.time() * 1000), []
        for _ in range(count):
            seq, self.next = self.next, self.next + self.step
            records.append(SourceRecord(self.topic, {"seq": seq, "task": self.id, "ts": now}, str(seq),
                                        timestamp=now, source_partition=self.partition, source_offset={"seq": seq}))
        self.sent += count
        return records

    def metrics(self) -> dict[str, Any]:
        return {"records.generated": self.sent, "next.seq": self.next}


@hookimpl
def headwater_connectors() -> list[type]:
    return [DataGenSourceConnector]
