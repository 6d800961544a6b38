"""Brokers in a ZooKeeper cluster (tests/support/zkserver.py) as real subprocesses, and what their Metadata
says about the cluster (its brokers and controller, a topic's partitions), for the cluster tests and
bench/controller_failover.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import MetadataResponse

from .brokerproc import BrokerProcess
from .rawkafka import metadata_req, request


def cluster_broker(base: Path, connect: str, broker_id: int, session_timeout_ms: int) -> BrokerProcess:
    """Broker ``broker_id`` of the cluster at ``connect`` (host:port/chroot), logging beside its log dir."""
    base.mkdir(parents=True, exist_ok=True)
    return BrokerProcess(base / f"b{broker_id}", f"zookeeper.connect={connect}", f"broker.id={broker_id}",
                         f"zookeeper.session.timeout.ms={session_timeout_ms}")


def metadata_view(broker: BrokerProcess) -> tuple[set[int], int] | None:
    """(live broker ids, controller id) from the broker's Metadata answer via librdkafka; None when it fails."""
    try:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
    except Exception:  # not answering (yet): the caller's wait goes on
        return None
    return set(md.brokers), md.controller_id


def agreed_controller(brokers: list[BrokerProcess], ids: set[int]) -> int | None:
    """The controller id once every broker's Metadata lists exactly ``ids`` and the same controller among
    them; None until then."""
    answers = [metadata_view(b) for b in brokers]
    if any(a is None or a[0] != ids for a in answers):
        return None
    controllers = {a[1] for a in answers if a is not None}
    controller = controllers.pop() if len(controllers) == 1 else None
    return controller if controller in ids else None


# (leader, leader epoch, replicas, isr) of each partition, as one broker's Metadata (v8) answers
PartitionView = tuple[int, int, tuple[int, ...], tuple[int, ...]]


def topic_view(broker: BrokerProcess, topic: str) -> dict[int, PartitionView] | None:
    """The topic's partitions in the broker's Metadata; None when it fails or names an error for the topic."""
    try:
        answer = request(broker.port, metadata_req([topic]), MetadataResponse, timeout=5)
    except Exception:  # not answering (yet): the caller's wait goes on
        return None
    entry = answer.topics[0]
    if entry.error_code:
        return None
    return {p.partition_index: (p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes))
            for p in entry.partitions}


def agreed_topic(brokers: list[BrokerProcess], topic: str,
                 wanted: Callable[[dict[int, PartitionView]], bool] = bool) -> dict[int, PartitionView] | None:
    """The topic's partitions once every broker's Metadata answers the same and ``wanted`` holds of it."""
    views = [topic_view(b, topic) for b in brokers]
    first = views[0]
    if first is None or any(v != first for v in views) or not wanted(first):
        return None
    return first
