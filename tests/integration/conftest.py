"""Fixtures of the integration suite (the ``broker`` and ``fresh_broker`` fixtures live in tests/conftest.py)."""

import pytest
from brokerproc import BrokerProcess


@pytest.fixture(scope="session")
def broker3(tmp_path_factory: pytest.TempPathFactory):
    """A session broker whose auto-created topics get 3 partitions (kcat has no admin API)."""
    base = tmp_path_factory.mktemp("broker3")
    with BrokerProcess(base / "data", "num.partitions=3") as proc:
        yield proc
