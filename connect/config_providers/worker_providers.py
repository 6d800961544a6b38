"""The worker's config providers, built from its ``config.providers`` keys (KIP-297, KIP-421):
``config.providers=file,env``, ``config.providers.<name>.class`` (a plugin name, Kafka's Java class name
included) and ``config.providers.<name>.param.<p>`` (handed to ``configure`` as ``<p>``). The worker's own
properties are resolved through them at start, as Kafka's WorkerConfig is."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..api.config_provider import ConfigProvider
from ..api.errors import ConfigException
from ..plugins import PluginRegistry, UnknownPlugin
from .transformer import ConfigTransformer

__all__ = ["PROVIDERS_KEY", "build_providers", "build_transformer", "close_providers", "resolve_worker_properties"]

log = logging.getLogger(__name__)

PROVIDERS_KEY = "config.providers"


def _names(props: Mapping[str, str]) -> list[str]:
    return [n.strip() for n in str(props.get(PROVIDERS_KEY, "") or "").split(",") if n.strip()]


def build_providers(props: Mapping[str, str], registry: PluginRegistry) -> dict[str, ConfigProvider]:
    """One configured instance per name in ``config.providers``; ConfigException naming the key that is
    missing or wrong (``config.providers.<name>.class`` or ``.param.<p>``)."""
    providers: dict[str, ConfigProvider] = {}
    try:
        for name in _names(props):
            key = f"{PROVIDERS_KEY}.{name}.class"
            cls_name = str(props.get(key, "") or "").strip()
            if not cls_name:
                raise ConfigException(f"{key}: missing; config.providers names {name}, so it needs a class", key)
            try:
                cls = registry.config_provider(cls_name)
            except UnknownPlugin:
                raise ConfigException(f"{key}: no config provider class {cls_name} is installed", key) from None
            prefix = f"{PROVIDERS_KEY}.{name}.param."
            params = {k[len(prefix):]: str(v) for k, v in props.items() if k.startswith(prefix)}
            provider = cls()
            try:
                provider.configure(params)
            except ConfigException as exc:
                param = f"{prefix}{exc.field}" if exc.field else prefix + "*"
                raise ConfigException(f"{param}: {exc}", param) from None
            providers[name] = provider
    except Exception:
        close_providers(providers)
        raise
    return providers


def build_transformer(props: Mapping[str, str], registry: PluginRegistry) -> ConfigTransformer:
    return ConfigTransformer(build_providers(props, registry))


def close_providers(providers: Mapping[str, ConfigProvider]) -> None:
    for provider in providers.values():
        try:
            provider.close()
        except Exception:  # closing one must not keep the others open
            log.exception("closing config provider %s failed", type(provider).__name__)


def resolve_worker_properties(props: Mapping[str, str], registry: PluginRegistry) -> dict[str, str]:
    """The worker's properties with their placeholders resolved (the ``config.providers.*`` keys as given)."""
    if not _names(props):
        return dict(props)
    transformer = build_transformer(props, registry)
    try:
        own = {k: v for k, v in props.items() if not k.startswith(PROVIDERS_KEY)}
        resolved = transformer.transform(own, "the worker configuration").config
    finally:
        close_providers(transformer.providers)
    return {**props, **resolved}
