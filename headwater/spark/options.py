"""The source's options, named and checked as Spark's Kafka source names and checks them.

Parsed once on the driver into a frozen, picklable ``SourceOptions`` that travels with the data
source to Spark's Python workers. Every error names the option at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from headwater.kafka.client_security import client_security, is_security_key

from .errors import SparkSourceError

__all__ = ["OffsetSpec", "OptionError", "SourceOptions", "parse_offsets_json", "parse_options"]

# "earliest", "latest", or {topic: {partition: offset}} where -2 means earliest and -1 latest.
OffsetSpec = str | dict[str, dict[int, int]]

STRATEGIES = ("subscribe", "subscribePattern", "assign")

# kafka.* settings that only make sense for a consumer Spark would manage (Spark refuses them too).
_REFUSED_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead",
    "enable.auto.commit": "offsets are tracked in the query's checkpoint, never committed to Kafka",
    "key.deserializer": "keys are always binary; cast or decode them with DataFrame operations",
    "value.deserializer": "values are always binary; cast or decode them with DataFrame operations",
    "interceptor.classes": "there is no Java consumer to intercept",
}
# Options of Spark's Kafka source that change what is read and are not implemented here: refused
# rather than ignored, so that a job moved from format("kafka") never silently reads other records.
_UNSUPPORTED = ("startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
                "startingOffsetsByTimestampStrategy", "minOffsetsPerTrigger", "maxTriggerDelay", "maxBytesPerTrigger")


class OptionError(SparkSourceError, ValueError):
    """An option of the ``headwater`` source that is missing, contradictory or malformed."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    strategy: str  # one of STRATEGIES
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str = ""  # subscribePattern
    assign: tuple[tuple[str, tuple[int, ...]], ...] = ()  # assign: (topic, partitions)
    starting: OffsetSpec | None = None  # None: the default (batch: earliest, streaming: latest)
    ending: OffsetSpec | None = None  # batch only; None: latest
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    include_headers: bool = False
    read_committed: bool = False
    fail_on_data_loss: bool = True
    client_id: str = "headwater-spark"
    security: tuple[tuple[str, str], ...] = ()  # Kafka's security keys (security.protocol, sasl.*, ssl.*)
    timeout_s: float = 120.0
    fetch_max_bytes: int = 8 << 20
    retries: int = 3
    retry_backoff_s: float = 0.01

    @property
    def description(self) -> str:
        if self.strategy == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.strategy == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={dict((t, list(p)) for t, p in self.assign)}"


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check and parse the options given to ``spark.read(Stream).format("headwater")``."""
    opts = {k.lower(): v for k, v in options.items() if k.lower() != "path"}
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option 'kafka.bootstrap.servers' must be set (host:port of one or more brokers)")
    given = [s for s in STRATEGIES if s.lower() in opts]
    if not given:
        raise OptionError("one of the options 'subscribe', 'subscribePattern' or 'assign' must be set to say "
                          "which topics to read")
    if len(given) > 1:
        raise OptionError(f"only one of the options 'subscribe', 'subscribePattern' and 'assign' may be set; "
                          f"got {', '.join(repr(s) for s in given)}")
    for name in _UNSUPPORTED:
        if name.lower() in opts:
            raise OptionError(f"option '{name}' of Spark's Kafka source is not supported by the headwater source")
    for key, why in _REFUSED_KAFKA.items():
        if f"kafka.{key}" in opts:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {why}")
    # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*: Kafka's client keys, checked here on the driver
    security = tuple(sorted((k[len("kafka."):], v) for k, v in opts.items()
                            if k.startswith("kafka.") and is_security_key(k[len("kafka."):])))
    try:
        client_security(dict(security))
    except ValueError as exc:
        raise OptionError(f"option 'kafka.{exc}") from None
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                          f"not {isolation!r}")

    strategy = given[0]
    fields: dict = {}
    raw = opts[strategy.lower()]
    if strategy == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"option 'subscribe' names no topic: {raw!r}")
        fields["topics"] = topics
    elif strategy == "subscribePattern":
        if not raw.strip():
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        fields["pattern"] = raw
    else:
        fields["assign"] = _parse_assign(raw)

    max_offsets = _positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_partitions = _positive_int(opts, "minpartitions", "minPartitions")
    fetch_bytes = _positive_int(opts, "kafka.max.partition.fetch.bytes", "kafka.max.partition.fetch.bytes")
    poll_ms = _positive_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
    retries = _positive_int(opts, "fetchoffset.numretries", "fetchOffset.numRetries", allow_zero=True)
    backoff_ms = _positive_int(opts, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", allow_zero=True)
    return SourceOptions(
        bootstrap=bootstrap,
        strategy=strategy,
        starting=_offset_spec(opts, "startingoffsets", "startingOffsets"),
        ending=_offset_spec(opts, "endingoffsets", "endingOffsets"),
        max_offsets_per_trigger=max_offsets,
        min_partitions=min_partitions,
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        read_committed=isolation == "read_committed",
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        client_id=opts.get("kafka.client.id", "headwater-spark"),
        security=security,
        timeout_s=(poll_ms or 120_000) / 1000,
        fetch_max_bytes=fetch_bytes or 8 << 20,
        retries=3 if retries is None else retries,
        retry_backoff_s=(10 if backoff_ms is None else backoff_ms) / 1000,
        **fields,
    )


def _parse_assign(raw: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise OptionError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}: {exc}") from None
    if not isinstance(value, dict) or not value or not all(
            isinstance(t, str) and isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps)
            for t, ps in value.items()):
        raise OptionError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}} naming at least one topic, "
                          f"got {raw!r}")
    return tuple((t, tuple(sorted(set(ps)))) for t, ps in sorted(value.items()))


def parse_offsets_json(raw: str, option: str) -> dict[str, dict[int, int]]:
    """``{"topicA":{"0":23,"1":-2}}`` into {topic: {partition: offset}}."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise OptionError(f"option '{option}' must be 'earliest', 'latest' or JSON like "
                          f"{{\"topicA\":{{\"0\":23,\"1\":-2}}}}: {exc}") from None
    out: dict[str, dict[int, int]] = {}
    if isinstance(value, dict):
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                break
            try:
                out[topic] = {int(p): int(o) for p, o in parts.items() if type(o) is int}
            except ValueError:
                break
            if len(out[topic]) != len(parts) or any(p < 0 or o < -2 for p, o in out[topic].items()):
                break
        else:
            return out
    raise OptionError(f"option '{option}' must be 'earliest', 'latest' or JSON like "
                      f"{{\"topicA\":{{\"0\":23,\"1\":-2}}}} (-2 = earliest, -1 = latest), got {raw!r}")


def _offset_spec(opts: dict[str, str], key: str, option: str) -> OffsetSpec | None:
    raw = opts.get(key)
    if raw is None:
        return None
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return word
    return parse_offsets_json(raw, option)


def _positive_int(opts: dict[str, str], key: str, option: str, allow_zero: bool = False) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and not allow_zero):
        raise OptionError(f"option '{option}' must be a {'non-negative' if allow_zero else 'positive'} integer, "
                          f"got {raw!r}")
    return value


def _bool(opts: dict[str, str], key: str, option: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f"option '{option}' must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"
