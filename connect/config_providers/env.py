"""EnvVarConfigProvider (KIP-887): ``${env:DB_PASSWORD}`` is the worker process's environment variable.
Parameter: ``allowlist.pattern``, a regular expression a variable's whole name must match (default: any)."""

from __future__ import annotations

import os
import re

from ..api.config_provider import ConfigData, ConfigProvider
from ..api.errors import ConfigException

__all__ = ["EnvVarConfigProvider"]

ALLOWLIST = "allowlist.pattern"


class EnvVarConfigProvider(ConfigProvider):
    aliases = ("org.apache.kafka.common.config.provider.EnvVarConfigProvider",)

    def __init__(self) -> None:
        self.allowlist = re.compile(".*")

    def configure(self, configs: dict[str, str]) -> None:
        pattern = configs.get(ALLOWLIST)
        if pattern is not None:
            try:
                self.allowlist = re.compile(pattern)
            except re.error as exc:
                raise ConfigException(f"{ALLOWLIST}: not a regular expression: {exc}", ALLOWLIST) from None

    def get(self, path: str, keys: set[str] | None = None) -> ConfigData:
        if path:
            raise ConfigException("environment variables have no path: write ${env:NAME}")
        if keys is None:
            return ConfigData({k: v for k, v in os.environ.items() if self.allowlist.fullmatch(k)})
        refused = sorted(k for k in keys if not self.allowlist.fullmatch(k))
        if refused:
            raise ConfigException(f"environment variable {', '.join(refused)} does not match {ALLOWLIST} "
                                  f"{self.allowlist.pattern}", ALLOWLIST)
        return ConfigData({k: os.environ[k] for k in keys if k in os.environ})
