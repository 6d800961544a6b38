"""Built-in plugins come through the ``headwater`` entry-point group, as third-party ones do,
and a connector start validates its config once and builds its transform chain once."""

from __future__ import annotations

import asyncio
import importlib.metadata
from typing import Any, ClassVar

from pydantic import model_validator

from headwater.connect.api import (
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
    Transformation,
    hookimpl,
)
from headwater.connect.config import WorkerConfig
from headwater.connect.plugins import ENTRY_POINT_GROUP, PluginRegistry
from headwater.connect.runtime.worker import Worker
from headwater.connect.status import TargetState, TaskId
from headwater.connect.storage.offsets import MemoryOffsetStore


def test_builtins_are_entry_points_of_the_distribution() -> None:
    ours = {ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.name == "headwater"}
    assert ours == {"headwater.connectors.file", "headwater.connect.converters", "headwater.connect.transforms"}


def test_registry_finds_builtins_through_their_entry_points() -> None:
    registry = PluginRegistry()
    for kind, name, module in [
        ("connector", "org.apache.kafka.connect.file.FileStreamSourceConnector", "headwater.connectors.file"),
        ("connector", "SpoolDirCsvSource", "headwater.connectors.file"),
        ("converter", "org.apache.kafka.connect.json.JsonConverter", "headwater.connect.converters"),
        ("transformation", "org.apache.kafka.connect.transforms.InsertField$Value", "headwater.connect.transforms"),
    ]:
        cls = registry.connector(name) if kind == "connector" else (
            registry.converter(name) if kind == "converter" else registry.transformation(name))
        assert cls.__module__.startswith(module), (name, cls)
    registered = {name for name, _ in registry.pm.list_name_plugin()}
    assert {"headwater.connectors.file", "headwater.connect.converters",
            "headwater.connect.transforms"} <= registered


# -- one validation and one transform chain per start -------------------------------------------------

COUNTS = {"validations": 0, "transforms": 0}


class CountingConfig(SourceConnectorConfig):
    @model_validator(mode="after")
    def _count(self) -> CountingConfig:
        COUNTS["validations"] += 1
        return self


class IdleTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord]:
        return []

    def stop(self) -> None:
        pass


class CountingConnector(SourceConnector):
    config_class: ClassVar[type[SourceConnectorConfig]] = CountingConfig

    def start(self, config: Any) -> None:
        pass

    def task_class(self) -> type[IdleTask]:
        return IdleTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{} for _ in range(max_tasks)]


class CountingTransform(Transformation):
    def configure(self, configs: dict[str, Any]) -> None:
        COUNTS["transforms"] += 1

    def apply(self, record: Any) -> Any:
        return record


class _Plugin:
    @hookimpl
    def headwater_connectors(self) -> list[type]:
        return [CountingConnector]

    @hookimpl
    def headwater_transforms(self) -> list[type]:
        return [CountingTransform]


def test_a_start_validates_once_and_builds_the_chain_once() -> None:
    registry = PluginRegistry()
    registry.register(_Plugin(), "counting")
    props = {"name": "c", "connector.class": f"{__name__}.CountingConnector", "tasks.max": "2",
             "transforms": "t", "transforms.t.type": f"{__name__}.CountingTransform"}
    worker = Worker("w", WorkerConfig.model_validate({"bootstrap.servers": "127.0.0.1:1"}), registry,
                    MemoryOffsetStore(), lambda *a: None)

    async def go() -> None:
        assert await worker.start_connector("c", props, TargetState.STARTED)
        assert COUNTS == {"validations": 1, "transforms": 0}  # the connector itself needs no chain
        task_props = (await worker.task_configs("c"))[0]
        assert await worker.start_task(TaskId("c", 0), props, task_props, TargetState.PAUSED)
        assert COUNTS == {"validations": 1, "transforms": 1}  # the running connector's config is reused
        await worker.stop()

    asyncio.run(go())
