"""Single message transforms and the predicates that guard them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .config import field_errors
from .errors import ConfigException
from .records import ConnectRecord

__all__ = ["Predicate", "Transformation", "TransformConfig"]

R = TypeVar("R", bound=ConnectRecord)


class TransformConfig(BaseModel):
    """Base of transform and predicate config models (Kafka's keys as aliases)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")


def _configure(model: type[BaseModel], props: dict[str, Any]) -> Any:
    try:
        return model.model_validate(props)
    except ValidationError as exc:
        errors = field_errors(exc, model)
        key, messages = next(iter(errors.items()))
        raise ConfigException(messages[0], field=key) from None


class _Configured(ABC):
    """What transforms and predicates share: a config model parsed from their props, and close."""

    config_class: ClassVar[type[TransformConfig]] = TransformConfig
    aliases: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1.0.0"
    config: Any

    def configure(self, props: dict[str, Any]) -> None:
        """Props with the ``transforms.<alias>.`` (or ``predicates.<alias>.``) prefix removed;
        parsed into ``config_class``."""
        self.config = _configure(self.config_class, props)

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class Transformation(_Configured):
    """Rules: ``apply`` returns a new record (``record.new_record(...)``) or None to drop it;
    never mutate the record passed in."""

    @abstractmethod
    def apply(self, record: R) -> R | None:
        """The transformed record, or None to drop it."""


class Predicate(_Configured):
    @abstractmethod
    def test(self, record: ConnectRecord) -> bool:
        """Whether the guarded transform applies to this record."""
