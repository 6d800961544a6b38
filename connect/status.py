"""Ids and states of connectors and tasks, as the REST API reports them.

Shared by the worker (which runs them), the herders (which own them), the status stores
(which persist them) and the REST layer (which reports them), so it sits above all four.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["State", "Status", "TargetState", "TaskId", "format_trace"]


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


@dataclass(frozen=True, order=True)
class TaskId:
    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


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
