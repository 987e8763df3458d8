"""Review 16 of the tenth session's usage changes: the fast read of SDK usage objects and the
batch tier of batch result lines."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, PlainSerializer

from promptcache.usage import parse_usage
from promptcache.usage.sinks import _line_record

Doubled = Annotated[int, PlainSerializer(lambda v: v * 2)]


class _Details(BaseModel):
    model_config = ConfigDict(defer_build=True)
    cached_tokens: Doubled = 0


class _Usage(BaseModel):
    model_config = ConfigDict(defer_build=True)
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: _Details | None = None


class _Response(BaseModel):
    model_config = ConfigDict(defer_build=True)
    object: str = "chat.completion"
    model: str = "gpt-4o"
    usage: _Usage


def test_a_deferred_class_with_a_serialiser_is_read_as_model_dump_reads_it() -> None:
    # made as the SDKs make their objects (model_construct: the deferred schema is not built
    # yet); the fast read took the raw 2048 where model_dump (what the SDK sends on) says 4096
    usage = _Usage.model_construct(prompt_tokens=5000, completion_tokens=10, total_tokens=5010,
                                   prompt_tokens_details=_Details.model_construct(
                                       cached_tokens=2048))
    # parsed first: a model_dump before it would build the schema the fast read looks at
    record = parse_usage(_Response.model_construct(usage=usage), provider="openai")
    expected = usage.model_dump(warnings=False)["prompt_tokens_details"]["cached_tokens"]
    assert expected == 4096
    assert record.cache_read == expected


_MESSAGE = {"type": "message", "model": "claude-sonnet-4-5", "id": "msg_1",
            "usage": {"input_tokens": 1000, "output_tokens": 10, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 0}}
_CHAT = {"object": "chat.completion", "model": "gpt-4o",
         "usage": {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005,
                   "prompt_tokens_details": {"cached_tokens": 0}}}


def test_lines_that_are_not_official_batch_results_are_read_as_before() -> None:
    # a result without type "succeeded", a response whose status_code is null: read as the
    # response they hold (not whole, which found no usage: an error), and not the batch tier
    for line in ({"custom_id": "a", "result": {"message": _MESSAGE}},
                 {"custom_id": "b", "response": {"status_code": None, "body": _CHAT}}):
        record = _line_record(line, "log:1")
        assert record.service_tier is None
        assert record.uncached_input == 1000
    batch = _line_record({"custom_id": "a", "result": {"type": "succeeded",
                                                       "message": _MESSAGE}}, "log:1")
    assert batch.service_tier == "batch"
