"""Trial 13: explain prices misses at the line's date (F2), says $0 with no miss (F5), runs
the append-only check on a healthy usage-only log (F9); DeepSeek / Gemini priced from
genai-prices (F8)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.catalog import get_prices
from promptcache.cli import main
from promptcache.diff import explain
from tests.cases import filler

SONNET55 = "claude-sonnet-5-5"
SEPT = datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)  # before the 2026-10-07 read price change
NOV = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def _request(question: str) -> dict[str, Any]:
    return {"model": SONNET55, "max_tokens": 5,
            "system": [{"type": "text", "text": filler(1500, "sys").strip(),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": question}]}


def _usage(read: int, write: int) -> dict[str, int]:
    return {"input_tokens": 5, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": 5}


def _ttl_log(start: datetime) -> list[dict[str, Any]]:
    """4 requests of one session; the 4th comes 350 s after the 3rd's read (5m entry expired)
    and rewrites the 2,000 tokens the others read."""
    t0 = start.timestamp()
    steps = [(0, 0, 2000), (200, 2000, 0), (450, 2000, 0), (800, 0, 2000)]
    return [{"request": _request(f"q{k}"), "timestamp": t0 + dt, "session_id": "s",
             "usage": _usage(read, write)} for k, (dt, read, write) in enumerate(steps)]


def _miss_usd(at: datetime, tokens: int) -> float:
    p = get_prices(SONNET55, at=at)
    assert p.cache_write_5m is not None and p.cache_read is not None
    return float(tokens * (p.cache_write_5m - p.cache_read) / Decimal(1_000_000))


# ------------------------------------------------------------------ F2: the line's date


def test_a_miss_is_priced_at_the_price_in_force_on_its_line_s_date() -> None:
    sept, nov = explain(_ttl_log(SEPT)), explain(_ttl_log(NOV))
    for report in (sept, nov):
        assert report.misses == 1 and report.lost_tokens == 2000
        assert report.requests[-1].cause == "ttl_expired"
    # the read price fell from $0.20 to $0.10 on 2026-10-07: the September miss cost more
    # than today's price says (2,000 x ($2.50 - $0.20) / MTok)
    assert _miss_usd(SEPT, 2000) != _miss_usd(NOV, 2000)
    assert sept.miss_cost_usd == pytest.approx(_miss_usd(SEPT, 2000))
    assert sept.miss_cost_usd == pytest.approx(0.0046)
    assert nov.miss_cost_usd == pytest.approx(_miss_usd(NOV, 2000))


def test_a_usage_only_regression_is_priced_at_its_line_s_date() -> None:
    t0 = SEPT.timestamp()
    lines = [{"model": SONNET55, "session_id": "s", "timestamp": t0 + dt, "usage": _usage(r, w)}
             for dt, r, w in ((0, 0, 3000), (60, 3000, 500), (120, 1000, 0))]
    row = explain(lines).requests[-1]
    assert row.status == "prefix_regression" and row.lost_tokens == 2500
    assert row.miss_cost_usd == pytest.approx(_miss_usd(SEPT, 2500))


def test_relative_times_price_at_today_s_rows() -> None:
    """A log in relative seconds (from 0) is not a 1970 log: today's prices."""
    lines = _ttl_log(datetime.fromtimestamp(0, tz=UTC))
    assert explain(lines).miss_cost_usd == pytest.approx(
        _miss_usd(datetime.now(tz=UTC), 2000))


# ------------------------------------------------------------------ F5: no miss costs $0


def test_a_log_without_a_miss_costs_zero_not_unknown(tmp_path: Path) -> None:
    lines = _ttl_log(NOV)[:3]  # cold start and two hits
    report = explain(lines)
    assert report.misses == 0 and report.miss_cost_usd == 0.0
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "0 misses, 0 tokens rewritten, $0.000000 extra" in text
    assert "unknown" not in text
    out = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert json.loads(out.output)["miss_cost_usd"] == 0


def test_a_miss_with_unknown_prices_is_still_unknown() -> None:
    lines = [{"model": "my-own-model", "session_id": "s", "usage": _usage(r, w)}
             for r, w in ((0, 3000), (3000, 500), (1000, 0))]
    report = explain(lines)
    assert report.misses == 1 and report.miss_cost_usd is None


# ------------------------------------------------ F9: usage-only logs, healthy or not

