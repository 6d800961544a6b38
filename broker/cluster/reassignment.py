"""Replica reassignment as Kafka's ZooKeeper-mode controller does it (KafkaController.onPartitionReassignment):
one partition's assignment while its replicas move, the checks of a requested target, and the partition state
the controller writes at each step. Decisions only; the ZooKeeper side is broker/cluster/reassigner.py.

In Kafka's words: RS is the partition's replica set (the topic znode's ``partitions``), AR the replicas being
added (``adding_replicas``), RR those being removed (``removing_replicas``), ORS = RS - AR the original replicas
and TRS = RS - RR the target.

- **Start** (or replace a reassignment under way) towards TRS: RS = TRS + ORS (the target first, in its order,
  Kafka's ``reassignTo``), AR = TRS - ORS, RR = ORS - TRS; the leader epoch is raised (Kafka's step A1) and the
  added replicas' brokers open them and fetch from the leader. Replicas of a replaced reassignment that the new
  one does not want leave the ISR (and their brokers delete them).
- **Complete**, once every replica of TRS is in the ISR: the leader moves into TRS if it is not there or not live
  (the first live in-sync replica of TRS, Kafka's ReassignPartitionLeaderElectionStrategy), RR leave the ISR and
  the epoch is raised (steps B3, B4), then RS = TRS, AR = RR = [] (B6): the removed replicas' brokers stop them
  and delete their logs (B5, broker/cluster/topic_sync.py).
- **Cancel** (null replicas): a reassignment back to ORS, completed at once (its replicas are in the ISR).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from ..replication.state import NO_LEADER, PartitionState
from .topic_meta import TopicMeta

__all__ = ["ReplicaAssignment", "check_target", "next_state"]


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas, and the reassignment under way (Kafka's controller ReplicaAssignment)."""

    replicas: tuple[int, ...]  # RS, the preferred leader first
    adding: tuple[int, ...] = ()  # AR
    removing: tuple[int, ...] = ()  # RR

    @classmethod
    def of(cls, meta: TopicMeta, index: int) -> ReplicaAssignment:
        return cls(meta.assignment[index], meta.adding.get(index, ()), meta.removing.get(index, ()))

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas once it completes."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from the original replicas to ``target`` (Kafka's ``reassignTo``)."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def completed(self) -> ReplicaAssignment:
        """RS = TRS, nothing added or removed."""
        return ReplicaAssignment(self.target)

    def complete_in(self, isr: Collection[int]) -> bool:
        """Every target replica is in sync (Kafka's isReassignmentComplete)."""
        return all(r in isr for r in self.target)

    def to_json(self) -> dict[str, list[int]]:
        return {"replicas": list(self.replicas), "adding_replicas": list(self.adding),
                "removing_replicas": list(self.removing)}


def check_target(current: ReplicaAssignment, replicas: Sequence[int], live: Collection[int],
                 allow_replication_factor_change: bool = True) -> None:
    """A requested target checked as Kafka's controller checks it (validateReplicas): INVALID_REPLICA_ASSIGNMENT
    naming the problem; INVALID_REPLICATION_FACTOR when the request forbids changing it (KIP-860) and the
    target does."""
    if not replicas:
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          "Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}")
    if any(r < 0 for r in replicas):
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(replicas)}")
    adding = current.reassign_to(replicas).adding
    if not set(adding) <= set(live):
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                          f"live broker list: {sorted(live)}")
    if not allow_replication_factor_change and len(replicas) != len(current.origin):
        raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"The replication factor is changed from {len(current.origin)} to {len(replicas)} but "
                          f"allowReplicationFactorChange is false.")


def next_state(state: PartitionState, current: ReplicaAssignment, new: ReplicaAssignment, live: Collection[int],
               controller_epoch: int) -> PartitionState | None:
    """The partition state to write before its assignment goes from ``current`` to ``new``, under a leader epoch
    raised by one: the replicas ``new`` drops leave the ISR, and a leader outside ``new`` (or not live) gives way
    to the first live in-sync replica of ``new``'s target (then of its other replicas). None when ``new`` is a
    completed assignment and none of its replicas can lead yet: the completion waits (Kafka's failed
    ReassignPartitionLeaderElectionStrategy leaves the partition as it was)."""
    removed = {r for r in current.replicas if r not in new.replicas}
    isr = tuple(r for r in state.isr if r not in removed)
    leader = state.leader
    if leader == NO_LEADER or leader not in new.replicas or leader not in live:
        candidates = (*new.target, *(r for r in new.replicas if r not in new.target))
        leader = next((r for r in candidates if r in live and r in isr), NO_LEADER)
        if leader == NO_LEADER and not new.reassigning:
            return None
    if not isr:  # as Kafka's removeReplicasFromIsr: the last in-sync replica stays named
        isr = state.isr[-1:]
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, new.replicas, state.zk_version)
