"""OffsetForLeaderEpoch (key 23), v0-v4 (v4+ flexible).

Behavior: for each partition, the end offset of the requested leader epoch in this broker's log, from the
partition's leader-epoch cache (log/leader_epochs.py, Kafka's LeaderEpochFileCache.endOffsetFor): the largest
epoch <= the one asked and the start of the next epoch, or the log end offset for the current epoch; an
epoch below the first known gets itself and the first epoch's start; an unknown one -1/-1. A follower asks it
before fetching, to truncate what the leader never had; a consumer (KIP-320) after a leader change or a seek
with an epoch, to detect a truncated log. ``current_leader_epoch`` (v2+) is checked as Fetch's:
FENCED_LEADER_EPOCH when older than the partition's, UNKNOWN_LEADER_EPOCH when newer (-1: not checked).
Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), except for ``replica_id`` -2 (v3+, Kafka's
debugging replica id), which any replica answers from its own log; the epoch this broker leads in is recorded
at its log end first, as Kafka's leader does when it takes over.
Authorization as Kafka's (KIP-320): CLUSTER_ACTION on the cluster covers every topic (followers), else
DESCRIBE on each topic (consumers); TOPIC_AUTHORIZATION_FAILED for a topic without it.
Version notes: v0 answers no leader epoch, v0-v1 no throttle time; requests before v3 carry no replica id
(-2, as Kafka's schema defaults it, and served by the leader alone).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..log.leader_epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ..protocol.requests import OffsetForLeaderEpochRequest
from ..replication.epochs import check_leader_epoch, leads, record_leader_epoch
from .registry import RequestContext, api

DEBUGGING_REPLICA_ID = -2


@api(key=23, min=0, max=4)
async def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    any_topic = ctx.allowed_cluster(Op.CLUSTER_ACTION)
    any_replica = ctx.version >= 3 and req.replica_id == DEBUGGING_REPLICA_ID
    topics = []
    for topic in req.topics:
        allowed = any_topic or ctx.allowed_topic(Op.DESCRIBE, topic.topic)
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition": p.partition, "error_code": 0, "leader_epoch": UNDEFINED_EPOCH,
                                     "end_offset": UNDEFINED_EPOCH_OFFSET}
            try:
                if not allowed:
                    raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = cluster.partition(topic.topic, p.partition)
                check_leader_epoch(partition, getattr(p, "current_leader_epoch", -1) if ctx.version >= 2 else -1)
                leader = leads(partition, cluster.node_id)
                if not (leader or any_replica):
                    raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                if leader:
                    record_leader_epoch(partition)
                epoch, end_offset = partition.log.leader_epochs.end_offset_for(p.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end_offset)
            except BrokerError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
