"""What the controller's APIs (ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments) share:
reaching the controller and grouping per-partition answers by topic.

In a ZooKeeper cluster they are served by the active controller only (Kafka's ZooKeeper mode answers
NOT_CONTROLLER elsewhere; clients send them to the controller Metadata names). A single node is its own
controller: its partitions have one replica, itself, which is their preferred leader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError

if TYPE_CHECKING:
    from ..cluster.controller import Controller
    from .registry import RequestContext

__all__ = ["by_topic", "cluster_controller", "single_node_has"]

T = TypeVar("T")


def cluster_controller(ctx: RequestContext) -> Controller | None:
    """The cluster's controller object on this broker (None on a single node); NOT_CONTROLLER (BrokerError)
    while this broker has not joined the cluster yet."""
    membership = ctx.cluster.membership
    if membership is None:
        return None
    if membership.controller is None:
        raise BrokerError(ErrorCode.NOT_CONTROLLER, f"Broker {ctx.cluster.node_id} has not joined the cluster yet.")
    return membership.controller


def single_node_has(ctx: RequestContext, name: str, index: int) -> bool:
    """Whether the single node holds partition ``index`` of topic ``name``."""
    return ctx.cluster.local_partition(name, index) is not None


def by_topic(results: Mapping[tuple[str, int], T], entry: Callable[[int, T], dict[str, Any]]
             ) -> list[tuple[str, list[dict[str, Any]]]]:
    """``entry(index, result)`` for every partition, grouped by topic (topics and partitions in order)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for (name, index), result in sorted(results.items(), key=lambda item: item[0]):
        grouped.setdefault(name, []).append(entry(index, result))
    return list(grouped.items())
