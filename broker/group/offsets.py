"""Committed offsets of every group: OffsetCommit's checks, commits, fetches and deletes.

Offsets live in memory on each Group and persist through the GroupStore. Whether a member
may commit depends on its membership, which the coordinator checks (``check_member``).
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from .group import Group, GroupState, Member
from .records import OffsetAndMetadata
from .store import GroupStore, group_of

__all__ = ["CommittedOffsets"]

TP = tuple[str, int]
# the answer to a commit whose wait for the ISR ended in error (Kafka's GroupMetadataManager.storeOffsets)
_COMMIT_ERRORS = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}
CheckMember = Callable[[Group | None, str, str | None], ErrorCode | None]
Touch = Callable[[Group, Member], None]  # a sign of life: the member's session runs again from now


class CommittedOffsets:
    def __init__(self, groups: dict[str, Group], store: GroupStore, check_member: CheckMember,
                 touch: Touch, coordinator_error: Callable[[str], ErrorCode | None]) -> None:
        self.groups = groups
        self.store = store
        self.check_member = check_member
        self.touch = touch
        # what a request for the group is refused with here (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), if so
        self.coordinator_error = coordinator_error

    def commit_check(self, group_id: str, member_id: str, generation: int, instance_id: str | None) -> ErrorCode | None:
        """Whether this member may commit now; creates a group for simple (generation -1) commits."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        refused = self.coordinator_error(group_id)
        if refused is not None:
            return refused
        group = self.groups.get(group_id)
        if generation < 0 and not member_id:
            if group is None:
                group_of(self.groups, group_id)
                return None
            return None if group.state == GroupState.EMPTY else ErrorCode.UNKNOWN_MEMBER_ID
        # Kafka's order: only a group completing its rebalance (waiting for the leader's SyncGroup)
        # refuses commits outright. While it prepares one, a member of the current generation may
        # still commit: consumers commit from on_partitions_revoked exactly then.
        if group is not None and group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        err = self.check_member(group, member_id, instance_id)
        if err is not None:
            return err
        assert group is not None  # check_member answers UNKNOWN_MEMBER_ID for a missing group
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self.touch(group, group.members[member_id])
        return None

    async def commit(self, group_id: str, offsets: dict[TP, OffsetAndMetadata]) -> ErrorCode:
        """Store the commits and answer once they are safe: on one node at once; in a cluster once the ISR of
        the group's partition has them (``offsets.commit.timeout.ms``), mapping the wait's error as Kafka's
        GroupMetadataManager does. They count (OffsetFetch sees them) only then."""
        code = await self._store(group_id, offsets)
        if not code and self.coordinator_error(group_id) is None:
            group_of(self.groups, group_id).offsets.update(offsets)
        return code

    async def commit_pending(self, group_id: str, producer_id: int, producer_epoch: int,
                             offsets: dict[TP, OffsetAndMetadata]) -> ErrorCode:
        """TxnOffsetCommit: stored as ``commit`` stores, then held until the producer's transaction ends
        (``end_transaction``)."""
        code = await self._store(group_id, offsets, producer_id, producer_epoch)
        if not code and self.coordinator_error(group_id) is None:
            group_of(self.groups, group_id).pending_txn.setdefault(producer_id, {}).update(offsets)
        return code

    async def _store(self, group_id: str, offsets: dict[TP, OffsetAndMetadata], producer_id: int = -1,
                     producer_epoch: int = -1) -> ErrorCode:
        try:
            end = self.store.write_offsets(group_id, offsets, producer_id, producer_epoch)
        except BrokerError as exc:  # leadership moved meanwhile
            return ErrorCode(exc.code)
        code = await self.store.replicated(group_id, end, self.store.config.offsets_commit_timeout_ms)
        if code:
            return _COMMIT_ERRORS.get(ErrorCode(code), ErrorCode.UNKNOWN_SERVER_ERROR)
        return ErrorCode.NONE

    def end_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended in ``__consumer_offsets`` partition ``partition`` (its marker is
        written): its pending offsets of the groups there become committed offsets, or are dropped."""
        for group in self.groups.values():
            held = group.pending_txn.get(producer_id)
            if held is not None and self.store.partition_for(group.group_id) == partition:
                del group.pending_txn[producer_id]
                if commit:
                    group.offsets.update(held)

    def fetch(self, group_id: str, partitions: list[TP] | None) -> dict[TP, OffsetAndMetadata | None]:
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def unstable(self, group_id: str) -> set[TP]:
        """Partitions with offsets of an open transaction (TxnOffsetCommit before its marker): OffsetFetch with
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them (KIP-447)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for held in group.pending_txn.values() for tp in held}

    def delete(self, group_id: str, partitions: list[TP]) -> dict[TP, ErrorCode]:
        """OffsetDelete: refused for topics an active consumer group is subscribed to."""
        group = self.groups[group_id]
        subscribed = group.subscribed_topics() or set()
        result: dict[TP, ErrorCode] = {}
        deleted: list[TP] = []
        for t, p in partitions:
            if t in subscribed and group.state != GroupState.EMPTY:
                result[(t, p)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            if group.offsets.pop((t, p), None) is not None:
                deleted.append((t, p))
            result[(t, p)] = ErrorCode.NONE
        self.store.delete_offsets(group_id, deleted)
        return result
