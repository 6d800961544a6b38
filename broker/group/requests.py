"""What the group coordinator is asked, as it needs it: the handlers (apis/k11, k12, k14) read the wire
request of whichever version came and fill these in, so the coordinator never looks at versions."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HeartbeatRequest", "JoinRequest", "SyncRequest"]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str  # "" for a new member
    instance_id: str | None  # group.instance.id: static membership (v5+)
    session_timeout_ms: int
    rebalance_timeout_ms: int  # before v1 the session timeout stands for it
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    member_id_required: bool  # v4+: a new member first gets MEMBER_ID_REQUIRED with its id (KIP-394)
    client_id: str
    client_host: str  # "/" + the client's address, as Kafka shows it


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    instance_id: str | None  # v3+
    generation_id: int
    protocol_type: str | None  # v5+: checked against the group's when given
    protocol_name: str | None  # v5+
    assignments: dict[str, bytes]  # member id -> assignment; the leader's only


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    instance_id: str | None  # v3+
    generation_id: int
