"""MirrorMaker's dedicated mode: ``headwater mirror mm2.properties`` (Kafka's ``connect-mirror-maker.sh``).

One process runs a distributed Connect worker for each flow of the file whose target is among
``--clusters`` (all flows when not given): the flow's worker settings, on the target cluster, in the
group ``mm2-<source>-<target>``. Once a worker has joined its group, the group's leader writes the
flow's connector configs when the stored ones differ; the other members leave that to it, as MM2's
herders do. Several processes given the same file join the same groups and so share the connectors and
tasks; when one dies, the others take its work over.

Everything in the file is checked before anything is created: the flows, each worker's settings and
each connector's config (the same checks a worker makes when a config is written to it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from headwater.connect.config import WorkerConfig
from headwater.connect.herder import Herder, NotFound, NotLeader
from headwater.connect.main import serve_distributed
from headwater.connect.plugins import PluginRegistry
from headwater.connect.runtime.worker import ConfigErrors, Worker
from headwater.connect.storage.offsets import MemoryOffsetStore
from headwater.properties import format_validation_error, load_properties

from .dedicated import CONNECTORS, Flow, MirrorConfigError, MirrorMakerConfig

__all__ = ["FlowPlan", "describe", "plan_mirror", "serve_mirror"]

log = logging.getLogger("headwater.mirror")

# The worker's own property names: top-level or per-flow keys among these configure the flows' workers.
WORKER_KEYS = frozenset(f.alias for f in WorkerConfig.model_fields.values() if f.alias)
# Each worker's REST API (used by followers to hand task configs to the leader) on a port of its own,
# since one process runs several workers; ``listeners`` in the file (or ``A->B.listeners``) wins.
WORKER_DEFAULTS = {"listeners": "http://127.0.0.1:0"}
CONFIG_RECHECK_SECONDS = 1.0


@dataclass
class FlowPlan:
    """One flow's worker settings and connector configs, checked."""

    flow: Flow
    worker: WorkerConfig
    connectors: dict[str, dict[str, str]]

    @property
    def label(self) -> str:
        return f"{self.flow.name} (heartbeats only)" if self.flow.heartbeats_only else self.flow.name


def plan_mirror(source: str | Path | Mapping[str, str], only_targets: list[str] | None = None) -> list[FlowPlan]:
    """The flows a process runs for an mm2.properties file (a path, or its properties), every setting
    checked; MirrorConfigError names the key of the first problem. Nothing is created or contacted."""
    props = load_properties(source) if isinstance(source, str | Path) else dict(source)
    config = MirrorMakerConfig.from_properties(props, only_targets)
    if not config.flows and not config.heartbeat_flows:
        if only_targets:
            raise MirrorConfigError(f"--clusters: no enabled flow goes into {', '.join(only_targets)}")
        raise MirrorConfigError("clusters: no flow is enabled; enable one with <source>-><target>.enabled = true")
    plans = []
    for flow in config.herders:
        try:
            worker = WorkerConfig.model_validate(flow.worker_config(WORKER_KEYS, WORKER_DEFAULTS))
        except ValidationError as exc:
            raise MirrorConfigError(f"{format_validation_error(exc)} (the worker of the flow {flow.name})") from None
        plans.append(FlowPlan(flow, worker, flow.connector_configs()))
    _check_listeners(plans)
    _check_connectors(plans)
    return plans


def _check_listeners(plans: list[FlowPlan]) -> None:
    """Workers of one process cannot share a fixed REST port."""
    seen: dict[int, str] = {}
    for plan in plans:
        try:
            port = plan.worker.rest_host_port()[1]
        except ValueError:
            raise MirrorConfigError(f"listeners: {plan.worker.listeners!r} is not http://HOST:PORT "
                                    f"(the worker of the flow {plan.flow.name})") from None
        if port and port in seen:
            raise MirrorConfigError(f"listeners: the workers of the flows {seen[port]} and {plan.flow.name} would "
                                    f"both listen on port {port}; use port 0, or set <source>-><target>.listeners")
        seen[port] = plan.flow.name


def _check_connectors(plans: list[FlowPlan]) -> None:
    """Each connector config as a worker checks it when it is written (connector, converters, transforms)."""
    registries: dict[tuple[str, ...], PluginRegistry] = {}
    try:
        for plan in plans:
            paths = tuple(plan.worker.plugin_paths())
            if paths not in registries:
                registries[paths] = PluginRegistry(list(paths))
            registry = registries[paths]
            worker = Worker("mm2-check", plan.worker, registry, MemoryOffsetStore(), lambda *_: None)
            for name, config in plan.connectors.items():
                try:
                    _, errors = worker.validate(config)
                except ConfigErrors as exc:  # no such connector class
                    errors = exc.errors
                if errors:
                    detail = "; ".join(f"{plan.flow.origin(key)}: {msg}" for key, msgs in errors.items()
                                       for msg in msgs)
                    raise MirrorConfigError(f"{detail} ({name} of the flow {plan.flow.name})")
    finally:
        for registry in registries.values():
            registry.close()


