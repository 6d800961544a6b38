"""Secrets out of every REST answer that carries a config, and back in when an edit sends them unchanged.

A secret (``connect/api/secrets.py``: a ``SecretStr`` field of the connector's model, or a key named as Kafka
names passwords) is answered as ``[hidden]``, and so are the passwords a URL carries (``connection.url``); a
value that is a lone config provider placeholder (``${file:/run/secrets/db.properties:password}``) is no secret
and is shown as written. A PUT or PATCH that sends ``[hidden]`` for a secret (or a URL as it was answered) keeps
the stored value, so the console's edit form (and a script that GETs, changes a key and PUTs) round-trips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..api.secrets import HIDDEN, hide_url_secrets, is_url_key, secret_keys
from ..config_providers import PLACEHOLDER
from ..herder.errors import BadRequest
from ..plugins import PluginRegistry, UnknownPlugin

__all__ = ["HIDDEN", "keep_hidden", "redact", "redact_info", "redact_tasks"]


def _model(registry: PluginRegistry, config: Mapping[str, Any]) -> type[BaseModel] | None:
    try:
        return registry.connector(str(config.get("connector.class", ""))).config_class
    except UnknownPlugin:
        return None


def _shown(value: Any) -> Any:
    if not value or (isinstance(value, str) and PLACEHOLDER.fullmatch(value.strip())):
        return value
    return HIDDEN


def redact(registry: PluginRegistry, config: Mapping[str, Any],
           connector_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` with its secrets hidden; ``connector_config``: the connector's, when ``config`` is a task's."""
    secret = secret_keys(config, _model(registry, connector_config or config))
    return {k: _shown(v) if k in secret else hide_url_secrets(v) if is_url_key(k) and isinstance(v, str) else v
            for k, v in config.items()}


def redact_info(registry: PluginRegistry, info: dict[str, Any]) -> dict[str, Any]:
    """A connector info answer (``{"name", "config", "tasks", "type"}``) with its config's secrets hidden."""
    return {**info, "config": redact(registry, info["config"])}


def redact_tasks(registry: PluginRegistry, connector_config: Mapping[str, Any] | None,
                 tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``GET /connectors/{n}/tasks``'s entries with each task config's secrets hidden."""
    return [{**t, "config": redact(registry, t["config"], connector_config or t["config"])} for t in tasks]


def keep_hidden(registry: PluginRegistry, name: str, config: Mapping[str, Any],
                stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` with each secret sent as ``[hidden]`` replaced by the stored value, and a URL sent as answered
    (its passwords ``[hidden]``) by the stored URL; BadRequest naming the key when there is none to keep (a new
    connector, a key the stored config lacks, a URL changed elsewhere too)."""
    out = dict(config)
    missing = []
    for key in sorted(secret_keys(config, _model(registry, config))):
        if out[key] != HIDDEN:
            continue
        if stored is None or key not in stored:
            missing.append(key)
        else:
            out[key] = stored[key]
    for key, value in config.items():  # a URL sent back as answered: its passwords are the stored ones
        if is_url_key(key) and isinstance(value, str) and HIDDEN in value and key not in missing:
            previous = (stored or {}).get(key)
            if isinstance(previous, str) and hide_url_secrets(previous) == value:
                out[key] = previous
            else:
                missing.append(key)
    if missing:
        raise BadRequest(f"{', '.join(missing)}: {HIDDEN} stands for the value stored for connector {name}, which "
                         f"has none: send the value itself")
    return out
