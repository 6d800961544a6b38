"""RegexRouter and Filter, and the Java-regex helpers they and TopicNameMatches share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.errors import ConfigException
from ..api.transforms import Transformation, TransformConfig
from .util import invalid, kafka_aliases

__all__ = ["Filter", "RegexRouter", "check_regex", "java_regex", "java_replacement"]


def java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a ``java.util.regex`` pattern: ``(?<name>...)``, ``\\k<name>``, ``\\Q...\\E``, ``\\z``
    and ``\\Z`` are translated; the rest of the syntax is shared with Python. ValueError if invalid."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end
                out.append(re.escape(pattern[i + 2 : end]))
                i = end + 2
                continue
            if nxt == "k" and not in_class and pattern.startswith("<", i + 2):
                close = pattern.find(">", i + 3)
                if close > 0:
                    out.append(f"(?P={pattern[i + 3 : close]})")
                    i = close + 1
                    continue
            if nxt == "z" and not in_class:
                out.append(r"\Z")
            elif nxt == "Z" and not in_class:
                out.append(r"(?=\n?\Z)")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            out.append(c)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a leading ] is a literal in Java too
                out.append("\\]")
                i += 1
            i += 1
            continue
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out))
    except re.error as exc:
        raise ValueError(f"Invalid regex: {exc}") from None


def java_replacement(template: str, regex: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    """``Matcher.appendReplacement`` syntax: ``$1``, ``${name}``, and ``\\`` escaping the next character.
    ValueError for the references Java would reject."""
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(template)
    while i < n:
        c = template[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("character to be escaped is missing")
            literal.append(template[i + 1])
            i += 2
        elif c == "$":
            if i + 1 >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if template[i + 1] == "{":
                close = template.find("}", i + 2)
                if close < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = template[i + 2 : close]
                if name not in regex.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                ref, i = regex.groupindex[name], close + 1
            else:
                if not template[i + 1].isdigit():
                    raise ValueError("Illegal group reference")
                ref, i = int(template[i + 1]), i + 2
                while i < n and template[i].isdigit() and ref * 10 + int(template[i]) <= regex.groups:
                    ref, i = ref * 10 + int(template[i]), i + 1
                if ref > regex.groups:
                    raise ValueError(f"No group {ref}")
            parts.append("".join(literal))
            literal = []
            parts.append(ref)
        else:
            literal.append(c)
            i += 1
    parts.append("".join(literal))

    def expand(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)

    return expand


def check_regex(value: str) -> str:
    """A pydantic validator body: the pattern compiles as a Java regex."""
    try:
        java_regex(value)
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return value


class RegexRouterConfig(TransformConfig):
    regex: str = ConfigField(alias="regex", description="Regular expression to use for matching.")
    replacement: str = ConfigField(alias="replacement", description="Replacement string.")

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str) -> str:
        return check_regex(value)


class RegexRouter(Transformation):
    """When the whole topic matches ``regex``, route to ``replaceFirst(regex, replacement)``
    (``$1``/``${name}`` group references); other records are left alone.

    Keys: ``regex``, ``replacement``."""

    config_class = RegexRouterConfig
    aliases = kafka_aliases("RegexRouter")

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.regex = java_regex(self.config.regex)
        try:
            self.expand = java_replacement(self.config.replacement, self.regex)
        except ValueError as exc:
            raise ConfigException(
                f"Invalid value {self.config.replacement} for configuration replacement: {exc}",
                field="replacement",
            ) from None

    def apply(self, record: Any) -> Any:
        topic = record.topic
        if topic is None or self.regex.fullmatch(topic) is None:
            return record
        return record.new_record(topic=self.regex.sub(self.expand, topic, count=1))


class Filter(Transformation):
    """Drop every record it is applied to; guard it with a predicate. No keys."""

    aliases = kafka_aliases("Filter")

    def apply(self, record: Any) -> None:
        return None
