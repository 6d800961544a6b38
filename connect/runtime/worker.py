"""The Worker runs connector instances and their tasks on this process (Kafka's Worker).

It knows nothing of clusters: a herder tells it what to start and stop, and it reports
every state change back through ``on_status``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from headwater.logs import log_context

from ..api import (
    ConfigException,
    ConnectException,
    Connector,
    ConnectorContext,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
)
from ..api.config import field_errors
from ..api.sandbox import applied
from ..config import CLIENT_KINDS, WorkerConfig
from ..config_providers import build_transformer, close_providers, reverse_transform
from ..kafka.raw_fetch import isolation_level
from ..kafka.security import client_security, is_security_key
from ..plugins import PluginRegistry, UnknownPlugin
from ..status import State, TargetState, TaskId, format_trace
from ..storage.connector_offsets import ConnectorOffsetStore
from ..storage.kafka_log import ensure_compacted_topic
from ..storage.kafka_stores import KafkaOffsetStore
from ..storage.offsets import OffsetStore
from .errors import ErrorHandler
from .exactly_once import exactly_once_problems, transactional_id, worker_exactly_once_enabled
from .exactly_once_task import ExactlyOnceWorkerSourceTask, TaskOffsets, transaction_boundary
from .sandbox import worker_sandbox
from .sink_task import WorkerSinkTask
from .source_task import WorkerSourceTask
from .topic_creation import TopicCreation, topic_creation_errors
from .transform_chain import build_chain
from .worker_task import RecordTask, TaskPipeline, WorkerTask, call

__all__ = ["ConfigErrors", "Worker"]

log = logging.getLogger(__name__)

TASK_CLASS_KEY = "task.class"
#: Kafka's ConnectorConfig key: ``restart`` (default) a connector whose provider values expired, or ``none``.
RELOAD_KEY = "config.action.reload"


class ConfigErrors(ConfigException, ValueError):
    """A connector config with problems, per Connect key."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        count = sum(len(v) for v in errors.values())
        detail = "\n".join(f"{msg}" for msgs in errors.values() for msg in msgs)
        super().__init__(f"Connector configuration is invalid and contains the following {count} error(s):\n"
                         f"{detail}\nYou can also find the above list of errors at the endpoint "
                         f"`/connector-plugins/{{connectorType}}/config/validate`")
        self.errors = errors


StatusCallback = Callable[[str, int | None, State, str | None], None]


