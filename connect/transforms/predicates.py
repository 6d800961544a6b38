"""The built-in predicates: HasHeaderKey, RecordIsTombstone, TopicNameMatches.

``negate`` (``transforms.<t>.negate``) is applied by the runtime, not here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.records import ConnectRecord
from ..api.transforms import Predicate, TransformConfig
from .routing import check_regex, java_regex
from .util import invalid, kafka_aliases

__all__ = ["HasHeaderKey", "RecordIsTombstone", "TopicNameMatches"]

PKG = "org.apache.kafka.connect.transforms.predicates"


def _non_empty(value: str) -> str:
    if not value:
        raise invalid("String must be non-empty")
    return value


class HasHeaderKeyConfig(TransformConfig):
    name: str = ConfigField(alias="name", description="The header name.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _non_empty(value)


class HasHeaderKey(Predicate):
    """True when the record has at least one header with this name.

    Keys: ``name``."""

    config_class = HasHeaderKeyConfig
    aliases = kafka_aliases("HasHeaderKey", PKG)

    def test(self, record: ConnectRecord) -> bool:
        name = self.config.name
        return any(h.key == name for h in record.headers)


class RecordIsTombstone(Predicate):
    """True when the record's value is null (a tombstone). No keys."""

    aliases = kafka_aliases("RecordIsTombstone", PKG)

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None


class TopicNameMatchesConfig(TransformConfig):
    pattern: str = ConfigField(
        alias="pattern",
        description="A Java regular expression for matching against the name of a record's topic.",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        return check_regex(_non_empty(value))


class TopicNameMatches(Predicate):
    """True when the whole topic name matches the regex (Java's ``Matcher.matches``).

    Keys: ``pattern``."""

    config_class = TopicNameMatchesConfig
    aliases = kafka_aliases("TopicNameMatches", PKG)

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.regex = java_regex(self.config.pattern)

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.regex.fullmatch(record.topic) is not None
