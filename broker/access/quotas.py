"""Client quotas as Kafka has them: byte rates per user and client-id (with defaults), measured over a
window of samples, and the throttle time a client over its quota is given.

Quotas are configured on entities: ``{user}``, ``{client-id}``, ``{user, client-id}``, each name or the
default (None). A client's quota is the first of Kafka's eight matches that is configured: user and
client-id, user and default client-id, user, default user and client-id, default user and default
client-id, default user, client-id, default client-id. Clients whose quota comes from the same entity
share one rate sensor, as they share the quota.

A client over its quota is throttled for as long as sending what it sent at exactly its quota would have
taken beyond now: the response carries that time and the broker mutes the connection that long (Kafka's
semantics, KIP-219). Kafka computes the time from a rate sampled over ``quota.window.num`` windows of
``quota.window.size.seconds``, ``(rate - quota) / quota * window``; since a whole sample is forgotten at
once, a client sending in bursts gets about ``1 / (num - 1)`` more than its quota there. Keeping the
debt itself instead gives the quota exactly over time; a client idle for ``(num - 1)`` windows may burst
that long's worth at once, as Kafka's window padding allows.
Quotas persist in one JSON file in the log directory; a cluster's are in ZooKeeper
(broker/cluster/config_entities_zk.py sets them here).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..config.state_file import read_json, write_json

__all__ = ["ENTITY_TYPES", "QUOTA_KEYS", "Debt", "Entity", "QuotaStore", "Throttler", "entity"]

log = logging.getLogger(__name__)

QUOTAS_FILE = "headwater-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
# The keys Kafka's DescribeClientQuotas/AlterClientQuotas take, and the entity types each applies to
QUOTA_KEYS: dict[str, frozenset[str]] = {
    "producer_byte_rate": frozenset({USER, CLIENT_ID}),
    "consumer_byte_rate": frozenset({USER, CLIENT_ID}),
    "request_percentage": frozenset({USER, CLIENT_ID}),
    "controller_mutation_rate": frozenset({USER, CLIENT_ID}),
    "connection_creation_rate": frozenset({IP}),
}

#: An entity: (entity type, name or None for the default), sorted by type
Entity = tuple[tuple[str, str | None], ...]


def entity(parts: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(parts, key=lambda p: p[0]))


@dataclass
class Debt:
    """Where a client stands against its quota: the time by which what it sent would have been sent at
    exactly the quota (a theoretical arrival time). Credit for idle time is capped at ``burst_ms``, so a
    client that was quiet may send that long's worth at once, as Kafka's padded window allows."""

    burst_ms: float
    due_ms: float = -math.inf

    def record(self, value: float, quota: float, now_ms: float) -> float:
        """Add ``value`` bytes; how long (ms) the client must now wait to be back within its quota."""
        self.due_ms = max(self.due_ms, now_ms - self.burst_ms) + value / quota * 1000
        return max(0.0, self.due_ms - now_ms)

    def take_back(self, value: float, quota: float) -> None:
        self.due_ms -= value / quota * 1000


class QuotaStore:
    """The configured quotas, persisted in ``headwater-quotas.json`` on each change."""

    def __init__(self, log_dir: Path, local: bool = True) -> None:
        """``local``: the quotas are this file's; otherwise (a cluster) they are set from ZooKeeper (``put``) and the
        file's, from single-node use, are not used (logged)."""
        self.path = log_dir / QUOTAS_FILE
        self.local = local
        self.quotas: dict[Entity, dict[str, float]] = {}
        saved = (read_json(self.path) or {}).get("quotas", [])
        if saved and not local:
            log.warning("client quotas of %d entities in %s (from single-node use) are not used: a cluster's quotas "
                        "are in ZooKeeper", len(saved), self.path)
            saved = []
        for item in saved:
            self.quotas[entity((t, n) for t, n in item["entity"])] = dict(item["values"])
        if self.quotas:
            log.info("loaded client quotas for %d entities from %s", len(self.quotas), self.path)
        self.version = 0  # bumped on every change: throttlers re-resolve their quotas
        self.keys = self._keys()

    def _keys(self) -> frozenset[str]:
        """The quota keys some entity has: a request path checks its key here before resolving anything."""
        return frozenset(key for values in self.quotas.values() for key in values)

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        """Apply (entity, {key: value, or None to remove}) changes together, then persist them."""
        assert self.local, "a cluster's quotas are written to ZooKeeper, not to the local file"
        for ent, ops in changes:
            values = self.quotas.setdefault(ent, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del self.quotas[ent]
        self._changed()
        write_json(self.path, {"quotas": [{"entity": [list(p) for p in ent], "values": values}
                                          for ent, values in sorted(self.quotas.items(), key=lambda kv: str(kv[0]))]})

    def put(self, ent: Entity, values: dict[str, float]) -> None:
        """Set an entity's whole quotas (none: it has no quota), as a cluster's ZooKeeper says; nothing persisted.
        Unchanged quotas change nothing (the clients' sensors keep what they measured)."""
        if self.quotas.get(ent, {}) == values:
            return
        if values:
            self.quotas[ent] = dict(values)
        else:
            self.quotas.pop(ent, None)
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        self.keys = self._keys()

    def resolve(self, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """The entity whose ``key`` quota applies to this client, and the quota (Kafka's precedence)."""
        for candidate in (((USER, user), (CLIENT_ID, client_id)), ((USER, user), (CLIENT_ID, None)),
                          ((USER, user),), ((USER, None), (CLIENT_ID, client_id)),
                          ((USER, None), (CLIENT_ID, None)), ((USER, None),), ((CLIENT_ID, client_id),),
                          ((CLIENT_ID, None),)):
            ent = entity(candidate)
            value = self.quotas.get(ent, {}).get(key)
            if value is not None:
                return ent, value
        return None


class Throttler:
    """One quota key's sensors (``producer_byte_rate`` or ``consumer_byte_rate``): record a client's
    bytes and answer how long it is to be throttled."""

    def __init__(self, store: QuotaStore, key: str, samples: int, window_ms: int) -> None:
        self.store, self.key = store, key
        self.burst_ms = max(samples - 1, 1) * window_ms
        self.sensors: dict[Entity, Debt] = {}
        self._resolved: dict[tuple[str, str], tuple[Entity, float] | None] = {}
        self._version = -1

    def _quota(self, user: str, client_id: str) -> tuple[Entity, float] | None:
        if self._version != self.store.version:  # quotas changed: resolve again, start afresh
            self._resolved.clear()
            self.sensors.clear()
            self._version = self.store.version
        who = (user, client_id)
        if who not in self._resolved:
            self._resolved[who] = self.store.resolve(self.key, user, client_id)
        return self._resolved[who]

    @property
    def active(self) -> bool:
        """Whether some entity has a quota of this key (while none has, nothing is looked up)."""
        return self.key in self.store.keys

    def applies(self, user: str, client_id: str) -> bool:
        """Whether the client has a quota of this key."""
        return self._quota(user, client_id) is not None

    def record(self, user: str, client_id: str, value: float, now_ms: float, undo_if_throttled: bool = False) -> int:
        """Record ``value`` bytes for the client; the throttle time in ms (0 within its quota). A throttled
        fetch is answered empty, so its bytes are taken back out (``undo_if_throttled``), as Kafka does."""
        found = self._quota(user, client_id)
        if found is None:
            return 0
        ent, quota = found
        debt = self.sensors.get(ent)
        if debt is None:
            debt = self.sensors[ent] = Debt(self.burst_ms)
        # Whole milliseconds, rounded up: the fetch handler sends the records only when this is 0, so a
        # debt of a fraction of a millisecond must not round to 0 here after its bytes were taken back.
        throttle_ms = math.ceil(debt.record(value, quota, now_ms))
        if throttle_ms > 0 and undo_if_throttled:
            debt.take_back(value, quota)
        return throttle_ms
