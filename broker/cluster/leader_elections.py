"""Leader elections asked for, as Kafka's ZooKeeper-mode controller runs them (processReplicaLeaderElection):
ElectLeaders (key 43) on the controller, and ``/admin/preferred_replica_election``
(``{"version":1,"partitions":[{"topic","partition"}]}``, written by ``kafka-preferred-replica-election
--zookeeper`` and the like), elected when it appears and then deleted.

Per partition, in Kafka's words: UNKNOWN_TOPIC_OR_PARTITION "The partition does not exist."; a topic being
deleted INVALID_TOPIC_EXCEPTION "The topic is being deleted"; PREFERRED: ELECTION_NOT_NEEDED when the preferred
replica (the assignment's first) leads, else it leads when it is live and in the ISR, else
PREFERRED_LEADER_NOT_AVAILABLE; UNCLEAN: ELECTION_NOT_NEEDED while a live broker leads, else the first live
in-sync replica, else the first live replica (records it lacks are lost), else ELIGIBLE_LEADERS_NOT_AVAILABLE.
An election writes the partition's state with the leader epoch raised by one (broker/cluster/election.py
decides it), through the controller's fenced writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NoNodeError

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError, UnknownTopicOrPartition
from ..replication.state import NO_LEADER, PartitionState
from .controller_election import commit_fenced, fenced_transaction
from .election import elect_preferred, elect_unclean
from .znodes import PREFERRED_REPLICA_ELECTION, parse_preferred_replica_election

if TYPE_CHECKING:
    from .controller_api import ControllerApi
    from .topic_sync import Key

__all__ = ["PREFERRED", "UNCLEAN", "LeaderElections"]

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type (Kafka's ElectionType)
_STRATEGY = {PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
             UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)"}
_FAILED = {PREFERRED: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, UNCLEAN: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
NOT_NEEDED = "Leader election not needed for topic partition."
_TRIES = 5  # a partition whose state changed under the write (a leader's ISR write) is decided again
_RETRY_WAIT = 2.0  # seconds for such a partition's new state to reach the view


class LeaderElections:
    def __init__(self, controller: ControllerApi) -> None:
        self.controller = controller

    async def elect(self, keys: Iterable[Key], election_type: int) -> dict[Key, int | BrokerError]:
        """Each partition's new leader, or why it has none (ELECTION_NOT_NEEDED among them); NOT_CONTROLLER
        (BrokerError) when this broker is not the active controller."""
        async with self.controller.acting():
            return await self._elect(set(keys), election_type)

    async def read_znode(self) -> None:
        """Elect the preferred replicas /admin/preferred_replica_election names, then delete it. (The controller's
        lock is held.)"""
        raw = await asyncio.to_thread(self._read)
        if raw is None:
            return
        try:
            keys = parse_preferred_replica_election(raw)
        except ValueError as exc:
            log.error("%s; deleted", exc)
            keys = set()
        results = await self._elect(keys, PREFERRED)
        for (name, index), result in sorted(results.items(), key=lambda item: item[0]):
            if isinstance(result, int):
                log.info("%s: %s-%d led by its preferred replica %d", PREFERRED_REPLICA_ELECTION, name, index, result)
            elif result.code != ErrorCode.ELECTION_NOT_NEEDED:
                log.warning("%s: %s-%d: %s: %s", PREFERRED_REPLICA_ELECTION, name, index,
                            ErrorCode(result.code).name, result.message)
        await asyncio.to_thread(self._delete)

    async def _elect(self, keys: set[Key], election_type: int) -> dict[Key, int | BrokerError]:
        results: dict[Key, int | BrokerError] = {}
        sync = self.controller.sync
        for _ in range(_TRIES):
            writes = []
            for key in sorted(keys):
                decided = self._decide(key, election_type)
                if isinstance(decided, BrokerError):
                    results[key] = decided
                else:
                    writes.append((key[0], key[1], decided, False))
            if not writes:
                return results
            written = await self.controller.write(writes)
            for name, index, state, _ in writes:
                if (name, index) in written:
                    results[(name, index)] = state.leader
            keys = {(name, index) for name, index, _, _ in writes if (name, index) not in written}
            if not keys:
                return results
            # (changed meanwhile: decided again once the view has the new state)
            await sync.wait_for_new_states({key: sync.state_version(*key) for key in keys}, _RETRY_WAIT)
        for key in keys:
            results[key] = BrokerError(_FAILED[election_type], f"The state of partition {key[0]}-{key[1]} kept "
                                                               f"changing under the election.")
        return results

    def _decide(self, key: Key, election_type: int) -> PartitionState | BrokerError:
        """The state electing ``key``'s leader, or the error answered for it."""
        name, index = key
        sync, live = self.controller.sync, self.controller.live
        meta = sync.topics.get(name)
        if meta is None or index not in meta.assignment:
            return UnknownTopicOrPartition("The partition does not exist.")
        if name in sync.deleting:
            return BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
        replicas, state = meta.assignment[index], meta.states.get(index)
        elected = None
        if state is not None:
            if election_type == PREFERRED:
                if state.leader == replicas[0]:
                    return BrokerError(ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
                elected = elect_preferred(replicas, state, live, self.controller.epoch)
            else:
                if state.leader != NO_LEADER and state.leader in live:
                    return BrokerError(ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
                elected = elect_unclean(replicas, state, live, self.controller.epoch)
        if elected is None:
            return BrokerError(_FAILED[election_type], f"Failed to elect leader for partition {name}-{index} "
                                                       f"under strategy {_STRATEGY[election_type]}")
        return elected

    # -- ZooKeeper (worker threads) --------------------------------------------------------

    def _read(self) -> bytes | None:
        try:
            raw, _ = self.controller.zk.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        return bytes(raw)

    def _delete(self) -> None:
        """Delete /admin/preferred_replica_election, fenced by /controller_epoch, so a tool may write the next."""
        tx = fenced_transaction(self.controller.zk, self.controller.epoch_version)
        tx.delete(PREFERRED_REPLICA_ELECTION)
        (result,) = commit_fenced(tx)
        if isinstance(result, Exception) and not isinstance(result, (NoNodeError, BadVersionError)):
            raise result

