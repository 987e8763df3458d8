"""``promptcache breakeven`` and the functions behind it on out-of-range numbers (trial 18
findings 2 and 8): every numeric option refuses a huge, negative, non-finite or non-numeric
value with exit 2 naming the option (never a traceback, never a meaningless figure), and
``breakeven()`` / ``ttl_policy()`` raise a ValueError naming the argument."""

from __future__ import annotations

from decimal import Decimal

import pytest
from click.testing import CliRunner, Result

from promptcache.cli import main
from promptcache.usage import breakeven, ttl_policy
from promptcache.usage.breakeven import MAX_REQUESTS, MAX_SPAN_SECONDS
from promptcache.usage.cli import _money, _money_short
from promptcache.usage.record import MAX_TOKENS

MODEL = ["breakeven", "--model", "claude-sonnet-4-6"]


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, [*MODEL, *args])


def _refused(res: Result, *options: str) -> str:
    """Exit 2 through the CLI's own error path (SystemExit, not an exception caught by the
    runner), one message naming every option in ``options``, no traceback or pydantic dump."""
    assert isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2, res.output
    text = res.output
    for option in options:
        assert option in text, text
    assert "Traceback" not in text and "pydantic" not in text
    assert "validation error" not in text
    return text


@pytest.mark.parametrize("value", ["1e20", "1e25", "1e30", "1e308", "253402300801"])
def test_huge_interval_is_refused_naming_the_option_and_range(value: str) -> None:
    text = _refused(_run("--prefix-tokens", "12000", "--interval", value), "--interval")
    assert f"{MAX_SPAN_SECONDS:.0f}" in text


def test_the_longest_interval_still_prices() -> None:
    res = _run("--prefix-tokens", "12000", "--interval", f"{MAX_SPAN_SECONDS:.0f}",
               "--requests", "2")
    assert res.exit_code == 0, res.output
    assert "cheapest: none" in res.output


@pytest.mark.parametrize("interval", [None, "400"])
@pytest.mark.parametrize("value", ["99999999999999999999999", str(MAX_TOKENS + 1)])
def test_huge_prefix_is_refused_with_or_without_interval(interval: str | None,
                                                         value: str) -> None:
    extra = [] if interval is None else ["--interval", interval]
    text = _refused(_run("--prefix-tokens", value, *extra), "--prefix-tokens")
    assert f"{MAX_TOKENS:,}" in text


def test_the_largest_plausible_prefix_is_priced() -> None:
    res = _run("--prefix-tokens", str(MAX_TOKENS), "--interval", "400")
    assert res.exit_code == 0, res.output
    assert f"{MAX_TOKENS}-token prefix" in res.output


@pytest.mark.parametrize(("option", "value"), [
    ("--requests", str(MAX_REQUESTS + 1)), ("--requests", "99999999999999999999999"),
    ("--suffix-tokens", str(MAX_TOKENS + 1)), ("--output-tokens", "99999999999999999999999"),
])
def test_huge_counts_of_the_comparison_are_refused(option: str, value: str) -> None:
    _refused(_run("--prefix-tokens", "12000", "--interval", "400", option, value), option)


