"""Built-in plugins come through the ``headwater`` entry-point group, as third-party ones do (and
``GET /connector-plugins`` answers as before), ``plugin.path`` still loads plugins, and a connector
start validates its config once and builds its transform chain once."""

from __future__ import annotations

import asyncio
import errno
import importlib.metadata
import logging
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from pydantic import model_validator
from watchdog.observers import Observer

from headwater.connect import plugins
from headwater.connect.api import (
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
    Transformation,
    hookimpl,
)
from headwater.connect.config import WorkerConfig
from headwater.connect.herder.base import Herder
from headwater.connect.plugins import ENTRY_POINT_GROUP, PluginRegistry, UnknownPlugin
from headwater.connect.rest.app import build_app
from headwater.connect.runtime.worker import Worker
from headwater.connect.status import TargetState, TaskId
from headwater.connect.storage.offsets import MemoryOffsetStore
from headwater.testing.waiting import wait_until


def test_builtins_are_entry_points_of_the_distribution() -> None:
    ours = {ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.name == "headwater"}
    assert ours == {"headwater.connectors.file", "headwater.connectors.postgres", "headwater.connectors.spark",
                    "headwater.connectors.mirror", "headwater.connect.builtins"}


def test_registry_finds_builtins_through_their_entry_points() -> None:
    registry = PluginRegistry()
    for find, name, module in [
        (registry.connector, "org.apache.kafka.connect.file.FileStreamSourceConnector", "headwater.connectors.file"),
        (registry.connector, "FileStreamSink", "headwater.connectors.file"),
        (registry.connector, "SpoolDirCsvSource", "headwater.connectors.file"),
        (registry.connector, "io.debezium.connector.postgresql.PostgresConnector", "headwater.connectors.postgres"),
        (registry.connector, "io.debezium.connector.jdbc.JdbcSinkConnector", "headwater.connectors.postgres"),
        (registry.converter, "org.apache.kafka.connect.json.JsonConverter", "headwater.connect.converters"),
        (registry.header_converter, "org.apache.kafka.connect.storage.SimpleHeaderConverter",
         "headwater.connect.converters"),
        (registry.transformation, "org.apache.kafka.connect.transforms.InsertField$Value",
         "headwater.connect.transforms"),
        (registry.predicate, "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
         "headwater.connect.transforms"),
    ]:
        cls = find(name)
        assert cls.__module__.startswith(module), (name, cls)
    registered = {name for name, _ in registry.pm.list_name_plugin()}
    assert {"headwater.connectors.file", "headwater.connect.builtins"} <= registered


def test_no_builtin_without_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is registered behind the entry points' back: without them the registry is empty."""
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    registry = PluginRegistry()
    assert registry.plugins() == []
    with pytest.raises(UnknownPlugin):
        registry.connector("FileStreamSource")


def test_a_plugin_wins_a_name_it_shares_with_a_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    """As when the built-ins were registered before any plugin, even if the environment lists the
    plugin's distribution first."""
    shadow = ModuleType("shadow_plugin_for_test")

    class FileStreamSourceConnector(SourceConnector):  # the built-in's class name
        def start(self, config: Any) -> None:
            pass

        def task_class(self) -> type[IdleTask]:
            return IdleTask

        def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
            return []

    FileStreamSourceConnector.__module__ = shadow.__name__
    shadow.headwater_connectors = hookimpl(lambda: [FileStreamSourceConnector])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, shadow.__name__, shadow)
    listed = [importlib.metadata.EntryPoint("shadow", shadow.__name__, ENTRY_POINT_GROUP),
              *importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: listed)
    registry = PluginRegistry()
    assert registry.connector("FileStreamSourceConnector") is FileStreamSourceConnector
    assert registry.connector("org.apache.kafka.connect.file.FileStreamSourceConnector").__module__ == \
        "headwater.connectors.file.source"


