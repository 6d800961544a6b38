"""The pytest plugin (entry point ``pytest11``): the kit's fixtures, loaded in every pytest session of
an environment where Headwater is installed. Nothing is imported or started until a test asks for a
fixture, so sessions that do not use them pay nothing.

- ``headwater_broker`` (session): an embedded broker on a free loopback port, data in a temporary folder.
- ``headwater_worker`` (module): a Connect worker on it with its REST API on a free port, a group and
  internal topics of its own, and the plugins of ``headwater_plugins``.
- ``headwater_connect`` (function): a REST client of that worker; connectors created through it are
  deleted after the test.
- ``headwater_plugins`` / ``headwater_worker_settings`` (module): override them to give the worker plugin
  modules (default: the ``headwater_plugins`` ini option) or worker properties.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .broker import EmbeddedBroker
    from .rest import ConnectClient
    from .worker import EmbeddedWorker


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("headwater_plugins", type="linelist", default=[],
                  help="modules holding Headwater plugin hooks that the headwater_worker fixture registers "
                       "(plugins installed through the 'headwater' entry point group are found anyway)")


class LeftRunningWarning(UserWarning):
    """A fixture found something of its still running after it stopped (a UserWarning, so that it shows:
    Python hides ResourceWarnings unless asked)."""


def _leaked(what: str, leftover: list[str]) -> None:
    if leftover:
        warnings.warn(f"{what} left running after it stopped: {leftover}", LeftRunningWarning, stacklevel=2)


@pytest.fixture(scope="session")
def headwater_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A real broker for the whole session on ``127.0.0.1``; tests use topics of their own
    (``headwater_broker.create_topic()`` makes a unique one)."""
    from .broker import EmbeddedBroker

    broker = EmbeddedBroker(tmp_path_factory.mktemp("headwater-broker")).start()
    yield broker
    _leaked("the headwater_broker fixture", broker.stop())


@pytest.fixture(scope="module")
def headwater_plugins(pytestconfig: pytest.Config) -> list[ModuleType | str]:
    """Plugin modules (or dotted names) for ``headwater_worker``: the ``headwater_plugins`` ini option."""
    return list(pytestconfig.getini("headwater_plugins"))


@pytest.fixture(scope="module")
def headwater_worker_settings() -> dict[str, str]:
    """Worker properties for ``headwater_worker`` on top of the kit's fast defaults."""
    return {}


@pytest.fixture(scope="module")
def headwater_worker(headwater_broker: EmbeddedBroker, headwater_plugins: list[ModuleType | str],
                     headwater_worker_settings: dict[str, str]) -> Iterator[EmbeddedWorker]:
    """A Connect worker for the test module: REST API at ``headwater_worker.url``."""
    from .worker import EmbeddedWorker

    worker = EmbeddedWorker(headwater_broker.bootstrap, headwater_plugins,
                            {**headwater_broker.client_settings, **headwater_worker_settings}).start()
    yield worker
    _leaked("the headwater_worker fixture", worker.stop())


@pytest.fixture
def headwater_connect(headwater_worker: EmbeddedWorker) -> Iterator[ConnectClient]:
    """A REST client of ``headwater_worker``; the connectors a test creates through it are deleted after it."""
    from .rest import ConnectClient

    client = ConnectClient(headwater_worker.url)
    yield client
    client.delete_created()
