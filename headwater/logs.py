"""One log format for the broker and the workers, with the connector and task in context.

Kafka Connect puts ``[connector|task-0]`` (or ``[connector|worker]``) before each line a connector's
code logs (its MDC). Here a context variable carries it: the worker sets it when a task or a connector
starts, asyncio copies it into every coroutine and thread the task starts, and a filter puts it on each
record. ``--log-format json`` writes one JSON object a line for log shippers, with ``connector`` and
``task`` as fields.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FORMATS", "log_context", "setup"]

FORMATS = ("text", "json")
# (connector, "task-0" or "worker") of the code running now, or None outside any connector
_CONTEXT: ContextVar[tuple[str, str] | None] = ContextVar("headwater_log_context", default=None)
TEXT = "%(asctime)s %(levelname)s %(connector_context)s%(name)s: %(message)s"


@contextmanager
def log_context(connector: str, scope: str) -> Iterator[None]:
    """Log lines within carry ``[connector|scope]`` (``scope``: ``task-<n>`` or ``worker``)."""
    token = _CONTEXT.set((connector, scope))
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def enter_context(connector: str, scope: str) -> None:
    """Set the context for the rest of the current asyncio task (a task's own coroutine)."""
    _CONTEXT.set((connector, scope))


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = _CONTEXT.get()
        record.connector_context = f"[{context[0]}|{context[1]}] " if context else ""
        record.connector_name = context[0] if context else None
        record.connector_scope = context[1] if context else None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, str | None] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        connector = getattr(record, "connector_name", None)
        if connector is not None:
            out["connector"] = connector
            out["task"] = getattr(record, "connector_scope", None)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup(level: str = "INFO", fmt: str = "text") -> None:
    """Configure the root logger once: the level, the format, the connector context on every line."""
    if fmt not in FORMATS:
        raise ValueError(f"--log-format {fmt!r}: one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.addFilter(_ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
