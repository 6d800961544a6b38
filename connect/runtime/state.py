"""States of connectors and tasks, as the REST API reports them."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["State", "Status", "TargetState", "format_trace"]


class State(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


class TargetState(StrEnum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass
class Status:
    state: State
    worker_id: str
    trace: str | None = None
    generation: int = 0

    def to_json(self) -> dict[str, str]:
        out = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace:
            out["trace"] = self.trace
        return out


def format_trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
