"""Serve one broker until a stop event: what ``headwater broker`` runs."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence

from ..config.broker_config import BrokerConfig
from ..security.credentials import CredentialChange
from .broker_server import BrokerServer

__all__ = ["serve"]

log = logging.getLogger("headwater.broker")


async def serve(config: BrokerConfig, stop: asyncio.Event, add_scram: Sequence[CredentialChange] = ()) -> None:
    """Run a broker until ``stop`` is set, then flush and close every log. ``add_scram``: credentials given at
    start-up that a cluster's broker writes to ZooKeeper once joined (a single node's CLI wrote them already)."""
    server = BrokerServer(config)
    server.add_scram = list(add_scram)
    await server.start()
    # What start-up allocated (kafka-python's message classes, configs, indexes) lives as long as the process:
    # frozen, later collections do not walk it again (a full collection took ~25 ms in a latency run).
    gc.collect()
    gc.freeze()
    log.info("Headwater broker listening on %s (node.id=%d, log.dirs=%s)", ", ".join(server.listener_urls()),
             config.node_id, config.log_dirs)
    if server.metrics_url:
        log.info("Prometheus metrics at %s", server.metrics_url)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()
