"""Who hears of this broker's leadership changes (the ReplicaManager tells them; it knows nothing of them).

The group coordinator is one: it loads the groups of a ``__consumer_offsets`` partition this broker comes to
lead and unloads them when it stops leading it, so that a group's coordinator moves with its partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..topics.topic import Partition

__all__ = ["LeadershipListener"]


class LeadershipListener(Protocol):
    def became_leader(self, topic: str, partition: Partition) -> None:
        """This broker now leads ``partition`` (of ``topic``); it did not just before."""

    def resigned(self, topic: str, partition: Partition) -> None:
        """This broker no longer leads ``partition`` (another leads it, none does, or it is gone from here)."""
