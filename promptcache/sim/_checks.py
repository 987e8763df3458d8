"""Argument checks shared by the simulator's configs and ``promptcache simulate`` (internal).

Every check raises a :class:`ValueError` whose message starts with the argument's name and
gives the accepted range, so the CLI can swap the name for its option
(:mod:`promptcache.sim.cli` maps ``duration_s`` to ``--duration`` and so on).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["check_count", "check_real", "check_seed"]


def _num(x: float) -> str:
    if isinstance(x, int) or (x.is_integer() and abs(x) < 1e16):
        return f"{int(x):,}"
    return f"{x:g}"


def _range(lo: float, hi: float | None, lo_open: bool = False) -> str:
    return f"{'(' if lo_open else '['}{_num(lo)}, {'inf)' if hi is None else _num(hi) + ']'}"


def check_count(name: str, value: Any, lo: int, hi: int | None = None, why: str = "") -> int:
    """``value`` as an int in ``[lo, hi]`` (``hi=None``: no upper bound).

    An integral float (``8.0``) is accepted; ``why`` (the reason for ``hi``) is appended to
    the message.

    Raises:
        ValueError: not an integer (a bool, a string, a fractional, NaN or infinite float) or
            out of range; the message starts with ``name``.
    """
    n: int | None = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = int(value)
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        n = int(value)
    if n is None or n < lo or (hi is not None and n > hi):
        suffix = f" {why}" if why else ""
        raise ValueError(f"{name} must be an integer in {_range(lo, hi)}{suffix}, got {value!r}")
    return n


def check_real(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False,
               unit: str = "", why: str = "") -> float:
    """``value`` as a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``).

    Raises:
        ValueError: not a real number (a bool, a string), NaN, infinite or out of range; the
            message starts with ``name`` and gives the range (``unit`` after it, then ``why``).
    """
    x: float | None = None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:  # an int beyond a float's range
            x = math.inf
    ok = x is not None and math.isfinite(x) and (x > lo if lo_open else x >= lo) and x <= hi
    if not ok:
        unit_text = f" {unit}" if unit else ""
        suffix = f" {why}" if why else ""
        raise ValueError(f"{name} must be a finite number in {_range(lo, hi, lo_open)}"
                         f"{unit_text}{suffix}, got {value!r}")
    assert x is not None
    return x


def check_seed(name: str, value: Any) -> int:
    """A seed: an integer >= 0. Python's :class:`random.Random` seeds with ``abs(seed)``, so
    a negative seed would silently repeat a positive one.

    Raises:
        ValueError: not an integer, or negative; the message starts with ``name``.
    """
    return check_count(name, value, 0, None, "(a negative seed repeats its absolute value)")
