"""Admin operations aiokafka's admin client has no public method for."""

from __future__ import annotations

from typing import Any

from aiokafka.protocol.commit import OffsetCommitRequest

__all__ = ["commit_group_offsets", "partition_counts"]


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
