"""An embedded Connect worker for tests: a one-member distributed herder and its REST API on a free
loopback port, composed as ``headwater up`` composes them (``serve_distributed``), in a thread of
its own. Its group and internal topics are its own, so several workers can share one broker."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import threading
import time
from types import ModuleType
from typing import Any

from headwater.connect.config import WorkerConfig
from headwater.connect.herder import BaseHerder
from headwater.connect.main import serve_distributed

from .loop import LoopThread
from .names import unique
from .probe import Journal, probe_plugin

__all__ = ["WORKER_SETTINGS", "EmbeddedWorker"]

# Fast for tests: offsets flushed twice a second, short group timeouts, tasks given 3 s to stop, few
# internal partitions, string keys and schemaless JSON values (a connector's config may override them).
WORKER_SETTINGS = {
    "offset.flush.interval.ms": "500",
    "heartbeat.interval.ms": "500",
    "session.timeout.ms": "3000",
    "rebalance.timeout.ms": "10000",
    "scheduled.rebalance.max.delay.ms": "1000",
    "task.shutdown.graceful.timeout.ms": "3000",
    "config.storage.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "offset.storage.partitions": "1",
    "status.storage.partitions": "1",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}


class EmbeddedWorker:
    """A Connect worker on ``bootstrap``, its REST API at ``url``.

    ``plugins`` are modules (or their dotted names) implementing Headwater's hooks, registered on top of
    what the ``headwater`` entry points bring; ``settings`` are worker properties over WORKER_SETTINGS.
    ``probe(connector_class)`` makes the worker run that connector through a probe whose records,
    ``journal``, the conformance checks read.
    """

    def __init__(self, bootstrap: str, plugins: list[ModuleType | str] | None = None,
                 settings: dict[str, str] | None = None, name: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.plugins = list(plugins or [])
        self.name = name or unique("worker")
        self.settings = {
            **WORKER_SETTINGS, "group.id": f"{self.name}-group", "config.storage.topic": f"{self.name}-configs",
            "offset.storage.topic": f"{self.name}-offsets", "status.storage.topic": f"{self.name}-status",
            **(settings or {}), "bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0"}
        self.url = ""
        self.herder: BaseHerder | None = None
        self.journal = Journal()
        self._probed: set[type] = set()
        self._thread: LoopThread | None = None
        self._stop: asyncio.Event | None = None
        self._serving: concurrent.futures.Future[None] | None = None

    def start(self, timeout: float = 60.0) -> EmbeddedWorker:
        config = WorkerConfig.model_validate(self.settings)
        modules = [importlib.import_module(p) if isinstance(p, str) else p for p in self.plugins]
        ready = threading.Event()
        self._thread = LoopThread(f"headwater-{self.name}")

        async def on_ready(url: str, herder: BaseHerder) -> None:
            for module in modules:
                herder.registry.register(module, module.__name__)
            self.url, self.herder = url.rstrip("/"), herder
            ready.set()

        async def serve() -> None:
            self._stop = asyncio.Event()
            await serve_distributed(config, self._stop, on_ready)

        self._serving = self._thread.submit(serve())
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if self._serving.done():
                error = self._serving.exception()
                self.stop()
                raise RuntimeError(f"worker {self.name} stopped before it was ready: {error!r}") from error
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"worker {self.name} was not ready within {timeout}s")
        return self

    def stop(self, timeout: float = 60.0) -> list[str]:
        """Stop the herder (tasks stopped, offsets flushed) and the REST API; returns the names of
        threads that would not end (empty when everything stopped)."""
        if self._thread is None:
            return []
        thread, self._thread = self._thread, None
        try:
            if self._stop is not None and self._serving is not None and not self._serving.done():
                thread.loop.call_soon_threadsafe(self._stop.set)
                self._serving.result(timeout)
        finally:
            leftover = thread.close()
            self.herder = None
        return leftover

    def __enter__(self) -> EmbeddedWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def probe(self, connector_class: str) -> type:
        """Run ``connector_class`` (any name the worker resolves) under the probe from now on; returns the
        original class. Connectors already running keep the class they started with until they restart."""
        if self.herder is None or self._thread is None:
            raise RuntimeError("the worker is not running")
        registry = self.herder.registry
        cls = registry.connector(connector_class)
        original = cls.__mro__[1] if cls in self._probed else cls
        if cls not in self._probed:
            plugin = probe_plugin([original], self.journal)
            registry.register(plugin, f"headwater.testing.probe.{original.__module__}.{original.__qualname__}")
            self._probed.add(registry.connector(connector_class))
        return original

    def running_tasks(self, connector: str) -> list[int]:
        """The numbers of the tasks of ``connector`` this worker runs now (read on the worker's loop)."""
        if self.herder is None or self._thread is None:
            raise RuntimeError("the worker is not running")
        worker = self.herder.worker

        async def read() -> list[int]:
            return [t.task for t in worker.task_ids(connector)]

        return self._thread.run(read())

    def converters(self, connector_config: dict[str, str]) -> tuple[Any, Any]:
        """The key and value converters this worker gives a connector with ``connector_config``."""
        if self.herder is None:
            raise RuntimeError("the worker is not running")
        worker = self.herder.worker  # its own rule (connector settings over the worker's), not a copy of it
        return (worker._converter(connector_config, "key.converter", True),
                worker._converter(connector_config, "value.converter", False))
