"""Connectors: the object that splits a job into task configs (Kafka's Connector)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from .config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig, field_errors
from .exactly_once import ConnectorTransactionBoundaries, ExactlyOnceSupport

if TYPE_CHECKING:
    from .sink import SinkTask
    from .source import SourceTask

__all__ = ["Connector", "ConnectorContext", "SinkConnector", "SourceConnector"]


class ConnectorContext(ABC):
    """What the runtime offers a running connector."""

    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again (e.g. new tables or files found)."""

    @abstractmethod
    def raise_error(self, error: Exception) -> None:
        """Fail the connector from a background thread or task of its own."""


class Connector(ABC):
    """Base of source and sink connectors.

    Rules: keep the constructor empty (the runtime instantiates connectors to read
    their config model and version); do the work in ``start``; ``task_configs`` must
    return at most ``max_tasks`` flat string maps.
    """

    config_class: ClassVar[type[ConnectorConfig]] = ConnectorConfig
    version: ClassVar[str] = "1.0.0"
    #: Extra names ``connector.class`` may use, e.g. Kafka's Java class name.
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Runtime keys this connector's tasks use unless its config sets them (e.g. a mirror's
    #: ``key.converter`` = ByteArrayConverter, so bytes are copied whatever the worker's default).
    runtime_defaults: ClassVar[dict[str, str]] = {}

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    @abstractmethod
    def start(self, config: Any) -> None | Awaitable[None]:
        """Start with the validated config (an instance of ``config_class``); may be ``async``."""

    @abstractmethod
    def task_class(self) -> type[SourceTask] | type[SinkTask]:
        """The task class this connector runs."""

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One config map per task, at most ``max_tasks``."""

    def stop(self) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """Release what ``start`` acquired; may be ``async``."""

    @classmethod
    def validate(cls, props: dict[str, Any]) -> dict[str, list[str]]:
        """Per-key error messages for a config map; empty when valid."""
        try:
            cls.config_class.model_validate(props)
        except ValidationError as exc:
            return field_errors(exc, cls.config_class)
        return {}


class SourceConnector(Connector):
    config_class: ClassVar[type[ConnectorConfig]] = SourceConnectorConfig

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        """KIP-618: whether this connector, so configured, can deliver exactly once (None: it does not say;
        a config asking for ``exactly.once.support=required`` is then refused). Called on a new instance."""
        return None

    def can_define_transaction_boundaries(self, config: dict[str, str]) -> ConnectorTransactionBoundaries:
        """KIP-618: whether this connector draws its own transaction boundaries (``transaction.boundary=connector``)."""
        return ConnectorTransactionBoundaries.UNSUPPORTED


class SinkConnector(Connector):
    config_class: ClassVar[type[ConnectorConfig]] = SinkConnectorConfig
