"""The group coordinator: membership and rebalances of every group.

Generic over the protocol type: consumers (``consumer``) and Connect workers
(``connect``) use the same JoinGroup/SyncGroup/Heartbeat/LeaveGroup machinery; only
OffsetDelete looks inside consumer subscriptions. Committed offsets are ``offsets.py``'s
job and persistence in the compacted ``__consumer_offsets`` topic ``store.py``'s.

Everything runs on the event loop, on its clock (``loop.time()``); JoinGroup and SyncGroup
answers are futures that a rebalance completes. Each member's session expires on a timer of its
own, re-armed at every heartbeat (Kafka's heartbeat purgatory), so a member is out of its group
at its deadline, not at the next tick of a sweep.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from headwater.kafka.errors import ErrorCode

from ..config.broker_config import BrokerConfig
from ..topics.cluster import Cluster
from .group import Group, GroupState, Member
from .offsets import CommittedOffsets
from .requests import HeartbeatRequest, JoinRequest, SyncRequest
from .store import OFFSETS_TOPIC, GroupStore, group_of, offsets_partition

if TYPE_CHECKING:
    from ..topics.topic import Partition

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator"]

log = logging.getLogger(__name__)


def _error(code: ErrorCode, **extra: Any) -> dict[str, Any]:
    return {"error_code": code, **extra}


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": []}


class GroupCoordinator:
    def __init__(self, cluster: Cluster, config: BrokerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.groups: dict[str, Group] = {}
        self.store = GroupStore(cluster, config)
        # a ZooKeeper cluster's coordinator: the __consumer_offsets partitions this broker leads, whose groups
        # it coordinates; None on one node, which coordinates every group
        self.led: set[int] | None = set() if config.zookeeper_connect else None
        self.offsets = CommittedOffsets(self.groups, self.store, self._check_member, self._touch,
                                        self.coordinator_error)
        # partitions whose groups are loading (Kafka's loadingPartitions): their groups answer
        # COORDINATOR_LOAD_IN_PROGRESS until the load hands them over
        self._loading: dict[int, asyncio.Task[None]] = {}
        self.load_failures = 0  # loads that failed (logged, and tried again while this broker leads)
        # ids handed out with MEMBER_ID_REQUIRED: forgotten unless they join within the session timeout
        self._pending_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay ``__consumer_offsets`` (created when missing) into memory. In a ZooKeeper cluster the topic is
        the cluster's, made by the first FindCoordinator, and each partition loads when this broker comes to
        lead it (``became_leader``)."""
        if self.led is None:
            self.store.load(self.groups)

    def coordinates(self, group_id: str) -> bool:
        """Whether this broker is the group's coordinator (in a cluster: it leads the group's partition of
        ``__consumer_offsets`` and has loaded it); group requests elsewhere answer NOT_COORDINATOR."""
        return self.coordinator_error(group_id) is None

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """What a request for the group is answered when this broker cannot serve it (Kafka's
        validateGroupStatus): COORDINATOR_LOAD_IN_PROGRESS while its partition loads, NOT_COORDINATOR when
        another broker coordinates it; None when this broker serves it."""
        if self.led is None:
            return None
        count = self.store.partition_count()
        if count <= 0:
            return ErrorCode.NOT_COORDINATOR
        partition = offsets_partition(group_id, count)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None if partition in self.led else ErrorCode.NOT_COORDINATOR

    @property
    def loading(self) -> bool:
        """Whether some partition's groups are loading (ListGroups then answers COORDINATOR_LOAD_IN_PROGRESS)."""
        return bool(self._loading)

    # -- leadership of __consumer_offsets partitions (replication/leadership.py's listener) ------------

    def became_leader(self, topic: str, partition: Partition) -> None:
        """Load the groups of an offsets partition this broker now leads, in the background; its groups answer
        COORDINATOR_LOAD_IN_PROGRESS until they are loaded."""
        if topic != OFFSETS_TOPIC or self.led is None:
            return
        index = partition.index
        former = self._loading.pop(index, None)
        if former is not None:  # never expected: resigning cancels a load
            former.cancel()
        log.info("loading the groups of %s-%d (offsets %d-%d)", OFFSETS_TOPIC, index, partition.log.log_start_offset,
                 partition.log.log_end_offset)
        self._loading[index] = asyncio.get_running_loop().create_task(
            self._load(partition), name=f"loading the groups of {OFFSETS_TOPIC}-{index}")

    async def _load(self, partition: Partition) -> None:
        """Load until it works (a failure is logged and counted, and tried again while this broker leads), then
        hand the groups over and arm their members' sessions."""
        index = partition.index
        started = self._now()
        while True:
            try:
                loaded = await self.store.load_partition(partition)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                self.load_failures += 1
                log.exception("loading the groups of %s-%d failed; again in 1 s", OFFSETS_TOPIC, index)
                await asyncio.sleep(1)
        # no pause from the load's last step to here: nothing was appended after what it read
        for group_id, group in loaded.items():
            self._unload(self.groups.pop(group_id, None))  # a stale copy (never expected: unloaded on resigning)
            self.groups[group_id] = group
            for member in group.members.values():
                self._touch(group, member)
        assert self.led is not None
        self.led.add(index)
        del self._loading[index]
        log.info("coordinating the groups of %s-%d (%d loaded in %.3f s)", OFFSETS_TOPIC, index, len(loaded),
                 self._now() - started)

    def resigned(self, topic: str, partition: Partition) -> None:
        """Unload the groups of an offsets partition this broker no longer leads (or stop loading them): their
        waiting members are answered NOT_COORDINATOR and find the new coordinator."""
        if topic != OFFSETS_TOPIC or self.led is None:
            return
        loading = self._loading.pop(partition.index, None)
        if loading is not None:
            loading.cancel()
        self.led.discard(partition.index)
        count = self.store.partition_count()
        gone = [g for g in self.groups if count == 0 or offsets_partition(g, count) == partition.index]
        for group_id in gone:
            self._unload(self.groups.pop(group_id))
        for key in [k for k in self._pending_timers if k[0] in gone]:
            self._pending_timers.pop(key).cancel()
        log.info("no longer coordinating the groups of %s-%d (%d unloaded%s)", OFFSETS_TOPIC, partition.index,
                 len(gone), ", its load stopped" if loading is not None else "")

    @staticmethod
    def _unload(group: Group | None) -> None:
        if group is None:
            return
        group.state = GroupState.DEAD  # its rebalance timers find it so and do nothing
        for member in group.members.values():
            if member.expiry is not None:
                member.expiry.cancel()
            if member.awaiting_join:
                member.join_future.set_result(join_error(ErrorCode.NOT_COORDINATOR, member.member_id))  # type: ignore[union-attr]
            if member.awaiting_sync:
                member.sync_future.set_result(_error(ErrorCode.NOT_COORDINATOR, assignment=b""))  # type: ignore[union-attr]

    def start(self) -> None:
        """Arm the session timers of the members restored from ``__consumer_offsets``."""
        for group in self.groups.values():
            for member in group.members.values():
                self._touch(group, member)

    async def stop(self) -> None:
        loads = list(self._loading.values())
        self._loading.clear()
        for task in loads:
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        for group in self.groups.values():
            for member in group.members.values():
                if member.expiry is not None:
                    member.expiry.cancel()
        for timer in self._pending_timers.values():
            timer.cancel()
        self._pending_timers.clear()

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    # -- JoinGroup ------------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> dict[str, Any]:
        group_id = req.group_id
        member_id = req.member_id
        instance_id = req.instance_id
        rebalance_timeout = req.rebalance_timeout_ms
        protocols = req.protocols
        client_id = req.client_id
        if not group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, member_id)
        refused = self.coordinator_error(group_id)
        if refused is not None:
            return join_error(refused, member_id)
        config = self.config
        if not config.group_min_session_timeout_ms <= req.session_timeout_ms <= config.group_max_session_timeout_ms:
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = group_of(self.groups, group_id)
        if group.state == GroupState.DEAD:
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(req.protocol_type, [name for name, _ in protocols]):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)

        def new_member(mid: str) -> Member:
            return Member(mid, instance_id, client_id, req.client_host, req.session_timeout_ms, rebalance_timeout,
                          req.protocol_type, protocols)

        if not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if instance_id:
                old_id = group.static_members.get(instance_id)
                if old_id is not None and old_id in group.members:
                    return await self._replace_static(group, old_id, new_member(new_id))
                return await self._add_and_join(group, new_member(new_id))
            if req.member_id_required:
                group.pending_members.add(new_id)
                self._pending_timers[(group_id, new_id)] = asyncio.get_running_loop().call_later(
                    req.session_timeout_ms / 1000, self._on_pending_expiry, group_id, new_id)
                return join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            return await self._add_and_join(group, new_member(new_id))

        if member_id in group.pending_members:
            self._forget_pending(group, member_id)
            return await self._add_and_join(group, new_member(member_id))
        member = group.members.get(member_id)
        if member is None:
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if instance_id and group.static_members.get(instance_id) != member_id:
            return join_error(ErrorCode.FENCED_INSTANCE_ID, member_id)
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout
        self._touch(group, member)
        if group.state == GroupState.STABLE and not changed and member_id != group.leader:
            return self._join_result(group, member)
        if group.state == GroupState.COMPLETING_REBALANCE and not changed:
            return self._join_result(group, member)
        return await self._await_join(group, member)

    async def _add_and_join(self, group: Group, member: Member) -> dict[str, Any]:
        group.members[member.member_id] = member
        if member.group_instance_id:
            group.static_members[member.group_instance_id] = member.member_id
        if group.protocol_type is None or len(group.members) == 1:
            group.protocol_type = member.protocol_type
        self._touch(group, member)
        return await self._await_join(group, member)

    async def _replace_static(self, group: Group, old_id: str, member: Member) -> dict[str, Any]:
        """A static member came back with a new member id: fence the old one, keep its work."""
        old = group.members.pop(old_id)
        if old.expiry is not None:
            old.expiry.cancel()
        if old.awaiting_join:
            old.join_future.set_result(join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))  # type: ignore[union-attr]
        if old.awaiting_sync:
            old.sync_future.set_result(_error(ErrorCode.FENCED_INSTANCE_ID, assignment=b""))  # type: ignore[union-attr]
        member.assignment = old.assignment
        group.members[member.member_id] = member
        group.static_members[member.group_instance_id] = member.member_id  # type: ignore[index]
        if group.leader == old_id:
            group.leader = member.member_id
        self._touch(group, member)
        if group.state == GroupState.STABLE and old.protocols == member.protocols:
            self.store.write_group(group)
            return self._join_result(group, member)
        return await self._await_join(group, member)

    async def _await_join(self, group: Group, member: Member) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        member.join_future = loop.create_future()
        if group.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        elif group.initial_delay_until:
            # Kafka's initial delayed join: each new member extends the wait a little.
            delay = self.config.group_initial_rebalance_delay_ms / 1000
            group.initial_delay_until = min(self._now() + delay, group.rebalance_deadline)
            self._schedule_check(group, group.initial_delay_until)
        self._maybe_complete_join(group)
        return await member.join_future

    def _join_result(self, group: Group, member: Member) -> dict[str, Any]:
        members = []
        if member.member_id == group.leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol or "")} for m in group.members.values()]
        return {"error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader or "", "skip_assignment": False,
                "member_id": member.member_id, "members": members}

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.sync_future.set_result(_error(ErrorCode.REBALANCE_IN_PROGRESS, assignment=b""))  # type: ignore[union-attr]
                    self._touch(group, m)  # its session runs again from the answer, as Kafka's does
        now = self._now()
        initial = group.state == GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE)
        group.rebalance_deadline = now + group.rebalance_timeout_ms() / 1000
        group.initial_delay_until = 0.0
        if initial and self.config.group_initial_rebalance_delay_ms > 0:
            delay = self.config.group_initial_rebalance_delay_ms / 1000
            group.initial_delay_until = min(now + delay, group.rebalance_deadline)
            self._schedule_check(group, group.initial_delay_until)
        self._schedule_check(group, group.rebalance_deadline)
        log.info("group %s preparing to rebalance (generation %d): %s", group.group_id, group.generation, reason)

    def _schedule_check(self, group: Group, at: float) -> None:
        asyncio.get_running_loop().call_at(at + 0.001, self._on_rebalance_timer, group)

    def _on_rebalance_timer(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if self._now() >= group.rebalance_deadline:
            # Members that did not rejoin in time are out of the group.
            for mid, m in list(group.members.items()):
                if not m.awaiting_join:
                    self._remove_member(group, mid, "did not rejoin within the rebalance timeout")
            for mid in list(group.pending_members):
                self._forget_pending(group, mid)
            self._complete_join(group)
        else:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay_until and self._now() < group.initial_delay_until:
            return
        if group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        group.initial_delay_until = 0.0
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.leader = None
            group.transition(GroupState.EMPTY)
            self.store.write_group(group)
            log.info("group %s is empty at generation %d", group.group_id, group.generation)
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE)
        for m in group.members.values():
            self._touch(group, m)
            if m.awaiting_join:
                m.join_future.set_result(self._join_result(group, m))  # type: ignore[union-attr]
        generation = group.generation
        asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_timeout, group, generation)
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id, generation,
                 len(group.members), group.protocol, group.leader)

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE and group.generation == generation:
            for mid, m in list(group.members.items()):
                if not m.awaiting_sync:
                    self._remove_member(group, mid, "did not sync within the rebalance timeout")
            if group.state == GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group, "members missed SyncGroup")

    def _remove_member(self, group: Group, member_id: str, reason: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.expiry is not None:
            member.expiry.cancel()
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member_id:
            del group.static_members[member.group_instance_id]
        if member.awaiting_join:
            member.join_future.set_result(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))  # type: ignore[union-attr]
        if member.awaiting_sync:
            member.sync_future.set_result(_error(ErrorCode.UNKNOWN_MEMBER_ID, assignment=b""))  # type: ignore[union-attr]
        log.info("group %s: member %s removed (%s)", group.group_id, member_id, reason)

    def _member_left(self, group: Group, member_id: str, reason: str) -> None:
        self._remove_member(group, member_id, reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group)

    def _touch(self, group: Group, member: Member) -> None:
        """A sign of life from ``member``: its session expires ``session.timeout.ms`` from now, on a timer of
        its own (the previous one cancelled)."""
        loop = asyncio.get_running_loop()
        if member.expiry is not None:
            member.expiry.cancel()
        member.deadline = loop.time() + member.session_timeout_ms / 1000
        member.expiry = loop.call_at(member.deadline, self._on_session_expiry, group, member)

    def _on_session_expiry(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if member.expiry is not None:
            member.expiry.cancel()  # when called before its timer (``_expire_due``)
            member.expiry = None
        if member.awaiting_join or member.awaiting_sync:
            # Kafka keeps a member waiting on the coordinator alive; completing the join or the sync re-arms
            # its session, and so does this, should the wait end some other way.
            self._touch(group, member)
            return
        self._member_left(group, member.member_id, "session timeout expired")

    def _expire_due(self, group: Group) -> None:
        """Expire the members whose deadline has passed, in case their timers are queued behind the request
        asking (the loop may read a socket before it runs the timers that fell due meanwhile)."""
        now = self._now()
        for member in list(group.members.values()):
            if member.deadline <= now and not (member.awaiting_join or member.awaiting_sync):
                self._on_session_expiry(group, member)

    def _on_pending_expiry(self, group_id: str, member_id: str) -> None:
        self._pending_timers.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)

    def _forget_pending(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        timer = self._pending_timers.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    # -- SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------------

    def _check_member(self, group: Group | None, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if group is None or group.state == GroupState.DEAD or member_id not in group.members:
            if group is not None and instance_id and instance_id in group.static_members:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id and group.static_members.get(instance_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return None

    async def sync(self, req: SyncRequest) -> dict[str, Any]:
        refused = self.coordinator_error(req.group_id)
        if refused is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # as Kafka: the rebalance under way was lost with the coordinator; the member joins again, here
            return _error(ErrorCode.REBALANCE_IN_PROGRESS, assignment=b"")
        if refused is not None:
            return _error(refused, assignment=b"")
        group = self.groups.get(req.group_id)
        err = self._check_member(group, req.member_id, req.instance_id)
        if err is not None:
            return _error(err, assignment=b"")
        assert group is not None
        if req.generation_id != group.generation:
            return _error(ErrorCode.ILLEGAL_GENERATION, assignment=b"")
        if ((req.protocol_type and req.protocol_type != group.protocol_type)
                or (req.protocol_name and req.protocol_name != group.protocol)):
            return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
        member = group.members[req.member_id]
        self._touch(group, member)
        base = {"protocol_type": group.protocol_type, "protocol_name": group.protocol}
        if group.state == GroupState.PREPARING_REBALANCE:
            return _error(ErrorCode.REBALANCE_IN_PROGRESS, assignment=b"", **base)
        if group.state == GroupState.STABLE:
            return {"error_code": 0, "assignment": member.assignment, **base}
        if group.state != GroupState.COMPLETING_REBALANCE:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID, assignment=b"")
        member.sync_future = asyncio.get_running_loop().create_future()
        if req.member_id == group.leader:
            given = req.assignments
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(GroupState.STABLE)
            self.store.write_group(group)
            for m in group.members.values():
                self._touch(group, m)  # Kafka's propagateAssignment: every session runs from the assignment
                if m.awaiting_sync:
                    m.sync_future.set_result({"error_code": 0, "assignment": m.assignment, **base})  # type: ignore[union-attr]
        return await member.sync_future

    def heartbeat(self, req: HeartbeatRequest) -> ErrorCode:
        refused = self.coordinator_error(req.group_id)
        if refused is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # as Kafka: the member's session is armed once its group is loaded
        if refused is not None:
            return refused
        group = self.groups.get(req.group_id)
        if group is not None and group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        err = self._check_member(group, req.member_id, req.instance_id)
        if err is not None:
            return err
        assert group is not None
        member = group.members[req.member_id]
        if req.generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(group, member)
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, identities: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[dict[str, Any]]]:
        refused = self.coordinator_error(group_id)
        if refused is not None:
            return refused, []
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        results = []
        for member_id, instance_id in identities:
            if instance_id:
                found = group.static_members.get(instance_id)
                if found is None or (member_id and member_id != found):
                    code = ErrorCode.UNKNOWN_MEMBER_ID if found is None else ErrorCode.FENCED_INSTANCE_ID
                    results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
                    continue
                member_id = found
            if member_id in group.pending_members:
                self._forget_pending(group, member_id)
                self._maybe_complete_join(group)
            elif member_id in group.members:
                self._member_left(group, member_id, "left the group")
            else:
                results.append({"member_id": member_id, "group_instance_id": instance_id,
                                "error_code": ErrorCode.UNKNOWN_MEMBER_ID})
                continue
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": 0})
        return ErrorCode.NONE, results

    def delete_group(self, group_id: str) -> ErrorCode:
        refused = self.coordinator_error(group_id)
        if refused is not None:
            return refused
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        self._expire_due(group)
        if group.state != GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self.store.delete_group(group_id, list(group.offsets))
        group.transition(GroupState.DEAD)
        del self.groups[group_id]
        log.info("deleted group %s", group_id)
        return ErrorCode.NONE

    def describe(self, group_id: str) -> dict[str, Any]:
        refused = self.coordinator_error(group_id)
        if refused is not None:
            return {"error_code": refused, "group_id": group_id, "group_state": "",
                    "protocol_type": "", "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": 0, "group_id": group_id, "group_state": GroupState.DEAD.value, "protocol_type": "",
                    "protocol_data": "", "members": []}
        self._expire_due(group)
        stable = group.state == GroupState.STABLE
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_metadata": m.metadata_for(group.protocol or ""),
                    "member_assignment": m.assignment if stable else b""} for m in group.members.values()]
        return {"error_code": 0, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "", "protocol_data": group.protocol or "",
                "members": members}

    def list_groups(self, states: list[str] | None, types: list[str] | None) -> list[dict[str, Any]]:
        out = []
        for g in self.groups.values():
            if states and g.state.value not in states:
                continue
            if types and "classic" not in [t.lower() for t in types]:
                continue
            out.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                        "group_state": g.state.value, "group_type": "classic"})
        return out
