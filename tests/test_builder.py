"""PromptBuilder: section order, volatile values, canonical payloads, SDK-valid outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from promptcache._errors import (
    InvalidRequestError,
    OrderingError,
    PlanError,
    VolatileValueError,
)
from promptcache.builder import (
    Explanation,
    Image,
    PromptBuilder,
    Thinking,
    ToolCall,
    ToolResult,
    Volatile,
    assistant,
    user,
)
from promptcache.prefix import render
from tests.cases import filler

CLAUDE = "claude-sonnet-4-5"
GPT_EXPLICIT = "gpt-5.6-sol"
GPT_IMPLICIT = "gpt-4o"
REPO = Path(__file__).resolve().parents[1]

TOOLS = [
    {"name": "search", "description": "Search the web.",
     "input_schema": {"type": "object", "properties": {"q": {"type": "string"},
                                                       "limit": {"type": "integer"}},
                      "required": ["q"]}},
    {"name": "fetch", "description": "Fetch a URL.",
     "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}},
    {"name": "calc", "description": "Evaluate arithmetic.",
     "input_schema": {"type": "object", "properties": {"expr": {"type": "string"}}}},
]


def agent_builder(model: str = CLAUDE, *, turn: str = "What changed?", **kw: Any) -> PromptBuilder:
    b = PromptBuilder(model, **kw)
    b.tools(TOOLS)
    b.system("You are a careful research agent." + filler(1500, "sys"))
    b.document(filler(300, "doc"), title="notes.md")
    b.history(
        user("Find the release date." + filler(50, "u1")),
        assistant("Searching.", ToolCall("call_1", "search", {"q": "release", "limit": 3}),
                  ToolCall("call_2", "fetch", {"url": "https://example.com"})),
        user(ToolResult("call_1", "result one"), ToolResult("call_2", "result two")),
        assistant("It was in May."),
    )
    b.turn(turn)
    return b


# ------------------------------------------------------------------------ SDK param types
def _consume(value: Any) -> Any:
    """Materialise pydantic's lazy ValidatorIterators so nested items are validated too.

    The SDKs' content unions also accept their *response* models (``TextBlock`` ...), which
    ignore unknown or invalid fields; a node that only validates as one of those is not a
    valid param, so it fails here.
    """
    if isinstance(value, BaseModel):
        raise ValidationError.from_exception_data(
            f"{type(value).__name__} (a response model, not a request param)", [])
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_consume(v) for v in value]
    if type(value).__name__ == "ValidatorIterator":
        return [_consume(v) for v in value]
    return value


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    if kind == "anthropic":
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

        return TypeAdapter(MessageCreateParamsNonStreaming)
    if kind == "openai-chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

        return TypeAdapter(CompletionCreateParamsNonStreaming)
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    return TypeAdapter(ResponseCreateParamsNonStreaming)


def sdk_valid(kind: str, payload: dict[str, Any]) -> None:
    """Validate ``payload`` against the official SDK's create() param TypedDict, deeply."""
    _consume(_adapter(kind).validate_python(payload))


def test_sdk_validator_catches_bad_nested_values() -> None:
    bad = {"model": CLAUDE, "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x",
                                      "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}]}
    with pytest.raises(ValidationError):
        sdk_valid("anthropic", bad)
    bad_oa = {"model": GPT_EXPLICIT, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x",
                                      "prompt_cache_breakpoint": {"mode": "bogus"}}]}]}
    with pytest.raises(ValidationError):
        sdk_valid("openai-chat", bad_oa)


def test_anthropic_output_is_valid_for_the_sdk() -> None:
    b = agent_builder(stable_ttl="1h")
    b.tail("Reply in under 100 words.")
    out = b.to_anthropic(max_tokens=512, temperature=0.2)
    sdk_valid("anthropic", out)
    view = render(out)
    ttls = [s.breakpoint.ttl for s in view.breakpoints() if s.breakpoint]
    assert ttls and ttls[0] == "1h" and ttls[-1] == "5m"
    assert ttls == sorted(ttls, key=lambda t: t != "1h")  # 1h before 5m
    assert out["messages"][-1]["content"][-1] == {"type": "text",
                                                   "text": "Reply in under 100 words."}


