"""Tests of promptcache.diff.explain and the ``diff`` / ``explain`` commands."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache._errors import InputError
from promptcache.cli import main
from promptcache.diff import explain
from tests.cases import filler

MODEL = "claude-sonnet-4-5"
TOOLS = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}},
         {"name": "write", "description": "Write a file.", "input_schema": {"type": "object"}}]


def text(n: int, salt: str) -> str:
    return filler(n, salt).strip()


def request(history: list[str], *, tools: list[dict[str, Any]] | None = None,
            system: str | None = None) -> dict[str, Any]:
    msgs = [{"role": "user" if k % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": t}]} for k, t in enumerate(history)]
    msgs[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {"model": MODEL, "max_tokens": 64, "tools": tools or TOOLS,
            "system": [{"type": "text", "text": system or text(1500, "sys"),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": msgs}


def conversation(name: str, turns: int) -> list[dict[str, Any]]:
    """Requests of one conversation: turn k carries 2k+1 messages."""
    history: list[str] = []
    out = []
    for k in range(turns):
        if history:
            history.append(text(100, f"{name}-a{k}"))
        history.append(f"[{name}] " + text(60, f"{name}-u{k}"))
        out.append(request(list(history)))
    return out


def test_sessions_inferred_from_prefix_growth() -> None:
    a, b = conversation("alpha", 4), conversation("beta", 4)
    lines = [{"request": r} for pair in zip(a, b, strict=True) for r in pair]
    report = explain(lines)
    assert report.sessions == 2
    sessions = {x.session for x in report.requests}
    assert len(sessions) == 2
    assert [x.turn for x in report.requests] == [0, 0, 1, 1, 2, 2, 3, 3]
    # the second conversation's first request reads the tools and system prompt the first
    # one cached (the provider's cache is shared by every conversation; session 11)
    assert [x.status for x in report.requests[:2]] == ["cold_start", "hit"]
    assert report.requests[1].compared_with_line == 1
    assert all(x.status == "hit" for x in report.requests[2:])
    assert report.misses == 0
    assert report.requests[0].session == report.requests[2].session


def test_explicit_session_ids_win() -> None:
    a = conversation("alpha", 3)
    lines = [{"request": r, "session_id": f"s{k}"} for k, r in enumerate(a)]
    report = explain(lines)
    assert report.sessions == 3
    assert len({x.session for x in report.requests}) == 3
    # each session's first request reads what the earlier sessions wrote (a shared cache)
    assert [x.status for x in report.requests] == ["cold_start", "hit", "hit"]


def test_tools_reordered_mid_session_is_explained_and_priced() -> None:
    reqs = conversation("alpha", 4)
    reqs[2]["tools"] = list(reversed(TOOLS))
    reqs[3]["tools"] = list(reversed(TOOLS))
    lines = [{"request": r, "timestamp": 1000 + 10 * k} for k, r in enumerate(reqs)]
    report = explain(lines)
    assert report.sessions == 1  # joined through the unchanged history
    miss = report.requests[2]
    assert (miss.status, miss.cause, miss.path) == ("miss_explained", "tools_reordered",
                                                    "tools[0]")
    assert miss.lost_tokens and miss.lost_tokens > 1500
    assert miss.miss_cost_usd and miss.miss_cost_usd > 0
    assert report.requests[3].status == "hit"  # the new order is stable afterwards
    assert [(s.cause, s.count) for s in report.summary] == [("tools_reordered", 1)]
    assert report.miss_cost_usd == pytest.approx(miss.miss_cost_usd)


def test_history_edit_joins_the_session() -> None:
    h = [text(200, f"h{k}") for k in range(5)]
    step3 = request(h)
    step4 = request([h[0] + "\n\n" + h[2], h[3], h[4], text(100, "h5"), text(50, "h6")])
    report = explain([{"request": step3}, {"request": step4}])
    assert report.sessions == 1
    assert report.requests[1].cause == "message_rewritten"
    assert report.requests[1].path == "messages[0].content[0].text"


def test_ttl_expiry_from_timestamps() -> None:
    reqs = conversation("alpha", 2)
    lines = [{"request": reqs[0], "timestamp": "2026-11-29T10:00:00Z"},
             {"request": reqs[1], "timestamp": "2026-11-29T10:06:00Z"}]
    report = explain(lines)
    assert report.requests[1].cause == "ttl_expired"
    assert report.requests[1].detail["gap_seconds"] == 360


def test_a_zero_timestamp_placeholder_does_not_hide_created_at() -> None:
    """Review (4th session): a numeric 0 under an earlier time key is an unset placeholder
    when a later key holds a time; 0 alone is still a time (relative-time logs)."""
    reqs = conversation("alpha", 2)
    lines = [{"request": reqs[0], "timestamp": 0, "created_at": 1_700_000_000},
             {"request": reqs[1], "timestamp": 0, "created_at": 1_700_000_360}]
    report = explain(lines)
    assert report.requests[1].cause == "ttl_expired"
    assert report.requests[1].detail["gap_seconds"] == 360
    relative = [{"request": reqs[0], "timestamp": 0}, {"request": reqs[1], "timestamp": 360}]
    assert explain(relative).requests[1].detail["gap_seconds"] == 360


def test_unexplained_miss_and_provider_diagnostics() -> None:
    reqs = conversation("alpha", 2)
    usage0 = {"input_tokens": 5, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 1800}
    usage1 = {"input_tokens": 5, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 2000}
    lines = [{"request": reqs[0], "usage": usage0, "response_id": "msg_1"},
             {"request": reqs[1], "response": {
                 "id": "msg_2", "usage": usage1,
                 "diagnostics": {"cache_miss_reason": {"type": "system_changed",
                                                       "cache_missed_input_tokens": 1800}}}}]
    report = explain(lines)
    second = report.requests[1]
    # the second request only appends to the first: a provider-side miss on an append
    assert second.status == "unexplained_miss" and second.cause == "append_only"
    assert second.response_id == "msg_2"
    assert second.observed_cache_read == 0 and second.predicted_cache_read
    assert second.diagnostics is not None and second.diagnostics.agrees is False
    assert report.disagreements == 1


def test_unexplained_misses_are_one_summary_group(tmp_path: Path) -> None:
    """An append-only unexplained miss and an identical-retry one share one summary row.

    Both are provider side (nothing in the payload breaks the cache); each row keeps its own
    cause, but "misses by cause" (and ``summary[].cause`` in JSON) lists ``no_difference``
    once with 2 misses, as before ``append_only`` existed (review 4, item 3)."""
    reqs = conversation("alpha", 2)
    usage = {"input_tokens": 30, "cache_creation_input_tokens": 1215,
             "cache_read_input_tokens": 0, "output_tokens": 5}
    lines = [{"request": reqs[0], "usage": usage, "timestamp": 1_700_000_000},
             {"request": reqs[1], "usage": usage, "timestamp": 1_700_000_010},  # B extends A
             {"request": reqs[1], "usage": usage, "timestamp": 1_700_000_020}]  # retry of B
    report = explain(lines)
    assert [r.status for r in report.requests[1:]] == ["unexplained_miss"] * 2
    assert [r.cause for r in report.requests[1:]] == ["append_only", "no_difference"]
    assert report.misses == 2
    assert [(s.cause, s.count) for s in report.summary] == [("no_difference", 2)]
    assert report.summary[0].lost_tokens == sum(r.lost_tokens or 0 for r in report.requests)
    log = tmp_path / "log1.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    res = CliRunner().invoke(main, ["explain", str(log), "--format", "json"])
    assert res.exit_code == 1, res.output  # misses found
    summary = json.loads(res.output)["summary"]
    assert [(s["cause"], s["count"]) for s in summary] == [("no_difference", 2)]
    res = CliRunner().invoke(main, ["explain", str(log)])
    table = res.output.split("misses by cause", 1)[1].split("misses\n", 1)[0]
    assert "no_difference" in table and "append_only" not in table


def test_bad_lines_name_the_line(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"request": conversation("a", 1)[0]}) + "\n{oops\n")
    with pytest.raises(InputError, match="line 2"):
        explain(log)
    log.write_text(json.dumps({"request": {"messages": "nope", "system": "x"}}) + "\n")
    with pytest.raises(InputError, match="line 1"):
        explain(log)
    with pytest.raises(InputError):
        explain(tmp_path / "missing.jsonl")


def test_a_list_of_lines_is_read_as_a_file_is() -> None:
    """What ``promptcache explain -`` passes: the log read once, as a list of text lines."""
    lines = [json.dumps({"request": r}) + "\n" for r in conversation("a", 2)]
    assert len(explain(lines, name="-").requests) == 2
    pretty = json.dumps({"request": conversation("a", 1)[0]}, indent=2).splitlines(True)
    with pytest.raises(InputError, match=r"^-: a JSON document, not JSONL: .*\(jq -c \. "):
        explain(pretty, name="-")
    with pytest.raises(InputError, match="line 1: invalid JSON"):  # an iterator: the line
        explain(iter(pretty), name="-")
    with pytest.raises(InputError, match="line 2: invalid JSON"):  # not the first line
        explain([lines[0], "{oops\n"], name="-")


# new-user trial 10: a log still being written ends in a partial line; it made the whole log
# bad input (exit 2)
def test_an_incomplete_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    reqs = conversation("alpha", 3)
    reqs[2]["system"][0]["text"] += " Now: 2026-11-29T20:00Z"
    body = "".join(json.dumps({"request": r}) + "\n" for r in reqs)
    partial = json.dumps({"request": conversation("alpha", 4)[3]})[:200]
    log = tmp_path / "live.jsonl"
    log.write_text(body + partial)
    warning = (f"promptcache: {log}: line 4: incomplete last line (no newline at end), "
               "skipped\n")
    out = CliRunner().invoke(main, ["explain", str(log), "--format", "json"])
    assert out.exit_code == 1, out.output  # the complete lines' status: one miss
    assert out.stderr == warning
    data = json.loads(out.stdout)
    assert len(data["requests"]) == 3 and data["misses"] == 1
    out = CliRunner().invoke(main, ["explain", "-", "--format", "json"], input=body + partial)
    assert out.exit_code == 1 and len(json.loads(out.stdout)["requests"]) == 3
    assert out.stderr == warning.replace(str(log), "-")
    # a broken line ending with a newline, or one in the middle, is still bad input
    for broken in (body + partial + "\n", body + partial + "\n" + body):
        log.write_text(broken)
        out = CliRunner().invoke(main, ["explain", str(log)])
        assert out.exit_code == 2 and "line 4: invalid JSON" in out.stderr, out.output
    # a list of lines: only when they carry their newlines (as readlines() gives them)
    lines = io.StringIO(body + partial).readlines()
    assert len(explain(lines, name="-").requests) == 3
    with pytest.raises(InputError, match="line 4: invalid JSON"):
        explain([line.rstrip("\n") for line in lines], name="-")


def test_explain_cli_reads_stdin(tmp_path: Path) -> None:
    reqs = conversation("alpha", 3)
    reqs[2]["system"][0]["text"] += " Now: 2026-11-29T20:00Z"
    body = "\n".join(json.dumps({"request": r}) for r in reqs) + "\n"
    out = CliRunner().invoke(main, ["explain", "-", "--format", "json"], input=body)
    assert out.exit_code == 1, out.output
    data = json.loads(out.output)
    assert data["misses"] == 1 and data["summary"][0]["cause"] == "system_changed"
    empty = CliRunner().invoke(main, ["explain", "-"], input="")
    assert empty.exit_code == 2 and empty.output == "promptcache: -: empty file\n"


# ----------------------------------------------------------------------------- CLI
def _write(tmp_path: Path, name: str, obj: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


def test_diff_cli_text_json_and_exit_codes(tmp_path: Path) -> None:
    reqs = conversation("alpha", 3)
    a = _write(tmp_path, "a.json", reqs[1])
    b = _write(tmp_path, "b.json", reqs[2])
    runner = CliRunner()
    ok = runner.invoke(main, ["diff", a, b])
    assert ok.exit_code == 0, ok.output
    assert "no miss" in ok.output
    assert not any(line.startswith("fix") for line in ok.output.splitlines()), ok.output
    assert "nothing to fix" not in ok.output
    changed = dict(reqs[2])
    changed["tools"] = list(reversed(TOOLS))
    c = _write(tmp_path, "c.json", changed)
    miss = runner.invoke(main, ["diff", a, c])
    assert miss.exit_code == 1
    assert "tools_reordered" in miss.output and "sort tools by name" in miss.output
    as_json = runner.invoke(main, ["diff", a, c, "--format", "json", "--redact"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.output)
    assert data["cause"] == "tools_reordered"
    assert data["divergence"]["before"].startswith("sha256:")


def test_diff_cli_wrapper_with_usage_and_timestamps(tmp_path: Path) -> None:
    reqs = conversation("alpha", 2)
    a = _write(tmp_path, "a.json", {"request": reqs[0], "timestamp": 0})
    b = _write(tmp_path, "b.json", {"request": reqs[1], "timestamp": 900,
                                    "usage": {"input_tokens": 3, "cache_read_input_tokens": 0,
                                              "cache_creation_input_tokens": 2000}})
    result = CliRunner().invoke(main, ["diff", a, b, "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["cause"] == "ttl_expired"
    assert data["observed"]["cache_read"] == 0


def test_diff_cli_unknown_model_note_matches_what_was_passed(tmp_path: Path) -> None:
    """The note advises --model only when passing it would help."""
    reqs = conversation("alpha", 2)
    bare = [{k: v for k, v in r.items() if k != "model"} for r in reqs]
    a = _write(tmp_path, "a.json", bare[0])
    b = _write(tmp_path, "b.json", bare[1])

    def notes(*args: str) -> list[str]:
        result = CliRunner().invoke(main, ["diff", a, b, "--format", "json", *args])
        assert result.exit_code in (0, 1), result.output
        return list(json.loads(result.output)["notes"])

    assert notes() == ["request B names no model: no prediction, no cost (pass --model)"]
    assert not any("model" in n for n in notes("--model", MODEL))
    named = [{**r, "model": "claude-sonet-4-5"} for r in bare]
    a = _write(tmp_path, "a.json", named[0])
    b = _write(tmp_path, "b.json", named[1])
    [from_request] = notes()
    assert from_request.startswith("request B's model 'claude-sonet-4-5' is unknown")
    assert "pass --model with a catalog id" in from_request


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"messages": 3, "system": "x"}'])
def test_diff_cli_bad_input_exits_2_with_one_line(tmp_path: Path, content: str) -> None:
    good = _write(tmp_path, "a.json", conversation("alpha", 1)[0])
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(main, ["diff", good, str(bad)])
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "bad.json" in lines[0]
    assert "Traceback" not in result.output


def test_explain_cli(tmp_path: Path) -> None:
    reqs = conversation("alpha", 3)
    reqs[2]["system"][0]["text"] += " Now: 2026-11-29T20:00Z"
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps({"request": r}) for r in reqs) + "\n")
    runner = CliRunner()
    text_out = runner.invoke(main, ["explain", str(log)])
    assert text_out.exit_code == 1, text_out.output
    assert "system_changed" in text_out.output
    as_json = runner.invoke(main, ["explain", str(log), "--format", "json"])
    data = json.loads(as_json.output)
    assert data["misses"] == 1 and data["summary"][0]["cause"] == "system_changed"
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(json.dumps({"request": r}) for r in reqs[:2]) + "\n")
    assert runner.invoke(main, ["explain", str(clean)]).exit_code == 0
    missing = runner.invoke(main, ["explain", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output


def test_usage_tracker_jsonl_is_read(tmp_path: Path) -> None:
    """The usage tracker's JSONL sink output works as a usage-only log (BR-18 series)."""
    usage = pytest.importorskip("promptcache.usage")
    from tests.cases import case

    series = case("BR-18")["input"]["usage_series"]
    path = tmp_path / "usage.jsonl"
    sink = usage.JsonlSink(path)
    for k, s in enumerate(series):
        sink.write(usage.UsageRecord(provider="anthropic", model=MODEL, uncached_input=10,
                                     cache_read=s["cache_read_input_tokens"],
                                     cache_write=s["cache_creation_input_tokens"],
                                     session="gptme", start=1000.0 + 30 * k,
                                     request_id=f"msg_{k}"))
    sink.close()
    report = explain(path)
    assert [x.status for x in report.requests] == ["cold_start", "hit", "hit",
                                                   "prefix_regression"]
    last = report.requests[-1]
    assert last.response_id == "msg_3" and last.lost_tokens == 9473
    assert last.miss_cost_usd == pytest.approx(9473 * (3.75 - 0.3) / 1e6)


