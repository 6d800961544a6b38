"""The controller's work on topics, on the broker elected controller (controller_election.py): it writes each
partition's state znode as election.py decides it, and deletes the topics named in /admin/delete_topics.

Triggers: becoming controller and any change of the live brokers (every partition is looked at: a broker's
death touches all it led or followed), a topic's new partitions, a partition's state written by someone else
(a leader's ISR change may make the preferred replica electable). Decisions are taken in the event loop on
the view every broker keeps (topic_sync.py); the writes go out in a worker thread, pipelined, each one a
ZooKeeper transaction that checks /controller_epoch's version (a controller that lost its place writes
nothing: Kafka's controller epoch fence) and the state's own version (written over only the state decided on).

Replica reassignments (broker/cluster/reassigner.py), elections asked for (broker/cluster/leader_elections.py) and
controlled shutdowns (broker/cluster/controlled_shutdown.py, whose brokers shutting down every decision leaves out)
run on the same controller: each pass, reassignment, election and shutdown holds the controller's lock, so every
decision is taken on the state the one before wrote. A topic being reassigned is deleted once its reassignment completes
(Kafka marks it ineligible for deletion meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from ..metrics.stats import ControllerStats
from ..replication.state import NO_LEADER, PartitionState
from .controlled_shutdown import ControlledShutdowns
from .controller_election import Fenced, commit_fenced, fenced_transaction
from .election import decide
from .leader_elections import LeaderElections
from .reassigner import Reassigner
from .znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
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


class Controller:
    def __init__(self, zk: KazooClient, sync: TopicSync, broker_id: int, config: BrokerConfig) -> None:
        self.zk = zk
        self.sync = sync
        self.broker_id = broker_id
        self.config = config
        self.active = False  # this broker is the controller and has read its epoch
        self.epoch = 0
        self.epoch_version = -1  # /controller_epoch's znode version: every write checks it
        self._elected = False  # the view names this broker controller
        self._live: frozenset[int] = frozenset()
        self._dirty: set[Key] = set()
        self._all = False
        self._deletions = False
        self._running: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()  # one pass, reassignment or election at a time
        self._admin = False  # /admin/reassign_partitions or /admin/preferred_replica_election to look at
        self._admin_watched = False
        self._stopped = False
        self._broker_change = False  # the live brokers changed: the next pass is timed (Kafka's BrokerChange)
        self.stats = ControllerStats()  # for the metrics
        self.reassigner = Reassigner(self)
        self.elections = LeaderElections(self)
        self.shutdowns = ControlledShutdowns(self)
        sync.on_change = self.mark
        sync.on_deletions = self._mark_deletions

    async def stop(self) -> None:
        self._elected = self.active = False
        self._stopped = True
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
            self.shutdowns.forget()
        self.shutdowns.view_changed(view)
        if live != self._live:
            self._live = live
            self._all = True
            self._broker_change = True
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

    def mark_admin(self) -> None:
        """/admin/reassign_partitions or /admin/preferred_replica_election changed (their watches)."""
        self._admin = True
        self._kick()

    @property
    def live(self) -> frozenset[int]:
        return self._live

    @property
    def is_active(self) -> bool:
        """This broker is the controller and acts as one (Kafka's ``isActive``, its ActiveControllerCount)."""
        return self.active and self._elected

    def check_active(self) -> None:
        """NOT_CONTROLLER unless this broker is the active controller (Kafka's ``isActive``)."""
        if not (self.active and self._elected):
            raise BrokerError(ErrorCode.NOT_CONTROLLER, f"Broker {self.broker_id} is not the controller.")

    @contextlib.asynccontextmanager
    async def acting(self) -> AsyncIterator[None]:
        """The controller's lock held as the active controller: NOT_CONTROLLER (BrokerError) when this broker is
        not, or turns out not to be (fenced) meanwhile."""
        async with self.lock:
            self.check_active()
            try:
                yield
            except Fenced:
                self.fenced()
                raise BrokerError(ErrorCode.NOT_CONTROLLER,
                                  f"Broker {self.broker_id} is no longer the controller.") from None

    def fenced(self) -> None:
        """Another broker is controller now: stop acting until the view names this one again."""
        log.warning("broker %d is no longer the controller (controller epoch moved past %d)", self.broker_id,
                    self.epoch)
        self.active = self._elected = False

    def _kick(self) -> None:
        if self._elected and (self._running is None or self._running.done()):
            self._running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._elected and (self._all or self._dirty or self._deletions or self._admin or not self.active):
            broker_change, self._broker_change = self._broker_change, False
            try:
                async with self.lock:
                    started = time.perf_counter()
                    try:
                        if not await self._pass():
                            return
                    finally:
                        if broker_change:  # Kafka times its BrokerChange events as LeaderElectionRateAndTimeMs
                            self.stats.leader_elections.record_ms((time.perf_counter() - started) * 1000)
            except Fenced:
                self.fenced()
                return
            except Exception:  # connection loss and the like: the reconnect's view change runs it all again
                log.exception("the controller's pass failed; it runs again on the next change")
                self.active = False
                self._all = self._deletions = True
                return

    async def _pass(self) -> bool:
        """One pass over what changed; False when this broker turns out not to be the controller."""
        if not self.active:
            self.active = await asyncio.to_thread(self._read_epoch)
            if not self.active:
                return False  # the next view change tells
            log.info("broker %d acts as controller (controller epoch %d)", self.broker_id, self.epoch)
            await self._watch_admin()
            self._admin = True  # what was asked while no controller was active
        if self._admin:
            self._admin = False
            await self.reassigner.read_legacy()
            await self.elections.read_znode()
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
            await self.write(writes)
            log.info("controller: %d of %d partition states written in %.0f ms", len(writes), len(keys),
                     (time.perf_counter() - started) * 1000)
        if await self.reassigner.advance(keys) and self.sync.deleting:
            self._deletions = True  # a topic's deletion may have waited for its reassignment
        return True

    # -- decisions (event loop) ----------------------------------------------------------

    def _decide(self, keys: set[Key]) -> list[tuple[str, int, PartitionState, bool]]:
        writes = []
        for name, index in sorted(keys):
            meta = self.sync.topics.get(name)
            if meta is None or name in self.sync.deleting or index not in meta.assignment:
                continue
            state = self.decision(name, index)
            if state is not None:
                writes.append((name, index, state, meta.states.get(index) is None))
        return writes

    def decision(self, name: str, index: int) -> PartitionState | None:
        """The state to write over the partition's now (election.py's ``decide``); None: nothing to change."""
        meta = self.sync.topics[name]
        unclean = meta.overrides.get("unclean.leader.election.enable", "").strip().lower()
        return decide(meta.assignment[index], meta.states.get(index), self._live, self.epoch,
                      unclean == _TRUE if unclean else self.config.unclean_leader_election_enable,
                      self.config.auto_leader_rebalance_enable, self.shutdowns.shutting_down)

    # -- ZooKeeper (worker threads) ------------------------------------------------------

    async def _watch_admin(self) -> None:
        """Watch the two admin znodes a tool may write (once: kazoo's watches outlive reconnections)."""
        if self._admin_watched:
            return
        loop = asyncio.get_running_loop()

        def changed(_data: bytes | None, _stat: Any) -> bool | None:  # kazoo's thread
            if self._stopped:
                return False  # ends the watch
            loop.call_soon_threadsafe(self.mark_admin)
            return None

        def install() -> None:
            for path in (REASSIGN_PARTITIONS, PREFERRED_REPLICA_ELECTION):
                self.zk.DataWatch(path, changed)
        await asyncio.to_thread(install)
        self._admin_watched = True  # (a failed install is tried again by the next pass that takes over)

    def _read_epoch(self) -> bool:
        try:
            if parse_controller(self.zk.get(CONTROLLER)[0]) != self.broker_id:
                return False
        except (NoNodeError, ValueError):
            return False
        raw, stat = self.zk.get(CONTROLLER_EPOCH)
        self.epoch, self.epoch_version = int(raw or b"0"), stat.version
        return True

    async def write(self, writes: list[tuple[str, int, PartitionState, bool]]) -> set[Key]:
        """Write the states (name, index, state, whether its znode is new); the partitions written (the others
        changed meanwhile: their watch events bring the new state). Fenced when another broker is controller."""
        before = {(name, index): self._held(name, index) for name, index, _, _ in writes}
        written = set()
        for name, index, state in await asyncio.to_thread(self._write_states, writes):
            held = before[(name, index)]
            if held is not None and state.leader not in (NO_LEADER, held.leader) and state.leader not in held.isr:
                self.stats.unclean_elections += 1  # a leader from outside the ISR (Kafka's UncleanLeaderElections)
            self.sync.record(name, index, state)  # at once: the next pass decides on what was written
            written.add((name, index))
        return written

    def _held(self, name: str, index: int) -> PartitionState | None:
        meta = self.sync.topics.get(name)
        return meta.states.get(index) if meta is not None else None

    def _write_states(self, writes: list[tuple[str, int, PartitionState, bool]]) -> list[tuple[str, int, Any]]:
        """Write the states (pipelined); those written, with their new znode versions. Fenced when
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
            tx = fenced_transaction(zk, self.epoch_version)
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
            raise Fenced
        return written

    async def _delete_marked(self) -> None:
        for name in sorted(self.sync.deleting):
            meta = self.sync.topics.get(name)
            if meta is not None and meta.reassigning():
                log.info("topic %s: its deletion waits for its partitions' reassignment to complete", name)
                continue
            await asyncio.to_thread(self._delete_topic, name)
            log.info("topic %s deleted (controller)", name)

    def _delete_topic(self, name: str) -> None:
        """One transaction: the topic's state, partition and topic znodes, its config and its deletion mark;
        fenced by the controller epoch. Re-read and tried again when the znodes changed meanwhile."""
        zk = self.zk
        for _ in range(5):
            tx = fenced_transaction(zk, self.epoch_version)
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
            if not any(isinstance(r, Exception) for r in commit_fenced(tx)):
                return
        raise RuntimeError(f"topic {name}: its znodes kept changing while being deleted")
