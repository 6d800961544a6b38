"""The markers `make check` leaves out, applied by tests/conftest.py at collection.

``spark``, ``postgres``, ``browser``: what a test needs beyond the broker and Python, known from a
fixture it uses that starts it, or from the module or folder whose tests start it themselves (a
worker process's Spark session, a PostgreSQL server of their own).

``slow``: a test of more than about 10 s is marked by hand; besides, every integration module but the
quick ones below is slow as a whole: its tests start processes of their own (``headwater up``,
distributed workers, a second cluster, a broker killed and restarted), several seconds each on a
loaded machine. The quick modules talk to the session broker with real clients and take a few seconds
each in all; together with the unit tests they keep `make check` under 3 minutes on a shared 2-core
machine. A new integration module is slow until it is shown to be quick.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["needs"]

TESTS = Path(__file__).resolve().parents[1]
BY_FIXTURE = {"spark": "spark", "postgres": "postgres"}
BY_MODULE = {"spark": {"test_spark_sink.py", "test_spark_lake_faults.py", "test_spark_cdc.py",
                       "test_spark_source.py"},
             "postgres": {"test_postgres_errors.py", "test_postgres_tls.py", "test_connect_secrets.py",
                          "test_console_secrets.py"}}
BY_FOLDER = {"browser": TESTS / "browser"}
INTEGRATION = TESTS / "integration"
QUICK_INTEGRATION = {"test_access_fast_path.py", "test_acls.py", "test_admin.py", "test_aiokafka_adapter.py",
                     "test_bad_input.py", "test_broker_configs.py", "test_fuzz.py", "test_quotas.py",
                     "test_record_errors.py", "test_record_fetcher.py", "test_topic_configs.py"}


def needs(fixtures: Iterable[str], path: Path) -> set[str]:
    """The markers of a test in ``path`` that uses ``fixtures`` (directly or through other fixtures)."""
    used = set(fixtures)
    found = {marker for marker, fixture in BY_FIXTURE.items() if fixture in used}
    found |= {marker for marker, modules in BY_MODULE.items() if path.name in modules}
    found |= {marker for marker, folder in BY_FOLDER.items() if folder in path.parents}
    if path.parent == INTEGRATION and path.name not in QUICK_INTEGRATION:
        found.add("slow")
    return found
