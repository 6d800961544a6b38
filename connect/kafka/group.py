"""The group protocol's four requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
FindCoordinator, sent through aiokafka's low-level client.

aiokafka has no public API for a group member that is not a consumer; Connect workers are
such members (protocol type ``connect``). The answers come back as plain dataclasses with
error codes by name, so callers never see aiokafka's protocol classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.group import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

from headwater.kafka.errors import ErrorCode

from .clients import explained
from .security import client_security

__all__ = ["GroupClient", "Joined", "Synced"]


@dataclass
class Joined:
    error: ErrorCode
    generation: int
    protocol: str
    leader_id: str
    member_id: str
    members: list[tuple[str, bytes]] = field(default_factory=list)  # (member id, metadata); leader only


@dataclass
class Synced:
    error: ErrorCode
    assignment: bytes


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class GroupClient:
    """One connection pool to the cluster for a group member; coordinator node ids as aiokafka knows them."""

    def __init__(self, bootstrap: str, client_id: str, request_timeout_ms: int,
                 security: Mapping[str, str] | None = None) -> None:
        self._client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms, **client_security(security or {}))

    async def bootstrap(self) -> None:
        try:
            await self._client.bootstrap()
        except KafkaConnectionError as exc:
            raise await explained(exc, self._client) from exc

    async def close(self) -> None:
        await self._client.close()

    async def find_coordinator(self, group_id: str) -> int:
        """The node id of ``group_id``'s coordinator (raises while none is available)."""
        return int(await self._client.coordinator_lookup(0, group_id))

    async def join(self, coordinator: int, group_id: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                   member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]]) -> Joined:
        request = JoinGroupRequest(group_id, session_timeout_ms, rebalance_timeout_ms, member_id, None,
                                   protocol_type, protocols)
        resp = await self._client.send(coordinator, request)
        # Member entries are (id, metadata) or, from v5, (id, instance id, metadata).
        members = [(m[0], m[-1]) for m in resp.members]
        return Joined(_code(resp.error_code), resp.generation_id, resp.group_protocol, resp.leader_id,
                      resp.member_id, members)

    async def sync(self, coordinator: int, group_id: str, generation: int, member_id: str,
                   assignments: list[tuple[str, bytes]]) -> Synced:
        resp = await self._client.send(coordinator, SyncGroupRequest(group_id, generation, member_id, None,
                                                                      assignments))
        return Synced(_code(resp.error_code), resp.member_assignment)

    async def heartbeat(self, coordinator: int, group_id: str, generation: int, member_id: str) -> ErrorCode:
        resp = await self._client.send(coordinator, HeartbeatRequest(group_id, generation, member_id))
        return _code(resp.error_code)

    async def leave(self, coordinator: int, group_id: str, member_id: str) -> ErrorCode:
        resp = await self._client.send(coordinator, LeaveGroupRequest(group_id, member_id))
        return _code(resp.error_code)
