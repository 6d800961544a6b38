"""The REST API's listeners as Kafka Connect writes them: ``listeners=http://host:port,https://host:port``
(and KIP-495's ``admin.listeners``), each a scheme, a host (empty: every interface) and a port."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCHEMES", "RestListener", "parse_listeners"]

SCHEMES = ("http", "https")


@dataclass(frozen=True)
class RestListener:
    scheme: str
    host: str  # as written; "" or 0.0.0.0 / :: binds every interface
    port: int

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"

    @property
    def wildcard(self) -> bool:
        return self.host in ("", "0.0.0.0", "::")

    def url(self, host: str | None = None, port: int | None = None) -> str:
        name = host if host is not None else (self.host if not self.wildcard else "127.0.0.1")
        if ":" in name and not name.startswith("["):
            name = f"[{name}]"
        return f"{self.scheme}://{name}:{self.port if port is None else port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_listeners(text: str, key: str) -> list[RestListener]:
    """``scheme://host:port`` entries separated by commas; ValueError naming ``key`` and the entry otherwise.
    An empty text is an empty list (meaningful for ``admin.listeners``)."""
    out: list[RestListener] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        scheme, sep, rest = entry.partition("://")
        if not sep:
            raise ValueError(f"{key}: {entry!r} is not scheme://host:port")
        scheme = scheme.lower()
        if scheme not in SCHEMES:
            raise ValueError(f"{key}: {entry!r} has the scheme {scheme!r}; a REST listener is http or https")
        if "/" in rest.rstrip("/"):
            raise ValueError(f"{key}: {entry!r}: a listener has no path")
        host, colon, port_text = rest.rstrip("/").rpartition(":")
        if not colon or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ValueError(f"{key}: {entry!r} has no port (0-65535) after the host")
        out.append(RestListener(scheme, host.removeprefix("[").removesuffix("]"), int(port_text)))
    return out
