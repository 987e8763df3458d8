"""diff engine: review 12 findings (F1, F2, F3, F5, F7, F8, F15, F18).

Each test is a reproduction from /work/scratch/p8/review12.md, checked against the reference
(/work/shared/reference/hosted-api-rules.md): GPT-5.6's ``cache_write_tokens`` is optional
(2.4), its ``ttl`` is a minimum lifetime (2.3), ``prompt_cache_key`` steers routing (2.1), the
implicit grid is 1,024 + 128 n (2.1); ``conversation`` and ``previous_response_id`` prepend
stored items to the input (openai-python ``ResponseCreateParams``).
"""

from __future__ import annotations

import copy
from typing import Any

from promptcache.diff import diff
from tests.cases import filler

LONG = filler(1400, "review12").strip()


def _chat_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    a = {"model": "gpt-5.6", "messages": [{"role": "developer", "content": LONG},
                                          {"role": "user", "content": "hi"}]}
    b = {"model": "gpt-5.6", "messages": [*a["messages"],
                                          {"role": "assistant", "content": "hello"},
                                          {"role": "user", "content": "and moss?"}]}
    return a, b


def _chat_usage(prompt: int, read: int, write: int | None) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": read}
    if write is not None:
        details["cache_write_tokens"] = write
    return {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1,
            "prompt_tokens_details": details}


# ---------------------------------------------------------------- F2
def test_gpt56_usage_without_write_count_is_not_a_zero_write() -> None:
    """A's usage lacks ``cache_write_tokens`` (Batch / Flex, older SDKs): A's entry is
    unknown, not 0, so B's predicted read is not forced to 0 (it was "A left 0; B reads 0")."""
    a, b = _chat_pair()
    with_field = diff(a, b, usage_a=_chat_usage(1600, 0, 1590))
    without = diff(a, b, usage_a=_chat_usage(1600, 0, None))
    assert with_field.predicted is not None and without.predicted is not None
    assert with_field.predicted.cache_read > 1024
    assert without.predicted.cache_read > 1024
    assert without.ideal_cache_read is not None and without.ideal_cache_read > 1024
    # a real miss after such an A is priced at what A left, not at 0
    miss = diff(a, b, usage_a=_chat_usage(1600, 0, None), usage_b=_chat_usage(1620, 0, None))
    assert miss.lost_tokens is not None and miss.lost_tokens > 1024
    assert miss.verdict == "unexplained_miss"


def test_gpt56_observed_usage_without_write_count_reports_none() -> None:
    a, b = _chat_pair()
    res = diff(a, b, usage_b=_chat_usage(1620, 1590, None))
    assert res.observed is not None
    assert res.observed.cache_read == 1590
    assert res.observed.cache_write is None  # not reported: unknown, not "wrote nothing"


def test_pre56_usage_without_write_count_still_reads_as_zero_writes() -> None:
    a, b = _chat_pair()
    a["model"] = b["model"] = "gpt-4o"
    res = diff(a, b, usage_b=_chat_usage(1620, 1536, None))
    assert res.observed is not None and res.observed.cache_write == 0


# ---------------------------------------------------------------- F3
def test_whole_responses_response_dict_as_usage_a() -> None:
    a = {"model": "gpt-5.6", "input": [{"role": "developer", "content": LONG},
                                       {"role": "user", "content": "hi"}]}
    b = {"model": "gpt-5.6", "previous_response_id": "resp_1",
         "input": [{"role": "user", "content": "and moss?"}]}
    usage = {"input_tokens": 1400, "output_tokens": 60, "total_tokens": 1460,
             "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1390},
             "output_tokens_details": {"reasoning_tokens": 0}}
    resp = {"id": "resp_1", "object": "response", "model": "gpt-5.6",
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Water weekly."}]}],
            "usage": usage}
    whole = diff(a, b, usage_a=resp)
    split = diff(a, b, usage_a=usage, response_a=resp)
    assert whole.predicted == split.predicted
    assert whole.predicted is not None and whole.predicted.cache_read == 1390
    assert whole.cause == split.cause == "previous_response_chained"


# ---------------------------------------------------------------- F8
def test_shared_head_pre56_a_left_is_the_prompt_on_the_grid() -> None:
    """gpt-4o reports no writes: A (3,000 prompt tokens, read 1,536) left 1,024 + 15 * 128 =
    2,944 tokens, not its read; a full miss of B loses those."""
    a = {"model": "gpt-4o", "previous_response_id": "resp_1",
         "input": [{"role": "user", "content": "long question " * 600}]}
    b = {"model": "gpt-4o", "previous_response_id": "resp_2",
         "input": [{"role": "user", "content": "and moss?"}]}
    ra = {"id": "resp_2", "output": [{"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": "ok"}]}]}
    ua = {"input_tokens": 3000, "output_tokens": 1,
          "input_tokens_details": {"cached_tokens": 1536}}

    def ub(read: int) -> dict[str, Any]:
        return {"input_tokens": 3020, "output_tokens": 1,
                "input_tokens_details": {"cached_tokens": read}}

    hit = diff(a, b, usage_a=ua, usage_b=ub(2944), response_a=ra)
    assert hit.ideal_cache_read == 2944 and hit.verdict == "no_miss" and hit.lost_tokens == 0
    miss = diff(a, b, usage_a=ua, usage_b=ub(0), response_a=ra)
    assert miss.verdict == "unexplained_miss" and miss.lost_tokens == 2944


def test_shared_head_gpt56_a_left_is_read_plus_write() -> None:
    a = {"model": "gpt-5.6", "previous_response_id": "resp_1",
         "input": [{"role": "user", "content": "long question " * 600}]}
    b = {"model": "gpt-5.6", "previous_response_id": "resp_2",
         "input": [{"role": "user", "content": "and moss?"}]}
    ra = {"id": "resp_2", "output": []}
    ua = {"input_tokens": 3000, "output_tokens": 1,
          "input_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 1400}}
    res = diff(a, b, usage_a=ua, response_a=ra)
    assert res.ideal_cache_read == 2936
    # without the write count, what A left is not known
    ua2 = copy.deepcopy(ua)
    del ua2["input_tokens_details"]["cache_write_tokens"]
    assert diff(a, b, usage_a=ua2, response_a=ra).ideal_cache_read is None
