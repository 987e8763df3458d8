"""``promptcache report`` and ``promptcache breakeven`` through the real CLI group."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import JsonlSink, UsageRecord
from promptcache.usage.sinks import iter_usage_log_lines


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "usage.jsonl"
    with JsonlSink(path) as sink:
        for i in range(4):
            sink.write(UsageRecord(provider="anthropic", model="claude-sonnet-4-5",
                                   uncached_input=100, cache_read=0 if i == 0 else 10_000,
                                   cache_write=10_000 if i == 0 else 0, cache_write_5m=(
                                       10_000 if i == 0 else 0), cache_write_1h=0, output=50,
                                   label="chat", session="s1", start=1000.0 + 60 * i))
        sink.write(UsageRecord(provider="openai", model="gpt-4o", uncached_input=976,
                               cache_read=1024, input_total=2000, output=10, label="search",
                               start=1100.0))
    return path


def test_report_json_has_groups_total_and_exact_cost(log: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(log), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    groups = {(g["label"], g["model"]): g for g in data["groups"]}
    chat = groups[("chat", "claude-sonnet-4-5")]
    assert chat["requests"] == 4
    assert chat["hit_rate"] == pytest.approx(30_000 / (400 + 40_000))
    assert chat["request_hit_rate"] == pytest.approx(0.75)
    m = Decimal(10) ** 6
    expected = (400 * 3 + 30_000 * Decimal("0.3") + 10_000 * Decimal("3.75") + 200 * 15) / m
    assert Decimal(chat["cost_usd"]) == expected
    assert Decimal(chat["savings_usd"]) == (40_400 * 3) / m - (
        400 * 3 + 30_000 * Decimal("0.3") + 10_000 * Decimal("3.75")) / m
    assert data["total"]["requests"] == 5


def test_report_text_and_csv(log: Path) -> None:
    text = CliRunner().invoke(main, ["report", str(log)])
    assert text.exit_code == 0
    assert "claude-sonnet-4-5" in text.output and "TOTAL" in text.output
    assert "74.26%" in text.output  # 30000 / 40400
    res = CliRunner().invoke(main, ["report", str(log), "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert [r["label"] for r in rows] == ["chat", "search", "TOTAL"]
    assert rows[1]["hit_rate"] == str(1024 / 2000)


def test_report_plot_writes_png(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "plot.png"
    res = CliRunner().invoke(main, ["report", str(log), "--format", "json", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"provider": "x"}\n{"provider": "x"}\nnot json\n')
    res = CliRunner().invoke(main, ["report", str(bad)])
    assert res.exit_code == 2
    assert res.stderr.strip() == f"promptcache: {bad}:3: not JSON (Expecting value)"
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 2
    assert missing.stderr == (f"promptcache: {tmp_path / 'none.jsonl'}: No such file or "
                              "directory\n")
    prices = tmp_path / "p.toml"
    prices.write_text("[models.x]\ninput = -1\n")
    good = tmp_path / "good.jsonl"
    good.write_text('{"provider": "x"}\n')
    res = CliRunner().invoke(main, ["report", str(good), "--prices", str(prices)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"promptcache: {prices}: ")


@pytest.mark.parametrize("content", ["", "\n  \n"])
@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_report_empty_file_exits_2(tmp_path: Path, content: str, fmt: str) -> None:
    """An empty log is bad input, not an empty table that reads as "nothing was spent"."""
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(main, ["report", str(path), "--format", fmt])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [f"promptcache: {path}: empty file"]


def test_breakeven_text_and_json() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-5",
                                    "--prefix-tokens", "5000", "--ttl", "1h"])
    assert res.exit_code == 0
    assert "caching is cheaper from 3 requests" in res.output
    res = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-5",
                                    "--prefix-tokens", "20000", "--interval", "400",
                                    "--requests", "5", "--format", "json"])
    data = json.loads(res.output)
    assert data["requests"] == 2 and data["policy"]["best"] == "5m+keepalive"
    assert {o["name"] for o in data["policy"]["options"]} == {"none", "5m", "1h",
                                                              "5m+keepalive"}
    table = CliRunner().invoke(main, ["breakeven", "--model", "gpt-5", "--prefix-tokens",
                                      "20000", "--interval", "600"])
    assert "cheapest: 24h" in table.output


def test_breakeven_bad_input_exits_2() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", "gpt-99-ultra",
                                    "--prefix-tokens", "5000"])
    assert res.exit_code == 2 and res.stderr.startswith(
        "promptcache: --model gpt-99-ultra: unknown model; closest catalog ids: ")
    res = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-5",
                                    "--prefix-tokens", "5000", "--ttl", "2h"])
    assert res.exit_code == 2 and res.stderr.startswith("promptcache: --ttl: ")
    below = CliRunner().invoke(main, ["breakeven", "--model", "claude-haiku-4-5",
                                      "--prefix-tokens", "100"])
    assert below.exit_code == 0 and "caching never pays" in below.output


def test_report_text_lists_diagnostics(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    with JsonlSink(path) as sink:
        for i, (read, write, start) in enumerate([(0, 5000, 0.0), (5000, 0, 60.0),
                                                  (0, 5000, 900.0)]):
            sink.write(UsageRecord(provider="anthropic", model="claude-sonnet-4-5",
                                   uncached_input=10, cache_read=read, cache_write=write,
                                   output=1, session="s1", start=start, request_id=f"r{i}"))
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 0
    assert "collapse: session 's1', request r2: cache reads dropped to 0 (ttl_expired)" in (
        res.output)
    data = json.loads(CliRunner().invoke(main, ["report", str(path), "--format",
                                                "json"]).output)
    assert data["events"] == {"collapse": 1}


ANTHROPIC_USAGE = {"input_tokens": 10, "cache_read_input_tokens": 2048,
                   "cache_creation_input_tokens": 0, "output_tokens": 5}
OPENAI_USAGE = {"prompt_tokens": 3000, "completion_tokens": 5, "total_tokens": 3005,
                "prompt_tokens_details": {"cached_tokens": 2048}}


def _lines(tmp_path: Path, *objs: object) -> Path:
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in objs) + "\n", encoding="utf-8")
    return path


def test_report_reads_raw_api_usage_lines(tmp_path: Path) -> None:
    path = _lines(tmp_path, {**OPENAI_USAGE, "model": "gpt-4o"},
                  {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
                   "choices": [], "usage": OPENAI_USAGE},
                  {"id": "msg_1", "type": "message", "model": "claude-sonnet-4-5",
                   "usage": ANTHROPIC_USAGE})
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    groups = {g["model"]: g for g in data["groups"]}
    gpt = groups["gpt-4o"]
    # prompt_tokens includes cached_tokens: 952 uncached + 2048 read, twice
    assert (gpt["requests"], gpt["uncached_input"], gpt["cache_read"]) == (2, 1904, 4096)
    assert gpt["hit_rate"] == pytest.approx(2048 / 3000)
    claude = groups["claude-sonnet-4-5"]
    assert (claude["uncached_input"], claude["cache_read"], claude["output"]) == (10, 2048, 5)
    m = Decimal(10) ** 6
    assert Decimal(claude["cost_usd"]) == (10 * 3 + 2048 * Decimal("0.3") + 5 * 15) / m
    assert data["cost_unknown"] == []


def test_report_keeps_label_and_session_of_wrapped_usage_lines(tmp_path: Path) -> None:
    path = _lines(tmp_path,
                  {"label": "search", "session": "s9", "model": "gpt-4o", "usage": OPENAI_USAGE},
                  {"label": "chat", "model": "claude-sonnet-4-5", "usage": ANTHROPIC_USAGE})
    records = [r for _, r in iter_usage_log_lines(path)]
    assert [(r.label, r.session, r.model) for r in records] == [
        ("search", "s9", "gpt-4o"), ("chat", None, "claude-sonnet-4-5")]
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    groups = {(g["label"], g["model"]) for g in json.loads(res.output)["groups"]}
    assert groups == {("search", "gpt-4o"), ("chat", "claude-sonnet-4-5")}


def test_report_openai_usage_without_details_has_an_unknown_split(tmp_path: Path) -> None:
    # no prompt_tokens_details: the cached count is unknown, so uncached/read are too (not 0)
    plain = {"prompt_tokens": 2000, "completion_tokens": 10, "total_tokens": 2010}
    path = _lines(tmp_path, {"label": "plain", "model": "gpt-4o", "usage": plain},
                  {"label": "full", "model": "gpt-4o", "usage": OPENAI_USAGE})
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    groups = {g["label"]: g for g in data["groups"]}
    assert (groups["plain"]["uncached_input"], groups["plain"]["cache_read"]) == (None, None)
    assert groups["plain"]["hit_rate"] is None and groups["plain"]["output"] == 10
    assert (groups["full"]["uncached_input"], groups["full"]["cache_read"]) == (952, 2048)
    assert (data["total"]["uncached_input"], data["total"]["cache_read"]) == (None, None)
    text = CliRunner().invoke(main, ["report", str(path)]).output
    row = next(line for line in text.splitlines() if " plain " in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:7] == ["plain", "gpt-4o", "1 (1 unknown)", "?", "?", "?", "?"]
    table = csv.DictReader(io.StringIO(
        CliRunner().invoke(main, ["report", str(path), "--format", "csv"]).output))
    by_label = {r["label"]: r for r in table}
    assert (by_label["plain"]["uncached_input"], by_label["plain"]["cache_read"]) == ("", "")
    assert by_label["TOTAL"]["uncached_input"] == ""


def test_report_normalized_relay_usage_splits_the_prompt(tmp_path: Path) -> None:
    # BR-25's normalized inclusive shape read from a log: 2000 = 1200 uncached + 500 + 300
    usage = {"prompt_tokens": 2000, "cached_read_tokens": 500, "cache_creation_tokens": 300,
             "completion_tokens": 0, "prompt_tokens_includes_cache": True}
    path = _lines(tmp_path, {"model": "claude-sonnet-4-5", "usage": usage})
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    total = json.loads(res.output)["total"]
    assert (total["uncached_input"], total["cache_read"], total["cache_write"]) == (1200, 500,
                                                                                   300)
    assert total["hit_rate"] == pytest.approx(500 / 2000)


def test_report_raw_usage_without_model_has_tokens_but_unknown_cost(tmp_path: Path) -> None:
    path = _lines(tmp_path, ANTHROPIC_USAGE, ANTHROPIC_USAGE)
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["total"]["cache_read"] == 4096 and data["total"]["uncached_input"] == 20
    assert data["total"]["cost_usd"] is None  # never a guessed number
    assert data["cost_unknown"] == ["2 records name no model (pass --model to price them)"]
    text = CliRunner().invoke(main, ["report", str(path)])
    assert "cost unknown: 2 records name no model" in text.output
    priced = CliRunner().invoke(main, ["report", str(path), "--format", "json",
                                       "--model", "claude-sonnet-4-5"])
    assert priced.exit_code == 0, priced.output
    total = json.loads(priced.output)["total"]
    assert Decimal(total["cost_usd"]) == 2 * (10 * 3 + 2048 * Decimal("0.3") + 5 * 15) / 10**6


def test_report_unreadable_usage_line_exits_2_with_file_line_and_reason(tmp_path: Path) -> None:
    path = _lines(tmp_path, ANTHROPIC_USAGE, {"latency_ms": 120},
                  {"input_tokens": "ten"})
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (f"promptcache: {path}:2: not API usage: no recognisable usage fields "
                          "(keys: latency_ms)\n")
    path = _lines(tmp_path, ANTHROPIC_USAGE, {"input_tokens": "ten"})
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (f"promptcache: {path}:2: not API usage: expected a token count, "
                          "got 'ten'\n")
    mixed = _lines(tmp_path, ANTHROPIC_USAGE, OPENAI_USAGE)
    res = CliRunner().invoke(main, ["report", str(mixed), "--model", "claude-sonnet-4-5"])
    assert res.exit_code == 2 and res.stderr.startswith(
        f"promptcache: {mixed}:2: openai usage cannot be priced as --model claude-sonnet-4-5")
    res = CliRunner().invoke(main, ["report", str(mixed), "--model", "claude-sonet-4-5"])
    assert res.exit_code == 2
    assert res.stderr.startswith(
        "promptcache: --model: no prices for model 'claude-sonet-4-5'; closest")


def test_report_errors_use_the_promptcache_prefix_like_every_command(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    for args in (["report", str(missing)], ["diff", str(missing), str(missing)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2
        assert res.stderr == f"promptcache: {missing}: No such file or directory\n", args


@pytest.mark.parametrize(("doc", "kind", "convert"), [
    ({"id": "msg_1", "type": "message", "usage": ANTHROPIC_USAGE}, "document", "jq -c ."),
    ([{"usage": ANTHROPIC_USAGE}, {"usage": ANTHROPIC_USAGE}], "array", "jq -c '.[]'"),
])
def test_report_pretty_printed_json_document_says_jsonl_is_expected(
        tmp_path: Path, doc: object, kind: str, convert: str) -> None:
    path = tmp_path / "response.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (f"promptcache: {path}: a JSON {kind}, not JSONL: usage logs hold one "
                          f"response or usage object per line ({convert} {path} converts "
                          "it)\n")
    # the converted file is read
    path.write_text("".join(json.dumps(o) + "\n" for o in (doc if isinstance(doc, list)
                                                             else [doc])), encoding="utf-8")
    assert CliRunner().invoke(main, ["report", str(path)]).exit_code == 0
    # a JSONL file whose first line is broken keeps the line's own error
    path.write_text('{"usage": \n{"input_tokens": 5}\n', encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.stderr == f"promptcache: {path}:1: not JSON (Expecting value)\n"


def _one_line_exit_2(res: Any, start: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr that starts with ``start``."""
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(start), res.stderr