def test_documented_rule_contradicted_by_usage_is_reported() -> None:
    """BR-16's caveat: tool_choice changed, yet the provider read the messages."""
    reqs = conversation("alpha", 2)
    reqs[1]["tool_choice"] = {"type": "any"}
    lines = [{"request": reqs[0],
              "usage": {"input_tokens": 3, "cache_read_input_tokens": 0,
                        "cache_creation_input_tokens": 1700}},
             {"request": reqs[1],
              "usage": {"input_tokens": 3, "cache_read_input_tokens": 1700,
                        "cache_creation_input_tokens": 260}}]
    report = explain(lines)
    second = report.requests[1]
    assert second.status == "hit" and report.misses == 0
    assert second.detail["causes_not_confirmed_by_usage"] == ["tool_choice_changed"]


def test_openai_log_with_usage_and_diagnostics() -> None:
    instructions = text(1500, "oa-instr")

    def req(turns: int, key: str) -> dict[str, Any]:
        items = [{"role": "user" if k % 2 == 0 else "assistant",
                  "content": [{"type": "input_text" if k % 2 == 0 else "output_text",
                               "text": text(80, f"oa-{k}")}]} for k in range(turns)]
        return {"model": "gpt-5.6-sol", "instructions": instructions, "input": items,
                "prompt_cache_key": key}

    usage = {"input_tokens": 1700, "output_tokens": 20,
             "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1664},
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1720}
    lines = [
        {"request": req(1, "tenant-a"), "response": {"id": "resp_1", "usage": usage}},
        {"request": req(3, "tenant-a"), "response": {"id": "resp_2", "usage": {
            **usage, "input_tokens": 1900,
            "input_tokens_details": {"cached_tokens": 1664, "cache_write_tokens": 128}}}},
        {"request": req(5, "tenant-b"), "response": {
            "id": "resp_3", "usage": {**usage, "input_tokens": 2100},
            "prompt_cache_diagnostics": {"type": "cache_miss",
                                         "reason": "prompt_cache_key_changed",
                                         "cache_missed_tokens": 1792}}},
    ]
    report = explain(lines)
    assert report.sessions == 1
    assert [x.status for x in report.requests] == ["cold_start", "hit", "miss_explained"]
    third = report.requests[2]
    assert third.cause == "prompt_cache_key_changed" and third.observed_cache_read == 0
    assert third.diagnostics is not None and third.diagnostics.agrees is True
    assert third.miss_cost_usd is not None and third.miss_cost_usd > 0
    assert report.disagreements == 0


