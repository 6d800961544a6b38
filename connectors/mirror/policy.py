"""Replication policies: how a topic is named in the target cluster and how that name is read back.

As Kafka's ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` (Java names accepted by
``replication_policy``). The cycle check walks a topic's sources: a topic that came from the target
is never mirrored back to it, so A <-> B runs without loops.
"""

from __future__ import annotations

__all__ = ["DefaultReplicationPolicy", "IdentityReplicationPolicy", "ReplicationPolicy", "is_cycle",
           "replication_policy"]

HEARTBEATS = "heartbeats"


class ReplicationPolicy:
    """Kafka's ``DefaultReplicationPolicy``: ``<source alias><separator><topic>``."""

    def __init__(self, separator: str = ".") -> None:
        if not separator:
            raise ValueError("replication.policy.separator must not be empty")
        self.separator = separator

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster the topic was mirrored from (None: a local topic)."""
        source, sep, _ = topic.partition(self.separator)
        return source if sep and source else None

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream (None: a local topic)."""
        source, sep, rest = topic.partition(self.separator)
        return rest if sep and source else None

    def original_topic(self, topic: str) -> str:
        """The topic's name where it was first produced."""
        seen = 0
        while (upstream := self.upstream_topic(topic)) is not None and upstream != topic and seen < 64:
            topic, seen = upstream, seen + 1
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs{self.separator}{cluster_alias}{self.separator}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self.separator}checkpoints{self.separator}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.separator}checkpoints{self.separator}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith("mm2") and topic.endswith(f"{self.separator}internal")) or \
            self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Never mirrored: MM2's own topics, Kafka's (``__consumer_offsets``, ``.``-prefixed) and Connect's."""
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class DefaultReplicationPolicy(ReplicationPolicy):
    pass


class IdentityReplicationPolicy(ReplicationPolicy):
    """Topics keep their names (heartbeats excepted, so they can still be traced); it cannot see cycles:
    use it for one-way flows only."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self.is_heartbeats_topic(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self.is_heartbeats_topic(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if topic != HEARTBEATS and topic.endswith(
            f"{self.separator}{HEARTBEATS}") else None

    def is_heartbeats_topic(self, topic: str) -> bool:
        return topic == HEARTBEATS or topic.endswith(f"{self.separator}{HEARTBEATS}")


_POLICIES: dict[str, type[ReplicationPolicy]] = {
    **{n: DefaultReplicationPolicy for n in ("DefaultReplicationPolicy",
                                             "org.apache.kafka.connect.mirror.DefaultReplicationPolicy")},
    **{n: IdentityReplicationPolicy for n in ("IdentityReplicationPolicy",
                                              "org.apache.kafka.connect.mirror.IdentityReplicationPolicy")},
}


def replication_policy(name: str = "DefaultReplicationPolicy", separator: str = ".") -> ReplicationPolicy:
    """The policy ``replication.policy.class`` names (Kafka's Java names accepted)."""
    cls = _POLICIES.get(name.strip())
    if cls is None:
        raise ValueError(f"replication.policy.class {name!r} is not DefaultReplicationPolicy or "
                         f"IdentityReplicationPolicy")
    return cls(separator)


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """Whether ``topic`` came (directly or through other clusters) from ``target_alias``: mirroring it
    there would loop (Kafka's ``MirrorSourceConnector.isCycle``)."""
    hops = 0
    while hops < 64:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic, hops = upstream, hops + 1
    return False
