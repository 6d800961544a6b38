"""Headwater's own converters, transforms, predicates, REST extension and config providers, as a plugin like any
other.

pyproject.toml names this module in the ``headwater`` entry-point group, so the registry finds
these classes exactly as it finds a third-party plugin's (the file connectors register the same
way, from ``headwater.connectors.file``). The classes are read from their packages' exports, not
from the modules that define them, so moving a class inside its package changes nothing here.
"""

from __future__ import annotations

from . import config_providers, converters, transforms
from .api.config_provider import ConfigProvider
from .api.hookspecs import hookimpl
from .api.transforms import Predicate, Transformation

__all__ = ["headwater_config_providers", "headwater_converters", "headwater_predicates", "headwater_rest_extensions",
           "headwater_transforms"]


@hookimpl
def headwater_converters() -> list[type]:
    return list(converters.CONVERTERS)


@hookimpl
def headwater_transforms() -> list[type[Transformation]]:
    return list(transforms.TRANSFORMS)


@hookimpl
def headwater_predicates() -> list[type[Predicate]]:
    return list(transforms.PREDICATES)


@hookimpl
def headwater_rest_extensions() -> list[type]:
    from .rest.basic_auth import BasicAuthSecurityRestExtension

    return [BasicAuthSecurityRestExtension]


@hookimpl
def headwater_config_providers() -> list[type[ConfigProvider]]:
    return list(config_providers.PROVIDERS)
