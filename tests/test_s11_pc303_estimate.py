"""Trial 17 finding 4 (lint part): PC303 said "nothing is cached" and "drop it for this model"
for a 4,050-token *estimated* prefix on claude-haiku-4-5 (minimum 4,096), although the estimate
is +-15 % and a marker under the minimum costs nothing (hosted-api-rules.md 1.4)."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.lint import lint_request
from promptcache.lint.finding import Severity
from tests.cases import filler


def _req(model: str, tokens: int) -> dict[str, Any]:
    return {"model": model,
            "system": [{"type": "text", "text": filler(tokens, "s"),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}


def _pc303(req: dict[str, Any]) -> list[Any]:
    return [f for f in lint_request(req) if f.code == "PC303"]


def test_estimate_within_its_error_of_the_minimum_is_not_called_certain() -> None:
    [f] = _pc303(_req("claude-haiku-4-5", 4050))
    assert f.severity == Severity.INFO
    assert f.details["estimate"] is True and f.details["within_error"] is True
    assert f.details["model_minimum"] == 4096
    tokens = f.details["prefix_tokens_at_breakpoint"]
    assert tokens < 4096 <= tokens + f.details["error_tokens"]
    assert "nothing is cached" not in f.message
    assert "within the estimate's error" in f.message
    assert "costs nothing" in f.message and "caches the prefix" in f.message
    assert f.fix is not None and "drop" not in f.fix and "keep the marker" in f.fix


def test_sonnet_1000_tokens_is_within_the_error_too() -> None:
    [f] = _pc303(_req("claude-sonnet-4-6", 1000))  # minimum 1,024; 1,000 x 1.15 = 1,150
    assert f.severity == Severity.INFO and f.details["within_error"] is True


@pytest.mark.parametrize("model,tokens,minimum", [("claude-haiku-4-5", 3000, 4096),
                                                  ("claude-3-5-haiku-20241022", 1500, 2048)])
def test_estimate_far_below_the_minimum_keeps_the_warning(model: str, tokens: int,
                                                          minimum: int) -> None:
    [f] = _pc303(_req(model, tokens))  # even +15 % stays under the minimum
    assert f.severity == Severity.WARNING
    assert f.details["within_error"] is False and f.details["model_minimum"] == minimum
    assert "nothing is cached" in f.message
    assert f.fix is not None and "drop it for this model" in f.fix


def test_exact_count_keeps_todays_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exact count has no error: 4,050 < 4,096 is certain, so the warning stays. Claude
    counts are always estimates here, so the view and its bound are made exact."""
    import dataclasses

    from promptcache.lint import engine
    from promptcache.lint.rules import PC303

    monkeypatch.setattr(PC303, "view_count_bound", lambda view: (True, 0.0))
    orig = engine.RequestContext.__init__

    def exact_init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        self.view = dataclasses.replace(self.view, counter_exact=True)

    monkeypatch.setattr(engine.RequestContext, "__init__", exact_init)
    [f] = _pc303(_req("claude-haiku-4-5", 4050))
    assert f.details["estimate"] is False
    assert f.severity == Severity.WARNING and "nothing is cached" in f.message
    assert "about" not in f.message and f.details["error_tokens"] == 0


def test_cli_prints_the_info_finding(tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from promptcache.cli import main

    path = tmp_path / "haiku4050.json"
    path.write_text(json.dumps(_req("claude-haiku-4-5", 4050)))
    out = CliRunner().invoke(main, ["lint", str(path)]).output
    assert "PC303 [info]" in out and "within the estimate's error" in out
    assert "drop it for this model" not in out
