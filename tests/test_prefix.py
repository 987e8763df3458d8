"""PrefixView renderer: case paths, render order, positions, breakpoints, robustness."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptcache import InvalidRequestError
from promptcache.prefix import Breakpoint, detect_provider, render
from tests.cases import expand_placeholders, load_cases, materialize_request, require_cases

_PATH_RE = re.compile(r"^(tools|system|messages|input|instructions)(\[-?\d+\]|\.[a-z_]+)*$")


def _payloads(case: dict[str, Any]) -> list[dict[str, Any]]:
    inp = case["input"]
    out: list[dict[str, Any]] = []
    if isinstance(inp.get("request"), dict):
        out.append(inp["request"])
    out = [expand_placeholders(p) for p in out]
    previous = None
    for req in inp.get("requests", []) or []:
        if isinstance(req, dict):
            body = materialize_request(req.get("body"), previous)
            if body is not None:
                out.append(body)
                previous = body
    return out


def _paths(obj: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if _PATH_RE.match(key) and "[" in key:
                found.add(key)
            if key in ("path", "breakpoint_path") and isinstance(value, str) and _PATH_RE.match(value):
                found.add(value)
            if key == "paths_in_processing_order":
                found.update(v for v in value if _PATH_RE.match(v))
            found |= _paths(value)
    elif isinstance(obj, list):
        for value in obj:
            found |= _paths(value)
    return found


def _node(payload: Any, path: str) -> Any:
    node = payload
    for name, index in re.findall(r"([A-Za-z_]+)|\[(-?\d+)\]", path):
        node = node[name] if name else node[int(index)]
    return node


RENDERABLE = [c for c in load_cases() if _payloads(c)]


def test_cases_have_payloads() -> None:
    require_cases()
    assert len(RENDERABLE) >= 8


@pytest.mark.parametrize("case", RENDERABLE, ids=lambda c: c["id"])
def test_every_case_request_renders_and_paths_resolve(case: dict[str, Any]) -> None:
    views = [(p, render(p)) for p in _payloads(case)]
    for _payload, view in views:
        assert view.segments, case["id"]
        assert [s.index for s in view.segments] == list(range(len(view.segments)))
    paths = _paths(case["expected"]) | _paths({k: v for k, v in case["input"].items()
                                               if k not in ("request", "requests")})
    for path in sorted(paths):
        resolved = False
        for payload, view in views:
            try:
                node = _node(payload, path)
            except (KeyError, IndexError, TypeError):
                continue
            seg = view.find(path)
            # the segment is the node at `path` or its nearest rendered ancestor
            ancestor = _node(payload, seg.path)
            assert json.dumps(ancestor, ensure_ascii=False, separators=(",", ":")).encode() == seg.data
            if seg.path == view._resolve(path):
                assert node is ancestor
            resolved = True
        assert resolved, f"{case['id']}: {path} resolves in no request"


def test_anthropic_render_order_positions_and_automatic() -> None:
    payload = {
        "model": "claude-sonnet-4-5",
        "tools": [{"name": "b", "description": "B", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "tool_use", "id": "1", "name": "b", "input": {"q": 1}},
                {"type": "tool_use", "id": "2", "name": "b", "input": {"q": 2}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "1", "content": "x"},
                {"type": "tool_result", "tool_use_id": "2", "content": "y"},
            ]},
        ],
        "cache_control": {"type": "ephemeral"},
        "tool_choice": {"type": "auto"},
    }
    view = render(payload)
    assert view.provider == "anthropic"
    assert [s.path for s in view] == [
        "tools[0]", "system[0]", "messages[0].content", "messages[1].content[0]",
        "messages[1].content[1]", "messages[1].content[2]", "messages[2].content[0]",
        "messages[2].content[1]"]
    assert [s.tier for s in view] == ["tools", "system"] + ["messages"] * 6
    # tool_use run = one position, tool_result run = one position
    assert [s.position for s in view] == [0, 1, 2, 3, 4, 4, 5, 5]
    assert view.segments[1].breakpoint == Breakpoint("1h", "block")
    assert not view.segments[3].cacheable  # thinking
    assert view.automatic == Breakpoint("5m", "automatic")
    assert view.automatic_index == 7
    assert [s.path for s in view.breakpoints()] == ["system[0]", "messages[2].content[1]"]
    assert view.params == {"tool_choice": {"type": "auto"}}
    assert view.find("system[-1].text").path == "system[0]"
    assert view.find("messages[-1].content[-1]").path == "messages[2].content[1]"
    starts = [s.start_token for s in view]
    assert starts == [sum(s.tokens for s in view.segments[:i]) for i in range(len(view))]
    assert view.total_tokens == view.segments[-1].end_token


def test_key_order_is_visible_in_bytes() -> None:
    a = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {"a": 1, "b": 2}}}]}
    b = json.loads(json.dumps(a))
    b["tools"][0]["function"]["parameters"] = {"b": 2, "a": 1}
    va, vb = render(a), render(b)
    assert va.segments[0].data != vb.segments[0].data
    assert va.segments[0].fingerprint != vb.segments[0].fingerprint
    assert va.segments[1].fingerprint == vb.segments[1].fingerprint


def test_openai_chat_and_responses_shapes() -> None:
    chat = {"model": "gpt-5.6-sol", "prompt_cache_options": {"mode": "explicit"},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": [
                    {"type": "text", "text": "doc", "prompt_cache_breakpoint": {"mode": "explicit"}},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
    view = render(chat)
    assert view.provider == "openai-chat"
    assert [(s.path, s.tier, s.kind) for s in view] == [
        ("messages[0].content", "system", "text"),
        ("messages[1].content[0]", "messages", "text"),
        ("messages[1].content[1]", "messages", "image"),
        ("messages[2].tool_calls[0]", "messages", "tool_call"),
        ("messages[3].content", "messages", "tool_result")]
    assert view.segments[1].breakpoint == Breakpoint("30m", "openai-explicit")
    assert view.find("messages[2].tool_calls[0].function.arguments").kind == "tool_call"
    resp = {"model": "gpt-5", "instructions": "Be brief.",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "function_call_output", "call_id": "c", "output": "42"}]}
    rv = render(resp)
    assert rv.provider == "openai-responses"
    assert [(s.path, s.tier) for s in rv] == [("instructions", "system"),
                                              ("input[0].content[0]", "messages"),
                                              ("input[1]", "messages")]


def test_openai_text_counts_are_exact() -> None:
    from promptcache.tokens import encode

    text = "Prompt caching reads a repeated prefix from cache. " * 40
    view = render({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]})
    assert view.segments[0].tokens == len(encode(text, "o200k_base")) + 3


@pytest.mark.parametrize(("payload", "path"), [
    ([], ""),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "2h"}}],
      "messages": []}, "system[0].cache_control.ttl"),
    ({"system": 5, "messages": []}, "system"),
    ({"model": 5, "messages": []}, "model"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
])
def test_malformed_payloads_name_path(payload: Any, path: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        render(payload)
    assert info.value.path == path


def test_detect_provider() -> None:
    assert detect_provider({"input": "hi"}) == "openai-responses"
    assert detect_provider({"system": "x", "messages": []}) == "anthropic"
    assert detect_provider({"model": "claude-opus-4-5", "messages": []}) == "anthropic"
    assert detect_provider({"model": "gpt-4o", "messages": []}) == "openai-chat"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=25,
)
block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "document",
                              "image_url", "input_text", "weird"]) | json_values},
    optional={"text": json_values | st.text(), "cache_control": json_values | st.just({"type": "ephemeral"}),
              "content": json_values, "input": json_values, "source": json_values,
              "prompt_cache_breakpoint": json_values},
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]) | json_values},
    optional={"content": st.text() | st.lists(block | json_values, max_size=4) | json_values,
              "tool_calls": json_values | st.lists(st.fixed_dictionaries({"function": json_values}))},
)
payloads = st.fixed_dictionaries(
    {},
    optional={"model": st.sampled_from(["claude-sonnet-4-5", "gpt-4o", "gpt-5.6-sol"]) | json_values,
              "messages": st.lists(message | json_values, max_size=5) | json_values,
              "system": st.text() | st.lists(block, max_size=3) | json_values,
              "tools": st.lists(json_values | st.fixed_dictionaries({"name": json_values}), max_size=3),
              "input": st.text() | st.lists(message, max_size=3) | json_values,
              "instructions": json_values, "cache_control": json_values,
              "response_format": json_values, "prompt_cache_options": json_values},
)


@example(payload={"messages": [{"role": "user", "content": [{"type": []}]}]}, provider=None)
@given(payload=payloads | json_values,
       provider=st.sampled_from([None, "anthropic", "openai-chat", "openai-responses"]))
@settings(max_examples=400)
def test_render_never_raises_but_invalid_request_and_is_deterministic(payload: Any, provider: str | None) -> None:
    try:
        first = render(payload, provider)
    except InvalidRequestError:
        return
    second = render(json.loads(json.dumps(payload)), provider)
    assert first.segments == second.segments
    assert first.total_tokens == sum(s.tokens for s in first.segments)


# ---------------------------------------------------------------- JSON bytes: orjson == json
_STDLIB_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _stdlib_bytes(node: Any) -> bytes:
    return _STDLIB_JSON.encode(node).encode("utf-8", "surrogatepass")


def test_orjson_escapes_every_code_point_as_json_does() -> None:
    from promptcache.prefix import _dumps

    for cp in [*range(0x800), 0x2028, 0x2029, 0xD7FF, 0xE000, 0xFEFF, 0xFFFF, 0x10FFFF]:
        s = f"a{chr(cp)}b"
        assert _dumps(s) == _stdlib_bytes(s), hex(cp)


@pytest.mark.parametrize("node", [
    1e16, 1.5, float("nan"), 2**64, -(2**63) - 1, "\ud800", {1: "x"}, {True: 1},
    (1, "a"), [True, None, 0, -1, 2**63], {"k": [1.0, {"a": 1e-7}]},
])
def test_dumps_falls_back_where_orjson_would_differ(node: Any) -> None:
    from promptcache.prefix import _dumps

    assert _dumps(node) == _stdlib_bytes(node)


def test_dumps_keeps_jsons_errors_for_types_json_cannot_encode() -> None:
    import datetime
    import uuid

    from promptcache.prefix import _dumps

    for node in (datetime.date(2026, 1, 1), uuid.UUID(int=1), {"a": {1, 2}}):
        with pytest.raises(TypeError):
            _dumps(node)


_json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(node=_json_trees)
def test_dumps_is_byte_identical_to_the_sdks_json(node: Any) -> None:
    from promptcache.prefix import _dumps

    assert _dumps(node) == _stdlib_bytes(node)


# ---------------------------------------------------------------- segment memo
def _chat(n: int) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    for t in range(n):
        msgs.append({"role": "user", "content": [{"type": "text", "text": f"question {t}"}]})
        msgs.append({"role": "assistant", "content": f"answer {t}"})
    return {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "You help. " * 50,
            "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
            "messages": msgs}


def test_memo_reuses_unchanged_segments_and_equals_a_cold_render() -> None:
    from promptcache.prefix import render_cache_clear

    render_cache_clear()
    first = render(_chat(3))
    longer = _chat(4)
    warm = render(longer)
    render_cache_clear()
    cold = render(longer)
    assert warm == cold
    assert [s.fingerprint for s in warm.segments] == [s.fingerprint for s in cold.segments]
    shared = [a is b for a, b in zip(first.segments, warm.segments, strict=False)]
    assert all(shared)  # the earlier turns come from the memo


def test_memo_sees_in_place_mutation_and_json_type_differences() -> None:
    body = _chat(1)
    before = render(body)
    body["messages"][0]["content"][0]["text"] = "changed"
    after = render(body)
    assert after.segments[2].data != before.segments[2].data
    assert b"changed" in after.segments[2].data
    # True == 1 and 0.0 == -0.0 in Python, not in JSON: the memo must not mix them up
    for a, b in ((True, 1), (0.0, -0.0), (1, 1.0)):
        va = render({**_chat(0), "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x", "extra": a}]}]})
        vb = render({**_chat(0), "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x", "extra": b}]}]})
        assert va.segments[-1].data != vb.segments[-1].data, (a, b)


def test_memo_is_bounded_in_entries_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    import promptcache.prefix as prefix

    prefix.render_cache_clear()
    monkeypatch.setattr(prefix, "SEGMENT_MEMO_MAX", 8)
    monkeypatch.setattr(prefix, "SEGMENT_MEMO_MAX_BYTES", 16 * 2000)
    for i in range(30):
        render({"model": "gpt-4o", "messages": [{"role": "user", "content": f"{i} " * 400}]})
        assert len(prefix._SEGMENT_MEMO) <= 8
        assert prefix._memo_bytes == sum(prefix._memo_size(k, s)
                                         for k, s in prefix._SEGMENT_MEMO.items())
        assert prefix._memo_bytes <= 16 * 2000
    prefix.render_cache_clear()
    assert prefix._memo_bytes == 0 and not prefix._SEGMENT_MEMO


def test_has_text_agrees_with_strip_on_every_code_point() -> None:
    from promptcache.prefix import _has_text

    for cp in range(0x110000):
        c = chr(cp)
        assert _has_text(c) == bool(c.strip()), hex(cp)
        assert _has_text(f" {c} ") == bool(f" {c} ".strip()), hex(cp)


def test_a_cache_marker_is_not_counted_as_prompt_tokens() -> None:
    """cache_control is request metadata: placing or moving a marker shifts no token offset."""
    tool = {"name": "lookup", "description": "Find a care sheet. " * 20,
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    block = {"type": "search_result", "source": "s", "title": "t", "content": []}

    def body(marked: bool) -> dict[str, Any]:
        cc = {"cache_control": {"type": "ephemeral", "ttl": "1h"}} if marked else {}
        return {"model": "claude-sonnet-4-6", "max_tokens": 8, "tools": [{**tool, **cc}],
                "messages": [{"role": "user", "content": [{**block, **cc},
                                                          {"type": "text", "text": "hi"}]}]}

    plain, marked = render(body(False)), render(body(True))
    assert [s.tokens for s in plain] == [s.tokens for s in marked]
    assert [s.start_token for s in plain] == [s.start_token for s in marked]
    assert marked.segments[0].breakpoint is not None and b"cache_control" in marked.segments[0].data


# ---------------------------------------------------------------- remark (derived views)
_words = st.text(alphabet="ab cd\n", min_size=0, max_size=40).map(lambda s: s * 30)
_cc = st.one_of(st.none(), st.just({"type": "ephemeral"}),
                st.just({"type": "ephemeral", "ttl": "1h"}))


@st.composite
def _anthropic_requests(draw: Any) -> dict[str, Any]:
    def marked(node: dict[str, Any]) -> dict[str, Any]:
        cc = draw(_cc)
        return {**node, "cache_control": cc} if cc else node

    tools = [marked({"name": f"t{i}", "description": draw(_words),
                     "input_schema": {"type": "object"}}) for i in range(draw(st.integers(0, 3)))]
    system: Any = draw(st.one_of(
        _words, st.lists(st.builds(lambda t: {"type": "text", "text": t}, _words), max_size=3)))
    if isinstance(system, list):
        system = [marked(b) for b in system]
    messages: list[dict[str, Any]] = []
    for m in range(draw(st.integers(1, 12))):
        role = "user" if m % 2 == 0 else "assistant"
        kind = draw(st.sampled_from(["str", "blocks", "tool"]))
        if kind == "str":
            content: Any = draw(_words) or "x"
        elif kind == "blocks":
            content = [marked({"type": "text", "text": draw(_words)})
                       for _ in range(draw(st.integers(1, 3)))]
        elif role == "assistant":
            content = [marked({"type": "tool_use", "id": f"c{m}", "name": "t0",
                               "input": {"q": draw(_words)[:20]}})]
        else:
            content = [marked({"type": "tool_result", "tool_use_id": f"c{m - 1}",
                               "content": draw(_words)})]
        messages.append({"role": role, "content": content})
    body: dict[str, Any] = {"model": draw(st.sampled_from(["claude-sonnet-4-6",
                                                           "claude-haiku-4-5"])),
                            "max_tokens": 8, "messages": messages, "system": system}
    if tools:
        body["tools"] = tools
    return body


@settings(max_examples=300, deadline=None)
@given(body=_anthropic_requests())
def test_remark_equals_a_full_render_of_the_planned_request(body: dict[str, Any]) -> None:
    from promptcache.catalog import get_policy
    from promptcache.planner import apply_plan, plan_breakpoints, prefix_digests
    from promptcache.prefix import remark
    from promptcache.sdk._observe import marker_paths

    view = render(body)
    plan = plan_breakpoints(view, get_policy(body["model"]))
    planned = apply_plan(body, plan, share_unchanged=True)
    paths = marker_paths(plan)
    derived = remark(view, planned, paths) if paths is not None else None
    full = render(planned)
    if paths is not None:  # only remove_block edits (an empty block deleted) fall back
        assert derived is not None
    if derived is not None:
        assert derived == full
        assert derived._by_path == full._by_path and derived._lengths == full._lengths
        assert prefix_digests(derived, view) == prefix_digests(full) == prefix_digests(view)
        from promptcache.planner import _compute_segment_digest

        for seg in derived.segments:  # digests carried over from view are the real ones
            assert seg._content_digest in (None, _compute_segment_digest(seg))


class _Text(str):
    """A str subclass: render accepts any str as content."""


@pytest.mark.parametrize("text_type", [str, _Text])
def test_remark_when_a_moved_marker_is_dropped_from_a_string_content(text_type: type) -> None:
    """A caller's marker on a thinking block is moved to the string content before it, and then
    dropped there (the top-level cache_control already marks that block): ``marker_paths``
    names ``messages[0].content``, whose node in the planned request is still a string (or a
    str subclass). remark derives the view instead of raising (found in review)."""
    from promptcache.catalog import get_policy
    from promptcache.planner import apply_plan, plan_breakpoints
    from promptcache.prefix import remark
    from promptcache.sdk._observe import marker_paths

    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "messages": [{"role": "user", "content": text_type("hello " * 300)},
                         {"role": "assistant", "content": [
                             {"type": "thinking", "thinking": "hmm", "signature": "s",
                              "cache_control": {"type": "ephemeral"}}]}]}
    view = render(body)
    plan = plan_breakpoints(view, get_policy(body["model"]))
    planned = apply_plan(body, plan, share_unchanged=True)
    paths = marker_paths(plan)
    assert paths is not None and "messages[0].content" in paths
    assert remark(view, planned, paths) == render(planned)


def test_memo_key_does_not_mix_up_buffer_objects() -> None:
    """marshal writes any object with the buffer protocol as plain bytes, so numpy scalars
    (np.float64 is a float subclass, np.str_ a str subclass: json encodes both) key the same
    as bytes / other buffers with the same memory. A warm render must equal a cold one."""
    np = pytest.importorskip("numpy")
    from promptcache.prefix import render_cache_clear

    def body(v: Any) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-6", "max_tokens": 8,
                "tools": [{"name": "t", "description": "d",
                           "input_schema": {"type": "object", "default": v}}],
                "messages": [{"role": "user", "content": "hi"}]}

    as_str = np.str_("ab")  # buffer: b"a\0\0\0b\0\0\0"
    as_float = np.frombuffer(b"a\x00\x00\x00b\x00\x00\x00", dtype=np.float64)[0]
    render_cache_clear()
    cold = render(body(as_float)).segments[0].data
    render_cache_clear()
    render(body(as_str))
    warm = render(body(as_float)).segments[0].data
    assert warm == cold  # HEAD: warm holds "ab", cold the float
    # and what json cannot encode must not be served from the memo either
    render_cache_clear()
    render(body(np.float64(1.5)))
    with pytest.raises(InvalidRequestError):
        render(body(np.float64(1.5).tobytes()))


def test_body_of_dumps_an_openai_chat_tool_schema_passed_as_a_model() -> None:
    """body_of (6d1f1b0) searches tools to depth 2: tool -> its fields. An OpenAI Chat tool
    keeps its schema one level deeper (tools[i].function.parameters), so a pydantic model
    there is no longer dumped (the SDK dumps it when sending) and render() of the body fails:
    the wrapper logs "request preparation failed" and skips auto_cache and lint. At e9cc1e6
    body_of dumped it."""
    from pydantic import BaseModel

    from promptcache.sdk._observe import body_of

    class Schema(BaseModel):
        type: str = "object"
        properties: dict[str, Any] = {}

    kwargs = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
              "tools": [{"type": "function",
                         "function": {"name": "f",
                                      "parameters": Schema(type="object", properties={})}}]}
    body = body_of(kwargs)
    assert body["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}
    render(body, "openai-chat")


def test_memo_byte_bound_covers_the_bytes_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo's byte bound counts each segment's JSON, and since c6ad4f7 the key of a
    non-string node is its marshal serialisation: a second copy of the block's text that the
    bound does not count (about 2x the memory the bound names: 1,000 text blocks of 54 KB hold
    ~114 MB of RSS at HEAD, ~63 MB at e9cc1e6, with _memo_bytes = 54 MB in both)."""
    import promptcache.prefix as prefix

    prefix.render_cache_clear()
    monkeypatch.setattr(prefix, "SEGMENT_MEMO_MAX_BYTES", 16 * 200_000)
    for i in range(40):  # ~2 MB of text blocks, under the 3.2 MB bound
        prefix.render({"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"{i} " + "lorem " * 8000}]}]})
    held = sum(len(s.data) for s in prefix._SEGMENT_MEMO.values())
    held += sum(len(part) for key in prefix._SEGMENT_MEMO for part in key
                if isinstance(part, bytes))
    prefix.render_cache_clear()
    assert held <= prefix.SEGMENT_MEMO_MAX_BYTES


_float_trees = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text()
    | st.floats() | st.floats(min_value=1e-12, max_value=1e-3) | st.sampled_from(
        [1e-5, 9.99e-5, 1e-4, 1e-6, 1e16, 1e-10, 0.0, -0.0, 5e-324, "null", "0.0000", "3e-"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1000)
@given(node=_float_trees)
def test_keyed_dumps_is_byte_identical_to_the_sdks_json(node: Any) -> None:
    """The memo path encodes a marshal-keyed node with strict orjson and walks it only when a
    float may print differently; the bytes are json's in every case."""
    from promptcache.prefix import _dumps_keyed

    data, exact = _dumps_keyed({"type": "text", "text": "x", "extra": node})
    assert data == _stdlib_bytes({"type": "text", "text": "x", "extra": node})
    assert exact


def test_floats_print_alike_in_orjson_and_json_unless_marked() -> None:
    """The rule behind _FLOAT_MARKS, on 250,000 floats spread over every exponent."""
    import math
    import random
    import struct

    import orjson

    from promptcache.prefix import _FLOAT_MARKS

    rng = random.Random(11)
    floats = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
              for _ in range(200_000)]
    for e in range(-330, 310):
        for _ in range(40):
            f = float(f"{rng.uniform(1, 10)!r}e{e}")
            floats += [f, -f]
    floats += [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1e-4, 9.999999999999999e-05,
               1e16, 9999999999999998.0, 1e21, 1e22, 1e-5, 1e-7]
    for f in floats:
        a, b = _stdlib_bytes([f]), orjson.dumps([f])
        assert a == b or any(m in b for m in _FLOAT_MARKS), (f, a, b)


def test_slot_constructor_builds_what_the_dataclass_init_builds() -> None:
    import dataclasses

    from promptcache._slots import slot_constructor
    from promptcache.prefix import Segment, _new_segment

    args = (3, "messages[1].content", "messages", "text", "user", 1, b'"hi"', "hi", 1, 40, 3,
            Breakpoint("1h"), True)
    seg, ref = _new_segment(*args), Segment(*args)
    assert seg == ref and repr(seg) == repr(ref) and hash(seg) == hash(ref)
    assert seg._fingerprint is None and seg._content_digest is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        seg.path = "x"  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, PostInit):
        with pytest.raises(TypeError):
            slot_constructor(cls)


def _tool_result(content: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": content}]}]}


@pytest.mark.parametrize("content,path", [
    ([["xxxx yyy"]], "messages[0].content[0].content[0]"),
    (5, "messages[0].content[0].content"),
    ({"type": "text", "text": "x"}, "messages[0].content[0].content"),
])
def test_tool_result_content_that_is_not_blocks_is_invalid(content: Any, path: str) -> None:
    # it rendered as 0 tokens before: a silently wrong count
    with pytest.raises(InvalidRequestError) as err:
        render(_tool_result(content))
    assert err.value.path == path


def test_tool_result_blocks_without_text_are_counted() -> None:
    found = {"type": "search_result", "source": "kb://1", "title": "Ferns",
             "content": [{"type": "text", "text": "brown tips mean low humidity " * 20}]}
    seg = render(_tool_result([found])).segments[-1]
    assert seg.tokens > 100
    plain = render(_tool_result("brown tips")).segments[-1]
    assert plain.tokens == render(_tool_result([{"type": "text", "text": "brown tips"}])
                                  ).segments[-1].tokens


def test_string_nodes_make_their_json_bytes_on_first_use() -> None:
    """A string system / content keeps its text until its JSON bytes are asked for (linting a
    long chat never asks: escaping its text cost about as much as counting its tokens); the
    bytes, equality, hash and digests are those of the eager form."""
    from promptcache.lint import lint_request
    from promptcache.planner import prefix_digests
    from promptcache.prefix import Segment, _new_segment, render_cache_clear

    text = 'Say "hi"\n\tthen \\ stop \ud800 é'  # escapes, a lone surrogate, non-ASCII
    args = (0, "system", "system", "text", None, None, text, text, 9, 0, 0, None, True)
    lazy = _new_segment(*args)
    eager = Segment(*args[:6], json.dumps(text, ensure_ascii=False).encode(
        "utf-8", "surrogatepass"), *args[7:])
    assert lazy == eager and hash(lazy) == hash(eager) and lazy.string_node
    assert lazy.data == eager.data and lazy._data == eager.data and repr(lazy) == repr(eager)

    render_cache_clear()
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "Now: 2026-11-29 10:31:02. " + "Be brief. " * 1500,
            "messages": [{"role": "user", "content": "Hello " * 50},
                         {"role": "assistant", "content": "Hi"},
                         {"role": "user", "content": [{"type": "text", "text": "Go on",
                                                       "cache_control": {"type": "ephemeral"}}]}]}
    view = render(body)
    assert [type(s._data) for s in view.segments] == [str, str, str, bytes]
    assert lint_request(body, view=view)  # the timestamp is found...
    assert [type(s._data) for s in view.segments][:3] == [str, str, str]  # ...without the bytes
    lazy_digests = prefix_digests(view)
    render_cache_clear()
    fresh = render(body)
    for s in fresh.segments:
        assert s.data == json.dumps(json.loads(s.data), ensure_ascii=False,
                                    separators=(",", ":")).encode()
    assert [s.data for s in fresh.segments] == [s.data for s in view.segments]
    from promptcache.planner import _compute_segment_digest
    assert [_compute_segment_digest(s) for s in fresh.segments] == [
        _compute_segment_digest(s) for s in view.segments]
    assert prefix_digests(fresh) == lazy_digests


def test_render_memo_counts_each_entry_once_whatever_happens_to_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 11: an entry was counted by its string's length when memoised and by its JSON's
    once made (CJK, newlines, quotes: longer), so evictions drove the byte count negative and
    the memo's byte cap stopped applying."""
    import promptcache.prefix as prefix

    prefix.render_cache_clear()
    monkeypatch.setattr(prefix, "SEGMENT_MEMO_MAX", 40)
    for i in range(200):
        view = render({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "\u4e2d\u6587\u6d4b\u8bd5\n\"" * 500 + str(i)}]})
        for seg in view.segments:
            assert seg.data  # lint, the diff and fingerprints make the JSON
        assert prefix._memo_bytes == sum(prefix._MEMO_SIZES.values()) >= 0
        assert set(prefix._MEMO_SIZES) == set(prefix._SEGMENT_MEMO)
    prefix.render_cache_clear()
    assert prefix._memo_bytes == 0 and not prefix._MEMO_SIZES


