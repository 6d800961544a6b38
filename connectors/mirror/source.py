"""MirrorSourceConnector: records copied byte for byte from the source cluster into renamed topics.

The connector keeps the target's topics in step with the source's (``topics.TopicSync``) and splits the
topic-partitions over its tasks. A task reads its partitions with a plain consumer (no group: its
position is the source offset ``{cluster, topic, partition}`` -> ``{offset}`` the worker stores after
the records are acknowledged) and hands each partition's records to the worker as an encoded batch for
the same partition number of the renamed topic: key, value, headers and timestamp as they were. Where
each record landed becomes offset syncs (``syncs.OffsetSyncWriter``) for the checkpoint connector.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from aiokafka import TopicPartition

from headwater.connect.api import (
    ConnectException,
    Converter,
    ExactlyOnceSupport,
    Header,
    MetricSample,
    RecordBatches,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from headwater.connect.api.data import OPTIONAL_BYTES_SCHEMA
from headwater.connect.api.source import Encoded
from headwater.connect.converters.bytearray_converter import ByteArrayConverter
from headwater.connect.kafka import clients
from headwater.connect.kafka.raw_fetch import BatchFetcher, Fetched, isolation_level
from headwater.kafka.records import (
    ATTR_LOG_APPEND_TIME,
    BatchHeader,
    copy_batch,
    decode_batch_records,
    iter_batches,
    pack_records,
)

from .config import BYTES, MirrorSourceConfig, reads_committed, source_consumer_settings
from .topics import TopicSync, close_clients, decode_partitions, encode_partitions, ensure_internal_topic, reach

__all__ = ["MirrorSourceConnector", "MirrorSourceTask"]

log = logging.getLogger(__name__)

ASSIGNED = "task.assigned.partitions"
# Batches smaller than this are merged with their neighbours into new batches of at most MERGE_MAX bytes
# (within Kafka's default max.message.bytes, 1048588; the worker splits what a target takes less of).
MERGE_BELOW = 64 << 10
MERGE_MAX = 1 << 20
CLOSE_GRACE_S = 7.0  # past offset.flush.timeout.ms (5 s): the worker's last commit comes first
_BYTES_DEFAULTS = {"key.converter": BYTES, "value.converter": BYTES, "header.converter": BYTES}


NOT_READ_COMMITTED = ("MirrorSourceConnector can only provide exactly-once guarantees when its source consumer is "
                      "configured with isolation.level set to 'read_committed'; otherwise, records from aborted and "
                      "uncommitted transactions will be replicated from the source cluster to the target cluster.")
_DECLARED = frozenset(f.alias or name for name, f in MirrorSourceConfig.model_fields.items())


def _reads_committed(props: dict[str, Any]) -> bool:
    return reads_committed(source_consumer_settings({k: v for k, v in props.items() if k not in _DECLARED}))


def source_partition(cluster: str, topic: str, partition: int) -> dict[str, Any]:
    """MM2's source partition of a mirrored topic-partition (MirrorUtils.wrapPartition)."""
    return {"cluster": cluster, "topic": topic, "partition": partition}


