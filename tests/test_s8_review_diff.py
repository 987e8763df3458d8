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


# ---------------------------------------------------------------- F15
def _mode_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """gpt-5.6: a developer text with an explicit breakpoint, then a long user message (A's
    implicit breakpoint writes the entry up to it); B is the same body."""
    a = {"model": "gpt-5.6", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": LONG,
                                           "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": filler(300, "user").strip()}]}
    return a, copy.deepcopy(a)


def test_gpt56_mode_switch_to_explicit_is_a_cause() -> None:
    """B switches to mode 'explicit': its implicit breakpoint is gone, so it reads only the
    developer entry. It was "no miss" beside "lost 214 tokens" with no cause."""
    a, b = _mode_pair()
    b["prompt_cache_options"] = {"mode": "explicit"}
    res = diff(a, b)
    assert res.verdict == "miss_explained"
    assert res.cause == "cache_mode_changed"
    cause = res.causes[0]
    assert cause.detail["from"] == "implicit" and cause.detail["to"] == "explicit"
    # B writes nothing after its explicit breakpoint: the tokens are not read, not rewritten
    assert cause.detail["lost_tokens_are"] == "not read"
    assert res.predicted is not None and res.predicted.cache_write == 0
    assert res.lost_tokens is not None and res.ideal_cache_read is not None
    assert res.lost_tokens == res.ideal_cache_read - res.predicted.cache_read > 200


def test_gpt56_dropped_marker_in_explicit_mode_is_breakpoint_moved() -> None:
    """Both in explicit mode, A marks the user turn, B drops that marker: B's breakpoints no
    longer reach A's newest entry."""
    a, b = _mode_pair()
    a["prompt_cache_options"] = b["prompt_cache_options"] = {"mode": "explicit"}
    a["input"][1] = {"role": "user", "content": [{
        "type": "input_text", "text": filler(300, "user").strip(),
        "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    b["input"][1] = {"role": "user", "content": [{
        "type": "input_text", "text": filler(300, "user").strip()}]}
    res = diff(a, b)
    assert res.verdict == "miss_explained" and res.cause == "breakpoint_moved"
    assert res.lost_tokens is not None and res.lost_tokens > 200


def test_gpt56_same_breakpoints_no_reach_cause() -> None:
    a, b = _mode_pair()
    res = diff(a, b)
    assert res.verdict == "no_miss"
    assert not {"breakpoint_moved", "cache_mode_changed"} & {c.code for c in res.causes}