def test_diagnostics_judged_against_the_baseline_the_provider_used() -> None:
    """r3 names r1 as its diagnostics baseline; r2 changed the system prompt since r1."""
    reqs = conversation("alpha", 3)
    for r in reqs[1:]:
        r["system"][0]["text"] += " v2"
    reqs[2]["diagnostics"] = {"previous_message_id": "msg_1"}
    lines = [{"request": reqs[0], "response_id": "msg_1"},
             {"request": reqs[1], "response_id": "msg_2"},
             {"request": reqs[2], "response": {"id": "msg_3", "diagnostics": {
                 "cache_miss_reason": {"type": "system_changed",
                                       "cache_missed_input_tokens": 1600}}}}]
    report = explain(lines)
    third = report.requests[2]
    assert third.status == "hit"  # against its session predecessor nothing changed
    assert third.detail["diagnostics_baseline"] == "msg_1"
    assert third.detail["cause_vs_baseline"] == "system_changed"
    assert third.diagnostics is not None and third.diagnostics.agrees is True
    assert report.disagreements == 0


def test_explain_cli_counts_agree_in_number(tmp_path: Path) -> None:
    reqs = conversation("alpha", 2)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"request": reqs[0]}) + "\n", encoding="utf-8")
    out = CliRunner().invoke(main, ["explain", str(one)])
    assert out.exit_code == 0, out.output
    assert "1 request, 1 session, 0 misses, 0 tokens rewritten" in " ".join(out.output.split())
    reqs[1]["system"][0]["text"] += " Now: 2026-11-29T20:00Z"
    two = tmp_path / "two.jsonl"
    two.write_text("\n".join(json.dumps({"request": r}) for r in reqs) + "\n", encoding="utf-8")
    out = CliRunner().invoke(main, ["explain", str(two)])
    assert out.exit_code == 1, out.output
    words = " ".join(out.output.split())  # rich wraps long lines
    assert "2 requests, 1 session, 1 miss, " in words
    assert " 1 sessions" not in words and " 1 misses" not in words


