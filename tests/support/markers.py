"""What a test needs beyond the broker and Python, as the markers `make check` leaves out (``spark``,
``postgres``, ``browser``); tests/conftest.py applies them at collection. A test needs what a fixture it
uses starts, or what the tests of its module or folder start themselves (a worker process's Spark
session, a PostgreSQL server of their own)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["needs"]

TESTS = Path(__file__).resolve().parents[1]
BY_FIXTURE = {"spark": "spark", "postgres": "postgres"}
BY_MODULE = {"spark": {"test_spark_sink.py", "test_spark_lake_faults.py", "test_spark_cdc.py",
                       "test_spark_source.py"},
             "postgres": {"test_postgres_errors.py"}}
BY_FOLDER = {"browser": TESTS / "browser"}


def needs(fixtures: Iterable[str], path: Path) -> set[str]:
    """The markers of a test that uses ``fixtures`` (directly or through other fixtures) in ``path``."""
    used = set(fixtures)
    found = {marker for marker, fixture in BY_FIXTURE.items() if fixture in used}
    found |= {marker for marker, modules in BY_MODULE.items() if path.name in modules}
    found |= {marker for marker, folder in BY_FOLDER.items() if folder in path.parents}
    return found
