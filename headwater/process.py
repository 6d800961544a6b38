"""Running one asyncio program as a process: uvloop when installed, SIGTERM/SIGINT as a stop event."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Awaitable, Callable

__all__ = ["run", "tune_gc"]


def tune_gc() -> None:
    """Records are short-lived and acyclic (freed by reference counting), but every allocation
    counts towards a generation-0 collection: at hundreds of thousands of records per second the
    default threshold (700) runs the collector thousands of times a second. Raise it, and freeze
    what start-up allocated so later collections do not walk it again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def run(main: Callable[[asyncio.Event], Awaitable[None]], *, record_heavy: bool = True) -> None:
    """Run ``main(stop)`` on uvloop when available, setting ``stop`` on SIGTERM/SIGINT.

    ``record_heavy`` processes (workers, one-process mode) get ``tune_gc()``; the broker keeps
    records as bytes and does not need it.
    """

    async def wrapper() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    if record_heavy:
        tune_gc()
    try:
        import uvloop
    except ImportError:  # pure asyncio works too, only slower
        asyncio.run(wrapper())
    else:
        uvloop.run(wrapper())