def _on_openai_grid(tokens: int | None) -> bool:
    """0, or 1,024 + n * 128 (OpenAI's cache steps; hosted-api-rules.md section 2)."""
    return tokens == 0 or (tokens is not None and tokens >= 1024 and (tokens - 1024) % 128 == 0)


def test_br24_openai_reads_stay_on_the_128_token_grid_with_usage() -> None:
    """BR-24's no-key series with usage: scaling to the reported prompt tokens happens
    before the 128-token grid, so predictions stay on it (not 12,377)."""
    from tests.cases import case

    series = case("BR-24")["input"]["series_no_key"]
    req = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": filler(12300, "br24-grid")},
        {"role": "user", "content": "what is the status?"}]}
    lines = [{"request": req, "timestamp": 1000 + 40 * i,
              "usage": {"prompt_tokens": series["prompt_tokens_each"], "completion_tokens": 10,
                        "prompt_tokens_details": {"cached_tokens": cached}}}
             for i, cached in enumerate(series["cached_tokens"])]
    with_usage = explain(lines)
    without = explain([{"request": req, "timestamp": 1000 + 40 * i} for i in range(16)])
    grid = 1024 + ((series["prompt_tokens_each"] - 1024) // 128) * 128  # 12,288
    for r in with_usage.requests[1:]:
        assert _on_openai_grid(r.predicted_cache_read), r.predicted_cache_read
        assert r.predicted_cache_read == grid
    for r in without.requests[1:]:
        assert _on_openai_grid(r.predicted_cache_read)
    by_obs = {r.observed_cache_read: r for r in with_usage.requests[1:]}
    assert by_obs[10112].lost_tokens == grid - 10112 == 2176
    assert by_obs[0].lost_tokens == grid


@pytest.mark.parametrize("command", ["diff", "explain"])
def test_unknown_explicit_model_exits_2_with_suggestions(tmp_path: Path, command: str) -> None:
    """--model the catalog does not know is bad input: exit 2, one line, close ids named."""
    reqs = conversation("alpha", 3)
    reqs[2]["system"][0]["text"] += " Now: 2026-11-29T20:00Z"
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps({"request": r}) for r in reqs) + "\n")
    a = _write(tmp_path, "a.json", reqs[1])
    b = _write(tmp_path, "b.json", reqs[2])
    args = [command, a, b] if command == "diff" else [command, str(log)]
    assert CliRunner().invoke(main, [*args, "--model", MODEL]).exit_code == 1
    for model, close in (("claude-sonet-4-5", "claude-sonnet-4-5"), ("nope", None)):
        result = CliRunner().invoke(main, [*args, "--model", model])
        assert result.exit_code == 2, result.output
        lines = [x for x in result.output.splitlines() if x.strip()]
        assert len(lines) == 1, result.output
        assert f"--model {model}: unknown model" in lines[0]
        if close is not None:
            assert "closest catalog ids: " in lines[0] and close in lines[0]
            assert len(lines[0].split("closest catalog ids: ")[1].split(", ")) <= 3
        assert "Traceback" not in result.output


