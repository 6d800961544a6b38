"""Which replica a consumer should fetch from (KIP-392, fetching from the closest replica): Kafka's ReplicaSelector
implementations, chosen by the broker property ``replica.selector.class``.

A partition's leader asks its selector, for each consumer Fetch (v11+, which carries the consumer's
``client.rack`` as ``rack_id``), which replica that consumer should read from; when it names another broker, the
leader answers ``preferred_read_replica`` = that broker instead of records, and the consumer fetches from it
(a follower serves a consumer's Fetch below its own high watermark: produce.consumer_bounds). The leader offers
only in-sync followers whose log holds the fetch offset, with their log end and time since they last caught up
(ReplicaManager.findPreferredReadReplica), itself with its log end and 0.

- ``org.apache.kafka.common.replica.RackAwareReplicaSelector``: a replica in the consumer's rack, the leader when it
  is in that rack, else the most caught-up one there (ReplicaView.comparator: the largest log end, then the
  shortest time since caught up, then the largest broker id); the leader when no replica is in the consumer's rack
  or the consumer names none.
- ``org.apache.kafka.common.replica.LeaderReplicaSelector``: always the leader (as with none set).

Other classes cannot be loaded here: a broker configured with one does not start (the property is named).
This module imports nothing of the broker, so the config module can check the property with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LEADER_SELECTOR", "RACK_AWARE_SELECTOR", "ReplicaView", "check_selector_class", "select"]

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderReplicaSelector"
_SELECTORS = (RACK_AWARE_SELECTOR, LEADER_SELECTOR)


def check_selector_class(value: str | None) -> str | None:
    """``replica.selector.class`` as set (None or blank: no selector, consumers read from leaders); ValueError
    naming the classes this broker has for any other."""
    if value is None or not value.strip():
        return None
    name = value.strip()
    if name not in _SELECTORS:
        raise ValueError(f"Class {name} cannot be found; the replica selectors available are "
                         f"{', '.join(_SELECTORS)}")
    return name


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as a selector sees it (Kafka's ReplicaView): its broker, that broker's ``broker.rack``, its log
    end offset and how long ago it last caught up with the leader (0 for the leader)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int

    def caught_up_rank(self) -> tuple[int, int, int]:
        """ReplicaView.comparator's order, "most caught up" largest."""
        return self.log_end_offset, -self.time_since_caught_up_ms, self.broker_id


def select(selector: str, client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]) -> ReplicaView:
    """The replica ``selector`` prefers for a consumer in ``client_rack`` ("" when it names none), among the
    leader and the ``followers`` offered."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [f for f in followers if f.rack == client_rack]
    return max(same_rack, key=ReplicaView.caught_up_rank) if same_rack else leader
