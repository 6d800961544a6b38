"""CreatePartitions (key 37), v0-v1.

Behavior: raises a topic's partition count (never lowers it); ``validate_only``
checks without changing anything. Manual assignments must name only this node.
An internal topic (``__consumer_offsets``) keeps its partition count (INVALID_REQUEST, the words of
Kafka's ``kafka-topics.sh``): a group's partition is its id's hash modulo that count.
A request adding more than MAX_PARTITIONS_PER_REQUEST (10000) partitions in all is refused whole with
POLICY_VIOLATION, as Kafka's controller bounds the partitions one request creates.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import CreatePartitionsRequest
from ..topics.topic import INTERNAL_TOPICS, MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from .registry import RequestContext, api


@api(key=37, min=0, max=1)
async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> dict[str, Any]:
    topics = ctx.cluster.topics
    added = sum(max(t.count - len(topics[t.name].partitions), 0) for t in req.topics if t.name in topics)
    if added > MAX_PARTITIONS_PER_REQUEST:
        return {"throttle_time_ms": 0, "results": [
            {"name": t.name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS}
            for t in req.topics]}
    results = []
    for t in req.topics:
        result: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if not ctx.allowed_topic(Op.ALTER, t.name):
                raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            topic = ctx.cluster.get_topic(t.name)
            if t.name in INTERNAL_TOPICS:
                raise BrokerError(ErrorCode.INVALID_REQUEST,
                                  f"The number of partitions for the internal topic {t.name} cannot be changed.")
            if t.count <= len(topic.partitions):
                raise BrokerError(ErrorCode.INVALID_PARTITIONS,
                                  f"Topic currently has {len(topic.partitions)} partitions, which is higher than or "
                                  f"equal to the requested {t.count}.")
            for a in t.assignments or []:
                if list(a.broker_ids) != [ctx.cluster.node_id]:
                    raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown brokers {list(a.broker_ids)}")
            if not req.validate_only:
                ctx.cluster.add_partitions(t.name, t.count)
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
