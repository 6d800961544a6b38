"""What the controller writes for one partition, decided from its assignment, its current state and the live
brokers, as Kafka's PartitionStateMachine and ReplicaStateMachine decide it in ZooKeeper mode:

- a new partition: the live replicas form the ISR and the first of them (in assignment order) leads;
- its leader gone: the first replica (assignment order) that is live and in the ISR leads, the ISR keeps its
  live members; with none, ``unclean.leader.election.enable`` takes the first live replica (the ISR becomes
  it alone), else the partition has no leader (-1) and keeps its last in-sync replica in the ISR, so that
  replica can lead cleanly when it returns;
- a follower gone (or no longer a replica): it leaves the ISR (the leader stays);
- ``auto.leader.rebalance.enable``: the preferred replica (the assignment's first) leads again once it is
  live and in the ISR;
- a broker in controlled shutdown (broker/cluster/controlled_shutdown.py) is live but not eligible, as Kafka's
  ``shuttingDownBrokerIds``: it is elected nowhere, a new partition's ISR leaves it out, and it leaves every ISR
  but of the partitions it still leads (it keeps those until it stops).

Every change the controller writes raises the leader epoch by one (Kafka's ``newLeaderAndIsr``).

Elections asked for (ElectLeaders, /admin/preferred_replica_election: broker/cluster/leader_elections.py) use
Kafka's two strategies: the preferred replica when it is live and in the ISR
(PreferredReplicaPartitionLeaderElectionStrategy), and the offline election with unclean allowed (the first live
in-sync replica, else the first live replica, the ISR becoming it alone); a controlled shutdown moves the
partitions its broker leads with ControlledShutdownPartitionLeaderElectionStrategy (``elect_for_shutdown``).
"""

from __future__ import annotations

from collections.abc import Collection

from ..replication.state import NO_LEADER, PartitionState

__all__ = ["decide", "elect_for_shutdown", "elect_preferred", "elect_unclean"]


def decide(replicas: tuple[int, ...], state: PartitionState | None, live: Collection[int], controller_epoch: int,
           unclean: bool, preferred: bool, shutting_down: Collection[int] = ()) -> PartitionState | None:
    """The state to write over ``state`` (None when nothing is to change, or a new partition has no live replica).
    ``shutting_down``: live brokers in controlled shutdown, eligible for nothing."""
    eligible = frozenset(live).difference(shutting_down) if shutting_down else live
    if state is None:
        isr = tuple(r for r in replicas if r in eligible)
        if not isr:
            return None
        return PartitionState(isr[0], 0, isr, controller_epoch, replicas)
    leader = state.leader
    # (a replica a reassignment removed leaves the ISR too: its leader may have taken it in again meanwhile; a
    # broker shutting down stays in the ISR of what it still leads only)
    live_isr = tuple(b for b in state.isr if b in replicas and (b in eligible or (b == leader and b in live)))
    if leader == NO_LEADER or leader not in live or leader not in replicas:
        leader, isr = _elect(replicas, state.isr, live_isr, eligible, unclean)
    else:
        isr = live_isr
        # the leader is live, so it is in live_isr unless the ISR left it out (a leader always is in its ISR)
        if leader not in isr:
            isr = (leader, *isr)
    if preferred and leader != NO_LEADER and replicas and replicas[0] != leader \
            and replicas[0] in eligible and replicas[0] in isr:
        leader = replicas[0]
    if leader == state.leader and isr == state.isr:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, replicas, state.zk_version)


def _elect(replicas: tuple[int, ...], isr: tuple[int, ...], live_isr: tuple[int, ...], live: Collection[int],
           unclean: bool) -> tuple[int, tuple[int, ...]]:
    clean = next((r for r in replicas if r in live_isr), None)
    if clean is not None:
        return clean, live_isr
    if unclean:
        dirty = next((r for r in replicas if r in live), None)
        if dirty is not None:
            return dirty, (dirty,)
    # no leader: the ISR keeps its live members, or (none live) stays as it was, naming the last in sync
    return NO_LEADER, live_isr or isr


def elect_preferred(replicas: tuple[int, ...], state: PartitionState, live: Collection[int],
                    controller_epoch: int) -> PartitionState | None:
    """The preferred replica leading, when it is live and in the ISR; None when it cannot lead."""
    preferred = replicas[0] if replicas else NO_LEADER
    if preferred == NO_LEADER or preferred not in live or preferred not in state.isr:
        return None
    return PartitionState(preferred, state.leader_epoch + 1, state.isr, controller_epoch, replicas, state.zk_version)


def elect_unclean(replicas: tuple[int, ...], state: PartitionState, live: Collection[int],
                  controller_epoch: int) -> PartitionState | None:
    """A leader for a partition without a live one, out of the ISR if need be; None when no replica is live."""
    live_isr = tuple(b for b in state.isr if b in live)
    leader, isr = _elect(replicas, state.isr, live_isr, live, unclean=True)
    if leader == NO_LEADER:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, replicas, state.zk_version)


def elect_for_shutdown(replicas: tuple[int, ...], state: PartitionState, live: Collection[int],
                       shutting_down: Collection[int], controller_epoch: int) -> PartitionState | None:
    """Kafka's ControlledShutdownPartitionLeaderElectionStrategy for a partition led by a broker shutting down: the
    first replica (assignment order) that is live, in the ISR and not shutting down leads, and the ISR loses every
    broker shutting down; None when no replica can (the partition stays with its leader until it stops)."""
    leader = next((r for r in replicas if r in live and r in state.isr and r not in shutting_down), None)
    if leader is None:
        return None
    isr = tuple(b for b in state.isr if b not in shutting_down)
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, replicas, state.zk_version)