@pytest.mark.parametrize("lines", [["[" * 100_000 + "]" * 100_000],
                                   ['{"input_tokens": 5, "output_tokens": 1}',
                                    '{"usage": ' + "[" * 100_000 + "]" * 100_000 + "}"]])
def test_report_deeply_nested_json_is_bad_input_not_a_traceback(
        tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(path)])
    _one_line_exit_2(res, f"promptcache: {path}:{len(lines)}: JSON nested too deeply")


def test_report_deeply_nested_prices_file_is_bad_input(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"input_tokens": 5, "output_tokens": 1}\n', encoding="utf-8")
    prices = tmp_path / "deep.toml"
    prices.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(good), "--prices", str(prices)])
    _one_line_exit_2(res, f"promptcache: {prices}: ")


@pytest.mark.parametrize(("target", "reason"), [
    ("adir", "is a directory"),
    ("missing/x.png", "directory "),
    ("noext", "no suffix"),
    ("plot.jpg", "suffix '.jpg'"),
])
def test_report_plot_target_is_checked_before_anything_is_printed(
        log: Path, tmp_path: Path, target: str, reason: str) -> None:
    (tmp_path / "adir").mkdir()
    out = tmp_path / target
    res = CliRunner().invoke(main, ["report", str(log), "--plot", str(out)])
    _one_line_exit_2(res, f"promptcache: {out}: {reason}")
    assert not (tmp_path / "adir.png").exists() and not (tmp_path / "noext.png").exists()


