"""The cluster's ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them in ZooKeeper mode, so a binding created
through one broker is enforced by all of them.

Layout (Kafka's ZkAclStore and ZkAclChangeStore): the ACLs of a LITERAL pattern in ``/kafka-acl/<Type>/<name>``,
of a PREFIXED one in ``/kafka-acl-extended/prefixed/<Type>/<name>``, each znode
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``
(types, operations and permissions in Kafka's PascalCase: ``Topic``, ``TransactionalId``, ``IdempotentWrite``);
a znode left without ACLs is deleted. Every change is followed by a notification: ``/kafka-acl-changes/
acl_changes_<seq>`` holding ``TOPIC:name`` for a literal pattern, ``/kafka-acl-extended-changes/acl_changes_<seq>``
holding ``{"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}`` for a prefixed one.

As AclAuthorizer: each broker watches both notification roots (before reading everything, so nothing falls in
between), re-reads the pattern a notification names and replaces its cached ACLs; a change is a read-modify-write
of the pattern's znode conditional on its version, retried (10 times, 100-150 ms apart) when another broker
changed it first, and the writing broker's cache takes the result at once. The cache is the ``AclStore`` the
authorizer already reads (its ``bindings``), so enforcement needs no lookup in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import ZnodeStat

from ..access.acls import AclBinding, AclFilter, AclOperation, AclPermission, AclStore, PatternType, ResourceType
from .notifications import SequenceNotifications
from .znodes import ACL_CHANGE_PREFIX, ACL_EXTENDED, ACL_EXTENDED_CHANGES, ACL_LITERAL, ACL_LITERAL_CHANGES

__all__ = ["ZkAcls", "acls_data", "parse_acls", "pattern_path"]

log = logging.getLogger(__name__)

Pattern = tuple[ResourceType, str, PatternType]
Entry = tuple[str, str, AclOperation, AclPermission]  # principal, host, operation, permission
Versioned = tuple[frozenset[Entry], int]  # a pattern's ACLs and its znode's version
MAX_UPDATE_RETRIES = 10  # AclAuthorizer's maxUpdateRetries
NO_VERSION = -1


def pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part.capitalize() for part in name.split("_"))


_Named = TypeVar("_Named", ResourceType, AclOperation, AclPermission)


def _by_name(kind: type[_Named], text: str) -> _Named:
    """Kafka's lookup: the PascalCase name, or the same in upper case (``IDEMPOTENTWRITE``); the enum's own name is
    taken too. ValueError naming the value otherwise."""
    wanted = text.replace("_", "").upper()
    for member in kind:
        if member.value > 1 and pascal(member.name).upper() == wanted:  # UNKNOWN and ANY are never stored
            return member
    raise ValueError(f"unknown {kind.__name__} {text!r}")


def pattern_path(pattern: Pattern) -> str:
    rtype, name, ptype = pattern
    root = ACL_LITERAL if ptype == PatternType.LITERAL else f"{ACL_EXTENDED}/{ptype.name.lower()}"
    return f"{root}/{pascal(rtype.name)}/{name}"


def acls_data(entries: frozenset[Entry]) -> bytes:
    """Kafka's ResourceZNode JSON (AclEntry.toJsonCompatibleMap)."""
    return json.dumps({"version": 1, "acls": [
        {"principal": p, "permissionType": pascal(perm.name), "operation": pascal(op.name), "host": h}
        for p, h, op, perm in sorted(entries)]}).encode()


