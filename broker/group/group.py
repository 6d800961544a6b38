"""One group's membership state, for any protocol type (``consumer``, ``connect``, ...).

States follow Kafka's classic group coordinator: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable, and Dead once deleted.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from headwater.kafka.types import DecodeError, Reader

from .records import OffsetAndMetadata

__all__ = ["Group", "GroupState", "Member", "group_of"]


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    deadline: float = 0.0  # on the event loop's clock; the coordinator arms ``expiry`` for it
    expiry: asyncio.TimerHandle | None = None
    join_future: asyncio.Future[dict] | None = None
    sync_future: asyncio.Future[dict] | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids handed out with MEMBER_ID_REQUIRED
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit's offsets by producer id: visible (moved to offsets) when the transaction commits
    pending_txn: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_until: float = 0.0
    state_timestamp: int = field(default_factory=lambda: int(time.time() * 1000))

    def transition(self, state: GroupState) -> None:
        self.state = state
        self.state_timestamp = int(time.time() * 1000)

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a joining member's protocols fit this group's."""
        if not self.members:
            return bool(names)
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self, members: list[Member] | None = None) -> set[str]:
        members = list(self.members.values()) if members is None else members
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for m in members[1:]:
            common &= set(m.protocol_names)
        return common

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred protocol among those all support."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(p for p in m.protocol_names if p in candidates)] += 1
        best = max(votes.values())
        # Ties go to the protocol earliest in the leader-ish (first member's) preference order.
        first = next(iter(self.members.values()))
        return next(p for p in first.protocol_names if votes.get(p) == best)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics subscribed by members of a ``consumer`` group (None when unknown)."""
        if self.protocol_type != "consumer" or not self.protocol:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            topics |= _consumer_subscription(m.metadata_for(self.protocol))
        return topics


def _consumer_subscription(metadata: bytes) -> set[str]:
    """Topics in a consumer-protocol subscription (version, [topic], user data, ...)."""
    try:
        return {topic or "" for topic in Reader(metadata, 2).array(Reader.string) or []}
    except DecodeError:
        return set()


def group_of(groups: dict[str, Group], group_id: str) -> Group:
    """``groups[group_id]``, created empty when missing."""
    group = groups.get(group_id)
    if group is None:
        group = groups[group_id] = Group(group_id)
    return group