# What GET /connector-plugins answered while the built-ins were named in a tuple in plugins.py (plus the
# Postgres connectors added since).
# Connectors by their full class name; the others by class name, as their modules inside
# headwater.connect.converters and headwater.connect.transforms may move.
CONNECTORS_BEFORE = [
    {"class": "headwater.connectors.file.sink.FileStreamSinkConnector", "type": "sink", "version": "1.0.0"},
    {"class": "headwater.connectors.postgres.sink.PostgresSinkConnector", "type": "sink", "version": "1.0.0"},
    {"class": "headwater.connectors.spark.sink.SparkParquetSink", "type": "sink", "version": "1.0.0"},
    {"class": "headwater.connectors.file.source.FileStreamSourceConnector", "type": "source", "version": "1.0.0"},
    {"class": "headwater.connectors.file.spooldir.SpoolDirCsvSourceConnector", "type": "source", "version": "1.0.0"},
    {"class": "headwater.connectors.file.spooldir.SpoolDirLineDelimitedSourceConnector", "type": "source",
     "version": "1.0.0"},
    {"class": "headwater.connectors.file.spooldir.SpoolDirSchemaLessJsonSourceConnector", "type": "source",
     "version": "1.0.0"},
    {"class": "headwater.connectors.mirror.checkpoint.MirrorCheckpointConnector", "type": "source",
     "version": "1.0.0"},
    {"class": "headwater.connectors.mirror.heartbeat.MirrorHeartbeatConnector", "type": "source", "version": "1.0.0"},
    {"class": "headwater.connectors.mirror.source.MirrorSourceConnector", "type": "source", "version": "1.0.0"},
    {"class": "headwater.connectors.postgres.source.PostgresConnector", "type": "source", "version": "1.0.0"},
]
OTHERS_BEFORE = {
    "converter": ["ByteArrayConverter", "JsonConverter", "StringConverter"],
    "header_converter": ["ByteArrayConverter", "JsonConverter", "SimpleHeaderConverter", "StringConverter"],
    "predicate": ["HasHeaderKey", "RecordIsTombstone", "TopicNameMatches"],
    "transformation": [
        "CastKey", "CastValue", "DropHeaders", "ExtractFieldKey", "ExtractFieldValue", "ExtractNewRecordState",
        "Filter", "FlattenKey",
        "FlattenValue", "HeaderFromKey", "HeaderFromValue", "HoistFieldKey", "HoistFieldValue", "InsertFieldKey",
        "InsertFieldValue", "InsertHeader", "MaskFieldKey", "MaskFieldValue", "RegexRouter", "ReplaceFieldKey",
        "ReplaceFieldValue", "SetSchemaMetadataKey", "SetSchemaMetadataValue", "TimestampConverterKey",
        "TimestampConverterValue", "TimestampRouter", "ValueToKey",
    ],
}


def _get_connector_plugins(registry: PluginRegistry, **params: str) -> list[dict[str, str]]:
    async def go() -> list[dict[str, str]]:
        config = WorkerConfig.model_validate({"bootstrap.servers": "127.0.0.1:1"})  # never reached here
        app = build_app(cast(Herder, SimpleNamespace(registry=registry, config=config)))
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/connector-plugins", params=params)
            assert response.status == 200
            return cast(list[dict[str, str]], await response.json())

    # Only Headwater's own: a plugin installed next to it (e.g. headwater-datagen) is not part of the record.
    return [p for p in asyncio.run(go()) if p["class"].startswith("headwater.")]


def test_connector_plugins_answer_unchanged() -> None:
    registry = PluginRegistry()
    assert _get_connector_plugins(registry) == CONNECTORS_BEFORE
    everything = _get_connector_plugins(registry, connectorsOnly="false")
    assert all(p["version"] == "1.0.0" for p in everything)
    others: dict[str, list[str]] = {}
    for p in everything:
        if p["type"] not in ("source", "sink"):
            others.setdefault(p["type"], []).append(p["class"].rsplit(".", 1)[-1])
    assert {kind: sorted(names) for kind, names in others.items()} == OTHERS_BEFORE
    assert [p for p in everything if p["type"] in ("source", "sink")] == CONNECTORS_BEFORE


