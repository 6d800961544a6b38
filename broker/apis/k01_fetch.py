"""Fetch (key 1), v0-v11.

Behavior: long poll: answers once ``min_bytes`` are available or ``max_wait_ms`` has
passed, waking on an append or transaction marker in one of its partitions (no other). Returns whole batches
as stored (bytes, never re-encoded), at most ``partition_max_bytes`` per partition and ``max_bytes`` overall,
except that the first batch found is returned whole even when larger (as Kafka does,
so a consumer can always progress). read_uncommitted (isolation_level 0) reads up to the high watermark;
read_committed (1, v4+) only below the last stable offset (the first offset of the earliest open
transaction) and lists the aborted transactions (producer id, first offset) overlapping the batches returned,
from the segments' aborted-transaction indexes, for the client to drop: no record is decoded either way.
Every answer (v4+) carries the partition's last stable offset. Every requested partition is listed.
The broker's ``fetch.max.bytes`` (Kafka's, 55 MiB by default) bounds every answer whatever the request
asks, as in Kafka's KafkaApis: v0-v2 have no ``max_bytes`` and may ask 2^31-1 bytes of each partition.
Version notes: fetch sessions are not kept: the answer always has session id 0 (the
client then keeps sending full fetches); a request naming a session gets
FETCH_SESSION_ID_NOT_FOUND.
In a ZooKeeper cluster (``Partition.replica`` set): only the partition's leader answers (else
NOT_LEADER_OR_FOLLOWER); consumers read below the high watermark (read_committed below the smaller of it and the
last stable offset); a follower's fetch (``replica_id`` = its broker id) reads to the log end, moves its
position, the high watermark and the ISR (replication/manager.py), is not throttled by client quotas and its
bytes are not counted as consumer bytes out.
Authorization as Kafka's KafkaApis: a consumer needs READ on each topic; a fetch as a replica (``replica_id``
>= 0) needs CLUSTER_ACTION on the cluster (the brokers' own principals, in ``super.users`` as Kafka advises),
every partition of it answering TOPIC_AUTHORIZATION_FAILED without.
Not implemented: preferred read replicas.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import LOG_OVERHEAD, parse_header

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..log import OffsetOutOfRange, PartitionLog
from ..protocol.requests import FetchRequest
from ..replication.epochs import check_leader_epoch
from ..replication.produce import consumer_bounds, follower_bounds
from .registry import RequestContext, api

_LENGTH = struct.Struct(">i")  # a batch's length field, after its 8-byte base offset


def _read_all(ctx: RequestContext, req: FetchRequest, max_bytes: int,
              replica_allowed: bool) -> tuple[list[dict[str, Any]], int, bool]:
    cluster = ctx.cluster
    total = 0
    errors = False
    responses = []
    read_committed = ctx.version >= 4 and getattr(req, "isolation_level", 0) == 1
    follower = req.replica_id  # a broker's id when a follower fetches (the partition's leader is asked)
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition, "error_code": 0, "high_watermark": -1,
                                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                                     "preferred_read_replica": -1, "records": b""}
            try:
                if not (replica_allowed if follower >= 0 else ctx.allowed_topic(Op.READ, topic.topic)):
                    raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = cluster.partition(topic.topic, p.partition)
                check_leader_epoch(partition, p.current_leader_epoch)
            except BrokerError as exc:
                entry["error_code"] = exc.code
                errors = True
                partitions.append(entry)
                continue
            plog = partition.log
            replica = partition.replica
            if replica is None:  # one node: everything appended is committed
                hw = end = plog.log_end_offset
                lso = partition.last_stable_offset()
                upto = lso if read_committed else None
            else:  # a ZooKeeper cluster: consumers below the high watermark, followers to the log end
                try:
                    if follower >= 0:
                        hw, lso = follower_bounds(cluster, partition, replica, follower, p.fetch_offset)
                        end, upto = plog.log_end_offset, None
                    else:
                        hw, lso = consumer_bounds(partition, replica)
                        end, upto = hw, lso if read_committed else hw
                except BrokerError as exc:
                    entry["error_code"] = exc.code
                    errors = True
                    partitions.append(entry)
                    continue
            entry.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=plog.log_start_offset)
            budget = min(p.partition_max_bytes, max_bytes - total)
            if p.fetch_offset != end:
                try:
                    data = plog.read(p.fetch_offset, max(budget, 0), min_one=total == 0, max_offset=upto)
                except OffsetOutOfRange:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    errors = True
                    data = b""
                entry["records"] = data
                total += len(data)
                if read_committed and data:
                    entry["aborted_transactions"] = _aborted(plog, p.fetch_offset, data)
            partitions.append(entry)
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total, errors


def _aborted(plog: PartitionLog, fetch_offset: int, data: bytes) -> list[dict[str, int]]:
    """The aborted transactions overlapping the batches returned (headers walked, records untouched)."""
    # Walk the batch lengths to the last batch (one int each), then read its header alone.
    pos, last, end = 0, 0, len(data)
    while pos + LOG_OVERHEAD <= end:
        last = pos
        pos += LOG_OVERHEAD + _LENGTH.unpack_from(data, pos + 8)[0]
    upper = parse_header(data, last).last_offset + 1
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in plog.aborted_transactions(fetch_offset, upper)]


@api(key=1, min=0, max=11)
async def handle(ctx: RequestContext, req: FetchRequest) -> dict[str, Any]:
    session_id = getattr(req, "session_id", 0) or 0
    if session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                "responses": []}
    max_bytes = min(req.max_bytes if ctx.version >= 3 else 2**31 - 1, ctx.cluster.config.fetch_max_bytes)
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    # a fetch as a replica (replica_id >= 0) needs CLUSTER_ACTION on the cluster, and then no topic's READ
    replica_allowed = req.replica_id >= 0 and ctx.allowed_cluster(Op.CLUSTER_ACTION)
    while True:
        responses, total, errors = _read_all(ctx, req, max_bytes, replica_allowed)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or errors or remaining <= 0 or ctx.closing():
            break
        await ctx.cluster.wait_for_data(remaining, [(t.topic, p.partition) for t in req.topics for p in t.partitions])
    throttle = 0
    from_follower = req.replica_id >= 0 and ctx.cluster.replication is not None
    if ctx.throttler is not None and total and not from_follower:  # consumer_byte_rate
        throttle = ctx.throttle(ctx.throttler.record(ctx.user, ctx.header.client_id or "", total,
                                                     time.time() * 1000, undo_if_throttled=True))
        if throttle:  # over its consumer_byte_rate: answered empty, the client fetches again after the throttle
            for topic in responses:
                for entry in topic["partitions"]:
                    entry["records"] = b""
    _count(ctx, responses, from_follower)
    return {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0, "responses": responses}


def _count(ctx: RequestContext, responses: list[dict[str, Any]], from_follower: bool) -> None:
    """Bytes out and fetched partitions of the answer sent (a long poll may have read several times); a
    follower's fetch is replication, not consumer traffic: its bytes are not counted (Kafka's BytesOutPerSec)."""
    for topic in responses:
        partitions = topic["partitions"]
        size = 0 if from_follower else sum(len(p["records"]) for p in partitions)
        failed = sum(1 for p in partitions if p["error_code"])
        for counters in ctx.cluster.counters(topic["topic"]):
            counters.bytes_out += size
            counters.fetch_requests += len(partitions)
            counters.failed_fetch += failed
