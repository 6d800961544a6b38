"""Placeholders ``${provider:path:key}`` and ``${provider:key}`` (Kafka's ConfigTransformer) replaced by what
the worker's config providers give, and put back into task configs (AbstractHerder.reverseTransform).

Connector configs are stored with their placeholders; the worker that starts a connector or a task resolves
them (``strict``: a placeholder that cannot be resolved is an error naming the key and the provider, never a
value). Validation resolves leniently, as Kafka's does: what cannot be resolved stays as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..api.config_provider import ConfigProvider
from ..api.errors import ConfigException

__all__ = ["PLACEHOLDER", "ConfigTransformer", "Resolved", "UnresolvedPlaceholders", "has_placeholder",
           "reverse_transform"]

#: Kafka's ConfigTransformer.DEFAULT_PATTERN: provider, optional path (no ':' in it), key.
PLACEHOLDER = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def has_placeholder(value: object) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


@dataclass(frozen=True)
class Resolved:
    """A config with its placeholders replaced; ``ttl_ms``: the shortest lease among the values used."""

    config: dict[str, str]
    ttl_ms: int | None = None
    keys: frozenset[str] = field(default_factory=frozenset)  # the keys whose value held a placeholder


class UnresolvedPlaceholders(ConfigException):
    """Placeholders that could not be resolved, per key (the message names each key and its provider)."""

    def __init__(self, what: str, problems: dict[str, str]) -> None:
        detail = "; ".join(f"{key}: {problem}" for key, problem in problems.items())
        super().__init__(f"Could not resolve the config provider placeholders of {what}: {detail}",
                         next(iter(problems), None))
        self.problems = problems


class ConfigTransformer:
    """The worker's providers by name (``config.providers``); one ``get`` per provider and path per call."""

    def __init__(self, providers: Mapping[str, ConfigProvider]) -> None:
        self.providers = dict(providers)

    def transform(self, config: Mapping[str, str], what: str, strict: bool = True) -> Resolved:
        wanted: dict[tuple[str, str], set[str]] = {}
        for value in config.values():
            if isinstance(value, str):
                for m in PLACEHOLDER.finditer(value):
                    wanted.setdefault((m.group(1), m.group(3) or ""), set()).add(m.group(4))
        if not wanted:
            return Resolved(dict(config))
        found: dict[tuple[str, str], dict[str, str]] = {}
        failures: dict[tuple[str, str], str] = {}
        ttl: int | None = None
        for (name, path), keys in wanted.items():
            provider = self.providers.get(name)
            if provider is None:
                configured = ",".join(self.providers) or "none"
                failures[(name, path)] = (f"config provider '{name}' is not configured on this worker "
                                          f"(config.providers={configured})")
                continue
            try:
                data = provider.get(path, set(keys))
            except Exception as exc:  # a provider's own error: its message never holds a value
                failures[(name, path)] = f"config provider '{name}' failed: {exc}"
                continue
            found[(name, path)] = data.data
            if data.ttl_ms is not None:
                ttl = data.ttl_ms if ttl is None else min(ttl, data.ttl_ms)
        out: dict[str, str] = {}
        problems: dict[str, str] = {}
        changed = set()
        for key, value in config.items():
            if not has_placeholder(value):
                out[key] = value
                continue

            def replace(m: re.Match[str], key: str = key) -> str:
                where = (m.group(1), m.group(3) or "")
                data = found.get(where)
                if data is not None and m.group(4) in data:
                    return data[m.group(4)]
                at = f" at {where[1]}" if where[1] else ""
                problems.setdefault(key, failures.get(where) or
                                    f"config provider '{where[0]}' has no key '{m.group(4)}'{at}")
                return m.group(0)

            out[key] = PLACEHOLDER.sub(replace, value)
            changed.add(key)
        if problems and strict:
            raise UnresolvedPlaceholders(what, problems)
        return Resolved(out, ttl, frozenset(changed))


def reverse_transform(raw: Mapping[str, str], task_configs: list[dict[str, str]]) -> list[dict[str, str]]:
    """Task configs with the connector's placeholders put back: a key whose raw connector value holds one gets
    that raw value (Kafka's AbstractHerder.reverseTransform), so resolved secrets never reach the config topic."""
    placeholders = {k: v for k, v in raw.items() if has_placeholder(v)}
    return [{k: placeholders.get(k, v) for k, v in config.items()} for config in task_configs]
