"""Run a broker until SIGTERM/SIGINT: ``headwater broker``."""

from __future__ import annotations

import asyncio
import logging
import signal

from .config import BrokerConfig
from .server import BrokerServer

__all__ = ["run_broker", "serve"]

log = logging.getLogger("headwater.broker")


async def serve(config: BrokerConfig, stop: asyncio.Event | None = None) -> None:
    """Run a broker until ``stop`` is set or the process gets SIGTERM/SIGINT."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = BrokerServer(config)
    await server.start()
    log.info("Headwater broker listening on %s (node.id=%d, log.dirs=%s)", ", ".join(server.listener_urls()),
             config.node_id, config.log_dirs)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()


def run_broker(config: BrokerConfig) -> None:
    try:
        import uvloop
    except ImportError:  # pure asyncio works too, only slower
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