@pytest.mark.parametrize(("name", "magic"), [("plot.svg", b"<?xml"), ("plot.PDF", b"%PDF")])
def test_report_plot_suffix_picks_the_format(log: Path, tmp_path: Path, name: str,
                                             magic: bytes) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / name
    res = CliRunner().invoke(main, ["report", str(log), "--format", "csv", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(magic)
    help_text = CliRunner().invoke(main, ["report", "--help"]).output
    assert "--plot FILE" in help_text and ".svg" in help_text


@pytest.mark.parametrize(("model", "ttl"), [("gpt-5", "banana"), ("gpt-5", "1h"),
                                            ("gpt-4o", "5m")])
def test_breakeven_ttl_for_a_model_without_ttl_is_an_error(model: str, ttl: str) -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", model, "--prefix-tokens", "5000",
                                    "--ttl", ttl])
    _one_line_exit_2(res, f"promptcache: --ttl {ttl}: {model} caches automatically and takes "
                          "no --ttl")


def test_breakeven_offered_ttls_still_work() -> None:
    for model, ttl in (("gpt-5.6", "30m"), ("claude-sonnet-4-6", "1h")):
        res = CliRunner().invoke(main, ["breakeven", "--model", model, "--prefix-tokens",
                                        "5000", "--ttl", ttl])
        assert res.exit_code == 0 and f"TTL {ttl}:" in res.stdout, res.output
    res = CliRunner().invoke(main, ["breakeven", "--model", "gpt-5.6", "--prefix-tokens",
                                    "5000", "--ttl", "5m"])
    _one_line_exit_2(res, "promptcache: --ttl: gpt-5.6: TTL '5m' not offered (offered: 30m)")


