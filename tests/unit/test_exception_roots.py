"""Each room's exceptions share its root: what the connectors raise is a ``ConnectException`` (Kafka
Connect's family, in the plugin API), so that the worker and plugin code can tell a connector's error
from a bug by class, as Kafka Connect does; what the Spark source raises is a ``SparkSourceError``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from headwater.connect.api import ConnectException
from headwater.spark.errors import SparkSourceError

ROOT = Path(__file__).resolve().parents[2]


def _exceptions(folder: str, package: str, skip: tuple[str, ...] = ()) -> dict[str, type[BaseException]]:
    """Every exception class defined under ``folder`` (the package ``package``) but in its subfolders
    ``skip``, by dotted name."""
    found: dict[str, type[BaseException]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
        if parts[0] in skip:
            continue
        module = ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
        names = [node.name for node in ast.walk(ast.parse(path.read_text(), str(path)))
                 if isinstance(node, ast.ClassDef) and node.bases]
        if not names:
            continue
        loaded = importlib.import_module(module)
        for name in names:
            cls = getattr(loaded, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found[f"{module}.{name}"] = cls
    return found


def test_the_connectors_exceptions_are_connect_exceptions() -> None:
    found = _exceptions("connectors", "headwater.connectors")
    assert "headwater.connectors.postgres.pgoutput.DecodeError" in found  # the scan sees them
    assert [name for name, cls in found.items() if not issubclass(cls, ConnectException)] == []


def test_the_spark_sources_exceptions_share_its_root() -> None:
    found = _exceptions("headwater/spark", "headwater.spark")
    assert "headwater.spark.options.OptionError" in found  # the scan sees them
    assert [name for name, cls in found.items() if not issubclass(cls, SparkSourceError)] == []


# Being moved onto the family in their own changes: the runtime, the Kafka side, the herder, REST, storage
IN_FLIGHT = ("runtime", "kafka", "herder", "rest", "storage")


def test_connects_exceptions_are_connect_exceptions() -> None:
    found = _exceptions("connect", "headwater.connect", skip=IN_FLIGHT)
    assert "headwater.connect.plugins.UnknownPlugin" in found  # the scan sees them
    assert [name for name, cls in found.items() if not issubclass(cls, ConnectException)] == []
