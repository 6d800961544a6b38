"""Signing an internal request as a worker does (KIP-507 plus Headwater's signed timestamp), computed here
with ``hmac`` from the session key read off the config topic by a real Kafka client (confluent-kafka), so
the tests check the workers against the documented scheme rather than against their own code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from .workerproc import read_topic

__all__ = ["session_keys", "signed_headers"]


def session_keys(bootstrap: str, config_topic: str) -> list[dict[str, Any]]:
    """Every ``session-key`` record of the config topic, oldest first, as Kafka's JSON value
    (``key`` decoded to bytes)."""
    out = []
    for _, _, key, value in sorted(read_topic(bootstrap, config_topic)):
        if key == b"session-key" and value is not None:
            record = json.loads(value)
            out.append({**record, "key": base64.b64decode(record["key"])})
    return out


def signed_headers(key: bytes, body: bytes, timestamp_ms: int | None = None, algorithm: str = "HmacSHA256",
                   digest: str = "sha256") -> dict[str, str]:
    """Content-Type and the three signature headers for ``body``: HMAC over ``"<timestamp>\\n" + body``."""
    stamp = str(int(time.time() * 1000) if timestamp_ms is None else timestamp_ms)
    mac = hmac.new(key, stamp.encode() + b"\n" + body, getattr(hashlib, digest)).digest()
    return {"Content-Type": "application/json", "X-Connect-Authorization": base64.b64encode(mac).decode(),
            "X-Connect-Request-Signature-Algorithm": algorithm, "X-Connect-Request-Timestamp": stamp}
