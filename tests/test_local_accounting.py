"""Usage accounting of the local backend: Anthropic breakpoints/lookback/TTL, OpenAI steps."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.local.accounting import (
    AnthropicUsageCounts,
    CacheLedger,
    ManualClock,
    anthropic_breakpoints,
    commit_plan,
    openai_automatic_cached_tokens,
    openai_breakpoints,
    plan_reads_and_writes,
    ttl_seconds,
)
from promptcache.local.errors import BackendAPIError
from promptcache.local.template import TemplatedPrompt, apply_template

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
BIG = 10**9  # "the block cache holds everything"


@dataclass(frozen=True)
class Policy:
    provider: str = "anthropic"
    min_cacheable_tokens: int = 1024
    max_breakpoints: int = 4
    lookback_positions: int | None = 20
    cache_step_tokens: int | None = None
    explicit_breakpoints: bool = False


def _system(words: int) -> str:
    return " ".join(f"rule{i}" for i in range(words))


def _request(
    messages: list[dict[str, Any]],
    *,
    system_cc: dict[str, Any] | None = EPH,
    top: dict[str, Any] | None = None,
    words: int = 1500,
) -> TemplatedPrompt:
    block: dict[str, Any] = {"type": "text", "text": _system(words)}
    if system_cc is not None:
        block["cache_control"] = system_cc
    payload: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "system": [block],
        "messages": messages,
    }
    if top is not None:
        payload["cache_control"] = top
    return apply_template(payload, "anthropic")


def _run(
    prompt: TemplatedPrompt,
    ledger: CacheLedger,
    clock: ManualClock,
    *,
    policy: Policy = Policy(),
    available: int = BIG,
) -> AnthropicUsageCounts:
    bps = anthropic_breakpoints(prompt, policy)
    plan = plan_reads_and_writes(
        prompt,
        bps,
        ledger,
        tenant_salt=b"t",
        now=clock.now(),
        min_tokens=policy.min_cacheable_tokens,
        lookback_positions=policy.lookback_positions,
        available_tokens=available,
    )
    commit_plan(plan, ledger)
    return AnthropicUsageCounts.from_plan(plan)


def _user(text: str, cc: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cc:
        block["cache_control"] = cc
    return {"role": "user", "content": [block]}


def test_write_then_read_at_the_system_breakpoint() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    p1 = _request([_user("hello")])
    sys_end = p1.span_of("system[0]").end
    assert sys_end >= 1024
    u1 = _run(p1, ledger, clock)
    assert (u1.cache_creation_input_tokens, u1.cache_read_input_tokens) == (sys_end, 0)
    assert u1.ephemeral_5m_input_tokens == sys_end and u1.ephemeral_1h_input_tokens == 0
    assert u1.input_tokens == p1.total_tokens - sys_end
    clock.advance(60)
    p2 = _request([_user("another question")])
    u2 = _run(p2, ledger, clock)
    assert (u2.cache_creation_input_tokens, u2.cache_read_input_tokens) == (0, sys_end)
    assert u2.input_tokens == p2.total_tokens - sys_end


def test_ttl_expires_from_request_start_and_reads_refresh() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    _run(_request([_user("a")]), ledger, clock)
    clock.advance(299)
    assert _run(_request([_user("b")]), ledger, clock).cache_read_input_tokens > 0  # refreshed
    clock.advance(299)
    assert _run(_request([_user("c")]), ledger, clock).cache_read_input_tokens > 0
    clock.advance(300)  # exactly 5m after the last read: expired
    u = _run(_request([_user("d")]), ledger, clock)
    assert u.cache_read_input_tokens == 0 and u.cache_creation_input_tokens > 0


def test_one_hour_ttl_survives_five_minutes() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    _run(_request([_user("a")], system_cc=EPH_1H), ledger, clock)
    clock.advance(3000)
    u = _run(_request([_user("b")], system_cc=EPH_1H), ledger, clock)
    assert u.cache_read_input_tokens > 0
    assert ttl_seconds("1h") == 3600.0


def test_below_minimum_nothing_is_cached() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    small = _request([_user("hi")], words=50)
    for _ in range(2):
        u = _run(small, ledger, clock)
        assert (u.cache_creation_input_tokens, u.cache_read_input_tokens) == (0, 0)
        assert u.input_tokens == small.total_tokens
    assert len(ledger) == 0


def _tool_turns(n: int) -> list[dict[str, Any]]:
    """n assistant tool_use / user tool_result pairs: 2 lookback positions each."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "f", "input": {"i": i}}],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"}],
            }
        )
    return out


