"""The broker's error root: every error the broker answers with a Kafka error code is a ``BrokerError``.

Domain code (topics, configs, logs, groups) raises them where a request cannot be served as asked; the
API handler catches ``BrokerError`` and puts ``code`` (and, where the API has one, ``message``) into its
answer. The subclasses are the errors raised in more than one place, each with its code; a code raised
once is ``BrokerError(ErrorCode.X, message)``. Not here: what is not answered with a code but ends a
connection or a background pass (a malformed frame, a closed log, an aborted cleaning).
"""

from __future__ import annotations

from typing import ClassVar

from headwater.kafka.errors import ErrorCode, KafkaError

__all__ = ["BrokerError", "InvalidConfig", "InvalidRequest", "InvalidTopic", "UnknownTopicOrPartition"]


class BrokerError(KafkaError):
    """An error answered with Kafka error ``code``; ``message`` is for the answer's error_message and the log."""


class _CodedError(BrokerError):
    CODE: ClassVar[ErrorCode]

    def __init__(self, message: str = "") -> None:
        super().__init__(self.CODE, message)


class UnknownTopicOrPartition(_CodedError):
    CODE = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidTopic(_CodedError):
    """A topic name against Kafka's rules (INVALID_TOPIC_EXCEPTION)."""

    CODE = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidConfig(_CodedError):
    """A config value, name or operation refused, in Kafka's words (INVALID_CONFIG)."""

    CODE = ErrorCode.INVALID_CONFIG


class InvalidRequest(_CodedError):
    CODE = ErrorCode.INVALID_REQUEST
