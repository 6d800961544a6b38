"""Message classes for the Kafka APIs whose schemas kafka-python does not ship, generated (as kafka-python
generates its own) from Kafka's JSON schemas in this package, copied unchanged from Apache Kafka's
clients/src/main/resources/common/message/: ControlledShutdown (key 7), which only brokers send, to the
controller. codec.py serves them with the rest; a broker sending one builds it from here."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

__all__ = ["ControlledShutdownRequest", "ControlledShutdownResponse"]


class ControlledShutdownRequest(ApiMessage, load_json=__name__):
    pass


class ControlledShutdownResponse(ApiMessage, load_json=__name__):
    pass
