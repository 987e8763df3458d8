"""New-user trial 26: an app with several conversations on the local backend's shapes.

* The usage tracker's session checks compare a chat turn with the session's last request to
  the same model: a title generator on a cheaper model inside the chat (its prompt under that
  model's minimum) raised a false ``collapse``, and hid the chat's next real collapse (the
  turn was compared with the title request, which read and wrote nothing).
* ``explain``: a conversation's first request compared with another conversation's system
  prompt is no miss for a timing cause (``sent_before_a``: sent with the other request;
  ``ttl_expired``: its entry outlived only by a read that happened): the log does not show
  when the other entry became readable, and estimate noise was reported as lost tokens.
"""

from __future__ import annotations

from typing import Any

from promptcache.usage import parse_usage
from promptcache.usage.record import UsageRecord
from promptcache.usage.tracker import UsageTracker

T0 = 1_780_304_400.0


def _anthropic(model: str, start: float, read: int, write: int, uncached: int = 16,
               session: str = "conv-A", label: str = "chat") -> UsageRecord:
    rec = parse_usage({"type": "message", "model": model, "usage": {
        "input_tokens": uncached, "output_tokens": 4, "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0}}})
    return rec.model_copy(update={"start": start, "session": session, "label": label})


def _kinds(events: Any) -> list[str]:
    return [e.kind for e in events]


def test_title_request_on_a_cheaper_model_is_no_collapse() -> None:
    t = UsageTracker(warn=False)
    assert _kinds(t.add(_anthropic("claude-sonnet-4-6", T0, 0, 1764))) == []
    assert _kinds(t.add(_anthropic("claude-sonnet-4-6", T0 + 20, 1764, 80))) == []
    # the title generator: 38 tokens on Haiku 4.5 (minimum 4,096) reads and writes nothing
    title = _anthropic("claude-haiku-4-5", T0 + 25, 0, 0, uncached=38, label="title")
    assert "collapse" not in _kinds(t.add(title))
    assert _kinds(t.add(_anthropic("claude-sonnet-4-6", T0 + 40, 1844, 80))) == []


def test_collapse_after_a_side_request_is_still_reported() -> None:
    t = UsageTracker(warn=False)
    t.add(_anthropic("claude-sonnet-4-6", T0, 0, 1764))
    t.add(_anthropic("claude-sonnet-4-6", T0 + 20, 1764, 80))
    t.add(_anthropic("claude-haiku-4-5", T0 + 25, 0, 0, uncached=38, label="title"))
    events = t.add(_anthropic("claude-sonnet-4-6", T0 + 420, 0, 1924))  # 5m entries expired
    collapse = [e for e in events if e.kind == "collapse"]
    assert len(collapse) == 1 and collapse[0].data["cause"] == "ttl_expired"
    assert collapse[0].data["previous_read"] == 1764


def test_regression_after_a_cacheable_side_request_compares_the_same_model() -> None:
    """A summariser on Haiku with its own long prompt writes 5,000 tokens: the chat's next
    turn, which reads all the chat left cached, is no prefix_regression against it."""
    t = UsageTracker(warn=False)
    t.add(_anthropic("claude-sonnet-4-6", T0, 0, 1764))
    t.add(_anthropic("claude-haiku-4-5", T0 + 5, 0, 5000, label="summary"))
    assert _kinds(t.add(_anthropic("claude-sonnet-4-6", T0 + 20, 1764, 80))) == []


def test_model_switch_is_still_a_collapse() -> None:
    t = UsageTracker(warn=False)
    t.add(_anthropic("claude-sonnet-4-6", T0, 0, 2016))
    events = t.add(_anthropic("claude-sonnet-4-5", T0 + 20, 0, 2095))
    assert "collapse" in _kinds(events)


# ---------------------------------------------------------------- explain, across sessions

from promptcache.diff import explain  # noqa: E402
from tests.cases import filler  # noqa: E402


def _claude(session: str, question: str, read: int, write: int,
            at: str = "2026-06-01T09:07:40Z") -> dict[str, Any]:
    return {"session_id": session, "timestamp": at, "request": {
        "model": "claude-sonnet-4-6", "max_tokens": 8,
        "system": [{"type": "text", "text": filler(3000), "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": question, "cache_control": {"type": "ephemeral"}}]}]},
        "response": {"id": f"msg_{session}", "type": "message", "model": "claude-sonnet-4-6",
                     "usage": {"input_tokens": 16, "output_tokens": 4,
                               "cache_read_input_tokens": read,
                               "cache_creation_input_tokens": write}}}


def test_first_request_logged_with_another_conversation_that_read_is_no_miss() -> None:
    """Two conversations' requests logged at the same second; the second read the system
    prompt the first wrote. It was a sent_before_a miss of the estimate's noise (91-496
    tokens 'lost', flagged as not confirmed by usage)."""
    for read in (1500, 1900):
        report = explain([_claude("conv-A", "Where is my order 1001?", 0, 2000),
                          _claude("conv-D", "A warranty question.", read, 10)])
        row = report.requests[1]
        assert row.status not in ("miss_explained", "unexplained_miss"), row
        assert report.misses == 0 and report.miss_cost_usd == 0


def test_concurrent_first_requests_that_both_wrote_stay_a_miss() -> None:
    report = explain([_claude("conv-A", "Where is my order 1001?", 0, 2000),
                      _claude("conv-D", "A warranty question.", 0, 2000)])
    row = report.requests[1]
    assert row.status == "miss_explained" and row.cause == "sent_before_a"
    assert row.lost_tokens and row.lost_tokens > 1000


def _gpt56(session: str, question: str, at: float, read: int, write: int,
           total: int) -> dict[str, Any]:
    return {"session_id": session, "timestamp": at, "request": {
        "model": "gpt-5.6", "max_output_tokens": 16, "prompt_cache_key": "ops", "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": filler(3000),
                                               "prompt_cache_breakpoint": {"mode": "explicit"}}]},
            {"role": "user", "content": question}]},
        "response": {"id": f"resp_{session}_{int(at)}", "object": "response", "model": "gpt-5.6",
                     "usage": {"input_tokens": total, "output_tokens": 16,
                               "total_tokens": total + 16, "output_tokens_details": {
                                   "reasoning_tokens": 0},
                               "input_tokens_details": {"cached_tokens": read,
                                                        "cache_write_tokens": write}}}}


