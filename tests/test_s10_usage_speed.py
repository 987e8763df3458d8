"""The usage record's fast paths give what the general paths give.

parse_usage reads a plain SDK usage object from its fields (no model_dump) and maps a usage
dict of a shape it has seen without recording its lookups; price_record builds its Cost without
the dataclass constructor. Each is compared with the general path on the same input: the
response as a dict (model_dump'ed), a usage object with extra fields, values of unexpected
types, and a dataclass-built Cost.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from anthropic._models import construct_type as a_construct  # noqa: E402
from openai._models import construct_type as o_construct  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402
from openai.types.responses import Response  # noqa: E402

from promptcache._errors import InvalidRequestError  # noqa: E402
from promptcache.usage import UsageRecord, UsageTracker, parse_usage  # noqa: E402
from promptcache.usage.billing import Cost, explicit_prices, price_record  # noqa: E402
from promptcache.usage.parse import _plain  # noqa: E402

FIELDS: dict[str, Any] = {
    "label": "chat", "session": "s1", "start": 1796061678.5, "end": 1796061679.25,
    "prefix_hash": "ab" * 16, "kept_prefix": True, "breakpoint_hashes": ("a" * 32, "b" * 32),
    "breakpoint_tokens": (1000, 2000), "request_id": "req_1",
}


def _message(usage: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage, **top}


def _chat(usage: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": "hi"}}],
            "usage": usage, **top}


def _response(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "gpt-5.6",
            "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "status": "completed", "usage": usage}


A_USAGES: list[dict[str, Any]] = [
    {"input_tokens": 28, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
     "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
     "output_tokens": 4, "service_tier": "standard"},
    {"input_tokens": 10, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 5000,
     "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
     "output_tokens": 40, "service_tier": "batch", "inference_geo": "us"},
    {"input_tokens": 10, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0,
     "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 7},
     "output_tokens": 1},  # a split that does not add up
    # extra (undeclared) fields: an unknown cache count, nested and at the top
    {"input_tokens": 10, "cache_read_input_tokens": 0, "output_tokens": 1, "cache_hits": 99},
    {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 0,
     "cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 0,
                        "ephemeral_24h_input_tokens": 44}, "output_tokens": 1},
    # declared fields holding cache counts the mapper does not read, and unexpected types
    {"input_tokens": 10, "cache_read_input_tokens": 0, "output_tokens": 1,
     "server_tool_use": {"web_search_requests": 1}},
    {"input_tokens": None, "cache_read_input_tokens": 7, "output_tokens": 1},
    {"input_tokens": "12", "output_tokens": 1},
    {"input_tokens": 3.0, "output_tokens": 1},
    {"input_tokens": 2.5, "output_tokens": 1},
    {"input_tokens": True, "output_tokens": 1},
    {"input_tokens": 10**9 + 1, "output_tokens": 1},
    {"input_tokens": -1, "output_tokens": 1},
    {"input_tokens": 10, "output_tokens": 1, "cache_creation": 5},
    {"input_tokens": 10, "output_tokens": 1, "service_tier": 3},
]

O_USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": 28, "completion_tokens": 4, "total_tokens": 32,
     "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
     "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}},
    {"prompt_tokens": 3000, "completion_tokens": 4, "total_tokens": 3004,
     "prompt_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 512}},
    {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104,
     "prompt_tokens_details": {"cached_tokens": 5000}},  # parts over the total: clamped
    {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104,
     "prompt_tokens_details": {"cached_tokens": 0, "cache_hits": 28}},  # extra nested field
    {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104,
     "prompt_tokens_details": {"cached_tokens": 10}, "cache_read_input_tokens": 10},
    {"prompt_tokens": 100, "completion_tokens": 4, "prompt_tokens_details": None},
    {"prompt_tokens": 100, "completion_tokens": 4, "prompt_tokens_details": 7},
    {"prompt_tokens": [1], "completion_tokens": 4},
]

R_USAGES: list[dict[str, Any]] = [
    {"input_tokens": 3000, "output_tokens": 20, "total_tokens": 3020,
     "input_tokens_details": {"cached_tokens": 2048},
     "output_tokens_details": {"reasoning_tokens": 5}},
    {"input_tokens": 3000, "output_tokens": 20, "total_tokens": 3020,
     "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2000,
                              "cache_write_tokens_details": {"ttl_30m_tokens": 0,
                                                             "ttl_12h_tokens": 2000}},
     "output_tokens_details": {"reasoning_tokens": 0}},
]


def _outcome(obj: Any, provider: str | None) -> Any:
    try:
        rec = parse_usage(obj, provider=provider, **FIELDS)
    except (InvalidRequestError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return rec.__getstate__()


def _cases() -> list[tuple[str, Any, str]]:
    out: list[tuple[str, Any, str]] = []
    for usage in A_USAGES:
        out.append(("anthropic", a_construct(type_=anthropic.types.Message,
                                             value=_message(json.loads(json.dumps(usage)))),
                    "anthropic"))
    for usage in O_USAGES:
        for tier in ({}, {"service_tier": "flex"}):
            out.append(("openai", o_construct(type_=ChatCompletion,
                                              value=_chat(json.loads(json.dumps(usage)), **tier)),
                        "openai"))
    for usage in R_USAGES:
        out.append(("openai-responses", o_construct(type_=Response, value=_response(usage)),
                    "openai-responses"))
    return out


@pytest.mark.parametrize("provider_arg", ["given", None])
def test_sdk_objects_parse_as_their_dumped_dicts(provider_arg: str | None) -> None:
    """Every SDK object (plain, with extra fields, with values of unexpected types) gives the
    record (or the error) its model_dump'ed dict gives, twice in a row (the second time the
    shape of its usage is known)."""
    for _, obj, provider in _cases():
        prov = provider if provider_arg else None
        as_dict = obj.model_dump(warnings=False)
        for _ in range(2):
            assert _outcome(obj, prov) == _outcome(as_dict, prov), as_dict["usage"]


def test_the_plain_read_is_model_dump_or_nothing() -> None:
    """_plain gives exactly model_dump's dict, or None where it cannot be sure (extra fields,
    values that are not an exact int or str)."""
    plain = unsure = 0
    for _fmt, obj, _provider in _cases():
        got = _plain(obj.usage)
        if got is None:
            unsure += 1
            continue
        plain += 1
        assert got[0] == obj.usage.model_dump(warnings=False)
        assert list(got[0]) == list(obj.usage.model_dump(warnings=False))
    assert plain and unsure


def test_a_known_shape_still_flags_unread_cache_counts() -> None:
    """The unread cache fields of a shape are listed once; later objects of that shape are
    flagged by their own values (a zero or a copy of a mapped count is not flagged)."""
    def flags(cached: int, write: int | None) -> tuple[str, ...]:
        details: dict[str, Any] = {"cached_tokens": cached, "audio_tokens": 0}
        details["cache_write_tokens"] = write
        obj = o_construct(type_=ChatCompletion, value=_chat(
            {"prompt_tokens": 5000, "completion_tokens": 1, "prompt_tokens_details": details}))
        return parse_usage(obj, provider="openai").flags

    assert flags(100, None) == ()
    assert flags(100, 7) == ()
    # Anthropic: a declared nested model with a cache count the mapper does not read
    for extra in ({}, {"ephemeral_24h_input_tokens": 0}, {"ephemeral_24h_input_tokens": 44}):
        usage = {"input_tokens": 10, "cache_creation_input_tokens": 5,
                 "cache_read_input_tokens": 0, "output_tokens": 1,
                 "cache_creation": {"ephemeral_5m_input_tokens": 5,
                                    "ephemeral_1h_input_tokens": 0, **extra}}
        msg: Any = a_construct(type_=anthropic.types.Message, value=_message(usage))
        expected = parse_usage(msg.model_dump(), provider="anthropic").flags
        assert parse_usage(msg, provider="anthropic").flags == expected
    assert expected == ("unknown_cache_field:cache_creation.ephemeral_24h_input_tokens",)


def test_price_record_cost_is_the_dataclass() -> None:
    """price_record's Cost is the one the dataclass constructor makes: same fields, in order."""
    prices = explicit_prices(input=3, output=15, cache_read=0.3, cache_write_5m=3.75,
                             cache_write_1h=6)
    rec = UsageRecord(provider="anthropic", model="claude-sonnet-4-6", uncached_input=10,
                      cache_read=5000, cache_write=3000, cache_write_5m=1000,
                      cache_write_1h=2000, output=40)
    cost = price_record(rec, prices)
    names = [f.name for f in dataclasses.fields(Cost)]
    assert list(vars(cost)) == names
    built = Cost(**{name: getattr(cost, name) for name in names})
    assert cost == built and hash(cost) == hash(built) and repr(cost) == repr(built)
    assert cost.input is not None and cost.output is not None
    assert cost.total == cost.input + cost.output
    with pytest.raises(dataclasses.FrozenInstanceError):
        cost.batch = True  # type: ignore[misc]


