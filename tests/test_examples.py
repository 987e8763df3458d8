"""The runnable examples in examples/: each script's main() against the local backend.

Every example runs in-process on the local backend with the small model shape
(``--small-model``), once with the Anthropic API shape and once with the OpenAI one. The
assertions come from the usage the wrapper recorded and the backend's own counters:

* Anthropic: request 1 writes the prefix and reads nothing; every later request of a
  conversation reads exactly what the previous one read plus what it wrote
  (``read[n] == read[n-1] + write[n-1]``: the builder's breakpoints reach the previous entry);
  in the RAG example every question reads the prefix question 1 wrote and writes nothing.
* OpenAI: ``cached_tokens == 1024 + 128 * floor((M - 1024) / 128)`` of the prefix ``M`` the
  engine reused (the automatic-caching rule), and nothing is read on request 1.
* The tracker's totals equal the backend's counters, and every read token was served from the
  block cache.
* The prompts pass both providers' minimum cacheable length.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("torch")

from promptcache.catalog import get_policy
from promptcache.tokens import count_tokens
from promptcache.usage.classify import predicted_openai_cached

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ANTHROPIC_MODEL = "claude-sonnet-4-6"  # the examples' default (4-5 retires 2026-11-30)
OPENAI_MODEL = "gpt-5"
NAMES = ("chat_long_system", "rag_repeated_document", "agent_loop")


@pytest.fixture(scope="module")
def examples() -> Iterator[dict[str, ModuleType]]:
    """The example scripts imported as modules (their folder on sys.path, as when run)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield {name: importlib.import_module(name) for name in ("_common", *NAMES)}
    finally:
        sys.path.remove(str(EXAMPLES))
        for name in ("_common", *NAMES):
            sys.modules.pop(name, None)


class _Runs:
    """main() of an example with one API shape on the local backend, run once on first use."""

    def __init__(self, examples: dict[str, ModuleType]) -> None:
        self.examples = examples
        self.done: dict[tuple[str, str], Any] = {}

    def __getitem__(self, key: tuple[str, str]) -> Any:
        if key not in self.done:
            name, provider = key
            self.done[key] = self.examples[name].main(
                ["--local", "--small-model", "--provider", provider])
        return self.done[key]


@pytest.fixture(scope="module")
def runs(examples: dict[str, ModuleType]) -> _Runs:
    return _Runs(examples)


def _reads(result: Any) -> list[int]:
    return [s.record.cache_read for s in result.steps]


def _writes(result: Any) -> list[int | None]:
    return [s.record.cache_write for s in result.steps]


# ------------------------------------------------------------------------ prompts
@pytest.mark.parametrize("prompt", ["support_system.md", "oncall_runbook.md"])
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", ANTHROPIC_MODEL, OPENAI_MODEL])
def test_prompts_pass_the_provider_minimum(prompt: str, model: str) -> None:
    text = (EXAMPLES / "prompts" / prompt).read_text("utf-8")
    tokens = count_tokens(text, model).tokens
    assert tokens >= get_policy(model).min_cacheable_tokens == 1024


# ------------------------------------------------------------------------ every example
@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_usage_matches_backend_counters(runs: _Runs, name: str,
                                        provider: str) -> None:
    result = runs[name, provider]
    assert result.target.local and result.target.provider == provider
    assert len(result.steps) == 4
    assert [r.model for r in result.tracker.records] == [result.target.model] * 4
    summary = result.tracker.summary()
    counters = result.counters
    assert counters is not None
    assert summary.total_input == counters["prompt"]
    assert summary.cache_read == counters["cache_read"]
    assert summary.cache_write == counters["cache_write"]
    # every token reported as a cache read was served from the block cache
    for step in result.steps:
        assert step.backend_reused is not None and step.record.cache_read <= step.backend_reused
        rec = step.record
        assert rec.cache_read + (rec.cache_write or 0) + rec.uncached_input == rec.total_input
    assert summary.savings is not None and summary.savings > 0
    assert summary.hit_rate is not None and summary.hit_rate > 0.6


@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", NAMES)
def test_anthropic_first_request_writes_the_prefix(runs: _Runs,
                                                   name: str) -> None:
    first = runs[name, "anthropic"].steps[0].record
    assert first.cache_read == 0
    assert first.cache_write >= get_policy(ANTHROPIC_MODEL).min_cacheable_tokens
    assert first.cache_write_5m == first.cache_write  # the builder's default TTL


@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", ["chat_long_system", "agent_loop"])
def test_anthropic_conversation_reads_everything_the_previous_request_wrote(
        runs: _Runs, name: str) -> None:
    result = runs[name, "anthropic"]
    reads, writes = _reads(result), _writes(result)
    for n in range(1, len(reads)):
        assert reads[n] == reads[n - 1] + (writes[n - 1] or 0) > 0
        assert writes[n]  # and writes the new turn for the next request


