"""Headwater's kit for plugin authors: pytest fixtures and the connector conformance suite.

The fixtures (``headwater_broker``, ``headwater_worker``, ``headwater_connect``) come with the pytest
plugin this package registers; the classes below are imported on first use, so that the plugin,
loaded in every pytest session, stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .broker import EmbeddedBroker, Record
    from .conformance import CHECKS, SinkConnectorConformance, SourceConnectorConformance
    from .names import free_port, unique
    from .rest import ConnectClient, Response
    from .waiting import NOT_YET, WaitTimeout, wait_until
    from .worker import EmbeddedWorker

__all__ = ["CHECKS", "NOT_YET", "ConnectClient", "EmbeddedBroker", "EmbeddedWorker", "Record", "Response",
           "SinkConnectorConformance", "SourceConnectorConformance", "WaitTimeout", "free_port", "unique",
           "wait_until"]

_HOMES = {"EmbeddedBroker": "broker", "Record": "broker", "free_port": "names", "unique": "names",
          "CHECKS": "conformance", "SinkConnectorConformance": "conformance",
          "SourceConnectorConformance": "conformance", "ConnectClient": "rest", "Response": "rest",
          "NOT_YET": "waiting", "WaitTimeout": "waiting", "wait_until": "waiting", "EmbeddedWorker": "worker"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
