"""Creating topics through aiokafka's admin client, with Kafka's "-1 = the broker's default".

aiokafka's CreateTopics request cannot carry -1 for the partition count or the replication
factor, so -1 is resolved first: the replication factor as Kafka would pick it on a small
cluster (3, or the number of brokers when fewer), the partition count from the broker's
``num.partitions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from headwater.kafka.errors import ErrorCode

from ..api import ConnectException

__all__ = ["TopicCreationFailed", "create_topic", "topic_config", "topic_overrides"]

_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config_source of a topic's own override

log = logging.getLogger(__name__)


class TopicCreationFailed(ConnectException, RuntimeError):
    def __init__(self, topic: str, code: int, message: str | None) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        super().__init__(f"Could not create topic '{topic}': {name}{': ' + message if message else ''}")
        self.code = code


async def _config_value(admin: Any, resource: ConfigResource, key: str) -> str | None:
    try:
        result = await admin.describe_configs([resource])
    except Exception:  # a broker that cannot describe configs
        log.warning("could not read %s of %s", key, resource.name, exc_info=True)
        return None
    for response in result:
        for entry in response.resources:
            for config in entry[4]:
                if config[0] == key:
                    return str(config[1]) if config[1] is not None else None
    return None


async def topic_config(admin: Any, topic: str, key: str) -> str | None:
    """One config value of ``topic`` (None when it cannot be read)."""
    return await _config_value(admin, ConfigResource(ConfigResourceType.TOPIC, topic), key)


async def create_topic(admin: Any, topic: str, partitions: int, replication_factor: int,
                       configs: dict[str, str] | None = None) -> bool:
    """Create ``topic`` unless it exists; True when this call created it. ``admin`` is started."""
    brokers = []
    if replication_factor < 1 or partitions < 1:
        brokers = (await admin.describe_cluster()).get("brokers", [])
    if replication_factor < 1:
        replication_factor = max(1, min(3, len(brokers) or 1))
    if partitions < 1:
        node = str(brokers[0]["node_id"]) if brokers else "0"
        default = await _config_value(admin, ConfigResource(ConfigResourceType.BROKER, node), "num.partitions")
        partitions = int(default) if default and default.isdigit() else 1
    response = await admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                                   topic_configs=dict(configs or {}))])
    for entry in response.topic_errors:
        code, message = entry[1], (entry[2] if len(entry) > 2 else None)
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return False
        if code != ErrorCode.NONE:
            raise TopicCreationFailed(topic, code, message)
    return True


async def topic_overrides(admin: Any, topics: list[str],
                          keep: Callable[[str], bool] | None = None) -> dict[str, dict[str, str]]:
    """Each topic's own config overrides (not the broker's defaults), those ``keep`` accepts."""
    if not topics:
        return {}
    result = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    out: dict[str, dict[str, str]] = {}
    for response in result:
        for resource in response.resources:
            code, name, entries = resource[0], resource[3], resource[4]
            if code:
                continue
            configs: dict[str, str] = {}
            for entry in entries:
                key, value = entry[0], entry[1]
                source = entry[3] if len(entry) > 5 else (_DYNAMIC_TOPIC_CONFIG if entry[3] is False else 5)
                if value is None or source != _DYNAMIC_TOPIC_CONFIG:
                    continue
                if keep is not None and not keep(key):
                    continue
                configs[key] = str(value)
            out[name] = configs
    return out