def test_plugin_path_next_to_entry_points(tmp_path: Path) -> None:
    """A plugin dropped onto plugin.path after start is found by the next scan (what the watcher
    triggers), alongside the built-ins, and listeners hear of it."""
    registry = PluginRegistry([str(tmp_path)])
    heard: list[str] = []
    registry.listeners.append(lambda: heard.append("reloaded"))
    assert registry.scan_plugin_path() == []
    (tmp_path / "tick_plugin_for_test.py").write_text(TICK_PLUGIN)
    assert registry.scan_plugin_path() == ["tick_plugin_for_test"]
    assert heard == ["reloaded"]
    assert registry.connector("Tick").__name__ == "TickConnector"
    assert registry.connector("FileStreamSource").__name__ == "FileStreamSourceConnector"
    assert registry.scan_plugin_path() == []  # loaded once


def test_a_plugin_scanned_while_half_copied_loads_once_complete(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that runs while a plugin package is being copied in (its ``__init__.py`` there but still
    empty, or importing a module not copied yet) finds nothing, and the scan after the copy loads it:
    the half-imported module is not kept. plugin.path is given relative, as a worker config may."""
    monkeypatch.chdir(tmp_path)
    registry = PluginRegistry(["plugins"])
    package = tmp_path / "plugins" / "half_copied_plugin" / "src" / "half_copied_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert registry.scan_plugin_path() == []
    (package / "__init__.py").write_text("from .tick import *  # noqa\n")
    assert registry.scan_plugin_path() == []  # tick.py not there yet: logged, nothing loaded
    (package / "tick.py").write_text(TICK_PLUGIN.replace("TickConnector", "HalfCopiedTickConnector"))
    assert registry.scan_plugin_path() == ["half_copied_plugin"]
    assert registry.connector("HalfCopiedTick").__name__ == "HalfCopiedTickConnector"


def test_plugin_path_polled_when_the_kernel_refuses_a_watcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """With the user's inotify instances used up the worker still starts: plugin.path is polled, a WARNING
    names the limit, and a plugin dropped in is loaded by the next poll."""
    def refuse(self: object) -> None:  # the only stand-in: the inotify limits are machine-wide
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(Observer, "start", refuse)
    monkeypatch.setattr(plugins, "WATCH_POLL_SECONDS", 0.1)
    monkeypatch.setattr(plugins, "WATCH_QUIET_SECONDS", 0.05)
    caplog.set_level(logging.WARNING, logger=plugins.__name__)
    registry = PluginRegistry([str(tmp_path)])
    try:
        registry.watch()
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "fs.inotify.max_user_instances" in warnings[0], warnings
        (tmp_path / "polled_tick_plugin_for_test.py").write_text(
            TICK_PLUGIN.replace("TickConnector", "PolledTickConnector"))

        def loaded() -> bool:
            try:
                return registry.connector("PolledTick").__name__ == "PolledTickConnector"
            except UnknownPlugin:
                return False
        wait_until(loaded, "the dropped plugin loaded by polling", timeout=10)
    finally:
        registry.close()


TICK_PLUGIN = """
from headwater.connect.api import SourceConnector, hookimpl


class TickConnector(SourceConnector):
    def start(self, config):
        pass

    def task_class(self):
        raise NotImplementedError

    def task_configs(self, max_tasks):
        return []


@hookimpl
def headwater_connectors():
    return [TickConnector]
"""


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


def test_a_stopping_worker_tells_plugins_once_and_a_failing_plugin_does_not_stop_the_rest() -> None:
    calls: list[str] = []

    class Releases:
        @hookimpl
        def headwater_worker_stopped(self) -> None:
            calls.append("released")

    class Fails:
        @hookimpl
        def headwater_worker_stopped(self) -> None:
            calls.append("failed")
            raise RuntimeError("cannot release")

    registry = PluginRegistry()
    registry.register(Releases(), "releases")
    registry.register(Fails(), "fails")
    worker = Worker("w", WorkerConfig.model_validate({"bootstrap.servers": "127.0.0.1:1"}), registry,
                    MemoryOffsetStore(), lambda *a: None)
    asyncio.run(worker.stop())
    assert sorted(calls) == ["failed", "released"]
    # the hook that returns nothing is no class hook: the registry's plugin lists are unchanged
    assert registry.connector("FileStreamSinkConnector") is not None
