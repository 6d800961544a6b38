"""ListOffsets (key 2), v0-v5.

Behavior: timestamp -2 = log start offset, -1 = end (the high watermark; for read_committed,
isolation_level 1 from v2, the last stable offset), -3 = the record with the largest timestamp, any other
value = the first record whose timestamp is at or after it (through the time index),
or -1/-1 when there is none; for read_committed a record found at or past the last stable offset counts as
none (Kafka's fetchOffsetForTimestamp). v0 answers in ``old_style_offsets``.
In a ZooKeeper cluster only the partition's leader answers (else NOT_LEADER_OR_FOLLOWER), and the end is the
high watermark: a record at or above it is not found; ``leader_epoch`` (v4+) is the partition's current leader epoch
(0 on a single node).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import ListOffsetsRequest
from ..replication.epochs import check_leader_epoch, current_leader_epoch
from ..replication.produce import consumer_bounds
from ..topics.topic import Partition
from .registry import RequestContext, api

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _lookup(partition: Partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    plog = partition.log
    replica = partition.replica
    if replica is None:  # one node: everything appended is committed
        end = plog.log_end_offset
        visible = partition.last_stable_offset() if read_committed else end
    else:  # a ZooKeeper cluster: the leader answers, from below the high watermark
        end, stable = consumer_bounds(partition, replica)
        visible = stable if read_committed else end
    if timestamp == LATEST:
        return -1, visible
    if timestamp == EARLIEST:
        return -1, plog.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        ts, offset = plog.max_timestamp() or (-1, -1)
    else:
        offset, ts = plog.offset_for_timestamp(timestamp) or (-1, -1)
    if offset >= visible:  # past what this consumer may read (Kafka's fetchOffsetForTimestamp)
        return -1, -1
    return ts, offset


@api(key=2, min=0, max=5)
async def handle(ctx: RequestContext, req: ListOffsetsRequest) -> dict[str, Any]:
    topics = []
    read_committed = ctx.version >= 2 and getattr(req, "isolation_level", 0) == 1
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0, "old_style_offsets": [],
                                     "timestamp": -1, "offset": -1, "leader_epoch": 0}
            try:
                if not ctx.allowed_topic(Op.DESCRIBE, topic.name):
                    raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = ctx.cluster.partition(topic.name, p.partition_index)
                check_leader_epoch(partition, getattr(p, "current_leader_epoch", -1))
                ts, offset = _lookup(partition, p.timestamp, read_committed)
                entry.update(timestamp=ts, offset=offset, leader_epoch=current_leader_epoch(partition))
                if ctx.version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 else []
            except BrokerError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
