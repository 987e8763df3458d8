"""Trial 11, usage: the cheapest TTL policy keeps the longest TTL alive when the gap exceeds
every TTL, and the tracker / break-even entry points name a wrong argument instead of failing
deep inside (AttributeError, OverflowError, "'<' not supported")."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import (
    JsonlSink,
    MemorySink,
    UsageTracker,
    breakeven,
    parse_usage,
    ttl_policy,
)

M = Decimal(1_000_000)
SONNET = "claude-sonnet-4-6"  # $3 input, $3.75 5m write, $6 1h write, $0.30 read, $15 output


def _record() -> Any:
    return parse_usage({"input_tokens": 100, "output_tokens": 2, "cache_read_input_tokens": 0,
                        "cache_creation_input_tokens": 0}, provider="anthropic", model=SONNET)


def _one_line_exit_2(res: Any, start: str) -> None:
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(start), res.stderr


# ----------------------------------------------------------- 1. keepalive on the longest TTL


def test_gap_beyond_every_ttl_keeps_the_1h_entry_alive() -> None:
    res = ttl_policy(SONNET, 12_000, inter_arrival_seconds=4000)
    ping = 12_000 * Decimal("0.3") / M + Decimal(3) / M + Decimal(15) / M  # read + 1 in + 1 out
    hour = res.option("1h+keepalive")
    assert res.best.name == "1h+keepalive"
    assert hour.pings == 99  # one ping (every 3240 s) inside each 4000 s gap
    assert (hour.writes, hour.reads) == (1, 99)
    assert hour.ping_cost == 99 * ping
    assert hour.cost == 12_000 * Decimal(6) / M + 99 * 12_000 * Decimal("0.3") / M + 99 * ping
    assert hour.cost < Decimal("0.80") < res.option("none").cost == Decimal("3.6")
    assert res.option("5m+keepalive").pings == 99 * 14  # still listed and priced as before


def test_1h_keepalive_listed_only_when_the_gap_exceeds_1h() -> None:
    names = [o.name for o in ttl_policy(SONNET, 12_000, 400).options]
    assert names == ["none", "5m", "1h", "5m+keepalive"]  # within 1h it would be plain "1h"
    names = [o.name for o in ttl_policy(SONNET, 12_000, 4000).options]
    assert names == ["none", "5m", "1h", "5m+keepalive", "1h+keepalive"]


def test_1h_keepalive_respects_the_spend_cap() -> None:
    ping = 12_000 * Decimal("0.3") / M + Decimal(18) / M
    res = ttl_policy(SONNET, 12_000, 4000, requests=5, keepalive_cap_usd=ping * 2)
    opt = res.option("1h+keepalive")
    assert opt.capped and opt.pings == 2
    assert opt.cost == 3 * 12_000 * Decimal(6) / M + 2 * 12_000 * Decimal("0.3") / M + 2 * ping


def test_keepalive_interval_longer_than_5m_prices_1h_keepalive() -> None:
    res = ttl_policy(SONNET, 12_000, 4000, keepalive_interval=1000)
    assert not res.option("5m+keepalive").available
    assert res.option("1h+keepalive").pings == 99 * 3
    with pytest.raises(ValueError, match="keepalive_interval"):
        ttl_policy(SONNET, 12_000, 4000, keepalive_interval=4000)


def test_cli_interval_4000_picks_1h_keepalive() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", SONNET, "--prefix-tokens", "12000",
                                    "--interval", "4000"])
    assert res.exit_code == 0, res.output
    assert "cheapest: 1h+keepalive (saves $2.8134 vs no caching)" in res.output


def test_cli_no_caching_cheapest_reads_sensibly() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", SONNET, "--prefix-tokens", "500",
                                    "--interval", "60"])
    assert res.exit_code == 0, res.output
    assert "cheapest: none (no caching is cheapest at this interval)" in res.output
    assert "saves $0.0000" not in res.output


# ----------------------------------------------------------- 3. named errors


@pytest.mark.parametrize("obj", [None, {"input_tokens": 1}, "hello", object()])
def test_add_refuses_a_non_record(obj: Any) -> None:
    tracker = UsageTracker()
    with pytest.raises(TypeError, match=r"add\(\) takes a UsageRecord.*add_response\(obj\) or "
                                        r"parse_usage\(obj\)"):
        tracker.add(obj)
    assert tracker.summary().requests == 0


def test_add_refuses_an_sdk_response_and_add_response_takes_it() -> None:
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    tracker = UsageTracker()
    with LocalBackend(**SMALL_MODEL) as be:
        resp = be.anthropic().messages.create(model=SONNET, max_tokens=2,
                                              messages=[{"role": "user", "content": "x"}])
    with pytest.raises(TypeError, match=r"add\(\) takes a UsageRecord, got Message"):
        tracker.add(resp)
    tracker.add_response(resp)
    assert tracker.summary().requests == 1


def test_aadd_refuses_a_non_record() -> None:
    import asyncio

    with pytest.raises(TypeError, match=r"aadd\(\) takes a UsageRecord"):
        asyncio.run(UsageTracker().aadd({"input_tokens": 1}))  # type: ignore[arg-type]


@pytest.mark.parametrize("sinks", ["u.jsonl", Path("u.jsonl"), ["u.jsonl"]])
def test_sinks_given_a_path_fail_at_construction(sinks: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=r"wrap it in JsonlSink\(\.\.\.\)"):
        UsageTracker(sinks=sinks)
    assert not (tmp_path / "u.jsonl").exists()


@pytest.mark.parametrize("sinks", [MemorySink(), [object()], 5])
def test_sinks_without_write_fail_at_construction(sinks: Any) -> None:
    with pytest.raises(TypeError, match="sinks"):
        UsageTracker(sinks=sinks)


def test_valid_sinks_still_work(tmp_path: Path) -> None:
    mem = MemorySink()
    with JsonlSink(tmp_path / "u.jsonl") as js:
        tracker = UsageTracker(sinks=[mem, js])
        tracker.add(_record())
    assert len(mem) == 1
    assert (tmp_path / "u.jsonl").read_text().count("\n") == 1
    assert UsageTracker(sinks=None).add(_record()) == ()


@pytest.mark.parametrize(("value", "exc"), [("5000", TypeError), (None, TypeError),
                                            (True, TypeError), (5000.5, ValueError),
                                            (-5, ValueError), (float("nan"), ValueError)])
def test_breakeven_prefix_tokens_checked(value: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="prefix_tokens"):
        breakeven(SONNET, value)


def test_breakeven_integral_float_accepted() -> None:
    assert breakeven(SONNET, 5000.0).prefix_tokens == 5000
    assert isinstance(breakeven(SONNET, 5000.0).prefix_tokens, int)


@pytest.mark.parametrize("gap", [float("nan"), float("inf"), -1, 0])
def test_ttl_policy_interval_checked(gap: float) -> None:
    with pytest.raises(ValueError, match="inter_arrival_seconds"):
        ttl_policy(SONNET, 5000, inter_arrival_seconds=gap)


def test_ttl_policy_interval_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="inter_arrival_seconds"):
        ttl_policy(SONNET, 5000, inter_arrival_seconds="400")  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [-1, float("nan"), float("inf"), "abc"])
def test_ttl_policy_keepalive_cap_checked(cap: Any) -> None:
    with pytest.raises(ValueError, match="keepalive_cap_usd"):
        ttl_policy(SONNET, 5000, inter_arrival_seconds=400, keepalive_cap_usd=cap)


@pytest.mark.parametrize(("kwargs", "name"), [({"requests": 0}, "requests"),
                                              ({"suffix_tokens": 1.5}, "suffix_tokens"),
                                              ({"output_tokens": -1}, "output_tokens"),
                                              ({"keepalive_max_pings": -1}, "keepalive_max_pings"),
                                              ({"keepalive_interval": float("nan")},
                                               "keepalive_interval")])
def test_ttl_policy_other_arguments_named(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ttl_policy(SONNET, 5000, 400, **kwargs)


@pytest.mark.parametrize(("args", "start"), [
    (["--interval", "nan"], "promptcache: --interval: inter_arrival_seconds"),
    (["--interval", "inf"], "promptcache: --interval: inter_arrival_seconds"),
    (["--interval", "400", "--keepalive-cap", "nan"], "promptcache: --keepalive-cap: "),
    (["--interval", "400", "--keepalive-cap", "inf"], "promptcache: --keepalive-cap: "),
])
def test_cli_bad_numbers_exit_2_one_line(args: list[str], start: str) -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", SONNET, "--prefix-tokens", "12000",
                                    *args])
    _one_line_exit_2(res, start)
