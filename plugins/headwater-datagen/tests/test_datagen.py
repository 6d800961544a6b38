"""DataGen driven directly: no broker, a fake offset reader standing in for the runtime."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import headwater_datagen
from headwater_datagen import DataGenSourceConnector, DataGenSourceTask

from headwater.connect.api import OffsetStorageReader, SourceRecord, SourceTaskContext

PLUGIN = Path(__file__).resolve().parents[1]


class Offsets(OffsetStorageReader):
    def __init__(self, stored: dict[int, int] | None = None) -> None:
        self.stored = stored or {}

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        seq = self.stored.get(partition["task"])
        return None if seq is None else {"seq": seq}


class Context(SourceTaskContext):
    def __init__(self, reader: OffsetStorageReader) -> None:
        self.configs: dict[str, str] = {}
        self.reader = reader

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


def props(**extra: str) -> dict[str, str]:
    return {"name": "gen", "connector.class": "DataGen", "topic": "seq", **{k.replace("_", "."): v
                                                                            for k, v in extra.items()}}


def tasks(max_tasks: int, stored: dict[int, int] | None = None, **extra: str) -> list[DataGenSourceTask]:
    connector = DataGenSourceConnector()
    assert DataGenSourceConnector.validate(props(**extra)) == {}
    connector.start(DataGenSourceConnector.config_class.model_validate(props(**extra)))
    out = []
    for config in connector.task_configs(max_tasks):
        task = connector.task_class()()
        task.initialize(Context(Offsets(stored)))
        task.start(config)
        out.append(task)
    return out


def poll_once(task: DataGenSourceTask) -> list[SourceRecord]:
    records = asyncio.run(task.poll())
    assert records is not None
    return records


async def poll_for(task: DataGenSourceTask, seconds: float) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records += await task.poll() or []
    return records


def test_hook_and_validation() -> None:
    assert headwater_datagen.headwater_connectors() == [DataGenSourceConnector]
    errors = DataGenSourceConnector.validate({"name": "g", "connector.class": "DataGen", "rate.per.sec": "-1",
                                              "max.records": "-2"})
    assert set(errors) == {"topic", "rate.per.sec", "max.records"}


def test_found_on_plugin_path() -> None:
    from headwater.connect.plugins import PluginRegistry

    registry = PluginRegistry([str(PLUGIN.parent)])
    assert registry.connector("DataGen").__name__ == "DataGenSourceConnector"


def test_record_shape() -> None:
    (task,) = tasks(1, rate_per_sec="0", max_records="3")
    records = poll_once(task)
    assert [r.key for r in records] == ["0", "1", "2"]
    r = records[1]
    assert r.topic == "seq" and r.value_schema is None and r.key_schema is None
    assert r.value["seq"] == 1 and r.value["task"] == 0 and abs(r.value["ts"] - time.time() * 1000) < 5000
    assert r.source_partition == {"task": 0} and r.source_offset == {"seq": 1}


def test_rate_per_task() -> None:
    (task,) = tasks(1, rate_per_sec="50")
    records = asyncio.run(poll_for(task, 1.0))
    assert 35 <= len(records) <= 60
    assert [r.value["seq"] for r in records] == list(range(len(records)))


def test_as_fast_as_possible() -> None:
    (task,) = tasks(1, rate_per_sec="0")
    assert len(poll_once(task)) == 1000


def test_tasks_split_the_sequence_space() -> None:
    gens = tasks(3, rate_per_sec="0", max_records="100")
    seen: list[int] = []
    for i, task in enumerate(gens):
        records = poll_once(task)
        seqs = [r.value["seq"] for r in records]
        assert seqs == list(range(i, 100, 3))
        assert {r.source_partition["task"] for r in records} == {i}
        assert asyncio.run(task.poll()) is None  # max.records reached
        seen += seqs
    assert sorted(seen) == list(range(100))


def test_resume_after_last_committed_seq() -> None:
    gens = tasks(3, stored={1: 13}, rate_per_sec="0", max_records="31")
    seqs = [r.value["seq"] for r in poll_once(gens[1])]
    assert seqs == [16, 19, 22, 25, 28]  # 13 was the last committed number of task 1: no gap, no repeat
    assert [r.value["seq"] for r in poll_once(gens[0])][:2] == [0, 3]  # no offset: from the start
