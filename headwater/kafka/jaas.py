"""Kafka's ``sasl.jaas.config`` values: one or more JAAS login modules,
``<class> <required|requisite|sufficient|optional> key="value" ... ;``, with ``//`` and ``/* */``
comments, as Java's StreamTokenizer reads them (JaasConfig.java); and JAAS files
(``-Djava.security.auth.login.config``), whose sections ``Name { <modules> };`` hold such lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasError", "LoginModule", "parse_jaas", "parse_jaas_file"]

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<quoted>"(?:\\.|[^"\\])*")|(?P<punct>[=;{}])|(?P<word>[^\s=;{}"]+)""",
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
    return _modules(_tokens(text), 0, None)[0]


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """A JAAS file: ``Name { <login modules> };`` sections, by name."""
    tokens = _tokens(text)
    sections: dict[str, list[LoginModule]] = {}
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word" or i + 1 >= len(tokens) or tokens[i + 1][0] != "{":
            raise JaasError(f"expected 'Name {{' to open section {len(sections) + 1}")
        name = tokens[i][1]
        modules, i = _modules(tokens, i + 2, "}")
        if i + 1 >= len(tokens) or tokens[i][0] != "}" or tokens[i + 1][0] != ";":
            raise JaasError(f"expected '}};' to close section {name}")
        sections[name] = modules
        i += 2
    return sections


def _modules(tokens: list[tuple[str, str]], start: int, until: str | None) -> tuple[list[LoginModule], int]:
    """Login modules from ``tokens[start:]`` up to a ``until`` token (or the end); the index reached."""
    modules: list[LoginModule] = []
    i = start

    def take(kind: str, what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind:
            raise JaasError(f"expected {what} (login module {len(modules) + 1})")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens) and tokens[i][0] != until:
        module = LoginModule(take("word", "a login module class name"), take("word", "a control flag").lower())
        if module.flag not in _FLAGS:
            raise JaasError(f"{module.flag!r} is not a control flag ({', '.join(_FLAGS)})")
        while i < len(tokens) and tokens[i][0] not in (";", until):
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
    return modules, i
