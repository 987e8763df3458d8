"""Regression tests for new-user trial 11, findings 8 and 9 (PromptBuilder)."""

from __future__ import annotations

import pytest

from promptcache import PromptBuilder
from promptcache._errors import InvalidRequestError, PlanError
from promptcache.builder import ToolCall, ToolResult, assistant, user

CLAUDE = "claude-sonnet-4-6"
S = "Policy text. " * 600
T = [{"name": n, "description": "d " * 200, "input_schema": {"type": "object"}}
     for n in ("zeta", "alpha")]


# ---------------------------------------------------------------- finding 8: sections via params
@pytest.mark.parametrize("method,model,key,value,hint", [
    ("to_anthropic", CLAUDE, "tools", T, ".tools()"),
    ("to_anthropic", CLAUDE, "system", "x", ".system()"),
    ("to_anthropic", CLAUDE, "messages", [], ".turn()"),
    ("to_openai_responses", "gpt-5.6", "instructions", S, ".system()"),
    ("to_openai_responses", "gpt-5.6", "input", [], ".history()"),
    ("to_openai_responses", "gpt-5.6", "tools", T, ".tools()"),
    ("to_openai_chat", "gpt-5.6", "messages", [], ".turn()"),
    ("to_openai_chat", "gpt-5.6", "functions", [], ".tools()"),
    ("to_openai_chat", "gpt-5.6", "system", "x", ".system()"),
])
def test_prompt_sections_are_refused_in_params(method: str, model: str, key: str, value: object,
                                                hint: str) -> None:
    b = PromptBuilder(model).turn("q " * 5)  # the builder has no such section
    with pytest.raises(InvalidRequestError) as e:
        getattr(b, method)(**{key: value})
    assert e.value.path == key
    assert hint in str(e.value)
    assert b.last_plan is None  # refused before planning


def test_builder_keys_still_refused_and_other_params_pass() -> None:
    b = PromptBuilder(CLAUDE).system(S).turn("q")
    with pytest.raises(InvalidRequestError):
        b.to_anthropic(cache_control={"type": "ephemeral"})
    out = b.to_anthropic(max_tokens=5, temperature=0, tool_choice={"type": "auto"})
    assert out["temperature"] == 0 and out["tool_choice"] == {"type": "auto"}


