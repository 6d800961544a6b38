"""This broker's membership of a ZooKeeper cluster: its ephemeral registration, the controller election
and the view of live brokers and controller that Metadata and DescribeCluster answer with.

kazoo runs its own threads: watches only hand a wake-up into the broker's event loop
(``call_soon_threadsafe``), and every blocking ZooKeeper call runs in a worker thread from there, so the
event loop never waits on ZooKeeper. Produce and fetch never touch any of this.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from headwater.properties import ConfigError

from ..config.broker_config import BrokerConfig, Listener
from ..metrics.stats import ZkSessionStats
from ..security.listeners import parse_protocol_map
from .config_changes import ConfigChanges
from .controller import Controller
from .controller_election import elect
from .isr_writer import ZkIsrWriter
from .producer_ids import reserve_producer_id_block
from .topic_sync import ReplicaRegistry, TopicSync
from .zk_connect import parse_zookeeper_connect
from .zk_security import ZkSecurity, ZkSecurityFailure, secured_client, start_session, zk_security
from .znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_TOPICS,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    ClusterView,
    RegisteredBroker,
    broker_path,
    broker_registration,
    parse_registration,
)

__all__ = ["BrokerIdTaken", "ClusterMembership", "SharedConfigs", "ZooKeeperUnavailable"]

log = logging.getLogger(__name__)


class SharedConfigs(Protocol):
    """Topic configs and dynamic broker levels kept in ZooKeeper (config_sync.py's ClusterConfigs, named here
    so that the membership does not import it): what the config APIs write through."""

    failures: int  # configs read from ZooKeeper that this broker could not apply (each logged)

    async def alter_topic(self, name: str, compute: Callable[[dict[str, str]], dict[str, str]],
                          validate_only: bool) -> None: ...

    async def alter_broker(self, level: str, compute: Callable[[dict[str, str]], dict[str, str]],
                           validate_only: bool) -> None: ...

    async def stop(self) -> None: ...


class BrokerIdTaken(ConfigError):
    """Another live broker holds this broker.id's registration."""


class ZooKeeperUnavailable(ConfigError):
    """No ZooKeeper session within zookeeper.connection.timeout.ms."""