@pytest.mark.parametrize("content", ["", "\n \n"])
def test_empty_files_exit_2_saying_empty(tmp_path: Path, content: str) -> None:
    """explain / diff on an empty file: one line "FILE: empty file", never "0 requests"."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content, encoding="utf-8")
    for fmt in ("text", "json"):
        result = CliRunner().invoke(main, ["explain", str(empty), "--format", fmt])
        assert result.exit_code == 2, result.output
        assert result.output.splitlines() == [f"promptcache: {empty}: empty file"]
    good = _write(tmp_path, "a.json", conversation("alpha", 1)[0])
    for args in ([good, str(empty)], [str(empty), good]):
        result = CliRunner().invoke(main, ["diff", *args])
        assert result.exit_code == 2, result.output
        assert result.output.splitlines() == [f"promptcache: {empty}: empty file"]


def test_requests_are_found_as_the_other_commands_find_them() -> None:
    """A recorded exchange (``request.body``, usage in ``response.body``) and a bare Responses
    line with only ``instructions`` are requests to explain as they are to lint and diff."""
    a, b = conversation("rec", 2)
    exchange = [{"request": {"method": "POST", "url": "https://api.anthropic.com/v1/messages",
                             "body": r},
                 "response": {"body": {"usage": {"input_tokens": 3,
                                                 "cache_read_input_tokens": read,
                                                 "cache_creation_input_tokens": 1800 - read,
                                                 "output_tokens": 5}}},
                 "timestamp": 1000 + 10 * k}
                for k, (r, read) in enumerate(((a, 0), (b, 1800)))]
    report = explain(exchange)
    assert len(report.requests) == 2 and report.misses == 0
    assert report.requests[1].status == "hit"
    instructions = text(1500, "instr")
    bare = [{"model": "gpt-5.4", "instructions": instructions, "timestamp": 1000 + k,
             "usage": {"input_tokens": 1600, "output_tokens": 5,
                       "input_tokens_details": {"cached_tokens": cached}}}
            for k, cached in enumerate((0, 1536))]
    report = explain(bare)
    assert len(report.requests) == 2 and report.sessions == 1


def test_a_stored_prompt_is_named_not_called_a_non_request(tmp_path: Path) -> None:
    log = tmp_path / "stored.jsonl"
    log.write_text(json.dumps({"model": "gpt-5.4", "prompt": {"id": "pmpt_abc"}}) + "\n")
    res = CliRunner().invoke(main, ["explain", str(log)])
    assert res.exit_code == 2
    assert "prompt is stored server-side (prompt)" in res.output


def test_a_side_request_does_not_hide_the_main_loop_entries() -> None:
    """Bug 2(a), BR-16 pattern: a side request with another tool_choice between two main-loop
    turns. The next main-loop turn extends the entries of the turn before the side request,
    which are still live: it is compared with that request, not blamed on tool_choice."""
    main_loop = conversation("alpha", 2)
    side = {**main_loop[0], "tool_choice": {"type": "tool", "name": "read"}}
    lines = [{"request": main_loop[0], "timestamp": 1000, "session_id": "c"},
             {"request": side, "timestamp": 1020, "session_id": "c"},
             {"request": main_loop[1], "timestamp": 1040, "session_id": "c"}]
    report = explain(lines)
    first, side_row, nxt = report.requests
    assert first.compared_with_line is None
    assert (side_row.cause, side_row.compared_with_line) == ("tool_choice_changed", 1)
    assert (nxt.status, nxt.cause, nxt.compared_with_line) == ("hit", None, 1)
    assert nxt.predicted_cache_read and nxt.predicted_cache_read > 1500
    assert report.misses == 1 and [s.cause for s in report.summary] == ["tool_choice_changed"]
    # the main loop's entries expired (TTL from the timestamps): the last request is the
    # only baseline left, and the cause analysis against it stays as it was
    late = [dict(lines[0], timestamp=1000), dict(lines[1], timestamp=1400),
            dict(lines[2], timestamp=1420)]
    nxt = explain(late).requests[2]
    assert (nxt.cause, nxt.compared_with_line) == ("tool_choice_changed", 2)


def test_a_reverted_change_reads_the_entries_written_before_it() -> None:
    """Bug 2(b): turn 2 adds a date to the system prompt, turn 3 removes it again. Turn 3 reads
    turn 1's entries (the logged usage shows the read): a hit, not system_changed."""
    reqs = conversation("alpha", 3)
    dated = text(1500, "sys") + "\nToday is 2026-11-29."
    reqs[1]["system"] = [{"type": "text", "text": dated, "cache_control": {"type": "ephemeral"}}]
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1700,
             "cache_creation_input_tokens": 300}
    lines = [{"request": reqs[0], "timestamp": 1000},
             {"request": reqs[1], "timestamp": 1030},
             {"request": reqs[2], "timestamp": 1060, "usage": usage}]
    report = explain(lines)
    assert report.sessions == 1
    assert report.requests[1].cause == "system_changed"
    third = report.requests[2]
    assert (third.status, third.cause, third.compared_with_line) == ("hit", None, 1)
    assert third.predicted_cache_read and third.predicted_cache_read > 1500
    assert "causes_not_confirmed_by_usage" not in third.detail
    assert report.misses == 1
    # turn 1's entries expired before turn 3: compared with turn 2 (system_changed), and the
    # logged read, which that prediction says is impossible, is flagged
    late = [dict(lines[0]), dict(lines[1], timestamp=1400), dict(lines[2], timestamp=1420)]
    third = explain(late).requests[2]
    assert (third.cause, third.compared_with_line) == ("system_changed", 2)
    assert third.detail["causes_not_confirmed_by_usage"] == ["system_changed"]


