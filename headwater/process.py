"""Running one asyncio program as a process: uvloop when installed, SIGTERM/SIGINT as a stop event."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import signal
from collections.abc import Awaitable, Callable

__all__ = ["run", "tune_gc", "tune_malloc"]

# glibc's mallopt parameters, and the thresholds record-heavy processes get
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 8 << 20
TRIM_THRESHOLD = 32 << 20


def tune_gc() -> None:
    """Records are short-lived and acyclic (freed by reference counting), but every allocation
    counts towards a generation-0 collection: at hundreds of thousands of records per second the
    default threshold (700) runs the collector thousands of times a second. Raise it, and freeze
    what start-up allocated so later collections do not walk it again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def tune_malloc() -> bool:
    """Buffers of about a megabyte (file chunks, record batches, fetch responses, joined lines) are
    allocated and freed many times a second. glibc serves an allocation above its mmap threshold with
    fresh pages from the kernel and returns the heap's free top above its trim threshold; both thresholds
    start low (128 KiB, 256 KiB) and rise as big buffers are freed, so whether such buffers are reused
    or faulted in afresh (a page fault per 4 KiB) differs from run to run: 46k-172k faults for the same
    million JSON records through a file pipeline. Fixed thresholds keep them in the heap. Only under glibc,
    and not over the user's own MALLOC_* or GLIBC_TUNABLES malloc settings; True when applied."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    if (not libc.startswith("glibc") or any(k.startswith("MALLOC_") for k in os.environ)
            or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def run(main: Callable[[asyncio.Event], Awaitable[None]], *, record_heavy: bool = True) -> None:
    """Run ``main(stop)`` on uvloop when available, setting ``stop`` on SIGTERM/SIGINT.

    ``record_heavy`` processes (workers, one-process mode) get ``tune_gc()`` and ``tune_malloc()``; the
    broker keeps records as bytes and does not need them.
    """

    async def wrapper() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    if record_heavy:
        tune_gc()
        tune_malloc()
    try:
        import uvloop
    except ImportError:  # pure asyncio works too, only slower
        asyncio.run(wrapper())
    else:
        uvloop.run(wrapper())
