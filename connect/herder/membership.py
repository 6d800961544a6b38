"""A worker's membership in the ``connect`` group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Speaks the group protocol through the aiokafka adapter (``connect.kafka.GroupClient``), so it works against
the built-in broker, Apache Kafka or Redpanda alike. The herder supplies the member
metadata, computes assignments when this worker leads, and receives each assignment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from headwater.kafka.errors import ErrorCode

from ..api.errors import ConnectException
from ..kafka import GroupClient
from ..runtime.timings import Durations
from .protocol import Assignment, MemberMetadata, decode_assignment, decode_metadata, encode_assignment

__all__ = ["GroupMembership", "JoinResult", "MembershipFailed", "RebalanceFailed"]

log = logging.getLogger(__name__)

COORDINATOR_ERRORS = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.NOT_COORDINATOR}
MEMBER_LOST = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
# Errors no retry can fix: the worker's own configuration is refused.
FATAL_ERRORS = {ErrorCode.INCONSISTENT_GROUP_PROTOCOL: "the group is used by members of another protocol type "
                                                       "(group.id may be shared with a consumer group)",
                ErrorCode.INVALID_GROUP_ID: "group.id is not a valid group id",
                ErrorCode.INVALID_SESSION_TIMEOUT: "session.timeout.ms is outside the broker's "
                                                   "group.min.session.timeout.ms..group.max.session.timeout.ms"}


class MembershipFailed(ConnectException, RuntimeError):
    """The broker refused this worker's membership for a reason retrying cannot fix."""


class RebalanceFailed(ConnectException, RuntimeError):
    """One round of JoinGroup/SyncGroup failed with ``code``; the membership tries again."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class JoinResult:
    generation: int
    member_id: str
    leader_id: str
    protocol: str
    members: dict[str, MemberMetadata]  # only for the leader


Assign = Callable[[JoinResult], Awaitable[dict[str, Assignment]]]
OnAssignment = Callable[[Assignment, int, bool], Awaitable[None]]


class GroupMembership:
    def __init__(self, bootstrap: str, group_id: str, client_id: str, session_timeout_ms: int,
                 rebalance_timeout_ms: int, heartbeat_interval_ms: int, protocols: list[str],
                 metadata: Callable[[], bytes], assign: Assign, on_assignment: OnAssignment,
                 security: Mapping[str, str] | None = None) -> None:
        self.client = GroupClient(bootstrap, client_id, request_timeout_ms=max(rebalance_timeout_ms + 5000, 40000),
                                  security=security)
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.protocols = protocols
        self.metadata = metadata
        self.assign = assign
        self.on_assignment = on_assignment
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol: str | None = None  # the group's subprotocol (sessioned, compatible, default) once joined
        self.coordinator: int | None = None
        self._rejoin = asyncio.Event()
        self._stopping = False
        self.task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.rebalances = Durations()  # Kafka's connect-worker-rebalance-metrics

    async def start(self) -> None:
        await self.client.bootstrap()
        self.task = asyncio.create_task(self._run(), name=f"connect-group-{self.group_id}")

    def request_rejoin(self) -> None:
        self._rejoin.set()

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    async def stop(self) -> None:
        self._stopping = True
        self._rejoin.set()
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.member_id and self.coordinator is not None:
            try:
                await asyncio.wait_for(self.client.leave(self.coordinator, self.group_id, self.member_id), 5)
            except Exception:
                log.debug("LeaveGroup failed", exc_info=True)
        await self.client.close()

    async def _run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                await self._ensure_coordinator()
                await self._join_and_sync()
                backoff = 0.2
                await self._heartbeat_until_rejoin()
            except asyncio.CancelledError:
                raise
            except MembershipFailed as exc:
                log.error("%s", exc)
                self.failure = exc
                return
            except Exception as exc:
                log.warning("group %s: %s; retrying in %.1fs", self.group_id, exc, backoff)
                self.coordinator = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _ensure_coordinator(self) -> None:
        if self.coordinator is None:
            self.coordinator = await self.client.find_coordinator(self.group_id)

    async def _join_and_sync(self) -> None:
        assert self.coordinator is not None
        self._rejoin.clear()
        self.rebalances.begin()  # until an assignment is applied (several rounds may make one rebalance)
        metadata = self.metadata()
        while True:
            resp = await self.client.join(self.coordinator, self.group_id, self.session_timeout_ms,
                                          self.rebalance_timeout_ms, self.member_id, "connect",
                                          [(p, metadata) for p in self.protocols])
            if resp.error == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error in MEMBER_LOST:
                self.member_id = ""
                continue
            if resp.error in COORDINATOR_ERRORS:
                raise RebalanceFailed(f"coordinator unavailable ({resp.error.name})", resp.error)
            if resp.error in FATAL_ERRORS:
                raise MembershipFailed(f"group {self.group_id}: JoinGroup refused: {resp.error.name}: "
                                       f"{FATAL_ERRORS[resp.error]}")
            if resp.error != ErrorCode.NONE:
                raise RebalanceFailed(f"JoinGroup failed with {resp.error.name}", resp.error)
            break
        self.member_id, self.generation, self.leader_id = resp.member_id, resp.generation, resp.leader_id
        self.protocol = resp.protocol
        members: dict[str, MemberMetadata] = {}
        assignments: list[tuple[str, bytes]] = []
        if self.is_leader:
            for member_id, raw in resp.members:
                members[member_id] = decode_metadata(raw)
            result = JoinResult(self.generation, self.member_id, self.leader_id, resp.protocol, members)
            assignments = [(mid, encode_assignment(a)) for mid, a in (await self.assign(result)).items()]
        sync = await self.client.sync(self.coordinator, self.group_id, self.generation, self.member_id, assignments)
        if sync.error == ErrorCode.REBALANCE_IN_PROGRESS or sync.error in MEMBER_LOST:
            if sync.error != ErrorCode.REBALANCE_IN_PROGRESS:
                self.member_id = ""
            self._rejoin.set()
            return
        if sync.error != ErrorCode.NONE:
            raise RebalanceFailed(f"SyncGroup failed with {sync.error.name}", sync.error)
        assignment = decode_assignment(sync.assignment)
        log.info("joined group %s generation %d as %s (leader %s): %d connectors, %d tasks, %d revoked",
                 self.group_id, self.generation, self.member_id, self.leader_id, len(assignment.connectors()),
                 len(assignment.tasks()), sum(len(t) for t in assignment.revoked.values()))
        await self.on_assignment(assignment, self.generation, self.is_leader)
        self.rebalances.end()
        if assignment.revoked:
            self._rejoin.set()  # revoke first, then get the new work in the next round
        elif assignment.delay_ms > 0:
            asyncio.get_running_loop().call_later(assignment.delay_ms / 1000, self._rejoin.set)

    async def _heartbeat_until_rejoin(self) -> None:
        assert self.coordinator is not None
        while not self._rejoin.is_set():
            try:
                await asyncio.wait_for(self._rejoin.wait(), self.heartbeat_interval)
                return
            except TimeoutError:
                pass
            error = await self.client.heartbeat(self.coordinator, self.group_id, self.generation, self.member_id)
            if error == ErrorCode.NONE:
                continue
            if error == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            if error in COORDINATOR_ERRORS:
                self.coordinator = None
            return
