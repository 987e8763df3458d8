"""Trial 17 finding 3: ``PromptBuilder.explain()`` explained a different plan from the request
just built (the implicit-mode plan after an explicit-mode ``to_openai_chat``, chat paths after
``to_openai_responses``) and replaced ``last_plan`` with it, which the README's loop feeds into
the next request."""

from __future__ import annotations

from promptcache import PromptBuilder
from tests.cases import filler


def _bps(plan: object) -> list[tuple[str, str, str | None]]:
    return [(bp.path, bp.source, bp.ttl) for bp in plan.breakpoints]  # type: ignore[attr-defined]


def test_explain_shows_the_explicit_mode_request_and_keeps_last_plan() -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).document(filler(500, "d")).turn("hi")
    payload = b.to_openai_chat(max_completion_tokens=8, prompt_cache_options={"mode": "explicit"})
    assert payload["messages"][-1]["content"][0].get("prompt_cache_breakpoint") == {
        "mode": "explicit"}
    sent = b.last_plan
    assert sent is not None
    before = _bps(sent)
    ex = b.explain()
    marked = {r.path: r.breakpoint for r in ex.rows if r.breakpoint}
    # the turn carries the explicit marker that was sent, not OpenAI's implicit one
    assert marked["messages[1].content[0]"] != "implicit"
    assert "implicit" not in marked.values()
    assert ex.plan == sent
    assert b.last_plan is sent
    assert _bps(b.last_plan) == before
    assert b.last_plan.prompt_cache_options != {"mode": "implicit", "ttl": "30m"}


def test_explain_after_responses_uses_input_paths_and_keeps_last_plan() -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    b.to_openai_responses(max_output_tokens=16)
    sent = b.last_plan
    assert sent is not None and sent.provider == "openai-responses"
    ex = b.explain()
    assert ex.plan.provider == "openai-responses"
    assert all(r.path.startswith(("input[", "tools[")) for r in ex.rows)
    assert [r.path for r in ex.rows if r.breakpoint] == [bp.path for bp in sent.breakpoints]
    assert b.last_plan is sent


def test_explain_with_another_format_does_not_replace_last_plan() -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    b.to_openai_responses(max_output_tokens=16)
    sent = b.last_plan
    ex = b.explain("openai-chat")  # a what-if for another format: as documented, no options
    assert ex.plan.provider == "openai-chat"
    assert all(r.path.startswith("messages[") for r in ex.rows)
    assert b.last_plan is sent


def test_explain_before_any_request_plans_the_default_format() -> None:
    b = PromptBuilder("claude-sonnet-4-6").system(filler(1500, "s")).turn("hi")
    ex = b.explain()
    assert ex.plan.provider == "anthropic"
    assert b.last_plan is None  # nothing was built, so nothing was sent
    b2 = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    assert b2.explain().plan.provider == "openai-chat"
    assert b2.last_plan is None


def test_explain_keeps_the_previous_the_request_was_planned_against() -> None:
    first = PromptBuilder("claude-sonnet-4-6").system(filler(1500, "s")).turn("q1")
    first.to_anthropic()
    b = PromptBuilder("claude-sonnet-4-6").system(filler(1500, "s"))
    b.history({"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"})
    b.turn("q2")
    b.to_anthropic(previous=first.last_plan)  # given to the call, not the constructor
    sent = b.last_plan
    assert sent is not None and sent.read_tokens
    ex = b.explain()
    assert ex.plan == sent
    assert ex.plan.read_tokens == sent.read_tokens
    assert b.last_plan is sent
