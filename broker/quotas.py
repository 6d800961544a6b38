"""Client quotas as Kafka has them: byte rates per user and client-id (with defaults), measured over a
window of samples, and the throttle time a client over its quota is given.

Quotas are configured on entities: ``{user}``, ``{client-id}``, ``{user, client-id}``, each name or the
default (None). A client's quota is the first of Kafka's eight matches that is configured: user and
client-id, user and default client-id, user, default user and client-id, default user and default
client-id, default user, client-id, default client-id. Clients whose quota comes from the same entity
share one rate sensor, as they share the quota.

The rate is Kafka's ``Rate``: ``quota.window.num`` samples of ``quota.window.size.seconds`` each; the
bytes recorded over the window divided by its length, the window counting at least ``num - 1`` full
samples. A client over its quota is throttled ``(rate - quota) / quota * window`` ms (Kafka's
QuotaUtils.throttleTime): the response carries it and the broker mutes the connection that long.
Quotas persist in one JSON file in the log directory.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .state_file import read_json, write_json

__all__ = ["QuotaStore", "Rate", "Throttler", "QUOTA_KEYS", "Entity"]

log = logging.getLogger(__name__)

QUOTAS_FILE = "headwater-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
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
class Rate:
    """Kafka's sampled rate: ``samples`` windows of ``window_ms``; ``record`` returns the rate after it."""

    samples: int
    window_ms: int
    starts: list[float] = field(default_factory=list)  # each sample's start, oldest first
    totals: list[float] = field(default_factory=list)

    def _purge(self, now_ms: float) -> None:
        """Drop samples that started ``samples`` windows ago or earlier (Kafka's purgeObsoleteSamples)."""
        horizon = now_ms - self.samples * self.window_ms
        while self.starts and self.starts[0] <= horizon:
            self.starts.pop(0)
            self.totals.pop(0)

    def record(self, value: float, now_ms: float) -> None:
        if not self.starts or now_ms >= self.starts[-1] + self.window_ms:
            self.starts.append(now_ms)
            self.totals.append(0.0)
            if len(self.starts) > self.samples:
                self.starts.pop(0)
                self.totals.pop(0)
        self.totals[-1] += value
        self._purge(now_ms)

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        elapsed = now_ms - self.starts[0] if self.starts else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def per_second(self, now_ms: float) -> float:
        size = self.window_size_ms(now_ms)
        return sum(self.totals) / (size / 1000) if size > 0 else 0.0


class QuotaStore:
    """The configured quotas, persisted in ``headwater-quotas.json`` on each change."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / QUOTAS_FILE
        self.quotas: dict[Entity, dict[str, float]] = {}
        saved = read_json(self.path)
        for item in (saved or {}).get("quotas", []):
            self.quotas[entity((t, n) for t, n in item["entity"])] = dict(item["values"])
        if self.quotas:
            log.info("loaded client quotas for %d entities from %s", len(self.quotas), self.path)
        self.version = 0  # bumped on every change: throttlers re-resolve their quotas

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        """Apply (entity, {key: value, or None to remove}) changes together, then persist them."""
        for ent, ops in changes:
            values = self.quotas.setdefault(ent, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del self.quotas[ent]
        self.version += 1
        write_json(self.path, {"quotas": [{"entity": [list(p) for p in ent], "values": values}
                                          for ent, values in sorted(self.quotas.items(), key=lambda kv: str(kv[0]))]})

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
        self.samples, self.window_ms = samples, window_ms
        self.sensors: dict[Entity, Rate] = {}
        self._resolved: dict[tuple[str, str], tuple[Entity, float] | None] = {}
        self._version = -1

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` bytes for the client; the throttle time in ms (0 within its quota)."""
        if self._version != self.store.version:
            self._resolved.clear()
            self._version = self.store.version
        who = (user, client_id)
        if who not in self._resolved:
            self._resolved[who] = self.store.resolve(self.key, user, client_id)
        found = self._resolved[who]
        if found is None:
            return 0
        ent, quota = found
        rate = self.sensors.get(ent)
        if rate is None:
            rate = self.sensors[ent] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        observed = rate.per_second(now_ms)
        if observed <= quota:
            return 0
        return math.floor((observed - quota) / quota * rate.window_size_ms(now_ms) + 0.5)
