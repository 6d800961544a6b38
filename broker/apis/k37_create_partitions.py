"""CreatePartitions (key 37), v0-v1.

Behavior: raises a topic's partition count (never lowers it); ``validate_only``
checks without changing anything. Manual assignments must name only this node.
An internal topic (``__consumer_offsets``) keeps its partition count (INVALID_REQUEST, the words of
Kafka's ``kafka-topics.sh``): a group's partition is its id's hash modulo that count.
A request adding more than MAX_PARTITIONS_PER_REQUEST (10000) partitions in all is refused whole with
POLICY_VIOLATION, as Kafka's controller bounds the partitions one request creates; one that would take the broker
past ``max.broker.partitions`` gets POLICY_VIOLATION, and one the disk or the open-files limit cannot serve
KAFKA_STORAGE_ERROR, each with a message; nothing of a refused topic's new partitions stays behind.
In a ZooKeeper cluster (docs/CLUSTER.md) a cluster topic's new partitions get the topic's replication factor
over the live brokers, carrying on its assignment's pattern as Kafka's AdminZkClient does (or the assignments
given, of live brokers); the answer waits for their leaders as CreateTopics' does.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import CreatePartitionsRequest
from ..topics.topic import INTERNAL_TOPICS, MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from .registry import RequestContext, api

log = logging.getLogger(__name__)
API = "CreatePartitions"


@api(key=37, min=0, max=1)
async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    membership = cluster.membership
    added = sum(max(t.count - _count(ctx, t.name), 0) for t in req.topics)
    if added > MAX_PARTITIONS_PER_REQUEST:
        return {"throttle_time_ms": 0, "results": [
            {"name": t.name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS}
            for t in req.topics]}
    results = []
    grown: dict[str, dict[str, Any]] = {}  # cluster topics whose new leaders the answer waits for
    for t in req.topics:
        result: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if not ctx.allowed_topic(Op.ALTER, t.name):
                raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            if t.name in INTERNAL_TOPICS and membership is not None and membership.has_topic(t.name):
                raise BrokerError(ErrorCode.INVALID_REQUEST,  # its groups' partitions would move
                                  f"The number of partitions for the internal topic {t.name} cannot be changed.")
            if membership is not None and membership.has_topic(t.name):
                from ..cluster.topic_admin import add_partitions, plan_partitions  # kazoo: cluster mode only

                new = plan_partitions(cluster, t.name, t.count, [list(a.broker_ids) for a in t.assignments or []])
                if not req.validate_only:
                    await add_partitions(cluster, t.name, new)
                    grown[t.name] = result
                results.append(result)
                continue
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
            if req.validate_only:
                ctx.cluster.check_partition_limit(t.count - len(topic.partitions))
            else:
                ctx.cluster.add_partitions(t.name, t.count)
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        except Exception as exc:  # answered, never a closed connection (the cluster left nothing half made)
            log.exception("%s failed on %s", API, t.name)
            result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"{type(exc).__name__}: {exc}")
        results.append(result)
    timeout_ms = getattr(req, "timeout_ms", 0)
    if grown and timeout_ms > 0:
        from ..cluster.topic_admin import wait_for_leaders

        for name in await wait_for_leaders(cluster, list(grown), timeout_ms / 1000):
            grown[name].update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                               error_message=f"The new partitions of {name} have no leader yet.")
    return {"throttle_time_ms": 0, "results": results}


def _count(ctx: RequestContext, name: str) -> int:
    """The topic's partition count now: the cluster's for a cluster topic, else this broker's (0: unknown)."""
    membership = ctx.cluster.membership
    if membership is not None and membership.has_topic(name):
        return membership.sync.topics[name].partition_count
    topic = ctx.cluster.topics.get(name)
    return len(topic.partitions) if topic is not None else 0