@pytest.mark.parametrize("model", [GPT_EXPLICIT, GPT_IMPLICIT])
def test_openai_outputs_are_valid_for_the_sdk(model: str) -> None:
    b = agent_builder(model)
    b.tail("Answer briefly.")
    chat = b.to_openai_chat(temperature=0)
    resp = b.to_openai_responses()
    sdk_valid("openai-chat", chat)
    sdk_valid("openai-responses", resp)
    for out in (chat, resp):
        assert out["prompt_cache_key"].startswith("pc-")
    # tool calls and results keep their pairing
    roles = [m.get("role") for m in chat["messages"]]
    assert roles.count("tool") == 2
    types = [i.get("type") for i in resp["input"]]
    assert types.count("function_call") == 2 and types.count("function_call_output") == 2


def test_openai_explicit_breakpoints_only_where_supported() -> None:
    explicit = agent_builder(GPT_EXPLICIT).to_openai_chat()
    assert explicit["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    marked = [p for m in explicit["messages"] if isinstance(m.get("content"), list)
              for p in m["content"] if "prompt_cache_breakpoint" in p]
    assert marked and all(p["prompt_cache_breakpoint"] == {"mode": "explicit"} for p in marked)
    assert len(marked) <= 3  # implicit mode: one implicit + at most three explicit writes
    # never on assistant output
    for m in explicit["messages"]:
        if m["role"] == "assistant":
            assert "prompt_cache_breakpoint" not in json.dumps(m)

    implicit = agent_builder(GPT_IMPLICIT).to_openai_chat()
    text = json.dumps(implicit)
    assert "prompt_cache_breakpoint" not in text and "prompt_cache_options" not in implicit
    assert implicit["prompt_cache_key"].startswith("pc-")
    resp = agent_builder(GPT_IMPLICIT).to_openai_responses()
    assert "prompt_cache_breakpoint" not in json.dumps(resp)


def test_prompt_cache_key_is_the_stable_prefix_and_process_independent() -> None:
    a = agent_builder(GPT_IMPLICIT, turn="one").to_openai_chat()
    b = agent_builder(GPT_IMPLICIT, turn="two, a different question").to_openai_chat()
    assert a["prompt_cache_key"] == b["prompt_cache_key"]  # same stable prefix
    c = PromptBuilder(GPT_IMPLICIT).system("another system prompt")
    c.turn("x")
    assert c.to_openai_chat()["prompt_cache_key"] != a["prompt_cache_key"]
    code = ("from promptcache.builder import PromptBuilder\n"
            "b = PromptBuilder('gpt-4o').system('another system prompt').turn('x')\n"
            "print(b.to_openai_chat()['prompt_cache_key'])")
    keys = {subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                           text=True, check=True, env={"PYTHONHASHSEED": str(seed)}
                           ).stdout.strip() for seed in (12345,)}
    assert keys == {c.to_openai_chat()["prompt_cache_key"]}


def test_provider_mismatch_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match=r"is an Anthropic model; it cannot be sent as an "
                                        r"OpenAI Chat Completions request$"):
        agent_builder(CLAUDE).to_openai_chat()
    with pytest.raises(PlanError, match=r"is an OpenAI model; it cannot be sent as an "
                                        r"Anthropic Messages request$"):
        agent_builder(GPT_IMPLICIT).to_anthropic()
    with pytest.raises(PlanError, match=r"as an OpenAI Responses request$"):
        agent_builder(CLAUDE).to_openai_responses()


# ------------------------------------------------------------------------ ordering
@pytest.mark.parametrize(("first", "second"), [
    ("history", "system"), ("turn", "tools"), ("context", "system"), ("tail", "turn"),
    ("dynamic", "context"), ("history", "dynamic"),
])
def test_more_stable_after_less_stable_raises_naming_both(first: str, second: str) -> None:
    b = PromptBuilder(CLAUDE)
    add = {
        "tools": lambda: b.tools(TOOLS[:1]),
        "system": lambda: b.system("stable"),
        "context": lambda: b.document("doc"),
        "dynamic": lambda: b.system("session", dynamic=True),
        "history": lambda: b.history(user("hi"), assistant("hello")),
        "turn": lambda: b.turn("question"),
        "tail": lambda: b.tail("tail"),
    }
    add[first]()
    with pytest.raises(OrderingError) as err:
        add[second]()
    names = {"dynamic": "dynamic system"}
    msg = str(err.value)
    assert names.get(first, first) in msg and names.get(second, second) in msg


