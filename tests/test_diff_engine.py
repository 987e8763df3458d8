"""Unit tests of promptcache.diff.diff: one test per cause code, plus prediction and money."""

from __future__ import annotations

import base64
import copy
import itertools
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache._errors import InvalidRequestError
from promptcache.diff import CAUSES, diff
from tests.cases import filler

MODEL = "claude-sonnet-4-5"  # minimum 1,024; lookback 20; read 0.1x; write 1.25x / 2x


def text(n: int, salt: str) -> str:
    return filler(n, salt).strip()


def block(t: str, *, cc: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": t}
    if cc:
        b["cache_control"] = {"type": "ephemeral", **({"ttl": cc} if cc != "5m" else {})}
    return b


def convo(turns: int, *, salt: str = "c", system_ttl: str = "5m", last_ttl: str | None = "5m",
          tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """An Anthropic request: 2 tools, a 2,000-token system with a breakpoint, ``turns``
    messages of 300 tokens with a breakpoint on the last block."""
    msgs = [{"role": "user" if k % 2 == 0 else "assistant",
             "content": [block(text(300, f"{salt}{k}"))]} for k in range(turns)]
    if last_ttl:
        msgs[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"} if last_ttl == "5m" \
            else {"type": "ephemeral", "ttl": last_ttl}
    body: dict[str, Any] = {
        "model": MODEL, "max_tokens": 100,
        "tools": tools if tools is not None else [
            {"name": "read", "description": text(100, "tool-read"),
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
            {"name": "write", "description": text(100, "tool-write"),
             "input_schema": {"type": "object"}}],
        "system": [block(text(2000, "system"), cc=system_ttl)],
        "messages": msgs,
    }
    body.update(extra)
    return body


def codes(r: Any) -> list[str]:
    return [c.code for c in r.causes]


# ------------------------------------------------------------------------- no change
def test_pure_append_reads_the_previous_entry() -> None:
    a, b = convo(4), convo(6)
    r = diff(a, b)
    assert r.verdict == "no_miss" and r.cause == "append_only"
    assert r.divergence is None and r.invalidated_levels == [] and r.reusable_prefix == "all"
    assert r.predicted is not None and r.ideal_cache_read is not None
    # B reads everything A cached (up to A's last block), writes its two new messages
    assert r.predicted.cache_read == r.ideal_cache_read
    assert r.predicted.cache_write == 600
    assert r.lost_tokens == 0 and r.miss_cost_usd == 0.0


def _next_turn() -> tuple[dict[str, Any], dict[str, Any]]:
    """A: system (breakpoint) + one user message; B: the same plus assistant + user."""
    a: dict[str, Any] = {"model": MODEL, "max_tokens": 256,
                         "system": [block(text(1300, "system"), cc="5m")],
                         "messages": [{"role": "user", "content": "hi"}]}
    b = copy.deepcopy(a)
    b["messages"] += [{"role": "assistant", "content": "hello"},
                      {"role": "user", "content": "next question"}]
    return a, b


def test_append_only_next_turn_says_so() -> None:
    """B = A + two messages: no miss, cause append_only, not 'identical payloads' and no
    failed 'byte-identical bodies' check (new-user report, problem 2)."""
    a, b = _next_turn()
    r = diff(a, b)
    assert r.verdict == "no_miss" and r.classification is None
    assert r.cause == "append_only" and len(r.causes) == 1
    assert r.causes[0].title == CAUSES["append_only"].title
    assert "identical" not in r.causes[0].title
    assert r.causes[0].detail["payload_difference"] == "append_only"
    assert r.causes[0].detail["appended_from"] == "messages[1].content"
    assert r.causes[0].detail["appended_tokens"] > 0
    checks = {c.name: c for c in r.checks}
    assert checks["byte-identical bodies"].passed is None
    assert checks["byte-identical bodies"].detail == "B extends A"
    assert checks["B extends A's prefix unchanged"].passed is True
    assert all(c.passed is not False for c in r.checks)
    # byte-identical bodies keep no_difference (case BR-22) and a passed body check
    same = diff(a, copy.deepcopy(a))
    assert same.cause == "no_difference"
    assert same.causes[0].detail == {"payload_difference": "none"}
    assert {c.name: c.passed for c in same.checks}["byte-identical bodies"] is True


def test_append_only_unexplained_miss_is_provider_side() -> None:
    """B only appends, yet reads nothing: provider side, and the cause still says append-only
    (its body is not A's)."""
    a, b = _next_turn()
    r = diff(a, b, usage_b={"input_tokens": 10, "cache_read_input_tokens": 0,
                            "cache_creation_input_tokens": 1300})
    assert r.verdict == "unexplained_miss" and r.classification == "provider_side"
    assert r.cause == "append_only" and r.invalidated_levels == []
    assert {c.name: c.passed for c in r.checks}["byte-identical bodies"] is None


def test_append_only_cli_text_and_json(tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from promptcache.diff import diff_command

    a, b = _next_turn()
    pa, pb = tmp_path / "A.json", tmp_path / "B.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    out = CliRunner().invoke(diff_command, [str(pa), str(pb)])
    assert out.exit_code == 0, out.output
    assert "append_only" in out.output and "n/a: byte-identical bodies (B extends A)" in out.output
    for wrong in ("no_difference", "identical payloads", "payload_difference: none", "FAILED"):
        assert wrong not in out.output
    out = CliRunner().invoke(diff_command, [str(pa), str(pb), "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["cause"] == "append_only"
    assert data["causes"][0]["detail"]["payload_difference"] == "append_only"
    body_check = next(c for c in data["checks"] if c["name"] == "byte-identical bodies")
    assert body_check["passed"] is None


def test_moving_the_marker_is_not_a_change() -> None:
    """cache_control on A's last block moves to B's last block: same cached bytes."""
    r = diff(convo(4), convo(5))
    assert r.cause == "append_only" and r.divergence is None


# ------------------------------------------------------------------------- tools
def test_tool_changed_names_tool_and_field() -> None:
    a, b = convo(2), convo(2)
    b["tools"][1]["description"] += " Now also appends."
    r = diff(a, b)
    assert r.cause == "tool_changed"
    assert r.causes[0].detail == {"tool": "write", "field": "description"}
    assert r.divergence is not None and r.divergence.path == "tools[1].description"
    assert r.invalidated_levels == ["tools", "system", "messages"]
    assert r.predicted is not None and r.predicted.cache_read == 0


def test_tools_changed_added() -> None:
    a, b = convo(2), convo(2)
    b["tools"].append({"name": "search", "description": "find", "input_schema": {"type": "object"}})
    r = diff(a, b)
    assert r.cause == "tools_changed"
    assert r.causes[0].detail == {"added": ["search"], "removed": []}
    assert r.semantic_equal is False


def test_tool_json_key_order() -> None:
    a, b = convo(2), convo(2)
    b["tools"][0]["input_schema"] = {"properties": {"path": {"type": "string"}}, "type": "object"}
    r = diff(a, b)
    assert r.cause == "json_key_order"
    assert r.causes[0].detail["tool"] == "read"
    assert r.divergence is not None and r.divergence.path == "tools[0].input_schema"
    assert r.semantic_equal


# ------------------------------------------------------------------------- system
def test_system_changed_with_offsets_and_excerpt() -> None:
    a, b = convo(2), convo(2)
    original = a["system"][0]["text"]
    b["system"][0]["text"] = original[:500] + " Today is 2026-11-29." + original[500:]
    r = diff(a, b)
    assert r.cause == "system_changed"
    d = r.divergence
    assert d is not None and d.path == "system[0].text" and d.char_offset == 500
    assert "2026-11-29" in d.after and "2026-11-29" not in d.before
    assert r.invalidated_levels == ["system", "messages"]
    assert r.reusable_prefix == "tools"
    # the offset in tokens lies inside the system block
    assert d.token_offset > r.identical_prefix_tokens


def test_redact_shows_hashes_only() -> None:
    a, b = convo(2), convo(2)
    b["system"][0]["text"] += " secret-value-42"
    r = diff(a, b, redact=True)
    assert r.divergence is not None
    assert r.divergence.after.startswith("sha256:") and "secret" not in r.divergence.after
    assert "secret" not in r.model_dump_json()


def test_whitespace_only() -> None:
    a, b = convo(2), convo(2)
    b["system"][0]["text"] = b["system"][0]["text"].replace(" ", "  ", 3)
    r = diff(a, b)
    assert r.cause == "whitespace_only" and r.semantic_equal


# ------------------------------------------------------------------------- messages
def _history(names: list[str]) -> list[dict[str, Any]]:
    return [{"role": "user" if n.startswith("u") else "assistant",
             "content": [block(text(200, f"h-{n}"))]} for n in names]


def test_message_removed() -> None:
    a = convo(2, messages=_history(["u1", "a1", "u2", "a2", "u3"]))
    b = convo(2, messages=_history(["u1", "a1", "u3", "a3", "u4"]))
    r = diff(a, b)
    assert r.cause == "message_removed"
    assert r.causes[0].detail["removed"] == ["messages[2]", "messages[3]"]
    assert r.divergence is not None and r.divergence.segment_path == "messages[2].content[0]"
    assert r.invalidated_levels == ["messages"]


def test_message_inserted() -> None:
    a = convo(2, messages=_history(["u1", "a1", "u2"]))
    b = convo(2, messages=_history(["u1", "x-reminder", "a1", "u2", "a2", "u3"]))
    b["messages"][1]["role"] = "user"
    r = diff(a, b)
    assert r.cause == "message_inserted"
    assert r.causes[0].detail["inserted"] == ["messages[1]"]


def test_thinking_blocks_removed_is_a_rewrite() -> None:
    """On a model that keeps thinking blocks, removing one client-side is a history edit."""
    a = convo(2, model="claude-sonnet-4-6", messages=[{"role": "user", "content": "q1"},
                           {"role": "assistant", "content": [
                               {"type": "thinking", "thinking": "hmm", "signature": "s"},
                               block("answer")]},
                           {"role": "user", "content": "q2"}])
    b = convo(2, model="claude-sonnet-4-6",
              messages=[{"role": "user", "content": "q1"},
                        {"role": "assistant", "content": [block("answer")]},
                        {"role": "user", "content": "q2"}])
    r = diff(a, b)
    assert r.cause == "message_rewritten"
    assert r.causes[0].detail["subtype"] == "thinking blocks removed"
    # Sonnet 4.5 strips those blocks itself before a plain user turn: nothing changes
    a["model"] = b["model"] = MODEL
    assert diff(a, b).cause == "no_difference"


def _tool_loop(model: str, *, plain_turn: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    loop = [{"role": "user", "content": [block(text(300, "task"))]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": text(400, "plan"), "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": text(300, "file"),
                                          "cache_control": {"type": "ephemeral"}}]}]
    a = convo(2, model=model, messages=loop)
    nxt: list[dict[str, Any]] = [{"role": "assistant", "content": [block(text(100, "done"))]}]
    if plain_turn:
        nxt.append({"role": "user", "content": [block("thanks, next task", cc="5m")]})
    else:
        nxt = [{"role": "assistant", "content": [
                   {"type": "thinking", "thinking": text(50, "more"), "signature": "s2"},
                   {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                             "content": "ok",
                                             "cache_control": {"type": "ephemeral"}}]}]
    b = convo(2, model=model, messages=copy.deepcopy([*loop, *nxt]))
    b["messages"][2]["content"][0].pop("cache_control")
    return a, b


def test_plain_user_turn_strips_thinking_on_older_models() -> None:
    a, b = _tool_loop(MODEL, plain_turn=True)
    r = diff(a, b)
    assert r.cause == "thinking_stripped"
    assert r.causes[0].path == "messages[1].content[0]"
    assert r.causes[0].detail["stripped"] == ["messages[1].content[0]"]
    assert r.invalidated_levels == ["messages"]
    assert r.predicted is not None and r.ideal_cache_read is not None
    assert r.predicted.cache_read < r.ideal_cache_read  # only tools + system survive
    assert r.diagnostics is None
    # the tool loop continuing keeps the thinking block: no miss
    a2, b2 = _tool_loop(MODEL, plain_turn=False)
    assert diff(a2, b2).cause == "append_only"
    # models that keep thinking blocks: no miss either
    a3, b3 = _tool_loop("claude-sonnet-4-6", plain_turn=True)
    assert diff(a3, b3).cause == "append_only"


def _png(w: int, h: int, color: int) -> str:
    raw = b"".join(b"\x00" + bytes([color, 0, 0]) * w for _ in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def test_image_changed() -> None:
    def with_image(color: int) -> dict[str, Any]:
        body = convo(2)
        body["messages"][0]["content"].insert(0, {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": _png(8, 8, color)}})
        return body

    r = diff(with_image(10), with_image(200))
    assert r.cause == "image_changed"
    assert r.divergence is not None and r.divergence.segment_path == "messages[0].content[0]"
    assert r.invalidated_levels == ["messages"]


def test_tool_use_input_key_order() -> None:
    def body(inp: dict[str, Any]) -> dict[str, Any]:
        return convo(2, messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                                               "name": "lookup", "input": inp}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "sunny"}]}])

    r = diff(body({"query": "weather", "city": "Oslo"}), body({"city": "Oslo", "query": "weather"}))
    assert r.cause == "json_key_order"
    assert r.divergence is not None and r.divergence.path == "messages[1].content[0].input"


# ------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(("key", "va", "vb", "cause"), [
    ("thinking", {"type": "enabled", "budget_tokens": 2000},
     {"type": "enabled", "budget_tokens": 4000}, "thinking_changed"),
    ("output_config", {"effort": "high"}, {"effort": "low"}, "effort_changed"),
    ("tool_choice", {"type": "auto"}, {"type": "any"}, "tool_choice_changed"),
])
def test_parameters_invalidate_messages(key: str, va: Any, vb: Any, cause: str) -> None:
    a, b = convo(4, **{key: va}), convo(6, **{key: vb})
    r = diff(a, b)
    assert r.cause == cause
    if key == "output_config":
        va, vb = va["effort"], vb["effort"]
    assert r.causes[0].detail == {"from": va, "to": vb}
    assert r.invalidated_levels == ["messages"] and r.reusable_prefix == "tools+system"
    assert r.predicted is not None
    assert r.predicted.cache_read == r.identical_prefix_tokens  # tools + system


def test_parameter_key_order_is_not_a_change() -> None:
    a = convo(4, tool_choice={"type": "tool", "name": "read"})
    b = convo(6, tool_choice={"name": "read", "type": "tool"})
    assert diff(a, b).cause == "append_only"


def test_model_changed_invalidates_everything() -> None:
    a, b = convo(4), convo(6, model="claude-sonnet-4-6")
    r = diff(a, b)
    assert r.cause == "model_changed"
    assert r.causes[0].detail == {"from": MODEL, "to": "claude-sonnet-4-6"}
    assert r.invalidated_levels == ["tools", "system", "messages"]
    assert r.predicted is not None and r.predicted.cache_read == 0


# ------------------------------------------------------------------------- TTL, minimum, bp
def test_ttl_expired_keeps_the_1h_entry() -> None:
    a = convo(4, system_ttl="1h")
    b = convo(6, system_ttl="1h")
    fresh = diff(a, b, timestamps=(0, 120))
    late = diff(a, b, timestamps=("2026-11-29T10:00:00Z", "2026-11-29T10:07:00Z"))
    assert fresh.cause == "append_only"
    assert late.cause == "ttl_expired" and late.classification == "timing"
    assert late.causes[0].detail["ttl"] == ["5m"]
    assert late.predicted is not None and fresh.predicted is not None
    assert 0 < late.predicted.cache_read < fresh.predicted.cache_read
    assert late.invalidated_levels == ["messages"]
    gap = next(c for c in late.checks if c.name == "gap < TTL")
    assert gap.passed is True  # the 1h entry is alive


def test_below_minimum() -> None:
    a = convo(2)
    a["system"][0]["text"] = text(300, "short")
    a["messages"] = [{"role": "user", "content": [block("hi", cc="5m")]}]
    b = dict(a)
    r = diff(a, b)
    assert r.cause == "below_minimum"
    assert r.causes[0].detail["minimum_tokens"] == 1024
    assert r.predicted is not None and r.predicted.cache_read == 0


def test_breakpoint_beyond_lookback() -> None:
    a = convo(4)
    b = convo(4)
    b["messages"][-1]["content"][-1].pop("cache_control")
    # one user turn that appends 25 blocks (25 positions) with the marker only at the end
    b["messages"].append({"role": "assistant", "content": [block(f"step {k}") for k in range(25)]})
    b["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    r = diff(a, b)
    assert r.cause == "breakpoint_moved"
    assert r.causes[0].detail["subtype"] == "lookback_exceeded"
    assert r.causes[0].detail["positions_apart"] > 20
    # only the system entry is still reachable (it has its own breakpoint)
    assert r.predicted is not None and r.ideal_cache_read is not None
    assert r.predicted.cache_read == r.ideal_cache_read - 1200  # the 4 messages are lost
    assert r.lost_tokens == 1200


def test_breakpoint_removed() -> None:
    a = convo(4)
    b = convo(6, last_ttl=None)
    r = diff(a, b)
    assert r.cause == "breakpoint_moved"
    assert r.causes[0].detail["subtype"] == "no breakpoint at or after the cached entry"


# ------------------------------------------------------------------------- money, usage
def test_prices_override_and_base_units() -> None:
    a, b = convo(2), convo(4)
    b["system"][0]["text"] += " v2"
    prices = {"input": 3.0, "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6.0}
    r = diff(a, b, prices=prices)
    assert r.lost_tokens is not None and r.lost_tokens > 2000
    assert r.miss_cost_usd == pytest.approx(r.lost_tokens * (3.75 - 0.3) / 1e6)
    assert r.extra_cost_base_tokens == pytest.approx(r.lost_tokens * 1.15)


def test_usage_a_calibrates_estimates() -> None:
    a, b = convo(4), convo(6)
    plain = diff(a, b)
    assert plain.predicted is not None
    total = plain.ideal_cache_read or 0
    scaled = diff(a, b, usage_a={"input_tokens": 0, "cache_read_input_tokens": 0,
                                 "cache_creation_input_tokens": round(total * 1.1)})
    assert scaled.predicted is not None
    assert scaled.predicted.cache_read == pytest.approx(plain.predicted.cache_read * 1.1, abs=2)
    assert any("scaled" in n for n in scaled.notes)


def test_mixed_providers_rejected() -> None:
    openai = {"model": "gpt-4o", "messages": [{"role": "system", "content": "x"},
                                              {"role": "tool", "tool_call_id": "1",
                                               "content": "y"}]}
    with pytest.raises(InvalidRequestError):
        diff(convo(2), openai)


# ------------------------------------------------------------------------- OpenAI
def _responses(**extra: Any) -> dict[str, Any]:
    body = {"model": "gpt-5.6-sol", "instructions": text(1500, "oa-instr"),
            "input": [{"role": "user", "content": [{"type": "input_text",
                                                     "text": text(400, "oa-u1")}]}]}
    body.update(extra)
    return body


def test_openai_responses_instructions_changed() -> None:
    a = _responses()
    b = _responses(instructions=text(1500, "oa-instr") + " v2")
    r = diff(a, b)
    assert r.provider == "openai-responses"
    assert r.cause == "system_changed"
    assert r.divergence is not None and r.divergence.path == "instructions"


def test_openai_prompt_cache_key_changed() -> None:
    r = diff(_responses(prompt_cache_key="tenant-a"), _responses(prompt_cache_key="tenant-b"))
    # the key is a routing hint (hosted-api-rules.md 2.1): a warning-level cause, not a miss
    assert r.cause == "no_difference" and r.verdict == "no_miss"
    assert [c.code for c in r.causes][1:] == ["prompt_cache_key_changed"]
    assert r.predicted is not None and r.predicted.cache_read == r.ideal_cache_read


def test_openai_below_minimum() -> None:
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
    r = diff(small, dict(small))
    assert r.cause == "below_minimum"


# ------------------------------------------------------------------------- diagnostics
def test_anthropic_diagnostics_agree_and_disagree() -> None:
    a, b = convo(2), convo(2)
    b["tools"] = list(reversed(b["tools"]))
    agree = diff(a, b, diagnostics_b={"diagnostics": {"cache_miss_reason": {
        "type": "tools_changed", "cache_missed_input_tokens": 2300}}})
    assert agree.diagnostics is not None
    assert agree.diagnostics.agrees is True and agree.diagnostics.missed_tokens == 2300
    assert agree.diagnostics.ours == "tools_changed"
    disagree = diff(a, b, diagnostics_b={"diagnostics": {"cache_miss_reason": {
        "type": "messages_changed", "cache_missed_input_tokens": 10}}})
    assert disagree.diagnostics is not None and disagree.diagnostics.agrees is False
    pending = diff(a, b, diagnostics_b={"diagnostics": {"cache_miss_reason": None}})
    assert pending.diagnostics is not None
    assert pending.diagnostics.reason == "pending" and pending.diagnostics.agrees is None


def test_openai_diagnostics_mapping() -> None:
    a = _responses()
    b = _responses(instructions=text(1500, "oa-instr") + " v2")
    resp = {"id": "resp_2", "prompt_cache_diagnostics": {
        "type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": 1400,
        "comparison_reusable_tokens": 0}}
    r = diff(a, b, diagnostics_b=resp)
    assert r.diagnostics is not None
    assert (r.diagnostics.provider, r.diagnostics.reason, r.diagnostics.ours) == \
        ("openai", "input_changed", "input_changed")
    assert r.diagnostics.agrees is True
    hit = diff(a, dict(a), diagnostics_b={"prompt_cache_diagnostics": {"type": "cache_hit"}})
    assert hit.diagnostics is not None and hit.diagnostics.agrees is True


def test_every_cause_code_documented() -> None:
    for code, info in CAUSES.items():
        assert info.code == code and info.fix_hint and info.source.startswith("https://")


# ------------------------------------------------------------------------- reuse, OpenAI 5.6
def test_prepare_once_compare_many() -> None:
    from promptcache.diff import compare, prepare

    reqs = [prepare(convo(k)) for k in (2, 4, 6)]
    results = [compare(a, b, usage_b={"input_tokens": 1, "cache_read_input_tokens": 0,
                                      "cache_creation_input_tokens": 3000})
               for a, b in itertools.pairwise(reqs)]
    assert all(r.verdict == "unexplained_miss" for r in results)
    assert all(r.miss_cost_usd is not None and r.miss_cost_usd > 0 for r in results)
    unpriced = compare(reqs[0], reqs[1], prices=None,
                       usage_b={"input_tokens": 1, "cache_read_input_tokens": 0,
                                "cache_creation_input_tokens": 3000})
    assert unpriced.miss_cost_usd is None and unpriced.extra_cost_base_tokens is not None


def _sol(mode: str | None, marker: bool, user: str) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_text", "text": text(1500, "sol-doc")}
    if marker:
        part["prompt_cache_breakpoint"] = {"mode": "explicit"}
    body: dict[str, Any] = {"model": "gpt-5.6-sol", "input": [
        {"role": "user", "content": [part, {"type": "input_text", "text": user}]}]}
    if mode:
        body["prompt_cache_options"] = {"mode": mode}
    return body


def test_openai_explicit_mode_reads_only_explicit_breakpoints() -> None:
    implicit = diff(_sol(None, False, "q1"), _sol(None, False, "q2"))
    explicit = diff(_sol("explicit", True, "q1"), _sol("explicit", True, "q2"))
    off = diff(_sol("explicit", False, "q1"), _sol("explicit", False, "q2"))
    assert implicit.predicted is not None and explicit.predicted is not None
    assert off.predicted is not None
    # implicit: 128-token steps; explicit: the breakpoint boundary, not rounded; off: nothing
    assert (implicit.predicted.cache_read - 1024) % 128 == 0
    assert explicit.predicted.cache_read >= implicit.predicted.cache_read
    assert off.predicted.cache_read == 0


def test_prompt_length_tier_prices_apply() -> None:
    """Claude Haiku 5.5 above 100K prompt tokens: every token at the higher tier."""
    a = convo(2, model="claude-haiku-5-5")
    a["system"][0]["text"] = text(110_000, "big-system")
    b = convo(4, model="claude-haiku-5-5")
    b["system"][0]["text"] = a["system"][0]["text"] + " v2"
    r = diff(a, b)
    assert r.lost_tokens is not None and r.lost_tokens > 100_000
    # tier above 100K: write 0.625, read 0.05 USD/MTok (base tier: 0.125 and 0.01)
    assert r.miss_cost_usd == pytest.approx(r.lost_tokens * (0.625 - 0.05) / 1e6)


# ------------------------------------------------------------------------- properties
_texts = st.lists(st.text(alphabet="abc xyz.", min_size=1, max_size=20), min_size=2,
                  max_size=8)


def _plain(texts: list[str]) -> dict[str, Any]:
    return {"system": "You are terse.",
            "messages": [{"role": "user" if k % 2 == 0 else "assistant",
                          "content": [{"type": "text", "text": f"{k}:{t}"}]}
                         for k, t in enumerate(texts)]}


@settings(max_examples=40, deadline=None)
@given(_texts, st.integers(min_value=0, max_value=3))
def test_property_append_is_never_a_change(texts: list[str], extra: int) -> None:
    a = _plain(texts)
    b = _plain(texts + [f"more {k}" for k in range(extra)])
    r = diff(a, b, provider="anthropic")
    assert r.cause == ("append_only" if extra else "no_difference") and r.divergence is None
    assert r.invalidated_levels == []


@settings(max_examples=40, deadline=None)
@given(_texts, st.data())
def test_property_an_edit_is_found_where_it_is(texts: list[str], data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=len(texts) - 1))
    a = _plain(texts)
    edited = list(texts)
    edited[k] = edited[k] + "!"
    b = _plain(edited)
    r = diff(a, b, provider="anthropic")
    assert r.divergence is not None
    assert r.divergence.segment_path == f"messages[{k}].content[0]"
    assert r.divergence.path == f"messages[{k}].content[0].text"
    assert r.divergence.char_offset == len(f"{k}:{texts[k]}")
    assert r.cause == "message_rewritten"
    assert r.invalidated_levels == ["messages"]


def test_unknown_model_still_names_the_cause_without_numbers() -> None:
    a, b = convo(2, model="my-private-model"), convo(4, model="my-private-model")
    b["tools"] = list(reversed(b["tools"]))
    r = diff(a, b, provider="anthropic")
    assert r.verdict == "miss_explained" and r.cause == "tools_reordered"
    assert r.predicted is None and r.lost_tokens is None and r.miss_cost_usd is None
    assert any("model 'my-private-model' is unknown to the catalog" in n for n in r.notes)


@pytest.mark.parametrize("reported", [1100, 1300, 2047, 2049, 5000])
def test_openai_scaled_prediction_stays_on_the_grid(reported: int) -> None:
    """Usage scaling is applied before the 128-token grid (1,024 + n * 128, or 0)."""
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": text(1500, "grid")},
                                            {"role": "user", "content": "q"}]}
    r = diff(body, copy.deepcopy(body), usage_a={"prompt_tokens": reported,
                                                 "prompt_tokens_details": {"cached_tokens": 0}})
    assert r.predicted is not None and r.ideal_cache_read is not None
    for tokens in (r.predicted.cache_read, r.ideal_cache_read):
        assert tokens == 0 or (tokens >= 1024 and (tokens - 1024) % 128 == 0), tokens
        assert tokens <= reported
    assert r.predicted.cache_read == 1024 + ((reported - 1024) // 128) * 128 \
        or r.predicted.cache_read == 1024 + ((reported - 1024) // 128 - 1) * 128


# ------------------------------------------- bodies that differ outside the cached content
def _chat(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": text(1500, "oc-sys")},
        {"role": "user", "content": "hi"}]}
    body.update(extra)
    return body


def test_ttl_change_names_the_field_not_identical_payloads() -> None:
    """Only the system breakpoint's TTL changes (5m -> 1h): no miss (a TTL is not cached
    content), but the cause names the field and never says 'identical payloads' while the
    body check fails (new-user report 8, bug 6)."""
    a, b = convo(4), convo(4, system_ttl="1h")
    r = diff(a, b)
    assert r.verdict == "no_miss" and r.cause == "no_difference"
    cause = r.causes[0]
    assert "identical" not in cause.title
    assert cause.detail["payload_difference"] == "outside the cached content"
    assert cause.detail["differs_at"] == ["system[0].cache_control.ttl"]
    checks = {c.name: c for c in r.checks}
    assert checks["byte-identical bodies"].passed is False
    assert "system[0].cache_control.ttl" in checks["byte-identical bodies"].detail
    notes = " ".join(r.notes)
    assert "not part of the cached content" in notes
    assert "longer TTL" in notes and "1h" in notes  # the TTL-ordering rule is named
    assert "breaks" not in notes  # 1h system before 5m messages: the order is allowed


def test_ttl_change_that_breaks_the_ordering_rule_says_so() -> None:
    """B's last breakpoint becomes 1h after a 5m system breakpoint: the TTL-ordering rule
    (longer TTLs first, hosted-api-rules.md 1.5) is broken, and the note says where."""
    r = diff(convo(4), convo(4, last_ttl="1h"))
    assert r.cause == "no_difference" and "identical" not in r.causes[0].title
    assert r.causes[0].detail["differs_at"] == ["messages[3].content[0].cache_control.ttl"]
    notes = " ".join(r.notes)
    assert "breaks" in notes and "TTL-ordering" in notes
    assert "messages[3].content[0]" in notes and "system[0]" in notes


def test_openai_tool_choice_is_named_and_outside_the_cached_content() -> None:
    r = diff(_chat(), _chat(tool_choice="required"))
    assert r.provider == "openai-chat" and r.verdict == "no_miss"
    assert r.cause == "no_difference" and "identical" not in r.causes[0].title
    assert r.causes[0].detail["differs_at"] == ["tool_choice"]
    assert any("not part of the cached content" in n for n in r.notes)


def test_identical_bodies_still_say_identical() -> None:
    r = diff(_chat(), _chat())
    assert r.cause == "no_difference" and "identical" in r.causes[0].title
    assert r.causes[0].detail == {"payload_difference": "none"}


def test_top_level_key_order_is_named_as_key_order() -> None:
    a = _chat(temperature=0, top_p=1)
    b = {k: a[k] for k in ("model", "messages", "top_p", "temperature")}
    r = diff(a, b)
    assert r.cause == "no_difference" and "identical" not in r.causes[0].title
    assert r.causes[0].detail["differs_at"] == ["(key order of the top level)"]


def test_merge_names_the_removed_message_even_if_its_text_recurs() -> None:
    """A: u1, a1, u2, a2, u3; B merges u1 and u2 and drops a1. a1's text also occurs inside
    the merged user text; it is still the removed message (new-user report 8, nit N4)."""
    u1 = text(400, "m-u1") + " shared words here"
    a1 = "shared words here"
    u2, a2, u3 = text(400, "m-u2"), text(300, "m-a2"), text(300, "m-u3")
    base = convo(0, last_ttl=None)
    a = dict(base, messages=[{"role": "user", "content": u1},
                             {"role": "assistant", "content": a1},
                             {"role": "user", "content": u2},
                             {"role": "assistant", "content": a2},
                             {"role": "user", "content": u3}])
    b = dict(base, messages=[{"role": "user", "content": u1 + "\n\n" + u2},
                             {"role": "assistant", "content": a2},
                             {"role": "user", "content": u3}])
    r = diff(a, b)
    assert r.cause == "message_rewritten"
    detail = r.causes[0].detail
    assert "merged" in detail["subtype"]
    assert detail["removed"] == ["messages[1]"]
    assert detail["merged_into"] == "messages[0]"


@pytest.mark.parametrize(("a", "b", "path"), [
    (_responses(reasoning={"effort": "medium"}), _responses(reasoning={"effort": "high"}),
     "reasoning.effort"),
    (_chat(model="o3", reasoning_effort="low"), _chat(model="o3", reasoning_effort="high"),
     "reasoning_effort"),
])
def test_openai_effort_cites_openai_not_anthropic_hierarchy(a: Any, b: Any, path: str) -> None:
    """OpenAI effort change: the source is OpenAI's diagnostics page (reason
    reasoning_effort_changed) and the note says the tier hierarchy is Anthropic's
    (new-user report 8, nit N6)."""
    from promptcache.diff._causes import OPENAI_DIAGNOSTICS_URL

    r = diff(a, b)
    assert r.cause == "effort_changed" and r.causes[0].path == path
    cause = r.causes[0]
    assert cause.source == OPENAI_DIAGNOSTICS_URL
    assert "reasoning_effort_changed" in cause.note
    assert "Anthropic" in cause.note
    # Anthropic's effort keeps its own source and note
    an = diff(convo(4, output_config={"effort": "high"}), convo(4, output_config={"effort": "low"}))
    assert an.causes[0].source == CAUSES["effort_changed"].source
    assert "reasoning_effort_changed" not in an.causes[0].note
