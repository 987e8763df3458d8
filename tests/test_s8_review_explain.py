"""Review 12 of session 8: ``explain`` on chained Responses logs, ``diff``'s CLI input checks.

F6: a log that starts mid-conversation (a ``previous_response_id`` chain whose first link is
not logged) still explains its later turns against the earlier lines; F14: the light scan reads
only the ids; F16: ``"response"`` given as a string is bad input, not a traceback; F1: a
``conversation=`` turn is not a history edit.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.diff import _explain, explain
from promptcache.diff._cli import diff_command, explain_command

LONG = " ".join(f"Rule {i}: answer about plants, briefly and precisely." for i in range(160))


def _req(text: str, prev: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.6", "instructions": LONG,
                            "input": [{"role": "user", "content": text}], **extra}
    if prev is not None:
        body["previous_response_id"] = prev
    return body


def test_diff_cli_response_as_string_is_bad_input(tmp_path: Any) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"request": _req("hi"),
                                                 "response": "resp_1"}))
    (tmp_path / "b.json").write_text(json.dumps({"request": _req("and?", "resp_1")}))
    out = CliRunner().invoke(diff_command, [str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert '"response" must be an object' in out.output
    assert "a.json" in out.output and "a string" in out.output


def _usage(read: int, write: int, uncached: int = 10) -> dict[str, Any]:
    return {"input_tokens": read + write + uncached, "output_tokens": 20,
            "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write}}


def _line(i: int, body: dict[str, Any], read: int, write: int, *, rid: str | None = None
          ) -> dict[str, Any]:
    return {"request": body, "timestamp": 1_700_000_000 + 10 * i, "session_id": "s0",
            "response": {"id": rid or f"resp_{i}", "usage": _usage(read, write),
                         "output": [{"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text",
                                                  "text": f"answer {i}"}]}]}}


def _mid_log(last_instructions: str) -> list[dict[str, Any]]:
    """Four turns of one chain, from the middle of a log: line 1 continues resp_0, which the
    log does not hold; line 4 changes ``instructions`` and reads nothing."""
    log = [_line(i, _req(f"question {i}", f"resp_{i - 1}"), 1598 + 40 * (i - 1), 40)
           for i in range(1, 4)]
    last = _req("question 4", "resp_3")
    last["instructions"] = last_instructions
    log.append(_line(4, last, 0, 1758))
    return log


def test_explain_log_starting_mid_chain_explains_later_turns() -> None:
    """F6: once the first link is missing, later turns were all "cannot tell" (0 misses)."""
    rep = explain(_mid_log(LONG + " Be brief."))
    rows = rep.requests
    assert rows[0].status == "cannot_tell"  # resp_0 is not in the log
    assert [r.status for r in rows[1:3]] == ["hit", "hit"]
    assert [r.compared_with_line for r in rows[1:]] == [1, 2, 3]
    last = rows[3]
    assert last.status == "miss_explained" and last.cause == "system_changed"
    assert last.lost_tokens == 1678 + 40  # what line 3 left cached (its usage), none read
    assert last.miss_cost_usd is not None and last.miss_cost_usd > 0
    assert rep.misses == 1 and rep.lost_tokens == 1718


def test_explain_cli_mid_chain_miss_exits_1(tmp_path: Any) -> None:
    path = tmp_path / "mid.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _mid_log(LONG + " Be brief.")))
    out = CliRunner().invoke(explain_command, [str(path), "--format", "json"])
    assert out.exit_code == 1, out.output
    report = json.loads(out.output)
    assert report["misses"] == 1 and report["summary"][0]["cause"] == "system_changed"


def test_explain_mid_chain_unchanged_is_no_miss() -> None:
    rep = explain(_mid_log(LONG))
    assert rep.misses == 1  # the same log, but line 4 changes nothing and reads 0
    assert rep.requests[3].status == "unexplained_miss"
    healthy = _mid_log(LONG)
    healthy[3]["response"]["usage"] = _usage(1718, 40)
    rep = explain(healthy)
    assert rep.misses == 0 and rep.requests[3].status == "hit"


def _unlogged_chain(read_b: int) -> list[dict[str, Any]]:
    """Line 2 continues a response the log does not hold, and adds a tool."""
    tool = {"type": "function", "name": "lookup", "description": "Look up a plant",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}
    return [_line(1, _req("question 1"), 0, 1600),
            _line(2, _req("question 2", "resp_elsewhere", tools=[tool]), read_b, 1650)]


def test_explain_unlogged_chain_still_reports_a_tool_change() -> None:
    """F6: the named response is not in the log: cannot_tell() against the session's last
    line lists the tool change, and with a short read the row is a miss."""
    rep = explain(_unlogged_chain(0))
    row = rep.requests[1]
    assert row.status == "miss_explained", row
    assert row.cause is not None and row.cause.startswith("tool")
    assert "previous_response_chained" in row.secondary
    assert row.lost_tokens == 1600 and row.compared_with_line == 1
    assert rep.misses == 1


def test_explain_unlogged_chain_with_full_read_stays_cannot_tell() -> None:
    rep = explain(_unlogged_chain(1600))
    row = rep.requests[1]
    assert row.status == "cannot_tell" and rep.misses == 0
    assert row.secondary and row.secondary[0].startswith("tool")
    assert row.detail["causes_not_confirmed_by_usage"] == row.secondary


def test_explain_conversation_turns_are_not_history_edits() -> None:
    """F1: ``conversation=`` turns (the server prepends the conversation's items) were
    compared as whole prompts: every turn a message_rewritten miss."""
    log = [_line(i, _req(f"question {i}", conversation="conv_123"),
                 0 if i == 1 else 1560 + 40 * (i - 2), 1560 if i == 1 else 40)
           for i in range(1, 4)]
    rep = explain(log)
    assert rep.misses == 0
    assert [r.status for r in rep.requests] == ["cannot_tell"] * 3
    assert all(r.path == "conversation" and r.detail["conversation"] == "conv_123"
               for r in rep.requests)
    assert all(r.cause != "message_rewritten" for r in rep.requests)


def test_explain_conversation_model_change_with_no_read_is_a_miss() -> None:
    log = [_line(1, _req("q1", conversation={"id": "conv_9"}), 0, 1560),
           _line(2, {**_req("q2", conversation={"id": "conv_9"}), "model": "gpt-5.5"}, 0, 1600)]
    row = explain(log).requests[1]
    assert row.status == "miss_explained" and row.cause == "model_changed"
    assert row.detail["conversation"] == "conv_9"


def test_scan_reads_only_the_ids(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """F14: the light scan ran the whole line reader (request checks, output items) on every
    chained line to read one id."""
    log = _mid_log(LONG)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in log))

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the scan read a whole line")

    monkeypatch.setattr(_explain, "_entry", boom)
    monkeypatch.setattr(_explain, "response_output", boom)
    for source in (path, log, [json.dumps(x) for x in log]):
        n, named, chains = _explain._scan(source, "log")
        assert n == 4 and named == {}
        assert chains == {"resp_0": 1, "resp_1": 1, "resp_2": 1, "resp_3": 1}
