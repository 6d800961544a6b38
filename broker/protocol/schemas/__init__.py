"""Message classes for the Kafka APIs whose schemas kafka-python does not ship, generated (as kafka-python
generates its own) from Kafka's JSON schemas in this package, copied unchanged from Apache Kafka's
clients/src/main/resources/common/message/: ControlledShutdown (key 7), which only brokers send, to the
controller. codec.py serves them with the rest; a broker sending one builds it from here."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage, ApiMessageData

__all__ = ["ControlledShutdownRequest", "ControlledShutdownResponse"]


def _message(name: str) -> Any:
    """The class kafka-python's metaclass builds from ``<name>.json`` here (typed Any, as mypy cannot follow that
    metaclass: ``Class[version]`` and the fields are its doing)."""
    return ApiMessageData(name, (ApiMessage,), {"__module__": __name__, "__qualname__": name}, load_json=__name__)


ControlledShutdownRequest = _message("ControlledShutdownRequest")
ControlledShutdownResponse = _message("ControlledShutdownResponse")
