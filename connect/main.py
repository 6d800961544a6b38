"""Serving a worker: ``headwater connect standalone|distributed`` and the worker half of ``headwater up``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from headwater.properties import load_properties

from .config import WorkerConfig, WorkerConfigError
from .herder import BaseHerder, Herder, StandaloneHerder
from .plugins import PluginRegistry
from .rest.server import RestServer
from .storage.offsets import FileOffsetStore, MemoryOffsetStore

__all__ = ["advertised_url", "load_connector_file", "serve_distributed", "serve_standalone", "start_rest"]

log = logging.getLogger("headwater.connect")


def load_connector_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """A connector config file: ``{"name", "config"}`` JSON, a flat JSON map, or ``.properties``."""
    path = Path(path)
    if path.suffix == ".properties":
        config: dict[str, Any] = dict(load_properties(path))
    else:
        data = json.loads(path.read_text())
        config = data.get("config", data) if isinstance(data, dict) else {}
        if isinstance(data, dict) and "name" in data and "name" not in config:
            config = {**config, "name": data["name"]}
    name = config.get("name")
    if not name:
        raise ValueError(f"{path}: the connector config has no \"name\"")
    return str(name), config


async def start_rest(herder: Herder, config: WorkerConfig, registry: PluginRegistry) -> tuple[RestServer, str]:
    """The REST server on every listener; the advertised URL (the one other workers use)."""
    server = RestServer.prepare(config, registry)
    await server.start(herder)
    return server, advertised_url(config)


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host if host not in ("", "0.0.0.0") else "127.0.0.1", 0))
        return sock.getsockname()[1]


def _identity(config: WorkerConfig) -> tuple[WorkerConfig, str]:
    """The worker id (advertised ``host:port``); port 0 is resolved first, since the id needs it."""
    listeners = config.rest_listeners()
    if any(x.port == 0 for x in listeners):
        text = ",".join(str(replace(x, port=_free_port(x.bind_host)) if x.port == 0 else x) for x in listeners)
        config = config.model_copy(update={"listeners": text})
    return config, _worker_id(config)


def _worker_id(config: WorkerConfig) -> str:
    advertised = config.advertised_listener()
    adv_host = config.rest_advertised_host_name or (advertised.host if not advertised.wildcard else "127.0.0.1")
    return f"{adv_host}:{config.rest_advertised_port or advertised.port}"


def advertised_url(config: WorkerConfig) -> str:
    """``<rest.advertised.listener's scheme>://<worker id>/``: how other workers (and the ready line) call it."""
    return f"{config.advertised_listener().scheme}://{_worker_id(config)}/"


Ready = Callable[[str, BaseHerder], Awaitable[None] | None]


async def _serve(herder: BaseHerder, registry: PluginRegistry, config: WorkerConfig, stop: asyncio.Event,
                 ready: Ready | None, mode: str) -> None:
    """Start the herder and the REST API, run until ``stop``, then shut both down."""
    server = None
    try:
        server = RestServer.prepare(config, registry)  # a bad key fails here, before the worker joins its group
        await herder.start()
        await server.start(herder)
        url = advertised_url(config)
        if not await herder.wait_ready(stop):
            return
        log.info("Headwater Connect worker (%s) REST API at %s", mode, url)
        if ready is not None:
            result = ready(url, herder)
            if asyncio.iscoroutine(result):
                await result
        await stop.wait()
    finally:
        if server is not None:
            await server.stop()
        await herder.stop()
        registry.close()


def _registry(config: WorkerConfig) -> PluginRegistry:
    registry = PluginRegistry(config.plugin_paths())
    if config.plugin_paths():
        registry.watch()
    return registry


async def serve_standalone(config: WorkerConfig, connector_files: list[str], stop: asyncio.Event,
                           ready: Ready | None = None) -> None:
    if config.exactly_once_source_support != "disabled":
        raise WorkerConfigError(
            f"exactly.once.source.support: {config.exactly_once_source_support!r} cannot be used by a standalone "
            f"worker: exactly-once source support (KIP-618) needs the distributed worker's transactional offsets "
            f"topic and zombie fencing (Kafka has the key in DistributedConfig only); remove it or set it to disabled")
    config, worker_id = _identity(config)
    registry = _registry(config)
    offsets = (FileOffsetStore(config.offset_storage_file_filename) if config.offset_storage_file_filename
               else MemoryOffsetStore())
    herder = StandaloneHerder(config, registry, offsets, worker_id)
    connectors = [load_connector_file(path) for path in connector_files]

    async def create_then_ready(url: str, herder: BaseHerder) -> None:
        for name, props in connectors:
            await herder.put_connector_config(name, props, allow_replace=True)
        if ready is not None:
            result = ready(url, herder)
            if asyncio.iscoroutine(result):
                await result

    await _serve(herder, registry, config, stop, create_then_ready, "standalone")


async def serve_distributed(config: WorkerConfig, stop: asyncio.Event, ready: Ready | None = None) -> None:
    from .herder.distributed import DistributedHerder

    config, worker_id = _identity(config)
    registry = _registry(config)
    herder = DistributedHerder(config, registry, worker_id, advertised_url(config))
    await _serve(herder, registry, config, stop, ready, f"distributed, group {config.group_id}")
