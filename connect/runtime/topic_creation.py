"""Topic creation for source connectors (KIP-158), as Kafka Connect does it.

A source connector whose config has any ``topic.creation.*`` key (on a worker with
``topic.creation.enable=true``, the default) gets each topic it writes to created before
its first record, with the settings of the first group in ``topic.creation.groups`` whose
``include`` regexes match the topic and whose ``exclude`` ones do not, else the ``default``
group. Each group has ``replication.factor`` and ``partitions`` (-1: the broker's default;
the default group must set both, the others inherit them) and any topic config, e.g.
``topic.creation.compacted.cleanup.policy=compact``. A topic that exists is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..api import ConfigException

__all__ = ["TopicCreation", "TopicCreationGroup", "topic_creation_errors"]

PREFIX = "topic.creation."
DEFAULT = "default"
_SETTINGS = ("include", "exclude", "replication.factor", "partitions")


@dataclass(frozen=True)
class TopicCreationGroup:
    name: str
    replication_factor: int
    partitions: int
    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    configs: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        return (any(p.fullmatch(topic) for p in self.include)
                and not any(p.fullmatch(topic) for p in self.exclude))


def _list(value: Any) -> list[str]:
    return [item.strip() for item in str(value or "").split(",") if item.strip()]


def _group_names(props: dict[str, Any]) -> list[str]:
    return [g for g in _list(props.get(PREFIX + "groups")) if g != DEFAULT]


def _int(props: dict[str, Any], key: str, errors: dict[str, list[str]], fallback: int | None) -> int:
    raw = props.get(key)
    if raw is None or str(raw).strip() == "":
        if fallback is None:
            errors.setdefault(key, []).append(f'Missing required configuration "{key}" which has no default '
                                              f"value (topic creation is on: the connector sets {PREFIX}* keys).")
            return -1
        return fallback
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value == 0 or value < -1:
        errors.setdefault(key, []).append(f"Invalid value {raw} for configuration {key}: must be -1 (the "
                                          "broker's default) or at least 1")
    return value


def _patterns(props: dict[str, Any], key: str, errors: dict[str, list[str]]) -> tuple[re.Pattern[str], ...]:
    out = []
    for regex in _list(props.get(key)):
        try:
            out.append(re.compile(regex))
        except re.error as exc:
            errors.setdefault(key, []).append(f"Invalid value {regex} for configuration {key}: not a regular "
                                              f"expression ({exc})")
    return tuple(out)


def _parse(props: dict[str, Any]) -> tuple[list[TopicCreationGroup], dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    rf = _int(props, f"{PREFIX}{DEFAULT}.replication.factor", errors, None)
    partitions = _int(props, f"{PREFIX}{DEFAULT}.partitions", errors, None)
    groups = []
    for name in [*_group_names(props), DEFAULT]:
        base = f"{PREFIX}{name}."
        configs = {k[len(base):]: str(v) for k, v in props.items()
                   if k.startswith(base) and k[len(base):] not in _SETTINGS}
        if name == DEFAULT:
            groups.append(TopicCreationGroup(name, rf, partitions, (re.compile(".*"),),
                                             _patterns(props, base + "exclude", errors), configs))
        else:
            groups.append(TopicCreationGroup(
                name, _int(props, base + "replication.factor", errors, rf), _int(props, base + "partitions", errors,
                                                                                 partitions),
                _patterns(props, base + "include", errors), _patterns(props, base + "exclude", errors), configs))
    return groups, errors


def _uses_topic_creation(props: dict[str, Any]) -> bool:
    return any(str(k).startswith(PREFIX) for k in props)


def topic_creation_errors(props: dict[str, Any]) -> dict[str, list[str]]:
    """Per-key problems of a source connector's ``topic.creation.*`` keys (empty when none or valid)."""
    return _parse(props)[1] if _uses_topic_creation(props) else {}


class TopicCreation:
    """The groups of one source connector, in the order they are tried."""

    def __init__(self, groups: list[TopicCreationGroup]) -> None:
        self.groups = groups

    @classmethod
    def from_config(cls, props: dict[str, Any], enabled: bool = True) -> TopicCreation | None:
        """None when topics are not created: the worker turned it off, or the connector sets no
        ``topic.creation.*`` key. Raises ConfigException naming the key when a setting is invalid."""
        if not enabled or not _uses_topic_creation(props):
            return None
        groups, errors = _parse(props)
        if errors:
            raise ConfigException("; ".join(message for messages in errors.values() for message in messages),
                                  next(iter(errors)))
        return cls(groups)

    def group_for(self, topic: str) -> TopicCreationGroup:
        return next(g for g in self.groups if g.matches(topic))
