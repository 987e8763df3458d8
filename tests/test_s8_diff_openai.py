"""diff / explain on OpenAI GPT-5.6+ and Responses chains, checked against the local backend.

New-user trial 12, findings 3, 4, 8 and 9:

* GPT-5.6+ (catalog ``explicit_breakpoints``) caches at breakpoints, not on the 1,024 + 128k
  grid (hosted-api-rules.md 2.3): "A left" is the breakpoint prefix, and B never reads more
  than A left.
* ``previous_response_id``: the server prepends the stored conversation to B's input, so a
  chained B continues A (no "history edit", no "0 reads"); a chain that cannot be resolved
  is "cannot tell".
* ``prompt_cache_key`` is a routing hint (2.1): a key change alone is a warning, not a
  certain full miss; the local backend reads across keys.

Each scenario sends real requests to an in-process :class:`LocalBackend` and compares the
diff's numbers with the usage the backend reports.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("promptcache.local.testing")

from promptcache.diff import diff, explain
from promptcache.diff._engine import read_tolerance
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from tests.cases import filler


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _responses_a(salt: str) -> dict[str, Any]:
    """respA of the trial: gpt-5.6, a ~1.4k-token developer message with an explicit
    breakpoint, one tool and one user turn."""
    return {
        "model": "gpt-5.6", "prompt_cache_key": "conv-1",
        "tools": [{"type": "function", "name": "lookup", "description": "Look up a plant",
                   "parameters": {"type": "object",
                                  "properties": {"name": {"type": "string"}}}}],
        "input": [
            {"role": "developer", "content": [{
                "type": "input_text", "text": filler(1400, salt).strip(),
                "prompt_cache_breakpoint": {"mode": "explicit"}}]},
            {"role": "user", "content": "fern?"}],
        "max_output_tokens": 16,
    }


def _send(backend: LocalBackend, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = backend.openai().responses.create(**body).model_dump(mode="json")
    return out


def _read_write(resp: dict[str, Any]) -> tuple[int, int]:
    d = resp["usage"]["input_tokens_details"]
    return d["cached_tokens"], d["cache_write_tokens"]


# ------------------------------------------------------------------- finding 3 (GPT-5.6 grid)
def test_gpt56_append_reads_what_a_left_not_the_grid(backend: LocalBackend) -> None:
    a = _responses_a("s8-app")
    b = copy.deepcopy(a)
    b["input"] += [{"role": "assistant", "content": "water weekly"},
                   {"role": "user", "content": "cactus?"}]
    ra, rb = _send(backend, a), _send(backend, b)
    read_a, write_a = _read_write(ra)
    read_b, _ = _read_write(rb)
    assert read_a == 0 and read_b == write_a > 0  # the backend: B reads what A wrote

    # bodies only: B never reads more than A left (the old grid said 1,408 left, 1,475 read)
    bare = diff(a, b)
    assert bare.predicted is not None and bare.ideal_cache_read is not None
    assert bare.predicted.cache_read == bare.ideal_cache_read
    assert bare.lost_tokens == 0

    # with A's usage: the prediction is the backend's own number, not on the 128-token grid
    r = diff(a, b, usage_a=ra["usage"], usage_b=rb["usage"])
    assert r.verdict == "no_miss"
    assert r.ideal_cache_read == write_a
    assert r.predicted is not None and r.predicted.cache_read == read_b


def test_gpt56_tool_change_loses_the_breakpoint_prefix(backend: LocalBackend) -> None:
    a = _responses_a("s8-tool")
    b = copy.deepcopy(a)
    b["tools"][0]["description"] = "changed"
    ra, rb = _send(backend, a), _send(backend, b)
    read_b, write_b = _read_write(rb)
    assert read_b == 0 and write_b > 0
    r = diff(a, b, usage_a=ra["usage"], usage_b=rb["usage"])
    assert r.cause == "tool_changed" and r.verdict == "miss_explained"
    assert r.lost_tokens is not None
    # what B rewrote is what it lost (the old grid priced 1,408 for a 1,514-token rewrite)
    assert abs(r.lost_tokens - write_b) <= read_tolerance(write_b) // 4


# ------------------------------------------------------------- finding 4 (previous_response_id)
def test_diff_previous_response_id_continues_a(backend: LocalBackend) -> None:
    a = _responses_a("s8-prev")
    ra = _send(backend, a)
    b = {k: a[k] for k in ("model", "prompt_cache_key", "tools", "max_output_tokens")}
    b.update(previous_response_id=ra["id"], input=[{"role": "user", "content": "cactus?"}])
    rb = _send(backend, b)
    read_b, _ = _read_write(rb)
    assert read_b > 0

    # bodies only (the id cannot be checked): still B continues A, read predicted, the
    # missing output named in a note
    fake = dict(b, previous_response_id="resp_123")
    bare = diff(a, fake)
    assert bare.cause == "previous_response_chained"
    assert bare.predicted is not None and bare.ideal_cache_read is not None
    assert bare.predicted.cache_read == bare.ideal_cache_read > 0
    assert any("lower bounds" in n for n in bare.notes)

    # with A's response: the id is checked and A's output is part of B's prompt
    r = diff(a, b, usage_a=ra["usage"], usage_b=rb["usage"], response_a=ra)
    assert r.cause == "previous_response_chained"
    assert r.verdict == "no_miss"
    assert "message_rewritten" not in [c.code for c in r.causes]
    assert r.predicted is not None and r.predicted.cache_read == read_b
    assert not any("anthropic" in c.source or "claude" in c.source for c in r.causes)

    # A's response is known and B continues another one: cannot tell, no numbers
    other = diff(a, fake, response_a=ra)
    assert other.verdict == "cannot_tell"
    assert other.cause == "previous_response_chained"
    assert other.predicted is None and other.lost_tokens is None


def test_cli_diff_reads_a_response_for_the_chain(backend: LocalBackend, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from promptcache.diff import diff_command

    a = _responses_a("s8-cli")
    ra = _send(backend, a)
    b = {k: a[k] for k in ("model", "prompt_cache_key", "tools", "max_output_tokens")}
    b.update(previous_response_id=ra["id"], input=[{"role": "user", "content": "cactus?"}])
    rb = _send(backend, b)
    (tmp_path / "a.json").write_text(json.dumps({"request": a, "response": ra}))
    (tmp_path / "b.json").write_text(json.dumps({"request": b, "response": rb}))
    out = CliRunner().invoke(diff_command, [str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                                            "--format", "json"])
    assert out.exit_code == 0, out.output
    r = json.loads(out.output)
    assert r["cause"] == "previous_response_chained"
    assert r["predicted"]["cache_read"] == _read_write(rb)[0]
    # B names another response than A's: cannot tell (exit 0: no miss was found)
    (tmp_path / "c.json").write_text(json.dumps(dict(b, previous_response_id="resp_x")))
    out = CliRunner().invoke(diff_command, [str(tmp_path / "a.json"), str(tmp_path / "c.json")])
    assert out.exit_code == 0, out.output
    assert "cannot tell" in out.output


def _log_chain(backend: LocalBackend, salt: str) -> list[dict[str, Any]]:
    """t12 of the trial: A; B chained on A; C chained on B with the tool description changed."""
    lines = []
    a = _responses_a(salt)
    ra = _send(backend, a)
    lines.append({"request": a, "response": ra, "timestamp": 0, "session_id": "s1"})
    b = {k: a[k] for k in ("model", "prompt_cache_key", "tools", "max_output_tokens")}
    b.update(previous_response_id=ra["id"], input=[{"role": "user", "content": "cactus?"}])
    rb = _send(backend, b)
    lines.append({"request": b, "response": rb, "timestamp": 10, "session_id": "s1"})
    c = copy.deepcopy(b)
    c["tools"][0]["description"] = "changed"
    c.update(previous_response_id=rb["id"], input=[{"role": "user", "content": "orchid?"}])
    rc = _send(backend, c)
    lines.append({"request": c, "response": rc, "timestamp": 20, "session_id": "s1"})
    return lines


def test_explain_resolves_previous_response_id_chains(backend: LocalBackend) -> None:
    lines = _log_chain(backend, "s8-explain")
    read_b, write_b = _read_write(lines[1]["response"])
    read_c, _ = _read_write(lines[2]["response"])
    assert read_b > 0 and read_c == 0
    rep = explain([json.dumps(x) for x in lines])
    row_b, row_c = rep.requests[1], rep.requests[2]
    assert row_b.status == "hit" and row_b.predicted_cache_read == read_b
    assert row_b.detail.get("previous_response_id") == lines[0]["response"]["id"]
    assert row_c.status == "miss_explained" and row_c.cause == "tool_changed"
    # C lost B's whole entry (B's read + write), not the 1,024 + 128k rounding
    assert row_c.lost_tokens == read_b + write_b

    # the log starts mid-conversation: the first chained line cannot be compared
    tail = explain([json.dumps(x) for x in lines[1:]])
    assert tail.requests[0].status == "cannot_tell"
    assert tail.requests[0].cause == "previous_response_chained"
    assert tail.requests[0].predicted_cache_read is None


# --------------------------------------------------------------- finding 9 (prompt_cache_key)
def _chat_a(salt: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "prompt_cache_key": "conv-1", "max_completion_tokens": 4,
            "messages": [{"role": "system", "content": filler(1400, salt).strip()},
                         {"role": "user", "content": "fern?"}]}


def test_key_change_alone_is_a_routing_warning(backend: LocalBackend) -> None:
    oc = backend.openai()
    a = _chat_a("s8-key")
    b = copy.deepcopy(a)
    b["messages"] += [{"role": "assistant", "content": "ok"},
                      {"role": "user", "content": "cactus?"}]
    b["prompt_cache_key"] = "conv-2"
    ra = oc.chat.completions.create(**a).model_dump(mode="json")
    rb = oc.chat.completions.create(**b).model_dump(mode="json")
    read_b = rb["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert read_b > 0  # the backend (like a lucky routing) reads across keys

    r = diff(a, b)
    assert r.verdict == "no_miss"
    assert r.cause != "prompt_cache_key_changed"
    key = [c for c in r.causes if c.code == "prompt_cache_key_changed"]
    # review 12 F5: the key steers routing, so the read is uncertain, not "likely"
    assert key and "uncertain" in key[0].title
    assert r.predicted is not None and r.predicted.cache_read > 0 and r.lost_tokens == 0
    assert r.predicted.read_upper_bound

    # observed short: then the key change is the primary cause of the miss
    short = diff(a, b, usage_b={"prompt_tokens": rb["usage"]["prompt_tokens"],
                                "prompt_tokens_details": {"cached_tokens": 0}})
    assert short.verdict == "miss_explained" and short.cause == "prompt_cache_key_changed"

    rep = explain([json.dumps({"request": a, "response": ra, "session_id": "k"}),
                   json.dumps({"request": b, "response": rb, "session_id": "k"})])
    row = rep.requests[1]
    assert row.status == "hit" and row.observed_cache_read == read_b
    assert row.predicted_cache_read is not None and row.predicted_cache_read > 0
    assert "prompt_cache_key" in row.detail.get("routing", "")


def test_explain_resolves_a_chain_logged_as_json_strings(backend: LocalBackend) -> None:
    lines = _log_chain(backend, "s8-strings")
    as_text = [dict(x, request=json.dumps(x["request"])) for x in lines]
    rep = explain([json.dumps(x) for x in as_text])
    read_b, write_b = _read_write(lines[1]["response"])
    assert rep.requests[1].predicted_cache_read == read_b
    assert rep.requests[2].lost_tokens == read_b + write_b


def test_gpt56_explicit_mode_without_breakpoints_caches_nothing() -> None:
    a = _responses_a("s8-off")
    a["input"][0]["content"][0].pop("prompt_cache_breakpoint")
    a["prompt_cache_options"] = {"mode": "explicit"}
    b = copy.deepcopy(a)
    b["input"].append({"role": "user", "content": "more"})
    r = diff(a, b)
    assert r.predicted is not None and r.predicted.cache_read == 0
    assert r.predicted.cache_write == 0 and r.ideal_cache_read == 0
    assert any("caching is off" in n for n in r.notes)


def test_unreadable_output_of_a_is_cannot_tell_not_bad_input() -> None:
    a = _responses_a("s8-bad-output")
    b = {k: a[k] for k in ("model", "prompt_cache_key", "tools", "max_output_tokens")}
    b.update(previous_response_id="resp_a", input="cactus?")
    bad = {"id": "resp_a", "output": [{"type": "message", "role": "assistant", "content": 1}]}
    r = diff(a, b, response_a=bad)
    assert r.verdict == "cannot_tell" and r.predicted is None
    rep = explain([json.dumps({"request": a, "response": bad, "session_id": "x"}),
                   json.dumps({"request": b, "response": {"id": "resp_b", "output": []},
                               "session_id": "x"})])
    assert rep.requests[1].status == "cannot_tell"
    assert rep.requests[1].predicted_cache_read is None


def test_diff_of_two_chained_turns_compares_their_structure(backend: LocalBackend) -> None:
    """B chains on A, and A on an earlier response: both start with a stored conversation
    of unknown size; the causes are still found, and A's / B's usage give the loss."""
    lines = _log_chain(backend, "s8-two-chained")
    b, c = lines[1], lines[2]
    read_b, write_b = _read_write(b["response"])
    same = dict(c["request"], tools=b["request"]["tools"])
    ok = diff(b["request"], same)  # as the wrapper's test helper calls it: bodies only
    assert ok.verdict == "no_miss" and ok.cause == "previous_response_chained"
    assert ok.lost_tokens is None and ok.predicted is None
    r = diff(b["request"], c["request"], usage_a=b["response"]["usage"],
             usage_b=c["response"]["usage"], response_a=b["response"])
    assert r.verdict == "miss_explained" and r.cause == "tool_changed"
    assert r.lost_tokens == read_b + write_b and r.predicted is None