BR18_HEALTHY = [(0, 2634), (2634, 398), (3032, 861), (3893, 534)]  # case BR-18's control
BR18 = [(31853, 2230), (34083, 4363), (38446, 2100), (31073, 9600)]


def _usage_log(tmp_path: Path, series: list[tuple[int, int]], name: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"model": "claude-sonnet-4-5", "session_id": "s1",
                                        "usage": _usage(r, w)}) + "\n" for r, w in series))
    return path


def test_a_healthy_usage_only_log_passes_the_append_only_check(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18_HEALTHY, "h.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "0 misses" in text
    assert "append-only check read[n] >= read[n-1] + write[n-1] held on all 3 lines" in text
    out = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["misses"] == 0 and doc["miss_cost_usd"] == 0
    assert [r["status"] for r in doc["requests"]] == ["cold_start", "hit", "hit", "hit"]


def test_the_unhealthy_series_runs_the_same_check(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18, "u.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 1, out.output
    text = " ".join(out.output.split())
    assert "prefix_regression" in text and "failed on 1 of 3 lines" in text


def test_a_usage_log_with_nothing_to_compare_is_still_refused(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18_HEALTHY[:1], "one.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 2
    assert "no two lines of one session and model" in out.output


def test_explain_help_states_the_usage_only_exit_codes() -> None:
    out = CliRunner().invoke(main, ["explain", "--help"])
    text = " ".join(out.output.split())
    assert "exit 0 when it holds on every pair of lines it compared" in text


# ------------------------------------------------ F8: other providers from genai-prices

AT = date(2026, 11, 1)
NOON = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _genai_row(provider: str, model: str, at: datetime) -> Any:
    """The price genai-prices' own bundled data gives (the source, read directly)."""
    from genai_prices.data import providers

    prov = next(p for p in providers if p.id == provider)
    found = prov.find_model(model)
    assert found is not None
    return found.get_prices(at)


@pytest.mark.parametrize(("ref", "provider", "model"), [
    ("deepseek-chat", "deepseek", "deepseek-chat"),
    ("deepseek/deepseek-chat", "deepseek", "deepseek-chat"),
    ("gemini-2.5-flash", "google", "gemini-2.5-flash"),
    ("models/gemini-2.5-flash", "google", "gemini-2.5-flash"),
])
def test_deepseek_and_gemini_are_priced_from_genai_prices(ref: str, provider: str,
                                                          model: str) -> None:
    p = get_prices(ref, at=NOON)
    row = _genai_row(provider, model, NOON)
    assert p.model_id == model and p.provider is None
    assert (p.input, p.output, p.cache_read) == (
        row.input_mtok, row.output_mtok, row.cache_read_mtok)
    # a cache miss is plain input on both: no write price
    assert p.cache_write is None and p.cache_write_5m is None and p.cache_write_1h is None
    assert p.source.kind == "genai-prices" and repr(provider) in (p.source.note or "")


def test_deepseek_time_of_day_prices_follow_the_request_time() -> None:
    day, night = datetime(2026, 11, 1, 10, tzinfo=UTC), datetime(2026, 11, 1, 20, tzinfo=UTC)
    for at in (day, night):
        assert get_prices("deepseek-chat", at=at).input == \
            _genai_row("deepseek", "deepseek-chat", at).input_mtok
    assert get_prices("deepseek-chat", at=day).input != get_prices("deepseek-chat",
                                                                    at=night).input


def test_deepseek_without_a_time_is_priced_at_noon_utc_not_the_hour_asked() -> None:
    p = get_prices("deepseek-chat")
    assert (p.at.hour, p.at.minute) == (12, 0)
    assert p.input == _genai_row("deepseek", "deepseek-chat", p.at).input_mtok
    assert "12:00 UTC" in (p.source.note or "")


def test_other_providers_give_only_their_own_models(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptcache.catalog import _prices
    from promptcache.catalog._prices import UnknownPriceError

    # genai-prices lists Claude under google too (Vertex AI prices): never taken from there
    monkeypatch.setattr(_prices, "_GENAI_PROVIDERS", ())
    assert _prices._genai_model(["claude-3-opus"], None) is None
    monkeypatch.undo()
    # providers outside DeepSeek / Google (resellers, hosts of open models) are not searched
    with pytest.raises(UnknownPriceError):
        get_prices("llama-3.1-8b")


def test_catalog_models_keep_their_anthropic_and_openai_prices() -> None:
    from promptcache.catalog._prices import catalog_prices_for, genai_prices_for

    for model, provider in (("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "openai")):
        p = get_prices(model, at=AT)
        ref = genai_prices_for(model, at=AT) or catalog_prices_for(model, at=AT)
        assert ref is not None and p.provider == provider
        assert p.model_dump(include={"input", "output", "cache_read", "cache_write_5m",
                                     "cache_write_1h", "cache_write"}) == \
            ref.model_dump(include={"input", "output", "cache_read", "cache_write_5m",
                                    "cache_write_1h", "cache_write"})


DEEPSEEK = {"model": "deepseek-chat", "usage": {"prompt_tokens": 1000, "completion_tokens": 10,
                                                "prompt_cache_hit_tokens": 800,
                                                "prompt_cache_miss_tokens": 200}}
GEMINI = {"model": "gemini-2.5-flash", "usage_metadata": {
    "prompt_token_count": 5000, "cached_content_token_count": 4000,
    "candidates_token_count": 10}}


def test_the_tracker_prices_deepseek_and_gemini_usage() -> None:
    from promptcache.usage import UsageTracker, parse_usage

    start = NOON.timestamp()
    for resp, (uncached, read, out) in ((DEEPSEEK, (200, 800, 10)),
                                        (GEMINI, (1000, 4000, 10))):
        rec = parse_usage(resp).model_copy(update={"start": start, "model": resp["model"]})
        tracker = UsageTracker()
        tracker.add(rec)
        p = get_prices(str(resp["model"]), at=NOON)
        assert p.cache_read is not None
        want = (uncached * p.input + read * p.cache_read + out * p.output) / Decimal(10**6)
        cost = tracker.summary().cost
        assert cost is not None and Decimal(str(cost)) == want


def test_report_prices_deepseek_and_gemini_and_accepts_model_deepseek(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps(DEEPSEEK) + "\n" + json.dumps(GEMINI) + "\n")
    out = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["total"]["cost_usd"] is not None and not doc.get("cost_unknown")
    single = tmp_path / "d.jsonl"
    single.write_text(json.dumps({"usage": DEEPSEEK["usage"]}) + "\n")
    out = CliRunner().invoke(main, ["report", str(single), "--model", "deepseek-chat",
                                    "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["total"]["cost_usd"] is not None


def test_diff_prices_the_miss_at_b_s_send_time() -> None:
    """diff() with timestamps priced at today's rows (explain did since the eighth session):
    claude-sonnet-5-5's read price changed on 2026-10-07 (catalog), so a miss on 2026-09-21
    costs (write - read) at the September read price, more than the same miss in November."""
    from promptcache import diff

    system = "Stable rules for the agent. " * 400
    a = {"model": "claude-sonnet-5-5", "max_tokens": 5,
         "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
         "messages": [{"role": "user", "content": "hi"}]}
    b = {**a, "system": [{"type": "text", "text": "Changed. " + system,
                          "cache_control": {"type": "ephemeral"}}]}

    def cost(day: str) -> float:
        r = diff(a, b, timestamps=(f"{day}T10:00:00Z", f"{day}T10:01:00Z"))
        assert r.lost_tokens and r.miss_cost_usd is not None
        return float(r.miss_cost_usd) / r.lost_tokens

    sept, nov = cost("2026-09-21"), cost("2026-11-18")
    assert sept < nov  # a higher read price then: rewriting cost less over reading
    assert diff(a, b, timestamps=(0.0, 60.0)).miss_cost_usd == diff(a, b).miss_cost_usd


def test_deepseek_priced_for_a_date_uses_noon_not_midnight() -> None:
    """Review 13: a plain date (no time of day) was priced at midnight UTC, inside DeepSeek's
    off-peak window (half price), while at=None deliberately takes 12:00 UTC."""
    from datetime import UTC, date, datetime

    from promptcache.catalog import get_prices

    noon = get_prices("deepseek-chat", at=datetime(2026, 11, 2, 12, tzinfo=UTC))
    assert get_prices("deepseek-chat", at=date(2026, 11, 2)).input == noon.input
    assert get_prices("deepseek-chat",
                      at=datetime(2026, 11, 2, 18, tzinfo=UTC)).input < noon.input