def test_a_reverted_change_reads_the_automatic_prefix_on_openai() -> None:
    """Bug 2(b) on OpenAI: the automatic prefix of turn 1 is still cached when turn 3 reverts
    turn 2's system prompt change."""
    system = text(1500, "sys")

    def chat(sys_text: str, turns: int) -> dict[str, Any]:
        msgs = [{"role": "system", "content": sys_text}]
        for k in range(turns):
            msgs.append({"role": "user", "content": text(80, f"u{k}")})
            if k < turns - 1:
                msgs.append({"role": "assistant", "content": text(60, f"a{k}")})
        return {"model": "gpt-4o", "messages": msgs}

    lines = [{"request": chat(system, 1), "timestamp": 1000},
             {"request": chat("Today is 2026-11-29.\n" + system, 2), "timestamp": 1030},
             {"request": chat(system, 3), "timestamp": 1060}]
    report = explain(lines)
    assert [(r.status, r.cause, r.compared_with_line) for r in report.requests] == [
        ("cold_start", None, None), ("miss_explained", "system_changed", 1), ("hit", None, 1)]
    assert report.requests[2].predicted_cache_read == 1536  # 1,024 + 4 x 128, on the grid


def test_a_first_request_below_the_minimum_is_not_a_cold_start() -> None:
    """N3, BR-14: a prefix below the model's minimum writes nothing, so the first request is
    not a cold start; both requests are uncached for below_minimum, and neither is a miss."""
    req = {"model": "claude-3-5-haiku-20241022", "max_tokens": 64,
           "system": [{"type": "text", "text": text(1500, "agent"),
                       "cache_control": {"type": "ephemeral"}}],
           "messages": [{"role": "user", "content": text(20, "q")}]}
    usage = {"input_tokens": 1520, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 80}
    report = explain([{"request": req, "usage": usage}, {"request": req, "usage": usage}])
    assert [(r.status, r.cause) for r in report.requests] == [("uncached", "below_minimum")] * 2
    assert report.requests[0].detail["minimum_tokens"] == 2048
    assert report.misses == 0


def test_the_text_table_names_the_line_each_request_was_compared_with(tmp_path: Path) -> None:
    """``explain --all``: a "vs line" column (the baseline chosen among the session's live
    entries), so a reader sees that line 3 was compared with line 1, not with the side request."""
    from click.testing import CliRunner

    from promptcache.cli import main

    main_loop = conversation("alpha", 2)
    side = {**main_loop[0], "tool_choice": {"type": "tool", "name": "read"}}
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"request": r, "timestamp": t, "session_id": "c"}) + "\n"
                           for r, t in ((main_loop[0], 1000), (side, 1020),
                                        (main_loop[1], 1040))))
    out = CliRunner().invoke(main, ["explain", str(log), "--all"], env={"COLUMNS": "200"})
    assert out.exit_code == 1, out.output
    assert "vs line" in out.output
    rows = {ln.split("│")[1].strip(): ln.split("│")[2].strip()
            for ln in out.output.splitlines() if ln.count("│") > 3 and ln.split("│")[1].strip()
            .isdigit()}
    assert rows == {"1": "-", "2": "1", "3": "1"}


# ------------------------------------------- usage-only lines: groups, prompts, write TTL


def _record(**kw: Any) -> dict[str, Any]:
    """A line as the usage tracker's JsonlSink writes it."""
    return {"provider": "anthropic", "model": "claude-sonnet-4-6", "uncached_input": 33,
            "output": 2, **kw}


def test_usage_lines_without_session_of_different_prompts_are_not_compared() -> None:
    """newuser7 bug 3 (ex5): two prompts of one model (different prefix_hash), no session: no
    false prefix_regression (it exited 1 with a $0.005 miss)."""
    report = explain([_record(cache_read=1512, cache_write=0, start=1.0, prefix_hash="aaaa"),
                      _record(cache_read=0, cache_write=800, start=2.0, prefix_hash="bbbb")])
    assert report.misses == 0 and report.miss_cost_usd == 0  # no miss: nothing lost (trial 13)
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
    assert report.sessions == 2
    assert {r.session for r in report.requests} == {
        "(no session: anthropic/claude-sonnet-4-6 #aaaa)",
        "(no session: anthropic/claude-sonnet-4-6 #bbbb)"}


