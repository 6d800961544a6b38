"""One listener's security settings as Kafka resolves them: ``listener.name.<listener>.<key>`` over the
plain ``<key>``, and for SASL keys ``listener.name.<listener>.<mechanism>.<key>`` over both.

A problem is a :class:`BadSetting` naming the key as the operator wrote it (``source``), so a start-up
error points at the right line of the properties file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.kafka.jaas import JaasError, LoginModule, parse_jaas
from headwater.kafka.server_tls import BadSetting

__all__ = ["BadSetting", "ListenerSettings", "login_module"]


@dataclass
class ListenerSettings:
    """The security properties one listener sees. ``plain`` holds the unprefixed ``ssl.*``/``sasl.*`` keys,
    ``prefixed`` this listener's ``listener.name.<l>.`` keys with the prefix removed."""

    listener: str  # the listener's name as in ``listeners`` (e.g. SASL_SSL)
    plain: dict[str, str] = field(default_factory=dict)
    prefixed: dict[str, str] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"listener.name.{self.listener.lower()}."

    def get(self, key: str, mechanism: str | None = None) -> str | None:
        if mechanism is not None:
            value = self.prefixed.get(f"{mechanism.lower()}.{key}")
            if value is not None:
                return value
        value = self.prefixed.get(key)
        return value if value is not None else self.plain.get(key)

    def source(self, key: str, mechanism: str | None = None) -> str:
        """The property name that supplied ``key`` (for error messages)."""
        if mechanism is not None and f"{mechanism.lower()}.{key}" in self.prefixed:
            return f"{self.prefix}{mechanism.lower()}.{key}"
        if key in self.prefixed:
            return self.prefix + key
        if key in self.plain or mechanism is None:
            return key
        return f"{self.prefix}{mechanism.lower()}.{key}"

    def with_prefix(self, keys: set[str]) -> dict[str, str]:
        """The values of ``keys`` this listener sees (prefixed over plain), by Kafka's unprefixed name."""
        out = {k: v for k, v in self.plain.items() if k in keys}
        out.update({k: v for k, v in self.prefixed.items() if k in keys})
        return out


def login_module(settings: ListenerSettings, mechanism: str, class_name: str, usage: str) -> LoginModule:
    """The listener's JAAS login module ``class_name`` for ``mechanism``
    (``listener.name.<l>.<mechanism>.sasl.jaas.config``); BadSetting naming the key when it is missing (``usage``
    says what the entry should hold), unreadable or without that module."""
    key = "sasl.jaas.config"
    text = settings.get(key, mechanism)
    source = settings.source(key, mechanism)
    if text is None:
        raise BadSetting(source, f"required for {usage}")
    try:
        modules = parse_jaas(text)
    except JaasError as exc:
        raise BadSetting(source, str(exc)) from None
    module = next((m for m in modules if m.class_name == class_name), None)
    if module is None:
        raise BadSetting(source, f"{mechanism} needs the login module {class_name}")
    return module
