"""BaseHerder: what standalone and distributed herders share. Holds connector configs and target
states, keeps statuses, and tells the Worker what to run; implements ``interface.Herder``, the part
the REST API calls. The two differ in where configs live and who runs what.

One coroutine, the loop (``_tick``), changes a herder's state, handling one event at a time from one
queue (Kafka Connect's ``DistributedHerder.tick()``): REST writes wait there for their reply, the
worker's status reports and reconfiguration requests are queued there. Reads answer from the
state as the loop last left it. Nothing here may wait on the loop from inside it."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ..api import Connector, SinkConnector
from ..config import WorkerConfig
from ..loggers import set_level
from ..plugins import PluginRegistry, UnknownPlugin
from ..runtime.worker import ConfigErrors, Worker
from ..runtime.worker_task import RecordTask
from ..status import State, Status, TargetState, TaskId
from ..storage.offsets import OffsetStore
from .errors import BadRequest, Conflict, HerderStopped, NotFound, NotLeader, NotOwner
from .events import AssignmentNeeded, HerderEvent, Rebalanced, Reconfigure, Request, StatusReported, Stop
from .interface import Herder
from .offsets import OffsetsService

__all__ = ["BadRequest", "BaseHerder", "Conflict", "Herder", "NotFound", "NotLeader", "NotOwner"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class BaseHerder(ABC):
    def __init__(self, config: WorkerConfig, registry: PluginRegistry, offsets: OffsetStore, worker_id: str) -> None:
        self.config = config
        self.registry = registry
        self.offsets = offsets
        self.offsets_service = OffsetsService(config.bootstrap_servers, offsets, config.client("admin"))
        self.worker_id = worker_id
        self.worker = Worker(worker_id, config, registry, offsets, self._on_status, self._request_reconfigure,
                             self._values_expired)
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, TargetState] = {}
        self.task_configs: dict[str, list[dict[str, str]]] = {}
        self.statuses: dict[tuple[str, int | None], Status] = {}
        self._events: asyncio.Queue[HerderEvent] = asyncio.Queue()
        self._loop: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @abstractmethod
    async def start(self) -> None: ...

    async def stop(self) -> None:
        await self._stop_loop()
        await self.offsets.stop()

    # -- the loop ------------------------------------------------------------------------------

    def _start_loop(self) -> None:
        self._loop = asyncio.create_task(self._tick(), name=f"herder-{self.worker_id}")

    async def _stop_loop(self) -> None:
        """Stop the worker on the loop (its last statuses are handled there too), then end the loop."""
        if self._loop is None or self._loop.done():
            await self.worker.stop()  # never started (or start failed half-way)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(Stop(done))
        await done
        await self._loop

    def _post(self, event: HerderEvent) -> None:
        self._events.put_nowait(event)

    async def _call(self, what: str, run: Callable[[], Awaitable[T]]) -> T:
        """Run ``run`` on the loop, after every event queued before it; its result or error."""
        if self._loop is None or self._loop.done():
            raise HerderStopped(f"Cannot {what}: the worker is not running")
        reply: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._post(Request(what, run, reply))
        return await reply

    async def _tick(self) -> None:
        while True:
            event = await self._events.get()
            if isinstance(event, Stop):
                try:
                    await self.worker.stop()
                except Exception:
                    log.exception("stopping the worker of %s failed", self.worker_id)
                await self._drain()
                event.done.set_result(None)
                return
            await self._handle_guarded(event)

    async def _handle_guarded(self, event: HerderEvent) -> None:
        """Handle one event; an error goes to the future waiting on it, or to the log."""
        reply: asyncio.Future[Any] | None = (event.reply if isinstance(event, Request | AssignmentNeeded)
                                             else event.applied if isinstance(event, Rebalanced) else None)
        if reply is not None and reply.done():
            return  # its caller gave up waiting (a REST client went away, the membership stopped)
        try:
            if isinstance(event, Request):
                result = await event.run()
                if not event.reply.done():
                    event.reply.set_result(result)
            elif isinstance(event, StatusReported):
                await self._record_status(event)
            elif isinstance(event, Reconfigure):
                await self._reconfigure(event.connector)
            else:
                await self._handle(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if reply is None or reply.done():  # nobody waits for it (a rebalance's new work starts after)
                log.exception("worker %s: handling %s failed", self.worker_id, event)
            else:
                reply.set_exception(exc)

    async def _handle(self, event: HerderEvent) -> None:
        """The events only one kind of herder has (the distributed one's rebalances and config records)."""
        log.warning("worker %s: no handler for %s", self.worker_id, event)

    async def _drain(self) -> None:
        """After the worker stopped: write the statuses it reported last; refuse what else is queued."""
        while not self._events.empty():
            event = self._events.get_nowait()
            if isinstance(event, StatusReported):
                await self._handle_guarded(event)
            elif isinstance(event, Request | AssignmentNeeded):
                if not event.reply.done():
                    event.reply.set_exception(HerderStopped(f"Cannot {getattr(event, 'what', 'assign')}: "
                                                            f"the worker is stopping"))
            elif isinstance(event, Rebalanced | Stop):
                future = event.applied if isinstance(event, Rebalanced) else event.done
                if not future.done():
                    future.cancel()

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
        self._post(StatusReported(connector, task, state, trace))

    def _request_reconfigure(self, name: str) -> None:
        self._post(Reconfigure(name))

    def _values_expired(self, name: str) -> None:
        """What config providers leased to a connector or task here expired: restart both here, on the loop,
        so they resolve their placeholders anew (Kafka's ``config.action.reload=restart``)."""
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def failed(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("restarting %s for its expired config values failed: %s", name, f.exception())

        reply.add_done_callback(failed)
        self._post(Request(f"restart {name}", lambda: self._restart_here(name), reply))

    async def _restart_here(self, name: str) -> None:
        """Restart the connector and the tasks of ``name`` that run on this worker."""
        if name in self.configs:
            await self._restart_connector(name, True, False)

    async def _record_status(self, event: StatusReported) -> None:
        if event.connector not in self.configs:
            return  # deleted since: the worker reported stopping it
        key = (event.connector, event.task)
        current = self.statuses.get(key)
        if event.state == State.UNASSIGNED and current is not None and current.state == State.FAILED:
            return  # keep showing why it failed until it is restarted or deleted
        self.statuses[key] = Status(event.state, self.worker_id, event.trace)

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

    # Each write runs on the loop (``_call``): the public method queues it, ``_<name>`` does it.

    async def put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                   initial_state: TargetState | None = None) -> bool:
        """Create or replace; returns True when created."""
        return await self._call(f"write the config of {name}",
                                lambda: self._put_connector_config(name, config, allow_replace, initial_state))

    async def delete_connector(self, name: str) -> None:
        await self._call(f"delete {name}", lambda: self._delete_connector(name))

    async def set_target_state(self, name: str, target: TargetState) -> None:
        await self._call(f"set {name} to {target}", lambda: self._set_target_state(name, target))

    async def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        return await self._call(f"restart {name}", lambda: self._restart_connector(name, include_tasks, only_failed))

    async def restart_task(self, name: str, task: int) -> None:
        await self._call(f"restart {name}-{task}", lambda: self._restart_task(name, task))

    def verify_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:  # noqa: B027 - optional
        """Hook: a herder of a cluster whose workers sign their requests to each other checks them (KIP-507);
        a standalone worker takes no internal requests."""

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal (POST /connectors/{c}/tasks): a follower running the connector hands its task
        configs to the leader, which writes them. Raises NotLeader on a follower."""
        await self._call(f"write the task configs of {name}", lambda: self._put_task_configs(name, configs))

    async def fence_zombies(self, name: str) -> None:
        """Internal (PUT /connectors/{c}/fence, KIP-618): fence the producers of the source connector's older
        task generations. Only a distributed cluster has them (Kafka's standalone herder does not either)."""
        raise BadRequest("Zombie fencing is only done by a distributed worker's leader (KIP-618)")

    async def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """``PUT /admin/loggers/{namespace}?scope=cluster``: every worker of the cluster."""
        await self._call(f"set the level of {namespace}", lambda: self._set_cluster_logger_level(namespace, level))

    async def alter_offsets(self, name: str, entries: list[dict[str, Any]] | None) -> None:
        """PATCH (entries given) or DELETE (entries None) a stopped connector's offsets."""
        await self._call(f"change the offsets of {name}", lambda: self._alter_offsets(name, entries))

    @abstractmethod
    async def _put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                    initial_state: TargetState | None) -> bool: ...

    @abstractmethod
    async def _delete_connector(self, name: str) -> None: ...

    @abstractmethod
    async def _set_target_state(self, name: str, target: TargetState) -> None: ...

    @abstractmethod
    async def _restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        ...

    @abstractmethod
    async def _restart_task(self, name: str, task: int) -> None: ...

    @abstractmethod
    async def _put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None: ...

    @abstractmethod
    async def _reconfigure(self, name: str) -> None:
        """A running connector's task configs generated again; on the loop (a ``Reconfigure`` event)."""

    async def _set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """A standalone worker is the whole cluster; the distributed herder writes it to the config topic."""
        set_level(namespace, level)

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

    async def _alter_offsets(self, name: str, entries: list[dict[str, Any]] | None) -> None:
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

