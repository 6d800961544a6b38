"""FindCoordinator (key 10), v0-v2.

Behavior: this node coordinates every group (key type 0; DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED) and every transactional id (key type 1; DESCRIBE on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Other key types are INVALID_REQUEST.
In a ZooKeeper cluster a group's coordinator is the leader of its ``__consumer_offsets`` partition
(group/store.py's ``offsets_partition``) and a transactional id's the leader of its ``__transaction_state``
partition (txn/store.py's ``txn_partition``), as Kafka's: the first FindCoordinator of its kind makes the topic
(``offsets.topic.num.partitions`` / ``transaction.state.log.num.partitions`` partitions,
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor`` replicas;
COORDINATOR_NOT_AVAILABLE while fewer brokers are live than that factor, and until its partitions have leaders),
and a partition without a leader is COORDINATOR_NOT_AVAILABLE.
Not implemented: v4's batched keys (KIP-699).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..config.broker_config import BrokerConfig
from ..errors import BrokerError
from ..group.store import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG, offsets_partition
from ..protocol.requests import FindCoordinatorRequest
from ..txn.store import TRANSACTION_STATE_TOPIC, transaction_state_config, txn_partition
from .k03_metadata import brokers
from .registry import RequestContext, api

GROUP, TRANSACTION = 0, 1
_CREATION_WAIT_S = 3.0  # how long the FindCoordinator that made a topic waits for its leaders


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
    if ctx.cluster.membership is not None:
        return await _coordinator(ctx, _GROUPS if key_type == GROUP else _TRANSACTIONS, req.key, live)
    return _answer(live[0])


def _answer(broker: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": broker["node_id"],
            "host": broker["host"], "port": broker["port"]}


@dataclass(frozen=True)
class _Kind:
    """A coordinator's internal topic: its name and configs, the properties it is made with, and where a key's
    partition is."""

    topic: str
    partitions: Callable[[BrokerConfig], int]
    factor: Callable[[BrokerConfig], int]
    factor_property: str
    what: str  # as Kafka's refusal names the topic
    configs: Callable[[BrokerConfig], dict[str, str]]
    partition_of: Callable[[str, int], int]


_GROUPS = _Kind(OFFSETS_TOPIC, lambda c: c.offsets_topic_num_partitions, lambda c: c.offsets_topic_replication_factor,
                "offsets.topic.replication.factor", "the offsets topic", lambda c: dict(OFFSETS_TOPIC_CONFIG),
                offsets_partition)
_TRANSACTIONS = _Kind(TRANSACTION_STATE_TOPIC, lambda c: c.transaction_state_log_num_partitions,
                      lambda c: c.transaction_state_log_replication_factor, "transaction.state.log.replication.factor",
                      "the transactions state topic", transaction_state_config, txn_partition)


async def _coordinator(ctx: RequestContext, kind: _Kind, key: str, live: list[dict[str, Any]]) -> dict[str, Any]:
    """The leader of the key's partition of the kind's topic, the topic made first when missing."""
    from ..cluster.topic_admin import create_topic, plan_topic, wait_for_leaders  # kazoo: cluster mode only

    cluster, config = ctx.cluster, ctx.cluster.config
    membership = cluster.membership
    assert membership is not None
    meta = membership.sync.topics.get(kind.topic)
    if meta is None:
        factor = kind.factor(config)
        if len(membership.view.brokers) < factor:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          f"Number of alive brokers '{len(membership.view.brokers)}' does not meet the required "
                          f"replication factor '{factor}' for {kind.what} (configured via "
                          f"'{kind.factor_property}').")
        try:
            plan = plan_topic(cluster, kind.topic, kind.partitions(config), factor, None, kind.configs(config))
            await create_topic(cluster, kind.topic, plan, kind.configs(config))
        except BrokerError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:  # made by another broker meanwhile: on its way
                return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{kind.topic} could not be made: {exc}")
        await wait_for_leaders(cluster, [kind.topic], _CREATION_WAIT_S)  # then answered, or retried
        meta = membership.sync.topics.get(kind.topic)
        if meta is None:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{kind.topic} is being made.")
    state = meta.states.get(kind.partition_of(key, meta.partition_count))
    leader = next((b for b in live if state is not None and b["node_id"] == state.leader), None)
    if leader is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    return _answer(leader)
