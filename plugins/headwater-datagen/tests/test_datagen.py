"""DataGen on a real broker and worker (the kit's fixtures), plus what only a task driven directly shows:
its pace."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import headwater_datagen
from headwater_datagen import DataGenConfig, DataGenSourceConnector, DataGenSourceTask

from headwater.connect.api import OffsetStorageReader, SourceRecord, SourceTaskContext
from headwater.testing import ConnectClient, EmbeddedBroker, unique, wait_until

PLUGIN = Path(__file__).resolve().parents[1]


def generate(connect: ConnectClient, broker: EmbeddedBroker, count: int, **settings: Any) -> list[Any]:
    """Run DataGen until it wrote ``max.records`` = ``count`` numbers; the records of its topic."""
    topic = broker.create_topic(unique("seq"))
    name = unique("gen")
    connect.create(name, {"connector.class": "DataGen", "topic": topic, "max.records": str(count),
                          "rate.per.sec": "0", **settings})
    connect.wait_for_state(name, "RUNNING")
    return broker.wait_for_records(topic, count)


def test_hook_and_per_key_validation(headwater_connect: ConnectClient) -> None:
    assert headwater_datagen.headwater_connectors() == [DataGenSourceConnector]
    answer = headwater_connect.validate("DataGen", {"name": "g", "rate.per.sec": "-1", "max.records": "-2"})
    assert set(headwater_connect.errors_by_key(answer)) == {"topic", "rate.per.sec", "max.records"}


def test_found_on_plugin_path() -> None:
    from headwater.connect.plugins import PluginRegistry

    registry = PluginRegistry([str(PLUGIN.parent)])
    assert registry.connector("DataGen").__name__ == "DataGenSourceConnector"


def test_record_shape(headwater_connect: ConnectClient, headwater_broker: EmbeddedBroker) -> None:
    records = generate(headwater_connect, headwater_broker, 3)
    assert [r.key for r in records] == [b"0", b"1", b"2"]
    value = records[1].json()
    assert value["seq"] == 1 and value["task"] == 0 and abs(value["ts"] - time.time() * 1000) < 10000
    assert records[1].timestamp == value["ts"]


def test_tasks_split_the_sequence_space(headwater_connect: ConnectClient, headwater_broker: EmbeddedBroker) -> None:
    records = generate(headwater_connect, headwater_broker, 100, **{"tasks.max": "3"})
    values = [r.json() for r in records]
    assert sorted(v["seq"] for v in values) == list(range(100))  # no gap, no repeat
    assert all(v["seq"] % 3 == v["task"] for v in values)


def test_resume_after_last_committed_seq(headwater_connect: ConnectClient, headwater_broker: EmbeddedBroker) -> None:
    topic = headwater_broker.create_topic(unique("seq"))
    name = unique("gen")
    config = {"connector.class": "DataGen", "topic": topic, "tasks.max": "3", "max.records": "31", "rate.per.sec": "0"}
    headwater_connect.create(name, config, initial_state="STOPPED")
    # as if task 1 had committed 13 before: it goes on with 16, and the others start from scratch
    headwater_connect.ok("PATCH", f"/connectors/{name}/offsets",
                         {"offsets": [{"partition": {"task": 1}, "offset": {"seq": 13}}]})
    headwater_connect.resume(name)
    values = [r.json() for r in headwater_broker.wait_for_records(topic, 11 + 5 + 10)]
    assert [v["seq"] for v in values if v["task"] == 1] == [16, 19, 22, 25, 28]
    assert [v["seq"] for v in values if v["task"] == 0][:2] == [0, 3]


def test_task_metrics(headwater_connect: ConnectClient, headwater_broker: EmbeddedBroker) -> None:
    generate(headwater_connect, headwater_broker, 50)
    name = headwater_connect.created[-1]
    figures = wait_until(lambda: headwater_connect.task_metrics(name)["metrics"].get("records.generated") == 50,
                         "records.generated to reach 50", seen=lambda: headwater_connect.task_metrics(name))
    assert figures


# -- the pace, which only a task driven directly shows exactly -----------------------------------------

class _NoOffsets(OffsetStorageReader):
    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return None


class _Context(SourceTaskContext):
    configs: dict[str, str] = {}

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return _NoOffsets()


def started_task(**settings: str) -> DataGenSourceTask:
    props = {"name": "gen", "connector.class": "DataGen", "topic": "seq", **settings}
    connector = DataGenSourceConnector()
    connector.start(DataGenConfig.model_validate(props))
    task = DataGenSourceTask()
    task.initialize(_Context())
    task.start(connector.task_configs(1)[0])
    return task


async def poll_for(task: DataGenSourceTask, seconds: float) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records += await task.poll() or []
    return records


def test_rate_per_task() -> None:
    records = asyncio.run(poll_for(started_task(**{"rate.per.sec": "50"}), 1.0))
    assert 35 <= len(records) <= 60
    assert [r.value["seq"] for r in records] == list(range(len(records)))


def test_as_fast_as_possible() -> None:
    assert len(asyncio.run(started_task(**{"rate.per.sec": "0"}).poll()) or []) == 1000