class MirrorSourceConnector(SourceConnector):
    config_class = MirrorSourceConfig
    aliases = ("org.apache.kafka.connect.mirror.MirrorSourceConnector",)
    runtime_defaults: ClassVar[dict[str, str]] = _BYTES_DEFAULTS

    def __init__(self) -> None:
        self.config: MirrorSourceConfig | None = None
        self.topics: TopicSync | None = None
        self._loop: asyncio.Task[None] | None = None
        self._admins: list[Any] = []

    async def start(self, config: MirrorSourceConfig) -> None:
        self.config = config
        timeout = config.admin_timeout_ms
        source = await reach(config.source, "source", timeout)
        self._admins.append(source)
        target = await reach(config.target, "target", timeout)
        self._admins.append(target)
        self.topics = TopicSync(config, source, target)
        if config.emit_offset_syncs_enabled:
            syncs_admin = source if config.offset_syncs_topic_location == "source" else target
            await ensure_internal_topic(syncs_admin, config.policy().offset_syncs_topic(config.target_cluster_alias),
                                        config.offset_syncs_topic_replication_factor, "offset-syncs")
        await self.topics.refresh()
        if config.sync_topic_configs_enabled:
            await self.topics.sync_configs()
        self._loop = asyncio.create_task(self._refresh_loop(), name=f"mirror-refresh-{config.name}")

    async def _refresh_loop(self) -> None:
        assert self.config is not None and self.topics is not None
        config, topics = self.config, self.topics
        next_configs = time.monotonic() + config.sync_topic_configs_interval_seconds
        while True:
            await asyncio.sleep(config.refresh_topics_interval_seconds if config.refresh_topics_enabled
                                else config.sync_topic_configs_interval_seconds)
            try:
                if config.refresh_topics_enabled and await topics.refresh():
                    log.info("connector %s: the topic-partitions to mirror changed; reconfiguring tasks", config.name)
                    self.context.request_task_reconfiguration()
                if config.sync_topic_configs_enabled and time.monotonic() >= next_configs:
                    await topics.sync_configs()
                    next_configs = time.monotonic() + config.sync_topic_configs_interval_seconds
            except Exception as exc:  # a cluster away for a while: try again at the next interval
                log.warning("connector %s: refreshing topics failed: %s", config.name, exc)

    @classmethod
    def validate(cls, props: dict[str, Any]) -> dict[str, list[str]]:
        errors = super().validate(props)
        if str(props.get("exactly.once.support", "")).strip().lower() == "required" and not _reads_committed(props):
            # the worker's own message is generic; this one says what to change (MM2's words)
            errors.setdefault("exactly.once.support", []).append(NOT_READ_COMMITTED)
        return errors

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        """MM2's: exactly once when the source consumer reads committed records only. The task's position
        is the stored offset of each source partition, written in the transaction of the records it covers,
        so a restarted task goes on from the record after the last one committed on the target."""
        return ExactlyOnceSupport.SUPPORTED if _reads_committed(config) else ExactlyOnceSupport.UNSUPPORTED

    def task_class(self) -> type[SourceTask]:
        return MirrorSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert self.config is not None and self.topics is not None
        base = self.config.originals()
        return [{**base, ASSIGNED: encode_partitions(tps)} for tps in self.topics.assignments(max_tasks)]

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
        await close_clients(self._admins)


class _Lag:
    __slots__ = ("mirrored", "timestamp", "count", "latency_ms")

    def __init__(self) -> None:
        self.mirrored = -1  # upstream offset of the last acknowledged record
        self.timestamp: int | None = None
        self.count = 0  # records acknowledged by the target (MM2's record-count)
        self.latency_ms = -1  # record timestamp to acknowledgement, of the last (MM2's replication-latency-ms)


