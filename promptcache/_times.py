"""Request-log send times: the keys a logger records them under, and how they are read.

One definition for every command that reads request logs (``lint``, ``diff``, ``explain``), so a
log whose lines carry ``created_at`` or ``start_time`` gets the same TTL checks everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["TIME_KEYS", "gap_seconds", "parse_timestamp", "timestamp_of"]

#: Keys a logger records a request's send time under, in the order they are tried.
TIME_KEYS = ("timestamp", "ts", "time", "start", "started_at", "start_time", "startTime",
             "sent_at", "created_at", "created", "date")


#: Times at or above this many seconds (the end of year 9999) are not send times.
_MAX_SECONDS = 253_402_300_800.0
#: Below this many seconds (2001-09-09) a time is taken for a relative one (a log that starts
#: at 0), above it for an epoch time: a gap between one of each means nothing.
_EPOCH_FLOOR = 1e9


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch (float) from a number of seconds, or of milliseconds when above
    1e11 (1e11 s is the year 5138, 1e11 ms is 1973), an ISO 8601 date and time (``Z`` accepted;
    without an offset, UTC, as ``promptcache.usage`` reads naive times) or a ``datetime``
    (naive: UTC). 0 is a time: logs written with relative times start at 0.

    Returns None for None.

    Raises:
        ValueError: anything else (a bool, NaN, an infinity, a time past the year 9999, a date
            without a time of day, a string that is not ISO 8601, another type).
    """
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
            raise ValueError(f"not a timestamp: {value!r} (a date without a time of day)")
        try:
            return _utc(datetime.fromisoformat(text)).timestamp()
        except ValueError:
            raise ValueError(f"not a timestamp: {value!r}") from None
    raise ValueError(f"not a timestamp: {value!r}")


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