class ClusterMembership:
    def __init__(self, config: BrokerConfig, cluster: ReplicaRegistry | None = None) -> None:
        assert config.zookeeper_connect
        self.config = config
        self.cluster = cluster  # the local registry the replicated topics' replicas live in (None: brokers only)
        self.topics: TopicSync | None = None  # the replicated topics, once joined
        self.controller: Controller | None = None
        self.isr_writer: ZkIsrWriter | None = None  # for the replication code's leaders
        # /config/changes, dispatched by entity type (config_changes.py); handlers added once joined
        self.config_changes: ConfigChanges | None = None
        self.configs: SharedConfigs | None = None  # topic and broker configs through them, set by the server
        self.broker_id = config.node_id
        self.hosts, self.chroot = parse_zookeeper_connect(config.zookeeper_connect)
        self.security = ZkSecurity()  # read by start: a ConfigError there stops the server cleanly
        self.view = ClusterView()  # replaced whole (never mutated): readers need no lock
        self._zk: KazooClient | None = None
        self._registration = b""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = False
        self._syncing: asyncio.Task[None] | None = None
        self._session_lost = False
        self._stopping = False
        self.session_stats = ZkSessionStats()  # the ZooKeeper connection's events, for the metrics

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, endpoints: list[Listener]) -> None:
        """Connect, register /brokers/ids/<broker.id>, run for controller and read the live brokers.
        BrokerIdTaken when a live broker holds the id; ZooKeeperUnavailable when no session comes in time."""
        self._loop = asyncio.get_running_loop()
        self._registration = broker_registration(
            endpoints, parse_protocol_map(self.config.listener_security_protocol_map), self.config.broker_rack)
        self.security = await asyncio.to_thread(zk_security, self.config)  # reads keystores and JAAS file
        await asyncio.to_thread(self._connect)
        self.session_stats.observe(str(self.zk.client_state))  # the first connection (before the listener was added)
        try:
            await asyncio.to_thread(self._register)
            await asyncio.to_thread(self._watch)
            self.view = await asyncio.to_thread(self._sync)
            if self.cluster is not None:
                assert self._zk is not None
                self.topics = TopicSync(self._zk, self.cluster, self.broker_id)
                self.controller = Controller(self._zk, self.topics, self.broker_id, self.config)
                self.isr_writer = ZkIsrWriter(self._zk, self.topics)
                await self.topics.start()
                self.controller.view_changed(self.view)
            self.config_changes = ConfigChanges(self.zk)
            await self.config_changes.start()
        except BaseException:
            await self.stop()
            raise
        log.info("registered as broker %d in ZooKeeper at %s%s (%s); controller is broker %d; live brokers %s",
                 self.broker_id, self.hosts, self.chroot, self.security.describe(), self.view.controller_id,
                 sorted(self.view.brokers))

    async def stop(self) -> None:
        """Close the session: ZooKeeper drops this broker's znodes at once, so the others elect without waiting
        for the session timeout."""
        self._stopping = True
        if self.configs is not None:
            await self.configs.stop()
        if self.config_changes is not None:
            await self.config_changes.stop()
        if self.controller is not None:
            await self.controller.stop()
        if self.topics is not None:
            await self.topics.stop()
        if self._syncing is not None:
            self._syncing.cancel()
            await asyncio.gather(self._syncing, return_exceptions=True)
        if self._zk is not None:
            zk, self._zk = self._zk, None
            await asyncio.to_thread(_close, zk)

    # -- what the APIs read ------------------------------------------------------------

    @property
    def zk(self) -> KazooClient:
        assert self._zk is not None, "not connected to ZooKeeper"
        return self._zk

    @property
    def session_state(self) -> str:
        """kazoo's state of the ZooKeeper connection (a KeeperState: ``CONNECTED``, ``CONNECTING``, ...)."""
        zk = self._zk
        return str(zk.client_state) if zk is not None else "CLOSED"

    @property
    def sync(self) -> TopicSync:
        """The replicated topics (set once joined)."""
        assert self.topics is not None, "not joined yet"
        return self.topics

    def reserve_producer_ids(self, size: int) -> int:
        """The first of ``size`` producer ids reserved in ZooKeeper for this broker alone (ProducerIdManager's
        blocks); waits for ZooKeeper at most a third of the session timeout."""
        return reserve_producer_id_block(self.zk, self.broker_id, size,
                                         self.config.zookeeper_session_timeout_ms / 3000)

    def has_partition(self, name: str, index: int) -> bool:
        return self.topics is not None and self.topics.has_partition(name, index)

    def has_topic(self, name: str) -> bool:
        """Whether ``name`` is one of the cluster's (replicated) topics."""
        return self.topics is not None and name in self.topics.topics

    def metadata_brokers(self, listener: str) -> list[RegisteredBroker]:
        """The live brokers that advertise ``listener`` (the name the client connected on), by id, as
        Kafka answers: a broker without that listener is left out."""
        return [b for _, b in sorted(self.view.brokers.items()) if listener in b.endpoints]

    # -- ZooKeeper, in worker threads --------------------------------------------------

    def _connect(self) -> None:
        zk = secured_client(self.hosts, self.config.zookeeper_session_timeout_ms / 1000, self.security)
        try:
            connected = start_session(zk, self.config.zookeeper_connection_timeout)
        except ZkSecurityFailure:  # refused TLS or login: the broker stops with the reason
            _close(zk)
            raise
        if not connected:
            _close(zk)
            raise ZooKeeperUnavailable(
                f"zookeeper.connect: no ZooKeeper session with {self.hosts} within "
                f"{self.config.zookeeper_connection_timeout:g} s") from None
        if self.chroot:  # Kafka creates its chroot; kazoo needs it to exist before using it
            zk.ensure_path(self.chroot)
            zk.chroot = self.chroot
        for path in (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, DELETE_TOPICS):
            zk.ensure_path(path)
        try:
            zk.create(CONTROLLER_EPOCH, b"0")  # Kafka's initial epoch; the first controller makes it 1
        except NodeExistsError:
            pass
        zk.add_listener(self._on_state)
        self._zk = zk

    def _register(self) -> None:
        assert self._zk is not None
        path = broker_path(self.broker_id)
        try:
            self._zk.create(path, self._registration, ephemeral=True)
        except NodeExistsError:
            raise BrokerIdTaken(
                f"broker.id {self.broker_id} is already registered in ZooKeeper at "
                f"{self.hosts}{self.chroot}{path} by a live broker; give this broker another broker.id") from None

    def _watch(self) -> None:
        assert self._zk is not None
        # kazoo calls these in its own thread; the work happens in the event loop's _sync
        self._zk.ChildrenWatch(BROKER_IDS, self._on_change, send_event=True)
        self._zk.DataWatch("/controller", self._on_change)

    def _sync(self) -> ClusterView:
        """Run for controller when there is none, then read the live brokers and the controller."""
        zk = self._zk
        if zk is None:
            return self.view
        controller = elect(zk, self.broker_id)
        brokers: dict[int, RegisteredBroker] = {}
        for child in zk.get_children(BROKER_IDS):
            if not child.isdigit():
                continue
            try:
                raw, stat = zk.get(broker_path(int(child)))
            except NoNodeError:  # gone since the listing: the next watch event reads again
                continue
            try:
                brokers[int(child)] = replace(parse_registration(int(child), raw), epoch=stat.czxid)
            except ValueError as exc:
                log.warning("%s", exc)
        return ClusterView(brokers, controller)

    # -- events --------------------------------------------------------------------------

    def _on_change(self, *args: Any) -> None:
        """A watch fired (kazoo's thread): read again in the event loop."""
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._poke)

    def _on_state(self, state: str) -> None:
        """kazoo's session state (its thread). After an expired session the registration is gone: make it again."""
        if self._stopping:
            return  # closing the session on purpose
        zk, loop = self._zk, self._loop
        if zk is not None and loop is not None:  # counted in the event loop, which the metrics read in
            loop.call_soon_threadsafe(self.session_stats.observe, str(zk.client_state))
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session expired; broker %d is out of the cluster until it reconnects",
                        self.broker_id)
        elif state == KazooState.CONNECTED:
            self._on_change()

    def _poke(self) -> None:
        self._dirty = True
        if self._syncing is None or self._syncing.done():
            self._syncing = asyncio.get_running_loop().create_task(self._sync_while_dirty())

    async def _sync_while_dirty(self) -> None:
        while self._dirty and not self._stopping:
            self._dirty = False
            try:
                if self._session_lost:
                    await asyncio.to_thread(self._register)
                    self._session_lost = False
                    log.info("broker %d registered again in ZooKeeper after its session expired", self.broker_id)
                view = await asyncio.to_thread(self._sync)
            except (KazooException, ConfigError) as exc:
                # connection loss: the reconnect pokes again; a taken id stays logged until it is free
                log.error("reading the cluster from ZooKeeper failed: %s", exc)
                continue
            except Exception:  # anything else: logged whole, and the next watch event tries again
                log.exception("reading the cluster from ZooKeeper failed")
                continue
            if view.controller_id != self.view.controller_id:
                log.info("controller is now broker %d", view.controller_id)
            if sorted(view.brokers) != sorted(self.view.brokers):
                log.info("live brokers are now %s", sorted(view.brokers))
            self.view = view
            if self.controller is not None:
                self.controller.view_changed(view)


def _close(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()