def test_same_section_twice_is_fine() -> None:
    b = PromptBuilder(CLAUDE).system("a").system("b").history(user("x")).history(assistant("y"))
    out = b.turn("z").to_anthropic()
    assert [blk["text"] for blk in out["system"]] == ["a", "b"]
    assert len(out["messages"]) == 3


# ------------------------------------------------------------------------ volatile values
def test_volatile_wrapper_allowed_only_in_turn_and_tail() -> None:
    now = Volatile("2026-11-29T19:40:00Z", name="now")
    b = agent_builder(turn="")
    b.turn("It is ", now, ". What changed?")
    b.tail("request id ", Volatile("req-123"))
    out = b.to_anthropic()
    assert out["messages"][-1]["content"][0]["text"] == "It is 2026-11-29T19:40:00Z. What changed?"
    for section in ("system", "document", "history", "tools"):
        b = PromptBuilder(CLAUDE)
        with pytest.raises(VolatileValueError, match="now"):
            if section == "system":
                b.system(now)
            elif section == "document":
                b.document(now)
            elif section == "history":
                b.history(user("it is ", now))
            else:
                b.tool("clock", "time", {"type": "object", "default": now})


def test_declared_volatile_text_is_caught_inside_plain_strings() -> None:
    b = PromptBuilder(CLAUDE)
    user_name = b.volatile("Ada Lovelace", name="user name")
    with pytest.raises(VolatileValueError, match="user name"):
        b.system(f"You are talking to {user_name}.")
    b2 = PromptBuilder(CLAUDE)
    b2.system("Greet Ada Lovelace politely.")
    with pytest.raises(VolatileValueError, match="system"):
        b2.volatile("Ada Lovelace")
    b3 = PromptBuilder(CLAUDE)
    day = b3.volatile("Sunday")
    b3.system("stable").turn(f"Today is {day}.")  # fine in the turn
    assert "Sunday" in json.dumps(b3.to_anthropic())


# ------------------------------------------------------------------------ canonical form
def test_sets_are_refused_where_their_order_would_leak() -> None:
    b = PromptBuilder(CLAUDE)
    with pytest.raises(TypeError, match="set"):
        b.tool("f", "d", {"type": "object", "enum": {"b", "a"}})
    with pytest.raises(TypeError, match="set"):
        PromptBuilder(CLAUDE).history(assistant(ToolCall("c", "f", {"tags": frozenset({1, 2})})))
    sorted_ok = PromptBuilder(CLAUDE, refuse_sets=False).tool(
        "f", "d", {"type": "object", "enum": {"b", "c", "a"}})
    out = sorted_ok.turn("x").to_anthropic()
    assert out["tools"][0]["input_schema"]["enum"] == ["a", "b", "c"]


def test_canonicalisation_switches_are_separate() -> None:
    schema = {"type": "object", "properties": {"b": {}, "a": {}}}
    tools = [{"name": "zz", "input_schema": schema}, {"name": "aa", "input_schema": schema}]

    def out(**kw: Any) -> dict[str, Any]:
        return PromptBuilder(CLAUDE, **kw).tools(tools).system("text  \nmore\n\n").turn(
            "q").to_anthropic()

    on = out()
    assert [t["name"] for t in on["tools"]] == ["aa", "zz"]
    assert list(on["tools"][0]["input_schema"]["properties"]) == ["a", "b"]
    assert on["system"][0]["text"] == "text\nmore"
    keep_order = out(sort_tools=False)
    assert [t["name"] for t in keep_order["tools"]] == ["zz", "aa"]
    assert list(keep_order["tools"][0]["input_schema"]["properties"]) == ["a", "b"]
    keep_keys = out(sort_json_keys=False)
    assert list(keep_keys["tools"][0]["input_schema"]["properties"]) == ["b", "a"]
    keep_ws = out(normalize_whitespace=False)
    assert keep_ws["system"][0]["text"] == "text  \nmore\n\n"
    off = out(canonicalize=False)
    assert [t["name"] for t in off["tools"]] == ["zz", "aa"]


def _shuffled_dict(d: dict[str, Any], order: list[int]) -> dict[str, Any]:
    keys = list(d)
    perm = [keys[i % len(keys)] for i in order if i < len(keys)]
    seen = list(dict.fromkeys(perm + keys))
    return {k: d[k] for k in seen}


@given(perm=st.permutations(range(len(TOOLS))),
       key_orders=st.lists(st.permutations(range(4)), min_size=3, max_size=3),
       fmt=st.sampled_from(["anthropic", "openai-chat", "openai-responses"]))