def test_tracker_per_model_lookups_match_a_fresh_tracker() -> None:
    """A tracker that has seen a model prices and checks its next record as a new tracker
    does (the policy, tier rules, undated prices and TTL are kept per model)."""
    recs = [UsageRecord(provider="anthropic", model=model, uncached_input=10, cache_read=read,
                        cache_write=0, output=1, session="s", start=1796061678.0 + i)
            for i, (model, read) in enumerate([("claude-sonnet-4-6", 0),
                                               ("claude-sonnet-4-6", 500),
                                               ("gpt-4o", 0), ("my-private-model", 0)])]
    seen = UsageTracker(warn=False)
    for rec in recs:
        seen.add(rec)
    for rec in recs:
        fresh = UsageTracker(warn=False)
        assert seen.cost_of(rec) == fresh.cost_of(rec)
        old: Any = seen.prices_for(rec)
        new: Any = fresh.prices_for(rec)
        # "at": when the day's prices were first looked up (as before these caches)
        assert (old is None) == (new is None)
        if old is not None:
            assert old.model_dump(exclude={"at"}) == new.model_dump(exclude={"at"})
        assert seen._ttl_for(rec) == fresh._ttl_for(rec)
        assert seen._is_cacheable(rec) == fresh._is_cacheable(rec)


def test_a_usage_class_with_a_serialiser_is_dumped() -> None:
    """A usage model whose dump differs from its fields (a field serialiser, an excluded
    field) is read through model_dump, so the record is the one its dump gives."""
    from typing import Annotated

    from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

    class Doubled(BaseModel):
        model_config = ConfigDict(extra="allow")
        input_tokens: Annotated[int, PlainSerializer(lambda v: v * 2)] = 0
        output_tokens: int = 0

    class Hidden(BaseModel):
        input_tokens: int = 0
        output_tokens: int = 0
        cache_read_input_tokens: int = Field(default=0, exclude=True)

    class Response(BaseModel):
        type: str = "message"
        usage: Any = None

    for usage in (Doubled(input_tokens=5, output_tokens=1),
                  Hidden(input_tokens=5, output_tokens=1, cache_read_input_tokens=7)):
        assert _plain(usage) is None
        obj = Response(usage=usage)
        assert _outcome(obj, "anthropic") == _outcome(
            {"type": "message", "usage": usage.model_dump()}, "anthropic")
