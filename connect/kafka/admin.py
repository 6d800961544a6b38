"""Admin operations aiokafka's admin client has no public method for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka.protocol.commit import OffsetCommitRequest

from headwater.kafka.types import Reader

__all__ = ["GroupDescription", "commit_group_offsets", "decode_assignment", "describe_group", "partition_counts"]


async def partition_counts(admin: Any) -> dict[str, int]:
    """Every topic of a cluster with its partition count (one Metadata request)."""
    metadata = await admin._get_cluster_metadata()
    out: dict[str, int] = {}
    for entry in metadata.topics:
        code, name, partitions = entry[0], entry[1], entry[-1]
        if code == 0:
            out[name] = len(partitions)
    return out


async def commit_group_offsets(admin: Any, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group that has no active member: an OffsetCommit outside any generation, as
    Kafka's ``AdminClient.alterConsumerGroupOffsets`` sends. Raises naming the partitions refused."""
    by_topic: dict[str, list[tuple[int, int, str]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset, ""))
    request = OffsetCommitRequest(group, -1, "", -1, list(by_topic.items()))
    coordinator = await admin.find_coordinator(group)
    response = await admin._send_request_to_node(coordinator, request)
    failed = [(t, p, code) for t, parts in response.topics for p, code in parts if code]
    if failed:
        raise RuntimeError(f"committing offsets of group {group} failed (topic, partition, error code): {failed}")


@dataclass
class GroupDescription:
    """A group as DescribeGroups tells it: state "" when the coordinator does not know the group."""

    group: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    # (member id, client id, host, assignment bytes) per member
    members: list[tuple[str, str, str, bytes]] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        """No active member: its offsets may be written from outside the group (Kafka's rule)."""
        return self.state in ("Empty", "Dead", "")


async def describe_group(admin: Any, group: str) -> GroupDescription:
    for response in await admin.describe_consumer_groups([group]):
        for entry in response.groups:
            if entry[1] == group:
                members = [(m[0], m[1], m[2], m[4] or b"") for m in entry[5]]
                return GroupDescription(group, entry[2] or "", entry[3] or "", entry[4] or "", members)
    return GroupDescription(group)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The topic-partitions in a consumer-protocol member assignment (version, [topic, [partition]], user data)."""
    if not data:
        return []
    r = Reader(data)
    r.int16()
    out = []
    for _ in range(r.int32()):
        topic = r.string() or ""
        out += [(topic, r.int32()) for _ in range(r.int32())]
    return out
