"""AlterPartitionReassignments (key 45), v0-v1 (flexible).

Behavior: moves each partition's replicas to the ones given, or cancels the reassignment under way (null
replicas: back to the replicas it had before), as Kafka's ZooKeeper-mode controller does
(broker/cluster/reassigner.py). CLUSTER ALTER is needed (else CLUSTER_AUTHORIZATION_FAILED at the top and for
every partition, Kafka's error answer); the request is served by the active controller (NOT_CONTROLLER at the
top elsewhere). The answer comes once each reassignment is under way; per partition INVALID_REPLICA_ASSIGNMENT
(empty, duplicate, negative or not live brokers), UNKNOWN_TOPIC_OR_PARTITION "The partition does not exist."
(also for a topic being deleted), NO_REASSIGNMENT_IN_PROGRESS for a cancellation with nothing to cancel,
INVALID_REPLICATION_FACTOR when v1's ``allow_replication_factor_change`` is false and the count changes
(KIP-860). ListPartitionReassignments (key 46) shows them while they run. A single node's partitions have one
replica, this broker: reassigning one to it is accepted (nothing moves), to any other broker refused as not live.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..cluster.reassignment import ReplicaAssignment, check_target
from ..errors import BrokerError, UnknownTopicOrPartition
from ..protocol.requests import AlterPartitionReassignmentsRequest
from .controller_wire import by_topic, cluster_controller, single_node_has
from .registry import RequestContext, api

log = logging.getLogger(__name__)
API = "AlterPartitionReassignments"
UNAUTHORIZED = "Cluster authorization failed."


@api(key=45, min=0, max=1)
async def handle(ctx: RequestContext, req: AlterPartitionReassignmentsRequest) -> dict[str, Any]:
    allow_rf_change = bool(getattr(req, "allow_replication_factor_change", True)) if ctx.version >= 1 else True
    requested = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                 for t in req.topics for p in t.partitions}
    if not ctx.allowed_cluster(Op.ALTER):
        error = BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, UNAUTHORIZED)
        return _answer({key: error for key in requested}, allow_rf_change, error)
    results: dict[tuple[str, int], BrokerError | None]
    try:
        controller = cluster_controller(ctx)
        if controller is not None:
            results = await controller.reassigner.alter(requested, allow_rf_change)
        else:
            results = {key: _single_node(ctx, key, target, allow_rf_change) for key, target in requested.items()}
    except BrokerError as exc:  # NOT_CONTROLLER: the top level only, as Kafka
        return _answer({}, allow_rf_change, exc)
    for (name, index), result in sorted(results.items(), key=lambda item: item[0]):
        if result is None:
            log.info("%s: %s-%d to replicas %s", API, name, index, requested[(name, index)])
    return _answer(results, allow_rf_change, None)


def _single_node(ctx: RequestContext, key: tuple[str, int], target: tuple[int, ...] | None,
                 allow_rf_change: bool) -> BrokerError | None:
    if not single_node_has(ctx, *key):
        return UnknownTopicOrPartition("The partition does not exist.")
    if target is None:
        return BrokerError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                           f"No partition reassignment is in progress for {key[0]}-{key[1]}.")
    node = ctx.cluster.node_id
    try:
        check_target(ReplicaAssignment((node,)), target, {node}, allow_rf_change)
    except BrokerError as exc:
        return exc
    return None  # its one replica asked for: nothing moves


def _answer(results: dict[tuple[str, int], BrokerError | None], allow_rf_change: bool,
            error: BrokerError | None) -> dict[str, Any]:
    def entry(index: int, result: BrokerError | None) -> dict[str, Any]:
        return {"partition_index": index, "error_code": result.code if result else 0,
                "error_message": result.message if result else None}
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
            "error_code": error.code if error else 0, "error_message": error.message if error else None,
            "responses": [{"name": name, "partitions": partitions} for name, partitions in by_topic(results, entry)]}