async def serve_mirror(source: str | Path | Mapping[str, str] | list[FlowPlan], only_targets: list[str] | None,
                       stop: asyncio.Event) -> None:
    """Run the flows of an mm2.properties file (or of ``plan_mirror``'s answer) until ``stop``.

    A worker that fails stops the others and its error is raised once they have stopped.
    """
    plans = source if isinstance(source, list) else plan_mirror(source, only_targets)
    halt = asyncio.Event()  # stops every worker: set by ``stop`` or by the first failure
    failures: list[BaseException] = []
    ready: set[str] = set()
    background: set[asyncio.Task[None]] = set()

    def guarded(coro: Any, what: str, must_run: bool) -> asyncio.Task[None]:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("%s failed: %s", what, describe(exc))
                log.debug("%s failed", what, exc_info=True)
                failures.append(exc)
                halt.set()
                return
            if must_run and not halt.is_set():
                failures.append(RuntimeError(f"{what} stopped"))
                halt.set()

        task = asyncio.ensure_future(run())
        background.add(task)
        task.add_done_callback(background.discard)
        return task

    def on_ready(plan: FlowPlan) -> Any:
        async def started(url: str, herder: Herder) -> None:
            log.info("flow %s: worker %s joined group %s on %s, REST API at %s", plan.label, herder.worker_id,
                     plan.worker.group_id, plan.worker.bootstrap_servers, url)
            guarded(_configure(plan, herder, halt), f"writing the connector configs of the flow {plan.label}",
                    must_run=False)
            ready.add(plan.flow.name)
            if len(ready) == len(plans):
                log.info("Headwater MirrorMaker running %d flows: %s", len(plans),
                         ", ".join(p.label for p in plans))
        return started

    async def relay() -> None:
        await stop.wait()
        halt.set()

    relay_task = asyncio.ensure_future(relay())
    workers = [guarded(serve_distributed(plan.worker, halt, on_ready(plan)), f"the worker of the flow {plan.label}",
                       must_run=True) for plan in plans]
    try:
        await halt.wait()
        log.info("Headwater MirrorMaker stopping %d flows", len(plans))
        await asyncio.gather(*workers, return_exceptions=True)
    finally:
        relay_task.cancel()
        for task in list(background):
            task.cancel()
        await asyncio.gather(relay_task, *background, return_exceptions=True)
    log.info("Headwater MirrorMaker stopped")
    if failures:
        raise failures[0]


async def _configure(plan: FlowPlan, herder: Herder, halt: asyncio.Event) -> None:
    """Until the flow's connector configs are stored: the leader writes those that differ (and removes a
    heartbeats-only flow's other MirrorMaker connectors); a follower waits, and writes them itself if it
    becomes the leader first."""
    flow = plan.flow
    stale = [name for name in CONNECTORS if name not in plan.connectors]
    told = False
    while not halt.is_set():
        differ = {name: config for name, config in plan.connectors.items() if herder.connector_config(name) != config}
        extra = [name for name in stale if herder.connector_config(name) is not None]
        if not differ and not extra:
            log.info("flow %s: connectors %s in place", plan.label, ", ".join(plan.connectors))
            return
        if _is_leader(herder):
            try:
                for name, config in differ.items():
                    created = await herder.put_connector_config(name, config, allow_replace=True)
                    log.info("flow %s: %s %s", plan.label, "created" if created else "updated", name)
                for name in extra:
                    await herder.delete_connector(name)
                    log.info("flow %s: removed %s (the flow %s is not enabled)", plan.label, name, flow.name)
                return
            except (NotLeader, NotFound):
                pass  # leadership moved, or another leader already removed it: look again
            except ConfigErrors:
                raise  # the checks of plan_mirror passed, so the worker itself differs: nothing to retry
            except Exception as exc:  # the config topic out of reach for a moment: try again
                log.warning("flow %s: writing the connector configs failed (%s); retrying", plan.label,
                            describe(exc))
        elif not told:
            log.info("flow %s: the leader of group %s writes the connector configs", plan.label,
                     plan.worker.group_id)
            told = True
        try:
            await asyncio.wait_for(halt.wait(), CONFIG_RECHECK_SECONDS)
        except TimeoutError:
            pass


def describe(exc: BaseException) -> str:
    """``Type: message``, once (aiokafka's messages already start with their type)."""
    text, kind = str(exc), type(exc).__name__
    return text if text.startswith(kind) else f"{kind}: {text}" if text else kind


def _is_leader(herder: Herder) -> bool:
    membership = getattr(herder, "membership", None)
    return bool(membership is not None and membership.is_leader)
