"""Helpers shared by the converters: config parsing and Java-style ``toString`` of values."""

from __future__ import annotations

import binascii
import codecs
import datetime as _dt
import math
from decimal import Decimal
from typing import Any

from headwater.connect.api.data import Struct
from headwater.connect.api.errors import ConfigException

__all__ = ["config_bool", "config_int", "config_encoding", "java_double_str", "java_str", "b64encode"]


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


def b64encode(data: bytes | bytearray | memoryview) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def java_double_str(x: float) -> str:
    """Java's ``Double.toString``: decimal notation in [1e-3, 1e7), else ``d.dddE±n``."""
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    r = repr(x)
    if 1e-3 <= abs(x) < 1e7:
        return r  # Python's repr uses the same shortest digits and the same ".0" for integral values
    sign, digits, exponent = Decimal(r).as_tuple()
    digits = list(digits)
    exp10 = len(digits) - 1 + exponent
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
    mantissa = f"{digits[0]}." + ("".join(map(str, digits[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp10}"


def java_str(value: Any, encoding: str = "utf-8") -> str:
    """Roughly Java's ``String.valueOf`` of the Java value a Python value stands for."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode(encoding, "replace")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_str(v, encoding) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_str(k, encoding)}={java_str(v, encoding)}" for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        parts = [f"{f.name}={java_str(value.values[f.name], encoding)}" for f in value.schema.fields
                 if value.values.get(f.name) is not None]
        return "Struct{" + ",".join(parts) + "}"
    if isinstance(value, _dt.date | _dt.time):
        return value.isoformat()
    return str(value)
