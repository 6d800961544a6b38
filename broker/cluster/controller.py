"""The controller's work on topics, on the broker elected controller (controller_election.py): it writes each
partition's state znode as election.py decides it, and deletes the topics named in /admin/delete_topics.

Triggers: becoming controller and any change of the live brokers (every partition is looked at: a broker's
death touches all it led or followed), a topic's new partitions, a partition's state written by someone else
(a leader's ISR change may make the preferred replica electable). Decisions are taken in the event loop on
the view every broker keeps (topic_sync.py); the writes go out in a worker thread, pipelined, each one a
ZooKeeper transaction that checks /controller_epoch's version (a controller that lost its place writes
nothing: Kafka's controller epoch fence) and the state's own version (written over only the state decided on).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..replication.state import PartitionState
from .election import decide
from .znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    ClusterView,
    delete_topic_path,
    parse_controller,
    partition_path,
    partitions_path,
    state_path,
    topic_config_path,
    topic_path,
)

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from .topic_sync import Key, TopicSync

__all__ = ["Controller"]

log = logging.getLogger(__name__)

_TRUE = "true"


class _Fenced(Exception):
    """/controller_epoch moved on: another broker is controller."""


class Controller:
    def __init__(self, zk: KazooClient, sync: TopicSync, broker_id: int, config: BrokerConfig) -> None:
        self.zk = zk
        self.sync = sync
        self.broker_id = broker_id
        self.config = config
        self.active = False  # this broker is the controller and has read its epoch
        self.epoch = 0
        self._epoch_version = -1
        self._elected = False  # the view names this broker controller
        self._live: frozenset[int] = frozenset()
        self._dirty: set[Key] = set()
        self._all = False
        self._deletions = False
        self._running: asyncio.Task[None] | None = None
        sync.on_change = self.mark
        sync.on_deletions = self._mark_deletions

    async def stop(self) -> None:
        self._elected = self.active = False
        if self._running is not None:
            self._running.cancel()
            await asyncio.gather(self._running, return_exceptions=True)

    # -- triggers (event loop) ---------------------------------------------------------

    def view_changed(self, view: ClusterView) -> None:
        elected = view.controller_id == self.broker_id
        live = frozenset(view.brokers)
        if elected != self._elected:
            self._elected = elected
            self.active = False  # (re)reads its epoch before writing
            self._all = self._deletions = True
        if live != self._live:
            self._live = live
            self._all = True
        self._kick()

    def mark(self, keys: set[Key] | None) -> None:
        if not self._elected:
            return
        if keys is None:
            self._all = True
        else:
            self._dirty |= keys
        self._kick()

    def _mark_deletions(self) -> None:
        self._deletions = True
        self._kick()

    def _kick(self) -> None:
        if self._elected and (self._running is None or self._running.done()):
            self._running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._elected and (self._all or self._dirty or self._deletions or not self.active):
            try:
                if not self.active:
                    self.active = await asyncio.to_thread(self._read_epoch)
                    if not self.active:
                        return  # the next view change tells
                    log.info("broker %d acts as controller (controller epoch %d)", self.broker_id, self.epoch)
                if self._deletions:
                    self._deletions = False
                    await self._delete_marked()
                if self._all:
                    keys: set[Key] = {(t, p) for t, meta in self.sync.topics.items() for p in meta.assignment}
                    self._all = False
                    self._dirty.clear()
                else:
                    keys, self._dirty = self._dirty, set()
                started = time.perf_counter()
                writes = self._decide(keys)
                if writes:
                    await self._write(writes)
                    log.info("controller: %d of %d partition states written in %.0f ms", len(writes), len(keys),
                             (time.perf_counter() - started) * 1000)
            except _Fenced:
                log.warning("broker %d is no longer the controller (controller epoch moved past %d)",
                            self.broker_id, self.epoch)
                self.active = self._elected = False
                return
            except Exception:  # connection loss and the like: the reconnect's view change runs it all again
                log.exception("the controller's pass failed; it runs again on the next change")
                self.active = False
                self._all = self._deletions = True
                return

    # -- decisions (event loop) ----------------------------------------------------------

    def _decide(self, keys: set[Key]) -> list[tuple[str, int, PartitionState, bool]]:
        writes = []
        preferred = self.config.auto_leader_rebalance_enable
        for name, index in sorted(keys):
            meta = self.sync.topics.get(name)
            if meta is None or name in self.sync.deleting or index not in meta.assignment:
                continue
            unclean = meta.overrides.get("unclean.leader.election.enable", "").strip().lower()
            held = meta.states.get(index)
            state = decide(meta.assignment[index], held, self._live, self.epoch,
                           unclean == _TRUE if unclean else self.config.unclean_leader_election_enable, preferred)
            if state is not None:
                writes.append((name, index, state, held is None))
        return writes

    # -- ZooKeeper (worker threads) ------------------------------------------------------

    def _read_epoch(self) -> bool:
        try:
            if parse_controller(self.zk.get(CONTROLLER)[0]) != self.broker_id:
                return False
        except (NoNodeError, ValueError):
            return False
        raw, stat = self.zk.get(CONTROLLER_EPOCH)
        self.epoch, self._epoch_version = int(raw or b"0"), stat.version
        return True

    async def _write(self, writes: list[tuple[str, int, PartitionState, bool]]) -> None:
        for name, index, state in await asyncio.to_thread(self._write_states, writes):
            self.sync.record(name, index, state)  # at once: the next pass decides on what was written

    def _write_states(self, writes: list[tuple[str, int, PartitionState, bool]]) -> list[tuple[str, int, Any]]:
        """Write the states (pipelined); those written, with their new znode versions. _Fenced when
        /controller_epoch moved on."""
        zk = self.zk
        for name in sorted({name for name, _, _, create in writes if create}):
            zk.ensure_path(partitions_path(name))  # once per topic: its partitions' znodes are then made in parallel
        parents = [zk.create_async(partition_path(name, index)) for name, index, _, create in writes if create]
        for pending in parents:
            try:
                pending.get()
            except NodeExistsError:
                pass
        commits = []
        for name, index, state, create in writes:
            tx = zk.transaction()
            tx.check(CONTROLLER_EPOCH, self._epoch_version)
            if create:
                tx.create(state_path(name, index), state.to_json())
            else:
                tx.set_data(state_path(name, index), state.to_json(), version=state.zk_version)
            commits.append(tx.commit_async())
        written = []
        fenced = False
        for (name, index, state, create), pending in zip(writes, commits, strict=True):
            results = pending.get()
            if isinstance(results[0], BadVersionError):  # (a later op's failure rolls the check back: not fenced)
                fenced = True
                continue
            if isinstance(results[1], Exception):  # written meanwhile: its watch event brings it, and a new pass
                if not isinstance(results[1], (BadVersionError, NodeExistsError, NoNodeError)):
                    log.warning("%s: %r", state_path(name, index), results[1])
                continue
            version = 0 if create else results[1].version
            written.append((name, index, PartitionState(state.leader, state.leader_epoch, state.isr,
                                                        state.controller_epoch, state.replicas, version)))
        if fenced and not written:
            raise _Fenced
        return written

    async def _delete_marked(self) -> None:
        for name in sorted(self.sync.deleting):
            await asyncio.to_thread(self._delete_topic, name)
            log.info("topic %s deleted (controller)", name)

    def _delete_topic(self, name: str) -> None:
        """One transaction: the topic's state, partition and topic znodes, its config and its deletion mark;
        fenced by the controller epoch. Re-read and tried again when the znodes changed meanwhile."""
        zk = self.zk
        for _ in range(5):
            tx = zk.transaction()
            tx.check(CONTROLLER_EPOCH, self._epoch_version)
            try:
                indexes = zk.get_children(partitions_path(name))
            except NoNodeError:
                indexes = []
            for index in indexes:
                for child in zk.get_children(f"{partitions_path(name)}/{index}"):
                    tx.delete(f"{partitions_path(name)}/{index}/{child}")
                tx.delete(f"{partitions_path(name)}/{index}")
            if zk.exists(partitions_path(name)) is not None:
                tx.delete(partitions_path(name))
            if zk.exists(topic_path(name)) is not None:
                tx.delete(topic_path(name))
            if zk.exists(topic_config_path(name)) is not None:
                tx.delete(topic_config_path(name))
            tx.delete(delete_topic_path(name))
            results = tx.commit()
            if isinstance(results[0], BadVersionError):
                raise _Fenced
            if not any(isinstance(r, Exception) for r in results):
                return
        raise RuntimeError(f"topic {name}: its znodes kept changing while being deleted")
