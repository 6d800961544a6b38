"""A TLS client's principal: its certificate subject as Java writes it (RFC 2253), mapped by
``ssl.principal.mapping.rules`` as Kafka's SslPrincipalMapper does (KIP-371).

Java's ``X500Principal.getName()`` lists the RDNs most specific first (CN first), without spaces,
with keywords only for CN L ST O OU C STREET DC UID; any other attribute is ``OID=#hex`` of its DER
value. Kafka's principal is ``User:`` + the mapped name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["NoMatchingRule", "SslPrincipalMapper", "rfc2253"]

_KEYWORDS = {NameOID.COMMON_NAME: "CN", NameOID.LOCALITY_NAME: "L", NameOID.STATE_OR_PROVINCE_NAME: "ST",
             NameOID.ORGANIZATION_NAME: "O", NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.COUNTRY_NAME: "C",
             NameOID.STREET_ADDRESS: "STREET", NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID"}


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _attribute(attr: x509.NameAttribute[str | bytes]) -> str:
    keyword = _KEYWORDS.get(attr.oid)
    if keyword is not None:
        # cryptography escapes as RFC 4514, which for these keywords is what RFC 2253 (Java) writes
        return keyword + "=" + attr.rfc4514_string().split("=", 1)[1]
    value = attr.value if isinstance(attr.value, bytes) else attr.value.encode()
    der = bytes([attr._type.value]) + _der_length(len(value)) + value  # noqa: SLF001 - the ASN.1 tag is not public
    return f"{attr.oid.dotted_string}=#{der.hex()}"


def rfc2253(name: x509.Name) -> str:
    """``name`` as Java's ``X500Principal.getName()`` (RFC 2253) writes it."""
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(name.rdns))


class NoMatchingRule(ValueError):
    """No mapping rule applies to the certificate's subject: the client is refused, as in Kafka."""


# Kafka's SslPrincipalMapper grammar: DEFAULT, or RULE:pattern/replacement/[LU] (backslash escapes in both parts)
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\\(.)|\$(\d+)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(template: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's ``replaceAll`` replacement: ``$n`` a group (a number beyond the groups is shortened digit by
    digit, as Kafka's escapeLiteralBackReferences does, or kept literally), ``\\x`` the character x."""

    def expand(match: re.Match[str]) -> str:
        def one(ref: re.Match[str]) -> str:
            if ref.group(1) is not None:
                return ref.group(1)
            digits = ref.group(2)
            if digits.startswith("0"):
                return match.group(0) + digits[1:]
            index, rest = int(digits), ""
            while index > groups and index >= 10:
                index, rest = index // 10, str(index % 10) + rest
            if index > groups:
                return "$" + digits
            return (match.group(index) or "") + rest

        return _BACKREF.sub(one, template)

    return expand


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule whose pattern matches the whole DN names the user."""

    def __init__(self, rules: str) -> None:
        self.text = rules
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(rules.strip()):
            rule = m.group(1)
            parsed = _PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                rest = rule[parsed.end():] if parsed is not None else rule
                raise ValueError(f"invalid rule {rule!r}, unmatched text {rest!r}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as exc:
                    raise ValueError(f"invalid rule {rule!r}: {exc}") from None
                self.rules.append(_Rule(pattern, parsed.group(3), parsed.group(4)))

    def name(self, dn: str) -> str:
        """The mapped name of ``dn``; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")