class _Context(ConnectorContext):
    def __init__(self, worker: Worker, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.worker, self.name, self.loop = worker, name, loop

    def request_task_reconfiguration(self) -> None:
        self.loop.call_soon_threadsafe(self.worker.on_reconfigure, self.name)

    def raise_error(self, error: Exception) -> None:
        self.loop.call_soon_threadsafe(self.worker.fail_connector, self.name, error)


@dataclass
class _Running:
    connector: Connector
    config: Any
    target: TargetState
    props: dict[str, Any]


class Worker:
    def __init__(self, worker_id: str, config: WorkerConfig, registry: PluginRegistry, offsets: OffsetStore,
                 on_status: StatusCallback, on_reconfigure: Callable[[str], None] | None = None,
                 on_expired: Callable[[str], None] | None = None) -> None:
        self.worker_id = worker_id
        self.config = config
        self.registry = registry
        self.offsets = offsets
        self.on_status = on_status
        self._on_reconfigure = on_reconfigure
        self.connectors: dict[str, _Running] = {}
        self.tasks: dict[TaskId, WorkerTask] = {}
        self.active_topics: dict[str, set[str]] = {}
        # What connectors may touch, in force wherever their code runs: validation, starts, and the tasks
        # and threads started from those (they copy the context).
        self.sandbox = worker_sandbox(config)
        # ``config.providers``: placeholders in connector configs are resolved here, by the worker that starts them
        self.transformer = build_transformer(config.properties(), registry)
        self._on_expired = on_expired  # a connector whose leased values (ConfigData.ttl_ms) expired
        self._leases: dict[tuple[str, int | None], asyncio.TimerHandle] = {}

    # -- config ----------------------------------------------------------------------------------

    def connector_class(self, props: dict[str, Any]) -> type[Connector]:
        name = props.get("connector.class")
        if not name:
            raise ConfigErrors({"connector.class": ['Missing required configuration "connector.class" which has no '
                                                    "default value."]})
        try:
            return self.registry.connector(str(name))
        except UnknownPlugin as exc:
            raise ConfigErrors({"connector.class": [f"Invalid value {name} for configuration connector.class: "
                                                    f"{exc}"]}) from None

    def validate(self, props: dict[str, Any]) -> tuple[type[Connector], dict[str, list[str]]]:
        """Every problem of a connector config, per key (empty dict: valid). Placeholders are resolved first, as
        Kafka's herder does (one that cannot be resolved here stays as written); a message never quotes what a
        placeholder stood for."""
        resolved = self.transformer.transform({k: str(v) for k, v in props.items()}, "the connector config",
                                              strict=False)
        cls, errors = self._validate(resolved.config)
        for key in resolved.keys:
            value, raw = resolved.config[key], str(props[key])
            if value and value != raw:  # a short value is replaced in its own key's messages only
                errors = {k: [msg.replace(value, raw) if k == key or len(value) >= 4 else msg for msg in msgs]
                          for k, msgs in errors.items()}
        return cls, errors

    def _validate(self, props: dict[str, Any]) -> tuple[type[Connector], dict[str, list[str]]]:
        cls = self.connector_class(props)
        with applied(self.sandbox):
            errors = dict(cls.validate(props))
        try:
            build_chain({k: str(v) for k, v in props.items()}, self.registry).close()
        except ConfigException as exc:
            errors.setdefault(exc.field or "transforms", []).append(str(exc))
        for prefix in ("key.converter", "value.converter", "header.converter"):
            name = props.get(prefix)
            if name:
                try:
                    (self.registry.header_converter if prefix == "header.converter" else self.registry.converter)(name)
                except UnknownPlugin as exc:
                    errors.setdefault(prefix, []).append(f"Invalid value {name} for configuration {prefix}: {exc}")
        for key, message in client_override_problems(self.config, props).items():
            errors.setdefault(key, []).append(message)
        if issubclass(cls, SourceConnector):
            for key, messages in topic_creation_errors(props).items():
                errors.setdefault(key, []).extend(messages)
            eos = exactly_once_problems(cls, props, worker_exactly_once_enabled(self.config))
            if eos:
                errors.setdefault("exactly.once.support", []).extend(eos)
        if issubclass(cls, SinkConnector):
            has_topics = bool(str(props.get("topics", "")).strip())
            has_regex = bool(str(props.get("topics.regex", "")).strip())
            if has_topics == has_regex:
                msg = ("Must configure one of topics or topics.regex" if not has_topics else
                       "topics and topics.regex are mutually exclusive options, but both are set.")
                errors.setdefault("topics" if not has_topics else "topics.regex", []).append(msg)
        return cls, errors

    def parse(self, props: dict[str, Any]) -> tuple[type[Connector], Any]:
        """The connector class and its config model, validated once for a start.

        ``validate`` (every problem, for REST) ran when the config was written; a start only
        needs the model, as Kafka's Worker builds one ConnectorConfig. Transforms and converters
        are built once, by the task that uses them, which fails with their error.
        """
        cls = self.connector_class(props)
        try:
            with applied(self.sandbox):
                return cls, cls.config_class.model_validate(props)
        except ValidationError as exc:
            raise ConfigErrors(field_errors(exc, cls.config_class)) from None

    def _task_config(self, name: str, props: dict[str, Any], resolved: dict[str, Any]) -> Any:
        """The connector's validated config for one of its tasks: the running connector's, when it
        runs here with the same properties, else parsed once (from ``resolved``: placeholders replaced)."""
        running = self.connectors.get(name)
        if running is not None and running.props == props:
            return running.config
        return self.parse(resolved)[1]

    def resolve(self, lease: tuple[str, int | None], props: dict[str, Any],
                *more: dict[str, Any]) -> list[dict[str, Any]]:
        """``props`` (and ``more``: a task's own config) with the config providers' placeholders replaced;
        UnresolvedPlaceholders naming each key and provider that failed. Only the worker that starts a connector
        or task calls it. ``lease``: the connector (and task) to restart when a value's ``ttl_ms`` runs out
        (Kafka's ``config.action.reload``)."""
        name, task = lease
        what = f"connector {name}" if task is None else f"task {TaskId(name, task)}"
        results = [self.transformer.transform({k: str(v) for k, v in p.items()}, what) for p in (props, *more)]
        ttls = [r.ttl_ms for r in results if r.ttl_ms is not None]
        self._forget_lease(lease)
        if ttls and self._on_expired is not None and str(props.get(RELOAD_KEY, "restart")).strip().lower() != "none":
            self._leases[lease] = asyncio.get_running_loop().call_later(min(ttls) / 1000, self._expired, lease)
        return [r.config for r in results]

    def _expired(self, lease: tuple[str, int | None]) -> None:
        self._leases.pop(lease, None)
        name, task = lease
        log.info("values the config providers gave %s expired; restarting it to read them anew",
                 name if task is None else TaskId(name, task))
        if self._on_expired is not None:
            self._on_expired(name)

    def _forget_lease(self, lease: tuple[str, int | None]) -> None:
        handle = self._leases.pop(lease, None)
        if handle is not None:
            handle.cancel()

    # -- connectors -------------------------------------------------------------------------------

    async def start_connector(self, name: str, props: dict[str, Any], target: TargetState) -> bool:
        """Start (or just record, when STOPPED) a connector; False if it failed to start."""
        with applied(self.sandbox):
            return await self._start_connector(name, props, target)

    async def _start_connector(self, name: str, props: dict[str, Any], target: TargetState) -> bool:
        if name in self.connectors:
            await self.stop_connector(name)
        try:
            cls, config = self.parse(self.resolve((name, None), props)[0])
            connector = cls()
            connector.initialize(_Context(self, name, asyncio.get_running_loop()))
            self.connectors[name] = _Running(connector, config, target, dict(props))
            if target == TargetState.STOPPED:
                self.on_status(name, None, State.STOPPED, None)
                return True
            with log_context(name, "worker"):  # also on what start() leaves running (copied contexts)
                await call(connector.start, config)
        except Exception as exc:
            log.error("connector %s failed to start", name, exc_info=exc)
            self.connectors.pop(name, None)
            self.on_status(name, None, State.FAILED, format_trace(exc))
            return False
        self.on_status(name, None, State.PAUSED if target == TargetState.PAUSED else State.RUNNING, None)
        return True

    async def stop_connector(self, name: str) -> None:
        self._forget_lease((name, None))
        running = self.connectors.pop(name, None)
        if running is None:
            return
        if running.target != TargetState.STOPPED:
            try:
                with log_context(name, "worker"):
                    await call(running.connector.stop)
            except Exception:
                log.exception("connector %s failed to stop cleanly", name)
        self.on_status(name, None, State.UNASSIGNED, None)

    def is_running(self, name: str) -> bool:
        running = self.connectors.get(name)
        return running is not None and running.target != TargetState.STOPPED

    async def task_configs(self, name: str) -> list[dict[str, str]]:
        running = self.connectors[name]
        max_tasks = running.config.tasks_max
        configs = await call(running.connector.task_configs, max_tasks)
        if len(configs) > max_tasks:
            raise ConnectException(f"connector {name} produced {len(configs)} task configs, more than "
                                   f"tasks.max={max_tasks}")
        path = _class_path(running.connector.task_class())
        # Placeholders back in (Kafka's reverseTransform): what goes to the config topic holds no resolved secret
        return reverse_transform(running.props, [{**{k: str(v) for k, v in c.items()}, TASK_CLASS_KEY: path}
                                                 for c in configs])

    def fail_connector(self, name: str, error: Exception) -> None:
        log.error("connector %s raised an error", name, exc_info=error)
        self.on_status(name, None, State.FAILED, format_trace(error))

    def on_reconfigure(self, name: str) -> None:
        if self._on_reconfigure is not None:
            self._on_reconfigure(name)

    def set_target_state(self, name: str, target: TargetState) -> None:
        running = self.connectors.get(name)
        if running is not None and running.target != TargetState.STOPPED:
            running.target = target
            self.on_status(name, None, State.PAUSED if target == TargetState.PAUSED else State.RUNNING, None)
        for task_id, task in self.tasks.items():
            if task_id.connector == name:
                task.transition_to(target)

    # -- tasks --------------------------------------------------------------------------------------

    def _converter(self, props: dict[str, Any], key: str, is_key: bool | None) -> Any:
        if props.get(key):
            name, source = str(props[key]), {k: str(v) for k, v in props.items()}
        else:
            name, source = self.config.get(key), {**self.config.prefixed(""), key: self.config.get(key)}
        settings = {k[len(key) + 1:]: v for k, v in source.items() if k.startswith(key + ".")}
        if is_key is None:
            inst = self.registry.header_converter(name)()
            inst.configure(settings)
        else:
            inst = self.registry.converter(name)()
            inst.configure(settings, is_key)
        return inst

    def check_task_class(self, name: str, props: dict[str, Any], task_props: dict[str, str]) -> type:
        """The task class of connector ``name``, which ``task_props`` must name in ``task.class``. The
        connector's plugin says which it is (the running instance's ``task_class()``, or a new instance's);
        ``task.class`` is never imported, so a task config written by someone else cannot make a worker
        load and run a class of its choice."""
        running = self.connectors.get(name)
        connector = running.connector if running is not None else self.connector_class(props)()
        task_cls = connector.task_class()
        given, expected = task_props.get(TASK_CLASS_KEY), _class_path(task_cls)
        if given != expected:
            raise ConfigErrors({TASK_CLASS_KEY: [
                f"Invalid value {given} for configuration {TASK_CLASS_KEY}: connector {name} "
                f"({type(connector).__name__}) runs {expected}; a task config may name no other class"
                if given is not None else f'Missing required configuration "{TASK_CLASS_KEY}" which has no '
                                          f"default value (connector {name} runs {expected})"]})
        return task_cls

    async def start_task(self, task_id: TaskId, props: dict[str, Any], task_props: dict[str, str],
                         target: TargetState) -> bool:
        with applied(self.sandbox):  # the task's runner copies it: its start() checks its paths again
            return await self._start_task(task_id, props, task_props, target)

    async def _start_task(self, task_id: TaskId, props: dict[str, Any], task_props: dict[str, str],
                          target: TargetState) -> bool:
        try:
            resolved, task_props = self.resolve((task_id.connector, task_id.task), props, task_props)
            config = self._task_config(task_id.connector, props, resolved)
            props = {**self.connector_class(resolved).runtime_defaults, **resolved}
            task_cls = self.check_task_class(task_id.connector, props, task_props)
            task = task_cls()
            converters = (self._converter(props, "key.converter", True),
                          self._converter(props, "value.converter", False),
                          self._converter(props, "header.converter", None))
            chain = build_chain({k: str(v) for k, v in props.items()}, self.registry)
            errors = ErrorHandler(task_id.connector, task_id.task, config)
            producer_overrides = client_overrides(self.config, props, "producer")
            pipeline = TaskPipeline(task, task_props, converters, chain, errors, self.config.bootstrap_servers,
                                    producer_overrides, self.config.offset_flush_interval_ms,
                                    self.active_topics.setdefault(task_id.connector, set()),
                                    client_overrides(self.config, props, "admin"))
            status: dict[str, Any] = dict(target_state=target, on_status=self._task_status)
            worker_task: WorkerTask
            if isinstance(task, SourceTask):
                creation = TopicCreation.from_config(props, self.config.topic_creation_enable)
                offsets = await self._task_offsets(task_id, props)
                if worker_exactly_once_enabled(self.config):
                    worker_task = self._exactly_once_task(task_id, pipeline, props, offsets, creation, status)
                else:
                    worker_task = WorkerSourceTask(task_id, pipeline, offset_store=offsets.store,
                                                   flush_timeout_ms=self.config.offset_flush_timeout_ms,
                                                   topic_creation=creation, **status)
            elif isinstance(task, SinkTask):
                consumer_overrides = client_overrides(self.config, props, "consumer")
                worker_task = WorkerSinkTask(task_id, pipeline, consumer_overrides=consumer_overrides,
                                             connector_config=config, **status)
            else:
                raise ConnectException(f"{task_cls.__name__} is neither a SourceTask nor a SinkTask")
        except Exception as exc:
            log.error("task %s failed to start", task_id, exc_info=exc)
            self.on_status(task_id.connector, task_id.task, State.FAILED, format_trace(exc))
            return False
        self.tasks[task_id] = worker_task
        worker_task.start()
        return True

    async def _task_offsets(self, task_id: TaskId, props: dict[str, Any]) -> TaskOffsets:
        """Where a source task's offsets go: the connector's own ``offsets.storage.topic`` (KIP-618; created
        compacted like the worker's when missing) over the worker's, or the worker's alone. Distributed mode
        only, as in Kafka: a standalone worker keeps every offset in its file."""
        cfg = self.config
        own_topic = str(props.get("offsets.storage.topic") or "").strip()
        if not own_topic or own_topic == cfg.offset_storage_topic:
            return TaskOffsets(cfg.offset_storage_topic, self.offsets)
        if not isinstance(self.offsets, KafkaOffsetStore):
            log.warning("task %s: offsets.storage.topic=%s is for distributed workers; this worker keeps its "
                        "offsets with its own", task_id, own_topic)
            return TaskOffsets(cfg.offset_storage_topic, self.offsets)
        await ensure_compacted_topic(cfg.bootstrap_servers, own_topic, cfg.offset_storage_partitions,
                                     cfg.offset_storage_replication_factor, "source connector offsets",
                                     "offsets.storage.topic", client_overrides(cfg, props, "admin"))
        own = KafkaOffsetStore(cfg.bootstrap_servers, own_topic, f"connector-offsets-{task_id}",
                               client_overrides(cfg, props, "consumer"))
        return TaskOffsets(own_topic, ConnectorOffsetStore(own, self.offsets))

    def _exactly_once_task(self, task_id: TaskId, pipeline: TaskPipeline[Any], props: dict[str, Any],
                           offsets: TaskOffsets, creation: TopicCreation | None,
                           status: dict[str, Any]) -> WorkerTask:
        """A source task delivering exactly once (KIP-618)."""
        cfg = self.config
        boundary, interval_ms = transaction_boundary(props, cfg.offset_flush_interval_ms)
        txn_id = transactional_id(cfg.group_id, task_id.connector, task_id.task)
        return ExactlyOnceWorkerSourceTask(
            task_id, pipeline, offsets=offsets, transactional_id=txn_id,
            boundary=boundary, boundary_interval_ms=interval_ms, flush_timeout_ms=cfg.offset_flush_timeout_ms,
            topic_creation=creation, **status)

    def _task_status(self, task_id: TaskId, state: State, trace: str | None) -> None:
        self.on_status(task_id.connector, task_id.task, state, trace)

    async def stop_tasks(self, ids: list[TaskId]) -> None:
        for i in ids:
            self._forget_lease((i.connector, i.task))
        tasks = [self.tasks.pop(i) for i in ids if i in self.tasks]
        timeout = self.config.task_shutdown_graceful_timeout_ms / 1000
        await asyncio.gather(*(t.stop(timeout) for t in tasks), return_exceptions=True)

    def record_task(self, task_id: TaskId) -> RecordTask | None:
        """The running task (with its figures: ``metrics``, ``runtime_metrics``, ``exported_metrics``), or
        None when it does not run here."""
        task = self.tasks.get(task_id)
        return task if isinstance(task, RecordTask) else None

    def record_tasks(self) -> list[tuple[TaskId, RecordTask]]:
        """Every task running here, by id."""
        return [(i, t) for i in self.task_ids() if isinstance(t := self.tasks[i], RecordTask)]

    def task_ids(self, connector: str | None = None) -> list[TaskId]:
        return sorted(t for t in self.tasks if connector is None or t.connector == connector)

    async def stop(self) -> None:
        await self.stop_tasks(self.task_ids())
        for name in list(self.connectors):
            await self.stop_connector(name)
        close_providers(self.transformer.providers)
        await asyncio.to_thread(self.registry.worker_stopped)


def _prefixed(props: dict[str, Any], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: str(v) for k, v in props.items() if k.startswith(prefix)}


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def client_overrides(config: WorkerConfig, props: dict[str, Any], kind: str) -> dict[str, str]:
    """A task's ``kind`` (producer, consumer, admin) client properties: the worker's ``<kind>.*`` with the
    connector's ``<kind>.override.*`` on them key by key, as Kafka's Worker merges them (so a connector may
    log in as another user with ``producer.override.sasl.jaas.config`` alone)."""
    return {**config.client(kind), **_prefixed(props, f"{kind}.override.")}


def client_override_problems(config: WorkerConfig, props: dict[str, Any]) -> dict[str, str]:
    """A connector's ``*.override.*`` security settings that cannot be honoured, and a
    ``consumer.override.isolation.level`` that is not Kafka's, by the key given (for
    connector validation: a task would fail with the same message when it builds the client)."""
    problems: dict[str, str] = {}
    try:
        isolation_level(_prefixed(props, "consumer.override."))
    except ValueError as exc:
        problems["consumer.override.isolation.level"] = f"consumer.override.{exc}"
    for kind in CLIENT_KINDS:
        own = _prefixed(props, f"{kind}.override.")
        if not any(is_security_key(k) for k in own):
            continue
        try:
            client_security(client_overrides(config, props, kind))
        except ValueError as exc:
            message = str(exc)
            key = next((k for k in own if message.startswith(k)), "security.protocol")
            problems[f"{kind}.override.{key}"] = f"{kind}.override.{message}"
    return problems
