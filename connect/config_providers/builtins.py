"""The built-in config providers, registered through the ``headwater_config_providers`` hook as a third-party
provider (a Vault one, say) would be; pyproject.toml names this module in the ``headwater`` entry-point group."""

from __future__ import annotations

from ..api.config_provider import ConfigProvider
from ..api.hookspecs import hookimpl
from .directory import DirectoryConfigProvider
from .env import EnvVarConfigProvider
from .file import FileConfigProvider

__all__ = ["PROVIDERS", "headwater_config_providers"]

PROVIDERS: tuple[type[ConfigProvider], ...] = (FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider)


@hookimpl
def headwater_config_providers() -> list[type[ConfigProvider]]:
    return list(PROVIDERS)
