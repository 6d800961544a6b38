"""Exceptions plugin code raises (Kafka Connect's names)."""

from __future__ import annotations

__all__ = ["ConnectException", "DataException", "RetriableException", "ConfigException"]


class ConnectException(Exception):
    """Base class of Connect errors."""


class RetriableException(ConnectException):
    """The operation may succeed if tried again (a sink's put, a source's poll)."""


class DataException(ConnectException):
    """A record cannot be converted or transformed."""


class ConfigException(ConnectException):
    """A configuration is invalid; ``field`` names the offending key when known."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