def test_one_request_over_the_token_bound_names_both_options() -> None:
    half = str(MAX_TOKENS // 2 + 1)
    _refused(_run("--prefix-tokens", half, "--suffix-tokens", half, "--interval", "400"),
             "--prefix-tokens", "--suffix-tokens")


def test_a_horizon_past_the_year_9999_names_requests_and_interval() -> None:
    _refused(_run("--prefix-tokens", "12000", "--interval", "1e10", "--requests", "100"),
             "--requests", "--interval")


@pytest.mark.parametrize(("option", "values"), [
    ("--interval", ["0", "-1", "nan", "inf", "-inf", "abc", ""]),
    ("--prefix-tokens", ["-1", "1.5", "nan", "inf", "1e30", "abc"]),
    ("--requests", ["0", "-1", "1.5", "nan", "inf", "1e30", "abc"]),
    ("--suffix-tokens", ["-1", "1.5", "nan", "inf", "1e30", "abc"]),
    ("--output-tokens", ["-1", "1.5", "nan", "inf", "1e30", "abc"]),
    ("--keepalive-cap", ["-1", "nan", "inf", "1e400", "abc"]),
])
def test_bad_values_exit_2_naming_the_option(option: str, values: list[str]) -> None:
    base = {"--prefix-tokens": "12000", "--interval": "400"}
    for value in values:
        args = {**base, option: value}
        _refused(_run(*[x for kv in args.items() for x in kv]), option)


@pytest.mark.parametrize("cap", ["1e308", "99999999999999999999999"])
def test_a_huge_keepalive_cap_is_no_cap(cap: str) -> None:
    """A cap larger than the pings cost is no cap (the old code's ``cap // ping`` raised
    decimal.InvalidOperation past 28 digits)."""
    res = _run("--prefix-tokens", "12000", "--interval", "7200", "--keepalive-cap", cap)
    free = _run("--prefix-tokens", "12000", "--interval", "7200")
    assert res.exit_code == 0, res.output
    assert res.output == free.output


def test_money_formats_any_amount() -> None:
    big = Decimal("1" + "0" * 30 + ".25")
    assert _money(big) == "$1" + "0" * 30 + ".250000"
    assert _money(big.copy_negate(), "0.0001") == "-$1" + "0" * 30 + ".2500"
    assert _money_short(big) == "$1" + "0" * 30 + ".2500"


# ----------------------------------------------------------------------- the Python API


def test_breakeven_refuses_an_implausible_prefix() -> None:
    assert breakeven("claude-sonnet-4-6", MAX_TOKENS).requests == 2
    for value in (MAX_TOKENS + 1, 10**23, 1e30):
        with pytest.raises(ValueError, match=r"^prefix_tokens must be in \[0, 1,000,000,000\]"):
            breakeven("claude-sonnet-4-6", value)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"inter_arrival_seconds": 1e30}, "inter_arrival_seconds"),
    ({"inter_arrival_seconds": 10**400}, "inter_arrival_seconds"),
    ({"inter_arrival_seconds": Decimal("1e400")}, "inter_arrival_seconds"),
    ({"in_memory_seconds": 1e300}, "in_memory_seconds"),
    ({"keepalive_interval": 1e-300, "inter_arrival_seconds": 7200}, "keepalive_interval"),
    ({"requests": 10**30}, "requests"),
    ({"inter_arrival_seconds": 1e10}, r"requests x inter_arrival_seconds"),
    ({"prefix_tokens": 10**23}, "prefix_tokens"),
    ({"suffix_tokens": MAX_TOKENS + 1}, "suffix_tokens"),
    ({"output_tokens": 1e30}, "output_tokens"),
    ({"ping_input_tokens": 10**12, "inter_arrival_seconds": 7200}, "ping_input_tokens"),
    ({"ping_output_tokens": 10**12, "inter_arrival_seconds": 7200}, "ping_output_tokens"),
    ({"prefix_tokens": MAX_TOKENS, "suffix_tokens": 1}, r"prefix_tokens \+ suffix_tokens"),
])
def test_ttl_policy_raises_a_value_error_naming_the_argument(kwargs: dict[str, object],
                                                             name: str) -> None:
    args: dict[str, object] = {"prefix_tokens": 12_000, "inter_arrival_seconds": 400}
    args.update(kwargs)
    model = "gpt-5" if "in_memory_seconds" in kwargs else "claude-sonnet-4-6"
    with pytest.raises(ValueError, match=f"^{name}") as info:
        ttl_policy(model, **args)  # type: ignore[arg-type]
    assert "pydantic" not in str(info.value)


def test_ttl_policy_at_the_bounds_prices_exactly() -> None:
    longest = ttl_policy("claude-sonnet-4-6", 12_000, MAX_SPAN_SECONDS, requests=2)
    assert longest.best.name == "none"
    many = ttl_policy("claude-sonnet-4-6", 12_000, 0.001, requests=MAX_REQUESTS)
    one = ttl_policy("claude-sonnet-4-6", 12_000, 0.001, requests=2)
    # one write, then reads: linear in the request count
    read = one.option("5m").cost - breakeven("claude-sonnet-4-6", 12_000).write_usd
    assert many.option("5m").cost == one.option("5m").cost + (MAX_REQUESTS - 2) * read
    capped = ttl_policy("claude-sonnet-4-6", 12_000, 7200, keepalive_cap_usd=Decimal("1e300"))
    assert capped.options == ttl_policy("claude-sonnet-4-6", 12_000, 7200).options
    huge_cap = ttl_policy("claude-sonnet-4-6", 12_000, 7200, keepalive_max_pings=10**40)
    assert huge_cap.best == capped.best