def _with_final_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = messages[-1]["content"][-1]
    last["cache_control"] = EPH
    return messages


@pytest.mark.parametrize(("turns", "hit"), [(10, True), (11, False)])
def test_lookback_window_of_20_positions(turns: int, hit: bool) -> None:
    ledger, clock = CacheLedger(), ManualClock()
    first = [_user("start", EPH)]
    p1 = _request(first, system_cc=None)
    _run(p1, ledger, clock)
    written = p1.span_of("messages[0].content[0]").end
    p2 = _request(_with_final_breakpoint([_user("start"), *_tool_turns(turns)]), system_cc=None)
    gap = p2.spans[-1].segment.position - p2.span_of("messages[0].content[0]").segment.position
    assert gap == 2 * turns  # each tool_use / tool_result message is one position
    u = _run(p2, ledger, clock)
    assert u.cache_read_input_tokens == (written if hit else 0)
    assert u.cache_creation_input_tokens == p2.spans[-1].end - u.cache_read_input_tokens


def test_tool_runs_collapse_into_one_position() -> None:
    run = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}} for i in range(30)
        ],
    }
    p = _request([_user("go"), run, _user("ok", EPH)])
    positions = {s.segment.position for s in p.spans if s.segment.kind == "tool_use"}
    assert len(positions) == 1


def test_read_is_limited_to_what_the_block_cache_holds() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    p1 = _request([_user("a")])
    _run(p1, ledger, clock)
    sys_end = p1.span_of("system[0]").end
    u = _run(_request([_user("b")]), ledger, clock, available=sys_end - 1)  # evicted
    assert u.cache_read_input_tokens == 0 and u.cache_creation_input_tokens == sys_end


def test_ttl_split_between_two_breakpoints() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    p = _request([_user("question " * 50, EPH)], system_cc=EPH_1H)
    u = _run(p, ledger, clock)
    sys_end = p.span_of("system[0]").end
    msg_end = p.spans[-1].end
    assert u.ephemeral_1h_input_tokens == sys_end
    assert u.ephemeral_5m_input_tokens == msg_end - sys_end
    assert u.cache_creation_input_tokens == msg_end
    assert u.input_tokens == p.total_tokens - msg_end


def test_automatic_breakpoint_moves_forward() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    msgs = [_user("first")]
    p1 = _request(msgs, system_cc=None, top=EPH)
    u1 = _run(p1, ledger, clock)
    assert u1.cache_creation_input_tokens == p1.spans[-1].end
    msgs2 = [*msgs, {"role": "assistant", "content": "ok"}, _user("second")]
    p2 = _request(msgs2, system_cc=None, top=EPH)
    u2 = _run(p2, ledger, clock)
    assert u2.cache_read_input_tokens == p1.spans[-1].end
    assert u2.cache_creation_input_tokens == p2.spans[-1].end - p1.spans[-1].end


def test_more_than_four_breakpoints_is_a_400() -> None:
    msgs = [_user(f"m{i}", EPH) for i in range(4)]
    with pytest.raises(BackendAPIError) as err:
        anthropic_breakpoints(_request(msgs), Policy())
    assert err.value.status == 400
    assert err.value.message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_automatic_takes_a_slot() -> None:
    msgs = [_user(f"m{i}", EPH) for i in range(3)] + [_user("last")]
    with pytest.raises(BackendAPIError, match="Found 5"):
        anthropic_breakpoints(_request(msgs, top=EPH), Policy())


def test_one_hour_after_five_minutes_is_a_400() -> None:
    with pytest.raises(BackendAPIError) as err:
        anthropic_breakpoints(_request([_user("x", EPH_1H)], system_cc=EPH), Policy())
    assert err.value.status == 400
    assert err.value.message.startswith(
        "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come "
        "after a ttl='5m' cache_control block."
    )


def test_automatic_ttl_conflict_and_same_ttl_noop() -> None:
    with pytest.raises(BackendAPIError):
        anthropic_breakpoints(_request([_user("x", EPH)], system_cc=None, top=EPH_1H), Policy())
    bps = anthropic_breakpoints(_request([_user("x", EPH)], system_cc=None, top=EPH), Policy())
    assert len(bps) == 1


@pytest.mark.parametrize(
    ("reused", "prompt", "cached"),
    [
        (0, 5000, 0),
        (1023, 5000, 0),
        (1024, 5000, 1024),
        (1151, 5000, 1024),
        (1152, 5000, 1152),
        (2000, 1000, 0),
        (4999, 5000, 4992),
    ],
)
def test_openai_automatic_steps(reused: int, prompt: int, cached: int) -> None:
    assert openai_automatic_cached_tokens(reused, prompt) == cached


