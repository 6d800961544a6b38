"""Helpers shared by the converters: config parsing and Java-style ``toString`` of values."""

from __future__ import annotations

import codecs
from typing import Any

from headwater.connect.api.data import Struct, java_double_str, java_str  # noqa: F401 - re-exported
from headwater.connect.api.errors import ConfigException

__all__ = ["config_bool", "config_int", "config_encoding", "java_double_str", "java_str"]


def config_bool(configs: dict[str, Any], key: str, default: bool) -> bool:
    raw = configs.get(key)
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigException(f"Invalid value {raw} for configuration {key}: Expected value to be either true or false",
                          key)


def config_int(configs: dict[str, Any], key: str, default: int, minimum: int | None = None) -> int:
    raw = configs.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigException(f"Invalid value {raw} for configuration {key}: Not a number of type INT", key) from None
    if minimum is not None and value < minimum:
        raise ConfigException(f"Invalid value {raw} for configuration {key}: Value must be at least {minimum}", key)
    return value


def config_encoding(configs: dict[str, Any], key: str, default: str = "UTF8") -> str:
    """A Java charset name (UTF8, UTF-8, ISO-8859-1, US-ASCII, ...) as a Python codec name."""
    raw = str(configs.get(key) or default).strip()
    try:
        return codecs.lookup(raw).name
    except LookupError:
        raise ConfigException(f"Invalid value {raw} for configuration {key}: unknown character set", key) from None

