"""BaseHerder: what standalone and distributed herders share. Holds connector configs and target
states, keeps statuses, and tells the Worker what to run; implements ``interface.Herder``, the part
the REST API calls. The two differ in where configs live and who runs what."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from typing import Any

from ..api import Connector, SinkConnector
from ..config import WorkerConfig
from ..loggers import set_level
from ..plugins import PluginRegistry, UnknownPlugin
from ..runtime.worker import ConfigErrors, Worker
from ..runtime.worker_task import RecordTask
from ..status import State, Status, TargetState, TaskId
from ..storage.offsets import OffsetStore
from .errors import BadRequest, Conflict, NotFound, NotLeader, NotOwner
from .interface import Herder
from .offsets import OffsetsService

__all__ = ["BadRequest", "BaseHerder", "Conflict", "Herder", "NotFound", "NotLeader", "NotOwner"]

log = logging.getLogger(__name__)


class BaseHerder(ABC):
    def __init__(self, config: WorkerConfig, registry: PluginRegistry, offsets: OffsetStore, worker_id: str) -> None:
        self.config = config
        self.registry = registry
        self.offsets = offsets
        self.offsets_service = OffsetsService(config.bootstrap_servers, offsets)
        self.worker_id = worker_id
        self.worker = Worker(worker_id, config, registry, offsets, self._on_status, self._request_reconfigure)
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, TargetState] = {}
        self.task_configs: dict[str, list[dict[str, str]]] = {}
        self.statuses: dict[tuple[str, int | None], Status] = {}
        self._lock = asyncio.Lock()

    # -- lifecycle -----------------------------------------------------------------------------

    @abstractmethod
    async def start(self) -> None: ...

    async def stop(self) -> None:
        await self.worker.stop()
        await self.offsets.stop()

    def ready(self) -> bool:
        return True

    def startup_failure(self) -> BaseException | None:
        """Why the worker can never become ready, if it cannot."""
        return None

    def rebalance_metrics(self) -> dict[str, Any] | None:
        """Kafka's connect-worker-rebalance-metrics, for a worker in a group (None for a standalone one)."""
        return None

    async def wait_ready(self, stop: asyncio.Event, timeout: float = 120.0) -> bool:
        """Wait until the worker takes requests (a distributed one has joined its group);
        False if ``stop`` was set first. Raises when startup failed for good."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.ready():
            failure = self.startup_failure()
            if failure is not None:
                raise failure
            if stop.is_set():
                return False
            if loop.time() > deadline:
                raise TimeoutError(f"worker {self.worker_id} was not ready after {timeout:.0f}s")
            await asyncio.sleep(0.05)
        return True

    # -- status -------------------------------------------------------------------------------

    def _on_status(self, connector: str, task: int | None, state: State, trace: str | None) -> None:
        if state == State.UNASSIGNED and (connector, task) in self.statuses:
            current = self.statuses[(connector, task)]
            if current.state == State.FAILED:
                return  # keep showing why it failed until it is restarted or deleted
        self.statuses[(connector, task)] = Status(state, self.worker_id, trace)

    def _request_reconfigure(self, name: str) -> None:
        asyncio.ensure_future(self.reconfigure(name))

    # -- reads ----------------------------------------------------------------------------------

    def _require(self, name: str) -> dict[str, str]:
        config = self.configs.get(name)
        if config is None:
            raise NotFound(f"Connector {name} not found")
        return config

    def connector_names(self) -> list[str]:
        return sorted(self.configs)

    def connector_config(self, name: str) -> dict[str, str] | None:
        return self.configs.get(name)

    def local_task_count(self) -> int:
        return len(self.worker.task_ids())

    def record_tasks(self) -> list[tuple[TaskId, RecordTask]]:
        return self.worker.record_tasks()

    def connector_type(self, name: str) -> str:
        try:
            cls = self.registry.connector(self.configs[name].get("connector.class", ""))
        except UnknownPlugin:
            return "unknown"
        return "sink" if issubclass(cls, SinkConnector) else "source"

    def connector_info(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        tasks = [{"connector": name, "task": i} for i in range(len(self.task_configs.get(name, [])))]
        return {"name": name, "config": dict(config), "tasks": tasks, "type": self.connector_type(name)}

    def connector_status(self, name: str) -> dict[str, Any]:
        self._require(name)
        status = self.statuses.get((name, None), Status(State.UNASSIGNED, self.worker_id))
        tasks = []
        for i in range(len(self.task_configs.get(name, []))):
            st = self.statuses.get((name, i), Status(State.UNASSIGNED, self.worker_id))
            tasks.append({"id": i, **st.to_json()})
        return {"name": name, "connector": status.to_json(), "tasks": tasks, "type": self.connector_type(name)}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._require(name)
        if not 0 <= task < len(self.task_configs.get(name, [])):
            raise NotFound(f"Task {name}-{task} not found")
        st = self.statuses.get((name, task), Status(State.UNASSIGNED, self.worker_id))
        return {"id": task, **st.to_json()}

    def task_metrics(self, name: str, task: int) -> dict[str, Any]:
        """A task's own figures (snapshot progress, lag, ...), from the worker that runs it."""
        status = self.task_status(name, task)
        running = self.worker.record_task(TaskId(name, task))
        if running is None:
            self._task_elsewhere(name, task, status)
            raise NotFound(f"Task {name}-{task} is not running")
        return {"id": task, "state": status["state"], "worker_id": self.worker_id, "metrics": running.metrics(),
                "runtime": running.runtime_metrics()}

    def _task_elsewhere(self, name: str, task: int, status: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Hook: a herder that knows which worker runs the task sends the request there."""

    def tasks(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                for i, c in enumerate(self.task_configs.get(name, []))]

    def active_topics(self, name: str) -> list[str]:
        self._require(name)
        return sorted(self.worker.active_topics.get(name, set()))

    def reset_active_topics(self, name: str) -> None:
        self._require(name)
        self.worker.active_topics.get(name, set()).clear()

    def validate(self, props: dict[str, Any]) -> tuple[type[Connector], dict[str, list[str]]]:
        return self.worker.validate(props)

    # -- writes ---------------------------------------------------------------------------------

    def check_config(self, name: str, config: dict[str, Any]) -> dict[str, str]:
        config = {k: ("" if v is None else str(v) if not isinstance(v, bool) else str(v).lower())
                  for k, v in config.items()}
        if config.get("name", name) != name:
            raise BadRequest(f"Connector name configuration ({config.get('name')}) doesn't match connector name "
                             f"in the URL ({name})")
        config["name"] = name
        _, errors = self.worker.validate(config)
        if errors:
            raise ConfigErrors(errors)
        return config

    @abstractmethod
    async def put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                   initial_state: TargetState | None = None) -> bool:
        """Create or replace; returns True when created."""

    @abstractmethod
    async def delete_connector(self, name: str) -> None: ...

    @abstractmethod
    async def set_target_state(self, name: str, target: TargetState) -> None: ...

    @abstractmethod
    async def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None: ...

    @abstractmethod
    async def restart_task(self, name: str, task: int) -> None: ...

    @abstractmethod
    async def reconfigure(self, name: str) -> None: ...

    async def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """``PUT /admin/loggers/{namespace}?scope=cluster``: every worker of the cluster. A standalone
        worker is the whole cluster; the distributed herder writes it to the config topic."""
        set_level(namespace, level)

    @abstractmethod
    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal (POST /connectors/{c}/tasks): a follower running the connector hands its task
        configs to the leader, which writes them. Raises NotLeader on a follower."""

    # -- offsets (KIP-875) ------------------------------------------------------------------------------

    def _require_stopped(self, name: str) -> None:
        self._require(name)
        if self.targets.get(name) != TargetState.STOPPED or self.task_configs.get(name):
            raise BadRequest(f"Connectors must be in the STOPPED state before their offsets can be modified. "
                             f"This can be done for the specified connector by issuing a 'PUT' request to the "
                             f"'/connectors/{name}/stop' endpoint")

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        if self.connector_type(name) == "sink":
            return await self.offsets_service.sink_offsets(name)
        return self.offsets_service.source_offsets(name)

    async def alter_offsets(self, name: str, entries: list[dict[str, Any]] | None) -> None:
        """PATCH (entries given) or DELETE (entries None) a stopped connector's offsets."""
        self._require_stopped(name)
        if self.connector_type(name) == "sink":
            await self.offsets_service.alter_sink_offsets(name, entries)
        else:
            await self.offsets_service.alter_source_offsets(name, entries)

    # -- shared helpers for subclasses -------------------------------------------------------------------

    async def _start_connector_and_tasks(self, name: str) -> None:
        config, target = self.configs[name], self.targets.get(name, TargetState.STARTED)
        ok = await self.worker.start_connector(name, config, target)
        if not ok or target == TargetState.STOPPED:
            self.task_configs[name] = [] if target == TargetState.STOPPED else self.task_configs.get(name, [])
            return
        self.task_configs[name] = await self.worker.task_configs(name)
        for i, task_props in enumerate(self.task_configs[name]):
            await self.worker.start_task(TaskId(name, i), config, task_props, target)

    async def _stop_connector_and_tasks(self, name: str) -> None:
        await self.worker.stop_tasks(self.worker.task_ids(name))
        await self.worker.stop_connector(name)

