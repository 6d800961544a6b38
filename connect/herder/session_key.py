"""The session key of KIP-507: which key the leader distributes, and when it distributes a new one.

As Kafka's DistributedHerder: with ``connect.protocol=sessioned`` (the group's protocol, not just this
worker's setting) the leader writes a ``session-key`` record to the config topic when there is none,
when the current one is older than ``inter.worker.key.ttl.ms``, or when it was made with another
algorithm or size than ``inter.worker.key.generation.algorithm`` / ``inter.worker.key.size`` ask for.
Every worker reads it through the config store; followers sign their internal requests with it and
every worker checks the requests it receives against it (connect/rest/signature.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from ..config import WorkerConfig
from ..storage.kafka_stores import SessionKey

__all__ = ["KeyPolicy"]

#: The key size Java's KeyGenerator makes for each HMAC when ``inter.worker.key.size`` is not set (bits).
DEFAULT_KEY_BITS = {"HmacSHA1": 512, "HmacSHA224": 224, "HmacSHA256": 256, "HmacSHA384": 384, "HmacSHA512": 512,
                    "HmacSHA512/224": 224, "HmacSHA512/256": 256, "HmacSHA3-224": 224, "HmacSHA3-256": 256,
                    "HmacSHA3-384": 384, "HmacSHA3-512": 512}


@dataclass(frozen=True)
class KeyPolicy:
    """The worker's key settings: what a new key is, and when the current one must be replaced."""

    algorithm: str
    size_bytes: int
    ttl_ms: int

    @classmethod
    def of(cls, config: WorkerConfig) -> KeyPolicy:
        algorithm = config.inter_worker_key_generation_algorithm
        bits = config.inter_worker_key_size or DEFAULT_KEY_BITS[algorithm]
        return cls(algorithm, (bits + 7) // 8, config.inter_worker_key_ttl_ms)

    def new_key(self, now_ms: int) -> SessionKey:
        return SessionKey(secrets.token_bytes(self.size_bytes), self.algorithm, now_ms)

    def expires_at(self, key: SessionKey) -> int:
        return key.creation_timestamp + self.ttl_ms

    def why_replace(self, key: SessionKey | None, now_ms: int) -> str | None:
        """Why the leader must distribute a new key now (None: the current one stays)."""
        if key is None:
            return "no session key has been distributed yet"
        if self.expires_at(key) <= now_ms:
            return "the session key has expired"
        if key.algorithm != self.algorithm or len(key.key) != self.size_bytes:
            return (f"the session key uses another algorithm or size ({key.algorithm}, {len(key.key) * 8} bits) "
                    f"than this worker's configuration ({self.algorithm}, {self.size_bytes * 8} bits)")
        return None
