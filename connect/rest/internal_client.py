"""Worker-to-worker HTTP: a follower forwarding a request to the leader, or handing it task configs.

One place builds the client, so the trust it uses (the REST listener's TLS settings) and the headers an
internal request carries are the same for every such call.
"""

from __future__ import annotations

import ssl

import aiohttp

from ..config import WorkerConfig

__all__ = ["client_ssl", "internal_session"]


def client_ssl(config: WorkerConfig) -> ssl.SSLContext | bool:
    """The TLS client settings for calls to other workers' REST listeners (``True``: the system's trust)."""
    return True


def internal_session(config: WorkerConfig, timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl(config)), timeout=timeout)
