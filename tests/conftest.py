import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support.brokerproc import BrokerProcess  # noqa: E402
from support.markers import needs  # noqa: E402
from support.schedule import make_scheduler, record_durations  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    record_durations(config)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadfile`` hands out the longest file first (tests/support/schedule.py)."""
    return make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in needs(getattr(item, "fixturenames", ()), item.path):
            item.add_marker(marker)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """One broker for the session; tests use their own topic names."""
    base = tmp_path_factory.mktemp("broker")
    with BrokerProcess(base / "data", "num.partitions=1") as proc:
        yield proc


@pytest.fixture
def fresh_broker(tmp_path: Path):
    """A broker of this test's own (restarted or killed by the test)."""
    proc = BrokerProcess(tmp_path / "data")
    yield proc
    proc.kill()


_postgres: list = []  # the session's PostgreSQL server, once a test asked for it


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server (wal_level=logical) for the session; tests use databases of their own."""
    from support.pgserver import start_postgres

    server = start_postgres()
    _postgres.append(server)
    yield server
    _postgres.clear()
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (UI off) for the test process; the Spark sink tasks run in-process share it."""
    from headwater.connectors.spark.session import shared_session, stop_shared_session

    # Pinned: an in-process worker stopping (the plugin kit's, a sink task's test) must not stop it
    session = shared_session("local[2]", {"spark.driver.memory": "2g"}, pin=True)
    yield session
    stop_shared_session(force=True)


@pytest.fixture(scope="module", autouse=True)
def _drop_idle_replication_slots():
    """A CDC module's connectors leave their slots behind (slot.drop.on.stop is false by default, as in
    Debezium): once the module's workers are gone its idle slots are dropped, so the session's server does
    not run out of max_replication_slots ("all replication slots are in use") or keep their WAL."""
    yield
    if _postgres:
        _postgres[0].drop_idle_slots()
