"""Entity configs cluster-wide, as Kafka's ZooKeeper mode keeps them (AdminZkClient.changeEntityConfig,
DynamicConfigManager, ZkNodeChangeNotificationListener).

An entity's whole config is one znode, ``/config/<entity type>/<sanitized name>`` holding
``{"version":1,"config":{...}}`` (topics, brokers with ``<default>`` for the cluster default, users, clients,
``<user>/clients/<client id>``). A writer replaces it and creates a change notification, the persistent
sequential znode ``/config/changes/config_change_<10 digits>`` holding ``{"version":2,"entity_path":
"<type>/<name>"}`` (here both in one ZooKeeper transaction). Every broker watches the children of
/config/changes and, for each notification newer than the last it processed, reads the entity's config
again (the notification is only a trigger: a broker that missed some reads the current config anyway) and
hands it to the handler of its entity type; at start, and when a handler is added, every existing entity of
the type is handed over once. Notifications older than 15 minutes are deleted by whichever broker processes
changes, as Kafka's listener purges them.

Watches only hand a wake-up into the event loop; ZooKeeper is read in worker threads and handlers run in the
event loop, one change after the other in the notifications' order. A failing read or handler is logged
and counted (``failures``), and the next change goes on.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from .znodes import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES,
    config_change_data,
    entity_config_data,
    entity_config_path,
    parse_config_change,
    parse_entity_config,
)

__all__ = ["CHANGE_EXPIRATION_MS", "ConfigChanges", "desanitize", "read_entity_config", "sanitize",
           "write_entity_config"]

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs

Handler = Callable[[str, dict[str, str]], None]
Change = tuple[int, str, str, dict[str, str]]  # (sequence number, entity type, sanitized name, its config)

_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (user and client ids in znode names): UTF-8 bytes other than letters, digits
    and ``.-_`` percent-encoded (``*`` as %2A, space as %20)."""
    return "".join(c if c in _UNRESERVED else "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize."""
    return urllib.parse.unquote_plus(name)


# -- writing and reading (blocking: worker threads) ------------------------------------------------------------

def read_entity_config(zk: KazooClient, entity_type: str, name: str) -> tuple[dict[str, str], int]:
    """An entity's config and its znode's version (-1 when there is none: the config is then empty)."""
    path = entity_config_path(entity_type, name)
    try:
        raw, stat = zk.get(path)
    except NoNodeError:
        return {}, -1
    return parse_entity_config(path, raw), stat.version


def write_entity_config(zk: KazooClient, entity_type: str, name: str, config: dict[str, str],
                        expected_version: int | None = None) -> None:
    """Replace the config of entity ``name`` (sanitized; ``<default>`` for the default) of ``entity_type`` with
    ``config`` and notify every broker, in one ZooKeeper transaction (Kafka's changeEntityConfig).
    ``expected_version``: None writes whatever is there (Kafka's own last-writer-wins); a version from
    read_entity_config writes only if the znode is still that version (-1: still missing), else
    BadVersionError, so a read-modify-write loses nobody's change."""
    path = entity_config_path(entity_type, name)
    data = entity_config_data(config)
    zk.ensure_path(posixpath.dirname(path))
    zk.ensure_path(CONFIG_CHANGES)
    for _ in range(10):  # only an unconditional write whose znode comes or goes meanwhile goes round again
        version = expected_version
        if version is None:
            stat = zk.exists(path)
            version = -1 if stat is None else stat.version
        tx = zk.transaction()
        if version == -1:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version=version)
        tx.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", config_change_data(f"{entity_type}/{name}"),
                  sequence=True)
        results = tx.commit()
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is None:
            return
        if not isinstance(failed, (BadVersionError, NodeExistsError, NoNodeError)):
            raise failed
        if expected_version is not None:
            raise BadVersionError(f"{path} changed meanwhile")
    raise BadVersionError(f"{path} kept changing while being written")


def _entities(zk: KazooClient, entity_type: str) -> list[str]:
    """Every entity of ``entity_type`` with a config znode; for users also ``<user>/clients/<client id>`` (as
    Kafka's fetchAllChildEntityConfigs)."""
    try:
        names = sorted(zk.get_children(f"/config/{entity_type}"))
    except NoNodeError:
        return []
    if entity_type == "users":
        for user in list(names):
            try:
                names += [f"{user}/clients/{c}" for c in sorted(zk.get_children(f"/config/users/{user}/clients"))]
            except NoNodeError:
                pass
    return names


def _read_all(zk: KazooClient, entity_type: str) -> list[tuple[str, dict[str, str]]]:
    out = []
    for name in _entities(zk, entity_type):
        try:
            out.append((name, read_entity_config(zk, entity_type, name)[0]))
        except ValueError as exc:  # one bad znode (written by hand): logged, the others handed over
            log.error("%s", exc)
    return out


