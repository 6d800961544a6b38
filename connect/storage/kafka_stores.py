"""The config, offset and status stores of distributed mode, each on a KafkaBasedLog.

Record keys and JSON values are Kafka Connect's (its KafkaConfigBackingStore, KafkaOffsetBackingStore
and KafkaStatusBackingStore), so a Kafka Connect cluster's topics read the same and a human can
follow them with kcat.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime.exactly_once import TASK_COUNT_RECORD_PREFIX
from ..status import State, Status, TargetState
from .config_events import (
    ConfigEvent,
    ConnectorConfigSeen,
    ConnectorRemoved,
    LoggerLevelSeen,
    RestartRequested,
    TargetStateSeen,
    TaskConfigsCommitted,
    TaskCountRecorded,
)
from .kafka_log import KafkaBasedLog
from .offsets import OffsetStore, offset_value

__all__ = ["ConfigSnapshot", "KafkaConfigStore", "KafkaOffsetStore", "KafkaStatusStore", "SessionKey"]

log = logging.getLogger(__name__)

SESSION_KEY = "session-key"


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        log.warning("an internal topic's record is not JSON (%s); it is read as null", exc)
        return None


class KafkaOffsetStore(OffsetStore):
    """Source offsets in ``offset.storage.topic``: key ``["<connector>",{partition}]``, value the offset."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, security: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.log = KafkaBasedLog(bootstrap, topic, self._on_record, client_id, security)

    def _on_record(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if key is None:
            return
        k = key.decode()
        if value is None:
            self.data.pop(k, None)
        else:
            self.data[k] = _load(value)

    async def start(self) -> None:
        await self.log.start()

    async def stop(self) -> None:
        await self.log.stop()

    async def _persist(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        sends = []
        for key, value in offsets.items():
            fut = await self.log.producer.send(self.log.topic, key=key.encode(), value=offset_value(value))
            sends.append(fut)
        await asyncio.gather(*sends)


@dataclass(frozen=True)
class SessionKey:
    """``session-key`` (KIP-507): the key the leader distributed for signing internal requests, its (Java)
    algorithm and when it was made (ms since the epoch). The key never appears in a repr or a log line."""

    key: bytes = field(repr=False)
    algorithm: str
    creation_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"key": base64.b64encode(self.key).decode(), "algorithm": self.algorithm,
                "creation-timestamp": self.creation_timestamp}

    @classmethod
    def from_json(cls, data: Any) -> SessionKey:
        """ValueError naming the field that is not as Kafka writes it."""
        if not isinstance(data, dict):
            raise ValueError(f"the value is not a JSON object but {type(data).__name__}")
        key, algorithm, created = data.get("key"), data.get("algorithm"), data.get("creation-timestamp")
        if not isinstance(key, str):
            raise ValueError("'key' should be a base64 string")
        if not isinstance(algorithm, str):
            raise ValueError("'algorithm' should be a string")
        if not isinstance(created, int) or isinstance(created, bool):
            raise ValueError("'creation-timestamp' should be a long")
        try:
            raw = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("'key' is not base64") from None
        return cls(raw, algorithm, created)


@dataclass
class ConfigSnapshot:
    offset: int = -1
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    targets: dict[str, TargetState] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    session_key: SessionKey | None = None  # the newest read; the herder signs and verifies with it
    # KIP-618 zombie fencing, as Kafka's KafkaConfigBackingStore keeps it: the task count the leader recorded
    # last (its producers are the ones a later generation must fence), how many times each connector's task
    # configs were replaced, and the connectors whose task configs came after their last task-count record
    task_count_records: dict[str, int] = field(default_factory=dict)
    task_generations: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)