def test_permuted_tools_and_dict_orders_give_identical_bytes(
        perm: list[int], key_orders: list[list[int]], fmt: str) -> None:
    def build(tools: list[dict[str, Any]], call_input: dict[str, Any]) -> bytes:
        model = CLAUDE if fmt == "anthropic" else GPT_EXPLICIT
        b = PromptBuilder(model).tools(tools).system("You help.")
        b.history(user("go"), assistant(ToolCall("c1", "search", call_input)),
                  user(ToolResult("c1", "done")))
        b.turn("next")
        out = (b.to_anthropic() if fmt == "anthropic" else
               b.to_openai_chat() if fmt == "openai-chat" else b.to_openai_responses())
        return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()

    call = {"q": "x", "limit": 3, "filters": {"lang": "en", "site": "a.org"}, "page": 1}
    base = build(TOOLS, call)
    tools = [TOOLS[i] for i in perm]
    tools = [{**_shuffled_dict(t, key_orders[0]),
              "input_schema": _shuffled_dict(dict(t["input_schema"]), key_orders[1])}
             for t in tools]
    shuffled_call = _shuffled_dict(call, key_orders[2])
    assert build(tools, shuffled_call) == base


@given(st.sets(st.text(min_size=1, max_size=5), min_size=2, max_size=6))
def test_set_contents_give_a_clear_error_or_sorted_bytes(values: set[str]) -> None:
    with pytest.raises(TypeError, match="set"):
        PromptBuilder(CLAUDE).tool("f", "d", {"type": "object", "enum": values})
    outs = set()
    for order in (sorted(values), sorted(values, reverse=True)):
        b = PromptBuilder(CLAUDE, refuse_sets=False)
        b.tool("f", "d", {"type": "object", "enum": set(order)})
        outs.add(json.dumps(b.turn("q").to_anthropic()))
    assert len(outs) == 1


# ------------------------------------------------------------------------ parts and shapes
def test_history_accepts_anthropic_and_openai_dicts() -> None:
    b = PromptBuilder(CLAUDE).system("s")
    b.history(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": '{"b": 1, "a": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm",
                                           "signature": "sig"},
                                          {"type": "text", "text": "done"}]},
    )
    out = b.turn("next").to_anthropic()
    sdk_valid("anthropic", out)
    assert out["messages"][1]["content"][0] == {"type": "tool_use", "id": "c1", "name": "f",
                                                "input": {"a": 2, "b": 1}}
    assert out["messages"][2]["content"][0]["type"] == "tool_result"
    view = render(out)
    thinking = [s for s in view.segments if s.kind == "thinking"]
    assert thinking and all(s.breakpoint is None for s in thinking)
    with pytest.raises(InvalidRequestError):
        PromptBuilder(CLAUDE).history({"role": "robot", "content": "x"})


def test_images_and_tool_results_render_for_every_format() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    b = PromptBuilder(GPT_EXPLICIT).system("s" + filler(1200, "s"))
    b.history(user("look", Image(png)), assistant(ToolCall("c", "f", {})),
              user(ToolResult("c", [{"type": "text", "text": "r"}])))
    b.turn("and this?", Image(url="https://example.com/a.png"))
    sdk_valid("openai-chat", b.to_openai_chat())
    sdk_valid("openai-responses", b.to_openai_responses())
    c = PromptBuilder(CLAUDE).system("s")
    c.history(user("look", Image(png)), assistant(Thinking("t", "sig"), ToolCall("c", "f", {})),
              user(ToolResult("c", "r", is_error=True)))
    c.turn("ok")
    out = c.to_anthropic()
    sdk_valid("anthropic", out)
    assert out["messages"][0]["content"][1]["source"]["type"] == "base64"
    assert out["messages"][2]["content"][0]["is_error"] is True


def test_extra_params_cannot_override_the_payload() -> None:
    with pytest.raises(InvalidRequestError):
        agent_builder().to_anthropic(messages=[])