@pytest.mark.parametrize("option", [["--requests", "3"], ["--suffix-tokens", "10"],
                                    ["--output-tokens", "10"], ["--keepalive-cap", "1"]])
def test_breakeven_policy_options_need_interval(option: list[str]) -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-6",
                                    "--prefix-tokens", "5000", *option])
    _one_line_exit_2(res, f"promptcache: {option[0]}: needs --interval")
    with_interval = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-6",
                                              "--prefix-tokens", "5000", "--interval", "600",
                                              *option])
    assert with_interval.exit_code == 0, with_interval.output


def test_breakeven_keepalive_cap_needs_a_model_with_a_ttl() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", "gpt-5", "--prefix-tokens", "5000",
                                    "--interval", "600", "--keepalive-cap", "1"])
    _one_line_exit_2(res, "promptcache: --keepalive-cap: gpt-5 has no TTL to keep alive")


def test_breakeven_unknown_model_names_the_closest_ids_and_help_has_units() -> None:
    res = CliRunner().invoke(main, ["breakeven", "--model", "gpt5", "--prefix-tokens", "5"])
    _one_line_exit_2(res, "promptcache: --model gpt5: unknown model; closest catalog ids: ")
    assert "gpt-5" in res.stderr
    from promptcache.usage.cli import breakeven_command

    helps = {p.name: getattr(p, "help", None) or "" for p in breakeven_command.params}
    assert "tokens" in helps["suffix_tokens"] and "tokens" in helps["output_tokens"]


