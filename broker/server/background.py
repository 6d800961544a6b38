"""The broker's background tasks (flushing, retention, cleaning, coordinators, replication): started so that a
failure is logged with the task's name, not lost in a task nobody awaits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["start_background"]


def start_background(name: str, run: Callable[[], Coroutine[Any, Any, None]], log: logging.Logger
                     ) -> asyncio.Task[None]:
    """``run()`` as a task on the running loop; an exception is logged (naming ``name``) and ends the task.
    The coroutine is made inside the task: one cancelled before its first step (a stop right after a start)
    then leaves no coroutine behind that was never awaited."""

    async def supervised() -> None:
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background task %s failed", name)
            raise
    return asyncio.get_running_loop().create_task(supervised(), name=name)
