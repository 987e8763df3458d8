"""Session 8, usage: findings F1, F2 (report), F3, F4 and F12 of new-user trial 13.

* F1: a growing conversation's collapse was always ``prefix_changed`` (the last-breakpoint
  digest moves every turn); now the wrapper's ``kept_prefix`` decides.
* F4: fan-out requests that share a prefix but carry a later breakpoint each (auto_cache) never
  formed a ``concurrent_cold_writes`` group; now they group by the longest shared breakpoint
  digest, and the waste counts only the shared prefix's tokens.
* F2: ``report`` priced dated response / usage lines at today's price.
* F3: ``report`` showed cost ``?`` without a reason, and write/uncached counts it did not know.
* F12: ``report`` counted a streamed Anthropic response's message_start + message_delta lines
  as two requests and lost the cost.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import UsageRecord, UsageTracker, explicit_prices
from promptcache.usage.classify import classify_collapse

# BR-21's prices (the case's own table)
PRICES = explicit_prices(input=3, output=15, cache_read=0.3, cache_write_5m=3.75,
                         cache_write_1h=6)
MTOK = Decimal(10) ** 6


def rec(read: int, write: int, uncached: int = 10, **kw: Any) -> UsageRecord:
    fields: dict[str, Any] = {"provider": "anthropic", "model": "claude-sonnet-4-5",
                              "uncached_input": uncached, "cache_read": read,
                              "cache_write": write, "cache_write_5m": write,
                              "cache_write_1h": 0, "output": 5, **kw}
    return UsageRecord.model_validate(fields)


# ------------------------------------------------------------------------------------- record


def test_breakpoint_fields_round_trip_through_the_jsonl_sink(tmp_path: Path) -> None:
    from promptcache.usage import JsonlSink, read_jsonl

    r = rec(0, 1300, breakpoint_hashes=("s", "t"), breakpoint_tokens=(1212, 1300),
            kept_prefix=True, prefix_hash="t")
    with JsonlSink(tmp_path / "u.jsonl") as sink:
        sink.write(r)
        sink.write(rec(0, 1))  # without them: nothing written for them, defaults read back
    back = read_jsonl(tmp_path / "u.jsonl")
    assert back == [r, rec(0, 1)]
    assert back[1].breakpoint_hashes == () and back[1].kept_prefix is None


def test_breakpoint_tokens_must_match_the_hashes() -> None:
    with pytest.raises(ValueError, match="one count per breakpoint"):
        rec(0, 10, breakpoint_hashes=("a",), breakpoint_tokens=(1, 2))


# ----------------------------------------------------------------------------------------- F1


def _turns(kept: bool | None, gap: float = 60.0) -> list[UsageRecord]:
    """A growing conversation: each turn's last breakpoint (and prefix_hash) moves forward."""
    return [
        rec(0, 4000, start=0.0, session="s", prefix_hash="h1", breakpoint_hashes=("h1",)),
        rec(4000, 300, start=30.0, session="s", prefix_hash="h2",
            breakpoint_hashes=("h1", "h2"), kept_prefix=True),
        rec(0, 4600, start=30.0 + gap, session="s", prefix_hash="h3",
            breakpoint_hashes=("h2", "h3"), kept_prefix=kept),
    ]


@pytest.mark.parametrize(("kept", "gap", "cause"), [
    (True, 60.0, "unknown"),  # the history was kept: eviction / routing, not the payload
    (True, 400.0, "ttl_expired"),
    (False, 60.0, "prefix_changed"),
    (False, 400.0, "ttl_expired"),
])
def test_collapse_in_a_growing_conversation_follows_kept_prefix(
        kept: bool, gap: float, cause: str) -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    for r in _turns(kept, gap):
        t.add(r)
    collapse = [e for e in t.events if e.kind == "collapse"]
    assert [e.data["cause"] for e in collapse] == [cause]
    assert f"({cause})" in collapse[0].message


