"""WriteTxnMarkers (key 27), v0-v1: a transaction coordinator's request to a partition's leader to end a
transaction there with a commit or abort marker (broker to broker; Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Behavior: ALTER on the CLUSTER, else CLUSTER_ACTION on it, as Kafka checks them; without either every partition
is CLUSTER_AUTHORIZATION_FAILED and nothing is written. Each marker is appended to each of its partitions as
their leader, with acks=-1, and answered once the ISR has it (txn/marker_append.py: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT after ``request.timeout.ms``, INVALID_PRODUCER_EPOCH
and TRANSACTION_COORDINATOR_FENCED for a marker older than the producer's last one in the partition). A
``__consumer_offsets`` marker also ends the producer's pending TxnOffsetCommit offsets in that partition.
Not implemented: v2 (KIP-890's transaction version).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import WriteTxnMarkersRequest
from ..txn.marker_append import MarkerEntry, append_markers
from .registry import RequestContext, api

TP = tuple[str, int]


def _entries(req: WriteTxnMarkersRequest) -> list[MarkerEntry]:
    return [MarkerEntry(m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch,
                        tuple((t.name, p) for t in m.topics for p in t.partition_indexes))
            for m in req.markers]


def _result(producer_id: int, codes: dict[TP, ErrorCode]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": code})
    return {"producer_id": producer_id,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]}


@api(key=27, min=0, max=1)
async def handle(ctx: RequestContext, req: WriteTxnMarkersRequest) -> dict[str, Any]:
    markers = _entries(req)
    if not (ctx.allowed_cluster(Op.ALTER) or ctx.allowed_cluster(Op.CLUSTER_ACTION)):
        results = [dict.fromkeys(m.partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in markers]
    else:
        results = await append_markers(ctx.cluster, ctx.groups.offsets, markers,
                                       ctx.cluster.config.request_timeout_ms)
    return {"markers": [_result(m.producer_id, codes) for m, codes in zip(markers, results, strict=True)]}