def test_gpt56_new_conversation_past_the_minimum_lifetime_that_read_is_no_miss() -> None:
    """A new conversation 40 min after another wrote the shared developer prompt read it (a
    little less than estimated): not a ttl_expired miss (the gap over GPT-5.6's 30m minimum
    lifetime is a warning, and the read happened: review 21's rule)."""
    t0 = 1_780_315_255.0
    first = _gpt56("conv-H", "Status of shipment 9?", t0, 0, 1990, 2010)
    probe = explain([first]).requests[0]
    assert probe.status == "cold_start"
    ok = explain([first, _gpt56("conv-I", "A fresh chat.", t0 + 2410, 1700, 40, 1760)])
    row = ok.requests[1]
    assert row.status not in ("miss_explained", "unexplained_miss"), row
    assert ok.misses == 0


# ---------------------------------------------------------------- diff, chained turns

from promptcache.diff import diff  # noqa: E402


def _turn(model: str, previous: str, question: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_output_tokens": 16, "previous_response_id": previous,
            "input": [{"role": "user", "content": question}], **extra}


def _resp_usage(total: int, read: int, write: int | None) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": read}
    if write is not None:
        details["cache_write_tokens"] = write
    return {"input_tokens": total, "output_tokens": 16, "total_tokens": total + 16,
            "output_tokens_details": {"reasoning_tokens": 0}, "input_tokens_details": details}


def test_chained_turn_after_a_long_gap_is_a_ttl_miss_not_unexplained() -> None:
    """A (itself chained) and B chained on A, logged without A's output: the gap over
    GPT-5.6's 30m minimum lifetime explains B's empty read (it was an unexplained miss)."""
    a = _turn("gpt-5.6", "resp_2", "And 11?")
    b = _turn("gpt-5.6", "resp_3", "Later.")
    t0 = 1_780_315_275.0
    kw: dict[str, Any] = {"usage_a": _resp_usage(1781, 1673, 92),
                          "usage_b": _resp_usage(1872, 0, 1856),
                          "response_a": {"id": "resp_3"}}
    late = diff(a, b, timestamps=(t0, t0 + 2400), **kw)
    assert late.verdict == "miss_explained" and late.cause == "ttl_expired"
    assert late.lost_tokens == 1765
    soon = diff(a, b, timestamps=(t0, t0 + 60), **kw)  # within the lifetime: unexplained
    assert soon.verdict == "unexplained_miss"
    read = diff(a, b, timestamps=(t0, t0 + 2400), **{**kw, "usage_b": _resp_usage(
        1872, 1765, 91)})  # read after the gap: no miss
    assert read.verdict == "no_miss"


