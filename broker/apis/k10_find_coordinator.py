"""FindCoordinator (key 10), v0-v2.

Behavior: this node coordinates every group (key type 0; DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED) and every transactional id (key type 1; DESCRIBE on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Other key types are INVALID_REQUEST.
In a ZooKeeper cluster a group's coordinator is the leader of its ``__consumer_offsets`` partition
(group/store.py's ``offsets_partition``), as Kafka's: the first FindCoordinator for a group makes the topic
(``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``; COORDINATOR_NOT_AVAILABLE while fewer
brokers are live than that factor, and until its partitions have leaders), and a partition without a leader is
COORDINATOR_NOT_AVAILABLE. A transactional id's coordinator is still the lowest-id live broker (each broker's
``__transaction_state`` is its own).
Not implemented: v4's batched keys (KIP-699).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..group.store import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG, offsets_partition
from ..protocol.requests import FindCoordinatorRequest
from .k03_metadata import brokers
from .registry import RequestContext, api

GROUP, TRANSACTION = 0, 1
# A transaction coordinator writes its markers into its own replicas of the transaction's partitions, and its
# state into a __transaction_state that is not replicated: in a cluster that would make follower logs diverge
# from their leaders'. Until it is replicated, transactions are refused there (docs/CLUSTER.md).
TRANSACTIONS_NOT_IN_A_CLUSTER = ("transactions are not supported in a ZooKeeper cluster yet: __transaction_state is "
                                 "not replicated (docs/CLUSTER.md); idempotent producers are")
_CREATION_WAIT_S = 3.0  # how long the FindCoordinator that made __consumer_offsets waits for its leaders


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": -1, "host": "",
            "port": -1}


@api(key=10, min=0, max=2)
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> dict[str, Any]:
    key_type = getattr(req, "key_type", GROUP)
    if key_type == GROUP and not ctx.allowed_group(Op.DESCRIBE, req.key):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    if key_type == TRANSACTION and not ctx.allowed_transactional_id(Op.DESCRIBE, req.key):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
    if key_type not in (GROUP, TRANSACTION):
        return _error(ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}")
    live = brokers(ctx.cluster, ctx.advertised)
    if key_type == GROUP and ctx.cluster.membership is not None:
        return await _group_coordinator(ctx, req.key, live)
    if key_type == TRANSACTION and ctx.cluster.membership is not None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, TRANSACTIONS_NOT_IN_A_CLUSTER)
    return _answer(live[0])


def _answer(broker: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": broker["node_id"],
            "host": broker["host"], "port": broker["port"]}


async def _group_coordinator(ctx: RequestContext, group_id: str, live: list[dict[str, Any]]) -> dict[str, Any]:
    """The leader of the group's ``__consumer_offsets`` partition, the topic made first when missing."""
    from ..cluster.topic_admin import create_topic, plan_topic, wait_for_leaders  # kazoo: cluster mode only

    cluster, config = ctx.cluster, ctx.cluster.config
    membership = cluster.membership
    assert membership is not None
    meta = membership.sync.topics.get(OFFSETS_TOPIC)
    if meta is None:
        factor = config.offsets_topic_replication_factor
        if len(membership.view.brokers) < factor:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          f"Number of alive brokers '{len(membership.view.brokers)}' does not meet the required "
                          f"replication factor '{factor}' for the offsets topic (configured via "
                          f"'offsets.topic.replication.factor').")
        try:
            plan = plan_topic(cluster, OFFSETS_TOPIC, config.offsets_topic_num_partitions, factor, None,
                              dict(OFFSETS_TOPIC_CONFIG))
            await create_topic(cluster, OFFSETS_TOPIC, plan, dict(OFFSETS_TOPIC_CONFIG))
        except BrokerError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:  # made by another broker meanwhile: on its way
                return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} could not be made: {exc}")
        await wait_for_leaders(cluster, [OFFSETS_TOPIC], _CREATION_WAIT_S)  # then answered, or retried
        meta = membership.sync.topics.get(OFFSETS_TOPIC)
        if meta is None:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being made.")
    state = meta.states.get(offsets_partition(group_id, meta.partition_count))
    leader = next((b for b in live if state is not None and b["node_id"] == state.leader), None)
    if leader is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    return _answer(leader)
