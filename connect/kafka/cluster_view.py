"""What a cluster holds, read for people: topics with their offsets, a topic's newest records, groups
with their members and lag. The worker's ``/admin/topics`` and ``/admin/groups`` endpoints (and so the
web console) read through one ``ClusterView``.

Only aiokafka's public API is used. Topics are found by listing them all, never by naming one in a
Metadata request: a broker with ``auto.create.topics.enable`` would create a topic merely looked up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from .admin import GroupDescription, decode_assignment, describe_group
from .clients import admin_client, consumer
from .topics import topic_overrides

__all__ = ["ClusterView", "GroupOffsets", "NewestRecord", "PartitionOffsets", "TopicOffsets"]

#: The longest a read of a topic's newest records takes before answering with what it has.
READ_SECONDS = 5.0


@dataclass
class PartitionOffsets:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    start_offset: int
    end_offset: int

    @property
    def records(self) -> int:
        """Records the partition holds (gaps left by compaction aside)."""
        return max(0, self.end_offset - self.start_offset)


@dataclass
class TopicOffsets:
    topic: str
    internal: bool
    partitions: list[PartitionOffsets]


@dataclass
class NewestRecord:
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int | None  # None: the group has no offset for it (yet)
    end_offset: int | None
    member_id: str | None  # the member it is assigned to (consumer protocol only)

    @property
    def lag(self) -> int | None:
        if self.committed_offset is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - self.committed_offset)


@dataclass
class GroupOffsets:
    description: GroupDescription
    partitions: list[PartitionLag] = field(default_factory=list)

    def assignment(self, member_id: str) -> list[tuple[str, int]]:
        """What the coordinator assigned to one member (consumer protocol; empty for other protocols)."""
        if self.description.protocol_type != "consumer":
            return []
        for member, _client, _host, data in self.description.members:
            if member == member_id:
                try:
                    return decode_assignment(data)
                except ValueError:  # not what the consumer protocol writes: show no assignment
                    return []
        return []


class ClusterView:
    """One admin client and one group-less consumer, started on first use and kept for later requests
    (the console polls every few seconds); ``close`` (or leaving ``async with``) stops them. The
    operator commands (``headwater topics|groups``) read through it too. A client that failed to start is
    dropped, so the next request tries again."""

    def __init__(self, bootstrap: str, request_timeout_ms: int = 15000,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.request_timeout_ms = request_timeout_ms
        self.settings = dict(settings or {})  # more client settings: how to connect (security.security_settings)
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._start_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()  # the consumer's assignment belongs to one read at a time

    async def admin(self) -> AIOKafkaAdminClient:
        async with self._start_lock:
            if self._admin is None:
                client = admin_client(self.bootstrap, **{"request_timeout_ms": self.request_timeout_ms,
                                                         "client_id": "headwater-console", **self.settings})
                try:
                    await client.start()
                except BaseException:
                    await client.close()
                    raise
                self._admin = client
            return self._admin

    async def consumer(self) -> AIOKafkaConsumer:
        async with self._start_lock:
            if self._consumer is None:
                client = consumer(self.bootstrap, {}, **{"enable_auto_commit": False, "client_id": "headwater-console",
                                                         "request_timeout_ms": self.request_timeout_ms,
                                                         "fetch_max_wait_ms": 100, **self.settings})
                try:
                    await client.start()
                except BaseException:
                    await client.stop()
                    raise
                self._consumer = client
            return self._consumer

    async def __aenter__(self) -> ClusterView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        admin, client, self._admin, self._consumer = self._admin, self._consumer, None, None
        if admin is not None:
            await admin.close()
        if client is not None:
            await client.stop()

    # -- topics ----------------------------------------------------------------------------------------

    async def _metadata(self) -> dict[str, dict[str, Any]]:
        """Every topic the cluster has, by name, as DescribeTopics tells it."""
        found = await (await self.admin()).describe_topics()
        return {t["topic"]: t for t in found if t["error_code"] == 0}

    async def _offsets(self, tps: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        if not tps:
            return {}, {}
        c = await self.consumer()
        return await c.beginning_offsets(tps), await c.end_offsets(tps)

    async def topics(self, names: list[str] | None = None) -> list[TopicOffsets]:
        """Topics (all, or those of ``names`` that exist) with each partition's start and end offsets."""
        metadata = await self._metadata()
        chosen = sorted(metadata if names is None else set(names) & set(metadata))
        tps = [TopicPartition(t, p["partition"]) for t in chosen for p in metadata[t]["partitions"]]
        starts, ends = await self._offsets(tps)
        out = []
        for name in chosen:
            parts = []
            for p in sorted(metadata[name]["partitions"], key=lambda p: p["partition"]):
                tp = TopicPartition(name, p["partition"])
                parts.append(PartitionOffsets(p["partition"], p["leader"], list(p["replicas"]), list(p["isr"]),
                                              starts.get(tp, 0), ends.get(tp, 0)))
            out.append(TopicOffsets(name, bool(metadata[name].get("is_internal")), parts))
        return out

    async def topic(self, name: str) -> TopicOffsets | None:
        """One topic with its partitions' offsets; None when there is no such topic."""
        found = await self.topics([name])
        return found[0] if found else None

    async def configs(self, topic: str) -> dict[str, str]:
        """The topic's own config overrides (not the broker's defaults)."""
        return (await topic_overrides(await self.admin(), [topic])).get(topic, {})

    async def newest_records(self, topic: str, limit: int) -> list[NewestRecord] | None:
        """The ``limit`` newest records of ``topic`` (by timestamp, then offset), newest first; None when
        there is no such topic. Reads up to ``limit`` from the end of each partition, for at most
        ``READ_SECONDS``."""
        metadata = await self._metadata()
        if topic not in metadata:
            return None
        tps = [TopicPartition(topic, p["partition"]) for p in metadata[topic]["partitions"]]
        out: list[NewestRecord] = []
        async with self._read_lock:
            starts, ends = await self._offsets(tps)
            begin = {tp: max(starts[tp], ends[tp] - limit) for tp in tps}
            pending = {tp for tp in tps if begin[tp] < ends[tp]}
            if not pending:
                return []
            c = await self.consumer()
            c.assign(sorted(pending))
            try:
                for tp in pending:
                    c.seek(tp, begin[tp])
                loop = asyncio.get_running_loop()
                deadline = loop.time() + READ_SECONDS
                while pending and loop.time() < deadline:
                    batch = await c.getmany(*pending, timeout_ms=200)
                    for tp, records in batch.items():
                        out += [NewestRecord(r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                                             [(k, bytes(v)) for k, v in r.headers])
                                for r in records if r.offset < ends[tp]]
                    for tp in list(pending):
                        if await c.position(tp) >= ends[tp]:
                            pending.discard(tp)
            finally:
                c.unsubscribe()
        out.sort(key=lambda r: (r.timestamp, r.offset, r.partition), reverse=True)
        return out[:limit]

    # -- groups ----------------------------------------------------------------------------------------

    async def groups(self) -> list[GroupDescription]:
        """Every group the coordinators know, described (state, protocol, members)."""
        admin = await self.admin()
        names = sorted({g[0] for g in await admin.list_consumer_groups()})
        return list(await asyncio.gather(*(describe_group(admin, g) for g in names)))

    async def group(self, name: str) -> GroupOffsets | None:
        """A group's members and, per partition it has an offset for or is assigned, the committed offset,
        the end offset and the lag; None when the coordinator knows nothing of it."""
        admin = await self.admin()
        described = await describe_group(admin, name)
        committed = await admin.list_consumer_group_offsets(name)
        if described.state in ("", "Dead") and not committed:
            return None
        out = GroupOffsets(described)
        owner: dict[tuple[str, int], str] = {}
        for member, *_ in described.members:
            for tp in out.assignment(member):
                owner[tp] = member
        offsets = {(tp.topic, tp.partition): meta.offset for tp, meta in committed.items() if meta.offset >= 0}
        keys = sorted(set(offsets) | set(owner))
        existing = await self._metadata()
        tps = [TopicPartition(t, p) for t, p in keys if t in existing]  # a deleted topic has no end
        _, ends = await self._offsets(tps)
        for topic, partition in keys:
            out.partitions.append(PartitionLag(topic, partition, offsets.get((topic, partition)),
                                               ends.get(TopicPartition(topic, partition)),
                                               owner.get((topic, partition))))
        return out