def test_usage_lines_of_different_providers_and_models_are_not_compared() -> None:
    """newuser7 bug 3 (ex6, w1): an Anthropic record then an OpenAI one, no session; each
    provider/model/prompt group is checked on its own (w1's healthy groups give hits)."""
    report = explain([_record(cache_read=1512, cache_write=0, start=1.0),
                      {"provider": "openai", "model": "gpt-5", "uncached_input": 1446,
                       "cache_read": 0, "input_total": 1446, "output": 2, "start": 2.0}])
    assert report.misses == 0
    assert [r.status for r in report.requests] == ["cold_start", "cold_start"]
    mixed = [_record(cache_read=0, cache_write=1512, start=1.0, prefix_hash="a1"),
             _record(cache_read=1512, cache_write=0, start=2.0, prefix_hash="a1"),
             {"provider": "openai", "model": "gpt-5", "uncached_input": 1446, "cache_read": 0,
              "input_total": 1446, "output": 2, "start": 3.0, "prefix_hash": "o1"},
             {"provider": "openai", "model": "gpt-5", "uncached_input": 38, "cache_read": 1408,
              "input_total": 1446, "output": 2, "start": 4.0, "prefix_hash": "o1"}]
    report = explain(mixed)
    assert report.misses == 0
    assert [(r.status, r.compared_with_line) for r in report.requests] == [
        ("cold_start", None), ("hit", 1), ("cold_start", None), ("hit", 3)]
    # a real regression inside one group is still found
    bad = explain([*mixed, _record(cache_read=0, cache_write=1512, start=5.0, prefix_hash="a1")])
    assert bad.misses == 1 and bad.requests[-1].status == "prefix_regression"
    assert bad.requests[-1].compared_with_line == 2


def test_usage_lines_of_one_session_compare_only_the_same_provider_model_and_prompt() -> None:
    """Within a session: another model's line is not the baseline; a regression is flagged
    whether the prefix_hash moved or not (the wrapper's hash covers the prefix up to the last
    breakpoint, which moves with every turn: skipping such pairs would turn the check off in
    every wrapped chat)."""
    lines = [_record(cache_read=0, cache_write=2000, start=1.0, session="s"),
             {"provider": "openai", "model": "gpt-5", "uncached_input": 1446, "cache_read": 0,
              "input_total": 1446, "output": 2, "start": 2.0, "session": "s"},
             _record(cache_read=2000, cache_write=100, start=3.0, session="s")]
    report = explain(lines)
    assert [(r.status, r.compared_with_line) for r in report.requests] == [
        ("cold_start", None), ("cold_start", None), ("hit", 1)]
    hashed = [_record(cache_read=0, cache_write=2000, start=1.0, session="s", prefix_hash="p"),
              _record(cache_read=0, cache_write=900, start=2.0, session="s", prefix_hash="q")]
    row = explain(hashed).requests[-1]
    assert (row.status, row.lost_tokens, row.compared_with_line) == ("prefix_regression", 2000, 1)
    same = [_record(cache_read=0, cache_write=2000, start=1.0, session="s", prefix_hash="p"),
            _record(cache_read=500, cache_write=0, start=2.0, session="s", prefix_hash="p")]
    last = explain(same).requests[-1]
    assert last.status == "prefix_regression" and last.lost_tokens == 1500


