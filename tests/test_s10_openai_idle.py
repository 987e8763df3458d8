"""OpenAI automatic caching (models before GPT-5.6) has no hard TTL: in-memory entries are
"usually cleared after 5-10 min of inactivity; kept up to 1 h off-peak; always removed within
1 h of last use", ``prompt_cache_retention: "24h"`` keeps them up to 24 h, and the default
retention of a model that accepts both is a CONFLICT (hosted-api-rules.md 2.1-2.2). ``diff``
and ``explain`` treated a gap over 300 s as a certain expiry (new-user trial 15, F2): the
lifetimes are now catalog data (``idle_lifetime``), a gap past 5 min and within the certain
bound is a warning that cuts nothing, and only past the certain bound is an expiry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.diff import diff, explain
from tests.cases import filler

T0 = 1_790_000_000.0


def _request(model: str, question: str = "q", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": filler(3000)},
                                         {"role": "user", "content": question}], **extra}


def _diff(model: str, gap: float, **extra: Any) -> Any:
    return diff(_request(model, **extra), _request(model, **extra),
                timestamps=(T0, T0 + gap))


def _ttl(r: Any) -> Any:
    return next((c for c in r.causes if c.code == "ttl_expired"), None)


def test_catalog_records_the_idle_lifetimes_with_sources() -> None:
    gpt4o = get_policy("gpt-4o")
    assert gpt4o.sources["idle_lifetime"].tag == "O2"
    b = gpt4o.idle_bounds()
    assert (b.usual_s, b.max_s, b.retention, b.default_unknown) == (300, 3600, "in_memory",
                                                                    False)
    gpt5 = get_policy("gpt-5")
    assert gpt5.idle_bounds("24h")[:3] == (None, 86400, "24h")
    assert gpt5.idle_bounds("in_memory")[:2] == (300, 3600)
    unknown = gpt5.idle_bounds()  # accepts both, none sent: the default depends on the org
    assert (unknown.usual_s, unknown.max_s, unknown.default_unknown) == (300, 86400, True)
    assert get_policy("gpt-5.5").idle_bounds()[:3] == (None, 86400, "24h")  # only 24h
    assert get_policy("gpt-5.6-sol").idle_bounds() is None  # a 30m minimum TTL instead
    assert get_policy("claude-sonnet-4-6").idle_bounds() is None


@pytest.mark.parametrize("model,extra", [("gpt-4o", {}),
                                         ("gpt-5", {"prompt_cache_retention": "in_memory"})])
def test_in_memory_gap_past_5_min_is_a_warning_and_past_1_h_an_expiry(
        model: str, extra: dict[str, Any]) -> None:
    r = _diff(model, 299, **extra)
    assert r.verdict == "no_miss" and _ttl(r) is None
    assert r.predicted.cache_read > 2000 and not r.predicted.read_upper_bound
    r = _diff(model, 400, **extra)
    cause = _ttl(r)
    assert r.verdict == "no_miss" and cause is not None
    assert cause.detail["level"] == "warning" and cause.detail["max_idle_seconds"] == 3600
    assert "5-10 min" in (cause.note or "") and "not guaranteed" in cause.title
    assert r.predicted.cache_read > 2000 and r.predicted.read_upper_bound
    check = next(c for c in r.checks if c.name == "gap < TTL")
    assert check.passed is None and "5-10 min" in (check.detail or "")
    assert "not guaranteed" in (check.detail or "")
    r = _diff(model, 3601, **extra)
    assert r.verdict == "miss_explained" and r.cause == "ttl_expired"
    assert r.classification == "timing" and r.predicted.cache_read == 0
    assert r.causes[0].detail["ttl_seconds"] == 3600


def test_24h_retention_reads_within_24_h() -> None:
    for model, extra in (("gpt-5", {"prompt_cache_retention": "24h"}), ("gpt-5.5", {})):
        r = _diff(model, 7200, **extra)
        assert r.verdict == "no_miss" and _ttl(r) is None, model
        assert r.predicted.cache_read > 2000 and not r.predicted.read_upper_bound
        r = _diff(model, 86401, **extra)
        assert r.verdict == "miss_explained" and r.cause == "ttl_expired", model


def test_default_retention_of_a_model_with_both_is_said_to_depend_on_the_org() -> None:
    r = _diff("gpt-5", 7200)
    cause = _ttl(r)
    assert r.verdict == "no_miss" and cause is not None and cause.detail["level"] == "warning"
    assert cause.detail["retention_default"] == "depends on the organisation"
    assert "organisation" in (cause.note or "")
    check = next(c for c in r.checks if c.name == "gap < TTL")
    assert "organisation" in (check.detail or "")
    r = _diff("gpt-5", 86401)
    assert r.verdict == "miss_explained" and r.cause == "ttl_expired"


def test_observed_shortfall_after_the_usual_clearing_is_explained_by_timing() -> None:
    r = diff(_request("gpt-4o"), _request("gpt-4o"), timestamps=(T0, T0 + 600),
             usage_b={"prompt_tokens": 3100, "prompt_tokens_details": {"cached_tokens": 0}})
    assert r.verdict == "miss_explained" and r.cause == "ttl_expired"
    assert r.classification == "timing"


def test_explain_shows_a_read_after_400_s_as_a_hit_not_a_contradiction(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    rows = []
    for i, at in enumerate((T0, T0 + 400)):
        req = _request("gpt-5", "q")
        if i:
            req["messages"] += [{"role": "assistant", "content": "a"},
                                {"role": "user", "content": "q2"}]
        rows.append({"request": req, "timestamp": at, "session_id": "s",
                     "usage": {"prompt_tokens": 3100 + 20 * i,
                               "prompt_tokens_details": {"cached_tokens": 3072 * i}}})
    log.write_text("".join(json.dumps(x) + "\n" for x in rows))
    report = explain(log)
    row = report.requests[1]
    assert report.misses == 0 and row.status == "hit"
    assert row.predicted_cache_read == row.observed_cache_read == 3072
    assert "causes_not_confirmed_by_usage" not in row.detail


def test_usage_only_shortfall_names_the_idle_clearing_as_the_likely_cause(
        tmp_path: Path) -> None:
    def log(model: str) -> Path:
        path = tmp_path / f"{model}.jsonl"
        rows = [{"session_id": "s", "model": model, "provider": "openai",
                 "timestamp": T0 + 600 * i,
                 "usage": {"prompt_tokens": 3000,
                           "prompt_tokens_details": {"cached_tokens": 2048 * (1 - i)}}}
                for i in range(2)]
        path.write_text("".join(json.dumps(x) + "\n" for x in rows))
        return path

    row = explain(log("gpt-4o")).requests[1]
    assert row.status == "prefix_regression" and row.cause == "ttl_expired"
    assert "not guaranteed" in row.detail["ttl_note"]
    # gpt-5.5 keeps entries up to 24 h (it accepts only 24h): 600 s idle is no expiry
    row = explain(log("gpt-5.5")).requests[1]
    assert row.status == "prefix_regression" and row.cause is None
