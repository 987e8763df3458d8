"""The demo prints a negative dollar figure as `report` does (-$0.001376, not $-0.001376;
new-user trial 25)."""

from __future__ import annotations

from decimal import Decimal

from promptcache.demo import _usd


def test_negative_usd_sign_before_the_dollar() -> None:
    assert _usd(Decimal("-0.001376")) == "-$0.001376"
    assert _usd(Decimal("0.5")) == "$0.500000"
    assert _usd(None) == "n/a"
