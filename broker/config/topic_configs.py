"""Kafka's topic configs: one table of every key of Kafka 3.9's ``LogConfig`` with its type, default,
validator and broker synonyms, and the parsing and validation that speak Kafka's error texts.

``TopicConfig`` (broker_config.py) is the typed holder built from this table; DescribeConfigs
(apis/configs.py) reads the types, synonyms and documentation here; BROKER_CONFIGS.md lists which
keys the broker honours and which it accepts only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidConfig

__all__ = [
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "Synonym",
    "TopicConfigDef",
    "config_error",
    "parse_topic_value",
    "to_kafka_string",
    "validate_topic_values",
]

LONG_MAX = 2**63 - 1
INT_MIN, INT_MAX, LONG_MIN = -(2**31), 2**31 - 1, -(2**63)
# ConfigType numbers of DescribeConfigs v3+ (DescribeConfigsResponse.ConfigType)
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
                "PASSWORD": 9}

Validator = Callable[[str, Any], None]  # (name, parsed value) -> raises BrokerError(INVALID_CONFIG)


def config_error(name: str, value: Any, message: str) -> InvalidConfig:
    """Kafka's ``ConfigException(name, value, message)``: INVALID_CONFIG with its text."""
    return InvalidConfig(f"Invalid value {_java_str(value)} for configuration {name}: {message}")


