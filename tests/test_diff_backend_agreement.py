"""The diff's prediction agrees with the local backend's cache accounting.

For each scenario, request A is planned and committed on an empty
:class:`~promptcache.local.accounting.CacheLedger` (the local backend's record of written
entries), then request B is planned. The segment whose end the backend reads up to must be the
segment whose end the diff predicts B reads up to (token counts differ: the backend counts its
own chat template in o200k_base, the diff estimates Anthropic tokens, so the test compares
boundaries, not numbers). Parameters the backend does not model (tool_choice, thinking, model)
are left out.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.diff import diff
from tests.cases import filler

pytest.importorskip("promptcache.local.accounting")

from promptcache.catalog import get_policy
from promptcache.local.accounting import (
    CacheLedger,
    anthropic_breakpoints,
    commit_plan,
    plan_reads_and_writes,
)
from promptcache.local.template import apply_template

MODEL = "claude-sonnet-4-5"


def text(n: int, salt: str) -> str:
    return filler(n, salt).strip()


def _block(t: str, cc: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": t}
    if cc:
        b["cache_control"] = {"type": "ephemeral"} if cc == "5m" else \
            {"type": "ephemeral", "ttl": cc}
    return b


def request(n_msgs: int, *, tools: list[str] | None = None, system: str = "sys",
            system_ttl: str = "5m", last: bool = True, extra_blocks: int = 0) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": "user" if k % 2 == 0 else "assistant",
         "content": [_block(text(250, f"m{k}"))]} for k in range(n_msgs)]
    if extra_blocks:
        msgs.append({"role": "user" if n_msgs % 2 == 0 else "assistant",
                     "content": [_block(f"step {k}") for k in range(extra_blocks)]})
    if last:
        msgs[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    names = tools or ["read", "write"]
    return {"model": MODEL, "max_tokens": 64,
            "tools": [{"name": n, "description": text(80, f"tool-{n}"),
                       "input_schema": {"type": "object"}} for n in names],
            "system": [_block(text(1800, system), cc=system_ttl)],
            "messages": msgs}


def backend_read_path(a: dict[str, Any], b: dict[str, Any], gap: float) -> str | None:
    policy = get_policy(MODEL)
    ledger = CacheLedger()

    def plan(body: dict[str, Any], now: float) -> Any:
        prompt = apply_template(body, "anthropic", model=MODEL)
        return prompt, plan_reads_and_writes(
            prompt, anthropic_breakpoints(prompt, policy), ledger, tenant_salt=b"t", now=now,
            min_tokens=policy.min_cacheable_tokens,
            lookback_positions=policy.lookback_positions, available_tokens=10**9)

    _, plan_a = plan(a, 0.0)
    commit_plan(plan_a, ledger)
    prompt_b, plan_b = plan(b, gap)
    if plan_b.read_tokens == 0:
        return None
    return next(s.segment.path for s in prompt_b.spans if s.end == plan_b.read_tokens)


def diff_read_path(a: dict[str, Any], b: dict[str, Any], gap: float) -> str | None:
    from promptcache.prefix import render

    r = diff(a, b, timestamps=(0.0, gap))
    assert r.predicted is not None
    if r.predicted.cache_read == 0:
        return None
    view = render(b, "anthropic", model=MODEL)
    return next(s.path for s in view.segments if s.end_token == r.predicted.cache_read)


def _history_edit() -> tuple[dict[str, Any], dict[str, Any]]:
    a, b = request(5), request(7)
    b["messages"][2]["content"][0]["text"] += " (edited)"
    return a, b


def _lookback() -> tuple[dict[str, Any], dict[str, Any]]:
    a = request(4)
    b = request(4, extra_blocks=25)
    b["messages"][3]["content"][-1].pop("cache_control", None)
    return a, b


def _lookback_bridged() -> tuple[dict[str, Any], dict[str, Any]]:
    """A second breakpoint inside the new turn keeps the old entry within the lookback."""
    a, b = _lookback()
    b["messages"][4]["content"][10]["cache_control"] = {"type": "ephemeral"}
    return a, b


SCENARIOS: dict[str, tuple[Any, float]] = {
    "append": (lambda: (request(4), request(6)), 10.0),
    "tools reordered": (lambda: (request(4), request(6, tools=["write", "read"])), 10.0),
    "tool added": (lambda: (request(4), request(6, tools=["read", "write", "grep"])), 10.0),
    "system changed": (lambda: (request(4), request(6, system="sys2")), 10.0),
    "history edit": (_history_edit, 10.0),
    "lookback exceeded": (_lookback, 10.0),
    "lookback bridged by a second breakpoint": (_lookback_bridged, 10.0),
    "breakpoint removed": (lambda: (request(4), request(6, last=False)), 10.0),
    "ttl: 5m expired, 1h kept": (lambda: (request(4, system_ttl="1h"),
                                          request(6, system_ttl="1h")), 400.0),
    "ttl: all expired": (lambda: (request(4), request(6)), 400.0),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_diff_reads_the_same_boundary_as_the_backend(name: str) -> None:
    build, gap = SCENARIOS[name]
    a, b = build()
    assert diff_read_path(a, b, gap) == backend_read_path(a, b, gap)
