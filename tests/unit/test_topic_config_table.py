"""Unit tests of the topic-config table (broker/topic_configs.py), the broker synonyms that supply topic
defaults, the per-record produce checks (broker/log/validator.py) and the log settings they honour:
segment.jitter.ms, max.compaction.lag.ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.broker.config.broker_config import BrokerConfig, ConfigError, TopicConfig
from headwater.broker.config.topic_configs import LONG_MAX, TOPIC_CONFIGS
from headwater.broker.log import PartitionLog
from headwater.broker.log.cleaner import clean_partition, plan_cleaning
from headwater.broker.log.validator import needs_record_checks, validate_records
from headwater.kafka.compression import LZ4, NONE
from headwater.kafka.errors import ErrorCode, KafkaError
from headwater.kafka.records import Record, build_batch, parse_header, record_summaries

T0 = 1_700_000_000_000
HOUR = 3_600_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _error(overrides: dict[str, str]) -> str:
    with pytest.raises(KafkaError) as info:
        TopicConfig().with_overrides(overrides)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    return info.value.message


def test_table_is_kafkas_log_config() -> None:
    assert len(TOPIC_CONFIGS) == 36  # Kafka 3.9's LogConfig defines 36 topic configs
    assert set(TOPIC_CONFIGS) == set(TopicConfig.keys())
    assert all(d.documentation for d in TOPIC_CONFIGS.values())
    assert TopicConfig().to_properties() == {k: d.default for k, d in TOPIC_CONFIGS.items()}


def test_values_parsed_and_refused_as_kafka_does() -> None:
    config = TopicConfig().with_overrides({"cleanup.policy": " delete , compact ", "retention.ms": " 5 ",
                                           "preallocate": "TRUE", "min.cleanable.dirty.ratio": "1"})
    props = config.to_properties()
    assert (props["cleanup.policy"], props["retention.ms"], props["preallocate"]) == ("delete,compact", "5", "true")
    assert props["min.cleanable.dirty.ratio"] == "1.0"
    assert config.compact and config.delete
    empty = TopicConfig().with_overrides({"cleanup.policy": ""})
    assert not empty.compact and not empty.delete
    assert _error({"segment.bytes": "2147483648"}) == \
        "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"
    assert _error({"retention.ms": "1.5"}) == \
        "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"
    assert _error({"x.y": "1", "retention.ms": "bad"}) == "Unknown topic config name: x.y"
    assert _error({"message.format.version": "3.9-IV9"}) == \
        "Invalid value 3.9-IV9 for configuration message.format.version: Version 3.9-IV9 is not a valid version"
    for version in ("0.10.2", "0.10.0-IV1", "2.8", "3.0-IV1", "3.9", "3.9.1", "4.0-IV0"):
        TopicConfig().with_overrides({"message.format.version": version})


def test_broker_synonyms_supply_topic_defaults() -> None:
    assert BrokerConfig().topic_defaults() == TopicConfig()
    defaults = BrokerConfig(**{"log.retention.minutes": "30", "log.retention.hours": "5", "log.roll.hours": "2",
                               "log.roll.jitter.hours": "1", "log.flush.interval.messages": "10",
                               "log.cleaner.max.compaction.lag.ms": "1000", "log.preallocate": "true",
                               "min.insync.replicas": "2"}).topic_defaults()
    assert (defaults.retention_ms, defaults.segment_ms, defaults.segment_jitter_ms) == (30 * 60_000, 2 * HOUR, HOUR)
    assert (defaults.flush_messages, defaults.max_compaction_lag_ms) == (10, 1000)
    assert (defaults.preallocate, defaults.min_insync_replicas) == (True, 2)
    # log.retention.ms wins over the minutes and hours; the scheduler period supplies flush.ms only when set.
    assert BrokerConfig(**{"log.retention.ms": "7", "log.retention.minutes": "30"}).topic_defaults().retention_ms == 7
    assert BrokerConfig().topic_defaults().flush_ms == LONG_MAX
    assert BrokerConfig(**{"log.flush.scheduler.interval.ms": "500"}).topic_defaults().flush_ms == 500
    # Earlier releases' flush.messages / flush.ms broker keys still count, after Kafka's names.
    assert BrokerConfig(**{"flush.messages": "1"}).topic_defaults().flush_messages == 1
    legacy = BrokerConfig(**{"flush.messages": "1", "log.flush.interval.messages": "3"})
    assert legacy.topic_defaults().flush_messages == 3
    with pytest.raises(ValueError, match="log.cleanup.policy: Invalid value shred for configuration cleanup.policy"):
        BrokerConfig(**{"log.cleanup.policy": "shred"})
    assert issubclass(ConfigError, ValueError)


def _checked(config: TopicConfig, records: list[Record], codec: int = NONE, now: int = T0, **kw):
    batch = build_batch(records, codec=codec, **kw)
    header = parse_header(batch)
    if not needs_record_checks(config, header):
        return None
    return validate_records(batch, header, config, "t-0", now)


def test_record_checks_only_where_needed() -> None:
    records = [Record(0, T0, None, b"v")]
    assert _checked(TopicConfig(), records) is None  # the hot path: nothing decoded
    assert not TopicConfig().checks_records
    compacted = TopicConfig(**{"cleanup.policy": "compact"})
    rejected = _checked(compacted, records + [Record(1, T0, b"k", None)], codec=LZ4)
    assert rejected is not None and rejected.code == ErrorCode.INVALID_RECORD
    assert rejected.errors == [(0, "Compacted topic cannot accept message without key in topic partition t-0")]
    bounded = TopicConfig(**{"message.timestamp.after.max.ms": HOUR})
    assert bounded.checks_records
    late = _checked(bounded, [Record(0, T0, b"k", b"v"), Record(5, T0 + 2 * HOUR, b"k", b"v")])
    assert late is not None and late.code == ErrorCode.INVALID_TIMESTAMP
    # Java long arithmetic in the message: now - Long.MAX wraps.
    low = (T0 - LONG_MAX + 2**63) % 2**64 - 2**63
    assert late.errors == [(1, f"Timestamp {T0 + 2 * HOUR} of message with offset 5 is out of range. "
                               f"The timestamp should be within [{low}, {T0 + HOUR}]")]
    # Key errors come first: a record with both problems is reported once, as a key error...
    both = TopicConfig(**{"cleanup.policy": "compact", "message.timestamp.before.max.ms": HOUR})
    mixed = _checked(both, [Record(0, T0 - 2 * HOUR, None, b"v"), Record(1, T0 - 2 * HOUR, b"k", b"v")])
    assert mixed is not None and [i for i, _ in mixed.errors] == [0, 1]
    assert mixed.errors[0][1].startswith("Compacted topic") and mixed.errors[1][1].startswith("Timestamp")
    # ... but any timestamp error makes the whole batch INVALID_TIMESTAMP.
    assert mixed.code == ErrorCode.INVALID_TIMESTAMP
    assert mixed.message == "One or more records have been rejected due to invalid timestamp"
    # LogAppendTime topics ignore the bounds.
    appended = TopicConfig(**{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": 1})
    assert not appended.checks_records


def test_record_summaries() -> None:
    batch = build_batch([Record(10, T0, b"key", b"value"), Record(12, T0 + 5, None, None)], base_offset=10)
    got = record_summaries(batch, parse_header(batch))
    assert [(r.offset, r.timestamp, r.key_size, r.value_size) for r in got] == [(10, T0, 3, 5), (12, T0 + 5, -1, -1)]


def test_segment_jitter_rolls_earlier(tmp_path: Path) -> None:
    clock = Clock()
    config = TopicConfig(**{"segment.ms": 1000, "segment.jitter.ms": 900})
    log = PartitionLog.open(tmp_path / "t-0", config, clock=clock)
    jitter = log._roll_jitter_ms
    assert 0 <= jitter < 900
    batch = build_batch([Record(0, T0, b"k", b"v")])
    log.append(bytearray(batch), parse_header(batch))
    clock.now += 1000 - jitter  # not yet past segment.ms - jitter
    log.append(bytearray(batch), parse_header(batch))
    assert len(log.segments) == 1
    clock.now += 1
    log.append(bytearray(batch), parse_header(batch))
    assert len(log.segments) == 2
    log.close()


def test_max_compaction_lag_cleans_under_the_dirty_ratio(tmp_path: Path) -> None:
    clock = Clock()
    props = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.99}
    log = PartitionLog.open(tmp_path / "t-0", TopicConfig(**props), clock=clock)
    for i in range(60):  # several segments of the same few keys: the first pass cleans them
        batch = build_batch([Record(0, T0 + i, b"k%d" % (i % 3), b"x" * 40)])
        log.append(bytearray(batch), parse_header(batch))
    assert clean_partition(log, T0 + 100) is not None
    for i in range(30):  # a little more: dirty, but far below the 0.99 ratio
        batch = build_batch([Record(0, T0 + 1000 + i, b"k%d" % (i % 3), b"y" * 40)])
        log.append(bytearray(batch), parse_header(batch))
    later = T0 + 10 * HOUR
    assert plan_cleaning(log, later) is None
    log.update_config(TopicConfig(**props, **{"max.compaction.lag.ms": HOUR}))
    plan = plan_cleaning(log, later)
    assert plan is not None and plan.dirty_ratio < 0.99
    assert plan_cleaning(log, T0 + HOUR) is None  # no dirty segment's first batch is an hour old yet
    log.close()


def test_max_compaction_lag_rolls_compacted_segments() -> None:
    """Kafka's maxSegmentMs: a compacted topic's segment rolls by max.compaction.lag.ms if sooner."""
    assert TopicConfig(**{"cleanup.policy": "compact", "max.compaction.lag.ms": 5000}).max_segment_ms == 5000
    assert TopicConfig(**{"max.compaction.lag.ms": 5000}).max_segment_ms == TopicConfig().segment_ms


def test_segment_index_bytes_rolls_a_full_index(tmp_path: Path) -> None:
    """A segment rolls once either index holds segment.index.bytes: 48 bytes is four time-index entries."""
    config = TopicConfig(**{"segment.index.bytes": 48, "index.interval.bytes": 0})
    log = PartitionLog.open(tmp_path / "t-0", config, clock=Clock())
    for i in range(11):  # every batch after a segment's first adds an entry to each index
        batch = build_batch([Record(0, T0 + i, b"k", b"v")])
        log.append(bytearray(batch), parse_header(batch))
    assert [len(s.time_index) for s in log.segments] == [4, 4, 0]
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    log.close()


def test_docs_list_every_config_as_the_table_does() -> None:
    """docs/BROKER_CONFIGS.md names each config once, "accepted only" exactly where the table says so."""
    text = (Path(__file__).parents[2] / "docs" / "BROKER_CONFIGS.md").read_text()
    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
    assert set(rows) == set(TOPIC_CONFIGS)
    assert {k for k, row in rows.items() if "accepted only" in row} == \
        {k for k, d in TOPIC_CONFIGS.items() if not d.honoured}