# ------------------------------------------------------------------------ explain
def test_explain_rows_cover_every_segment_with_reasons() -> None:
    b = agent_builder()
    b.tail("uncached")
    exp = b.explain()
    assert isinstance(exp, Explanation)
    view = render(b.to_anthropic())
    assert [r.path for r in exp.rows] == [s.path for s in view.segments]
    marked = [r for r in exp.rows if r.breakpoint]
    assert [r.path for r in marked] == [s.path for s in view.breakpoints()]
    assert all(r.note for r in marked)
    sections = {r.section for r in exp.rows}
    assert {"tools", "system", "context", "history", "turn", "tail"} <= sections
    tail = [r for r in exp.rows if r.section == "tail"]
    assert tail and tail[0].breakpoint is None
    # skipped candidates carry their reason (the tools end is under the 1,024 minimum)
    assert any("minimum" in r.note for r in exp.rows if r.section == "tools")
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(exp)
    text = console.export_text()
    assert "turn-end" in text and "system" in text


def _rows(exp: Explanation) -> Iterator[str]:
    for r in exp.rows:
        yield f"{r.index} {r.path} {r.breakpoint}"


def test_equal_inputs_give_byte_identical_payloads() -> None:
    a = json.dumps(agent_builder().to_anthropic()).encode()
    b = json.dumps(agent_builder().to_anthropic()).encode()
    assert a == b
    assert list(_rows(agent_builder().explain())) == list(_rows(agent_builder().explain()))


def test_caller_key_wins_and_top_level_cache_control_is_refused() -> None:
    out = agent_builder(GPT_IMPLICIT).to_openai_chat(prompt_cache_key="tenant-7")
    assert out["prompt_cache_key"] == "tenant-7"
    with pytest.raises(InvalidRequestError, match="cache_control"):
        agent_builder().to_anthropic(cache_control={"type": "ephemeral"})


def test_an_entry_read_but_not_rewritten_is_handed_on_to_the_next_plan() -> None:
    """README loop with a new question each turn and no history (new-user report, 4th
    session): turn 1 writes the static context; turn 2 reads it through its turn-end lookback
    and drops the static-end marker as redundant; turn 3 must still expect to read it (a read
    refreshes the entry), not predict a cold write."""
    instructions = "You are a careful assistant that answers questions about the project. " * 60
    plan = None
    plans = []
    for question in ("What does lint do?", "What does diff do?", "And the tracker?"):
        b = PromptBuilder("claude-sonnet-4-6", previous=plan)
        b.system(instructions).document("The project README. " * 300, title="README.md")
        b.turn(question)
        b.to_anthropic(max_tokens=4)
        plan = b.last_plan
        assert plan is not None
        plans.append(plan)
    first, second, third = plans
    static = next(bp for bp in first.breakpoints if bp.role == "static-end")
    assert first.read_tokens == 0 and first.read_entry is None
    assert second.read_tokens == static.prefix_tokens
    assert second.read_entry is not None
    assert second.read_entry.segment_index == static.segment_index
    assert all(bp.role != "static-end" for bp in second.breakpoints)  # dropped as redundant
    assert static.segment_index in [e.segment_index for e in second.written()]
    assert third.read_tokens == static.prefix_tokens  # was 0 before: the entry was forgotten
    assert third.write_tokens is not None and third.write_tokens < 50


# ------------------------------------------------------------------------ input validation
def test_a_request_without_a_message_is_refused_per_format() -> None:
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(CLAUDE).to_anthropic(max_tokens=4)
    assert e.value.path == "messages"
    with pytest.raises(InvalidRequestError, match="system text alone") as e:
        PromptBuilder(CLAUDE).system("x").to_anthropic(max_tokens=4)
    assert e.value.path == "messages"
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(GPT_IMPLICIT).to_openai_chat()
    assert e.value.path == "messages"
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(GPT_IMPLICIT).to_openai_responses()
    assert e.value.path == "input"
    # OpenAI takes a system-only request; a prompt section through the keyword arguments is
    # refused (it would skip sorting, the volatile checks and the planner: trial 11)
    assert PromptBuilder(GPT_IMPLICIT).system("x").to_openai_chat()["messages"]
    assert PromptBuilder(GPT_IMPLICIT).system("x").to_openai_responses()["input"]
    with pytest.raises(InvalidRequestError, match=r"\.system\(\)"):
        PromptBuilder(GPT_IMPLICIT).to_openai_responses(instructions="hi")
    # plan() / explain() stay available for inspection
    PromptBuilder(CLAUDE).system("x").plan()


@pytest.mark.parametrize("model,method", [(CLAUDE, "to_anthropic"),
                                          (GPT_IMPLICIT, "to_openai_chat"),
                                          (GPT_IMPLICIT, "to_openai_responses")])
