"""The demo's code path: its printed numbers are the backend's own metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from promptcache.demo import run_demo
from promptcache.local.testing import SMALL_MODEL

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    printed: list[object] = []
    rep = run_demo(examples=EXAMPLES, print_fn=printed.append, **SMALL_MODEL)
    rep.printed = printed  # type: ignore[attr-defined]
    return rep


def test_printed_numbers_equal_backend_metrics(report) -> None:  # type: ignore[no-untyped-def]
    assert [r.provider for r in report.runs] == ["anthropic", "openai", "anthropic"]
    for run in report.runs:
        assert len(run.rows) == 6
        assert sum(r.prompt_tokens for r in run.rows) == run.backend["prompt"]
        assert sum(r.cache_read for r in run.rows) == run.backend["cache_read"]
        assert sum(r.cache_write for r in run.rows) == run.backend["cache_write"]
        # every token reported as a cache read was served from the block cache
        assert run.backend["reused"] >= run.backend["cache_read"]
        for r in run.rows:
            assert r.cache_read + r.cache_write + r.uncached == r.prompt_tokens


def test_builder_runs_read_the_cache_and_broken_run_does_not(report) -> None:  # type: ignore[no-untyped-def]
    good_anthropic, good_openai, broken = report.runs
    assert good_anthropic.rows[0].cache_read == 0 and good_anthropic.rows[0].cache_write > 1024
    for run in (good_anthropic, good_openai):
        for prev, row in zip(run.rows, run.rows[1:], strict=False):
            # each turn reads at least the previous turn's cached prompt minus OpenAI's
            # 128-token rounding
            assert row.cache_read >= prev.prompt_tokens - 128 - prev.output
    assert all(r.cache_read == 0 for r in broken.rows)
    assert all(r.cache_write > 0 for r in broken.rows)
    assert broken.cost_usd is not None and good_anthropic.cost_usd is not None
    assert broken.cost_usd > good_anthropic.cost_usd
    assert broken.savings_usd is not None and broken.savings_usd < 0
    explained = [r.explanation for r in broken.rows[1:]]
    assert all(e is not None and e.startswith("system_changed at system[0].text") for e in explained)
    assert any("PC101" in w for w in broken.lint_warnings)
    assert not good_anthropic.lint_warnings


def test_demo_lints_examples(report) -> None:  # type: ignore[no-untyped-def]
    assert report.lint_files >= 5
    assert report.lint_findings, "the broken template must be flagged"
    assert all("templates/broken/" in f for f in report.lint_findings)


def test_broken_run_live_diff_agrees_with_the_usage_table(report) -> None:  # type: ignore[no-untyped-def]
    # the live diff under the table is calibrated to the previous turn's usage: what turn N
    # wrote is what turn N+1 lost (trial 10, 6a: it printed a cl100k estimate, 1767 vs 1,854)
    broken = report.runs[2]
    for prev, row in zip(broken.rows, broken.rows[1:], strict=False):
        assert row.explanation is not None
        assert f": {prev.cache_write} tokens rewritten" in row.explanation, row.explanation
