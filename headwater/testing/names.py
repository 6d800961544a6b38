"""What tests must not share: names (topics, connectors, groups) and loopback ports."""

from __future__ import annotations

import socket
import uuid

__all__ = ["free_port", "unique"]


def unique(prefix: str) -> str:
    """A name no other test uses (topics, connectors, groups)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    """A loopback TCP port free right now, for a server that cannot be given port 0 (it is released
    before being returned: a server that can bind port 0 and report its port is the better choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
