"""FileConfigProvider (KIP-297): ``${file:/path/to/file.properties:key}`` reads ``key`` of a Java properties
file. Parameter: ``allowed.paths``."""

from __future__ import annotations

from headwater.properties import ConfigError, load_properties

from ..api.config_provider import ConfigData, ConfigProvider
from ..api.errors import ConfigException
from .allowed_paths import ALLOWED_PATHS, AllowedPaths

__all__ = ["FileConfigProvider"]


class FileConfigProvider(ConfigProvider):
    aliases = ("org.apache.kafka.common.config.provider.FileConfigProvider",)

    def __init__(self) -> None:
        self.allowed = AllowedPaths(None)

    def configure(self, configs: dict[str, str]) -> None:
        self.allowed = AllowedPaths(configs.get(ALLOWED_PATHS))

    def get(self, path: str, keys: set[str] | None = None) -> ConfigData:
        resolved = self.allowed.check(path)
        try:
            props = load_properties(resolved)
        except ConfigError:  # its message quotes the line, which may hold a secret
            raise ConfigException(f"{path} is not a properties file (a line is not key=value)") from None
        except OSError as exc:
            raise ConfigException(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
        return ConfigData(props if keys is None else {k: v for k, v in props.items() if k in keys})