class MirrorSourceTask(SourceTask):
    """Copies its partitions' record batches whole: each fetched batch goes to the same partition of the
    renamed topic as it is (compressed or not), only its producer fields and CRC rewritten. A batch that
    cannot go whole (the fetch began inside it, compaction left gaps in its offsets, or its timestamps are
    the broker's LogAppendTime) is decoded and written as a new batch of the same records; so are runs of
    small batches, merged into one."""

    def __init__(self) -> None:
        self.consumer: Any = None
        self.fetcher: BatchFetcher | None = None
        self.sync_producer: Any = None
        self.syncs: Any = None
        self.stopping = False
        # by id(handed-over batch): (source tp, upstream offsets of each Kafka batch, last record's timestamp)
        self._raw: dict[int, tuple[tuple[str, int], list[Sequence[int]], int | None]] = {}
        self._closing: asyncio.Task[None] | None = None
        self.lag: dict[tuple[str, int], _Lag] = {}
        self.records_mirrored = 0
        self.batches_whole = 0
        self.batches_rebuilt = 0

    async def start(self, props: dict[str, str]) -> None:
        from .syncs import OffsetSyncWriter

        config = self.config = MirrorSourceConfig.model_validate(props)
        self.cluster = config.source_cluster_alias
        self.partitions = decode_partitions(props.get(ASSIGNED, ""))
        self.targets = {t: config.remote_topic(t) for t, _ in self.partitions}
        self.poll_timeout = config.consumer_poll_timeout_ms
        # Never assigned a partition: its client carries the fetches, it answers offset lookups.
        settings = config.source_consumer()
        self.consumer = clients.consumer(config.source.bootstrap, settings, enable_auto_commit=False,
                                         auto_offset_reset="earliest", group_id=None,
                                         client_id=f"mirror-{self.cluster}-source")
        await self.consumer.start()
        tps = [TopicPartition(t, p) for t, p in self.partitions]
        reader = self.context.offset_storage_reader
        positions: dict[TopicPartition, int] = {}
        fresh = []
        for tp in tps:
            stored = reader.offset(source_partition(self.cluster, tp.topic, tp.partition))
            if stored and isinstance(stored.get("offset"), int):
                positions[tp] = stored["offset"] + 1  # the offset stored is the last record mirrored
            else:
                fresh.append(tp)
            self.lag[(tp.topic, tp.partition)] = _Lag()
        if fresh:
            positions.update(await self.consumer.beginning_offsets(fresh))
        self.fetcher = BatchFetcher(self.consumer, positions, max_wait_ms=min(self.poll_timeout, 500),
                                    partition_max_bytes=int(settings.get("max.partition.fetch.bytes", 8 << 20)),
                                    max_bytes=int(settings.get("fetch.max.bytes", 64 << 20)),
                                    isolation=isolation_level(settings))
        if config.emit_offset_syncs_enabled:
            self.sync_producer = config.offset_syncs_cluster().producer(
                acks="all", linger_ms=5, client_id=f"mirror-{self.cluster}-offset-syncs")
            await self.sync_producer.start()
            self.syncs = OffsetSyncWriter(self.sync_producer,
                                          config.policy().offset_syncs_topic(config.target_cluster_alias))
        log.info("mirroring %d partitions from %s: %s", len(tps), self.cluster, encode_partitions(self.partitions))

    def encode_with(self, key_converter: Converter, value_converter: Converter) -> bool:
        # Records are bytes already: copied as they are when the converters would do the same.
        return isinstance(key_converter, ByteArrayConverter) and isinstance(value_converter, ByteArrayConverter)

    async def _fetch(self) -> dict[TopicPartition, Fetched]:
        if self.stopping or self.fetcher is None or not self.partitions:
            if not self.partitions:
                await asyncio.sleep(self.poll_timeout / 1000)
            return {}
        return await self.fetcher.fetch()

    def _batches(self, tp: TopicPartition, fetched: Fetched) -> Iterator[tuple[int, BatchHeader, bool]]:
        """(position, header, whole) of each batch at or after the fetch position, but control batches and
        (read_committed) those of aborted transactions; moves the position on."""
        assert self.fetcher is not None
        position = self.fetcher.positions[tp]
        for pos, header in iter_batches(fetched.data):
            if header.magic != 2:
                raise ConnectException(f"{tp.topic}-{tp.partition} holds message format v{header.magic} at offset "
                                       f"{header.base_offset}: only v2 record batches (Kafka 0.11+) are mirrored")
            skip = fetched.skip(header, pos)  # every batch, in order: the aborted set follows the markers
            if header.last_offset < position:
                continue
            self.fetcher.advance(tp, header.last_offset + 1)
            if skip:
                continue
            whole = (header.base_offset >= position and header.record_count == header.last_offset_delta + 1
                     and not header.attributes & ATTR_LOG_APPEND_TIME)
            yield pos, header, whole
            position = header.last_offset + 1

    def _groups(self, tp: TopicPartition, fetched: Fetched) -> list[list[tuple[int, BatchHeader, bool]]]:
        """The fetched batches in the order they go out: a big one alone (copied whole when it can be),
        runs of small ones together (rebuilt as batches of up to MERGE_MAX bytes). A partition gets one
        batch per produce request, so a trickle of small batches sent one by one would wait a round trip
        each."""
        groups: list[list[tuple[int, BatchHeader, bool]]] = []
        merging = False
        for item in self._batches(tp, fetched):
            small = item[1].size < MERGE_BELOW
            if small and merging:
                groups[-1].append(item)
            else:
                groups.append([item])
                merging = small
        return groups

    async def poll_encoded(self) -> list[Encoded] | None:
        fetched = await self._fetch()
        if not fetched:
            return None
        out: list[Encoded] = []
        cluster = self.cluster
        for tp, answer in fetched.items():
            data = answer.data
            position = self.fetcher.positions[tp] if self.fetcher is not None else 0
            batches: list[bytes] = []
            counts: list[int] = []
            upstream: list[Sequence[int]] = []
            timestamp = None
            for group in self._groups(tp, answer):
                if len(group) == 1 and group[0][2]:
                    pos, header, _ = group[0]
                    batches.append(copy_batch(data, pos, header))
                    counts.append(header.record_count)
                    upstream.append(range(header.base_offset, header.base_offset + header.record_count))
                    timestamp = header.max_timestamp
                    self.batches_whole += 1
                    continue
                records = [r for pos, _, _ in group for r in decode_batch_records(data, pos)[1]
                           if r.offset >= position]
                if not records:
                    continue
                offsets = [r.offset for r in records]
                timestamp = records[-1].timestamp
                # bounded by what comes out: merged records take more bytes than in their own batches
                # (their offset and timestamp deltas grow), a decompressed batch more still
                first = 0
                for built, n in pack_records(records, MERGE_MAX):
                    batches.append(built)
                    counts.append(n)
                    upstream.append(offsets[first:first + n])
                    first += n
                    self.batches_rebuilt += 1
            if not batches:
                continue
            last = upstream[-1][-1]
            rb = RecordBatches(self.targets[tp.topic], tp.partition, batches, counts,
                               source_partition(cluster, tp.topic, tp.partition), {"offset": last})
            self._raw[id(rb)] = ((tp.topic, tp.partition), upstream, timestamp)
            out.append(rb)
        if self.fetcher is not None and not self.stopping:
            self.fetcher.prefetch()
        return out or None

    async def poll(self) -> list[SourceRecord] | None:
        """The record path (converters other than bytes, or transforms): the same records as objects."""
        fetched = await self._fetch()
        out = []
        for tp, answer in fetched.items():
            target, partition = self.targets[tp.topic], tp.partition
            position = self.fetcher.positions[tp] if self.fetcher is not None else 0
            for pos, _, _ in self._batches(tp, answer):
                for r in decode_batch_records(answer.data, pos)[1]:
                    if r.offset < position:
                        continue
                    headers = [Header(k, v, OPTIONAL_BYTES_SCHEMA) for k, v in r.headers]
                    out.append(SourceRecord(target, r.value, r.key, partition, OPTIONAL_BYTES_SCHEMA,
                                            OPTIONAL_BYTES_SCHEMA, r.timestamp, headers,
                                            source_partition(self.cluster, tp.topic, partition),
                                            {"offset": r.offset}))
        if self.fetcher is not None and not self.stopping and fetched:
            self.fetcher.prefetch()
        return out or None

    async def commit_encoded(self, batch: Encoded, placed: list[tuple[int, int]]) -> None:
        tp, upstream, timestamp = self._raw.pop(id(batch))
        runs: list[int] = []  # index of the first record of each upstream run
        index = 0
        for offsets in upstream:
            runs.append(index)
            index += len(offsets)
        if self.syncs is not None:
            # a Kafka batch sent holds records of one run, up to the next batch's first record or the run's
            # end (the worker splits a batch the target would not take whole)
            ends = [first for first, _ in placed[1:]] + [index]
            for (first, downstream), end in zip(placed, ends, strict=True):
                run = bisect.bisect_right(runs, first) - 1
                start = runs[run]
                self.syncs.run(tp, upstream[run], first - start, min(end, start + len(upstream[run])) - start,
                               downstream)
            self.syncs.flush()
            await self.syncs.send()
        self._acked(tp, upstream[-1][-1], timestamp, index)

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if metadata is None:
            return
        upstream = record.source_offset["offset"]
        tp = (record.source_partition["topic"], record.source_partition["partition"])
        if self.syncs is not None:
            self.syncs.record(tp, upstream, metadata.offset)
        self._acked(tp, upstream, record.timestamp, 1)

    async def commit(self) -> None:
        if self.syncs is not None:
            self.syncs.flush()
            await self.syncs.send()

    def _acked(self, tp: tuple[str, int], upstream: int, timestamp: int | None, count: int) -> None:
        lag = self.lag.get(tp)
        if lag is not None:
            lag.count += count
            if timestamp is not None:
                lag.latency_ms = max(0, int(time.time() * 1000) - timestamp)
            if upstream > lag.mirrored:
                lag.mirrored, lag.timestamp = upstream, timestamp
        self.records_mirrored += count

    def replication_lag(self) -> dict[str, dict[str, Any]]:
        """Per source topic-partition: records not yet mirrored (source end offset - next to mirror), and
        at most how many seconds the oldest of them waits (now - the last mirrored record's timestamp)."""
        now = time.time() * 1000
        out: dict[str, dict[str, Any]] = {}
        for (topic, partition), lag in self.lag.items():
            end = self.fetcher.highwater.get(TopicPartition(topic, partition)) if self.fetcher is not None else None
            if end is None:
                continue
            behind = max(0, end - (lag.mirrored + 1))
            seconds = round(max(0.0, now - lag.timestamp) / 1000, 3) if behind and lag.timestamp else 0.0
            out[f"{topic}-{partition}"] = {"target": f"{self.targets[topic]}-{partition}", "records": behind,
                                           "seconds": seconds}
        return out

    def metrics(self) -> dict[str, Any]:
        lag = self.replication_lag()
        return {"records_mirrored": self.records_mirrored,
                "batches_copied_whole": self.batches_whole, "batches_rebuilt": self.batches_rebuilt,
                "offset_syncs_written": self.syncs.written if self.syncs is not None else 0,
                "offset_syncs_failed": self.syncs.failed if self.syncs is not None else 0,
                "replication_lag": lag,
                "replication_lag_records": sum(v["records"] for v in lag.values()),
                "replication_lag_seconds": max((v["seconds"] for v in lag.values()), default=0.0)}

    def exported_metrics(self) -> list[MetricSample]:
        """MM2's MirrorSourceConnector metrics under the names the common JMX-exporter rules give them
        (``kafka.connect.mirror:type=MirrorSourceConnector,target=B,topic=A.x,partition=0`` ->
        ``kafka_connect_mirror_source_connector_<attribute>{target,topic,partition}``, the topic being the
        remote one), and the lag behind the source, which MM2 does not have."""
        target = self.config.target_cluster_alias
        behind = self.replication_lag()
        out: list[MetricSample] = []
        for (topic, partition), lag in sorted(self.lag.items()):
            labels = {"target": target, "topic": self.targets[topic], "partition": str(partition)}
            out += [MetricSample("kafka_connect_mirror_source_connector_record_count", lag.count, labels,
                                 "Records mirrored", counter=True),
                    MetricSample("kafka_connect_mirror_source_connector_replication_latency_ms", lag.latency_ms,
                                 labels, "Record timestamp to acknowledgement by the target, of the last record")]
            now = behind.get(f"{topic}-{partition}")
            if now is not None:
                out += [MetricSample("headwater_mirror_replication_lag_records", now["records"], labels,
                                     "Records on the source not yet mirrored"),
                        MetricSample("headwater_mirror_replication_lag_seconds", now["seconds"], labels,
                                     "At most how long the oldest unmirrored record waits")]
        return out

    def running_trace(self) -> str | None:
        lag = self.replication_lag()
        if not lag:
            return None
        lines = [f"replication lag from {self.cluster}: {sum(v['records'] for v in lag.values())} records, "
                 f"at most {max(v['seconds'] for v in lag.values()):.3f} s"]
        for name, v in sorted(lag.items())[:100]:
            lines.append(f"  {name} -> {v['target']}: {v['records']} records, {v['seconds']:.3f} s")
        return "\n".join(lines)

    async def stop(self) -> None:
        """Called while a poll may wait (at most ``consumer.poll.timeout.ms``) and before the worker's last
        offset commit, whose offset syncs still need the producer: the clients close a little later."""
        self.stopping = True
        self._closing = asyncio.create_task(self._close_after(CLOSE_GRACE_S))

    async def _close_after(self, delay: float) -> None:
        try:
            await asyncio.sleep(delay)
        finally:  # also when the process shuts down first (the pending task is cancelled)
            await self._close()

    async def _close(self) -> None:
        consumer, self.consumer = self.consumer, None
        producer, self.sync_producer = self.sync_producer, None
        if self.fetcher is not None:
            await self.fetcher.close()
        if self.syncs is not None and producer is not None:
            try:
                self.syncs.flush()
                await self.syncs.send()
            except Exception:
                log.debug("sending the last offset syncs failed", exc_info=True)
        await close_clients([consumer, producer])
