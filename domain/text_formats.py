"""Text formats the origin checks with Rust's libraries: dates, date-times, URLs, and
Rust's notion of white space. One home for each, for elicitation answers and session
timestamps alike."""

from __future__ import annotations

import datetime
import re

__all__ = ["RUST_WHITESPACE", "is_date", "is_rfc3339_date_time", "is_uri", "utc_clock"]

# Rust's `char::is_whitespace` (Unicode White_Space); Python's isspace() adds U+001C..U+001F.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


_DIGITS = "[0-9]"
_WS = f"[{RUST_WHITESPACE}]*"
# chrono's "%Y-%m-%d": an unsigned year of 1-4 digits (or a signed one of any length),
# then 1-2 digit month and day; chrono skips whitespace before each number.
_DATE = re.compile(
    f"{_WS}([+-]{_DIGITS}+|{_DIGITS}{{1,4}})-{_WS}({_DIGITS}{{1,2}})-{_WS}({_DIGITS}{{1,2}})"
)
# chrono's strict RFC 3339 parser: 'T', 't' or ' ' separates date and time.
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+\-\u2212]([0-9]{2}):([0-9]{2}))"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})
_FORBIDDEN_HOST = frozenset(" #/:<>?@[\\]^|\x7f") | frozenset(chr(c) for c in range(0x20))


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _valid_date(year: int, month: int, day: int) -> bool:
    return (
        -262_143 <= year <= 262_142 and 1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)
    )


def is_date(value: str) -> bool:
    """Whether ``value`` is a date as chrono's ``%Y-%m-%d`` reads one."""
    match = _DATE.fullmatch(value)
    if match is None:
        return False
    return _valid_date(int(match.group(1)), int(match.group(2)), int(match.group(3)))


def is_rfc3339_date_time(value: str) -> bool:
    """Whether ``value`` is an RFC 3339 date-time as chrono's strict parser reads one (the
    rule of a ``date-time`` field and of a session record's timestamps)."""
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not _valid_date(year, month, day) or hour > 23 or minute > 59 or second > 60:
        return False
    offset_hour, offset_minute = match.group(7), match.group(8)
    return offset_hour is None or (int(offset_hour) <= 23 and int(offset_minute) <= 59)


def is_uri(value: str) -> bool:
    """Whether ``value`` is an absolute URL (see below for how closely)."""
    # An approximation of the WHATWG parser (Rust `url`) the origin uses: an absolute URL
    # needs a scheme; the special network schemes also need a non-empty, valid host.
    text = value.strip("".join(chr(c) for c in range(0x21)))
    match = _SCHEME.match(text)
    if match is None:
        return False
    scheme = match.group()[:-1].lower()
    if scheme not in _SPECIAL_SCHEMES:
        return True
    rest = text[match.end() :].lstrip("/\\")
    authority = re.split(r"[/\\?#]", rest, maxsplit=1)[0]
    host_port = authority.rpartition("@")[2]
    if host_port.startswith("["):
        host, bracket, port_part = host_port[1:].partition("]")
        if not bracket or not host or not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
            return False
        if port_part and not port_part.startswith(":"):
            return False
        port = port_part[1:]
    else:
        host, _, port = host_port.partition(":")
        if not host or any(char in _FORBIDDEN_HOST for char in host):
            return False
    return not port or (port.isascii() and port.isdigit() and int(port) <= 65535)


def utc_clock(at_ms: object, zone: str = "") -> str:
    """A time in milliseconds as ``YYYY-MM-DD HH:MM:SS`` (UTC) followed by ``zone``; ``-``
    for none, and the number itself for one no calendar holds."""
    if not isinstance(at_ms, int):
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(at_ms / 1000, datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return str(at_ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + zone
