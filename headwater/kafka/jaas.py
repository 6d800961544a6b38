"""Kafka's ``sasl.jaas.config`` values: one or more JAAS login modules,
``<class> <required|requisite|sufficient|optional> key="value" ... ;``, with ``//`` and ``/* */``
comments, as Java's StreamTokenizer reads them (JaasConfig.java).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasError", "LoginModule", "parse_jaas"]

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<quoted>"(?:\\.|[^"\\])*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+)""",
                    re.DOTALL)


class JaasError(ValueError):
    """The value is not a JAAS configuration (the message never quotes a value: it may hold a password)."""


@dataclass
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"unexpected character at position {pos}")
        pos = m.end()
        if m.group("quoted") is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", m.group("quoted")[1:-1])))
        elif m.group("punct") is not None:
            out.append((m.group("punct"), m.group("punct")))
        elif m.group("word") is not None:
            out.append(("word", m.group("word")))
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0

    def take(kind: str, what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind:
            raise JaasError(f"expected {what} (login module {len(modules) + 1})")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        module = LoginModule(take("word", "a login module class name"), take("word", "a control flag").lower())
        if module.flag not in _FLAGS:
            raise JaasError(f"{module.flag!r} is not a control flag ({', '.join(_FLAGS)})")
        while i < len(tokens) and tokens[i][0] != ";":
            name = take("word", "an option name")
            take("=", f"'=' after option {name}")
            if i < len(tokens) and tokens[i][0] in ("value", "word"):
                module.options[name] = tokens[i][1]
                i += 1
            else:
                raise JaasError(f"expected a value for option {name}")
        take(";", "';' at the end of the login module")
        modules.append(module)
    if not modules:
        raise JaasError("no login module")
    return modules
