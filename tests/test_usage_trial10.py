"""New-user trial 10: ``report`` prices a request log (the model named by the request), gives
provider-specific zero-hit advice, and skips an incomplete last line of a log being written."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import UsageRecord, UsageTracker

ANTHROPIC_USAGE = {"input_tokens": 10, "cache_read_input_tokens": 1000,
                   "cache_creation_input_tokens": 0, "output_tokens": 5}
OPENAI_USAGE = {"prompt_tokens": 2000, "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 1024}}


def _report(path: Path, *extra: str) -> Any:
    return CliRunner().invoke(main, ["report", str(path), "--format", "json", *extra])


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_report_prices_each_line_by_the_model_its_request_names(tmp_path: Path) -> None:
    log = _write(tmp_path / "requests.jsonl", [
        {"request": {"model": "claude-sonnet-4-5", "messages": []}, "usage": ANTHROPIC_USAGE},
        {"body": {"model": "gpt-4o", "messages": []}, "usage": OPENAI_USAGE},
    ])
    out = _report(log)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert {g["model"]: g["cost_usd"] is not None for g in doc["groups"]} == {
        "claude-sonnet-4-5": True, "gpt-4o": True}
    assert doc["cost_unknown"] == []
    claude = next(g for g in doc["groups"] if g["model"] == "claude-sonnet-4-5")
    assert claude["cost_usd"] == "0.000405"  # as when the response names the model


def test_report_model_precedence(tmp_path: Path) -> None:
    # the response's model (what served the request) wins over the request's; --model over all
    log = _write(tmp_path / "requests.jsonl", [
        {"request": {"model": "claude-sonnet-4-5", "messages": []},
         "response": {"model": "claude-haiku-4-5", "usage": ANTHROPIC_USAGE}},
        {"model": "claude-opus-4-1", "request": {"model": "claude-sonnet-4-5", "messages": []},
         "usage": ANTHROPIC_USAGE},
    ])
    doc = json.loads(_report(log).output)
    assert sorted(g["model"] for g in doc["groups"]) == ["claude-haiku-4-5", "claude-opus-4-1"]
    doc = json.loads(_report(log, "--model", "claude-sonnet-4-5").output)
    assert [g["model"] for g in doc["groups"]] == ["claude-sonnet-4-5"]


def _zero_hit_message(provider: str, model: str, **counts: Any) -> str:
    t = UsageTracker(warmup=2, warn=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            t.add(UsageRecord(provider=provider, model=model, cacheable=True, **counts))
    [alarm] = [e for e in t.events if e.kind == "zero_hit_alarm"]
    return alarm.message


def test_zero_hit_advice_is_the_providers() -> None:
    openai = _zero_hit_message("openai", "gpt-4o", uncached_input=3000, cache_read=0,
                               input_total=3000, output=1)
    assert "prompt_cache_key" in openai and "1,024 tokens" in openai
    assert "parallel cold writes" not in openai and "breakpoint" not in openai
    claude = _zero_hit_message("anthropic", "claude-sonnet-4-5", uncached_input=10,
                               cache_read=0, cache_write=3000, output=1)
    assert "a breakpoint after per-request content" in claude
    assert "prompt_cache_key" not in claude


def test_report_skips_an_incomplete_last_line_with_a_warning(tmp_path: Path) -> None:
    line = json.dumps({"model": "claude-sonnet-4-5", "usage": ANTHROPIC_USAGE})
    body = (line + "\n") * 3
    log = tmp_path / "live.jsonl"
    log.write_text(body + line[:40])
    warning = (f"promptcache: {log}: line 4: incomplete last line (no newline at end), "
               "skipped\n")
    out = _report(log)
    assert out.exit_code == 0, out.output
    assert out.stderr == warning
    assert json.loads(out.stdout)["total"]["requests"] == 3
    out = CliRunner().invoke(main, ["report", "-", "--format", "csv"], input=body + line[:40])
    assert out.exit_code == 0 and out.stdout.splitlines()[-1].startswith("TOTAL,,3,")
    assert out.stderr == warning.replace(str(log), "-")
    # a broken line ending with a newline, or one in the middle, is still bad input
    for broken in (body + line[:40] + "\n", body + line[:40] + "\n" + body):
        log.write_text(broken)
        out = _report(log)
        assert out.exit_code == 2 and f"{log}:4: not JSON" in out.stderr, out.output


def test_the_catalog_lookup_of_a_model_is_cached_per_tracker_add(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 11: the lookup cache had moved off the policy lookup, so every record of a model
    the catalog does not know ran its closest-id search again (report on 1,000 such lines: 5.5 s
    instead of 0.8 s). One lookup per model, however many records."""
    from promptcache.catalog import _policy, find_policy
    from promptcache.usage import UsageRecord, UsageTracker

    find_policy.cache_clear()
    calls: list[str] = []
    real = _policy.resolve_model_id

    def counted(model: str) -> object:
        calls.append(model)
        return real(model)

    monkeypatch.setattr(_policy, "resolve_model_id", counted)
    t = UsageTracker()
    for i in range(20):
        t.add(UsageRecord(provider="anthropic", model="my-private-model-7", uncached_input=10,
                          cache_read=0, cache_write_5m=0, output=1, label=f"l{i % 2}"))
    assert calls.count("my-private-model-7") == 1, calls


def test_report_does_not_hold_gpt_5_6_reads_to_the_128_token_grid(tmp_path: Path) -> None:
    """New-user trial 12: GPT-5.6+ reads end at a breakpoint, not on the 1,024 + 128k grid
    (hosted-api-rules.md 2.3); report flagged every such read as anomalous. gpt-4o keeps it."""
    def line(model: str, cached: int) -> dict[str, Any]:
        return {"model": model, "usage": {"prompt_tokens": 2000, "completion_tokens": 1,
                                          "prompt_tokens_details": {"cached_tokens": cached}}}

    log = _write(tmp_path / "u.jsonl", [line("gpt-5.6", 1470), line("gpt-4o", 1470)])
    res = _report(log)
    assert res.exit_code == 0, res.output
    odd = [a for a in json.loads(res.output)["anomalies"] if a["kind"] == "anomalous"]
    assert [a["count"] for a in odd] == [1] and "1470" in odd[0]["message"]


def test_find_policy_is_lenient_for_any_non_string() -> None:
    """Review 12: the public lenient lookup raised TypeError (unhashable) for a list or dict,
    where its docstring promises None for anything that is not a model id string."""
    from promptcache.catalog import find_policy

    for bad in (["gpt-4o"], {"id": "gpt-4o"}, 5, None, ""):
        assert find_policy(bad) is None
    assert find_policy("gpt-4o") is not None