class KafkaConfigStore:
    """Connector configs, task configs (applied atomically at ``commit-<n>``) and target states."""

    def __init__(self, bootstrap: str, topic: str, client_id: str,
                 on_change: Callable[[ConfigEvent], None], security: Mapping[str, str] | None = None) -> None:
        self.log = KafkaBasedLog(bootstrap, topic, self._on_record, client_id, security)
        self.snapshot = ConfigSnapshot()
        self._pending_tasks: dict[str, dict[int, dict[str, str]]] = {}
        self.on_change = on_change  # told of each record once the snapshot holds it
        self.logger_levels: dict[str, str] = {}  # namespace -> level, from logger-cluster-<namespace>

    async def start(self) -> None:
        await self.log.start()

    async def stop(self) -> None:
        await self.log.stop()

    def _on_record(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        self.snapshot.offset = offset
        if key is None:
            return
        k = key.decode()
        data = _load(value)
        snap = self.snapshot
        if k.startswith("connector-"):
            name = k[len("connector-"):]
            if data is None:
                snap.connectors.pop(name, None)
                snap.tasks.pop(name, None)
                snap.targets.pop(name, None)
                self._pending_tasks.pop(name, None)
                self.on_change(ConnectorRemoved(name))
            else:
                snap.connectors[name] = {str(a): str(b) for a, b in (data.get("properties") or {}).items()}
                snap.targets.setdefault(name, TargetState.STARTED)
                self.on_change(ConnectorConfigSeen(name))
        elif k.startswith("target-state-"):
            name = k[len("target-state-"):]
            if data is not None:
                state = data.get("state.v2") or data.get("state") or "STARTED"
                snap.targets[name] = TargetState(state)
                self.on_change(TargetStateSeen(name))
        elif k.startswith(TASK_COUNT_RECORD_PREFIX):
            self._task_count_record(k[len(TASK_COUNT_RECORD_PREFIX):], data, offset)
        elif k.startswith("task-"):
            name, _, num = k[len("task-"):].rpartition("-")
            if data is not None and num.isdigit():
                props = {str(a): str(b) for a, b in (data.get("properties") or {}).items()}
                self._pending_tasks.setdefault(name, {})[int(num)] = props
        elif k.startswith("commit-"):
            name = k[len("commit-"):]
            count = int((data or {}).get("tasks", 0))
            pending = self._pending_tasks.pop(name, {})
            if all(i in pending for i in range(count)):
                snap.tasks[name] = [pending[i] for i in range(count)]
                snap.inconsistent.discard(name)
                if pending:
                    snap.task_generations[name] = snap.task_generations.get(name, -1) + 1
            else:
                snap.inconsistent.add(name)
                log.warning("task configs of %s are incomplete at their commit; ignoring them", name)
            # task configs after the last task-count record: a round of fencing comes before their tasks start
            snap.pending_fencing.add(name)
            self.on_change(TaskConfigsCommitted(name))
        elif k.startswith("logger-cluster-"):
            namespace = k[len("logger-cluster-"):]
            level = (data or {}).get("level") if isinstance(data, dict) else None
            if isinstance(level, str):
                self.logger_levels[namespace] = level
                self.on_change(LoggerLevelSeen(namespace, level))
        elif k.startswith("restart-connector-"):
            name = k[len("restart-connector-"):]
            if data is not None:
                self.on_change(RestartRequested(name, bool(data.get("include-tasks")), bool(data.get("only-failed"))))
        elif k == SESSION_KEY:
            try:
                snap.session_key = SessionKey.from_json(data)
            except ValueError as exc:
                log.error("ignoring the session key at offset %d of %s: %s", offset, self.log.topic, exc)
                return
            log.info("session key updated (%s, created at %d)", snap.session_key.algorithm,
                     snap.session_key.creation_timestamp)

    def _task_count_record(self, name: str, data: Any, offset: int) -> None:
        count = data.get("task-count") if isinstance(data, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            log.error("ignoring the task count record of %s at offset %d of %s: 'task-count' should be a "
                      "non-negative int, not %r", name, offset, self.log.topic, data)
            return
        self.snapshot.task_count_records[name] = count
        self.snapshot.pending_fencing.discard(name)
        self.on_change(TaskCountRecorded(name))

    async def put_connector_config(self, name: str, props: dict[str, str], target: TargetState | None) -> None:
        if target is not None:
            await self.put_target_state(name, target)
        await self.log.send(f"connector-{name}".encode(), _json({"properties": props}))

    async def remove_connector(self, name: str) -> None:
        await self.log.send(f"connector-{name}".encode(), None)
        await self.log.send(f"target-state-{name}".encode(), None)

    async def put_target_state(self, name: str, target: TargetState) -> None:
        legacy = "PAUSED" if target == TargetState.STOPPED else target.value
        await self.log.send(f"target-state-{name}".encode(), _json({"state": legacy, "state.v2": target.value}))

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        # The task records go out together and are acked together (a connector may have thousands: one
        # round trip each took minutes); the commit record follows once every one of them landed.
        acks = [await self.log.write(f"task-{name}-{i}".encode(), _json({"properties": props}))
                for i, props in enumerate(configs)]
        failures = [r for r in await asyncio.gather(*acks, return_exceptions=True) if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        await self.log.send(f"commit-{name}".encode(), _json({"tasks": len(configs)}))

    async def put_task_count_record(self, name: str, count: int) -> None:
        """The leader fenced the producers of the connector's older task generations: record the task count
        of the current one and read it back (Kafka's putTaskCountRecord), so its tasks may start."""
        await self.log.send(f"{TASK_COUNT_RECORD_PREFIX}{name}".encode(), _json({"task-count": count}))
        await self.log.read_to_end()

    async def put_logger_level(self, namespace: str, level: str) -> None:
        await self.log.send(f"logger-cluster-{namespace}".encode(), _json({"level": level}))

    async def put_session_key(self, key: SessionKey) -> None:
        """Write a new session key (the leader does) and read it back, so this worker signs and verifies
        with it from now on (Kafka's putSessionKey)."""
        await self.log.send(SESSION_KEY.encode(), _json(key.to_json()))
        await self.log.read_to_end()

    async def request_restart(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        await self.log.send(f"restart-connector-{name}".encode(),
                            _json({"include-tasks": include_tasks, "only-failed": only_failed}))


class KafkaStatusStore:
    """``status-connector-<n>`` and ``status-task-<n>-<i>``: {"state","trace","worker_id","generation"}."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, security: Mapping[str, str] | None = None) -> None:
        self.log = KafkaBasedLog(bootstrap, topic, self._on_record, client_id, security)
        self.statuses: dict[tuple[str, int | None], Status] = {}

    async def start(self) -> None:
        await self.log.start()

    async def stop(self) -> None:
        await self.log.stop()

    @staticmethod
    def _parse_key(k: str) -> tuple[str, int | None] | None:
        if k.startswith("status-connector-"):
            return k[len("status-connector-"):], None
        if k.startswith("status-task-"):
            name, _, num = k[len("status-task-"):].rpartition("-")
            if num.isdigit():
                return name, int(num)
        return None

    def _on_record(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if key is None:
            return
        parsed = self._parse_key(key.decode())
        if parsed is None:
            return
        data = _load(value)
        if data is None:
            self.statuses.pop(parsed, None)
            return
        current = self.statuses.get(parsed)
        generation = int(data.get("generation", 0))
        # A status from another worker is taken only with a newer (or equal) generation.
        if current is not None and current.worker_id != data.get("worker_id") and generation < current.generation:
            return
        try:
            state = State(data.get("state", "UNASSIGNED"))
        except ValueError:
            log.warning("ignoring the status record %s: %r is not a state", key.decode(), data.get("state"))
            return
        self.statuses[parsed] = Status(state, str(data.get("worker_id", "")), data.get("trace"), generation)

    @staticmethod
    def _key(connector: str, task: int | None) -> bytes:
        return (f"status-connector-{connector}" if task is None else f"status-task-{connector}-{task}").encode()

    async def put(self, connector: str, task: int | None, status: Status) -> None:
        await (await self.write(connector, task, status))

    async def write(self, connector: str, task: int | None, status: Status) -> asyncio.Future[Any]:
        """Take ``status`` as this worker's view now and queue it for the topic; the future is its ack."""
        value = {"state": status.state.value, "trace": status.trace, "worker_id": status.worker_id,
                 "generation": status.generation}
        self.statuses[(connector, task)] = status
        return await self.log.write(self._key(connector, task), _json(value))

    async def flush(self) -> None:
        await self.log.flush()

    async def delete(self, connector: str, task: int | None) -> None:
        self.statuses.pop((connector, task), None)
        await self.log.send(self._key(connector, task), None)
