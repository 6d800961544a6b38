"""Signed worker-to-worker requests (KIP-507): the MAC algorithms, signing a request and checking one.

Kafka Connect signs an internal request (a follower's ``POST /connectors/{name}/tasks``) with
``X-Connect-Authorization: base64(HMAC(session key, body))`` and names the MAC in
``X-Connect-Request-Signature-Algorithm``. Such a signature covers the body only, so a captured request
replays until the key rotates. Headwater also signs the moment of signing: ``X-Connect-Request-Timestamp``
(milliseconds since the epoch) goes into the MAC (``HMAC(key, "<timestamp>\\n" + body)``), a request
signed more than ``REPLAY_WINDOW_MS`` away from the receiver's clock is refused, and so is a signature
already received within that window (``ReplayGuard``).

Only the standard library here: the worker's config validation uses the algorithm table too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..api.errors import ConnectException

__all__ = ["ALGORITHM_HEADER", "MAC_ALGORITHMS", "REPLAY_WINDOW_MS", "SIGNATURE_HEADER", "SIGNED_HEADERS",
           "TIMESTAMP_HEADER", "ReplayGuard", "RequestRefused", "RequestSignature", "digest_of", "sign"]

SIGNATURE_HEADER = "X-Connect-Authorization"
ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
TIMESTAMP_HEADER = "X-Connect-Request-Timestamp"  # Headwater's: the signature covers it
SIGNED_HEADERS = (SIGNATURE_HEADER, ALGORITHM_HEADER, TIMESTAMP_HEADER)
#: How far a request's signing time may be from the receiver's clock (either way).
REPLAY_WINDOW_MS = 120_000

#: Java's MAC (and HMAC key generator) names, as Kafka's workers configure them, and Python's digests.
#: HmacMD5 is left out: the JVM offers it, but no cluster should sign with it.
MAC_ALGORITHMS: dict[str, str] = {
    "HmacSHA1": "sha1", "HmacSHA224": "sha224", "HmacSHA256": "sha256", "HmacSHA384": "sha384",
    "HmacSHA512": "sha512", "HmacSHA512/224": "sha512_224", "HmacSHA512/256": "sha512_256",
    "HmacSHA3-224": "sha3_224", "HmacSHA3-256": "sha3_256", "HmacSHA3-384": "sha3_384", "HmacSHA3-512": "sha3_512",
}


def digest_of(algorithm: str) -> str:
    """The hashlib name of a Java MAC name; ValueError (naming the supported ones) when there is none."""
    digest = MAC_ALGORITHMS.get(algorithm)
    if digest is None or digest not in hashlib.algorithms_available:
        raise ValueError(f"the algorithm {algorithm!r} is not supported; the supported algorithms are: "
                         f"{', '.join(a for a, d in MAC_ALGORITHMS.items() if d in hashlib.algorithms_available)}")
    return digest


def _mac(key: bytes, algorithm: str, timestamp_ms: int, body: bytes) -> bytes:
    return hmac.new(key, str(timestamp_ms).encode() + b"\n" + body, digest_of(algorithm)).digest()


def sign(key: bytes, algorithm: str, body: bytes, timestamp_ms: int) -> dict[str, str]:
    """The headers that sign ``body`` (the exact bytes sent) with ``key`` at ``timestamp_ms``."""
    return {SIGNATURE_HEADER: base64.b64encode(_mac(key, algorithm, timestamp_ms, body)).decode(),
            ALGORITHM_HEADER: algorithm, TIMESTAMP_HEADER: str(timestamp_ms)}


class RequestRefused(ConnectException):
    """An internal request that is not signed as the cluster signs: ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RequestSignature:
    """The signature headers of one request, over the body as received."""

    body: bytes = field(repr=False)
    algorithm: str
    signature: bytes = field(repr=False)
    timestamp_ms: int

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], body: bytes) -> RequestSignature:
        """The request's signature, or RequestRefused: 403 when a header is missing or malformed (an
        unsigned request is a forged one here; Kafka answers a missing signature with 400), 400 for an
        algorithm this worker cannot compute (as Kafka)."""
        algorithm, encoded = headers.get(ALGORITHM_HEADER), headers.get(SIGNATURE_HEADER)
        if not algorithm or not encoded:
            raise RequestRefused(403, "Internal request missing required signature")
        try:
            digest_of(algorithm)
        except ValueError as exc:
            raise RequestRefused(400, f"Internal request signed with an unusable algorithm ({ALGORITHM_HEADER}): "
                                      f"{exc}") from None
        try:
            signature = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise RequestRefused(403, f"Internal request contained invalid signature: {SIGNATURE_HEADER} is not "
                                      f"base64") from None
        stamp = headers.get(TIMESTAMP_HEADER, "")
        if not stamp.isascii() or not stamp.isdigit():
            raise RequestRefused(403, f"Internal request missing required signature timestamp ({TIMESTAMP_HEADER}, "
                                      f"milliseconds since the epoch)")
        return cls(body, algorithm, signature, int(stamp))

    def check(self, key: bytes, verification_algorithms: list[str], now_ms: int, replays: ReplayGuard) -> None:
        """Refuse (RequestRefused) unless signed with ``key``, by a permitted algorithm, within the window
        around ``now_ms``, and not received before."""
        if self.algorithm not in verification_algorithms:
            raise RequestRefused(400, f"This worker does not support the '{self.algorithm}' key signing algorithm "
                                      f"used by other workers. This worker is currently configured to use: "
                                      f"{verification_algorithms} (inter.worker.verification.algorithms). Check that "
                                      f"all workers' configuration files permit the same set of signature "
                                      f"algorithms, and correct any misconfigured worker and restart it.")
        if abs(now_ms - self.timestamp_ms) > REPLAY_WINDOW_MS:
            raise RequestRefused(403, f"Internal request signed at {self.timestamp_ms}, more than "
                                      f"{REPLAY_WINDOW_MS} ms from this worker's clock ({now_ms}): refused as stale")
        if not hmac.compare_digest(_mac(key, self.algorithm, self.timestamp_ms, self.body), self.signature):
            raise RequestRefused(403, "Internal request contained invalid signature.")
        if not replays.first_time(self.signature, self.timestamp_ms, now_ms):
            raise RequestRefused(403, "Internal request was already received once: a replayed request is refused")


class ReplayGuard:
    """The valid signatures received within the replay window: a second one of them is a replay. Only
    correctly signed requests are recorded, so its size is bounded by the cluster's own traffic."""

    def __init__(self, window_ms: int = REPLAY_WINDOW_MS) -> None:
        self.window_ms = window_ms
        self._seen: dict[bytes, int] = {}  # signature -> the signing time it came with

    def first_time(self, signature: bytes, timestamp_ms: int, now_ms: int) -> bool:
        """Record ``signature``; False when it was recorded before (and is still within the window)."""
        self._seen = {s: t for s, t in self._seen.items() if abs(now_ms - t) <= self.window_ms}
        if signature in self._seen:
            return False
        self._seen[signature] = timestamp_ms
        return True
