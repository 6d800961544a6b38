"""Java ``SimpleDateFormat`` patterns (as TimestampConverter and TimestampRouter take them),
formatting and parsing epoch milliseconds in UTC.

Supported letters: ``G y Y M L d D E u a H k K h m s S z Z X`` and quoted text (``'T'``,
``''`` for a quote). ``w W F`` are rejected. Parsing follows Java's lenient reading where
it matters in practice: numbers take as many digits as are there unless the next field is
also a number, text after the pattern is ignored, a two-digit ``yy`` year is put within
80 years before and 20 after now; out-of-range fields (month 13) are errors, not rolled over.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from .util import ms_to_datetime, to_epoch_ms

__all__ = ["JavaDateFormat"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_SUPPORTED = set("GyYMLdDEuaHkKhmsSzZX")
_NUMERIC = set("yYMLdDuHkKhmsS")


@dataclass(frozen=True)
class _Token:
    letter: str  # "" for literal text
    count: int = 0
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC and not (self.letter in "ML" and self.count >= 3)


def _tokenize(pattern: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                tokens.append(_Token("", text="'"))
                i += 2
                continue
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise ValueError(f"Unterminated quote in pattern: {pattern}")
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            tokens.append(_Token("", text="".join(text)))
            i = end + 1
        elif ("a" <= c <= "z") or ("A" <= c <= "Z"):
            if c not in _SUPPORTED:
                raise ValueError(f"Illegal or unsupported pattern character '{c}' in {pattern!r}")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            tokens.append(_Token(c, j - i))
            i = j
        else:
            tokens.append(_Token("", text=c))
            i += 1
    return tokens


def _pad(value: int, count: int) -> str:
    return f"{'-' if value < 0 else ''}{str(abs(value)).zfill(count)}"


class JavaDateFormat:
    """One compiled pattern; ``format(ms)`` and ``parse(text) -> ms``, always in UTC."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens = _tokenize(pattern)
        self._regex, self._fields = self._compile()

    # -- formatting -------------------------------------------------------------------------------------

    def format(self, ms: int) -> str:
        t = ms_to_datetime(ms)
        millis = ms % 1000
        out: list[str] = []
        for tok in self.tokens:
            c, n = tok.letter, tok.count
            if not c:
                out.append(tok.text)
            elif c == "G":
                out.append("AD")
            elif c in "yY":
                out.append(_pad(t.year % 100, 2) if n == 2 else _pad(t.year, n))
            elif c in "ML":
                out.append(
                    _MONTHS[t.month - 1]
                    if n >= 4
                    else _MONTHS[t.month - 1][:3]
                    if n == 3
                    else _pad(t.month, n)
                )
            elif c == "d":
                out.append(_pad(t.day, n))
            elif c == "D":
                out.append(_pad(t.timetuple().tm_yday, n))
            elif c == "E":
                out.append(_DAYS[t.weekday()] if n >= 4 else _DAYS[t.weekday()][:3])
            elif c == "u":
                out.append(_pad(t.isoweekday(), n))
            elif c == "a":
                out.append("AM" if t.hour < 12 else "PM")
            elif c == "H":
                out.append(_pad(t.hour, n))
            elif c == "k":
                out.append(_pad(t.hour or 24, n))
            elif c == "K":
                out.append(_pad(t.hour % 12, n))
            elif c == "h":
                out.append(_pad(t.hour % 12 or 12, n))
            elif c == "m":
                out.append(_pad(t.minute, n))
            elif c == "s":
                out.append(_pad(t.second, n))
            elif c == "S":
                out.append(_pad(millis, n))
            elif c == "z":
                out.append("Coordinated Universal Time" if n >= 4 else "UTC")
            elif c == "Z":
                out.append("+0000")
            elif c == "X":
                out.append("Z")
        return "".join(out)

    # -- parsing ----------------------------------------------------------------------------------------

    def _compile(self) -> tuple[re.Pattern[str], list[_Token]]:
        parts: list[str] = []
        fields: list[_Token] = []
        for i, tok in enumerate(self.tokens):
            c, n = tok.letter, tok.count
            if not c:
                parts.append(re.escape(tok.text))
                continue
            fields.append(tok)
            nxt = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
            if tok.numeric:
                abutting = nxt is not None and nxt.letter and nxt.numeric
                parts.append(f"([0-9]{{{n}}})" if abutting else "([-+]?[0-9]+)")
            elif c in "ML":
                names = sorted([*_MONTHS, *(m[:3] for m in _MONTHS)], key=len, reverse=True)
                parts.append(f"({'|'.join(names)})")
            elif c == "E":
                names = sorted([*_DAYS, *(d[:3] for d in _DAYS)], key=len, reverse=True)
                parts.append(f"({'|'.join(names)})")
            elif c == "G":
                parts.append("(AD|BC)")
            elif c == "a":
                parts.append("(AM|PM)")
            elif c == "z":
                parts.append(r"(Coordinated Universal Time|UTC|GMT(?:[-+][0-9]{1,2}(?::?[0-9]{2})?)?|Z)")
            elif c == "Z":
                parts.append(r"([-+][0-9]{4}|[-+][0-9]{2}:[0-9]{2}|Z|GMT(?:[-+][0-9]{1,2}(?::?[0-9]{2})?)?)")
            elif c == "X":
                parts.append(r"(Z|[-+][0-9]{2}(?::?[0-9]{2})?)")
        return re.compile("".join(parts), re.IGNORECASE), fields

    def parse(self, text: str) -> int:
        """Epoch milliseconds; ValueError when ``text`` does not match (text after the match is ignored)."""
        m = self._regex.match(text)
        if m is None:
            raise ValueError(f"Unparseable date: {text!r}")
        year, month, day, yday = 1970, 1, 1, None
        hour = minute = second = millis = 0
        pm: bool | None = None
        twelve_hour: int | None = None
        offset_min = 0
        for tok, raw in zip(self._fields, m.groups(), strict=True):
            c, n = tok.letter, tok.count
            if c in "yY":
                year = int(raw)
                if n == 2 and len(raw.lstrip("-+")) == 2:
                    year = _two_digit_year(year)
            elif c in "ML":
                month = int(raw) if tok.numeric else _month_number(raw)
            elif c == "d":
                day = int(raw)
            elif c == "D":
                yday = int(raw)
            elif c == "H":
                hour = int(raw)
            elif c == "k":
                hour = int(raw) % 24
            elif c in "Kh":
                twelve_hour = int(raw) % 12
            elif c == "a":
                pm = raw.upper() == "PM"
            elif c == "m":
                minute = int(raw)
            elif c == "s":
                second = int(raw)
            elif c == "S":
                millis = int(raw)
            elif c in "zZX":
                offset_min = _offset_minutes(raw)
        if twelve_hour is not None:
            hour = twelve_hour + (12 if pm else 0)
        elif pm and hour < 12:
            hour += 12
        try:
            date = dt.date(year, 1, 1) + dt.timedelta(days=yday - 1) if yday else dt.date(year, month, day)
            if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60):
                raise ValueError("time field out of range")
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"Unparseable date: {text!r} ({exc})") from None
        ms = to_epoch_ms(date) + ((hour * 60 + minute) * 60 + second) * 1000 + millis
        return ms - offset_min * 60_000


def _month_number(name: str) -> int:
    key = name[:3].lower()
    return next(i for i, m in enumerate(_MONTHS, 1) if m[:3].lower() == key)


def _offset_minutes(raw: str) -> int:
    text = raw.upper()
    if text in ("Z", "UTC", "GMT", "COORDINATED UNIVERSAL TIME"):
        return 0
    if text.startswith("GMT"):
        text = text[3:]
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    if len(digits) <= 2:
        hours, minutes = int(digits), 0
    else:
        hours, minutes = int(digits[:-2]), int(digits[-2:])
    return sign * (hours * 60 + minutes)


def _two_digit_year(yy: int) -> int:
    """SimpleDateFormat's default century: within 80 years before and 20 years after now."""
    now = dt.datetime.now(dt.UTC).year
    start = now - 80
    year = start - start % 100 + yy
    return year + 100 if year < start else year