def parse_acls(path: str, raw: bytes | None) -> frozenset[Entry]:
    """A pattern znode's ACLs; ValueError naming the znode when it is not Kafka's JSON."""
    if not raw:
        return frozenset()
    try:
        data = json.loads(raw)
        if data["version"] != 1:
            raise ValueError(f"version {data['version']} (1 is read)")
        return frozenset((str(a["principal"]), str(a["host"]), _by_name(AclOperation, a["operation"]),
                          _by_name(AclPermission, a["permissionType"])) for a in data["acls"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path} is not a list of ACLs: {exc}") from None


def change_data(pattern: Pattern) -> tuple[str, bytes]:
    """(notification root, data) announcing a change of the pattern's ACLs."""
    rtype, name, ptype = pattern
    if ptype == PatternType.LITERAL:
        return ACL_LITERAL_CHANGES, f"{rtype.name}:{name}".encode()
    return ACL_EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": rtype.name, "name": name,
                                             "patternType": ptype.name}).encode()


def parse_change(root: str, raw: bytes) -> Pattern:
    """The pattern a notification names; ValueError when it cannot be read."""
    if root == ACL_LITERAL_CHANGES:
        rtype, sep, name = raw.decode().partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:name in a {root} notification, got {raw!r}")
        return _by_name(ResourceType, rtype), name, PatternType.LITERAL
    data = json.loads(raw)
    if int(data["version"]) > 1:
        raise ValueError(f"ACL change notification of unsupported version {data['version']}")
    ptype = PatternType[str(data["patternType"]).upper()]
    return _by_name(ResourceType, data["resourceType"]), str(data["name"]), ptype


def _bindings(pattern: Pattern, entries: frozenset[Entry]) -> list[AclBinding]:
    rtype, name, ptype = pattern
    return [AclBinding(rtype, name, ptype, p, h, op, perm) for p, h, op, perm in sorted(entries)]


class AclUpdateFailed(Exception):
    """A pattern's ACLs could not be written (ZooKeeper unreachable, or changed by others on every retry)."""


