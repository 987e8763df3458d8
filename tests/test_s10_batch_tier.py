"""Batch result lines are priced at the batch rate (new-user trial 15, finding 1).

An OpenAI Batch output line's body carries no batch tier, and an Anthropic Message Batches
result may omit ``usage.service_tier``: both were priced at the standard rate (2x the bill).
Source: hosted-api-rules.md 1.6 / 2.5 (Batch: 50 % off, the discounts stack).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptcache.usage import UsageTracker, parse_usage
from promptcache.usage.sinks import iter_usage_log_lines

OPENAI_BODY = {"id": "chatcmpl-2", "object": "chat.completion", "created": 1790000000,
               "model": "gpt-4o-mini", "choices": [],
               "usage": {"prompt_tokens": 2000, "completion_tokens": 50, "total_tokens": 2050,
                         "prompt_tokens_details": {"cached_tokens": 1024}}}
OPENAI_LINE = {"id": "batch_req_1", "custom_id": "r1",
               "response": {"status_code": 200, "request_id": "x", "body": OPENAI_BODY}}
ANTHROPIC_MESSAGE = {"id": "msg_3", "type": "message", "role": "assistant",
                     "model": "claude-haiku-4-5", "content": [],
                     "usage": {"input_tokens": 1000, "cache_creation_input_tokens": 0,
                               "cache_read_input_tokens": 4000, "output_tokens": 100}}
ANTHROPIC_LINE = {"custom_id": "req-1",
                  "result": {"type": "succeeded", "message": ANTHROPIC_MESSAGE}}


@pytest.mark.parametrize("line", [OPENAI_LINE, ANTHROPIC_LINE], ids=["openai", "anthropic"])
def test_parse_usage_reads_a_batch_line_as_the_batch_tier(line: dict) -> None:
    assert parse_usage(line).service_tier == "batch"


def test_a_tier_named_inside_the_batch_line_is_kept() -> None:
    flex = {**OPENAI_LINE, "response": {**OPENAI_LINE["response"],
                                        "body": {**OPENAI_BODY, "service_tier": "flex"}}}
    assert parse_usage(flex).service_tier == "flex"
    usage = {**ANTHROPIC_MESSAGE["usage"], "service_tier": "standard"}
    standard = {"custom_id": "req-2", "result": {"type": "succeeded", "message": {
        **ANTHROPIC_MESSAGE, "usage": usage}}}
    assert parse_usage(standard).service_tier == "standard"


def test_report_lines_of_a_batch_log_cost_half(tmp_path: Path) -> None:
    log = tmp_path / "batch.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in (OPENAI_LINE, ANTHROPIC_LINE)))
    records = [r for _, r in iter_usage_log_lines(str(log))]
    assert [r.service_tier for r in records] == ["batch", "batch"]
    batch, standard = UsageTracker(warn=False), UsageTracker(warn=False)
    for rec in records:
        batch.add(rec)
    for body in (OPENAI_BODY, ANTHROPIC_MESSAGE):
        standard.add(parse_usage(body))
    cost = batch.summary().cost
    assert cost is not None and cost > 0
    assert cost * 2 == standard.summary().cost
