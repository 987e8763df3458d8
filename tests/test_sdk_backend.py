"""wrap() against the local backend with the official clients (issue 8 acceptance).

The clients come from the pytest plugin's fixtures (``promptcache_anthropic`` ...), each test on
its own cache tenant. The backend is a real engine (seeded random Llama, fast mode) behind the
FastAPI app, so usage numbers are the backend's own accounting, and ``backend.metrics()``
counters are the ground truth the tracker must match.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from promptcache.local.testing import LocalBackend
from promptcache.sdk import PromptCacheWarning, keepalive, tracker_of, warm_then_fanout, wrap
from promptcache.usage import UsageRecord, UsageTracker

pytestmark = [pytest.mark.local, pytest.mark.slow]

A_MODEL = "claude-sonnet-4-6"
O_MODEL = "gpt-4o"
SYSTEM = ("You are the support assistant of a plant nursery. Answer briefly, cite the care "
          "sheet, and never invent a species. ") * 60  # about 1,500 tokens
_COUNTERS = ("promptcache_prompt_tokens_total", "promptcache_cache_read_tokens_total",
             "promptcache_cache_write_tokens_total", "promptcache_output_tokens_total")


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptCacheWarning)
        yield


def _counters(backend: LocalBackend) -> dict[str, float]:
    m = backend.metrics()
    return {k: m.get(k, 0.0) for k in _COUNTERS}


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {k.removeprefix("promptcache_").removesuffix("_tokens_total"): int(after[k] - before[k])
            for k in _COUNTERS}


def _totals(tracker: UsageTracker) -> dict[str, int]:
    s = tracker.summary()
    assert s.requests_unknown == 0
    return {"prompt": s.total_input, "cache_read": s.cache_read, "cache_write": s.cache_write,
            "output": s.output}


def _a(question: str, **extra: Any) -> dict[str, Any]:
    return {"model": A_MODEL, "max_tokens": 4, "system": SYSTEM,
            "messages": [{"role": "user", "content": question}], **extra}


def _o(question: str, **extra: Any) -> dict[str, Any]:
    return {"model": O_MODEL, "max_tokens": 4,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": question}], **extra}


def _counts(rec: UsageRecord) -> dict[str, Any]:
    return rec.model_dump(exclude={"start", "end", "first_token", "request_id"})


# ---------------------------------------------------------------------------- totals
def test_sync_totals_equal_backend_metrics(promptcache_backend: LocalBackend,
                                           promptcache_anthropic: anthropic.Anthropic,
                                           promptcache_openai: openai.OpenAI) -> None:
    tracker = UsageTracker()
    ac = wrap(promptcache_anthropic, tracker=tracker, auto_cache=True)
    oc = wrap(promptcache_openai, tracker=tracker)
    before = _counters(promptcache_backend)
    ac.messages.create(**_a("Fern?"))
    list(ac.messages.create(**_a("Fern?"), stream=True))
    with ac.messages.stream(**_a("Cactus?")) as stream:
        stream.get_final_message()
    oc.chat.completions.create(**_o("Fern?"))
    list(oc.chat.completions.create(**_o("Fern?"), stream=True,
                                    stream_options={"include_usage": True}))
    oc.responses.create(model=O_MODEL, instructions=SYSTEM, input="Orchid?", max_output_tokens=4)
    list(oc.responses.create(model=O_MODEL, instructions=SYSTEM, input="Orchid?",
                             max_output_tokens=4, stream=True))
    assert len(tracker.records) == 7
    assert _totals(tracker) == _delta(before, _counters(promptcache_backend))
    assert tracker.summary().cache_read > 0


async def test_async_totals_equal_backend_metrics(
        promptcache_backend: LocalBackend, promptcache_async_anthropic: anthropic.AsyncAnthropic,
        promptcache_async_openai: openai.AsyncOpenAI) -> None:
    tracker = UsageTracker()
    ac = wrap(promptcache_async_anthropic, tracker=tracker, auto_cache=True)
    oc = wrap(promptcache_async_openai, tracker=tracker, auto_cache=True)
    before = _counters(promptcache_backend)
    await ac.messages.create(**_a("Fern?"))
    async for _ in await ac.messages.create(**_a("Fern?"), stream=True):
        pass
    async with ac.messages.stream(**_a("Cactus?")) as stream:
        await stream.get_final_message()
    await oc.chat.completions.create(**_o("Fern?"))
    async for _ in await oc.chat.completions.create(**_o("Fern?"), stream=True,
                                                    stream_options={"include_usage": True}):
        pass
    await oc.responses.create(model=O_MODEL, instructions=SYSTEM, input="Orchid?",
                              max_output_tokens=4)
    assert len(tracker.records) == 6
    assert _totals(tracker) == _delta(before, _counters(promptcache_backend))
    assert tracker.summary().cache_read > 0


# ---------------------------------------------------------------------------- 5-turn chat
def test_five_turn_anthropic_chat_reads_the_earlier_prefix(
        promptcache_anthropic: anthropic.Anthropic) -> None:
    client = wrap(promptcache_anthropic, auto_cache=True, session="five-turns")
    messages: list[dict[str, Any]] = []
    for turn in range(5):
        messages.append({"role": "user", "content": f"Question {turn}: " + "why? " * 40})
        msg = client.messages.create(model=A_MODEL, max_tokens=4, system=SYSTEM,
                                     messages=messages)
        messages.append({"role": "assistant", "content": msg.content})
    recs = tracker_of(client).records
    assert recs[0].cache_read == 0 and (recs[0].cache_write or 0) > 0
    for prev, cur in itertools.pairwise(recs):
        assert prev.total_input is not None and cur.cache_read is not None
        assert cur.cache_read >= 0.9 * prev.total_input, (prev, cur)


def test_five_turn_openai_chat_reads_the_earlier_prefix(promptcache_openai: openai.OpenAI
                                                        ) -> None:
    client = wrap(promptcache_openai, auto_cache=True, session="five-turns")
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(5):
        messages.append({"role": "user", "content": f"Question {turn}: " + "why? " * 40})
        resp = client.chat.completions.create(model=O_MODEL, max_tokens=4, messages=messages)
        messages.append({"role": "assistant", "content": resp.choices[0].message.content})
    recs = tracker_of(client).records
    for prev, cur in itertools.pairwise(recs):
        assert prev.total_input is not None and cur.cache_read is not None
        assert cur.cache_read >= 0.9 * prev.total_input, (prev, cur)


# ---------------------------------------------------------------------------- stream == not
def test_streamed_and_non_streamed_give_identical_records(
        promptcache_anthropic: anthropic.Anthropic, promptcache_openai: openai.OpenAI) -> None:
    ac = wrap(promptcache_anthropic, lint="off")
    req = _a("Fern?", system=[{"type": "text", "text": SYSTEM,
                                "cache_control": {"type": "ephemeral"}}])
    ac.messages.create(**req)  # writes the prefix; the calls below all read it
    ac.messages.create(**req)
    list(ac.messages.create(**req, stream=True))
    with ac.messages.stream(**req) as stream:
        stream.get_final_message()
    _, plain, raw_stream, managed = tracker_of(ac).records
    assert (plain.cache_read or 0) > 0
    assert _counts(plain) == _counts(raw_stream) == _counts(managed)

    oc = wrap(promptcache_openai, lint="off")
    oc.chat.completions.create(**_o("Fern?"))
    oc.chat.completions.create(**_o("Fern?"))
    list(oc.chat.completions.create(**_o("Fern?"), stream=True,
                                    stream_options={"include_usage": True}))
    _, o_plain, o_stream = tracker_of(oc).records
    assert (o_plain.cache_read or 0) > 0
    assert _counts(o_plain) == _counts(o_stream)


# ---------------------------------------------------------------------------- fan-out
def test_warm_then_fanout_turns_writes_into_reads(promptcache_anthropic: anthropic.Anthropic
                                                  ) -> None:
    client = wrap(promptcache_anthropic, auto_cache=True, lint="off")
    calls = [lambda i=i: client.messages.create(**_a(f"Plant number {i}?"), stream=(i == 0))
             for i in range(4)]
    results = warm_then_fanout(calls)
    list(results[0])
    recs = tracker_of(client).records
    assert len(recs) == 4
    writes = [r for r in recs if (r.cache_read or 0) == 0]
    assert len(writes) == 1  # only the warm-up wrote the shared prefix
    assert all((r.cache_read or 0) >= 1000 for r in recs if r not in writes)


# ---------------------------------------------------------------------------- keepalive
def test_keepalive_keeps_a_5m_entry_alive(promptcache_backend: LocalBackend,
                                          promptcache_anthropic: anthropic.Anthropic) -> None:
    client = wrap(promptcache_anthropic, auto_cache=True, lint="off")
    req = _a("Fern?")
    client.messages.create(**req)
    clock: Any = promptcache_backend.clock
    handle = keepalive(client, req, every=240, max_pings=3, max_usd="1", sleep=clock.advance,
                       start=False)
    handle.run()  # 3 pings, 240 s apart, then one more wait: 960 s in all
    assert handle.stopped == "max_pings" and handle.pings == 3
    assert all((r.cache_read or 0) > 0 for r in handle.records)  # each ping read the entry
    assert handle.spent_usd is not None and handle.spent_usd > 0
    client.messages.create(**req)
    last = tracker_of(client).records[-1]
    assert (last.cache_read or 0) > 1000  # still cached after 16 minutes of a 5-minute TTL
    assert [r.label for r in tracker_of(client).records].count("keepalive") == 3


def test_without_keepalive_the_entry_expires(promptcache_backend: LocalBackend,
                                             promptcache_anthropic: anthropic.Anthropic) -> None:
    client = wrap(promptcache_anthropic, auto_cache=True, lint="off")
    req = _a("Cactus?")
    client.messages.create(**req)
    clock: Any = promptcache_backend.clock
    clock.advance(301)
    client.messages.create(**req)
    assert tracker_of(client).records[-1].cache_read == 0


# ---------------------------------------------------------------------------- faults
def test_faults_never_change_what_the_backend_returns(
        promptcache_anthropic: anthropic.Anthropic, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from promptcache.usage import JsonlSink

    broken = tmp_path / "prices.toml"
    broken.write_text(f'[models."{A_MODEL}"]\ninput = "free"\n')  # not a number
    monkeypatch.setenv("PROMPTCACHE_PRICES", str(broken))
    tracker = UsageTracker(sinks=[JsonlSink("/dev/full")])
    client = wrap(promptcache_anthropic, tracker=tracker)  # the request goes out as given
    req = _a("Fern?", system=[{"type": "text", "text": SYSTEM,
                                "cache_control": {"type": "ephemeral"}}])
    promptcache_anthropic.messages.create(**req)  # warm, so both calls below read alike
    plain = promptcache_anthropic.messages.create(**req)
    with caplog.at_level("WARNING", logger="promptcache"):
        wrapped = client.messages.create(**req)
    assert type(wrapped) is type(plain)
    assert wrapped.usage == plain.usage  # (the text is sampled, so it may differ)
    assert (wrapped.model, wrapped.stop_reason) == (plain.model, plain.stop_reason)
    assert "No space left on device" in caplog.text
    assert f"no prices for model '{A_MODEL}'" in caplog.text
    [rec] = tracker.records
    assert rec.cache_read == plain.usage.cache_read_input_tokens


# ---------------------------------------------------------------------------- SDK helpers
def test_sync_helpers_equal_backend_metrics(promptcache_backend: LocalBackend,
                                            promptcache_anthropic: anthropic.Anthropic,
                                            promptcache_openai: openai.OpenAI) -> None:
    tracker = UsageTracker()
    ac = wrap(promptcache_anthropic, tracker=tracker, auto_cache=True)
    oc = wrap(promptcache_openai, tracker=tracker)
    before = _counters(promptcache_backend)
    ac.messages.parse(**_a("Fern?"))
    ac.messages.parse(**_a("Fern?"))
    # max_tokens=4: the SDK refuses a completion cut by max_tokens (it was billed: recorded)
    with contextlib.suppress(openai.LengthFinishReasonError):
        oc.chat.completions.parse(**_o("Fern?"))
    with oc.chat.completions.stream(**_o("Fern?"),
                                    stream_options={"include_usage": True}) as stream:
        with contextlib.suppress(openai.LengthFinishReasonError):
            stream.get_final_completion()  # (recorded before it raises)
    with oc.chat.completions.stream(**_o("Fern?"),
                                    stream_options={"include_usage": True}) as stream:
        for _ in stream:
            pass
    oc.responses.parse(model=O_MODEL, instructions=SYSTEM, input="Orchid?", max_output_tokens=4)
    with oc.responses.stream(model=O_MODEL, instructions=SYSTEM, input="Orchid?",
                             max_output_tokens=4) as rstream:
        rstream.until_done()  # (max_output_tokens=4: response.incomplete, no final response)
    assert len(tracker.records) == 7
    assert _totals(tracker) == _delta(before, _counters(promptcache_backend))
    # each provider template's first call writes its prefix, the later ones read it
    assert [(r.cache_read or 0) > 0 for r in tracker.records] == [
        False, True, False, True, True, False, True]


async def test_async_helpers_equal_backend_metrics(
        promptcache_backend: LocalBackend, promptcache_async_anthropic: anthropic.AsyncAnthropic,
        promptcache_async_openai: openai.AsyncOpenAI) -> None:
    tracker = UsageTracker()
    ac = wrap(promptcache_async_anthropic, tracker=tracker, auto_cache=True)
    oc = wrap(promptcache_async_openai, tracker=tracker, auto_cache=True)
    before = _counters(promptcache_backend)
    await ac.messages.parse(**_a("Fern?"))
    await ac.messages.parse(**_a("Fern?"))
    with contextlib.suppress(openai.LengthFinishReasonError):
        await oc.chat.completions.parse(**_o("Fern?"))
    async with oc.chat.completions.stream(**_o("Fern?"),
                                          stream_options={"include_usage": True}) as stream:
        with contextlib.suppress(openai.LengthFinishReasonError):
            await stream.get_final_completion()  # (recorded before it raises)
    await oc.responses.parse(model=O_MODEL, instructions=SYSTEM, input="Orchid?",
                             max_output_tokens=4)
    async with oc.responses.stream(model=O_MODEL, instructions=SYSTEM, input="Orchid?",
                                   max_output_tokens=4) as rstream:
        async for _ in rstream:
            pass
    assert len(tracker.records) == 6
    assert _totals(tracker) == _delta(before, _counters(promptcache_backend))
    assert [(r.cache_read or 0) > 0 for r in tracker.records] == [
        False, True, False, True, False, True]


def test_helper_streams_match_create_and_record_early_exits_once(
        promptcache_backend: LocalBackend, promptcache_openai: openai.OpenAI) -> None:
    oc = wrap(promptcache_openai, lint="off")
    oc.chat.completions.create(**_o("Fern?"))  # writes the prefix; the calls below read it
    plain = oc.chat.completions.create(**_o("Fern?"))
    with oc.chat.completions.stream(**_o("Fern?"),
                                    stream_options={"include_usage": True}) as stream:
        with contextlib.suppress(openai.LengthFinishReasonError):
            stream.get_final_completion()  # (recorded before it raises)
    for _ in range(2):  # the Responses template differs from chat's: warm its prefix too
        r_plain = oc.responses.create(model=O_MODEL, instructions=SYSTEM, input="Fern?",
                                      max_output_tokens=4)
    with oc.responses.stream(model=O_MODEL, instructions=SYSTEM, input="Fern?",
                             max_output_tokens=4) as rstream:
        rstream.until_done()  # (max_output_tokens=4: response.incomplete, no final response)
    _, c_plain, c_stream, _, r_rec, r_stream = tracker_of(oc).records
    assert c_plain.cache_read == plain.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    assert (c_stream.cache_read, c_stream.total_input) == (c_plain.cache_read, c_plain.total_input)
    assert r_rec.cache_read == r_plain.usage.input_tokens_details.cached_tokens  # type: ignore[union-attr]
    assert (r_stream.cache_read, r_stream.total_input) == (r_rec.cache_read, r_rec.total_input)
    # early exits: one record each, the moment the stream is left
    with oc.chat.completions.stream(**_o("Fern?"),
                                    stream_options={"include_usage": True}) as stream:
        for _ in stream:
            break
    with oc.responses.stream(model=O_MODEL, instructions=SYSTEM, input="Fern?",
                             max_output_tokens=4):
        pass
    assert len(tracker_of(oc).records) == 8
    assert all("stream_usage_missing" in r.flags for r in tracker_of(oc).records[6:])


@pytest.mark.parametrize("stream", [False, True])
def test_live_diff_is_calibrated_to_the_previous_requests_usage(
        promptcache_anthropic: anthropic.Anthropic, caplog: pytest.LogCaptureFixture,
        stream: bool) -> None:
    """The live diff of a request that breaks its session's prefix counts the lost tokens as
    the previous request's reported write, not the estimate (new-user trial 10, 6a: the log
    said 1767 under a reported 1,854)."""
    import logging

    client = wrap(promptcache_anthropic, tracker=UsageTracker(), auto_cache=True, lint="off",
                  session=f"calibrated-{stream}")
    first = _a("Fern?")
    first["system"] = f"Build {stream} 1. " + SYSTEM
    if stream:
        with client.messages.stream(**first) as s:
            s.get_final_message()
    else:
        client.messages.create(**first)
    wrote = tracker_of(client).records[-1].cache_write
    assert wrote and wrote > 1000
    second = dict(first, system=f"Build {stream} 2. " + SYSTEM)  # the prefix breaks at once
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(**second)
    [log] = [r.getMessage() for r in caplog.records if "diverges" in r.getMessage()]
    assert f"{wrote} cached tokens lost" in log, (wrote, log)


def test_assert_cache_stable_passes_a_stable_wrapped_chat_and_fails_a_broken_one(
        promptcache_anthropic: anthropic.Anthropic) -> None:
    """New-user trial 11: with auto_cache the first request's system prompt went out as a marked
    block and the next ones as the caller's string; the helper called that a system change
    (1,803 tokens lost) while the backend read the whole prefix. A string and one text block
    with the same text are the same cached content, and the observed reads settle the rest."""
    from promptcache.sdk import assert_cache_stable, sent_requests

    client = wrap(promptcache_anthropic, tracker=UsageTracker(), auto_cache=True, lint="off",
                  session="stable")
    for q in ("q0", "q1", "q2"):
        client.messages.create(**_a(q))
    shapes = [type(r.payload["system"]).__name__ for r in sent_requests(client)]
    assert shapes[0] == "list" and "str" in shapes  # the representations do alternate
    assert all(r.usage is not None for r in sent_requests(client))
    assert_cache_stable(client)
    broken = wrap(promptcache_anthropic, tracker=UsageTracker(), auto_cache=True, lint="off",
                  session="broken")
    broken.messages.create(**_a("q0"))
    broken.messages.create(**dict(_a("q1"), system="Today is 2026-11-30. " + SYSTEM))
    with pytest.raises(AssertionError, match="system"):
        assert_cache_stable(broken)


def test_assert_cache_stable_reads_log_records_and_refuses_what_it_cannot_read() -> None:
    """New-user trial 11: records shaped {"request": body} passed without any check."""
    from promptcache import InvalidRequestError
    from promptcache.sdk import assert_cache_stable

    a = {"model": A_MODEL, "max_tokens": 4,
         "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
         "messages": [{"role": "user", "content": "q0"}]}
    b = dict(a, system=[{"type": "text", "text": "CHANGED " + SYSTEM,
                         "cache_control": {"type": "ephemeral"}}])
    for wrap_as in ("request", "body"):
        with pytest.raises(AssertionError, match="system"):
            assert_cache_stable([{wrap_as: a, "usage": {}}, {wrap_as: b, "usage": {}}])
    with pytest.raises(InvalidRequestError, match="no request"):
        assert_cache_stable([{"nonsense": 1}, {"nonsense": 2}])
    # a string system and one text block with the same text are the same cached content (the
    # breakpoint moves to the new turn: a request without one reads nothing, trial 14)
    same = dict(a, system=SYSTEM, messages=a["messages"] + [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "q1",
                                      "cache_control": {"type": "ephemeral"}}]}])
    assert_cache_stable([a, same])