def test_usage_only_ttl_cause_uses_the_previous_write_ttl() -> None:
    """A 10-minute gap after a 1 h write is no TTL expiry (the check used 300 s for every
    write); after a 5 min write it is; OpenAI's default is the engine's in-memory retention."""
    def pair(first: dict[str, Any], gap: float) -> Any:
        return explain([{**first, "start": 1000.0, "session": "s"},
                        _record(cache_read=0, cache_write=2000, start=1000.0 + gap,
                                session="s")]).requests[-1]

    one_hour = _record(cache_read=0, cache_write=2000, cache_write_5m=0, cache_write_1h=2000)
    row = pair(one_hour, 600)
    assert row.status == "prefix_regression" and row.cause is None
    assert row.detail["ttl_seconds"] == 3600
    assert pair(one_hour, 4000).cause == "ttl_expired"
    five = _record(cache_read=0, cache_write=2000, cache_write_5m=2000, cache_write_1h=0)
    assert pair(five, 600).cause == "ttl_expired"
    assert pair(_record(cache_read=0, cache_write=2000), 600).cause == "ttl_expired"
    # a raw Anthropic usage object with 1 h writes (a "usage" line)
    raw = [{"session_id": "s", "model": MODEL, "timestamp": 1000.0 + t,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": r,
                      "cache_creation_input_tokens": w,
                      "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                         "ephemeral_1h_input_tokens": w}}}
           for t, r, w in ((0, 0, 2000), (600, 0, 2000))]
    assert explain(raw).requests[-1].cause is None

    def openai(**kw: Any) -> dict[str, Any]:
        return {"provider": "openai", "model": "gpt-5", "uncached_input": 100,
                "input_total": 100, "output": 2, "session": "s", **kw}
    from promptcache.diff._engine import entry_ttl_seconds

    late = entry_ttl_seconds(None, "openai") + 60
    report = explain([openai(cache_read=1500, start=0.0), openai(cache_read=0, start=late)])
    assert report.requests[-1].cause == "ttl_expired"
    assert report.requests[-1].detail["ttl_seconds"] == entry_ttl_seconds(None, "openai")
    report = explain([openai(cache_read=1500, start=0.0),
                      openai(cache_read=0, start=late - 120)])
    assert report.requests[-1].status == "prefix_regression"
    assert report.requests[-1].cause is None


def test_one_compare_per_request_when_only_a_short_prefix_is_shared(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 7: when the only prefix a request shares with its session's entries is short
    (earlier turns sent as strings, the newest as a marked block, so only the system entry
    matches), every writer of that prefix was compared (3 per request, explain ~45 % slower);
    all of them wrote the same prefix, so after the first none can read more."""
    import promptcache.diff._explain as module

    calls = 0
    real = module._compare

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_compare", counted)
    reqs = []
    for r in conversation("flat", 8):
        msgs = [{**m, "content": m["content"][0]["text"]} for m in r["messages"][:-1]]
        reqs.append({**r, "messages": [*msgs, r["messages"][-1]]})
    report = explain([{"request": r, "session_id": "s"} for r in reqs])
    assert len(report.requests) == 8
    assert calls == 7  # one per request after the first


class _Body(dict):  # type: ignore[type-arg]
    """A parsed JSON object that a weak reference can follow (a plain dict cannot)."""


def test_explain_lets_go_of_the_bodies_outside_the_baseline_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A growing conversation's log is quadratic in size: explain kept every parsed line (1.5 GB
    on 2,000 requests). Only the requests the baseline search can still reach (the session's
    window, and its last request) may hold on to their bodies; the rest are let go as the log
    is read, so at no point are more than a window's worth of bodies alive."""
    import weakref

    import promptcache.diff._explain as module

    n = 3 * module._WINDOW
    log = tmp_path / "growing.jsonl"
    with log.open("w", encoding="utf-8") as out:
        for k, r in enumerate(conversation("grow", n)):
            out.write(json.dumps({"request": r, "timestamp": 1_700_000_000 + 20 * k}) + "\n")
    bodies: list[weakref.ref[Any]] = []
    most_alive = 0
    real_entry, real_prepare = module._entry, module.prepare

    def loads(text_: str, label: str, n_: int) -> Any:
        return json.loads(text_, object_hook=_Body)

    def entry(n_: int, obj: Any, label: str) -> Any:
        e = real_entry(n_, obj, label)
        if e.request is not None:
            bodies.append(weakref.ref(e.request))
        return e

    def prepare(*args: Any, **kwargs: Any) -> Any:
        nonlocal most_alive
        most_alive = max(most_alive, sum(1 for b in bodies if b() is not None))
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(module, "_loads", loads)
    monkeypatch.setattr(module, "_entry", entry)
    monkeypatch.setattr(module, "prepare", prepare)
    report = explain(log)
    assert len(bodies) == n and len(report.requests) == n
    assert [r.status for r in report.requests] == ["cold_start"] + ["hit"] * (n - 1)
    assert [r.compared_with_line for r in report.requests] == [None, *range(1, n)]
    # the window of indexed requests, the session's last request and the line being read
    assert most_alive <= module._WINDOW + 2


def test_a_later_unreadable_line_is_reported_before_an_earlier_bad_request() -> None:
    """Lines are explained as they are read; a line that cannot be read is still reported
    before an error found while explaining an earlier line (as when all were read first)."""
    bad = json.dumps({"request": {"messages": "nope", "system": "x"}}) + "\n"
    with pytest.raises(InputError, match="line 1"):
        explain([bad])
    with pytest.raises(InputError, match="line 2: invalid JSON"):
        explain([bad, "{oops\n"])
    with pytest.raises(InputError, match="line 3: a log line must be a JSON object"):
        explain(iter([bad, "\n", "[1]\n"]))


def _named_baseline_lines() -> list[dict[str, Any]]:
    reqs = conversation("alpha", 3)
    for r in reqs[1:]:
        r["system"][0]["text"] += " v2"
    reqs[2]["diagnostics"] = {"previous_message_id": "msg_1"}
    return [{"request": reqs[0], "response_id": "msg_1"},
            {"request": reqs[1], "response_id": "msg_2"},
            {"request": reqs[2], "response": {"id": "msg_3", "diagnostics": {
                "cache_miss_reason": {"type": "system_changed",
                                      "cache_missed_input_tokens": 1600}}}}]


@pytest.mark.parametrize("form", ["list", "generator", "file", "file with escaped key"])
def test_a_named_diagnostics_baseline_is_found_in_every_form_of_log(
        tmp_path: Path, form: str) -> None:
    """The views of responses that later requests name are kept (and only those): found by a
    scan before explaining, whether the log is a list, a one-shot iterator or a file (a key
    spelt with JSON escapes included)."""
    lines = _named_baseline_lines()
    log: Any = lines
    if form == "generator":
        log = (x for x in lines)
    elif form.startswith("file"):
        text_ = "\n".join(json.dumps(x) for x in lines) + "\n"
        if form == "file with escaped key":
            text_ = text_.replace('"previous_message_id"', '"\\u0070revious_message_id"')
            assert "previous_message_id" not in text_
        log = tmp_path / "log.jsonl"
        log.write_text(text_, encoding="utf-8")
    third = explain(log).requests[2]
    assert third.detail["diagnostics_baseline"] == "msg_1"
    assert third.detail["cause_vs_baseline"] == "system_changed"
    assert third.diagnostics is not None and third.diagnostics.agrees is True


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs os.mkfifo")
def test_a_pipe_is_read_once(tmp_path: Path) -> None:
    """Review 11: explain read a path twice (a light scan, then the explaining pass), so a pipe,
    /dev/stdin or a process substitution was drained by the scan: "empty file", exit 2."""
    import os
    import threading

    reqs = conversation("pipe", 3)
    reqs[2]["system"][0]["text"] += " v2"
    text = "".join(json.dumps(r) + "\n" for r in reqs)
    regular = tmp_path / "log.jsonl"
    regular.write_text(text)
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as out:
            out.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        piped = explain(fifo, progress=False)
    finally:
        writer.join(timeout=10)
    assert [r.cause for r in piped.requests] == [r.cause for r in explain(
        regular, progress=False).requests]
    assert piped.misses == 1