# ---- '-' reads the usage log from standard input (as render, count and lint read it)


@pytest.mark.parametrize("fmt", ["json", "csv", "text"])
def test_report_reads_the_log_from_stdin(log: Path, fmt: str) -> None:
    body = log.read_text(encoding="utf-8")
    res = CliRunner().invoke(main, ["report", "-", "--format", fmt], input=body)
    want = CliRunner().invoke(main, ["report", str(log), "--format", fmt])
    assert res.exit_code == 0 and want.exit_code == 0, res.output
    if fmt == "json":
        got, expected = json.loads(res.output), json.loads(want.output)
        assert got["file"] == "-"
        got.pop("file"), expected.pop("file")
        assert got == expected
    elif fmt == "csv":
        assert res.output == want.output
    else:
        assert "usage: -" in res.output and "TOTAL" in res.output


@pytest.mark.parametrize(("stdin", "start"), [
    ("", "promptcache: -: empty file\n"), (" \n\n", "promptcache: -: empty file\n"),
    ("{x\n", "promptcache: -:1: not JSON ("),
    ('{"input_tokens": 5, "output_tokens": 1}\n\n{x\n', "promptcache: -:3: not JSON ("),
    ("[1]\n", "promptcache: -:1: expected a JSON object"),
    (json.dumps([{"input_tokens": 5, "output_tokens": 1}], indent=2),
     "promptcache: -: a JSON array, not JSONL: usage logs hold one response or usage object "
     "per line (jq -c '.[]' converts it)"),
    ('{"input_tokens": 5}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
     "promptcache: -:2: JSON nested too deeply"),
])
def test_report_bad_stdin_is_one_line_exit_2(stdin: str, start: str) -> None:
    _one_line_exit_2(CliRunner().invoke(main, ["report", "-"], input=stdin), start)


