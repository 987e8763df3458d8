"""explain infers sessions within one provider family: an OpenAI request that repeats an
Anthropic request's question was put in the Anthropic request's session and reported as a
1,200-token prefix regression (new-user trial 18, finding 1); two providers share no cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- across conversations
# The provider's cache is shared by every conversation: a new conversation reads the system
# prompt another one cached, and a changed system prompt misses it (trial 18, finding 5:
# "0 misses" for a log of one-turn requests whose system prompt gained a date).
NURSERY = "You are a helpful assistant for the plant nursery. " * 120


def _anthropic(system: str, question: str, ts: int, write: int, read: int) -> dict[str, object]:
    return {"timestamp": ts, "request": {
        "model": "claude-sonnet-4-6", "max_tokens": 5,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}]},
        "response": {"usage": {"input_tokens": 7, "cache_creation_input_tokens": write,
                               "cache_read_input_tokens": read, "output_tokens": 5}}}


def _explain(tmp_path: Path, lines: list[dict[str, object]]) -> object:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return explain(str(path))


def test_a_new_conversation_reads_and_a_changed_system_prompt_misses(tmp_path: Path) -> None:
    report: Any = _explain(tmp_path, [
        _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0),
        _anthropic(NURSERY, "what about ferns", 1_760_000_060, 0, 1200),
        _anthropic("Date: 2026-01-01. " + NURSERY, "and cacti", 1_760_000_120, 1210, 0)])
    rows = report.requests
    assert [r.status for r in rows] == ["cold_start", "hit", "miss_explained"]
    assert [r.compared_with_line for r in rows] == [None, 1, 2]
    assert rows[2].cause == "system_changed" and rows[2].lost_tokens > 1000
    assert report.misses == 1 and report.sessions == 3


def test_another_application_is_no_miss(tmp_path: Path) -> None:
    other = "You translate legal contracts from German into English, clause by clause. " * 90
    report: Any = _explain(tmp_path, [
        _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0),
        _anthropic(other, "Vertrag", 1_760_000_060, 1300, 0)])
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
    assert report.misses == 0


# ------------------------------------------------------------------------ review 17
TOOLS = [{"name": f"tool_{k}", "description": "Look up one record of the ledger. " * 30,
          "input_schema": {"type": "object"}} for k in range(12)]


def test_an_expired_entry_of_another_conversation_is_no_baseline(tmp_path: Path) -> None:
    # two hours later the 5m entry is gone: a cold start whatever the system prompt says
    report: Any = _explain(tmp_path, [
        _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0),
        _anthropic("Date: 2026-01-01. " + NURSERY, "and cacti", 1_760_007_200, 1210, 0)])
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
    assert report.misses == 0


def test_another_application_sharing_a_tool_list_is_no_miss(tmp_path: Path) -> None:
    other = "You translate legal contracts from German into English, clause by clause. " * 20
    a = _anthropic("You are the plant nursery's assistant. " * 30, "hi", 1_760_000_000, 2500, 0)
    b = _anthropic(other, "Vertrag", 1_760_000_060, 1300, 1200)
    for line in (a, b):
        line["request"]["tools"] = TOOLS  # type: ignore[index]
    report: Any = _explain(tmp_path, [a, b])
    assert report.misses == 0
    assert report.requests[1].status in ("hit", "cold_start")


def test_a_short_read_across_conversations_is_a_cold_start_not_a_hit(tmp_path: Path) -> None:
    # the log does not show when the other conversation's entry became readable: no
    # "hit" with 0 tokens read, and no miss either
    report: Any = _explain(tmp_path, [
        _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0),
        _anthropic(NURSERY, "what about ferns", 1_760_000_060, 1200, 0)])
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]


def test_the_live_writer_is_chosen_over_an_expired_one(tmp_path: Path) -> None:
    report: Any = _explain(tmp_path, [
        _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0),                 # expires
        _anthropic(NURSERY, "ferns?", 1_760_003_540, 1200, 0),             # writes again
        _anthropic("Date: 2026-01-01. " + NURSERY, "cacti?", 1_760_003_600, 1210, 0)])
    rows = report.requests
    assert [r.status for r in rows] == ["cold_start", "cold_start", "miss_explained"]
    assert rows[2].compared_with_line == 2 and rows[2].cause == "system_changed"


# ------------------------------------------------------------------------ trial 19
def _chat(msgs: list[dict[str, str]], ts: int, cached: int) -> dict[str, object]:
    from promptcache.prefix import render

    request = {"model": "gpt-5", "messages": msgs}
    total = render(request).segments[-1].end_token  # the prompt as the renderer counts it
    return {"timestamp": ts, "request": request,
            "response": {"usage": {"prompt_tokens": total, "completion_tokens": 5,
                                   "prompt_tokens_details": {"cached_tokens": cached}}}}


def test_an_openai_system_message_is_no_shared_history(tmp_path: Path) -> None:
    # conversations A and B share the system prompt, sent as a system message: B's first turn
    # was put into A's session as its second turn (trial 19, finding 4)
    system = {"role": "system", "content": NURSERY}
    a1 = [system, {"role": "user", "content": "A: my fern has brown tips"}]
    b1 = [system, {"role": "user", "content": "B: when do I repot a cactus"}]
    a2 = [*a1, {"role": "assistant", "content": "A: check the humidity"},
          {"role": "user", "content": "A: it is 30 %"}]
    b2 = [*b1, {"role": "assistant", "content": "B: in spring"},
          {"role": "user", "content": "B: which soil"}]
    report: Any = _explain(tmp_path, [_chat(a1, 1_760_000_000, 0),
                                      _chat(b1, 1_760_000_010, 1152),
                                      _chat(a2, 1_760_000_020, 1152),
                                      _chat(b2, 1_760_000_030, 1152)])
    rows = report.requests
    assert report.sessions == 2
    assert [r.session for r in rows][:2] != [rows[0].session] * 2
    assert rows[2].session == rows[0].session and rows[3].session == rows[1].session
    assert [r.turn for r in rows] == [0, 0, 1, 1]
    assert rows[2].compared_with_line == 1 and rows[3].compared_with_line == 2


def test_a_stripped_thinking_block_is_a_miss_against_the_last_request(tmp_path: Path) -> None:
    # trial 19, finding 3: on a model that strips earlier thinking blocks, a plain user turn
    # cannot read what the tool-loop turn before it wrote; explain compared it with an older
    # request and said "hit, lost 0"

    model = "claude-sonnet-4-5"
    system = [{"type": "text", "text": NURSERY, "cache_control": {"type": "ephemeral"}}]
    thinking = {"type": "thinking", "thinking": "Let me look at the care sheet. " * 30,
                "signature": "sig"}

    def body(msgs: list[dict[str, Any]]) -> dict[str, Any]:
        marked = [dict(m) for m in msgs]
        last = marked[-1]
        content = last["content"] if isinstance(last["content"], list) else [
            {"type": "text", "text": last["content"]}]
        last["content"] = [*content[:-1], {**content[-1], "cache_control": {"type": "ephemeral"}}]
        return {"model": model, "max_tokens": 64, "system": system, "messages": marked}

    m1 = [{"role": "user", "content": "Which fern needs the least light? " * 5}]
    m2 = [*m1, {"role": "assistant", "content": [
        thinking, {"type": "tool_use", "id": "t1", "name": "sheet", "input": {"q": "fern"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "Bird's nest fern: low light. " * 10}]}]
    m3 = [*m2, {"role": "assistant", "content": [thinking, {"type": "text",
                                                            "text": "The bird's nest fern."}]},
          {"role": "user", "content": "And for a cactus?"}]
    bodies = [body(m) for m in (m1, m2, m3)]
    from promptcache.prefix import render

    def marked_prefix(b: dict[str, Any]) -> int:  # estimated tokens up to the last marker
        return max(seg.end_token for seg in render(b).breakpoints())

    w1 = marked_prefix(bodies[0])
    usage = [(0, w1), (w1, marked_prefix(bodies[1]) - w1), (w1, 200)]  # (read, write)
    lines = [{"timestamp": 1_760_000_000 + 10 * k, "session_id": "s", "request": b,
              "response": {"usage": {"input_tokens": 10, "cache_read_input_tokens": r,
                                     "cache_creation_input_tokens": w, "output_tokens": 5}}}
             for k, (b, (r, w)) in enumerate(zip(bodies, usage, strict=True))]
    report: Any = _explain(tmp_path, lines)
    row = report.requests[2]
    assert row.status == "miss_explained" and row.cause == "thinking_stripped"
    assert row.compared_with_line == 2
    # review 22: the read predicted is the longest any entry gives (line 1's, before the
    # stripped block), which the usage confirms, not only what line 2 wrote before it
    assert row.predicted_cache_read == row.observed_cache_read == w1
    assert "causes_not_confirmed_by_usage" not in row.detail


# ------------------------------------------------------------------------ review 19
def test_gpt56_implicit_entry_on_the_newest_message_is_not_another_conversations(
        tmp_path: Path) -> None:
    # the request wrote only at its newest message (the implicit breakpoint): a new
    # conversation cannot read its system prompt, so a changed one is no miss (the cut used
    # to put the implicit breakpoint on the system prompt)
    from promptcache.prefix import render

    def req(system: str, q: str) -> dict[str, Any]:
        return {"model": "gpt-5.6-sol", "messages": [{"role": "system", "content": system},
                                                     {"role": "user", "content": q}]}

    def line(r: dict[str, Any], ts: int, read: int, write: int) -> dict[str, Any]:
        total = render(r).segments[-1].end_token
        return {"timestamp": ts, "request": r, "response": {"usage": {
            "prompt_tokens": total, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write}}}}

    a, b = req(NURSERY, "hi"), req("Date: 2026-01-01. " + NURSERY, "and cacti")
    report: Any = _explain(tmp_path, [line(a, 1_760_000_000, 0, 1200),
                                      line(b, 1_760_000_030, 0, 1210)])
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
    assert report.misses == 0


def test_an_application_sharing_the_tools_does_not_hide_a_changed_system_prompt(
        tmp_path: Path) -> None:
    from promptcache.prefix import render

    tools: list[dict[str, Any]] = [dict(t) for t in TOOLS]
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    other = "You translate legal contracts from German into English, clause by clause. " * 90

    def req(system: str, q: str) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-6", "max_tokens": 5, "tools": tools,
                "system": [{"type": "text", "text": system,
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": q}]}

    def line(r: dict[str, Any], ts: int, own_tools: bool) -> dict[str, Any]:
        v = render(r)
        tools_end = max(s.end_token for s in v.segments if s.tier == "tools")
        sys_end = max(s.end_token for s in v.segments if s.tier == "system")
        read, write = (0, sys_end) if own_tools else (tools_end, sys_end - tools_end)
        return {"timestamp": ts, "request": r, "response": {"usage": {
            "input_tokens": 5, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": 5}}}

    report: Any = _explain(tmp_path, [
        line(req(NURSERY, "hi"), 1_760_000_000, True),
        line(req(other, "Vertrag"), 1_760_000_030, False),
        line(req("Date: 2026-01-01. " + NURSERY, "cacti?"), 1_760_000_060, False)])
    row = report.requests[2]
    assert (row.status, row.cause, row.compared_with_line) == (
        "miss_explained", "system_changed", 1)


# ------------------------------------------------------------------------ review 20
def test_conversations_opening_alike_stay_apart(tmp_path: Path) -> None:
    # interleaved conversations open with the same canned message: one shared message was
    # enough to join another conversation's session, whose later turns were then compared
    # with each other (false message_rewritten misses; review 20)
    def req(msgs: list[dict[str, str]]) -> dict[str, Any]:
        marked: list[dict[str, Any]] = [dict(m) for m in msgs]
        marked[-1]["content"] = [{"type": "text", "text": msgs[-1]["content"],
                                  "cache_control": {"type": "ephemeral"}}]
        return {"model": "claude-sonnet-4-6", "max_tokens": 5,
                "system": [{"type": "text", "text": NURSERY,
                            "cache_control": {"type": "ephemeral"}}], "messages": marked}

    convs: dict[str, list[dict[str, str]]] = {}
    lines: list[dict[str, Any]] = []
    for i, c in enumerate("ABABCACB"):
        msgs = convs.setdefault(c, [])
        msgs.append({"role": "user", "content": "Hi! I need help with my order." if not msgs
                     else f"[{c}] order {i}: where is my parcel? " * 8})
        lines.append({"timestamp": 1_760_000_000 + 5 * i, "request": req(msgs)})
        msgs.append({"role": "assistant", "content": f"Sure {c}{i}, which order? " * 6})
    report: Any = _explain(tmp_path, lines)
    assert report.misses == 0
    assert {r.status for r in report.requests} <= {"cold_start", "hit", "no_usage"}


def test_a_busy_application_does_not_push_out_a_prompt_family(tmp_path: Path) -> None:
    other = "You translate legal contracts from German into English, clause by clause. " * 90
    lines = [_anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0)]
    lines += [_anthropic(other, f"Vertrag {k}", 1_760_000_005 + k, 0, 1300) for k in range(9)]
    lines.append(_anthropic("Date: 2026-01-01. " + NURSERY, "cacti?", 1_760_000_060, 1210, 0))
    report: Any = _explain(tmp_path, lines)
    row = report.requests[-1]
    assert (row.status, row.cause, row.compared_with_line) == (
        "miss_explained", "system_changed", 1)


def test_the_turn_after_a_side_request_to_another_model_compares_with_the_chat(
        tmp_path: Path) -> None:
    # review 20: a title request to a cheap model inside a chat was the chat's baseline;
    # review 21: a switch to another model mid-conversation is still a miss (model_changed)
    main = _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0)
    side = _anthropic(NURSERY, "hi", 1_760_000_010, 1200, 0)
    side["request"]["model"] = "claude-haiku-4-5"  # type: ignore[index]
    side["request"]["messages"].append(  # type: ignore[index]
        {"role": "assistant", "content": "Hello!"})
    side["request"]["messages"].append(  # type: ignore[index]
        {"role": "user", "content": "Title this chat in five words."})
    nxt = _anthropic(NURSERY, "hi", 1_760_000_020, 0, 1200)
    nxt["request"]["messages"] += [  # type: ignore[index]
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Which fern needs the least light?"}]
    for line in (main, side, nxt):
        line["session_id"] = "chat-1"
    report: Any = _explain(tmp_path, [main, side, nxt])
    rows = report.requests
    assert rows[1].cause == "model_changed"  # the side request reads nothing of the chat's
    assert (rows[2].status, rows[2].compared_with_line) == ("hit", 1)


def test_a_switch_to_another_model_mid_conversation_is_a_miss(tmp_path: Path) -> None:
    first = _anthropic(NURSERY, "hi", 1_760_000_000, 1200, 0)
    second = _anthropic(NURSERY, "hi", 1_760_000_030, 1200, 0)
    second["request"]["model"] = "claude-opus-4-6"  # type: ignore[index]
    second["request"]["messages"] += [  # type: ignore[index]
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "More."}]
    report: Any = _explain(tmp_path, [first, second])
    row = report.requests[1]
    assert (row.status, row.cause, row.compared_with_line) == (
        "miss_explained", "model_changed", 1)


def test_an_openai_entry_may_live_past_its_usual_clearing(tmp_path: Path) -> None:
    # gpt-5 entries are usually cleared after 5 min idle but may live up to 24 h: a new
    # conversation three hours later that reads the system prompt is a hit, not a cold start
    # reading 1,152 tokens
    system = {"role": "system", "content": NURSERY}
    report: Any = _explain(tmp_path, [
        _chat([system, {"role": "user", "content": "A: hi"}], 1_760_000_000, 0),
        _chat([system, {"role": "user", "content": "B: hello"}], 1_760_010_800, 1152)])
    assert [r.status for r in report.requests] == ["cold_start", "hit"]


def test_an_openai_read_one_step_short_of_the_estimate_is_no_miss(tmp_path: Path) -> None:
    # automatic caching reads 128-token steps; the estimate can put a step boundary one step
    # off (review 20: a false 128-token unexplained miss)
    system = {"role": "system", "content": NURSERY}
    a = [system, {"role": "user", "content": "A: my fern has brown tips " * 10}]
    b = [*a, {"role": "assistant", "content": "Check the humidity. " * 30},
         {"role": "user", "content": "It is 30 %. " * 10}]
    first: Any = _explain(tmp_path, [_chat(a, 1_760_000_000, 0), _chat(b, 1_760_000_030, 0)])
    predicted = first.requests[1].predicted_cache_read
    assert predicted and predicted >= 1152
    report: Any = _explain(tmp_path, [_chat(a, 1_760_000_000, 0),
                                      _chat(b, 1_760_000_030, predicted - 128)])
    assert report.requests[1].status == "hit" and report.misses == 0



def test_a_new_openai_conversation_hours_later_reading_nothing_is_a_cold_start(
        tmp_path: Path) -> None:
    # review 21: past the usual in-memory clearing a read is possible, never expected: a new
    # conversation three hours later that reads nothing is a cold start, not a miss, whatever
    # its system prompt, and a request sending "in_memory" is never given 24 h
    system = {"role": "system", "content": NURSERY}
    dated = {"role": "system", "content": "Date: 2026-01-01. " + NURSERY}
    for second in ([system, {"role": "user", "content": "B: hello"}],
                   [dated, {"role": "user", "content": "B: hello"}]):
        report: Any = _explain(tmp_path, [
            _chat([system, {"role": "user", "content": "A: hi"}], 1_760_000_000, 0),
            _chat(second, 1_760_010_800, 0)])
        assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
        assert report.misses == 0
    lines = [_chat([system, {"role": "user", "content": "A: hi"}], 1_760_000_000, 0),
             _chat([system, {"role": "user", "content": "B: hello"}], 1_760_010_800, 1152)]
    for line in lines:
        line["request"]["prompt_cache_retention"] = "in_memory"  # type: ignore[index]
    report = _explain(tmp_path, lines)
    assert report.requests[1].status == "cold_start"  # in memory: gone within 1 h