class ConfigChanges:
    """The change notifications of /config/changes, dispatched to a handler per entity type."""

    def __init__(self, zk: KazooClient, expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk = zk
        self.expiration_ms = expiration_ms
        self.failures = 0  # reads and handlers that failed (each logged)
        self.processed = -1  # the sequence number of the last notification processed (Kafka's lastExecutedChange)
        self._handlers: dict[str, Handler] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = False
        self._processing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._connected = True
        self._stopping = False

    def handle(self, entity_type: str, handler: Handler) -> None:
        """``handler(sanitized entity name, its whole config)`` in the event loop on every change of an entity of
        ``entity_type`` (``topics``, ``brokers``, ``users``, ``clients``), and once for every existing one at
        start (or at once, when added after the start). Called in the event loop."""
        self._handlers[entity_type] = handler
        if self._loop is not None and not self._stopping:
            self._spawn(self._bootstrap([entity_type]))

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.zk.ensure_path, CONFIG_CHANGES)
        await self._bootstrap(list(self._handlers))
        self.zk.add_listener(self._on_state)
        await asyncio.to_thread(self.zk.ChildrenWatch, CONFIG_CHANGES, self._on_children)

    async def stop(self) -> None:
        self._stopping = True
        self.zk.remove_listener(self._on_state)
        tasks = [*self._tasks, *([self._processing] if self._processing is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- kazoo's threads ---------------------------------------------------------------

    def _on_children(self, _children: list[str]) -> bool | None:
        if self._stopping:
            return False  # ends the watch
        self._poke()
        return None

    def _on_state(self, state: str) -> None:
        """A session made again may have missed notifications (their watch was down): look again."""
        if state != KazooState.CONNECTED:
            self._connected = False
        elif not self._connected:
            self._connected = True
            self._poke()

    def _poke(self) -> None:
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._mark)

    # -- event loop ------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _mark(self) -> None:
        self._dirty = True
        if not self._stopping and (self._processing is None or self._processing.done()):
            self._processing = asyncio.get_running_loop().create_task(self._process_while_dirty())

    async def _bootstrap(self, entity_types: list[str]) -> None:
        for entity_type in entity_types:
            try:
                entities = await asyncio.to_thread(_read_all, self.zk, entity_type)
            except Exception:
                self.failures += 1
                log.exception("reading the configs of every %s failed", entity_type)
                continue
            for name, config in entities:
                self._dispatch(entity_type, name, config)

    async def _process_while_dirty(self) -> None:
        while self._dirty and not self._stopping:
            self._dirty = False
            try:
                changes = await asyncio.to_thread(self._read_changes, self.processed)
            except KazooException as exc:  # connection lost: the reconnection looks again
                log.warning("reading the config change notifications failed: %s", exc)
                continue
            except Exception:
                self.failures += 1
                log.exception("reading the config change notifications failed")
                continue
            for seq, entity_type, name, config in changes:
                if entity_type:
                    self._dispatch(entity_type, name, config)
                self.processed = max(self.processed, seq)

    def _dispatch(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        handler = self._handlers.get(entity_type)
        if handler is None:
            log.warning("config change of %s/%s not applied: this broker has no %s configs", entity_type, name,
                        entity_type)
            return
        try:
            handler(name, config)
        except Exception:  # one entity's failure is logged; the next change goes on
            self.failures += 1
            log.exception("applying the config of %s/%s failed", entity_type, name)

    # -- worker threads ---------------------------------------------------------------------

    def _read_changes(self, processed: int) -> list[Change]:
        """The notifications after ``processed``, in order, each with its entity's current config (an entity
        type of "" for one that cannot be read: logged, counted and skipped); then the expired ones deleted."""
        children = sorted(c for c in self.zk.get_children(CONFIG_CHANGES) if c.startswith(CONFIG_CHANGE_PREFIX))
        now_ms = time.time() * 1000
        changes: list[Change] = []
        for child in children:
            path = f"{CONFIG_CHANGES}/{child}"
            seq = int(child[len(CONFIG_CHANGE_PREFIX):])
            if seq <= processed:
                continue
            try:
                raw, _ = self.zk.get(path)
                entity_type, name = parse_config_change(raw)
                config = read_entity_config(self.zk, entity_type, name)[0]
            except NoNodeError:  # purged meanwhile by another broker: its entity's config was read by then
                changes.append((seq, "", "", {}))
                continue
            except ValueError as exc:
                self.failures += 1
                log.error("%s: %s", path, exc)
                changes.append((seq, "", "", {}))
                continue
            log.info("processing config change %s: %s/%s", child, entity_type, name)
            changes.append((seq, entity_type, name, config))
        self._purge(children, now_ms)
        return changes

    def _purge(self, children: list[str], now_ms: float) -> None:
        for child in children:
            path = f"{CONFIG_CHANGES}/{child}"
            stat = self.zk.exists(path)
            if stat is not None and now_ms - stat.ctime > self.expiration_ms:
                try:
                    self.zk.delete(path)
                    log.debug("purged config change notification %s", path)
                except NoNodeError:
                    pass
