"""The broker's error root: what the broker answers with a Kafka error code is a BrokerError carrying that
code, raised through the root everywhere; and no ``except Exception`` in the broker swallows an error
without a log line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.config.topic_configs import config_error
from headwater.broker.errors import BrokerError, InvalidConfig, InvalidTopic, UnknownTopicOrPartition
from headwater.broker.log import OffsetOutOfRange
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.topic import validate_topic_name
from headwater.kafka.errors import ErrorCode, KafkaError

BROKER = Path(__file__).resolve().parents[2] / "broker"


def test_each_kind_carries_its_code(tmp_path: Path) -> None:
    cluster = Cluster(BrokerConfig.model_validate({"log.dirs": str(tmp_path)}))
    cluster.load()
    try:
        with pytest.raises(UnknownTopicOrPartition) as unknown:
            cluster.partition("nowhere", 0)
        with pytest.raises(InvalidTopic) as invalid:
            validate_topic_name("a/b")
    finally:
        cluster.close()
    assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert invalid.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION and "a/b" in invalid.value.message
    bad = config_error("retention.ms", "x", "Not a number")
    assert isinstance(bad, InvalidConfig) and bad.code == ErrorCode.INVALID_CONFIG
    assert bad.message == "Invalid value x for configuration retention.ms: Not a number"
    out_of_range = OffsetOutOfRange(9, 0, 5)
    assert isinstance(out_of_range, BrokerError) and out_of_range.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # the floor's class stays their base, so what caught KafkaError still does
    assert issubclass(BrokerError, KafkaError)


def _modules() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(BROKER.rglob("*.py"))]


def test_broker_code_raises_kafka_errors_through_its_root() -> None:
    direct = [f"{path.relative_to(BROKER)}:{node.lineno}" for path, tree in _modules() for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "KafkaError"]
    assert direct == []


def _logs(body: list[ast.stmt]) -> bool:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "debug", "info", "warning", "error", "exception", "critical"):
            return True
    return False


def test_no_broad_except_swallows_without_a_log_line() -> None:
    silent = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler):
                names = [n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)] if node.type else ["(bare)"]
                if any(n in ("Exception", "BaseException", "(bare)") for n in names) and not _logs(node.body):
                    silent.append(f"{path.relative_to(BROKER)}:{node.lineno}")
            elif isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call):
                call = node.context_expr
                if (isinstance(call.func, ast.Attribute) and call.func.attr == "suppress"
                        and any(isinstance(a, ast.Name) and a.id in ("Exception", "BaseException") for a in call.args)):
                    silent.append(f"{path.relative_to(BROKER)}:{call.lineno} (suppress)")
    assert silent == []