def test_an_empty_new_turn_is_refused(model: str, method: str) -> None:
    for b in (PromptBuilder(model).system("x").turn(""),
              PromptBuilder(model).system("x").history(user("q"), assistant("a")).turn("  \n"),
              PromptBuilder(model).system("x").turn()):
        with pytest.raises(InvalidRequestError, match="empty") as e:
            getattr(b, method)()
        assert e.value.path == "turn"
    # turn() may be called again; a tail alone is a valid new message
    assert getattr(PromptBuilder(model).turn("").turn("q"), method)()
    assert getattr(PromptBuilder(model).turn("").tail("t"), method)()


@pytest.mark.parametrize("message", [{"role": "user"}, {"role": "user", "content": []},
                                     {"role": "user", "content": " "},
                                     {"role": "assistant", "content": ""}, user(""),
                                     user(" ", "\n")])
def test_an_empty_history_message_is_refused_naming_it(message: Any) -> None:
    # Anthropic's rule (empty content is rejected): refused by to_anthropic, naming the message
    b = PromptBuilder(CLAUDE).history(user("q"), assistant("a")).history(message).turn("n")
    with pytest.raises(InvalidRequestError, match="empty") as e:
        b.to_anthropic()
    assert e.value.path == "history message 2"
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(CLAUDE).example("", "a").turn("q").to_anthropic()
    assert e.value.path == "example 0"
    # a tool message without content is a tool_result without content: valid
    PromptBuilder(CLAUDE).history({"role": "tool", "tool_call_id": "c1"})


@pytest.mark.parametrize("message", [{"role": "user"}, {"role": "user", "content": []},
                                     {"role": "user", "content": " "},
                                     {"role": "assistant", "content": ""}, user(""),
                                     user(" ", "\n")])
def test_an_empty_history_message_is_built_for_openai(message: Any) -> None:
    # no reference says Chat Completions or Responses reject an empty content string: the
    # message is kept, in place, with an empty text
    role = message["role"] if isinstance(message, dict) else message.role
    b = PromptBuilder(GPT_IMPLICIT).history(user("q"), assistant("a")).history(message) \
        .turn("n")
    assert b.to_openai_chat()["messages"][2] == {"role": role, "content": ""}
    assert b.to_openai_responses()["input"][2] == {"role": role, "content": ""}
    ex = PromptBuilder(GPT_IMPLICIT).example("", "a").turn("q").to_openai_chat()
    assert ex["messages"][:2] == [{"role": "user", "content": ""},
                                  {"role": "assistant", "content": "a"}]


def test_system_role_is_checked_at_run_time() -> None:
    with pytest.raises(InvalidRequestError, match="'system' or 'developer'") as e:
        PromptBuilder(GPT_IMPLICIT, system_role="wizard")  # type: ignore[arg-type]
    assert e.value.path == "system_role"
    assert isinstance(e.value, ValueError)
    out = PromptBuilder(GPT_IMPLICIT, system_role="developer").system("x").turn("y") \
        .to_openai_chat()
    assert out["messages"][0]["role"] == "developer"


@pytest.mark.parametrize("value", ["5", True, False, -1, 1.5, None])
def test_anthropic_max_tokens_must_be_an_int(value: Any) -> None:
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(CLAUDE).turn("q").to_anthropic(max_tokens=value)
    assert e.value.path == "max_tokens"


def test_anthropic_max_tokens_zero_is_a_prewarm_with_its_restrictions() -> None:
    assert PromptBuilder(CLAUDE).turn("q").to_anthropic(max_tokens=0)["max_tokens"] == 0
    # hosted-api-rules.md 1.5: rejected with stream: true, thinking.type "enabled",
    # output_config.format and a forced tool_choice (tool / any); the path names the setting
    for extra, path in (({"stream": True}, "stream"),
                        ({"thinking": {"type": "enabled", "budget_tokens": 1024}},
                         "thinking.type"),
                        ({"tool_choice": {"type": "any"}}, "tool_choice.type"),
                        ({"tool_choice": {"type": "tool", "name": "t"}}, "tool_choice.type"),
                        ({"output_config": {"format": {"type": "json_schema"}}},
                         "output_config.format")):
        with pytest.raises(InvalidRequestError, match="pre-warm") as e:
            PromptBuilder(CLAUDE).turn("q").to_anthropic(max_tokens=0, **extra)
        assert e.value.path == path
        assert "prompt-caching" in e.value.reason  # the source URL
    # what the rule does not name is accepted
    for extra in ({"stream": False}, {"thinking": {"type": "disabled"}},
                  {"tool_choice": {"type": "auto"}}, {"output_config": {"effort": "low"}}):
        PromptBuilder(CLAUDE).turn("q").to_anthropic(max_tokens=0, **extra)
    PromptBuilder(CLAUDE).turn("q").to_anthropic(max_tokens=1, stream=True)