class ZkAcls:
    """The ACL cache of this broker kept from ZooKeeper, and the writes CreateAcls and DeleteAcls make there."""

    def __init__(self, zk: KazooClient, store: AclStore) -> None:
        self.zk, self.store = zk, store
        self.cache: dict[Pattern, Versioned] = {}
        self._changes = [SequenceNotifications(zk, root, ACL_CHANGE_PREFIX)
                         for root in (ACL_LITERAL_CHANGES, ACL_EXTENDED_CHANGES)]
        self._lock = asyncio.Lock()  # one cache update at a time (AclAuthorizer's lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = False
        self._reading: asyncio.Task[None] | None = None
        self._stopping = False
        self.failures = 0  # notifications that could not be handled (each logged)

    async def start(self) -> None:
        """Watch the notification roots, then read every pattern's ACLs into the cache."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._watch)
        async with self._lock:
            loaded = await asyncio.to_thread(self._load_all)
            self.cache = loaded
            self._publish()
        log.info("loaded %d ACLs of %d resource patterns from ZooKeeper", len(self.store.bindings), len(loaded))

    async def stop(self) -> None:
        self._stopping = True
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    # -- writes (CreateAcls, DeleteAcls) ----------------------------------------------------------

    async def create(self, bindings: list[AclBinding]) -> dict[AclBinding, str]:
        """Add the bindings; the ones that could not be written, with why (the others are stored)."""
        wanted: dict[Pattern, set[Entry]] = {}
        for b in bindings:
            wanted.setdefault((b.resource_type, b.resource_name, b.pattern_type), set()).add(
                (b.principal, b.host, b.operation, b.permission))
        failed: dict[AclBinding, str] = {}
        async with self._lock:
            for pattern, entries in wanted.items():
                try:
                    await self._update(pattern, _adding(frozenset(entries)))
                except AclUpdateFailed as exc:
                    failed.update({b: str(exc) for b in _bindings(pattern, frozenset(entries))})
        return failed

    async def delete(self, filters: list[AclFilter]) -> tuple[list[list[AclBinding]], dict[AclBinding, str]]:
        """Remove what each filter matches: the bindings each removed (a binding two filters match is reported for
        the first, as AclAuthorizer does) and the ones that could not be removed, with why."""
        removed: list[list[AclBinding]] = [[] for _ in filters]
        failed: dict[AclBinding, str] = {}
        async with self._lock:
            # the cached patterns, and the one each exact filter names (written by a broker whose notification
            # has not come yet), as AclAuthorizer's filterToResources
            patterns = set(self.cache) | {p for f in filters for p in _exact_patterns(f)}
            for pattern in sorted(patterns, key=str):
                cached = self.cache.get(pattern)
                if cached is not None and not any(f.matches(b) for b in _bindings(pattern, cached[0]) for f in filters):
                    continue  # nothing of it matches: no write
                hits: dict[AclBinding, int] = {}

                def without(current: frozenset[Entry], pattern: Pattern = pattern,
                            hits: dict[AclBinding, int] = hits) -> frozenset[Entry]:
                    hits.clear()  # a retry matches against what it read again
                    for binding in _bindings(pattern, current):
                        first = next((i for i, f in enumerate(filters) if f.matches(binding)), None)
                        if first is not None:
                            hits[binding] = first
                    gone = {(b.principal, b.host, b.operation, b.permission) for b in hits}
                    return current - gone

                try:
                    await self._update(pattern, without)
                except AclUpdateFailed as exc:
                    failed.update({b: str(exc) for b in hits})
                    continue
                for binding, index in hits.items():
                    removed[index].append(binding)
        return removed, failed

    async def _update(self, pattern: Pattern, change: Callable[[frozenset[Entry]], frozenset[Entry]]) -> None:
        known = self.cache.get(pattern)
        try:
            result = await asyncio.to_thread(self._write, pattern, change, known)
        except AclUpdateFailed:
            raise
        except Exception as exc:  # kazoo's connection loss, timeouts: the request answers with the reason
            log.error("writing the ACLs of %s failed: %s", pattern_path(pattern), exc)
            raise AclUpdateFailed(f"Failed to update ACLs for {pattern_path(pattern)}: {exc}") from None
        self._put(pattern, result)
        self._publish()

    # -- ZooKeeper, in worker threads -------------------------------------------------------------

    def _watch(self) -> None:
        for root in (ACL_LITERAL, ACL_EXTENDED, ACL_LITERAL_CHANGES, ACL_EXTENDED_CHANGES):
            self.zk.ensure_path(root)
        for root in (ACL_LITERAL_CHANGES, ACL_EXTENDED_CHANGES):
            self.zk.ChildrenWatch(root, self._on_change)

    def _read(self, pattern: Pattern) -> Versioned | None:
        path = pattern_path(pattern)
        try:
            raw, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return parse_acls(path, raw), stat.version

    def _load_all(self) -> dict[Pattern, Versioned]:
        """Every pattern's ACLs (AclAuthorizer.loadAllAcls); a znode that cannot be read is logged and left out."""
        loaded: dict[Pattern, Versioned] = {}
        roots = [(ACL_LITERAL, PatternType.LITERAL), (f"{ACL_EXTENDED}/prefixed", PatternType.PREFIXED)]
        for root, ptype in roots:
            for type_name in _children(self.zk, root):
                try:
                    rtype = _by_name(ResourceType, type_name)
                except ValueError:
                    log.warning("ignoring unknown ResourceType %s under %s", type_name, root)
                    continue
                for name in _children(self.zk, f"{root}/{type_name}"):
                    pattern = (rtype, name, ptype)
                    try:
                        found = self._read(pattern)
                    except ValueError as exc:
                        self.failures += 1
                        log.error("%s", exc)
                        continue
                    if found is not None and found[0]:
                        loaded[pattern] = found
        return loaded

    def _write(self, pattern: Pattern, change: Callable[[frozenset[Entry]], frozenset[Entry]],
               known: Versioned | None) -> Versioned:
        """AclAuthorizer.updateResourceAcls: the new ACLs written conditionally on the version read, retried with
        a fresh read when another broker wrote first; a change notification once something changed."""
        path = pattern_path(pattern)
        current = known if known is not None else self._read(pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            entries, version = current if current is not None else (frozenset(), NO_VERSION)
            new = change(entries)
            if new == entries and current is not None:
                return current
            try:
                if not new:
                    if current is not None:
                        self.zk.delete(path, version=version)
                    written: Versioned = (new, NO_VERSION)
                elif current is None:
                    self.zk.create(path, acls_data(new), makepath=True)
                    written = (new, 0)
                else:
                    stat: ZnodeStat = self.zk.set(path, acls_data(new), version=version)
                    written = (new, stat.version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                time.sleep((100 + random.randrange(50)) / 1000)  # AclAuthorizer's backoff with jitter
                current = self._read(pattern)
                continue
            if new != entries:
                root, data = change_data(pattern)
                self.zk.create(f"{root}/{ACL_CHANGE_PREFIX}", data, sequence=True, makepath=True)
                log.info("updated ACLs for %s (version %d)", path, written[1])
            return written
        raise AclUpdateFailed(f"Failed to update ACLs for {path} after trying a maximum of "
                              f"{MAX_UPDATE_RETRIES} times")

    def _changed_patterns(self) -> dict[Pattern, Versioned | None]:
        """The patterns new notifications name, read again (None: no ACLs left)."""
        named: set[Pattern] = set()
        for listener in self._changes:
            for raw in listener.pending():
                try:
                    named.add(parse_change(listener.root, raw))
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                    self.failures += 1
                    log.error("ignoring an unreadable ACL change notification under %s: %s", listener.root, exc)
        updates: dict[Pattern, Versioned | None] = {}
        for pattern in named:
            try:
                updates[pattern] = self._read(pattern)
            except ValueError as exc:
                self.failures += 1
                log.error("%s", exc)
        return updates

    # -- notifications ----------------------------------------------------------------------------

    def _on_change(self, children: Any) -> None:
        """kazoo's thread: a notification root's children changed; the work happens in the event loop."""
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._poke)

    def _poke(self) -> None:
        self._dirty = True
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read_while_dirty())

    async def _read_while_dirty(self) -> None:
        while self._dirty and not self._stopping:
            self._dirty = False
            try:
                async with self._lock:
                    updates = await asyncio.to_thread(self._changed_patterns)
                    for pattern, found in updates.items():
                        self._put(pattern, found)
                        log.info("processed an ACL change notification for %s: %d ACLs", pattern_path(pattern),
                                 len(found[0]) if found else 0)
                    if updates:
                        self._publish()
            except Exception:  # connection loss included: the reconnection's watch event reads again
                self.failures += 1
                log.exception("reading ACL change notifications from ZooKeeper failed")

    # -- the cache ----------------------------------------------------------------------------------

    def _put(self, pattern: Pattern, found: Versioned | None) -> None:
        if found is None or not found[0]:
            self.cache.pop(pattern, None)
        else:
            self.cache[pattern] = found

    def _publish(self) -> None:
        """Hand the cache to the authorizer: one new list, so a check running meanwhile sees the old or the new."""
        self.store.bindings = [b for pattern, (entries, _) in sorted(self.cache.items(), key=lambda kv: str(kv[0]))
                               for b in _bindings(pattern, entries)]


def _adding(entries: frozenset[Entry]) -> Callable[[frozenset[Entry]], frozenset[Entry]]:
    return lambda current: current | entries


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def _exact_patterns(f: AclFilter) -> list[Pattern]:
    """The patterns a filter names exactly (AclAuthorizer's filterToResources for matchesAtMostOne filters)."""
    if f.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or f.resource_name is None:
        return []
    if f.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        return [(f.resource_type, f.resource_name, f.pattern_type)]
    if f.pattern_type == PatternType.ANY:
        return [(f.resource_type, f.resource_name, PatternType.LITERAL),
                (f.resource_type, f.resource_name, PatternType.PREFIXED)]
    return []
