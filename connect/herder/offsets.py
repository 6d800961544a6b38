"""The offsets service (KIP-875): a stopped connector's offsets read, altered and reset.

A source connector's offsets are in the worker's offset store; a sink connector's are its consumer
group's (``connect-<name>``), changed through the aiokafka adapter's group-offsets admin. Entries
are checked before anything changes; a refusal names the field or the partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..kafka.offsets_admin import GroupOffsetsAdmin, GroupOffsetsError, Partition
from ..storage.offsets import OffsetStore, offset_key
from .errors import BadRequest, Conflict

__all__ = ["OffsetsService"]

# Errors of a group that still has members (its tasks have not left yet): try again.
_GROUP_BUSY = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS,
               ErrorCode.NON_EMPTY_GROUP, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}

Entries = list[dict[str, Any]]


def sink_group(name: str) -> str:
    return f"connect-{name}"


class OffsetsService:
    def __init__(self, bootstrap: str, store: OffsetStore, security: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = dict(security or {})  # the worker's admin client properties
        self.store = store

    # -- source connectors: the offset store -----------------------------------------------------------

    def source_offsets(self, name: str) -> Entries:
        return [{"partition": p, "offset": o} for p, o in self.store.connector_offsets(name)]

    async def alter_source_offsets(self, name: str, entries: Entries | None) -> None:
        """PATCH (entries given) or DELETE (entries None) a source connector's offsets."""
        if entries is None:
            changes: dict[str, Any] = {offset_key(name, p): None for p, _ in self.store.connector_offsets(name)}
        else:
            changes = {}
            for e in entries:
                if not isinstance(e, dict) or not isinstance(e.get("partition"), dict):
                    raise BadRequest("Each offset entry needs a \"partition\" object")
                offset = e.get("offset")
                if offset is not None and not isinstance(offset, dict):
                    raise BadRequest("An offset must be an object or null")
                changes[offset_key(name, e["partition"])] = offset
        await self.store.set(name, changes)

    # -- sink connectors: the consumer group -----------------------------------------------------------

    async def sink_offsets(self, name: str) -> Entries:
        async with GroupOffsetsAdmin(self.bootstrap, self.security, "headwater-offsets-list") as admin:
            found = await admin.committed(sink_group(name))
        return [{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(found.items())]

    async def alter_sink_offsets(self, name: str, entries: Entries | None) -> None:
        """PATCH commits each ``{"kafka_offset": n}`` and deletes the committed offset of each null
        one; DELETE deletes the group (as Kafka Connect does)."""
        group = sink_group(name)
        if entries is None:
            async with GroupOffsetsAdmin(self.bootstrap, self.security, "headwater-offsets-reset") as admin:
                code = await admin.delete_group(group)
            if code != ErrorCode.GROUP_ID_NOT_FOUND:  # a group with no commits: nothing to reset
                _check(group, code)
            return
        commits: dict[Partition, int] = {}
        deletes: list[Partition] = []
        for i, e in enumerate(entries):
            tp = _sink_partition(i, e.get("partition"))
            offset = e.get("offset")
            if offset is None:
                deletes.append(tp)
            else:
                commits[tp] = _sink_offset(i, offset)
        async with GroupOffsetsAdmin(self.bootstrap, self.security, "headwater-offsets-alter") as admin:
            if commits:
                for tp, code in (await admin.commit(group, commits)).items():
                    _check(group, code, tp)
            if deletes:
                code, failed = await admin.delete(group, deletes)
                if code == ErrorCode.GROUP_ID_NOT_FOUND:  # a group with no commits: nothing to delete
                    return
                _check(group, code)
                for tp, code in failed.items():
                    _check(group, code, tp)


def _check(group: str, code: ErrorCode, partition: Partition | None = None) -> None:
    if code == ErrorCode.NONE:
        return
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        where = f"{partition[0]}-{partition[1]}" if partition is not None else group
        raise BadRequest(f"Topic partition {where} does not exist")
    if code in _GROUP_BUSY:
        raise Conflict(f"The consumer group {group} still has active members ({code.name}); try again once the "
                       f"connector's tasks have stopped")
    raise GroupOffsetsError(group, code, partition)


def _sink_partition(i: int, partition: Any) -> Partition:
    where = f"offsets[{i}].partition"
    if not isinstance(partition, dict):
        raise BadRequest(f"{where} must be an object with \"kafka_topic\" and \"kafka_partition\"")
    topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
    if not isinstance(topic, str) or not topic:
        raise BadRequest(f"{where}.kafka_topic must be a topic name, not {topic!r}")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 1 << 31:
        raise BadRequest(f"{where}.kafka_partition must be a partition number (an integer >= 0), not {number!r}")
    return topic, number


def _sink_offset(i: int, offset: Any) -> int:
    value = offset.get("kafka_offset") if isinstance(offset, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
        raise BadRequest(f"offsets[{i}].offset must be null or {{\"kafka_offset\": <an integer >= 0>}}, not "
                         f"{offset!r}")
    return value
