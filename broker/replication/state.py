"""One partition's leadership as the controller decides it, and how a leader writes an ISR change back.

``PartitionState`` is what Kafka's ZooKeeper znode ``/brokers/topics/<t>/partitions/<p>/state`` holds
(``{"controller_epoch":..,"leader":..,"version":1,"leader_epoch":..,"isr":[..]}``) plus the partition's
replica list from ``/brokers/topics/<t>`` and the znode's version, on which an ISR change is written
conditionally (as Kafka's leaders did with ``zkVersion``). The cluster code (broker/cluster/) reads it from
ZooKeeper and hands it to the replication code (this package); the leader hands ISR changes back through
an ``IsrWriter``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

__all__ = ["NO_LEADER", "IsrWriter", "PartitionState"]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # broker id; NO_LEADER while none is electable
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    replicas: tuple[int, ...] = ()  # the assignment, preferred leader first
    zk_version: int = -1  # the state znode's version this was read at (-1: not read from ZooKeeper)

    def to_json(self) -> bytes:
        """The state znode's data, in Kafka's layout (``replicas`` and ``zk_version`` live elsewhere)."""
        return json.dumps({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                           "leader_epoch": self.leader_epoch, "isr": list(self.isr)}).encode()

    @classmethod
    def from_json(cls, raw: bytes, replicas: tuple[int, ...] = (), zk_version: int = -1) -> PartitionState:
        """A state znode's data; ValueError naming what is wrong when it is not Kafka's JSON."""
        try:
            data = json.loads(raw)
            return cls(int(data["leader"]), int(data["leader_epoch"]), tuple(int(b) for b in data["isr"]),
                       int(data["controller_epoch"]), tuple(replicas), zk_version)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"not a partition state: {exc!r} in {raw[:200]!r}") from None


class IsrWriter(Protocol):
    """How a leader records an ISR change (leader and leader epoch unchanged)."""

    async def write_isr(self, topic: str, index: int, state: PartitionState,
                        isr: tuple[int, ...]) -> PartitionState | None:
        """Write ``isr`` over ``state`` if the stored state is still at ``state.zk_version``: the state as
        written (with its new version), or None when someone else changed it first (the controller moved
        leadership: the caller waits for the state it will be handed next)."""
        ...
