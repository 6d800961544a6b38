"""Config providers (KIP-297, KIP-421): where ``${provider:path:key}`` placeholders in connector and worker
configs get their values, so a secret is stored as a placeholder and resolved only by the worker that uses it.

Named in the worker's ``config.providers=file,env`` and built from ``config.providers.<name>.class`` with
``config.providers.<name>.param.*`` handed to ``configure``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ConfigData", "ConfigProvider"]


@dataclass(frozen=True)
class ConfigData:
    """The values a provider found at one path; ``ttl_ms`` when they expire (a leased secret)."""

    data: dict[str, str] = field(default_factory=dict)
    ttl_ms: int | None = None


class ConfigProvider:
    """Subclass and return the class from the ``headwater_config_providers`` hook."""

    def configure(self, configs: dict[str, str]) -> None:
        """``config.providers.<name>.param.*`` with the prefix removed. Raise ``ConfigException`` naming the
        key when one is wrong."""

    def get(self, path: str, keys: set[str] | None = None) -> ConfigData:
        """The values at ``path`` (all of them, or only ``keys``). Raise ``ConfigException`` when the path
        is not allowed or cannot be read; the message must not hold a value."""
        raise NotImplementedError

    def close(self) -> None:
        """The worker stops."""
