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
Fetch sessions (KIP-227, v7+) are kept for followers in a cluster (replication/fetch_sessions.py): a full
Fetch with session epoch 0 opens one, incremental Fetches carry only the partitions whose fetch data changed and
are answered only the partitions with something new. Consumers' fetches stay sessionless: the answer has
session id 0 (the client then keeps sending full fetches); a consumer's request naming a session gets
FETCH_SESSION_ID_NOT_FOUND.
In a ZooKeeper cluster (``Partition.replica`` set): consumers read below the high watermark (read_committed below
the smaller of it and the last stable offset); a follower's fetch (``replica_id`` = its broker id) reads to the log
end, moves its position, the high watermark and the ISR (replication/manager.py), is not throttled by client
quotas and its bytes are not counted as consumer bytes out. Only the partition's leader answers a follower, and a
consumer's Fetch before v11 (else NOT_LEADER_OR_FOLLOWER); a consumer's Fetch v11+ is answered by a follower too,
below the follower's own high watermark (KIP-392: fetching from the closest replica), with the same errors as on
the leader (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against the epoch the follower knows, OFFSET_OUT_OF_RANGE
outside its own log). With ``replica.selector.class`` set, the leader answers a consumer's Fetch v11+ for which
the selector prefers another replica (replication/replica_selector.py: one in the consumer's ``rack_id``) with
``preferred_read_replica`` = that broker, the high watermark, last stable offset and log start, and no records,
at once (no long poll), as Kafka's ReplicaManager does; the consumer then fetches from that broker.
Authorization as Kafka's KafkaApis: a consumer needs READ on each topic; a fetch as a replica (``replica_id``
>= 0) needs CLUSTER_ACTION on the cluster (the brokers' own principals, in ``super.users`` as Kafka advises),
every partition of it answering TOPIC_AUTHORIZATION_FAILED without.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import LOG_OVERHEAD, parse_header

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..log import OffsetOutOfRange, PartitionLog
from ..protocol.requests import FetchRequest
from ..replication.epochs import check_leader_epoch
from ..replication.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache, LeaderSession, next_epoch
from ..replication.produce import NO_PREFERRED_REPLICA, consumer_bounds, follower_bounds, preferred_read_replica
from .registry import RequestContext, api

_LENGTH = struct.Struct(">i")  # a batch's length field, after its 8-byte base offset


def _read_all(ctx: RequestContext, req: FetchRequest, topics: Sequence[Any], max_bytes: int,
              replica_allowed: bool) -> tuple[list[dict[str, Any]], int, bool]:
    """(every partition's answer entry, the record bytes read, whether to answer at once: an error, or a
    consumer sent to a preferred read replica)."""
    cluster = ctx.cluster
    total = 0
    at_once = False
    responses = []
    read_committed = ctx.version >= 4 and getattr(req, "isolation_level", 0) == 1
    follower = req.replica_id  # a broker's id when a follower fetches (the partition's leader is asked)
    closest = ctx.version >= 11  # KIP-392: a consumer may fetch from a follower, and be sent to one
    rack = getattr(req, "rack_id", "") or ""
    for topic in topics:
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
                at_once = True
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
                        hw, lso = follower_bounds(cluster, partition, replica, follower, p.fetch_offset,
                                                  p.log_start_offset)
                        end, upto = plog.log_end_offset, None
                    else:
                        hw, lso = consumer_bounds(partition, replica, on_follower=closest)
                        end, upto = hw, lso if read_committed else hw
                except BrokerError as exc:
                    entry["error_code"] = exc.code
                    at_once = True
                    partitions.append(entry)
                    continue
                if follower < 0 and closest:
                    preferred = preferred_read_replica(cluster, replica, rack, p.fetch_offset, ctx.advertised.name)
                    if preferred != NO_PREFERRED_REPLICA:  # no read: the consumer goes there, answered at once
                        entry.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=plog.log_start_offset,
                                     preferred_read_replica=preferred)
                        at_once = True
                        partitions.append(entry)
                        continue
            entry.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=plog.log_start_offset)
            budget = min(p.partition_max_bytes, max_bytes - total)
            if p.fetch_offset != end:
                try:
                    data = plog.read(p.fetch_offset, max(budget, 0), min_one=total == 0, max_offset=upto)
                except OffsetOutOfRange:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    at_once = True
                    data = b""
                entry["records"] = data
                total += len(data)
                if read_committed and data:
                    entry["aborted_transactions"] = _aborted(plog, p.fetch_offset, data)
            partitions.append(entry)
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total, at_once


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
    # a fetch as a replica (replica_id >= 0) needs CLUSTER_ACTION on the cluster, and then no topic's READ
    replica_allowed = req.replica_id >= 0 and ctx.allowed_cluster(Op.CLUSTER_ACTION)
    replication = ctx.cluster.replication
    # fetch sessions for followers only (one allowed to fetch as a replica: no other can take a follower's)
    sessions = replication.fetch_sessions if replication is not None and replica_allowed else None
    opened = _session(sessions, req, ctx.version)
    if isinstance(opened, ErrorCode):
        return {"throttle_time_ms": 0, "error_code": opened, "session_id": 0, "responses": []}
    session, incremental = opened
    topics = session.topics() if session is not None and incremental else req.topics
    max_bytes = min(req.max_bytes if ctx.version >= 3 else 2**31 - 1, ctx.cluster.config.fetch_max_bytes)
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    while True:
        responses, total, at_once = _read_all(ctx, req, topics, max_bytes, replica_allowed)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or at_once or remaining <= 0 or ctx.closing():
            break
        await ctx.cluster.wait_for_data(remaining, [(t.topic, p.partition) for t in topics for p in t.partitions])
    throttle = 0
    from_follower = req.replica_id >= 0 and ctx.cluster.replication is not None
    if ctx.throttler is not None and total and not from_follower:  # consumer_byte_rate
        throttle = ctx.throttle(ctx.throttler.record(ctx.user, ctx.header.client_id or "", total,
                                                     time.time() * 1000, undo_if_throttled=True))
        if throttle:  # over its consumer_byte_rate: answered empty, the client fetches again after the throttle
            for topic in responses:
                for entry in topic["partitions"]:
                    entry["records"] = b""
    if session is None:
        session_id = 0
    else:  # the session remembers what this answer says; an incremental one carries only what is new
        changed = session.changed_only(responses)
        if incremental:
            responses = changed
            session.epoch = next_epoch(session.epoch)
        session_id = session.session_id
    _count(ctx, responses, from_follower)
    return {"throttle_time_ms": throttle, "error_code": 0, "session_id": session_id, "responses": responses}


def _session(sessions: FetchSessionCache | None, req: FetchRequest,
             version: int) -> tuple[LeaderSession | None, bool] | ErrorCode:
    """(the fetch session of a follower's Fetch, whether the Fetch is incremental), or the error to answer
    (Kafka's FetchManager.newContext). Epoch -1 is a sessionless full Fetch (closing the session it names), epoch
    0 a full one opening a session, a later epoch an incremental one in the session named."""
    session_id = getattr(req, "session_id", 0) or 0
    epoch = getattr(req, "session_epoch", FINAL_EPOCH) if version >= 7 else FINAL_EPOCH
    if sessions is None:  # consumers, and a single node: no sessions
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND if session_id else (None, False)
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        if session_id:
            sessions.remove(session_id)
        return (sessions.create(req.replica_id, req.topics) if epoch == INITIAL_EPOCH else None), False
    found = sessions.incremental(session_id, epoch, req.replica_id)
    if isinstance(found, ErrorCode):
        return found
    found.update(req.topics, getattr(req, "forgotten_topics_data", None))
    return found, True


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
