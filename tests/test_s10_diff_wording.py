"""``diff`` wording that contradicted its verdict (new-user trial 15, F12): ``diff A A`` said
"the miss is not explained by content" with no miss, and a thinking / effort change whose cut
costs a token or so said "verdict no miss" next to "cause thinking_changed" and "1 token
rewritten" with no word on why that is no miss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from promptcache.diff import diff
from promptcache.diff._cli import diff_command
from tests.cases import filler


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 2000,
            "system": [{"type": "text", "text": filler(3000),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]}],
            **extra}


def _cli(tmp_path: Path, a: dict[str, Any], b: dict[str, Any]) -> str:
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    result = CliRunner().invoke(diff_command, [str(pa), str(pb)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_identical_payloads_speak_of_no_miss(tmp_path: Path) -> None:
    r = diff(_request(), _request())
    assert r.verdict == "no_miss" and r.cause == "no_difference"
    assert "miss" not in r.causes[0].title
    assert "the miss is not explained" not in _cli(tmp_path, _request(), _request())


def test_a_negligible_cut_says_why_it_is_no_miss(tmp_path: Path) -> None:
    for extra in ({"thinking": {"type": "enabled", "budget_tokens": 1024}},
                  {"output_config": {"effort": "high"}}):
        r = diff(_request(), _request(**extra))
        assert r.verdict == "no_miss" and r.cause in ("thinking_changed", "effort_changed")
        assert r.notes[0].startswith("no miss: ") and "negligible" in r.notes[0]
        out = _cli(tmp_path, _request(), _request(**extra))
        assert "verdict no miss (negligible" in out and f"change {r.cause}" in out
        assert f"cause {r.cause}" not in out


def test_effort_set_on_one_side_only_is_hedged_on_the_model_default() -> None:
    # "setting effort explicitly to the model's default ... does not invalidate"
    # (hosted-api-rules.md 1.7); the catalog records no default effort per model
    r = diff(_request(), _request(output_config={"effort": "high"}))
    cause = next(c for c in r.causes if c.code == "effort_changed")
    assert "default" in cause.title and cause.detail["if_model_default"]
    both = diff(_request(output_config={"effort": "low"}),
                _request(output_config={"effort": "high"}))
    cause = next(c for c in both.causes if c.code == "effort_changed")
    assert "if_model_default" not in cause.detail  # two explicit values: a real change