# ---------------------------------------------------------------- F7
def _ttl_pair() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    a = {"model": "gpt-5.6", "input": [{"role": "developer", "content": LONG},
                                       {"role": "user", "content": "hi"}]}
    b = {"model": "gpt-5.6", "input": [*a["input"], {"role": "assistant", "content": "hello"},
                                       {"role": "user", "content": "and moss?"}]}
    ua = {"input_tokens": 1420, "output_tokens": 1,
          "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1410}}
    return a, b, ua


def _responses_usage(prompt: int, read: int, write: int) -> dict[str, Any]:
    return {"input_tokens": prompt, "output_tokens": 1,
            "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write}}


def test_gpt56_gap_over_minimum_ttl_is_a_warning_not_a_miss() -> None:
    """GPT-5.6's ttl '30m' is a minimum lifetime: 40 minutes later a read is possible."""
    a, b, ua = _ttl_pair()
    res = diff(a, b, timestamps=(0, 40 * 60), usage_a=ua)
    assert res.verdict == "no_miss"
    assert res.cause != "ttl_expired"
    ttl = next(c for c in res.causes if c.code == "ttl_expired")
    assert ttl.detail["level"] == "warning"
    assert res.predicted is not None and res.predicted.cache_read == 1410
    assert res.predicted.read_upper_bound
    assert res.lost_tokens == 0


def test_gpt56_gap_over_minimum_ttl_full_read_is_not_blamed_on_ttl() -> None:
    a, b, ua = _ttl_pair()
    res = diff(a, b, timestamps=(0, 40 * 60), usage_a=ua,
               usage_b=_responses_usage(1440, 1410, 20))
    assert res.verdict == "no_miss" and res.cause == "append_only"


def test_gpt56_gap_over_minimum_ttl_primary_when_read_falls_short() -> None:
    a, b, ua = _ttl_pair()
    res = diff(a, b, timestamps=(0, 40 * 60), usage_a=ua,
               usage_b=_responses_usage(1440, 0, 1430))
    assert res.verdict == "miss_explained" and res.cause == "ttl_expired"
    assert res.classification == "timing" and res.lost_tokens == 1410


def test_gpt56_gap_within_ttl_no_warning() -> None:
    a, b, ua = _ttl_pair()
    res = diff(a, b, timestamps=(0, 20 * 60), usage_a=ua)
    assert "ttl_expired" not in {c.code for c in res.causes}
    assert res.predicted is not None and not res.predicted.read_upper_bound


# ---------------------------------------------------------------- F5
def test_prompt_cache_key_change_is_uncertain_both_ways() -> None:
    a, b, ua = _ttl_pair()
    a["prompt_cache_key"], b["prompt_cache_key"] = "k1", "k2"
    res = diff(a, b, usage_a=ua)
    assert res.verdict == "no_miss"
    key = next(c for c in res.causes if c.code == "prompt_cache_key_changed")
    assert "likely but not certain" not in key.title and "hit is likely" not in key.title
    assert "uncertain" in key.title and "miss is likely" in key.title
    assert res.predicted is not None and res.predicted.read_upper_bound
    assert any("upper bound" in n for n in res.notes)
    # the observed read falls short: the key change is the primary cause
    short = diff(a, b, usage_a=ua, usage_b=_responses_usage(1440, 0, 1430))
    assert short.verdict == "miss_explained" and short.cause == "prompt_cache_key_changed"


# ---------------------------------------------------------------- F1
def _conv_pair(model: str = "gpt-5.6") -> tuple[dict[str, Any], dict[str, Any]]:
    a = {"model": model, "instructions": LONG, "conversation": "conv_abc",
         "input": [{"role": "user", "content": "How do I water a fern?"}]}
    b = {"model": model, "instructions": LONG, "conversation": "conv_abc",
         "input": [{"role": "user", "content": "And a cactus?"}]}
    return a, b


def test_conversation_turn_cannot_tell() -> None:
    """The server prepends the conversation's items: not a history edit (it was
    message_rewritten with 1,448 lost tokens on gpt-5.6)."""
    for model in ("gpt-4o", "gpt-5.6"):
        a, b = _conv_pair(model)
        res = diff(a, b)
        assert res.verdict == "cannot_tell", model
        assert res.cause == "conversation_chained"
        assert res.causes[0].detail == {"conversation": "conv_abc"}
        assert res.predicted is None and res.lost_tokens is None


def test_conversation_object_form_and_compare() -> None:
    from promptcache.diff import compare, prepare

    a, b = _conv_pair()
    b["conversation"] = {"id": "conv_abc"}
    assert diff(a, b).cause == "conversation_chained"
    res = compare(prepare(a), prepare(b))
    assert res.verdict == "cannot_tell" and res.cause == "conversation_chained"


def test_conversation_keeps_invalidating_changes_as_secondary() -> None:
    a, b = _conv_pair()
    b["model"] = "gpt-5.6-mini"
    b["tools"] = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    res = diff(a, b, model=None)
    codes = [c.code for c in res.causes]
    assert codes[0] == "conversation_chained"
    assert "model_changed" in codes and "tools_changed" in codes


def test_conversation_turns_pass_assert_cache_stable() -> None:
    from promptcache import assert_cache_stable

    a, b = _conv_pair()
    assert_cache_stable([a, b], provider="openai-responses")


def test_conversation_exported_helper() -> None:
    from promptcache.diff._engine import conversation_id

    a, _ = _conv_pair()
    assert conversation_id(a) == "conv_abc"
    assert conversation_id({**a, "conversation": None}) is None
    assert conversation_id({"model": "gpt-4o", "messages": [], "conversation": "c"}) is None
    assert conversation_id(a, "anthropic") is None


# ---------------------------------------------------------------- F18
def _siblings(question_b: str) -> tuple[dict[str, Any], dict[str, Any]]:
    tools = [{"type": "function", "name": "f", "description": "d",
              "parameters": {"type": "object", "properties": {}}}]
    a = {"model": "gpt-5.6", "tools": tools, "previous_response_id": "resp_X",
         "input": [{"role": "user", "content": "How do I water a fern?"}]}
    b = {"model": "gpt-5.6", "tools": tools, "previous_response_id": "resp_X",
         "input": [{"role": "user", "content": question_b}]}
    return a, b


def test_siblings_edited_turn_is_a_rewrite_not_a_continuation() -> None:
    """A and B both continue resp_X: B's edited question rewrites A's last input (it was
    "no miss" as if B continued A)."""
    a, b = _siblings("How do I water a cactus?")
    ua = _responses_usage(3000, 2980, 18)
    res = diff(a, b, usage_a=ua, usage_b=_responses_usage(3000, 2980, 18))
    assert res.verdict == "miss_explained" and res.cause == "message_rewritten"
    assert res.predicted is None
    assert res.ideal_cache_read == 2998 and res.lost_tokens == 18
    head = next(c for c in res.causes if c.code == "previous_response_chained")
    assert head.detail["relation"] == "sibling"
    assert any("siblings" in n for n in res.notes)
    assert not any("A's prompt + A's output" in n for n in res.notes)


def test_siblings_given_a_response_id_are_still_compared() -> None:
    """A's response id (not resp_X) is known: B is still A's sibling, not 'cannot tell'."""
    a, b = _siblings("How do I water a fern?")
    res = diff(a, b, response_a={"id": "resp_A", "output": []})
    assert res.verdict == "no_miss" and res.cause == "previous_response_chained"


def test_diff_cli_words_an_upper_bound_and_tokens_not_read(tmp_path: Any) -> None:
    """The CLI said "B reads 1,480" for a key change (an upper bound since review 12) and
    "214 tokens rewritten" for tokens B does not read but does not rewrite either."""
    import json

    from click.testing import CliRunner

    from promptcache.cli import main

    a, b = _mode_pair()
    b["prompt_cache_options"] = {"mode": "explicit"}
    key_a = {**a, "prompt_cache_key": "conv-1"}
    key_b = {**a, "prompt_cache_key": "conv-2"}
    paths = {}
    for name, body in (("a", a), ("b", b), ("ka", key_a), ("kb", key_b)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(body))
    mode = CliRunner().invoke(main, ["diff", str(paths["a"]), str(paths["b"])]).output
    assert "not read (billed as uncached input)" in mode and "rewritten" not in mode.split(
        "lost", 1)[1].splitlines()[0]
    key = CliRunner().invoke(main, ["diff", str(paths["ka"]), str(paths["kb"])]).output
    assert "B reads up to " in key
