"""The transformation chain of a connector: ``transforms`` in order, each optionally
guarded by a predicate (``transforms.<t>.predicate``, ``transforms.<t>.negate``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..api import ConfigException, ConnectRecord, Predicate, Transformation
from ..plugins import PluginRegistry, UnknownPlugin

__all__ = ["TransformationChain", "build_chain"]

R = TypeVar("R", bound=ConnectRecord)
P = TypeVar("P", Transformation, Predicate)


@dataclass
class _Stage:
    alias: str
    transform: Transformation
    predicate: Predicate | None
    negate: bool


class TransformationChain:
    def __init__(self, stages: list[_Stage]) -> None:
        self.stages = stages

    def __bool__(self) -> bool:
        return bool(self.stages)

    def apply(self, record: R) -> R | None:
        for stage in self.stages:
            if stage.predicate is not None and stage.predicate.test(record) == stage.negate:
                continue
            record = stage.transform.apply(record)  # type: ignore[assignment]
            if record is None:
                return None
        return record

    def close(self) -> None:
        for stage in self.stages:
            stage.transform.close()
            if stage.predicate is not None:
                stage.predicate.close()


def _aliases(value: str) -> list[str]:
    return [a.strip() for a in value.split(",") if a.strip()]


def _prefixed(config: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def build_chain(config: dict[str, str], registry: PluginRegistry) -> TransformationChain:
    """Instantiate and configure the chain; ConfigException names the offending key."""
    predicates: dict[str, Predicate] = {}
    for alias in _aliases(config.get("predicates", "")):
        predicates[alias] = _new_plugin(config, f"predicates.{alias}.", registry.predicate, ("type",))
    stages = []
    for alias in _aliases(config.get("transforms", "")):
        transform = _new_plugin(config, f"transforms.{alias}.", registry.transformation,
                                ("type", "predicate", "negate"))
        predicate_alias = config.get(f"transforms.{alias}.predicate")
        predicate = None
        if predicate_alias:
            predicate = predicates.get(predicate_alias)
            if predicate is None:
                key = f"transforms.{alias}.predicate"
                raise ConfigException(f"Invalid value {predicate_alias} for configuration {key}: "
                                      f"no predicate with that alias is listed in \"predicates\"", key)
        negate_raw = config.get(f"transforms.{alias}.negate", "false").strip().lower()
        if negate_raw not in ("true", "false"):
            key = f"transforms.{alias}.negate"
            raise ConfigException(f"Invalid value {negate_raw} for configuration {key}: Expected value to be "
                                  "either true or false", key)
        stages.append(_Stage(alias, transform, predicate, negate_raw == "true"))
    return TransformationChain(stages)


def _new_plugin(config: dict[str, str], prefix: str, plugin_class: Callable[[str], type[P]],
                chain_keys: tuple[str, ...]) -> P:
    """The plugin named by ``<prefix>type``, configured with the ``<prefix>`` properties less
    ``chain_keys`` (the chain's own: type, predicate, negate)."""
    type_key = f"{prefix}type"
    type_name = config.get(type_key)
    if not type_name:
        raise ConfigException(f"Missing required configuration \"{type_key}\" which has no default value.",
                              type_key)
    try:
        plugin = plugin_class(type_name)()
    except UnknownPlugin as exc:
        raise ConfigException(f"Invalid value {type_name} for configuration {type_key}: {exc}",
                              type_key) from None
    props = _prefixed(config, prefix)
    for key in chain_keys:
        props.pop(key, None)
    _configure(plugin, props, prefix)
    return plugin


def _configure(plugin: Transformation | Predicate, props: dict[str, str], prefix: str) -> None:
    try:
        plugin.configure(props)
    except ConfigException as exc:
        field = f"{prefix}{exc.field}" if exc.field else prefix.rstrip(".")
        raise ConfigException(str(exc).replace(f" {exc.field}:", f" {field}:", 1) if exc.field else str(exc),
                              field) from None