def test_prompt_cache_options_validated() -> None:
    b = PromptBuilder("gpt-5.6").system(S).turn("q")
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_chat(prompt_cache_options={"mode": "bogus"})
    assert e.value.path == "prompt_cache_options.mode"
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_chat(prompt_cache_options={"mode": "implicit", "ttl": "1h"})
    assert e.value.path == "prompt_cache_options.ttl"
    with pytest.raises(InvalidRequestError):
        b.to_openai_chat(prompt_cache_options="explicit")
    with pytest.raises(InvalidRequestError) as e:  # gpt-5: the API answers 400 to the option
        PromptBuilder("gpt-5").system(S).turn("q").to_openai_chat(
            prompt_cache_options={"mode": "explicit"})
    assert e.value.path == "prompt_cache_options" and "gpt-5" in str(e.value)
    with pytest.raises(InvalidRequestError):
        PromptBuilder(CLAUDE).system(S).turn("q").to_anthropic(
            prompt_cache_options={"mode": "implicit"})
    # a valid one is kept, and the planner honours it (explicit mode: up to 4 explicit writes,
    # no implicit breakpoint)
    out = b.to_openai_chat(prompt_cache_options={"mode": "explicit", "ttl": "30m"})
    assert out["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
    assert b.last_plan is not None
    assert all(bp.source != "implicit" for bp in b.last_plan.breakpoints)


def test_ttl_error_names_the_id_typed() -> None:
    with pytest.raises(PlanError) as e:
        PromptBuilder("gpt-5.6", ttl="1h").system(S).turn("q").to_openai_chat()
    assert "gpt-5.6 (gpt-5.6-sol)" in str(e.value)
    with pytest.raises(PlanError) as e:
        PromptBuilder(CLAUDE, stable_ttl="10m")
    assert f"TTL {CLAUDE} supports" in str(e.value)


# ---------------------------------------------------------------- finding 9: argument mistakes
@pytest.mark.parametrize("call", ["explain", "plan"])
def test_unknown_format_lists_the_formats(call: str) -> None:
    b = PromptBuilder(CLAUDE).system(S).turn("q")
    with pytest.raises(InvalidRequestError) as e:
        getattr(b, call)("anthropik")
    assert e.value.path == "fmt"
    for fmt in ("anthropic", "openai-chat", "openai-responses"):
        assert fmt in str(e.value)


@pytest.mark.parametrize("previous,type_name", [({"x": 1}, "dict"), (42, "int"),
                                                 ("abc", "str"), ([1, "a"], "str")])
def test_previous_of_a_wrong_type_names_it(previous: object, type_name: str) -> None:
    with pytest.raises(TypeError) as e:
        PromptBuilder(CLAUDE, previous=previous)
    assert type_name in str(e.value)
    b = PromptBuilder(CLAUDE).system(S).turn("q")
    with pytest.raises(TypeError) as e:
        b.to_anthropic(previous=previous)
    assert type_name in str(e.value)
    with pytest.raises(TypeError) as e:
        b.explain(previous=previous)
    assert type_name in str(e.value)


def test_previous_positions_and_plans_still_accepted() -> None:
    b = PromptBuilder(CLAUDE).system(S).turn("q")
    b.to_anthropic()
    PromptBuilder(CLAUDE, previous=b.last_plan).system(S).turn("q").to_anthropic()
    PromptBuilder(CLAUDE, previous=[3]).system(S).turn("q").to_anthropic()


@pytest.mark.parametrize("tools", [{"search", "add"}, set(), frozenset()])
def test_tools_set_refused_up_front(tools: object) -> None:
    with pytest.raises(TypeError, match="a set's iteration order is not stable"):
        PromptBuilder(CLAUDE).tools(tools)  # type: ignore[arg-type]


def test_tools_single_mapping_refused() -> None:
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(CLAUDE).tools(T[0])
    assert e.value.path == "tools"


def test_blank_system_is_kept_out_documented() -> None:
    # decision: a blank system text adds no block (BR-10) and is not an error
    out = PromptBuilder(CLAUDE).system("   ").turn("q").to_anthropic()
    assert "system" not in out
    with pytest.raises(TypeError):
        PromptBuilder(CLAUDE).system(None)


def test_tool_use_without_result_refused() -> None:
    b = PromptBuilder(CLAUDE).history(user("a"), assistant(ToolCall("t1", "x", {}))).turn("q")
    with pytest.raises(InvalidRequestError) as e:
        b.to_anthropic()
    assert "t1" in str(e.value) and e.value.path == "history message 1"
    # two assistant messages in a row
    b = PromptBuilder(CLAUDE).history(user("a"), assistant(ToolCall("t1", "x", {})),
                                      assistant("done")).turn("q")
    with pytest.raises(InvalidRequestError, match="t1"):
        b.to_anthropic()


def test_tool_result_without_use_refused() -> None:
    b = PromptBuilder(CLAUDE).history(user("a"), assistant("ok")).turn(ToolResult("t9", "r"))
    with pytest.raises(InvalidRequestError) as e:
        b.to_anthropic()
    assert "t9" in str(e.value) and e.value.path.startswith("turn")
    b = PromptBuilder(CLAUDE).history(user(ToolResult("t9", "r"))).turn("q")
    with pytest.raises(InvalidRequestError, match="t9"):
        b.to_anthropic()


def test_tool_result_after_text_refused_and_pairs_accepted() -> None:
    b = PromptBuilder(CLAUDE).history(user("a"), assistant(ToolCall("t1", "x", {}))).turn(
        "see:", ToolResult("t1", "r"))
    with pytest.raises(InvalidRequestError, match="first"):
        b.to_anthropic()
    ok = PromptBuilder(CLAUDE).history(
        user("a"), assistant("let me look", ToolCall("t1", "x", {}), ToolCall("t2", "y", {})),
        user(ToolResult("t1", "r1"), ToolResult("t2", "r2")), assistant("done"),
    ).turn("q").to_anthropic()
    assert len(ok["messages"]) == 5
    # the result in the new turn, then text
    ok = PromptBuilder(CLAUDE).history(user("a"), assistant(ToolCall("t1", "x", {}))).turn(
        ToolResult("t1", "r"), "and now?").to_anthropic()
    assert ok["messages"][-1]["content"][0]["type"] == "tool_result"
    # dict-shaped history too
    with pytest.raises(InvalidRequestError, match="t7"):
        PromptBuilder(CLAUDE).history(
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t7", "name": "x",
                                               "input": {}}]},
        ).turn("q").to_anthropic()
