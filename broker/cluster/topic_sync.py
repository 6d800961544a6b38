"""Every broker's view of the replicated topics in ZooKeeper, and what follows from it on this broker.

Watches (set again after a reconnection): the children of /brokers/topics, one data watch per topic znode
(its assignment; kazoo's recipes) and one per partition state znode (data_watches.py: their reads pipelined),
and the children of /admin/delete_topics (for the controller). A watch only hands its data into the event loop
(``call_soon_threadsafe``); installing watches and every other blocking ZooKeeper call runs in a worker
thread, so the event loop never waits on ZooKeeper. Each event carries the one znode it is about: nothing
is read again on an event.

From that view, this broker opens the logs of the partitions it is a replica of, sets each one's
``Partition.state`` and hands every change to the replication code (``cluster.replication.apply``), and
removes its logs of deleted topics: one task does that, partition by partition, in the order the changes came.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from ..replication.state import NO_LEADER, PartitionState
from .data_watches import DataWatches
from .topic_meta import TopicMeta
from .znodes import (
    BROKER_TOPICS,
    DELETE_TOPICS,
    parse_reassigning,
    parse_topic,
    parse_topic_config,
    state_path,
    topic_config_path,
    topic_path,
)

if TYPE_CHECKING:
    import uuid

    from ..topics.topic import Partition, Topic


class ReplicationHook(Protocol):
    async def apply(self, partition: Partition, state: PartitionState) -> None: ...


class ReplicaRegistry(Protocol):
    """What TopicSync needs of the broker's topic registry (topics/cluster.py's Cluster, which holds the
    membership: named by this protocol, not imported, so the two modules do not import each other)."""

    topics: dict[str, Topic]
    replicated: set[str]

    @property
    def replication(self) -> ReplicationHook | None: ...

    def local_partition(self, name: str, index: int) -> Partition | None: ...

    def open_replica(self, name: str, topic_id: uuid.UUID, overrides: dict[str, str], index: int) -> Partition: ...

    def drop_replica(self, name: str, index: int) -> None: ...

__all__ = ["TopicSync"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


class _Watched:
    """One topic's watches: once ``alive`` is False (the topic went) its callbacks return False, which ends them."""

    __slots__ = ("alive",)

    def __init__(self) -> None:
        self.alive = True