@pytest.mark.parametrize(("provider", "extra", "field"), [
    ("openai-chat", {"system": "Be brief."}, "system"),
    ("openai-chat", {"instructions": "Be brief."}, "instructions"),
    ("openai-responses", {"system": "Be brief.", "input": "hi"}, "system"),
    ("anthropic", {"instructions": "Be brief."}, "instructions"),
])
def test_another_shapes_prompt_field_is_an_error_not_dropped(
        provider: str, extra: dict[str, Any], field: str) -> None:
    """New-user trial 11: `render --provider openai-chat` on an Anthropic request left its whole
    top-level system prompt (and its markers) out, with exit 0 and a wrong token count."""
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5, **extra}
    if provider != "openai-responses":
        body["messages"] = [{"role": "user", "content": "hi"}]
    with pytest.raises(InvalidRequestError) as err:
        render(body, provider)
    assert err.value.path == field and "left out" in str(err.value)


@pytest.mark.parametrize(("extra", "path"), [
    ({"prompt_cache_key": 42}, "prompt_cache_key"),
    ({"prompt_cache_options": "explicit"}, "prompt_cache_options"),
    ({"prompt_cache_options": {"mode": "bogus"}}, "prompt_cache_options.mode"),
    ({"prompt_cache_options": {"ttl": 30}}, "prompt_cache_options.ttl"),
])
def test_malformed_openai_cache_fields_are_named(extra: dict[str, Any], path: str) -> None:
    """New-user trial 12: a non-string prompt_cache_key or a bogus prompt_cache_options mode got
    through lint and the wrapper (the API answers 400; the local backend took them)."""
    for provider, body in (("openai-chat", {"messages": [{"role": "user", "content": "hi"}]}),
                           ("openai-responses", {"input": "hi"})):
        with pytest.raises(InvalidRequestError) as err:
            render({"model": "gpt-5.6", **body, **extra}, provider)
        assert err.value.path == path
    render({"model": "gpt-5.6", "input": "hi", "prompt_cache_key": "k",
            "prompt_cache_options": {"mode": "explicit", "ttl": "30m"}})
