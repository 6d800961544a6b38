"""CreateTopics (key 19), v0-v4.

Behavior: validates the name, partition count, replication factor (1 on one node, or
-1 for the default) and every config override before creating anything; with
``validate_only`` nothing is created. Manual replica assignments must name only this
node. In a ZooKeeper cluster (docs/CLUSTER.md) the topic is the cluster's: ``replication.factor`` (-1:
``default.replication.factor``) replicas per partition spread over the live brokers as Kafka's
AdminUtils spreads them, or ``replica_assignment`` naming live brokers; more replicas than live brokers is
INVALID_REPLICATION_FACTOR. The answer comes once every new partition has a leader in this broker's view,
or at the request's ``timeout_ms`` (REQUEST_TIMED_OUT: the topic is made, its leaders are still to come); a
timeout of 0 answers at once. ``__consumer_offsets`` is a cluster topic too (as the first FindCoordinator
makes it); the other internal topics stay each broker's own.
Errors: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, each with a message;
configs are checked as Kafka checks them, in its words (config/topic_configs.py), and a null value is
refused as KRaft refuses it.
A request asking for more than MAX_PARTITIONS_PER_REQUEST (10000) partitions in all is refused whole with
POLICY_VIOLATION "Excessively large number of partitions per request.", as Kafka's controller refuses it.
A topic that would take the broker past ``max.broker.partitions`` gets POLICY_VIOLATION, one the disk or the
open-files limit cannot serve KAFKA_STORAGE_ERROR, each with a message naming the limit or the error, and nothing
of it stays on disk or in metadata (topics/cluster.py).
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError, InvalidConfig, InvalidRequest
from ..group.store import OFFSETS_TOPIC
from ..protocol.requests import CreatableTopic, CreateTopicsRequest
from ..topics.topic import INTERNAL_TOPICS, MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from .registry import RequestContext, api

log = logging.getLogger(__name__)
API = "CreateTopics"


async def _create(ctx: RequestContext, t: CreatableTopic, validate_only: bool) -> bool:
    """Create (or with ``validate_only`` check) one topic; whether it is a cluster topic to wait for."""
    cluster = ctx.cluster
    nulls = [c.name for c in t.configs if c.value is None]
    if nulls:
        raise InvalidConfig("Null value not supported for topic configs: " + ",".join(nulls))
    overrides = {c.name: c.value for c in t.configs if c.value is not None}  # none is null: checked above
    partitions, replication = t.num_partitions, t.replication_factor
    if t.assignments and (partitions != -1 or replication != -1):
        raise InvalidRequest("Both numPartitions or replicationFactor and replicasAssignments were set.")
    if cluster.membership is not None and (t.name == OFFSETS_TOPIC or t.name not in INTERNAL_TOPICS):
        from ..cluster.topic_admin import check_absent, create_topic, plan_topic  # kazoo: cluster mode only

        assignment = plan_topic(cluster, t.name, partitions, replication,
                                {a.partition_index: list(a.broker_ids) for a in t.assignments}, overrides)
        if validate_only:
            await check_absent(cluster, t.name)
        else:
            await create_topic(cluster, t.name, assignment, overrides)
        return not validate_only
    if t.assignments:
        for a in t.assignments:
            if list(a.broker_ids) != [cluster.node_id]:
                raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"partition {a.partition_index} assigned to brokers {list(a.broker_ids)}; "
                                  f"only {cluster.node_id} exists")
        if sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))):
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered from 0 without gaps")
        partitions, replication = len(t.assignments), 1
    if validate_only:
        cluster.check_new_topic(t.name, partitions, replication, overrides)
    else:
        cluster.create_topic(t.name, partitions, replication, overrides)
    return False


@api(key=19, min=0, max=4)
async def handle(ctx: RequestContext, req: CreateTopicsRequest) -> dict[str, Any]:
    validate_only = bool(getattr(req, "validate_only", False))
    default = ctx.cluster.config.num_partitions
    asked = sum(len(t.assignments) if t.assignments else t.num_partitions if t.num_partitions > 0 else default
                for t in req.topics)
    if asked > MAX_PARTITIONS_PER_REQUEST:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS}
            for t in req.topics]}
    results = []
    seen: set[str] = set()
    created: dict[str, dict[str, Any]] = {}  # cluster topics whose leaders the answer waits for
    for t in req.topics:
        result: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if t.name in seen:
                raise InvalidRequest(f"Create topics request from client contains a duplicate topic {t.name}")
            seen.add(t.name)
            if not (ctx.allowed_cluster(Op.CREATE) or ctx.allowed_topic(Op.CREATE, t.name)):
                raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if await _create(ctx, t, validate_only):
                created[t.name] = result
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        except Exception as exc:  # answered, never a closed connection (the cluster left nothing half made)
            log.exception("%s failed on %s", API, t.name)
            result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"{type(exc).__name__}: {exc}")
        results.append(result)
    timeout_ms = getattr(req, "timeout_ms", 0)
    if created and timeout_ms > 0:
        from ..cluster.topic_admin import wait_for_leaders

        for name in await wait_for_leaders(ctx.cluster, list(created), timeout_ms / 1000):
            created[name].update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                 error_message=f"Topic {name} is created; its partitions have no leader yet.")
    return {"throttle_time_ms": 0, "topics": results}
