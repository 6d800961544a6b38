"""A consumer group's committed offsets, read and changed from outside the group, as Kafka's
``Admin.listConsumerGroupOffsets`` / ``alterConsumerGroupOffsets`` / ``deleteConsumerGroupOffsets`` /
``deleteConsumerGroups`` do: what Connect's offsets service uses for a sink connector's group.

aiokafka's admin client has public methods for listing offsets only; the commit (OffsetCommit outside
any generation), the per-partition delete (OffsetDelete, which aiokafka does not define) and the group
delete (DeleteGroups) are sent here through its low-level client. Each error comes back as its Kafka
``ErrorCode``, never as an exception class to be told apart by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.types import Array, Int16, Int32, Schema, String

from headwater.kafka.errors import ErrorCode

from ..api.errors import ConnectException
from .clients import admin_client

__all__ = ["GroupOffsetsAdmin", "GroupOffsetsError", "Partition"]

Partition = tuple[str, int]  # (topic, partition)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class GroupOffsetsError(ConnectException):
    """The cluster refused a change to ``group``'s offsets: ``code`` for ``partition`` (None: the whole group)."""

    def __init__(self, group: str, code: ErrorCode, partition: Partition | None = None) -> None:
        where = f" ({partition[0]}-{partition[1]})" if partition else ""
        super().__init__(f"changing the offsets of consumer group {group}{where} failed: {code.name}")
        self.group, self.code, self.partition = group, code, partition


# OffsetDelete (key 47) v0, which aiokafka does not define: group_id, [topic name, [partition index]]
# -> error_code, throttle_time_ms, [topic name, [partition index, error_code]].
class _OffsetDeleteResponse_v0(Response):
    API_KEY = 47
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        ("throttle_time_ms", Int32),
        ("topics", Array(("name", String("utf-8")),
                         ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))),
    )


class _OffsetDeleteRequest_v0(RequestStruct):
    API_KEY = 47
    API_VERSION = 0
    RESPONSE_TYPE = _OffsetDeleteResponse_v0
    SCHEMA = Schema(
        ("group_id", String("utf-8")),
        # a partition entry is one int32 (partition_index): on the wire, an array of int32
        ("topics", Array(("name", String("utf-8")), ("partitions", Array(Int32)))),
    )


_OffsetDeleteStruct: TypeAlias = _OffsetDeleteRequest_v0


class _OffsetDeleteRequest(Request[_OffsetDeleteStruct]):
    API_KEY = 47

    def __init__(self, group: str, topics: list[tuple[str, list[int]]]) -> None:
        self._group = group
        self._topics = topics

    def build(self, request_struct_class: type[_OffsetDeleteStruct]) -> _OffsetDeleteStruct:
        return request_struct_class(self._group, self._topics)


def _by_topic(partitions: list[Partition]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return list(out.items())


class GroupOffsetsAdmin:
    """One admin connection for a few group-offset operations: ``async with GroupOffsetsAdmin(bootstrap)``."""

    def __init__(self, bootstrap: str, props: Mapping[str, str] | None = None,
                 client_id: str = "headwater-offsets") -> None:
        self._admin: AIOKafkaAdminClient = admin_client(bootstrap, props, client_id=client_id)

    async def __aenter__(self) -> GroupOffsetsAdmin:
        await self._admin.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._admin.close()

    async def committed(self, group: str) -> dict[Partition, int]:
        """Every partition ``group`` has committed an offset for (a group without commits: none)."""
        found = await self._admin.list_consumer_group_offsets(group)
        return {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}

    async def _send_to_coordinator(self, group: str, request: Any) -> Any:
        coordinator = await self._admin.find_coordinator(group)
        return await self._admin._send_request_to_node(coordinator, request)

    async def commit(self, group: str, offsets: dict[Partition, int]) -> dict[Partition, ErrorCode]:
        """Commit ``offsets`` outside any generation (refused while the group has members); the
        error of each partition that was not committed."""
        by_topic: dict[str, list[tuple[int, int, str]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset, ""))
        response = await self._send_to_coordinator(group, OffsetCommitRequest(group, -1, "", -1,
                                                                              list(by_topic.items())))
        return {(t, p): _code(code) for t, parts in response.topics for p, code in parts if code}

    async def delete(self, group: str, partitions: list[Partition]) -> tuple[ErrorCode, dict[Partition, ErrorCode]]:
        """Delete ``group``'s committed offsets of ``partitions``: the group's error and each
        partition's that was not deleted."""
        response = await self._send_to_coordinator(group, _OffsetDeleteRequest(group, _by_topic(partitions)))
        failed = {(t, p): _code(code) for t, parts in response.topics for p, code in parts if code}
        return _code(response.error_code), failed

    async def delete_group(self, group: str) -> ErrorCode:
        """Delete ``group`` (refused with NON_EMPTY_GROUP while it has members)."""
        response = await self._send_to_coordinator(group, DeleteGroupsRequest([group]))
        codes = [_code(code) for name, code in response.results if name == group]
        return codes[0] if codes else ErrorCode.UNKNOWN_SERVER_ERROR
