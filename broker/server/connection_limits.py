"""How many connections the broker keeps, and for how long: Kafka's ``max.connections``,
``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``) and ``connections.max.idle.ms``.

A connection over a limit is closed at once, before a byte of it is read, with a log line: Kafka's
acceptor does so for the per-IP limit; over ``max.connections`` it stops accepting until a connection
closes, leaving new ones in the listen backlog. Here those are closed as well and the client reconnects
with its backoff, so that no file descriptor is held for a client that is not served.

A connection with no request in flight and nothing read or answered for ``connections.max.idle.ms`` is
closed, as Kafka's Selector closes idle channels (Java clients close theirs first, at 540000 ms). Idle
connections are looked for every quarter of that time (at most every 10 s), by a timer that runs only
while connections are open. The server calls ``admit`` when a client connects, ``started`` for each
request, and ``release`` when the connection ends.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from typing import Any

from ..config.broker_config import BrokerConfig, ConfigError, parse_ip_overrides

__all__ = ["ConnectionLimits", "ConnectionSlot"]

log = logging.getLogger(__name__)

_MAX_SWEEP_INTERVAL = 10.0  # seconds between looks for idle connections, at most


class ConnectionSlot:
    """One admitted connection: its address, how to close it, and when it was last busy."""

    __slots__ = ("in_flight", "ip", "last_active", "peer", "transport")

    def __init__(self, ip: str, peer: str, transport: asyncio.BaseTransport) -> None:
        self.ip, self.peer, self.transport = ip, peer, transport
        self.last_active = time.monotonic()
        self.in_flight = 0

    def _done(self, _task: object) -> None:
        self.in_flight -= 1
        self.last_active = time.monotonic()


def _resolve(host: str) -> str:
    """An override's host as the address connections come from (Kafka resolves names the same way)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise ConfigError(f"max.connections.per.ip.overrides: host {host!r} does not resolve ({exc})") from None


class ConnectionLimits:
    def __init__(self, config: BrokerConfig) -> None:
        self.max_connections = config.max_connections
        self.per_ip = config.max_connections_per_ip
        self.per_ip_overrides = {_resolve(host): limit
                                 for host, limit in parse_ip_overrides(config.max_connections_per_ip_overrides).items()}
        self.idle_seconds = config.connections_max_idle_ms / 1000
        self._slots: set[ConnectionSlot] = set()
        self._by_ip: dict[str, int] = {}
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def open_connections(self) -> int:
        return len(self._slots)

    def admit(self, peer: object, transport: asyncio.BaseTransport) -> ConnectionSlot | None:
        """A slot for a new connection from ``peer`` (a socket address), or None (logged) when it is over a
        limit: the caller closes it then."""
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        peer_str = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if len(self._slots) >= self.max_connections:
            log.warning("closing connection from %s: %d connections open (max.connections)", peer_str,
                        len(self._slots))
            return None
        limit = self.per_ip_overrides.get(ip, self.per_ip)
        count = self._by_ip.get(ip, 0)
        if count >= limit:
            log.warning("closing connection from %s: %s already has %d connections (max.connections.per.ip%s)",
                        peer_str, ip, count, ".overrides" if ip in self.per_ip_overrides else "")
            return None
        slot = ConnectionSlot(ip, peer_str, transport)
        self._slots.add(slot)
        self._by_ip[ip] = count + 1
        if self._sweeper is None:
            self._arm()
        return slot

    def started(self, slot: ConnectionSlot, request: asyncio.Future[Any] | Any) -> None:
        """A request of ``slot``'s connection is under way (a future): the connection is busy until it is
        answered; anything else was answered at once."""
        slot.last_active = time.monotonic()
        if isinstance(request, asyncio.Future):
            slot.in_flight += 1
            request.add_done_callback(slot._done)

    def release(self, slot: ConnectionSlot) -> None:
        if slot not in self._slots:
            return
        self._slots.discard(slot)
        left = self._by_ip[slot.ip] - 1
        if left:
            self._by_ip[slot.ip] = left
        else:
            del self._by_ip[slot.ip]
        if not self._slots and self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _arm(self) -> None:
        interval = min(max(self.idle_seconds / 4, 0.01), _MAX_SWEEP_INTERVAL)
        self._sweeper = asyncio.get_running_loop().call_later(interval, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        cutoff = time.monotonic() - self.idle_seconds
        for slot in [s for s in self._slots if not s.in_flight and s.last_active < cutoff]:
            log.info("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)", slot.peer,
                     self.idle_seconds * 1000)
            slot.transport.close()  # its reader sees the end of the stream and the connection ends as usual
            slot.last_active = float("inf")  # closed once
        if self._slots:
            self._arm()
