"""Request-log send times: the keys a logger records them under, and how they are read.

One definition for every command that reads request logs (``lint``, ``diff``, ``explain``), so a
log whose lines carry ``created_at`` or ``start_time`` gets the same TTL checks everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["TIME_KEYS", "parse_timestamp", "timestamp_of"]

#: Keys a logger records a request's send time under, in the order they are tried.
TIME_KEYS = ("timestamp", "ts", "time", "start", "started_at", "start_time", "startTime",
             "sent_at", "created_at", "created", "date")


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch (float) from a number of seconds, or of milliseconds when above
    1e11 (1e11 s is the year 5138, 1e11 ms is 1973), an ISO 8601 string (``Z`` accepted) or a
    ``datetime``. 0 is a time: logs written with relative times start at 0.

    Returns None for None.

    Raises:
        ValueError: anything else (a bool, NaN, an infinity, an int too large for a float, a
            string that is not ISO 8601, another type).
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
        return v / 1000.0 if v > 1e11 else v
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise ValueError(f"not a timestamp: {value!r}") from None
    raise ValueError(f"not a timestamp: {value!r}")


def timestamp_of(record: Any, *, strict: bool = False) -> float | None:
    """The send time (seconds since the epoch) recorded with a request, from the first key of
    :data:`TIME_KEYS` holding a positive time; 0 only when no key holds one (a placeholder
    ``"timestamp": 0`` does not hide a real ``created_at``, while a relative-time log's first
    request, at 0, keeps its time). None when no key holds a time.

    Args:
        record: a log line (a mapping; anything else has no time).
        strict: raise on a value that is not a time instead of skipping it (and on a negative
            time, which is skipped otherwise).

    Raises:
        ValueError: ``strict`` and a time key holds something :func:`parse_timestamp` refuses.
    """
    if not isinstance(record, Mapping):
        return None
    zero: float | None = None
    for key in TIME_KEYS:
        value = record.get(key)
        if value is None:
            continue
        try:
            ts = parse_timestamp(value)
        except ValueError:
            if strict:
                raise
            continue
        if ts is None or ts < 0:
            if strict and ts is not None:
                raise ValueError(f"{key}: a negative time ({value!r})")
            continue
        if ts > 0:
            return ts
        zero = ts
    return zero
