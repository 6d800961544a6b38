"""What a herder's loop handles: one queue of these, one coroutine (``BaseHerder._tick``) that
changes the herder's state, as Kafka Connect's ``DistributedHerder.tick()`` does.

Anything else that wants the state changed (the REST API, the group membership, the worker's
status reports, the config store's reader) puts an event on the queue; an event that needs an
answer carries the future the loop sets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..status import State
from ..storage.config_events import ConfigEvent
from .membership import JoinResult
from .protocol import Assignment

__all__ = ["AssignmentNeeded", "FencingSettled", "HerderEvent", "Rebalanced", "Reconfigure", "Request", "SessionKeyDue",
           "StatusReported", "Stop"]


@dataclass(frozen=True)
class Request:
    """A REST request (or one of its internal kind): ``run`` on the loop, its result or error into ``reply``."""

    what: str
    run: Callable[[], Awaitable[Any]]
    reply: asyncio.Future[Any]


@dataclass(frozen=True)
class StatusReported:
    """The worker says a connector (``task`` None) or task it runs changed state."""

    connector: str
    task: int | None
    state: State
    trace: str | None


@dataclass(frozen=True)
class Reconfigure:
    """A running connector asks for its task configs to be generated again."""

    connector: str


@dataclass(frozen=True)
class AssignmentNeeded:
    """This worker leads the group: the loop computes every member's assignment into ``reply``."""

    join: JoinResult
    reply: asyncio.Future[dict[str, Assignment]]


@dataclass(frozen=True)
class Rebalanced:
    """A rebalance gave this worker ``assignment`` (what it runs and what it must let go of); the
    membership waits on ``applied`` before it rejoins, so revoked work has stopped by then (new work
    starts after ``applied``, while the membership heartbeats)."""

    assignment: Assignment
    generation: int
    leader: bool
    applied: asyncio.Future[None]


@dataclass(frozen=True)
class Stop:
    """The herder stops: the loop stops the worker, writes its last statuses, and ends."""

    done: asyncio.Future[None]


@dataclass(frozen=True)
class SessionKeyDue:
    """The session key expires (or a write of a new one failed): the leader checks it again (KIP-507)."""


@dataclass(frozen=True)
class FencingSettled:
    """This worker's request for a round of zombie fencing of ``connector`` ended (done, or failed and waited
    out): the connector's source tasks waiting for it are started again (KIP-618)."""

    connector: str


HerderEvent = (Request | StatusReported | Reconfigure | AssignmentNeeded | Rebalanced | Stop | SessionKeyDue
               | FencingSettled | ConfigEvent)
