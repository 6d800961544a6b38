"""Which topics and groups a flow mirrors: MM2's DefaultTopicFilter and DefaultGroupFilter.

``topics`` / ``groups`` are comma lists of Java regular expressions that must match the whole name;
``topics.exclude`` / ``groups.exclude`` (also the older ``topics.blacklist`` / ``groups.blacklist``)
win over them. The defaults keep internal topics and Connect's own consumer groups out (so sink
connectors' groups are not synced unless the user names them).
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_GROUPS_EXCLUDE", "DEFAULT_TOPICS_EXCLUDE", "NameFilter", "group_filter", "topic_filter"]

DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS_EXCLUDE = r"console-consumer-.*, connect-.*, __.*"


def _patterns(key: str, value: str) -> re.Pattern[str] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        return None
    try:
        return re.compile("|".join(f"(?:{p})" for p in parts))
    except re.error as exc:
        raise ValueError(f"{key}: {value!r} is not a list of regular expressions: {exc}") from exc


class NameFilter:
    def __init__(self, include_key: str, include: str, exclude_key: str, exclude: str) -> None:
        self.include = _patterns(include_key, include)
        self.exclude = _patterns(exclude_key, exclude)

    def __call__(self, name: str) -> bool:
        if self.exclude is not None and self.exclude.fullmatch(name):
            return False
        return self.include is not None and self.include.fullmatch(name) is not None


def _setting(settings: dict[str, str], key: str, old_key: str, default: str) -> str:
    return settings.get(key, settings.get(old_key, default))


def topic_filter(settings: dict[str, str]) -> NameFilter:
    return NameFilter("topics", settings.get("topics", ".*"), "topics.exclude",
                      _setting(settings, "topics.exclude", "topics.blacklist", DEFAULT_TOPICS_EXCLUDE))


def group_filter(settings: dict[str, str]) -> NameFilter:
    return NameFilter("groups", settings.get("groups", ".*"), "groups.exclude",
                      _setting(settings, "groups.exclude", "groups.blacklist", DEFAULT_GROUPS_EXCLUDE))