class TopicSync:
    def __init__(self, zk: KazooClient, cluster: ReplicaRegistry, broker_id: int) -> None:
        self.zk = zk
        self.cluster = cluster
        self.broker_id = broker_id
        self.topics: dict[str, TopicMeta] = {}
        self.deleting: frozenset[str] = frozenset()  # topics named in /admin/delete_topics
        self.on_change: Callable[[set[Key] | None], None] | None = None  # the controller's (partitions changed)
        self.on_deletions: Callable[[], None] | None = None
        self._watched: dict[str, _Watched] = {}
        self._states = DataWatches(zk, self._hand_in_state)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._local: dict[Key, None] = {}  # partitions whose local replica is to follow the view (ordered)
        self._localizing: asyncio.Task[None] | None = None
        self._again: set[Key] = set()  # handed to the replication code even if unchanged (follow_all)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()
        self._stopping = False

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._watch_roots)

    async def stop(self) -> None:
        self._stopping = True
        self._states.close()
        for watched in self._watched.values():
            watched.alive = False
        tasks = [*self._tasks, *([self._localizing] if self._localizing is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def follow_all(self) -> None:
        """Hand every local replica's state to the replication code again (for a ``cluster.replication`` set
        after the broker joined: the states handed before it came were not seen by it)."""
        keys = [(name, p) for name, meta in self.topics.items() for p in meta.assignment
                if self.broker_id in meta.assignment[p]]
        self._again.update(keys)
        self._localize(keys)

    # -- what the APIs read ------------------------------------------------------------

    def has_partition(self, name: str, index: int) -> bool:
        meta = self.topics.get(name)
        return meta is not None and index in meta.assignment

    def state_version(self, name: str, index: int) -> int | None:
        """The version of the partition's state znode as last seen (None: no state)."""
        meta = self.topics.get(name)
        state = meta.states.get(index) if meta is not None else None
        return state.zk_version if state is not None else None

    async def wait_for_new_states(self, versions: dict[Key, int | None], timeout: float) -> bool:
        """Until the view holds a state of each partition past the version given (a conditional write lost to
        another one waits for that one), or ``timeout`` seconds; whether it does."""
        return await self.wait_for(lambda: all(self.state_version(*k) != v for k, v in versions.items()), timeout)

    async def wait_for(self, done: Callable[[], bool], timeout: float) -> bool:
        """Until ``done()`` holds after some change of the view, or ``timeout`` seconds; whether it holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return done()
        return True

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- watches (worker threads and kazoo's thread) -----------------------------------

    def _watch_roots(self) -> None:
        self.zk.ChildrenWatch(BROKER_TOPICS, self._hand_in(self._on_topics))
        self.zk.ChildrenWatch(DELETE_TOPICS, self._hand_in(self._on_deletions))

    def _hand_in(self, handler: Callable[..., None], watched: _Watched | None = None) -> Callable[..., Any]:
        """A kazoo callback that passes its arguments to ``handler`` in the event loop; it ends the watch once
        ``watched`` is no longer alive."""
        def callback(*args: Any) -> bool | None:
            if self._stopping or (watched is not None and not watched.alive):
                return False
            assert self._loop is not None
            self._loop.call_soon_threadsafe(handler, *args)
            return None
        return callback

    def _watch_topic(self, name: str, watched: _Watched) -> None:
        try:
            overrides = parse_topic_config(name, self.zk.get(topic_config_path(name))[0])
        except NoNodeError:
            overrides = {}
        except ValueError as exc:
            log.error("%s", exc)
            overrides = {}
        self.zk.DataWatch(topic_path(name), self._hand_in(functools.partial(self._on_topic, name, watched, overrides),
                                                          watched))

    def _hand_in_state(self, path: str, data: bytes, stat: ZnodeStat) -> None:
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._on_state, path, data, stat)

    def _in_thread(self, what: str, fn: Callable[..., None], *args: Any,
                   on_error: Callable[[], None] | None = None) -> None:
        self._spawn(what, asyncio.to_thread(fn, *args), on_error)

    def _spawn(self, what: str, coro: Coroutine[Any, Any, Any], on_error: Callable[[], None] | None = None) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed: %s", what, t.exception(), exc_info=t.exception())
                if on_error is not None:
                    on_error()
        task.add_done_callback(done)

    # -- events (event loop) -----------------------------------------------------------

    def _on_topics(self, children: list[str]) -> None:
        names = set(children)
        for gone in set(self._watched) - names:
            self._forget(gone)
        for name in sorted(names - set(self._watched)):
            # a failed install is forgotten, so the next listing (kazoo lists again on reconnect) retries it
            self._rewatch(name)

    def _look_again(self, name: str) -> None:
        if self.zk.exists(topic_path(name)) is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._rewatch, name)

    def _rewatch(self, name: str) -> None:
        if name not in self._watched and not self._stopping:
            watched = self._watched[name] = _Watched()
            self._in_thread(f"watching topic {name}", self._watch_topic, name, watched,
                            on_error=functools.partial(self._unwatch, name, watched))

    def _unwatch(self, name: str, watched: _Watched) -> None:
        watched.alive = False
        if self._watched.get(name) is watched:
            del self._watched[name]

    def _on_deletions(self, children: list[str]) -> None:
        self.deleting = frozenset(children)
        if self.on_deletions is not None:
            self.on_deletions()

    def _forget(self, name: str) -> None:
        """The topic went from ZooKeeper: its watches end and its local replicas go."""
        watched = self._watched.pop(name, None)
        if watched is not None:
            watched.alive = False
        meta = self.topics.pop(name, None)
        if meta is None:
            return
        self._states.unwatch([state_path(name, p) for p in meta.assignment])
        log.info("topic %s deleted from the cluster", name)
        self._localize((name, p) for p in meta.assignment)
        self._touch()
        if self.on_change is not None:
            self.on_change({(name, p) for p in meta.assignment})

    def _on_topic(self, name: str, watched: _Watched, overrides: dict[str, str], data: bytes | None,
                  stat: ZnodeStat | None, event: Any = None) -> None:
        if not watched.alive:
            return
        if data is None or stat is None:  # deleted (the listing of /brokers/topics says so too)
            if self._watched.get(name) is watched:
                self._forget(name)
                # made again at once, the listing may not change: look whether it is there
                self._in_thread(f"looking for topic {name}", self._look_again, name)
            return
        try:
            topic_id, assignment = parse_topic(name, data)
            adding, removing = parse_reassigning(name, data)
        except ValueError as exc:
            log.error("%s", exc)
            return
        meta = self.topics.get(name)
        if meta is None:
            meta = self.topics[name] = TopicMeta(name, topic_id, assignment, overrides, stat.version, stat.czxid,
                                                 leaderless=set(assignment), adding=adding, removing=removing)
            changed = set(assignment)
            added = sorted(assignment)
            log.info("topic %s: %d partitions, replicas %s", name, len(assignment),
                     {p: list(r) for p, r in sorted(assignment.items())[:8]})
        else:
            if stat.version <= meta.zk_version:
                return
            added = sorted(set(assignment) - set(meta.assignment))
            changed = {p for p, r in assignment.items() if meta.assignment.get(p) != r}
            # a reassignment's progress (for the controller), even when the replicas stay
            changed |= {p for p in {*adding, *removing, *meta.adding, *meta.removing} & set(assignment)
                        if adding.get(p) != meta.adding.get(p) or removing.get(p) != meta.removing.get(p)}
            meta.assignment, meta.zk_version = assignment, stat.version
            meta.adding, meta.removing = adding, removing
            meta.leaderless.update(added)
            for p in changed:
                if p in meta.states:
                    meta.states[p] = replace(meta.states[p], replicas=assignment[p])
            if added:
                log.info("topic %s: partitions %s added", name, added)
        meta.metadata_partitions = None
        if added:
            self._states.watch([state_path(name, p) for p in added])
        self._localize((name, p) for p in sorted(changed))
        self._touch()
        if self.on_change is not None:
            self.on_change({(name, p) for p in changed})

    def _on_state(self, path: str, data: bytes, stat: ZnodeStat) -> None:
        # /brokers/topics/<t>/partitions/<p>/state
        parts = path.split("/")
        name, index = parts[-4], int(parts[-2])
        meta = self.topics.get(name)
        if meta is None or stat.czxid < meta.czxid:  # gone, or of an earlier topic of the same name
            return
        try:
            state = PartitionState.from_json(data, meta.assignment.get(index, ()), stat.version)
        except ValueError as exc:
            log.error("%s: %s", path, exc)
            return
        self.record(name, index, state)

    def record(self, name: str, index: int, state: PartitionState) -> None:
        """A partition's state as read or just written (the controller's and the ISR writer's writes come here
        at once, their watch events later): kept when newer than the one held."""
        meta = self.topics.get(name)
        if meta is None:
            return
        held = meta.states.get(index)
        if held is not None and state.zk_version <= held.zk_version:
            return
        meta.states[index] = state
        meta.metadata_partitions = None
        if state.leader >= 0:
            meta.leaderless.discard(index)
        else:
            meta.leaderless.add(index)
        if held is None or held.leader != state.leader:
            log.info("%s-%d: leader %d (epoch %d), isr %s", name, index, state.leader, state.leader_epoch,
                     list(state.isr))
        self._localize(((name, index),))
        self._touch()
        if self.on_change is not None:
            self.on_change({(name, index)})

    # -- this broker's replicas ----------------------------------------------------------

    def _localize(self, keys: Any) -> None:
        for key in keys:
            self._local[key] = None
        if self._local and (self._localizing is None or self._localizing.done()) and not self._stopping:
            self._localizing = asyncio.get_running_loop().create_task(self._localize_pending())

    async def _localize_pending(self) -> None:
        done = 0
        while self._local and not self._stopping:
            key = next(iter(self._local))
            del self._local[key]
            try:
                await self._follow(*key)
            except Exception:  # one partition's failure (a disk error) is logged; the others carry on
                log.exception("%s-%d: following the cluster's state failed", *key)
            done += 1
            if done % 64 == 0:
                await asyncio.sleep(0)  # opening many logs: let requests in between

    async def _follow(self, name: str, index: int) -> None:
        """Make this broker's replica of ``name``-``index`` what the view says: opened (when this broker is in
        its replicas) with its state set and handed to the replication code, or stopped and deleted."""
        cluster = self.cluster
        meta = self.topics.get(name)
        replicas = meta.assignment.get(index) if meta is not None else None
        wanted = meta is not None and replicas is not None and self.broker_id in replicas
        if name in cluster.topics and name not in cluster.replicated:
            if wanted:
                log.error("topic %s exists on this broker outside the cluster (from single-node use); its "
                          "cluster partitions are not served here", name)
            return
        held = cluster.topics.get(name)
        if held is not None and meta is not None and held.topic_id != meta.topic_id:
            # another topic of the same name now (deleted and made again): every replica of the old one goes
            for partition in list(held.partitions):
                await self._drop(name, partition)
        local = cluster.local_partition(name, index)
        if local is not None and not wanted:
            await self._drop(name, local)
            local = None
        if not wanted or meta is None:
            return
        if local is None:
            local = cluster.open_replica(name, meta.topic_id, meta.overrides, index)
        state = meta.states.get(index)
        if state is None or (state == local.state and (name, index) not in self._again):
            return
        self._again.discard((name, index))
        local.state = state
        await self._apply(local, state)

    async def _drop(self, name: str, partition: Partition) -> None:
        """Stop the replica (the replication code is handed a state without replicas) and delete its log."""
        await self._apply(partition, replace(partition.state or PartitionState(NO_LEADER, -1, (), -1),
                                             leader=NO_LEADER, isr=(), replicas=()))
        self.cluster.drop_replica(name, partition.index)
        log.info("%s-%d: replica removed from this broker", name, partition.index)

    async def _apply(self, partition: Partition, state: PartitionState) -> None:
        replication = self.cluster.replication
        if replication is not None:
            await replication.apply(partition, state)
