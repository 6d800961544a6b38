"""``headwater up``: a broker, a worker and the REST API in one process, on defaults."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from headwater.broker.config import BrokerConfig
from headwater.broker.server import BrokerServer

from .config import WorkerConfig
from .main import serve_standalone

__all__ = ["serve_up"]

log = logging.getLogger("headwater")


async def serve_up(data_dir: str, kafka_listener: str, rest_listener: str, connector_files: list[str],
                   stop: asyncio.Event, plugin_path: str = "plugins") -> None:
    data = Path(data_dir)
    broker_config = BrokerConfig.model_validate({
        "listeners": f"PLAINTEXT://{kafka_listener}", "log.dirs": str(data / "broker"),
        "group.initial.rebalance.delay.ms": "0"})
    broker = BrokerServer(broker_config)
    await broker.start()
    bootstrap = broker.listener_urls()[0].split("://", 1)[1]
    log.info("broker listening on %s (data in %s)", bootstrap, data / "broker")
    worker_config = WorkerConfig.model_validate({
        "bootstrap.servers": bootstrap, "listeners": f"http://{rest_listener}",
        "offset.storage.file.filename": str(data / "connect.offsets"), "offset.flush.interval.ms": "5000",
        "plugin.path": plugin_path, "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"})

    def ready(url: str) -> None:
        log.info("Headwater is up: Kafka bootstrap %s, Connect REST API %s", bootstrap, url)

    try:
        await serve_standalone(worker_config, connector_files, stop, ready)
    finally:
        await broker.stop()
