"""New-user trial 10: diff calibration to A's usage (6b), count's exactness label and
--estimate notes for Anthropic requests (3). The demo's live diff (6a) is in test_demo.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.diff import diff
from promptcache.prefix import render
from promptcache.tokens import count_tokens
from tests.cases import filler

MODEL = "claude-sonnet-4-6"


def _request(stamp: str) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 2,
            "system": [{"type": "text", "text": f"Time: {stamp}\n" + filler(1500, "sys"),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hello 0"}]}


def _estimates(req: dict[str, Any]) -> tuple[int, int]:
    """(tokens up to the breakpoint, tokens after it), estimated."""
    view = render(req)
    top = view.segments[0].end_token
    return top, view.total_tokens - top


def test_same_shaped_b_gets_a_reported_split() -> None:
    a, b = _request("2025-05-04 14:03:27"), _request("2025-05-04 14:03:28")
    top, tail = _estimates(a)
    assert tail < 16  # the estimate misses the framing the provider counts after the marker
    # A's usage: the cached prefix a little above the estimate, the tail 32 tokens above it
    # (what the local backend reported in the trial: write 1,527 vs 1,516, uncached 35 vs 3)
    usage_a = {"input_tokens": tail + 32, "cache_read_input_tokens": 0,
               "cache_creation_input_tokens": top + 11, "output_tokens": 2}
    r = diff(a, b, usage_a=usage_a)
    assert r.predicted is not None
    # the old calibration scaled every segment by A's total ratio: write top+11+29, uncached 3
    assert r.predicted.cache_write == top + 11
    assert r.predicted.uncached_input == tail + 32
    assert r.predicted.cache_read == 0
    assert r.lost_tokens == r.ideal_cache_read == top + 11
    same = diff(a, a, usage_a=usage_a)
    assert same.predicted is not None
    assert same.predicted.cache_read == top + 11 and same.predicted.cache_write == 0
    assert same.predicted.uncached_input == tail + 32
    assert any("cached prefix" in n and "uncached tail" in n for n in r.notes)


def test_calibrated_append_only_turn_scales_the_new_tokens_once() -> None:
    a = _request("2025-05-04")
    b = _request("2025-05-04")
    b["messages"] = [{"role": "user", "content": "hello 0"},
                     {"role": "assistant", "content": filler(300, "reply")},
                     {"role": "user", "content": [{"type": "text", "text": "next",
                                                   "cache_control": {"type": "ephemeral"}}]}]
    top, tail = _estimates(a)
    usage_a = {"input_tokens": tail + 32, "cache_read_input_tokens": 0,
               "cache_creation_input_tokens": top + 11, "output_tokens": 2}
    r = diff(a, b, usage_a=usage_a)
    assert r.predicted is not None and r.cause == "append_only"
    assert r.predicted.cache_read == top + 11  # what A reported writing
    view_b = render(b)
    b_top = max(s.end_token for s in view_b.segments if s.breakpoint is not None)
    scale = (top + 11) / top
    assert r.predicted.cache_write == round(b_top * scale) - (top + 11)
    # B's tail, scaled, plus what A's reported tail held beyond its own scaled estimate
    overhead = (tail + 32) - tail * scale
    assert r.predicted.uncached_input == round((view_b.total_tokens - b_top) * scale
                                               + overhead)


def test_identical_prefix_tokens_counts_whole_blocks_on_anthropic() -> None:
    # the divergence lies inside system[0] (token_offset > 0), but an Anthropic entry ends at
    # a block boundary: B shares no whole block with A, so nothing of it is reusable
    a, b = _request("2025-05-04 14:03:27"), _request("2025-05-04 14:03:28")
    r = diff(a, b)
    assert r.divergence is not None and r.divergence.token_offset > 0
    assert r.identical_prefix_tokens == 0
    assert r.predicted is not None and r.predicted.cache_read == r.identical_prefix_tokens


# ---------------------------------------------------------------------------- count
_ANTHROPIC_NO_MODEL = {
    "max_tokens": 10,
    "tools": [{"name": "search", "description": "find things",
               "input_schema": {"type": "object", "properties": {}}}],
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hello world"}],
}


def test_anthropic_body_without_model_is_an_anthropic_estimate(tmp_path: Path) -> None:
    result = count_tokens(_ANTHROPIC_NO_MODEL)
    assert not result.exact and result.error_bound >= 0.15
    assert result.method == "anthropic-estimate:cl100k_base*1.00"
    named = count_tokens({**_ANTHROPIC_NO_MODEL, "model": "claude-sonnet-4-5"})
    assert result.tokens == named.tokens  # as a Claude model before 4.7
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(_ANTHROPIC_NO_MODEL))
    out = CliRunner().invoke(main, ["count", str(path)])
    assert out.exit_code == 0
    assert "exact" not in out.stdout and "estimate (+-15%)" in out.stdout
    [note] = out.stderr.splitlines()
    assert "names no model" in note and "cl100k_base" in note and "--model" in note


def test_unknown_claude_id_gets_the_note_and_honest_help(tmp_path: Path) -> None:
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(_ANTHROPIC_NO_MODEL))
    refused = CliRunner().invoke(main, ["count", str(path), "-m", "claude-foo"])
    assert refused.exit_code == 2
    assert "--estimate" in refused.output and "cl100k_base" in refused.output
    assert "o200k_base" not in refused.output
    out = CliRunner().invoke(main, ["count", str(path), "-m", "claude-foo", "--estimate"])
    assert out.exit_code == 0 and "anthropic-estimate:cl100k_base*1.00" in out.stdout
    [note] = out.stderr.splitlines()
    assert "'claude-foo' is unknown" in note and "cl100k_base" in note
    own = tmp_path / "own.json"  # the payload's own unknown claude id
    own.write_text(json.dumps({**_ANTHROPIC_NO_MODEL, "model": "claude-foo-9"}))
    out = CliRunner().invoke(main, ["count", str(own)])
    assert out.exit_code == 0 and "'claude-foo-9' is unknown" in out.stderr
    other = CliRunner().invoke(main, ["count", str(path), "-m", "my-llama"])
    assert other.exit_code == 2 and "o200k_base" in other.output
    help_text = " ".join(CliRunner().invoke(main, ["count", "--help"]).output.split())
    assert "a claude-* id: cl100k_base x 1.00" in help_text
    known = CliRunner().invoke(main, ["count", str(path), "-m", "claude-sonnet-4-5"])
    assert known.exit_code == 0 and known.stderr == ""


def test_diff_cli_shows_a_reported_write_for_a_same_shaped_b(tmp_path: Path) -> None:
    a, b = _request("2025-05-04 14:03:27"), _request("2025-05-04 14:03:28")
    top, tail = _estimates(a)
    usage = {"input_tokens": tail + 32, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": top + 11, "output_tokens": 2}
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps({"request": a, "usage": usage}))
    pb.write_text(json.dumps({"request": b, "usage": {**usage}}))
    out = CliRunner().invoke(main, ["diff", str(pa), str(pb)], terminal_width=200)
    assert out.exit_code in (0, 1), out.output
    line = next(x for x in out.output.splitlines() if x.startswith("tokens"))
    assert f"writes {top + 11:,} (predicted, estimated counts calibrated to A's usage)" in line


@pytest.mark.parametrize("error", [1.15, 0.85])
def test_a_long_tails_estimate_error_scales_b_tail_not_added_whole(error: float) -> None:
    """Review 11: A's long uncached tail estimated 15 % off was added to B as a fixed offset (a
    B tail of "hi" predicted 1,021 uncached tokens, or clamped to 0 the other way). A long tail's
    error is proportional: B's tail is scaled by A's tail ratio."""
    from promptcache.diff import diff
    from promptcache.prefix import render

    system = [{"type": "text", "text": "You are a careful assistant. " * 300,
               "cache_control": {"type": "ephemeral"}}]
    a = {"model": "claude-sonnet-4-5", "max_tokens": 10, "system": system,
         "messages": [{"role": "user", "content": "def f(x): return x * 2  # twice\n" * 400}]}
    view = render(a)
    top = sum(s.tokens for s in view.segments if s.tier == "system")
    tail = view.total_tokens - top
    usage_a = {"input_tokens": round(tail * error), "cache_creation_input_tokens": top,
               "cache_read_input_tokens": 0, "output_tokens": 5}
    short = dict(a, messages=[{"role": "user", "content": "hi"}])
    b_tail = render(short).total_tokens - top
    r = diff(a, short, usage_a=usage_a)
    assert r.predicted is not None
    assert r.predicted.uncached_input == round(b_tail * error)
    longer = dict(a, messages=[{"role": "user", "content": "def g(y): return y + 1\n" * 900}])
    r = diff(a, longer, usage_a=usage_a)
    assert r.predicted is not None
    assert r.predicted.uncached_input == round((render(longer).total_tokens - top) * error)