@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", NAMES)
def test_openai_reads_follow_the_automatic_rule(runs: _Runs,
                                                name: str) -> None:
    result = runs[name, "openai"]
    assert _reads(result)[0] == 0
    assert set(_writes(result)) == {None}  # gpt-5 reports no cache writes (no write fee)
    for step in result.steps[1:]:
        assert step.record.cache_read == predicted_openai_cached(step.backend_reused) >= 1024


@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", ["chat_long_system", "agent_loop"])
def test_openai_conversation_reads_the_previous_prompt(runs: _Runs,
                                                       name: str) -> None:
    steps = runs[name, "openai"].steps
    for prev, step in pairwise(steps):
        # at most one 128-token step plus one 16-token block short of the previous prompt
        assert prev.record.total_input - 128 - 16 < step.record.cache_read
        assert step.record.cache_read <= prev.record.total_input


# ------------------------------------------------------------------------ RAG specifics
@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_rag_every_question_reads_the_document(runs: _Runs,
                                               provider: str) -> None:
    result = runs["rag_repeated_document", provider]
    reads, writes = _reads(result), _writes(result)
    prefix = result.extra["prefix_tokens"]
    assert reads == [0, prefix, prefix, prefix]
    runbook = count_tokens((EXAMPLES / "prompts" / "oncall_runbook.md").read_text("utf-8"),
                           result.target.model).tokens
    assert prefix > runbook  # instructions + the whole runbook
    if provider == "anthropic":
        # only question 1 writes, and exactly the shared prefix (the planner is told the next
        # request is a new conversation, so no question is written)
        assert writes == [prefix, 0, 0, 0]
    be = result.extra["breakeven"]
    assert be.prefix_tokens == prefix
    assert be.requests == 2  # 1.25x write / 0.1x read (Anthropic 5m); 1x / 0.1x (gpt-5)
    assert be.cost_cached(4) < be.cost_uncached(4)


# ------------------------------------------------------------------------ agent specifics
@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
def test_agent_fans_out_and_plans_against_the_previous_step(
        runs: _Runs, examples: dict[str, ModuleType]) -> None:
    agent = examples["agent_loop"]
    assert max(len(calls) for _, calls in agent.SCRIPT) == 6
    assert agent.SCRIPT[-1][1] == []
    result = runs["agent_loop", "anthropic"]
    plans = result.extra["plans"]
    assert len(plans) == 4
    # the planner expected to read what the previous step wrote (its own token estimate)
    assert plans[0].read_tokens == 0
    assert all(p.read_tokens and p.read_tokens > 0 for p in plans[1:])
    rows = result.extra["explanation"].rows
    marked = [r for r in rows if r.breakpoint]
    assert marked and marked[-1].section == "turn" and marked[-1].breakpoint == "5m"
    assert sum(r.kind == "tool_use" for r in rows) == 3 + 6 + 2
    assert len({r.position for r in rows if r.kind == "tool_use"}) == 3  # runs collapse
    assert sum(r.kind == "tool_result" for r in rows) == 3 + 6 + 2


def test_agent_executor_answers_every_scripted_call(examples: dict[str, ModuleType]) -> None:
    agent = examples["agent_loop"]
    from promptcache.builder import ToolCall

    for _, calls in agent.SCRIPT:
        for call in calls:
            result = agent.execute(call)
            assert result.tool_use_id == call.id and not result.is_error and result.content
    missing = agent.execute(ToolCall("toolu_x", "get_node_status",
                                     {"region": "eu-west-1", "node": "collector-9"}))
    assert missing.is_error


# ------------------------------------------------------------------------ client choice
def _args(examples: dict[str, ModuleType], *argv: str) -> Any:
    return examples["_common"].make_parser("test").parse_args(list(argv))


@pytest.mark.parametrize(("env", "argv", "provider", "real"), [
    ({}, (), "anthropic", False),
    ({}, ("--provider", "openai"), "openai", False),
    ({"ANTHROPIC_API_KEY": "sk-ant-test"}, (), "anthropic", True),
    ({"OPENAI_API_KEY": "sk-test"}, (), "openai", True),
    ({"OPENAI_API_KEY": "sk-test"}, ("--provider", "anthropic"), "anthropic", False),
    ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, (), "anthropic", True),
    ({"ANTHROPIC_API_KEY": "sk-ant-test"}, ("--local",), "anthropic", False),
])
def test_client_choice(examples: dict[str, ModuleType], env: dict[str, str],
                       argv: tuple[str, ...], provider: str, real: bool) -> None:
    import anthropic
    import openai

    common = examples["_common"]
    args = _args(examples, "--small-model", *argv) if not real else _args(examples, *argv)
    with common.open_target(args, env=env) as target:
        assert target.provider == provider
        assert target.local is not real
        assert target.model == common.DEFAULT_MODELS[provider]
        sdk = anthropic.Anthropic if provider == "anthropic" else openai.OpenAI
        assert isinstance(target.client, sdk)
        host = str(target.client.base_url)
        if real:
            assert "promptcache.local" not in host and target.max_tokens == 1024
            assert target.client.api_key == env[common.KEY_ENV[provider]]
        else:
            assert "promptcache.local" in host and target.max_tokens == common.LOCAL_MAX_TOKENS


