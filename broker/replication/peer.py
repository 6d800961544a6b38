"""A connection from this broker to another one (Kafka's broker-side NetworkClient: the replica fetchers', and
every other broker-to-broker request's), on the other broker's inter-broker listener.

One request at a time: ``call`` sends a request and waits for its answer (the callers wait for each answer
anyway). A failed call leaves the connection unusable; the caller closes it and connects again.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig

__all__ = ["PeerConnection", "PeerError", "connect_peer"]

_SIZE = struct.Struct(">i")


class PeerError(Exception):
    """The other broker answered something this connection cannot use (a wrong correlation id, ...)."""


class PeerConnection:
    """One connection to another broker; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self._cid = 0

    async def call(self, request: Any, response_cls: Any, timeout: float) -> Any:
        """Send ``request`` (a kafka-python protocol request of the version to send) and return its answer,
        decoded with ``response_cls``; TimeoutError after ``timeout`` seconds."""
        self._cid += 1
        request.with_header(correlation_id=self._cid, client_id=self.client_id)
        self.writer.write(request.encode(header=True, framed=True))
        async with asyncio.timeout(timeout):
            await self.writer.drain()
            (size,) = _SIZE.unpack(await self.reader.readexactly(4))
            body = await self.reader.readexactly(size)
        (cid,) = _SIZE.unpack_from(body)
        if cid != self._cid:
            raise PeerError(f"answer {cid} to request {self._cid}")
        return response_cls.decode(body, version=request.API_VERSION, header=True)

    def close(self) -> None:
        self.writer.close()


async def connect_peer(config: BrokerConfig, host: str, port: int, client_id: str,
                       timeout: float) -> PeerConnection:
    """A connection to the broker listening at ``host``:``port`` on its inter-broker listener, opened within
    ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    return PeerConnection(reader, writer, client_id)