def test_report_stdin_that_is_not_utf8_is_one_line_exit_2() -> None:
    res = CliRunner().invoke(main, ["report", "-"], input=b"\xff\xfe\n")
    _one_line_exit_2(res, "promptcache: -: not UTF-8 text")


def test_iter_usage_log_lines_parses_given_text_as_the_file() -> None:
    text = '{"input_tokens": 5, "output_tokens": 1}\r\n\n{"prompt_tokens": 7}\n'
    got = [(where, r.provider) for where, r in iter_usage_log_lines("-", text=text)]
    assert [where for where, _ in got] == ["-:1", "-:3"]


def test_report_counts_clamped_records_and_keeps_hit_rate_in_range(tmp_path: Path) -> None:
    # nu7 bug 2: "hit rate 5000.00%" and negative savings, with no word of clamping
    path = tmp_path / "bad.jsonl"
    line = {"model": "gpt-5", "prompt_tokens": 100, "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 5000}}
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "label": "b"}) + "\n",
                    encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["total"]["hit_rate"] == 1.0
    assert Decimal(data["total"]["savings_usd"]) > 0
    assert data["clamped_records"] == 2
    assert data["clamped"][0]["reported"] == "input_total=100,cache_read=5000,uncached_input=0"
    flagged = [a for a in data["anomalies"] if a["kind"] == "usage_anomaly"]
    assert [a["count"] for a in flagged] == [2]  # one line for both, numbers left out
    assert not [a for a in data["anomalies"] if a["kind"] == "anomalous"]
    text = CliRunner().invoke(main, ["report", str(path)]).output
    assert "5000.00%" not in text and "100.00%" in text
    assert "clamped (2 records)" in text and "cache_read=5000" in text


def test_report_reads_langchain_usage_and_lists_unmapped_cache_fields(tmp_path: Path) -> None:
    # nu8 bug 5: LangChain usage_metadata was read as 5,105 uncached Anthropic tokens
    path = tmp_path / "lc.jsonl"
    path.write_text(json.dumps({"input_tokens": 5105, "output_tokens": 16,
                                "input_token_details": {"cache_read": 5100}}) + "\n"
                    + json.dumps({"input_tokens": 50, "output_tokens": 1,
                                  "cache_read_input_tokens": 0,
                                  "odd_details": {"cache_hits": 40}}) + "\n", encoding="utf-8")
    data = json.loads(CliRunner().invoke(main, ["report", str(path), "--format", "json"]).output)
    assert data["total"]["cache_read"] == 5100
    assert data["total"]["uncached_input"] == 5 + 50
    assert [a["message"] for a in data["anomalies"] if a["kind"] == "usage_anomaly"] == [
        "usage flags: unknown_cache_field:odd_details.cache_hits"]


def test_breakeven_without_ttl_does_not_speak_of_a_ttl() -> None:
    # nu7 nit: gpt-5 (automatic caching, no TTL) said "cheaper from 2 requests within the TTL"
    res = CliRunner().invoke(main, ["breakeven", "--model", "gpt-5", "--prefix-tokens", "5000"])
    assert res.exit_code == 0, res.output
    assert "within the TTL" not in res.output
    assert "automatic caching, no write fee: caching is cheaper from 2 requests while the " \
           "provider still holds the prefix" in res.output
    # the catalog's fact with its source, not a sentence in the code (review 7)
    assert "usually cleared after 5-10 min idle" in res.output
    assert "https://developers.openai.com/api/docs/guides/prompt-caching" in res.output
    ttl = CliRunner().invoke(main, ["breakeven", "--model", "claude-sonnet-4-5",
                                    "--prefix-tokens", "5000"])
    assert "TTL 5m: caching is cheaper from 2 requests within the TTL" in ttl.output
