"""Logger levels as Kafka Connect's ``/admin/loggers`` reports and sets them (log4j names).

A level set for a namespace applies to that logger and every logger below it. The worker scope
sets them on this worker; the cluster scope reaches every worker through the herder (the
distributed herder writes it to the config topic, and each worker applies it when read).
"""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["LEVELS", "levels", "set_level"]

LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "OFF")
_TO_PYTHON = {"TRACE": "DEBUG", "WARN": "WARNING", "FATAL": "CRITICAL", "OFF": "CRITICAL"}
_LAST_MODIFIED: dict[str, int] = {}


def _names() -> list[str]:
    return ["root", *sorted(n for n in logging.root.manager.loggerDict if n.startswith(("headwater", "aiokafka")))]


def levels() -> dict[str, dict[str, Any]]:
    """``{logger: {"level", "last_modified"}}`` for the root and the worker's own loggers."""
    out = {}
    for n in _names():
        lg = logging.getLogger("" if n == "root" else n)
        out[n] = {"level": logging.getLevelName(lg.getEffectiveLevel()).replace("WARNING", "WARN"),
                  "last_modified": _LAST_MODIFIED.get(n)}
    return out


def set_level(namespace: str, level: str) -> list[str]:
    """Set ``level`` (one of LEVELS) on ``namespace`` and the loggers below it; the names changed."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"Invalid log level '{level}'.")
    root = "" if namespace == "root" else namespace
    changed = [n for n in _names() if n == namespace or (root == "" or n.startswith(root + "."))]
    if namespace not in changed:
        changed.append(namespace)
    now = int(time.time() * 1000)
    for n in changed:
        logging.getLogger("" if n == "root" else n).setLevel(_TO_PYTHON.get(level, level))
        _LAST_MODIFIED[n] = now
    return sorted(changed)
