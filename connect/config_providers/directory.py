"""DirectoryConfigProvider (KIP-632): ``${dir:/run/secrets:db-password}`` is the content of the file
``db-password`` in that folder (UTF-8, untrimmed), as Docker and Kubernetes mount secrets. Parameter:
``allowed.paths``."""

from __future__ import annotations

import os

from ..api.config_provider import ConfigData, ConfigProvider
from ..api.errors import ConfigException
from .allowed_paths import ALLOWED_PATHS, AllowedPaths

__all__ = ["DirectoryConfigProvider"]


class DirectoryConfigProvider(ConfigProvider):
    aliases = ("org.apache.kafka.common.config.provider.DirectoryConfigProvider",)

    def __init__(self) -> None:
        self.allowed = AllowedPaths(None)

    def configure(self, configs: dict[str, str]) -> None:
        self.allowed = AllowedPaths(configs.get(ALLOWED_PATHS))

    def get(self, path: str, keys: set[str] | None = None) -> ConfigData:
        folder = self.allowed.check(path)
        if not os.path.isdir(folder):
            raise ConfigException(f"{path} is not a directory")
        names = sorted(os.listdir(folder)) if keys is None else sorted(keys)
        data: dict[str, str] = {}
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                raise ConfigException(f"{name!r} is not a file name in {path}")
            file = os.path.join(folder, name)
            if not os.path.isfile(file):
                continue  # a missing key (or a sub-folder): not found
            self.allowed.check(file)  # a link inside an allowed folder may point out of it
            try:
                with open(file, encoding="utf-8") as f:
                    data[name] = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigException(f"cannot read {name} in {path}: {type(exc).__name__}") from None
        return ConfigData(data)