def test_collapse_without_kept_prefix_uses_the_breakpoint_digests_then_the_hash() -> None:
    prev = rec(4000, 300, start=0.0, session="s", prefix_hash="h2")
    # the new request has a breakpoint exactly where the previous prefix ended: kept
    grown = rec(0, 4600, start=10.0, session="s", prefix_hash="h3", breakpoint_hashes=("h2", "h3"))
    assert classify_collapse(prev, grown, 300.0) == "unknown"
    # records without the new fields behave as before
    assert classify_collapse(prev, rec(0, 4600, start=10.0, prefix_hash="x"), 300.0) == (
        "prefix_changed")
    assert classify_collapse(prev, rec(0, 4600, start=10.0, prefix_hash="h2"), 300.0) == (
        "unknown")


# ----------------------------------------------------------------------------------------- F4


def _fan_out(n: int, *, shared: int = 5000, suffix: int = 200) -> list[UsageRecord]:
    """BR-21 through auto_cache: a breakpoint on the shared system prompt (digest "S") and one
    at the end of each request's own user turn (digest "U<i>"): all sent at t=0, cold."""
    return [rec(0, shared + suffix, uncached=0, start=0.0, first_token=1.5, end=4.0,
                request_id=f"r{i}", prefix_hash=f"U{i}", breakpoint_hashes=("S", f"U{i}"),
                breakpoint_tokens=(shared, shared + suffix))
            for i in range(n)]


def test_fan_out_with_a_later_breakpoint_each_is_one_cold_write_group() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    for r in _fan_out(8):
        t.add(r)
    groups = t.cold_write_groups()
    assert len(groups) == 1
    g = groups[0]
    assert (g.key, g.writes, g.redundant_writes) == ("S", 8, 7)
    # only the shared 5,000 tokens were written again, not each request's own 200
    assert g.redundant_write_tokens == 7 * 5000
    assert g.wasted_usd == 7 * 5000 * (Decimal("3.75") - Decimal("0.3")) / MTOK
    events = [e for e in t.events if e.kind == "concurrent_cold_writes"]
    # reported as the group grows (2, 4, 8), each message with the count so far
    assert [e.data["writes"] for e in events] == [2, 4, 8]
    assert events[-1].message.startswith("8 requests so far wrote the same cold prefix")
    assert "35,000 tokens written again" in events[-1].message
    assert events[0].message.startswith("2 requests wrote the same cold prefix")


def test_cold_write_group_takes_the_longest_shared_prefix_and_recounts_the_waste() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)

    def w(i: int, hashes: tuple[str, ...], tokens: tuple[int, ...]) -> UsageRecord:
        return rec(0, tokens[-1], uncached=0, start=float(i), end=10.0, request_id=f"r{i}",
                   prefix_hash=hashes[-1], breakpoint_hashes=hashes, breakpoint_tokens=tokens)

    t.add(w(0, ("S", "T", "U0"), (3000, 4000, 4100)))
    t.add(w(1, ("S", "T", "U1"), (3000, 4000, 4100)))  # shares S and T: T is the longer
    [g] = t.cold_write_groups()
    assert g.key == "T" and g.redundant_write_tokens == 4000
    t.add(w(2, ("S", "V2"), (3000, 3500)))  # shares only S: the group's prefix is S now
    [g] = t.cold_write_groups()
    assert g.key == "S" and g.writes == 3 and g.redundant_write_tokens == 2 * 3000
    assert g.wasted_usd == 2 * 3000 * (Decimal("3.75") - Decimal("0.3")) / MTOK
    t.add(w(3, ("X", "Y"), (3000, 3100)))  # another prefix: its own (single) write
    assert [len(x.records) for x in t.cold_write_groups()] == [3]


def test_cold_writes_without_breakpoint_digests_group_as_before() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    t.add(rec(0, 5000, start=100.0, end=103.0, prefix_hash="h"))
    t.add(rec(0, 5000, start=100.5, end=104.0, prefix_hash="other"))
    t.add(rec(0, 5000, start=101.0, end=104.0, prefix_hash="h"))
    [g] = t.cold_write_groups()
    assert g.key == "h" and g.writes == 2 and g.redundant_write_tokens == 5000
    assert g.wasted_usd == 5000 * (Decimal("3.75") - Decimal("0.3")) / MTOK


# ----------------------------------------------------------------------------------- report


def _report(path: Path, *args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.output)
    return data


def _write(path: Path, *lines: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