@pytest.mark.parametrize("method,key,bad,good", [
    ("to_openai_chat", "max_completion_tokens", ["5", True, 0, -3], [1, None]),
    ("to_openai_chat", "max_tokens", ["5", False, 0], [1, None]),
    ("to_openai_responses", "max_output_tokens", ["64", True, 0, 15], [16, None]),
])
def test_openai_token_limits_are_checked(method: str, key: str, bad: list[Any],
                                         good: list[Any]) -> None:
    for value in bad:
        with pytest.raises(InvalidRequestError) as e:
            getattr(PromptBuilder(GPT_IMPLICIT).turn("q"), method)(**{key: value})
        assert e.value.path == key
    for value in good:
        assert getattr(PromptBuilder(GPT_IMPLICIT).turn("q"), method)(**{key: value})[key] \
            == value


def test_token_limit_minima_come_from_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptcache.catalog import provider_rules

    openai_rules = provider_rules("openai")
    # the Responses minimum is the catalog's (unconfirmed) value; the error names its source
    with pytest.raises(InvalidRequestError, match=r"unconfirmed.*hindsight") as e:
        PromptBuilder(GPT_IMPLICIT).turn("q").to_openai_responses(max_output_tokens=15)
    assert e.value.path == "max_output_tokens"
    # without the catalog value only the builder's own floor (an int >= 1) is left
    import promptcache.catalog as catalog

    without = openai_rules.model_copy(update={"min_max_output_tokens": None})
    monkeypatch.setattr(catalog, "provider_rules",
                        lambda p: without if p == "openai" else provider_rules(p))
    assert PromptBuilder(GPT_IMPLICIT).turn("q").to_openai_responses(
        max_output_tokens=1)["max_output_tokens"] == 1


def test_document_title_and_closing_tag_are_escaped() -> None:
    b = PromptBuilder(CLAUDE).document("body </document> and </DOCUMENT > x",
                                       title='a"b</document>&')
    text = b._documents[0]
    assert text == ('<document title="a&quot;b&lt;/document&gt;&amp;">\n'
                    'body &lt;/document> and &lt;/DOCUMENT > x\n</document>')
    assert text.count("</document>") == 1
    # ordinary titles and texts are byte-identical to the unescaped form
    for title, body in (("notes.md", "a < b && c > d"), ("Tom's notes.md", "</documents>"),
                        ("", "x")):
        assert PromptBuilder(CLAUDE).document(body, title=title)._documents[0] == \
            f'<document title="{title}">\n{body}\n</document>'
    assert PromptBuilder(CLAUDE).document("a </document> b")._documents[0] == "a </document> b"
    with pytest.raises(VolatileValueError):
        PromptBuilder(CLAUDE).document("x", title=Volatile("now"))  # type: ignore[arg-type]


def test_a_lone_surrogate_is_reported_at_its_path() -> None:
    cases: list[tuple[Any, str]] = [
        (lambda b: b.system("bad \ud800 x"), "system block 0"),
        (lambda b: b.system("ok").system("bad \udfff", dynamic=True), "system dynamic block 0"),
        (lambda b: b.document("\ud800"), "document 0"),
        (lambda b: b.document("x", title="\ud800"), "document 0.title"),
        (lambda b: b.tool("t\ud800"), "tools[0].name"),
        (lambda b: b.tool("t", "d", {"type": "object", "description": "\ud800"}),
         "tools[0].input_schema.description"),
        (lambda b: b.history(assistant(ToolCall("id\ud800", "n"))), "history message 0 part 0.id"),
        (lambda b: b.turn("ok ", "bad \ud800"), "turn part 1"),
    ]
    for add, path in cases:
        with pytest.raises(InvalidRequestError, match="surrogate") as e:
            add(PromptBuilder(CLAUDE)).turn("q").to_anthropic()
        assert e.value.path == path
    # a valid astral character (a proper code point, not a surrogate pair) is fine
    PromptBuilder(CLAUDE).system("emoji \U0001f600").turn("q").to_anthropic()
