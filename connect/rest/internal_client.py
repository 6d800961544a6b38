"""Worker-to-worker HTTP: a follower forwarding a request to the leader, or handing it task configs.

One place builds the client, so the trust it uses (the REST listener's TLS settings) and the headers an
internal request carries are the same for every such call.
"""

from __future__ import annotations

import functools
import ssl

import aiohttp

from headwater.kafka.client_security import ssl_client_context

from ..config import WorkerConfig, WorkerConfigError

__all__ = ["client_ssl", "internal_session"]


def client_ssl(config: WorkerConfig) -> ssl.SSLContext | bool:
    """The TLS client settings for calls to other workers' REST listeners, as Kafka's RestClient takes them:
    the https listener's settings (``listeners.https.ssl.*``, else the worker's ``ssl.*``), so the truststore
    is what is trusted and, for ``ssl.client.auth=required``, the keystore is the certificate presented.
    ``True`` (the system's trust) when the worker has no https listener."""
    if not any(x.scheme == "https" for x in config.rest_listeners()):
        return True
    props, prefix = config.rest_ssl()
    return _context(tuple(sorted(props.items())), prefix)


@functools.lru_cache(maxsize=8)
def _context(props: tuple[tuple[str, str], ...], prefix: str) -> ssl.SSLContext:
    try:
        return ssl_client_context(dict(props))
    except ValueError as exc:
        raise WorkerConfigError(f"{prefix}{exc}") from None


def internal_session(config: WorkerConfig, timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl(config)), timeout=timeout)
