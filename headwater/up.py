"""``headwater up``: a broker, a worker and the REST API in one process, on defaults.

The worker is a one-member distributed herder on the embedded broker, so connector
configs, source offsets and statuses live in compacted topics and survive a restart;
more workers can join it later with ``headwater connect distributed`` and the same
``group.id``.

The broker serves Prometheus metrics at ``http://127.0.0.1:9404/metrics`` (the JMX exporter's
usual port) unless ``--broker-set metrics.listener=...`` says otherwise (empty: none). That
default is taken only when free: when another process holds the port (a second ``headwater up``
on the same machine), a warning says so and everything else starts as usual. A listener given
explicitly must bind, or the command fails.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.server import BrokerServer
from headwater.connect.config import WorkerConfig, resolve_placeholders
from headwater.connect.herder import Herder, NotLeader
from headwater.connect.main import load_connector_file, serve_distributed

from .properties import parse_overrides, validate_model

__all__ = ["serve_up"]

log = logging.getLogger("headwater")

DEFAULT_METRICS_LISTENER = "http://127.0.0.1:9404"


async def serve_up(data_dir: str, kafka_listener: str, rest_listener: str, connector_files: list[str],
                   stop: asyncio.Event, plugin_path: str = "plugins", worker_overrides: list[str] | None = None,
                   broker_overrides: list[str] | None = None) -> None:
    data = Path(data_dir)
    overrides = parse_overrides(broker_overrides or [])
    broker_config = validate_model(BrokerConfig, {
        "listeners": f"PLAINTEXT://{kafka_listener}", "log.dirs": str(data / "broker"),
        "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000", **overrides})
    broker = BrokerServer(broker_config)
    await broker.start()
    bootstrap = broker.listener_urls()[0].split("://", 1)[1]
    log.info("broker listening on %s (data in %s)", bootstrap, data / "broker")
    if "metrics.listener" not in overrides:
        await _default_metrics(broker)
    if broker.metrics_url:
        log.info("broker metrics for Prometheus at %s", broker.metrics_url)
    worker_config = resolve_placeholders(WorkerConfig.model_validate({
        "bootstrap.servers": bootstrap, "listeners": f"http://{rest_listener}", "group.id": "headwater-up",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1", "offset.storage.partitions": "5", "status.storage.partitions": "1",
        "offset.flush.interval.ms": "5000", "heartbeat.interval.ms": "500", "session.timeout.ms": "3000",
        "scheduled.rebalance.max.delay.ms": "1000", "plugin.path": plugin_path,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        **parse_overrides(worker_overrides or [])}))  # ${provider:path:key} in --set values, as a worker's own
    connectors = [load_connector_file(path) for path in connector_files]

    async def ready(url: str, herder: Herder) -> None:
        await _create(herder, connectors)
        log.info("Headwater is up: Kafka bootstrap %s, Connect REST API %s", bootstrap, url)

    try:
        await serve_distributed(worker_config, stop, ready)
    finally:
        await broker.stop()


async def _default_metrics(broker: BrokerServer) -> None:
    """Serve the broker's metrics on the default listener, or warn (and carry on) when it is taken."""
    try:
        await broker.serve_metrics(DEFAULT_METRICS_LISTENER)
    except OSError as exc:
        log.warning("broker metrics are off: %s; choose another address with --broker-set metrics.listener="
                    "http://HOST:PORT", exc.strerror)


async def _create(herder: Herder, connectors: list[tuple[str, dict[str, Any]]]) -> None:
    """Create (or update) the connectors given on the command line once the worker leads its group."""
    for name, props in connectors:
        for _ in range(120):
            try:
                await herder.put_connector_config(name, props, allow_replace=True)
                break
            except NotLeader:
                await asyncio.sleep(0.25)  # still joining its group
        else:
            log.error("could not create connector %s: this worker never became the leader", name)
