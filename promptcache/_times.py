"""Request-log send times: the keys a logger records them under, and how they are read.

One definition for every command that reads request logs (``lint``, ``diff``, ``explain``), so a
log whose lines carry ``created_at`` or ``start_time`` gets the same TTL checks everywhere.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = ["TIME_KEYS", "dated_time_of", "gap_seconds", "parse_timestamp", "timestamp_of"]

#: Keys a logger records a request's send time under, in the order they are tried.
TIME_KEYS = ("timestamp", "ts", "time", "start", "started_at", "start_time", "startTime",
             "sent_at", "created_at", "created", "date")


#: Times at or above this many seconds (the end of year 9999) are not send times.
_MAX_SECONDS = 253_402_300_800.0
#: Below this many seconds (2001-09-09) a time is taken for a relative one (a log that starts
#: at 0), above it for an epoch time: a gap between one of each means nothing.
_EPOCH_FLOOR = 1e9


def parse_timestamp(value: Any, *, dates: bool = False) -> float | None:
    """Seconds since the epoch (float) from a number of seconds, or of milliseconds when above
    1e11 (1e11 s is the year 5138, 1e11 ms is 1973), an ISO 8601 date and time (``Z`` accepted;
    without an offset, UTC, as ``promptcache.usage`` reads naive times) or a ``datetime``
    (naive: UTC). 0 is a time: logs written with relative times start at 0.

    ``dates``: also read what names a day rather than an instant, for choosing the prices of a
    day (not for TTL gaps): a date without a time of day (``"2026-10-01"``, ``"2026/10/01"``,
    ``"20261001"``: midnight UTC of that day), a number written as a string (``"1790812800"``,
    seconds or milliseconds as above) and an RFC 2822 date (an HTTP ``Date`` header:
    ``"Thu, 01 Oct 2026 12:00:00 GMT"``).

    Returns None for None.

    Raises:
        ValueError: anything else (a bool, NaN, an infinity, a time past the year 9999, a date
            without a time of day unless ``dates``, a string that is not ISO 8601, another
            type).
    """
    if dates and isinstance(value, str):
        day = _parse_day(value.strip())
        if day is not None:
            return day
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, (int, float)):
        try:
            v = float(value)
        except OverflowError:
            raise ValueError(f"not a timestamp: {value!r}") from None
        if not math.isfinite(v):
            raise ValueError(f"not a timestamp: {value!r}")
        v = v / 1000.0 if v > 1e11 else v
        if abs(v) >= _MAX_SECONDS:
            raise ValueError(f"not a timestamp: {value!r} (past the year 9999)")
        return v
    if isinstance(value, datetime):
        return _utc(value).timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        if ":" not in text:  # "2025-05-04", "20250504", "2025-W18-7": a day, not a send time
            raise ValueError(f"not a timestamp: {value!r}" if dates else
                             f"not a timestamp: {value!r} (a date without a time of day)")
        try:
            return _utc(datetime.fromisoformat(text)).timestamp()
        except ValueError:
            raise ValueError(f"not a timestamp: {value!r}") from None
    raise ValueError(f"not a timestamp: {value!r}")


#: A date without a time of day, ISO (``2026-10-01``) or with slashes (``2026/10/01``).
_DAY = re.compile(r"(\d{4})([-/]?)(\d{2})\2(\d{2})")
#: A number written as a string (an epoch time a logger quoted).
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _parse_day(text: str) -> float | None:
    """Seconds since the epoch of what ``parse_timestamp(..., dates=True)`` reads beyond ISO
    date-times (see there); None when ``text`` is none of them (or is an ISO date-time, read
    as before). Raises ValueError for a date that does not exist (``2026-02-30``)."""
    match = _DAY.fullmatch(text)
    if match is not None:
        try:
            day = date(int(match[1]), int(match[3]), int(match[4]))
        except ValueError:
            raise ValueError(f"not a timestamp: {text!r} (no such date)") from None
        return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    if _NUMBER.fullmatch(text):
        return parse_timestamp(float(text))
    if "," in text or text[:3].isalpha():  # "Thu, 01 Oct 2026 12:00:00 GMT"
        try:
            return _utc(parsedate_to_datetime(text)).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
    return None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def gap_seconds(start: float | None, later: float | None) -> float | None:
    """Seconds from ``start`` to ``later``; None when either is unknown, or when one is a
    relative time (under 1e9 s: a log starting at 0, or a placeholder 0) and the other an epoch
    time, whose difference would read as decades."""
    if start is None or later is None:
        return None
    if (start < _EPOCH_FLOOR) != (later < _EPOCH_FLOOR):
        return None
    return later - start


def timestamp_of(record: Any, *, strict: bool = False) -> float | None:
    """The send time (seconds since the epoch) recorded with a request, from the first key of
    :data:`TIME_KEYS` holding a positive time; 0 only when no key holds one (a placeholder
    ``"timestamp": 0`` does not hide a real ``created_at``, while a relative-time log's first
    request, at 0, keeps its time). A value that is not a time is skipped when another key
    holds one. None when no key holds a time.

    Args:
        record: a log line (a mapping; anything else has no time).
        strict: raise when time keys are present but none holds a time (a bad value, or a
            negative time), instead of returning None.

    Raises:
        ValueError: ``strict``, and the record's time keys hold no time, at least one of them
            something :func:`parse_timestamp` refuses or a negative time.
    """
    if not isinstance(record, Mapping):
        return None
    zero: float | None = None
    problem: str | None = None
    for key in TIME_KEYS:
        value = record.get(key)
        if value is None:
            continue
        try:
            ts = parse_timestamp(value)
        except ValueError as exc:
            problem = problem or f"{key}: {exc}"
            continue
        if ts is None or ts < 0:
            if ts is not None:
                problem = problem or f"{key}: a negative time ({value!r})"
            continue
        if ts > 0:
            return ts
        zero = ts
    if zero is None and problem is not None and strict:
        raise ValueError(problem)
    return zero


def dated_time_of(*records: Any) -> float | None:
    """The send time that dates a logged request for its prices (seconds since the epoch), from
    the :data:`TIME_KEYS` of ``records`` in order (a log line, then the response it holds).

    Unlike :func:`timestamp_of` (TTL gaps), values are read with ``parse_timestamp(...,
    dates=True)`` (a date without a time of day is a date), and the first *epoch* time (at
    or above 1e9 s, 2001-09-09) wins over an earlier key's relative time: a logger's
    ``"time": 2.5`` (an elapsed time) does not hide ``"created_at"``. Failing an epoch time,
    the relative time :func:`timestamp_of` would give (a log that starts at 0), else None.

    Raises:
        ValueError: no key holds an epoch time and one holds something that is not a time
            (``"Oct 1 2026"``, ``"garbage"``, a negative time): the message names the key; the
            request's date, hence its prices, cannot be known.
    """
    relative: float | None = None
    zero: float | None = None
    problem: str | None = None
    for record in records:
        if not isinstance(record, Mapping):
            continue
        for key in TIME_KEYS:
            value = record.get(key)
            if value is None:
                continue
            try:
                ts = parse_timestamp(value, dates=True)
            except ValueError as exc:
                problem = problem or f"{key}: {exc}"
                continue
            if ts is None:
                continue
            if ts < 0:
                problem = problem or f"{key}: a negative time ({value!r})"
            elif ts >= _EPOCH_FLOOR:
                return ts
            elif ts > 0:
                relative = ts if relative is None else relative
            else:
                zero = ts
    if problem is not None:
        raise ValueError(problem)
    return relative if relative is not None else zero