def _java_str(value: Any) -> str:
    """A value as Java's ``toString`` prints it (lists as ``[a, b]``, booleans lower case)."""
    if isinstance(value, list):
        return "[" + ", ".join(_java_str(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- validators (ConfigDef.Range, ValidString, ValidList and Kafka's custom ones) -------------------


def at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise config_error(name, value, f"Value must be at least {minimum}")
    return check


def between(minimum: int | float, maximum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise config_error(name, value, f"Value must be at least {minimum}")
        if value > maximum:
            raise config_error(name, value, f"Value must be no more than {maximum}")
    return check


def one_of(*valid: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in valid:
            raise config_error(name, value, "String must be one of: " + ", ".join(valid))
    return check


def list_of(*valid: str) -> Validator:
    """Kafka 4.x's ``ValidList.in``: every element valid, none empty, none twice; the empty list is allowed."""
    element = one_of(*valid)

    def check(name: str, value: Any) -> None:
        if any(not v for v in value):
            raise InvalidConfig(f"Configuration '{name}' values must not be empty.")
        if len(set(value)) != len(value):
            raise InvalidConfig(f"Configuration '{name}' values must not be duplicated.")
        for v in value:
            element(name, v)
    return check


def _gzip_level(name: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise config_error(name, value, "Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: Any) -> None:
    proposed = [v.strip() for v in value]
    if not (all(_REPLICA.fullmatch(v) for v in proposed) or "".join(proposed) == "*"):
        raise config_error(name, value, f"{name} must be the literal '*' or a list of replicas in the following "
                                        "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _metadata_versions() -> set[str]:
    """The names ``MetadataVersion.fromVersionString`` knows in 3.9: each IBP (``0.10.0-IV0``,
    ``3.0-IV1``) and each production release (``0.10.0``, ``3.9``)."""
    ibps = ("0_8_0 0_8_1 0_8_2 0_9_0 0_10_0_IV0 0_10_0_IV1 0_10_1_IV0 0_10_1_IV1 0_10_1_IV2 0_10_2_IV0 0_11_0_IV0 "
            "0_11_0_IV1 0_11_0_IV2 1_0_IV0 1_1_IV0 2_0_IV0 2_0_IV1 2_1_IV0 2_1_IV1 2_1_IV2 2_2_IV0 2_2_IV1 2_3_IV0 "
            "2_3_IV1 2_4_IV0 2_4_IV1 2_5_IV0 2_6_IV0 2_7_IV0 2_7_IV1 2_7_IV2 2_8_IV0 2_8_IV1 3_0_IV0 3_0_IV1 3_1_IV0 "
            "3_2_IV0 3_3_IV0 3_3_IV1 3_3_IV2 3_3_IV3 3_4_IV0 3_5_IV0 3_5_IV1 3_5_IV2 3_6_IV0 3_6_IV1 3_6_IV2 3_7_IV0 "
            "3_7_IV1 3_7_IV2 3_7_IV3 3_7_IV4 3_8_IV0 3_9_IV0 4_0_IV0 4_0_IV1").split()
    names = set()
    for ibp in ibps:
        parts = ibp.split("_")
        iv = parts.pop() if parts[-1].startswith("IV") else None
        release = ".".join(parts)
        names.add(release + (f"-{iv}" if iv else ""))
        if not release.startswith("4."):  # 4.0 is not a production release in 3.9
            names.add(release)
    return names


_METADATA_VERSIONS = _metadata_versions()


def _metadata_version(name: str, value: Any) -> None:
    segments = value.split(".")
    key = value if (3 if value.startswith("0.") else 2) >= len(segments) else \
        ".".join(segments[: 3 if value.startswith("0.") else 2])
    if key not in _METADATA_VERSIONS:
        raise config_error(name, value, f"Version {value} is not a valid version")


# -- the table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Synonym:
    """A broker property supplying a topic config's default; ``factor`` converts its unit to the topic's."""

    name: str
    factor: int = 1


HOURS, MINUTES = 3_600_000, 60_000


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: str  # ConfigDef.Type: BOOLEAN, STRING, SHORT, INT, LONG, DOUBLE, LIST
    default: str  # as DescribeConfigs prints it
    validator: Validator | None
    synonyms: tuple[Synonym, ...]  # broker properties, Kafka's priority order (first set wins)
    honoured: bool  # False: accepted, stored and described, with no effect on this broker

    @property
    def default_value(self) -> Any:
        """Kafka's default as TopicConfig holds it (a LIST as its text)."""
        value = parse_topic_value(self, self.default)
        return self.default if self.type == "LIST" else value

    @property
    def config_type(self) -> int:
        return CONFIG_TYPES[self.type]

    @property
    def documentation(self) -> str:
        return DOCS[self.name]


def _def(name: str, type_: str, default: str, validator: Validator | None, *synonyms: str | Synonym,
         honoured: bool = True) -> TopicConfigDef:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return TopicConfigDef(name, type_, default, validator, syns, honoured)


_L = str(LONG_MAX)
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # BrokerCompressionType order

# Kafka 3.9 LogConfig.CONFIG, in its definition order; synonyms from ServerTopicConfigSynonyms.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _def("segment.bytes", "INT", "1073741824", at_least(14), "log.segment.bytes"),
    _def("segment.ms", "LONG", "604800000", at_least(1), "log.roll.ms", Synonym("log.roll.hours", HOURS)),
    _def("segment.jitter.ms", "LONG", "0", at_least(0), "log.roll.jitter.ms", Synonym("log.roll.jitter.hours", HOURS)),
    _def("segment.index.bytes", "INT", "10485760", at_least(4), "log.index.size.max.bytes"),
    _def("flush.messages", "LONG", _L, at_least(1), "log.flush.interval.messages"),
    _def("flush.ms", "LONG", _L, at_least(0), "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _def("retention.bytes", "LONG", "-1", None, "log.retention.bytes"),
    _def("retention.ms", "LONG", "604800000", at_least(-1), "log.retention.ms",
         Synonym("log.retention.minutes", MINUTES), Synonym("log.retention.hours", HOURS)),
    _def("max.message.bytes", "INT", "1048588", at_least(0), "message.max.bytes"),
    _def("index.interval.bytes", "INT", "4096", at_least(0), "log.index.interval.bytes"),
    _def("delete.retention.ms", "LONG", "86400000", at_least(0), "log.cleaner.delete.retention.ms"),
    _def("min.compaction.lag.ms", "LONG", "0", at_least(0), "log.cleaner.min.compaction.lag.ms"),
    _def("max.compaction.lag.ms", "LONG", _L, at_least(1), "log.cleaner.max.compaction.lag.ms"),
    _def("file.delete.delay.ms", "LONG", "60000", at_least(0), "log.segment.delete.delay.ms"),
    _def("min.cleanable.dirty.ratio", "DOUBLE", "0.5", between(0, 1), "log.cleaner.min.cleanable.ratio"),
    _def("cleanup.policy", "LIST", "delete", list_of("compact", "delete"), "log.cleanup.policy"),
    _def("unclean.leader.election.enable", "BOOLEAN", "false", None, "unclean.leader.election.enable",
         honoured=False),
    _def("min.insync.replicas", "INT", "1", at_least(1), "min.insync.replicas"),
    _def("compression.type", "STRING", "producer", one_of(*_COMPRESSION_TYPES), "compression.type",
         honoured=False),
    _def("compression.gzip.level", "INT", "-1", _gzip_level, "compression.gzip.level", honoured=False),
    _def("compression.lz4.level", "INT", "9", between(1, 17), "compression.lz4.level", honoured=False),
    _def("compression.zstd.level", "INT", "3", between(-131072, 22), "compression.zstd.level", honoured=False),
    _def("preallocate", "BOOLEAN", "false", None, "log.preallocate", honoured=False),
    _def("message.format.version", "STRING", "3.0-IV1", _metadata_version, "log.message.format.version",
         honoured=False),
    _def("message.timestamp.type", "STRING", "CreateTime", one_of("CreateTime", "LogAppendTime"),
         "log.message.timestamp.type"),
    _def("message.timestamp.difference.max.ms", "LONG", _L, at_least(0), "log.message.timestamp.difference.max.ms"),
    _def("message.timestamp.before.max.ms", "LONG", _L, at_least(0), "log.message.timestamp.before.max.ms"),
    _def("message.timestamp.after.max.ms", "LONG", _L, at_least(0), "log.message.timestamp.after.max.ms"),
    _def("leader.replication.throttled.replicas", "LIST", "", _throttled_replicas, honoured=False),
    _def("follower.replication.throttled.replicas", "LIST", "", _throttled_replicas, honoured=False),
    _def("message.downconversion.enable", "BOOLEAN", "true", None, "log.message.downconversion.enable",
         honoured=False),
    _def("remote.storage.enable", "BOOLEAN", "false", None),
    _def("local.retention.ms", "LONG", "-2", at_least(-2), "log.local.retention.ms", honoured=False),
    _def("local.retention.bytes", "LONG", "-2", at_least(-2), "log.local.retention.bytes", honoured=False),
    _def("remote.log.copy.disable", "BOOLEAN", "false", None, honoured=False),
    _def("remote.log.delete.on.disable", "BOOLEAN", "false", None, honoured=False),
)}


# -- parsing (ConfigDef.parseType) and printing (ConfigDef.convertToString) ------------------------

_COMMA = re.compile(r"\s*,\s*")


def _parse_int(d: TopicConfigDef, text: str, low: int, high: int) -> int:
    trimmed = text.strip()
    # Java's parseInt/parseLong: an optional sign and decimal digits, within range.
    if not re.fullmatch(r"[+-]?[0-9]+", trimmed) or not low <= int(trimmed) <= high:
        raise config_error(d.name, text, f"Not a number of type {d.type}")
    return int(trimmed)


def parse_topic_value(d: TopicConfigDef, text: str) -> Any:
    """``text`` as Kafka's ConfigDef parses a value of ``d``'s type (not yet validated)."""
    if d.type == "BOOLEAN":
        trimmed = text.strip().lower()
        if trimmed not in ("true", "false"):
            raise config_error(d.name, text, "Expected value to be either true or false")
        return trimmed == "true"
    if d.type == "SHORT":
        return _parse_int(d, text, -(2**15), 2**15 - 1)
    if d.type == "INT":
        return _parse_int(d, text, INT_MIN, INT_MAX)
    if d.type == "LONG":
        return _parse_int(d, text, LONG_MIN, LONG_MAX)
    if d.type == "DOUBLE":
        try:
            value = float(text.strip())
        except ValueError:
            raise config_error(d.name, text, f"Not a number of type {d.type}") from None
        return value
    if d.type == "LIST":
        trimmed = text.strip()
        return _COMMA.split(trimmed) if trimmed else []
    return text.strip()


def to_kafka_string(d: TopicConfigDef, value: Any) -> str:
    """A parsed value as DescribeConfigs prints it (lists joined by commas, booleans lower case)."""
    if d.type == "LIST":
        return ",".join(value) if isinstance(value, list) else str(value)
    if d.type == "BOOLEAN":
        return "true" if value else "false"
    if d.type == "DOUBLE":
        return repr(float(value))
    return str(value)


def parse_and_validate(name: str, text: str) -> Any:
    """One override, checked as Kafka checks it; BrokerError(INVALID_CONFIG) in Kafka's words."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    value = parse_topic_value(d, text)
    if d.validator is not None:
        d.validator(name, value)
    return value


def check_names(names: Iterable[str]) -> None:
    for name in names:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")


def validate_topic_values(values: dict[str, Any]) -> None:
    """Kafka's checks across keys (LogConfig.validateValues and the remote-storage checks), on the
    effective values by Kafka name."""
    low, high = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if low > high:
        raise InvalidConfig("conflict topic config setting min.compaction.lag.ms "
                            f"({low}) > max.compaction.lag.ms ({high})")
    if values["remote.storage.enable"]:  # this broker has no tiered storage (remote.log.storage.system.enable)
        raise InvalidConfig("Tiered Storage functionality is disabled in the broker. "
                            "Topic cannot be configured with remote log storage.")


# Kafka 3.9's documentation of each topic config (TopicConfig.java, QuotaConfigs.java), as DescribeConfigs v3+
# returns it when asked.
DOCS: dict[str, str] = {
    'cleanup.policy': (
        'This config designates the retention policy to use on log segments. The "delete" policy (which '
        'is the default) will discard old segments when their retention time or size limit has been '
        'reached. The "compact" policy will enable <a href="#compaction">log compaction</a>, which '
        'retains the latest value for each key. It is also possible to specify both policies in a '
        'comma-separated list (e.g. "delete,compact"). In this case, old segments will be discarded per '
        'the retention time and size configuration, while retained segments will be compacted.'
    ),
    'compression.type': (
        'Specify the final compression type for a given topic. This configuration accepts the standard '
        "compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' "
        "which is equivalent to no compression; and 'producer' which means retain the original "
        'compression codec set by the producer.'
    ),
    'compression.gzip.level': (
        'The compression level to use if compression.type is set to <code>gzip</code>.'
    ),
    'compression.lz4.level': (
        'The compression level to use if compression.type is set to <code>lz4</code>.'
    ),
    'compression.zstd.level': (
        'The compression level to use if compression.type is set to <code>zstd</code>.'
    ),
    'delete.retention.ms': (
        'The amount of time to retain delete tombstone markers for <a href="#compaction">log '
        'compacted</a> topics. This setting also gives a bound on the time in which a consumer must '
        'complete a read if they begin from offset 0 to ensure that they get a valid snapshot of the '
        'final stage (otherwise delete tombstones may be collected before they complete their scan).'
    ),
    'file.delete.delay.ms': (
        'The time to wait before deleting a file from the filesystem'
    ),
    'flush.messages': (
        'This setting allows specifying an interval at which we will force an fsync of data written to '
        'the log. For example if this was set to 1 we would fsync after every message; if it were 5 we '
        'would fsync after every five messages. In general we recommend you not set this and use '
        "replication for durability and allow the operating system's background flush capabilities as it "
        'is more efficient. This setting can be overridden on a per-topic basis (see <a '
        'href="#topicconfigs">the per-topic configuration section</a>).'
    ),
    'flush.ms': (
        'This setting allows specifying a time interval at which we will force an fsync of data written '
        'to the log. For example if this was set to 1000 we would fsync after 1000 ms had passed. In '
        'general we recommend you not set this and use replication for durability and allow the '
        "operating system's background flush capabilities as it is more efficient."
    ),
    'follower.replication.throttled.replicas': (
        'A list of replicas for which log replication should be throttled on the follower side. The list '
        'should describe a set of replicas in the form '
        "[PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be "
        'used to throttle all replicas for this topic.'
    ),
    'index.interval.bytes': (
        'This setting controls how frequently Kafka adds an index entry to its offset index. The default '
        'setting ensures that we index a message roughly every 4096 bytes. More indexing allows reads to '
        "jump closer to the exact position in the log but makes the index larger. You probably don't "
        'need to change this.'
    ),
    'leader.replication.throttled.replicas': (
        'A list of replicas for which log replication should be throttled on the leader side. The list '
        'should describe a set of replicas in the form '
        "[PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be "
        'used to throttle all replicas for this topic.'
    ),
    'local.retention.bytes': (
        'The maximum size of local log segments that can grow for a partition before it deletes the old '
        'segments. Default value is -2, it represents `retention.bytes` value to be used. The effective '
        'value should always be less than or equal to `retention.bytes` value.'
    ),
    'local.retention.ms': (
        'The number of milliseconds to keep the local log segment before it gets deleted. Default value '
        'is -2, it represents `retention.ms` value is to be used. The effective value should always be '
        'less than or equal to `retention.ms` value.'
    ),
    'max.compaction.lag.ms': (
        'The maximum time a message will remain ineligible for compaction in the log. Only applicable '
        'for logs that are being compacted.'
    ),
    'max.message.bytes': (
        'The largest record batch size allowed by Kafka (after compression if compression is enabled). '
        "If this is increased and there are consumers older than 0.10.2, the consumers' fetch size must "
        'also be increased so that they can fetch record batches this large. In the latest message '
        'format version, records are always grouped into batches for efficiency. In previous message '
        'format versions, uncompressed records are not grouped into batches and this limit only applies '
        'to a single record in that case.'
    ),
    'message.downconversion.enable': (
        'This configuration controls whether down-conversion of message formats is enabled to satisfy '
        'consume requests. When set to <code>false</code>, broker will not perform down-conversion for '
        'consumers expecting an older message format. The broker responds with '
        '<code>UNSUPPORTED_VERSION</code> error for consume requests from such older clients. This '
        'configurationdoes not apply to any message format conversion that might be required for '
        'replication to followers.'
    ),
    'message.format.version': (
        '[DEPRECATED] Specify the message format version the broker will use to append messages to the '
        'logs. The value of this config is always assumed to be `3.0` if `inter.broker.protocol.version` '
        'is 3.0 or higher (the actual config value is ignored). Otherwise, the value should be a valid '
        'ApiVersion. Some examples are: 0.10.0, 1.1, 2.8, 3.0. By setting a particular message format '
        'version, the user is certifying that all the existing messages on disk are smaller or equal '
        'than the specified version. Setting this value incorrectly will cause consumers with older '
        "versions to break as they will receive messages with a format that they don't understand."
    ),
    'message.timestamp.after.max.ms': (
        'This configuration sets the allowable timestamp difference between the message timestamp and '
        "the broker's timestamp. The message timestamp can be later than or equal to the broker's "
        'timestamp, with the maximum allowable difference determined by the value set in this '
        'configuration. If message.timestamp.type=CreateTime, the message will be rejected if the '
        'difference in timestamps exceeds this specified threshold. This configuration is ignored if '
        'message.timestamp.type=LogAppendTime.'
    ),
    'message.timestamp.before.max.ms': (
        "This configuration sets the allowable timestamp difference between the broker's timestamp and "
        "the message timestamp. The message timestamp can be earlier than or equal to the broker's "
        'timestamp, with the maximum allowable difference determined by the value set in this '
        'configuration. If message.timestamp.type=CreateTime, the message will be rejected if the '
        'difference in timestamps exceeds this specified threshold. This configuration is ignored if '
        'message.timestamp.type=LogAppendTime.'
    ),
    'message.timestamp.difference.max.ms': (
        '[DEPRECATED] The maximum difference allowed between the timestamp when a broker receives a '
        'message and the timestamp specified in the message. If message.timestamp.type=CreateTime, a '
        'message will be rejected if the difference in timestamp exceeds this threshold. This '
        'configuration is ignored if message.timestamp.type=LogAppendTime.'
    ),
    'message.timestamp.type': (
        'Define whether the timestamp in the message is message create time or log append time. The '
        'value should be either `CreateTime` or `LogAppendTime`'
    ),
    'min.cleanable.dirty.ratio': (
        'This configuration controls how frequently the log compactor will attempt to clean the log '
        '(assuming <a href="#compaction">log compaction</a> is enabled). By default we will avoid '
        'cleaning a log where more than 50% of the log has been compacted. This ratio bounds the maximum '
        'space wasted in the log by duplicates (at 50% at most 50% of the log could be duplicates). A '
        'higher ratio will mean fewer, more efficient cleanings but will mean more wasted space in the '
        'log. If the max.compaction.lag.ms or the min.compaction.lag.ms configurations are also '
        'specified, then the log compactor considers the log to be eligible for compaction as soon as '
        'either: (i) the dirty ratio threshold has been met and the log has had dirty (uncompacted) '
        'records for at least the min.compaction.lag.ms duration, or (ii) if the log has had dirty '
        '(uncompacted) records for at most the max.compaction.lag.ms period.'
    ),
    'min.compaction.lag.ms': (
        'The minimum time a message will remain uncompacted in the log. Only applicable for logs that '
        'are being compacted.'
    ),
    'min.insync.replicas': (
        'When a producer sets acks to "all" (or "-1"), this configuration specifies the minimum number '
        'of replicas that must acknowledge a write for the write to be considered successful. If this '
        'minimum cannot be met, then the producer will raise an exception (either NotEnoughReplicas or '
        'NotEnoughReplicasAfterAppend).<br>When used together, <code>min.insync.replicas</code> and '
        '<code>acks</code> allow you to enforce greater durability guarantees. A typical scenario would '
        'be to create a topic with a replication factor of 3, set <code>min.insync.replicas</code> to 2, '
        'and produce with <code>acks</code> of "all". This will ensure that the producer raises an '
        'exception if a majority of replicas do not receive a write.'
    ),
    'preallocate': (
        'True if we should preallocate the file on disk when creating a new log segment.'
    ),
    'remote.log.copy.disable': (
        'Determines whether tiered data for a topic should become read only, and no more data uploading '
        'on a topic. Once this config is set to true, the local retention configuration (i.e. '
        'local.retention.ms/bytes) becomes irrelevant, and all data expiration follows the topic-wide '
        'retention configuration(i.e. retention.ms/bytes).'
    ),
    'remote.log.delete.on.disable': (
        'Determines whether tiered data for a topic should be deleted after tiered storage is disabled '
        'on a topic. This configuration should be enabled when trying to set `remote.storage.enable` '
        'from true to false'
    ),
    'remote.storage.enable': (
        'To enable tiered storage for a topic, set this configuration as true. You can not disable this '
        'config once it is enabled. It will be provided in future versions.'
    ),
    'retention.bytes': (
        'This configuration controls the maximum size a partition (which consists of log segments) can '
        'grow to before we will discard old log segments to free up space if we are using the "delete" '
        'retention policy. By default there is no size limit only a time limit. Since this limit is '
        'enforced at the partition level, multiply it by the number of partitions to compute the topic '
        'retention in bytes. Additionally, retention.bytes configuration operates independently of '
        '"segment.ms" and "segment.bytes" configurations. Moreover, it triggers the rolling of new '
        'segment if the retention.bytes is configured to zero.'
    ),
    'retention.ms': (
        'This configuration controls the maximum time we will retain a log before we will discard old '
        'log segments to free up space if we are using the "delete" retention policy. This represents an '
        'SLA on how soon consumers must read their data. If set to -1, no time limit is applied. '
        'Additionally, retention.ms configuration operates independently of "segment.ms" and '
        '"segment.bytes" configurations. Moreover, it triggers the rolling of new segment if the '
        'retention.ms condition is satisfied.'
    ),
    'segment.bytes': (
        'This configuration controls the segment file size for the log. Retention and cleaning is always '
        'done a file at a time so a larger segment size means fewer files but less granular control over '
        'retention.'
    ),
    'segment.index.bytes': (
        'This configuration controls the size of the index that maps offsets to file positions. We '
        'preallocate this index file and shrink it only after log rolls. You generally should not need '
        'to change this setting.'
    ),
    'segment.jitter.ms': (
        'The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering '
        'herds of segment rolling'
    ),
    'segment.ms': (
        'This configuration controls the period of time after which Kafka will force the log to roll '
        "even if the segment file isn't full to ensure that retention can delete or compact old data."
    ),
    'unclean.leader.election.enable': (
        'Indicates whether to enable replicas not in the ISR set to be elected as leader as a last '
        'resort, even though doing so may result in data loss.<p>Note: In KRaft mode, when enabling this '
        'config dynamically, it needs to wait for the unclean leader electionthread to trigger election '
        'periodically (default is 5 minutes). Please run `kafka-leader-election.sh` with `unclean` '
        'option to trigger the unclean leader election immediately if needed.</p>'
    ),
}