def test_chained_turn_past_openai_certain_idle_bound() -> None:
    a = _turn("gpt-5", "resp_2", "And 11?", prompt_cache_retention="in_memory")
    b = _turn("gpt-5", "resp_3", "Later.", prompt_cache_retention="in_memory")
    t0 = 1_780_315_275.0
    res = diff(a, b, timestamps=(t0, t0 + 7200), usage_a=_resp_usage(1781, 1664, None),
               usage_b=_resp_usage(1872, 0, None), response_a={"id": "resp_3"})
    assert res.verdict == "miss_explained" and res.cause == "ttl_expired"
    assert res.causes[0].detail.get("ttl_is") == "certain idle bound"


def test_a_record_sent_before_the_last_one_is_neither_checked_nor_a_baseline() -> None:
    """Review 26: concurrent calls finishing out of order (or a dropped stream recorded at the
    next call) gave a negative gap, and the late record became the baseline of the next turn."""
    t = UsageTracker(warn=False)
    t.add(_anthropic("claude-sonnet-4-6", T0, 0, 1764))
    t.add(_anthropic("claude-sonnet-4-6", T0 + 20, 1764, 80))
    # sent at T0 + 10, recorded now: it read nothing though T0's turn wrote 10 s before it was
    # sent: a collapse against T0's turn (review 27), not against the turn at T0 + 20
    late = t.add(_anthropic("claude-sonnet-4-6", T0 + 10, 0, 0))
    assert _kinds(late) == ["collapse"] and late[0].data["gap_seconds"] == 10
    # the next turn is still compared with the turn at T0 + 20: 5m later, expired
    events = t.add(_anthropic("claude-sonnet-4-6", T0 + 420, 0, 1924))
    collapse = [e for e in events if e.kind == "collapse"]
    assert len(collapse) == 1 and collapse[0].data["previous_read"] == 1764


def test_a_late_record_is_checked_against_the_baseline_sent_before_it() -> None:
    """Review 27: two concurrent turns; the one sent first finishes last, and it read nothing
    though the turn before both wrote 1,764 tokens a minute earlier: a collapse, checked
    against that turn (it was skipped)."""
    t = UsageTracker(warn=False)
    t.add(_anthropic("claude-sonnet-4-6", T0, 0, 1764))
    t.add(_anthropic("claude-sonnet-4-6", T0 + 62, 1764, 80))  # sent at +62, done first
    events = t.add(_anthropic("claude-sonnet-4-6", T0 + 60, 0, 1900))  # sent at +60
    collapse = [e for e in events if e.kind == "collapse"]
    assert len(collapse) == 1 and collapse[0].data["previous_read"] == 0
    assert collapse[0].data["gap_seconds"] == 60
    # and the next turn still compares with the turn at +62
    assert _kinds(t.add(_anthropic("claude-sonnet-4-6", T0 + 90, 1844, 80))) == []


def test_a_request_sent_while_the_baseline_was_in_flight_is_no_collapse() -> None:
    """Review 28: B was sent (T0 + 20) while A was still answering (done at T0 + 30): A's entry
    was not readable yet, so B's empty read is no collapse (the concurrent cold write is)."""
    t = UsageTracker(warn=False)
    a = _anthropic("claude-sonnet-4-6", T0, 0, 1764).model_copy(update={"end": T0 + 30})
    t.add(a)
    b = _anthropic("claude-sonnet-4-6", T0 + 20, 0, 1764).model_copy(update={"end": T0 + 45})
    assert "collapse" not in _kinds(t.add(b))
    # a request sent after A's answer began, reading nothing, still is one
    c = _anthropic("claude-sonnet-4-6", T0 + 60, 0, 1764).model_copy(update={"end": T0 + 70})
    assert "collapse" in _kinds(t.add(c))
