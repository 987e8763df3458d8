"""A record of a model without a cache-write category (gpt-4o, before GPT-5.6) that gives its
uncached part but not its inclusive input count (a hand-built or third-party log line) was
"cost unknown: cache writes not reported", and `report` said the model bills writes at their
own rate: nothing is billed as a write there. A GPT-5.6+ record, whose writes are billed,
stays unknown."""

from __future__ import annotations

from decimal import Decimal

from promptcache.usage.record import UsageRecord
from promptcache.usage.tracker import UsageTracker


def _rec(model: str) -> UsageRecord:
    return UsageRecord.model_validate({"provider": "openai", "model": model,
                                       "uncached_input": 1000, "cache_read": 0, "output": 10})


def test_no_write_category_prices_the_record() -> None:
    cost = UsageTracker(warn=False).cost_of(_rec("gpt-4o"))
    assert cost is not None and cost.total is not None
    # 1,000 input tokens at $2.50/MTok + 10 output tokens at $10/MTok
    assert cost.total == Decimal("0.0026")
    assert "cache writes not reported" not in cost.notes


def test_billed_writes_unknown_stay_unknown() -> None:
    cost = UsageTracker(warn=False).cost_of(_rec("gpt-5.6-sol"))
    assert cost is None or cost.total is None
