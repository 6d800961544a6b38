"""The controller's side of replica reassignment (the steps are decided in broker/cluster/reassignment.py), as
Kafka's ZooKeeper-mode KafkaController carries them out:

- AlterPartitionReassignments on the controller (``alter``) starts, replaces or cancels a partition's
  reassignment; the answer comes once it is under way (its assignment written), not once it completes.
- ``/admin/reassign_partitions`` (``{"version":1,"partitions":[{"topic","partition","replicas"}]}``, written by
  ``kafka-reassign-partitions --zookeeper`` and the like) is taken up when it appears; a partition is removed
  from it when its reassignment completes or is refused (logged), and the znode is deleted once empty. A
  reassignment asked through the API replaces the znode's one for that partition.
- The controller's passes (``advance``) complete a reassignment once every target replica is in the ISR, on the
  ISR change that makes it so, or after a controller's failover.
- ListPartitionReassignments (``list``) answers the reassignments under way from the topic znodes.

Each step writes the partition's state first (its removed replicas out of the ISR, a leader moved into the
target, the leader epoch raised) and then the topic znode's ``partitions`` / ``adding_replicas`` /
``removing_replicas``, both fenced by ``/controller_epoch`` as every controller write. Every broker follows the
topic znode (broker/cluster/topic_sync.py): an added replica opens its log and fetches from the leader, a removed
one stops and deletes its log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NoNodeError

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError, UnknownTopicOrPartition
from .controller_election import Fenced, commit_fenced, fenced_transaction
from .reassignment import ReplicaAssignment, check_target, next_state
from .znodes import (
    REASSIGN_PARTITIONS,
    parse_reassign_partitions,
    parse_reassigning,
    parse_topic,
    reassign_partitions_data,
    topic_data,
    topic_path,
)

if TYPE_CHECKING:
    from .controller_api import ControllerApi
    from .topic_sync import Key, TopicSync

__all__ = ["Reassigner"]

log = logging.getLogger(__name__)

_TRIES = 5  # conditional writes tried again on a concurrent change (a leader's ISR write) before giving up
_VIEW_WAIT = 10.0  # seconds for this broker's view to show the topic znode just written
_RETRY_WAIT = 2.0  # seconds for a state written meanwhile to reach the view (the controller's lock is held)

NO_PARTITION = "The partition does not exist."


class Reassigner:
    def __init__(self, controller: ControllerApi) -> None:
        self.controller = controller
        self._legacy_czxid: int | None = None  # the /admin/reassign_partitions already taken up (its creation)

    @property
    def sync(self) -> TopicSync:
        return self.controller.sync

    # -- the APIs (on the controller) ------------------------------------------------------

    async def alter(self, requested: dict[Key, tuple[int, ...] | None],
                    allow_replication_factor_change: bool = True) -> dict[Key, BrokerError | None]:
        """Start (target replicas) or cancel (None) each partition's reassignment: None for those under way (or
        cancelled), the error for the others (Kafka's processApiPartitionReassignment). NOT_CONTROLLER
        (BrokerError) when this broker is not the active controller."""
        async with self.controller.acting():
            results: dict[Key, BrokerError | None] = {}
            moves: dict[Key, ReplicaAssignment] = {}
            for key, target in requested.items():
                try:
                    moves[key] = self._build(key, target, allow_replication_factor_change)
                except BrokerError as exc:
                    results[key] = exc
            if moves:  # the latest reassignment wins over one asked through the znode
                await asyncio.to_thread(self._drop_legacy, lambda key, _target: key in moves)
            for key, new in moves.items():
                results[key] = await self._start(key, new)
            return results

    def list(self, keys: Iterable[Key] | None) -> dict[Key, ReplicaAssignment]:
        """The reassignments under way among ``keys`` (all when None); NOT_CONTROLLER when this broker is not
        the active controller."""
        self.controller.check_active()
        topics = self.sync.topics
        if keys is None:
            keys = [(name, p) for name, meta in topics.items() for p in sorted({*meta.adding, *meta.removing})]
        found = {}
        for name, index in keys:
            meta = topics.get(name)
            if meta is not None and index in meta.assignment:
                assignment = ReplicaAssignment.of(meta, index)
                if assignment.reassigning:
                    found[(name, index)] = assignment
        return found

    def _build(self, key: Key, target: tuple[int, ...] | None, allow_replication_factor_change: bool,
               ) -> ReplicaAssignment:
        """The partition's assignment once ``target`` is asked for (Kafka's validateReplicas and
        maybeBuildReassignment); BrokerError when it cannot be."""
        name, index = key
        meta = self.sync.topics.get(name)
        if meta is None or index not in meta.assignment or name in self.sync.deleting:
            raise UnknownTopicOrPartition(NO_PARTITION)
        current = ReplicaAssignment.of(meta, index)
        if target is None:
            if not current.reassigning:
                raise BrokerError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                  f"No partition reassignment is in progress for {name}-{index}.")
            return current.reassign_to(current.origin)
        check_target(current, target, self.controller.live, allow_replication_factor_change)
        return current.reassign_to(target)

    async def _start(self, key: Key, new: ReplicaAssignment) -> BrokerError | None:
        """Kafka's maybeTriggerPartitionReassignment for one partition: None once under way."""
        try:
            await self._move(key, new)
        except BrokerError as exc:
            return exc
        except Fenced:
            raise  # the caller answers NOT_CONTROLLER
        except Exception as exc:
            log.exception("%s-%d: reassignment to %s failed", *key, list(new.target))
            return BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
        return None

    # -- the controller's passes -----------------------------------------------------------

    async def advance(self, keys: Iterable[Key]) -> bool:
        """Complete the reassignments among ``keys`` whose target replicas are all in the ISR now; whether one
        completed. (The controller's lock is held.)"""
        completed = False
        for name, index in sorted(keys):
            meta = self.sync.topics.get(name)
            if meta is None or (index not in meta.adding and index not in meta.removing):
                continue
            state = meta.states.get(index)
            current = ReplicaAssignment.of(meta, index)
            if state is None or not current.complete_in(state.isr):
                continue
            try:
                completed |= await self._move((name, index), current)
            except BrokerError as exc:
                log.warning("%s-%d: completing its reassignment failed: %s", name, index, exc.message)
            except Fenced:
                raise
            except Exception:
                log.exception("%s-%d: completing its reassignment failed; tried again at its next change",
                              name, index)
        return completed

    async def read_legacy(self) -> None:
        """Take up /admin/reassign_partitions when it is new (Kafka watches for its creation: the controller
        itself rewrites it as partitions complete). (The controller's lock is held.)"""
        found = await asyncio.to_thread(self._read_legacy)
        if found is None:
            self._legacy_czxid = None
            return
        czxid, raw = found
        if czxid == self._legacy_czxid:
            return
        self._legacy_czxid = czxid
        try:
            targets = parse_reassign_partitions(raw)
        except ValueError as exc:
            log.error("%s; ignored (remove it and write it again)", exc)
            return
        log.info("%s: reassigning %d partitions", REASSIGN_PARTITIONS, len(targets))
        refused: dict[Key, BrokerError] = {}
        for key, target in sorted(targets.items()):
            try:
                new = self._build(key, target, True)
            except BrokerError as exc:
                refused[key] = exc
                continue
            error = await self._start(key, new)
            if error is not None:
                refused[key] = error
        for (name, index), why in sorted(refused.items()):
            log.warning("%s: the reassignment of %s-%d to %s is refused: %s: %s", REASSIGN_PARTITIONS, name, index,
                        list(targets[(name, index)]), ErrorCode(why.code).name, why.message)
        if refused:
            await asyncio.to_thread(self._drop_legacy, lambda key, _target: key in refused)

    # -- one partition's step (the controller's lock is held) ------------------------------

    async def _move(self, key: Key, new: ReplicaAssignment) -> bool:
        """Write the partition's state and then its assignment as ``new`` (completed at once when its target is
        in sync already); whether it completed. Kafka's onPartitionReassignment."""
        name, index = key
        controller = self.controller
        for _ in range(_TRIES):
            meta = self.sync.topics.get(name)
            if meta is None or index not in meta.assignment:
                raise UnknownTopicOrPartition(NO_PARTITION)
            state = meta.states.get(index)
            if state is None:
                raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE,
                                  f"Partition {name}-{index} has no leader yet; try again.")
            current = ReplicaAssignment.of(meta, index)
            wanted = new
            if wanted.reassigning and wanted.complete_in([r for r in state.isr if r in wanted.replicas]):
                wanted = wanted.completed()
            if wanted == current and not wanted.reassigning:  # nothing moves (its own replicas asked for)
                await self._completed(key, wanted)
                return True
            written = next_state(state, current, wanted, controller.live, controller.epoch)
            if written is None:
                log.info("%s-%d: the reassignment to %s waits: none of its replicas is live and in sync", name,
                         index, list(wanted.replicas))
                return False
            if not await controller.write([(name, index, written, False)]):
                # its state changed meanwhile (a leader's ISR write): decide again on the new one
                await self.sync.wait_for_new_states({key: state.zk_version}, _RETRY_WAIT)
                continue
            await self._write_assignment(key, wanted)
            if wanted.reassigning:
                log.info("%s-%d: reassignment under way: replicas %s, adding %s, removing %s (leader %d, epoch %d)",
                         name, index, list(wanted.replicas), list(wanted.adding), list(wanted.removing),
                         written.leader, written.leader_epoch)
                return False
            await self._completed(key, wanted)
            return True
        raise RuntimeError(f"{name}-{index}: its state kept changing under the reassignment")

    async def _completed(self, key: Key, done: ReplicaAssignment) -> None:
        log.info("%s-%d: reassignment complete: replicas %s", *key, list(done.replicas))
        await asyncio.to_thread(self._drop_legacy, lambda k, target: k == key and target == done.replicas)

    async def _write_assignment(self, key: Key, wanted: ReplicaAssignment) -> None:
        """The topic znode with the partition's ``wanted`` assignment, then seen by this broker's view."""
        version = await asyncio.to_thread(self._write_topic, key, wanted)
        if version is None:
            return
        name = key[0]

        def seen() -> bool:
            meta = self.sync.topics.get(name)
            return meta is None or meta.zk_version >= version
        if not await self.sync.wait_for(seen, _VIEW_WAIT):
            raise RuntimeError(f"{topic_path(name)} version {version} did not reach this broker within "
                               f"{_VIEW_WAIT:g} s")

    # -- ZooKeeper (worker threads) --------------------------------------------------------

    def _write_topic(self, key: Key, wanted: ReplicaAssignment) -> int | None:
        """Rewrite the partition's entries in its topic znode (read afresh: the other partitions' are kept), in a
        transaction checking /controller_epoch; the new znode version, None when it held ``wanted`` already."""
        name, index = key
        zk = self.controller.zk
        for _ in range(_TRIES):
            try:
                raw, stat = zk.get(topic_path(name))
            except NoNodeError:
                raise UnknownTopicOrPartition(NO_PARTITION) from None
            topic_id, assignment = parse_topic(name, raw)
            adding, removing = parse_reassigning(name, raw)
            if index not in assignment:
                raise UnknownTopicOrPartition(NO_PARTITION)
            if ReplicaAssignment(assignment[index], adding.get(index, ()), removing.get(index, ())) == wanted:
                return None
            assignment[index], adding[index], removing[index] = wanted.replicas, wanted.adding, wanted.removing
            tx = fenced_transaction(zk, self.controller.epoch_version)
            tx.set_data(topic_path(name), topic_data(topic_id, assignment, adding, removing), version=stat.version)
            (result,) = commit_fenced(tx)
            if isinstance(result, BadVersionError):  # CreatePartitions' write came first: read again
                continue
            if isinstance(result, Exception):
                raise result
            return int(result.version)
        raise RuntimeError(f"{topic_path(name)} kept changing under the reassignment of partition {index}")

    def _read_legacy(self) -> tuple[int, bytes] | None:
        try:
            raw, stat = self.controller.zk.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return stat.czxid, raw

    def _drop_legacy(self, drop: Callable[[Key, tuple[int, ...]], bool]) -> None:
        """Remove the partitions ``drop`` names from /admin/reassign_partitions (deleting it once empty), fenced
        by /controller_epoch (Kafka's maybeRemoveFromZkReassignment)."""
        zk = self.controller.zk
        for _ in range(_TRIES):
            try:
                raw, stat = zk.get(REASSIGN_PARTITIONS)
                targets = parse_reassign_partitions(raw)
            except (NoNodeError, ValueError):
                return
            kept = {k: t for k, t in targets.items() if not drop(k, t)}
            if len(kept) == len(targets):
                return
            tx = fenced_transaction(zk, self.controller.epoch_version)
            if kept:
                tx.set_data(REASSIGN_PARTITIONS, reassign_partitions_data(kept), version=stat.version)
            else:
                tx.delete(REASSIGN_PARTITIONS, version=stat.version)
            (result,) = commit_fenced(tx)
            if isinstance(result, (BadVersionError, NoNodeError)):
                continue
            if isinstance(result, Exception):
                raise result
            if not kept:
                log.info("%s: every partition in it reassigned; deleted", REASSIGN_PARTITIONS)
            return
        raise RuntimeError(f"{REASSIGN_PARTITIONS} kept changing while partitions were removed from it")

