"""diff engine: review 13 finding F4 (siblings: a provider-side miss blamed on the edit).

A and B continue the same ``previous_response_id`` (edit and regenerate): both prompts are
tools + instructions + the stored conversation + their own input (openai-python
``ResponseCreateParams``: the stored items are prepended to the input). An edit of the last
input item can only cost what follows it; B can still read the shared head (implicit prefix
caching on the 1,024 + 128 n grid before GPT-5.6, hosted-api-rules.md 2.1; the entry at an
explicit breakpoint before the edit on GPT-5.6, 2.3). A read short of that is a
provider-side miss, as the same bodies without the chain (and ``explain``) say.
"""

from __future__ import annotations

from typing import Any

from promptcache.diff import diff
from tests.cases import filler

SYSTEM = filler(3000, "review13").strip()
GRID_5000 = 1024 + ((5000 - 1024) // 128) * 128  # what a 5,000-token prompt leaves (2.1)


def _usage(total: int, read: int, write: int | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": read}
    if write is not None:
        details["cache_write_tokens"] = write
    return {"input_tokens": total, "output_tokens": 5, "input_tokens_details": details}


def _pre56(question: str, chain: str | None = "resp_1") -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.5", "instructions": SYSTEM,
                            "input": [{"role": "user", "content": question}]}
    if chain is not None:
        body["previous_response_id"] = chain
    return body


def _gpt56(question: str, chain: str | None = "resp_1") -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.6", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": SYSTEM,
                                           "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": [{"type": "input_text", "text": question}]}]}
    if chain is not None:
        body["previous_response_id"] = chain
    return body


def test_pre56_siblings_read_zero_is_a_provider_side_miss() -> None:
    """gpt-5.5: B edits its only input item and reads 0. It was 'miss_explained
    message_rewritten', all 4,992 tokens blamed on the edit; the head was still readable."""
    ua = _usage(5000, 4864)
    res = diff(_pre56("q1"), _pre56("q1 edited"), usage_a=ua, usage_b=_usage(5000, 0))
    assert res.ideal_cache_read == GRID_5000
    assert res.verdict == "unexplained_miss" and res.classification == "provider_side"
    assert res.cause == "no_difference"
    codes = [c.code for c in res.causes]
    assert "message_rewritten" in codes and "previous_response_chained" in codes
    assert res.lost_tokens == GRID_5000
    assert any("not explained by the payload" in n for n in res.notes)
    # the same bodies without the chain agree: a provider-side miss
    plain = diff(_pre56("q1", None), _pre56("q1 edited", None), usage_a=_usage(3100, 2944),
                 usage_b=_usage(3100, 0))
    assert plain.verdict == res.verdict


def test_pre56_siblings_edit_costs_at_most_one_grid_step_after_it() -> None:
    """B reads the head up to the edit: the edit explains the rest (less than one 128-token
    step here); without B's usage, the predicted loss is that bound, not A's whole entry."""
    a, b = _pre56("q1"), _pre56("q1 edited")
    ua = _usage(5000, 4864)
    res = diff(a, b, usage_a=ua, usage_b=_usage(5000, GRID_5000 - 128))
    assert res.verdict == "miss_explained" and res.cause == "message_rewritten"
    assert res.lost_tokens == 128
    bare = diff(a, b, usage_a=ua)
    assert bare.verdict == "miss_explained"
    assert bare.lost_tokens is not None and 0 < bare.lost_tokens <= 128


def test_pre56_siblings_instructions_edit_still_costs_everything() -> None:
    """An edit at the start of the instructions (before the stored conversation) loses
    the whole entry: still 'miss_explained', all of it."""
    a, b = _pre56("q1"), {**_pre56("q1"), "instructions": "Note. " + SYSTEM}
    res = diff(a, b, usage_a=_usage(5000, 4864), usage_b=_usage(5000, 0))
    assert res.verdict == "miss_explained" and res.cause == "system_changed"
    assert res.lost_tokens == GRID_5000


def test_gpt56_siblings_breakpoint_before_edit_read_zero_is_provider_side() -> None:
    """GPT-5.6: an explicit breakpoint ends the developer part, the user turn after it is
    edited: B can read the entry at the breakpoint, so a read of 0 is not the edit's doing
    (it was 'miss_explained', 4,990 tokens)."""
    ua = _usage(5000, 3000, 1990)
    res = diff(_gpt56("q1"), _gpt56("q1 edited"), usage_a=ua,
               usage_b=_usage(5000, 0, 4990))
    assert res.ideal_cache_read == 4990
    assert res.verdict == "unexplained_miss" and res.classification == "provider_side"
    assert res.lost_tokens == 4990
    plain = diff(_gpt56("q1", None), _gpt56("q1 edited", None), usage_a=ua,
                 usage_b=_usage(5000, 0, 4990))
    assert plain.verdict == res.verdict
    # B reads up to the breakpoint: the few tokens after it are the edit's cost
    near = diff(_gpt56("q1"), _gpt56("q1 edited"), usage_a=ua,
                usage_b=_usage(5000, 4980, 10))
    assert near.verdict == "miss_explained" and near.cause == "message_rewritten"
    assert near.lost_tokens == 10


def test_gpt56_siblings_without_breakpoint_before_edit_lose_the_entry() -> None:
    """No breakpoint before the edit: the implicit entry sits on the edited (newest)
    message, so the whole entry is the edit's cost."""
    def body(q: str) -> dict[str, Any]:
        return {"model": "gpt-5.6", "previous_response_id": "resp_1",
                "input": [{"role": "developer", "content": SYSTEM},
                          {"role": "user", "content": q}]}
    res = diff(body("q1"), body("q1 edited"), usage_a=_usage(5000, 3000, 1990),
               usage_b=_usage(5000, 0, 4990))
    assert res.verdict == "miss_explained" and res.cause == "message_rewritten"
    assert res.lost_tokens == 4990