def test_openai_56_implicit_and_explicit_breakpoints() -> None:
    payload = {
        "model": "gpt-5.6-sol",
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "sys", "prompt_cache_breakpoint": {"mode": "explicit"}}
                ],
            },
            {"role": "user", "content": "hi"},
        ],
    }
    prompt = apply_template(payload, "openai-chat")
    bps = openai_breakpoints(prompt, prompt.view.params)
    assert [b.path for b in bps] == ["messages[0].content[0]", "messages[1].content"]
    assert all(b.ttl == "30m" for b in bps)
    payload["prompt_cache_options"] = {"mode": "explicit"}
    prompt = apply_template(payload, "openai-chat")
    assert [b.path for b in openai_breakpoints(prompt, prompt.view.params)] == [
        "messages[0].content[0]"
    ]


# ---------------------------------------------------------------------------------- properties
turn_strategy = st.tuples(
    st.integers(min_value=1, max_value=6),  # new user blocks this turn
    st.lists(st.sampled_from([None, "5m", "1h"]), min_size=6, max_size=6),  # markers per block
    st.sampled_from([0.0, 30.0, 299.0, 301.0, 4000.0]),  # clock advance before the request
    st.integers(min_value=0, max_value=400),  # tokens the block cache still holds (or BIG)
    st.booleans(),  # block cache holds everything
)


@settings(max_examples=40, deadline=None)
@given(st.lists(turn_strategy, min_size=1, max_size=6))
def test_accounting_balances_and_reads_only_live_written_prefixes(
    turns: list[tuple[int, list[str | None], float, int, bool]],
) -> None:
    policy = Policy(min_cacheable_tokens=8, lookback_positions=4)
    ledger, clock = CacheLedger(), ManualClock()
    written: dict[tuple[int, ...], tuple[float, float]] = {}  # prefix -> (expiry, ttl seconds)
    messages: list[dict[str, Any]] = []
    for n, (blocks, markers, advance, held, holds_all) in enumerate(turns):
        clock.advance(advance)
        content: list[dict[str, Any]] = []
        for b in range(blocks):
            block: dict[str, Any] = {"type": "text", "text": f"turn {n} block {b} " * 3}
            if markers[b] is not None:
                block["cache_control"] = {"type": "ephemeral", "ttl": markers[b]}
            content.append(block)
        if n:
            messages.append({"role": "assistant", "content": f"reply {n}"})
        messages.append({"role": "user", "content": content})
        payload = {"model": "m", "max_tokens": 1, "messages": copy.deepcopy(messages)}
        prompt = apply_template(payload, "anthropic")
        try:
            bps = anthropic_breakpoints(prompt, policy)
        except BackendAPIError as err:
            assert err.status == 400
            messages.pop()
            if n:
                messages.pop()
            continue
        available = BIG if holds_all else held
        plan = plan_reads_and_writes(
            prompt,
            bps,
            ledger,
            tenant_salt=b"t",
            now=clock.now(),
            min_tokens=8,
            lookback_positions=4,
            available_tokens=available,
        )
        usage = AnthropicUsageCounts.from_plan(plan)
        assert usage.input_tokens >= 0
        assert (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
            == prompt.total_tokens
        )
        assert (
            usage.ephemeral_5m_input_tokens + usage.ephemeral_1h_input_tokens
            == usage.cache_creation_input_tokens
        )
        ends = {span.end for span in prompt.spans}
        if usage.cache_read_input_tokens:
            read = usage.cache_read_input_tokens
            assert read in ends and read <= available
            assert written.get(prompt.token_ids[:read], (-1.0, 0.0))[0] > clock.now()
        for bp in plan.writes:
            assert bp.end in {b.end for b in bps} and bp.end >= 8
        commit_plan(plan, ledger)
        for bp in plan.writes:
            ttl = ttl_seconds(bp.ttl)
            old = written.get(prompt.token_ids[: bp.end])
            if old is None or old[0] <= clock.now() + ttl:
                written[prompt.token_ids[: bp.end]] = (clock.now() + ttl, ttl)
        if plan.read_tokens:  # a read restarts the entry's lifetime
            key = prompt.token_ids[: plan.read_tokens]
            expiry, ttl = written[key]
            written[key] = (max(expiry, clock.now() + ttl), ttl)
        messages[-1]["content"] = [
            {k: v for k, v in blk.items() if k != "cache_control"} for blk in content
        ]
