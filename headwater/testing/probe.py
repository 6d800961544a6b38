"""Watching a connector from inside a real worker: a probed subclass of the connector under test,
registered ahead of the original under the same names, hands out a probed subclass of its task
class. They record what the runtime asked of them (start, poll or put, stop, the offsets read, the
records returned or received) in a Journal that tests read; the plugin's own code runs unchanged.

Only methods the task class itself overrides are wrapped (the worker picks its fast paths by which
methods a task overrides), and each wrapper keeps the wrapped method sync or async as it was.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from headwater.connect.api import (
    Connector,
    EncodedBatch,
    EncodedValues,
    OffsetStorageReader,
    SinkTask,
    SourceBatch,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    TransactionContext,
    hookimpl,
)

__all__ = ["ConnectorJournal", "Journal", "Polled", "TaskJournal", "json_key", "probe_plugin"]

_SOURCE_POLLS = ("poll", "poll_batch", "poll_encoded")
_SINK_PUTS = ("put", "put_batch", "put_encoded")


def json_key(value: Any) -> str:
    """A source partition or offset as a comparable text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Polled:
    """One record a source task returned, before transforms and converters (``encoded``: key and
    value are already the converters' bytes, from ``poll_encoded``)."""

    topic: str
    key: Any
    key_schema: Any
    value: Any
    value_schema: Any
    partition: str  # the source partition as JSON
    offset: str | None  # the source offset as JSON (batches carry one, on their last record)
    encoded: bool = False


@dataclass
class TaskJournal:
    """What one task instance was asked and did, with ``time.monotonic()`` times."""

    connector: str
    instance: int
    config: dict[str, str] = field(default_factory=dict)
    started_at: float | None = None
    stop_called_at: float | None = None
    calls: int = 0  # polls (source) or puts (sink) begun
    calls_after_stop: int = 0  # ... begun after stop() was called
    first_late_call: float | None = None  # seconds after stop() the first of those began
    in_call: int = 0  # polls or puts under way
    offsets_read: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    polled: list[Polled] = field(default_factory=list)  # from polls begun before stop
    delivered: dict[tuple[str, int], set[int]] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        return self.stop_called_at is not None

    def describe(self) -> str:
        late = f" (the first {self.first_late_call:.3f}s after it)" if self.first_late_call is not None else ""
        return (f"task instance #{self.instance} of {self.connector}: {self.calls} calls, "
                f"{self.calls_after_stop} after stop{late}, stop {'called' if self.stopped else 'not called'}"
                + (f", {self.in_call} still under way" if self.in_call else ""))


@dataclass
class ConnectorJournal:
    name: str
    starts: int = 0
    stops: int = 0
    task_configs_calls: list[tuple[int, int]] = field(default_factory=list)  # (max_tasks, configs returned)
    tasks: list[TaskJournal] = field(default_factory=list)


class Journal:
    """Every probed connector and task instance of one worker, by connector name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connectors: dict[str, ConnectorJournal] = {}
        self._task_classes: dict[tuple[type, str], type] = {}

    def connector(self, name: str) -> ConnectorJournal:
        with self.lock:
            return self.connectors.setdefault(name, ConnectorJournal(name))

    def tasks(self, name: str) -> list[TaskJournal]:
        """The task instances of connector ``name`` so far, oldest first (a copy of the list)."""
        with self.lock:
            found = self.connectors.get(name)
            return list(found.tasks) if found else []

    def new_task(self, name: str, config: dict[str, str]) -> TaskJournal:
        journal = self.connector(name)
        with self.lock:
            task = TaskJournal(name, len(journal.tasks), dict(config), time.monotonic())
            journal.tasks.append(task)
            return task

    def task_class(self, cls: type, name: str) -> type:
        with self.lock:
            probed = self._task_classes.get((cls, name))
            if probed is None:
                probed = self._task_classes[(cls, name)] = _probed_task(cls, self, name)
            return probed


def _same_name(probed: type, original: type) -> type:
    # the worker and REST API name classes by module and qualname: the probe must not show
    probed.__module__, probed.__qualname__ = original.__module__, original.__qualname__
    probed.__name__ = original.__name__
    return probed


def _around(fn: Callable[..., Any], before: Callable[[Any, tuple[Any, ...]], Any],
            after: Callable[[Any, Any, Any], None]) -> Callable[..., Any]:
    """``fn`` with ``before(self, args)`` and ``after(self, token, result)`` around it (``result`` None when it
    raised), sync or async as ``fn`` is."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def wrapped_async(self: Any, *args: Any) -> Any:
            token, result = before(self, args), None
            try:
                result = await fn(self, *args)
                return result
            finally:
                after(self, token, result)
        return wrapped_async

    @functools.wraps(fn)
    def wrapped(self: Any, *args: Any) -> Any:
        token, result = before(self, args), None
        try:
            result = fn(self, *args)
            return result
        finally:
            after(self, token, result)
    return wrapped


def _noop(self: Any, token: Any, result: Any) -> None:
    return None


def probed_connector(cls: type[Connector], journal: Journal) -> type[Connector]:
    """A subclass of ``cls`` that records starts, stops and ``task_configs``, and hands out probed tasks."""
    name_of: dict[int, str] = {}  # connector instance -> its name (its config's ``name``)

    def on_start(self: Any, args: tuple[Any, ...]) -> None:
        name = str(getattr(args[0], "name", "") or "")
        name_of[id(self)] = name
        journal.connector(name).starts += 1

    def on_stop(self: Any, args: tuple[Any, ...]) -> None:
        journal.connector(name_of.get(id(self), "")).stops += 1

    def before_configs(self: Any, args: tuple[Any, ...]) -> int:
        return int(args[0])

    def after_configs(self: Any, max_tasks: int, result: Any) -> None:
        if result is not None:
            journal.connector(name_of.get(id(self), "")).task_configs_calls.append((max_tasks, len(result)))

    def task_class(self: Any) -> type:
        return journal.task_class(cls.task_class(self), name_of.get(id(self), ""))

    members: dict[str, Any] = {
        "start": _around(cls.start, on_start, _noop),
        "stop": _around(cls.stop, on_stop, _noop),
        "task_configs": _around(cls.task_configs, before_configs, after_configs),
        "task_class": task_class,
    }
    return _same_name(type(cls.__name__, (cls,), members), cls)


