"""The broker as the front door starts it: the listener (``broker_server.py``) and ``serve`` (``main.py``)."""

from .broker_server import BrokerServer
from .main import serve

__all__ = ["BrokerServer", "serve"]
