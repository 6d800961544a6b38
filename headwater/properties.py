"""Configuration plumbing shared by the broker and Connect: Java ``.properties`` files,
``--set key=value`` overrides, and pydantic errors phrased with Kafka's property names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "format_validation_error", "load_properties", "parse_overrides", "validate_model"]

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration problem, already phrased for the user (names the property)."""


def format_validation_error(exc: ValidationError) -> str:
    """One line naming each bad property, its problem and the value given."""
    problems = []
    for err in exc.errors():
        msg = err["msg"]
        if not err["loc"]:  # a check across properties: its message names them; the input is every value
            problems.append(msg.removeprefix("Value error, "))
            continue
        name = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            msg = "unknown property"
        problems.append(f"{name}: {msg} (got {err.get('input')!r})" if err["type"] != "missing" else f"{name}: {msg}")
    return "; ".join(problems)


def validate_model(model: type[M], values: dict[str, Any]) -> M:
    """Build ``model`` from Kafka-named values, turning pydantic errors into ConfigError."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


_PROP_LINE = re.compile(r"^\s*([^=:\s]+)\s*[=:]\s*(.*?)\s*$")


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java-style ``.properties`` file (``key=value``, ``#`` and ``!`` comments; a line ending in an
    odd number of backslashes goes on on the next one, as Kafka's JAAS values often do)."""
    props: dict[str, str] = {}
    lines = Path(path).read_text().splitlines()
    index = 0
    while index < len(lines):
        lineno, raw = index + 1, lines[index]
        index += 1
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
        m = _PROP_LINE.match(line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got {raw!r}")
        props[m.group(1)] = m.group(2)
    return props


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["key=value", ...]`` from repeated ``--set`` flags -> a dict (later ones win)."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out
