"""KIP-618 zombie fencing in a distributed cluster: what a round is, for the herder that runs it.

As in Kafka's DistributedHerder: when a source connector's task configs were committed after its last
task-count record (``ConfigSnapshot.pending_fencing``), a worker with ``exactly.once.source.support=enabled``
starts none of its tasks until the leader has fenced the transactional producers of the previous generation
(ids ``<group.id>-<connector>-<i>`` for i below the recorded task count) and recorded the new task count.
The fencing itself runs off the herder's loop; only the task-count write is on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

__all__ = ["FENCE_TIMEOUT_MS", "FENCE_RETRY_MAX_S", "ZombieFencing", "needs_fencing_round"]

#: how long a round's InitProducerIds may take (Kafka fences within the REST request timeout, 90 s)
FENCE_TIMEOUT_MS = 60_000
#: a worker waiting for a fencing asks again after a failed request, backing off up to this long
FENCE_RETRY_MAX_S = 10.0


def needs_fencing_round(recorded: int | None, count: int) -> bool:
    """Whether producers must be fenced before the new generation starts: not when no task count was ever
    recorded (no transactional producer ran), nor when one task follows one task (the new task's own
    InitProducerId fences the old one): Kafka's rule."""
    return recorded is not None and (recorded != 1 or count != 1)


@dataclass
class ZombieFencing:
    """A round in progress on the leader: fence ``to_fence`` ids, then record ``to_record`` tasks, unless the
    connector's task configs changed since (``generation``). Every request for the connector waits on ``done``."""

    connector: str
    to_fence: int
    to_record: int
    generation: int
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        # a round whose requesters all went away still ends without an "exception never retrieved" warning
        self.done.add_done_callback(lambda f: f.cancelled() or f.exception())
