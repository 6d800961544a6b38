"""Config providers (KIP-297, KIP-421, KIP-887): the built-in file, directory and environment providers, the
placeholder transformer, and the worker's providers built from ``config.providers``."""

from __future__ import annotations

from .directory import DirectoryConfigProvider
from .env import EnvVarConfigProvider
from .file import FileConfigProvider
from .transformer import (
    PLACEHOLDER,
    ConfigTransformer,
    Resolved,
    UnresolvedPlaceholders,
    has_placeholder,
    reverse_transform,
)
from .worker_providers import build_providers, build_transformer, close_providers, resolve_worker_properties

#: The built-in providers (registered by ``connect/builtins.py`` through ``headwater_config_providers``).
PROVIDERS = (FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider)

__all__ = ["PLACEHOLDER", "PROVIDERS", "ConfigTransformer", "DirectoryConfigProvider", "EnvVarConfigProvider",
           "FileConfigProvider", "Resolved", "UnresolvedPlaceholders", "build_providers", "build_transformer",
           "close_providers", "has_placeholder", "resolve_worker_properties", "reverse_transform"]
