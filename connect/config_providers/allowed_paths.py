"""``allowed.paths`` of the file and directory providers (Kafka's AllowedPaths, KAFKA-14822): the folders a
placeholder may read from. A path asked for is normalised, symbolic links and ``..`` resolved, before it is
compared, so ``/run/secrets/../../etc/passwd`` or a link out of an allowed folder does not escape it."""

from __future__ import annotations

import os
from pathlib import Path

from ..api.errors import ConfigException
from ..api.sandbox import resolve, within

__all__ = ["ALLOWED_PATHS", "AllowedPaths"]

ALLOWED_PATHS = "allowed.paths"


class AllowedPaths:
    def __init__(self, setting: str | None) -> None:
        """``setting``: the comma-separated ``allowed.paths`` (None or blank: every path is allowed)."""
        self.roots: list[Path] | None = None
        if setting is None or not setting.strip():
            return
        roots = []
        for given in (p.strip() for p in setting.split(",")):
            if not given:
                continue
            if not os.path.isabs(given):
                raise ConfigException(f"{ALLOWED_PATHS}: path {given} is not absolute", ALLOWED_PATHS)
            if not os.path.exists(given):
                raise ConfigException(f"{ALLOWED_PATHS}: path {given} does not exist", ALLOWED_PATHS)
            roots.append(resolve(given))
        self.roots = roots

    def check(self, path: str) -> str:
        """``path`` resolved, or ConfigException naming it and ``allowed.paths`` when it lies outside them."""
        if not path:
            raise ConfigException("no path given")
        resolved = resolve(path)
        if self.roots is not None and not any(within(resolved, root) for root in self.roots):
            raise ConfigException(f"path {path} is not in {ALLOWED_PATHS} ({', '.join(map(str, self.roots))})",
                                  ALLOWED_PATHS)
        return str(resolved)
