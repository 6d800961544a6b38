import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from brokerproc import BrokerProcess  # noqa: E402


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


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server (wal_level=logical) for the session; tests use databases of their own."""
    from pgserver import start_postgres

    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (UI off) for the test process; the Spark sink tasks run in-process share it."""
    from headwater.connectors.spark.session import shared_session, stop_shared_session

    session = shared_session("local[2]", {"spark.driver.memory": "2g"})
    yield session
    stop_shared_session()
