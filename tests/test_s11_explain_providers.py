"""explain infers sessions within one provider family: an OpenAI request that repeats an
Anthropic request's question was put in the Anthropic request's session and reported as a
1,200-token prefix regression (new-user trial 18, finding 1); two providers share no cache."""

from __future__ import annotations

import json
from pathlib import Path

from promptcache.diff import explain

SYSTEM = "You are a helpful assistant. " * 200


def test_an_openai_request_does_not_continue_an_anthropic_session(tmp_path: Path) -> None:
    lines = [
        {"request": {"model": "claude-sonnet-4-6", "max_tokens": 5,
                     "system": [{"type": "text", "text": SYSTEM,
                                 "cache_control": {"type": "ephemeral"}}],
                     "messages": [{"role": "user", "content": "hi"}]},
         "response": {"usage": {"input_tokens": 5, "cache_creation_input_tokens": 1200,
                                "cache_read_input_tokens": 0, "output_tokens": 5}}},
        {"request": {"model": "gpt-5", "messages": [
            {"role": "system", "content": "You are terse. " * 300},
            {"role": "user", "content": "hi"}]},
         "response": {"usage": {"prompt_tokens": 1300, "completion_tokens": 5,
                                "prompt_tokens_details": {"cached_tokens": 0}}}},
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    report = explain(str(path))
    assert report.sessions == 2 and report.misses == 0
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
