"""The local backend renders a string content and a one-text-part list with the same text to the
same token ids, for every role and request shape, as the rest of promptcache (renderer, planner
digests, diff) treats them as the same cached content.

New-user trial 19, finding 1: on GPT-5.6 Chat in explicit mode, ``wrap(auto_cache=True)`` puts
a breakpoint on the newest ``tool`` message by turning its string content into a one-part list;
the next turn sends that message as a string again. The backend's template tokenised a tool
message's two forms differently (2617 vs 2624 prompt tokens), so the breakpoint entries were
never read and the whole history was written again on every turn.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

import promptcache
from promptcache.local.template import apply_template
from promptcache.local.testing import LocalBackend

TINY: dict[str, int] = {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
MODEL = "gpt-5.6-sol"
BP = {"mode": "explicit"}
TEXT = "The lookup returned: alpha bravo charlie\n\t\"quoted\" \\ back-slash, ünïcode ✓ 42."
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey").split()


def words(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13 + i * i) % len(WORDS)] for i in range(n))


SYSTEM = "You are an agent. " + words(1500, 1)
CHAT_TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up a key.",
    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]


# ---------------------------------------------------------------- request builders (role/shape)
def _chat(role: str, content: Any) -> dict[str, Any]:
    call = {"id": "call_0", "type": "function",
            "function": {"name": "lookup", "arguments": "{\"key\":\"k\"}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "earlier result"},
    ]
    last: dict[str, Any] = {"role": role, "content": content}
    if role == "tool":
        last["tool_call_id"] = "call_0"
    if role in ("system", "developer"):  # a leading system/developer message (system tier)
        messages = [last, *messages[1:], {"role": "user", "content": "next"}]
    else:
        messages = [*messages, last]
        if role == "assistant":
            messages.append({"role": "user", "content": "next"})
    return {"model": MODEL, "messages": messages, "tools": CHAT_TOOLS}


def _responses(role: str, content: Any, *, typed: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {"role": role, "content": content}
    if typed:
        item = {"type": "message", **item}
    items: list[dict[str, Any]] = [{"role": "user", "content": "question"}]
    if role in ("system", "developer"):
        items = [item, *items]
    else:
        items = [{"role": "system", "content": "sys"}, *items, item,
                 {"role": "user", "content": "next"}]
    return {"model": MODEL, "input": items}


def _responses_output(output: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "question"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
        {"role": "user", "content": "next"},
    ]}


def _anthropic(where: str, content: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "sys",
                            "messages": [{"role": "user", "content": "question"},
                                         {"role": "assistant", "content": "answer"},
                                         {"role": "user", "content": "next"}]}
    if where == "system":
        body["system"] = content
    else:
        index = {"user": 2, "assistant": 1}[where]
        body["messages"][index]["content"] = content
    return body


CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
RESPONSES_ROLES = ("system", "developer", "user", "assistant")


def _part_type(shape: str, role: str) -> str:
    if shape == "chat" or shape == "anthropic":
        return "text"
    return "output_text" if role == "assistant" else "input_text"


def _cases() -> Iterator[Any]:
    for role in CHAT_ROLES:
        yield pytest.param("openai-chat", lambda c, r=role: _chat(r, c), "text",
                           "prompt_cache_breakpoint", id=f"chat-{role}")
    for role in RESPONSES_ROLES:
        for typed in (False, True):
            yield pytest.param(
                "openai-responses", lambda c, r=role, t=typed: _responses(r, c, typed=t),
                _part_type("responses", role), "prompt_cache_breakpoint",
                id=f"responses-{role}{'-typed' if typed else ''}")
    yield pytest.param("openai-responses", _responses_output, "input_text",
                       "prompt_cache_breakpoint", id="responses-function_call_output")
    for where in ("system", "user", "assistant"):
        yield pytest.param("anthropic", lambda c, w=where: _anthropic(w, c), "text",
                           "cache_control", id=f"anthropic-{where}")


_MARKERS = {"prompt_cache_breakpoint": BP, "cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize(("provider", "build", "part_type", "marker"), list(_cases()))
@pytest.mark.parametrize("marked", [False, True], ids=["plain", "marked"])
def test_string_and_one_text_part_list_give_the_same_token_ids(
        provider: Any, build: Any, part_type: str, marker: str, marked: bool) -> None:
    part: dict[str, Any] = {"type": part_type, "text": TEXT}
    if marked:  # the marker is not content
        part[marker] = _MARKERS[marker]
    as_string = apply_template(build(TEXT), provider)
    as_list = apply_template(build([part]), provider)
    assert as_list.token_ids == as_string.token_ids
    assert [(s.start, s.end) for s in as_list.spans] == [
        (s.start, s.end) for s in as_string.spans]
    # not vacuous: the text is in the prompt, so other text gives other ids
    other = apply_template(build([{**part, "text": TEXT + " more"}]), provider)
    assert other.token_ids != as_list.token_ids


def test_string_form_of_a_tool_message_is_rendered_as_before() -> None:
    """Only the list form moved: the string form (what callers send) keeps its token ids, so
    counts pinned elsewhere stay valid."""
    from promptcache.local.template import encode_text

    prompt = apply_template(_chat("tool", TEXT), "openai-chat")
    span = prompt.span_of("messages[4].content")
    assert list(prompt.token_ids[span.content_start:span.content_end]) == encode_text(
        json.dumps(TEXT, ensure_ascii=False))


def test_a_tool_part_with_more_than_text_is_not_a_string() -> None:
    plain = apply_template(_chat("tool", TEXT), "openai-chat")
    extra = apply_template(
        _chat("tool", [{"type": "text", "text": TEXT, "annotations": []}]), "openai-chat")
    assert extra.token_ids != plain.token_ids
    two = apply_template(_responses_output(
        [{"type": "input_text", "text": TEXT}, {"type": "input_text", "text": "x"}]),
        "openai-responses")
    assert two.token_ids != apply_template(_responses_output(TEXT), "openai-responses").token_ids


# ---------------------------------------------------------------- through the backend
@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(**TINY) as b:
        yield b


def _usage(usage: Any) -> tuple[int, int, int]:
    details = usage.prompt_tokens_details
    return usage.prompt_tokens, details.cached_tokens, details.cache_write_tokens


def test_raw_chat_tool_breakpoint_is_read_when_the_message_comes_back_as_a_string(
        backend: LocalBackend) -> None:
    """trial 19's minimal repro: the entry written at a list-form tool message is read by the
    next request, which sends that message as a string."""
    client = backend.openai()
    result = "value " + words(150, 9)
    head = [{"role": "system", "content": [{"type": "text", "text": SYSTEM,
                                            "prompt_cache_breakpoint": BP}]},
            {"role": "user", "content": "hi " + words(30, 3)},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "lookup", "arguments": "{}"}}]}]
    first = client.chat.completions.create(
        model=MODEL, max_completion_tokens=2, tools=CHAT_TOOLS,
        prompt_cache_options={"mode": "explicit"},
        messages=[*head, {"role": "tool", "tool_call_id": "call_0", "content": [
            {"type": "text", "text": result, "prompt_cache_breakpoint": BP}]}])
    prompt_a, _, _ = _usage(first.usage)
    second = client.chat.completions.create(
        model=MODEL, max_completion_tokens=2, tools=CHAT_TOOLS,
        prompt_cache_options={"mode": "explicit"},
        messages=[*head, {"role": "tool", "tool_call_id": "call_0", "content": result},
                  {"role": "user", "content": [{"type": "text", "text": "more " + words(20, 5),
                                                "prompt_cache_breakpoint": BP}]}])
    prompt_b, cached_b, write_b = _usage(second.usage)
    # everything of the first prompt but its generation header is read
    assert cached_b >= prompt_a - 16
    assert write_b <= prompt_b - prompt_a + 16  # only the new user turn is written


def test_raw_responses_function_call_output_breakpoint_is_read_as_a_string(
        backend: LocalBackend) -> None:
    client = backend.openai()
    result = "value " + words(150, 11)
    head: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "input_text", "text": SYSTEM,
                                        "prompt_cache_breakpoint": BP}]},
        {"role": "user", "content": "hi " + words(30, 4)},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}]
    first = client.responses.create(
        model=MODEL, max_output_tokens=16, prompt_cache_options={"mode": "explicit"},
        input=[*head, {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": result, "prompt_cache_breakpoint": BP}]}])
    second = client.responses.create(
        model=MODEL, max_output_tokens=16, prompt_cache_options={"mode": "explicit"},
        input=[*head, {"type": "function_call_output", "call_id": "c1", "output": result},
               {"role": "user", "content": [{"type": "input_text", "text": "more",
                                             "prompt_cache_breakpoint": BP}]}])
    prompt_a = first.usage.input_tokens
    cached_b = second.usage.input_tokens_details.cached_tokens
    assert cached_b >= prompt_a - 16


def test_wrapped_gpt56_explicit_tool_loop_reads_the_previous_turns_breakpoint(
        backend: LocalBackend) -> None:
    """trial 19 finding 1 end to end: wrap(auto_cache=True) on a Chat tool loop whose tool
    messages are strings. Each turn reads the entry the previous turn wrote at its newest tool
    message, so reads grow with the history and writes stay about one turn long."""
    client = promptcache.wrap(backend.openai(), auto_cache=True, session="s11-tools")
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": "Investigate: " + words(30, 3)}]
    seen: list[tuple[int, int, int]] = []
    for step in range(5):
        response = client.chat.completions.create(
            model=MODEL, max_completion_tokens=2, tools=CHAT_TOOLS, messages=messages,
            prompt_cache_options={"mode": "explicit"})
        seen.append(_usage(response.usage))
        messages = [*messages,
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"call_{step}", "type": "function", "function": {
                            "name": "lookup", "arguments": json.dumps({"key": f"k{step}"})}}]},
                    {"role": "tool", "tool_call_id": f"call_{step}",
                     "content": "value " + words(150, step)}]
    system_only = seen[1][1]
    assert system_only > 2000  # turn 1 reads the system prompt's entry
    for (prev_prompt, prev_cached, _), (prompt, cached, write) in itertools.pairwise(seen[1:]):
        assert cached > prev_cached  # reads grow with the history ...
        assert cached >= prev_prompt - 16  # ... up to the previous turn's newest tool message
        new = prompt - prev_prompt
        assert write <= new + 16  # writes are this turn's new tokens, not the whole history
        assert write < prompt - system_only