def test_model_picks_the_provider(examples: dict[str, ModuleType]) -> None:
    common = examples["_common"]
    with common.open_target(_args(examples, "--model", "gpt-5.5"),
                            env={"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "o"}) as target:
        assert (target.provider, target.model, target.local) == ("openai", "gpt-5.5", False)


@pytest.mark.parametrize(("argv", "env", "message"), [
    (("--small-model",), {"ANTHROPIC_API_KEY": "k"}, "--small-model applies to the local"),
    (("--model", "claude-sonet-4-6"), {}, "closest known ids: claude-sonnet-4-6"),
    (("--model", "gpt-5", "--provider", "anthropic"), {}, "belongs to openai"),
])
def test_bad_command_line_exits_2(examples: dict[str, ModuleType], argv: tuple[str, ...],
                                  env: dict[str, str], message: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc, examples["_common"].open_target(
            _args(examples, *argv), env=env):
        pass
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_reply_text_hidden_locally_and_read_from_real_responses(
        examples: dict[str, ModuleType]) -> None:
    """The local model's text is never returned; a real API's is (both SDK shapes)."""
    common = examples["_common"]
    from promptcache.builder import PromptBuilder

    system = (EXAMPLES / "prompts" / "support_system.md").read_text("utf-8")
    for provider in ("anthropic", "openai"):
        args = _args(examples, "--small-model", "--provider", provider)
        with common.open_target(args, env={}) as target:
            b = PromptBuilder(target.model).system(system).turn("How do I take a backup?")
            if provider == "anthropic":
                response = target.client.messages.create(**b.to_anthropic(max_tokens=8))
            else:
                response = target.client.chat.completions.create(
                    **b.to_openai_chat(max_completion_tokens=8))
            assert target.reply_text(response) is None
            # the same response read as a real API's (same SDK types)
            real = common.Target(provider, target.model, target.client, 8)
            text = real.reply_text(response)
            assert isinstance(text, str)


@pytest.mark.slow  # runs the examples on the local backend (~10 s each)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_real_api_branch_end_to_end(examples: dict[str, ModuleType], name: str, provider: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """With an API key set, the script builds the SDK's own client (here bound to a local
    backend in place of the network) and runs its real-API branch: the model's text is read,
    printed and, in the chat, sent back as history."""
    import anthropic
    import openai

    from promptcache.local.testing import BASE_URL, SMALL_MODEL, LocalBackend

    shape: dict[str, Any] = dict(SMALL_MODEL)
    backend = LocalBackend(mode="fast", **shape)
    made: list[str] = []

    def bound(sdk: Any, base_url: str) -> Any:
        """The SDK class, with the network replaced by the in-process backend."""
        class Bound(sdk):  # type: ignore[misc,valid-type]
            def __init__(self, *, api_key: str) -> None:
                made.append(api_key)
                super().__init__(api_key=api_key, base_url=base_url,
                                 http_client=backend.http_client(), max_retries=0)
        return Bound

    monkeypatch.setattr(anthropic, "Anthropic", bound(anthropic.Anthropic, BASE_URL))
    monkeypatch.setattr(openai, "OpenAI", bound(openai.OpenAI, f"{BASE_URL}/v1"))
    key = examples["_common"].KEY_ENV[provider]
    monkeypatch.setenv(key, "sk-test-key")
    monkeypatch.delenv("OPENAI_API_KEY" if provider == "anthropic" else "ANTHROPIC_API_KEY",
                       raising=False)
    try:
        result = examples[name].main(["--max-tokens", "8"])
    finally:
        backend.close()
    assert made == ["sk-test-key"]
    assert not result.target.local and result.target.provider == provider
    assert result.counters is None and all(s.backend_reused is None for s in result.steps)
    assert "reply: " in capsys.readouterr().out  # a real model's text is shown
    reads = _reads(result)
    assert reads[0] == 0 and all(r >= 1024 for r in reads[1:])
    if provider == "anthropic" and name != "rag_repeated_document":
        writes = _writes(result)
        assert all(reads[n] == reads[n - 1] + (writes[n - 1] or 0) for n in range(1, 4))