class _RecordingReader(OffsetStorageReader):
    def __init__(self, reader: OffsetStorageReader, task: Callable[[], TaskJournal | None]) -> None:
        self.reader, self.task = reader, task

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        found = self.reader.offset(partition)
        task = self.task()
        if task is not None:
            task.offsets_read.append((json_key(partition), found))
        return found


class _RecordingContext(SourceTaskContext):
    def __init__(self, context: SourceTaskContext, reader: OffsetStorageReader) -> None:
        self.context, self._reader = context, reader
        self.configs = context.configs

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    # what SourceTaskContext defines with a default answer is the runtime's, not that default
    def errant_record_reporter(self) -> Callable[[Any, BaseException], None] | None:
        return self.context.errant_record_reporter()

    def transaction_context(self) -> TransactionContext | None:
        return self.context.transaction_context()

    def __getattr__(self, name: str) -> Any:  # anything else a runtime context offers
        return getattr(self.context, name)


def _polled(result: Any) -> list[Polled]:
    """The records of what a poll returned, whichever of the three forms it took."""
    out: list[Polled] = []
    for item in result if isinstance(result, list) else [result] if result is not None else []:
        if isinstance(item, SourceRecord):
            out.append(Polled(item.topic, item.key, item.key_schema, item.value, item.value_schema,
                              json_key(item.source_partition), json_key(item.source_offset)))
        elif isinstance(item, SourceBatch):
            n = len(item.values)
            out += [Polled(item.topic, None, None, v, item.value_schema, json_key(item.source_partition),
                           json_key(item.source_offset) if i == n - 1 else None) for i, v in enumerate(item.values)]
        elif isinstance(item, EncodedValues):
            n = len(item.values)
            out += [Polled(item.topic, item.key, None, v, None, json_key(item.source_partition),
                           json_key(item.source_offset) if i == n - 1 else None, encoded=True)
                    for i, v in enumerate(item.values)]
        elif isinstance(item, EncodedBatch):
            n = len(item.records)
            out += [Polled(topic, key, None, value, None, json_key(item.source_partition),
                           json_key(item.source_offset) if i == n - 1 else None, encoded=True)
                    for i, (topic, key, value, _) in enumerate(item.records)]
    return out


def _delivered(args: tuple[Any, ...]) -> list[tuple[str, int, int]]:
    batch = args[0]
    if isinstance(batch, list):
        # where each record was read, before transforms
        return [(r.original_topic, r.original_kafka_partition, r.original_kafka_offset) for r in batch]
    return [(batch.topic, batch.kafka_partition, o) for o in batch.offsets]


def _probed_task(cls: Any, journal: Journal, connector: str) -> type:
    is_source = issubclass(cls, SourceTask)
    base = SourceTask if is_source else SinkTask
    mine: dict[int, TaskJournal] = {}

    def task_of(self: Any) -> TaskJournal | None:
        return mine.get(id(self))

    def on_start(self: Any, args: tuple[Any, ...]) -> None:
        mine[id(self)] = journal.new_task(connector, dict(args[0]))

    def on_stop(self: Any, args: tuple[Any, ...]) -> None:
        task = task_of(self)
        if task is not None and task.stop_called_at is None:
            task.stop_called_at = time.monotonic()

    def begin(self: Any, args: tuple[Any, ...]) -> bool:
        """Count the call; True when it came after stop."""
        task = task_of(self)
        if task is None:
            return False
        with journal.lock:
            task.calls += 1
            if task.stop_called_at is not None:
                task.calls_after_stop += 1
                if task.first_late_call is None:
                    task.first_late_call = time.monotonic() - task.stop_called_at
            task.in_call += 1
            if not is_source:
                for topic, partition, offset in _delivered(args):
                    task.delivered.setdefault((topic, partition), set()).add(offset)
            return task.stopped

    def end(self: Any, late: bool, result: Any) -> None:
        task = task_of(self)
        if task is None:
            return
        with journal.lock:
            task.in_call -= 1
            if is_source and result is not None and not late:  # what a late call returns is never sent
                task.polled += _polled(result)

    members: dict[str, Any] = {"start": _around(cls.start, on_start, _noop), "stop": _around(cls.stop, on_stop, _noop)}
    for name in _SOURCE_POLLS if is_source else _SINK_PUTS:
        if getattr(cls, name) is not getattr(base, name):
            members[name] = _around(getattr(cls, name), begin, end)
    if is_source:
        def initialize(self: Any, context: SourceTaskContext) -> None:
            reader = _RecordingReader(context.offset_storage_reader, lambda: task_of(self))
            cls.initialize(self, _RecordingContext(context, reader))
        members["initialize"] = initialize
    return _same_name(type(cls.__name__, (cls,), members), cls)


def probe_plugin(connectors: list[type[Connector]], journal: Journal) -> object:
    """A plugin whose ``headwater_connectors`` answers probed subclasses of ``connectors`` before any
    other plugin does, so that every name of theirs resolves to the probed class."""
    probed = [probed_connector(cls, journal) for cls in connectors]

    class ProbePlugin:
        @hookimpl(tryfirst=True)
        def headwater_connectors(self) -> list[type]:
            return list(probed)

    return ProbePlugin()
