"""Trial 29 (cost owner): a --plot curve that leaves unknown records out says so; OTel
leaves an unknown input count out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import otel_attributes, parse_usage
from promptcache.usage.otel import INPUT_TOKENS


def _svg_labels(path: Path) -> str:
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text()))


@pytest.fixture
def svg_text(monkeypatch: pytest.MonkeyPatch) -> None:
    mpl = pytest.importorskip("matplotlib")
    monkeypatch.setitem(mpl.rcParams, "svg.fonttype", "none")  # labels as <text>


def _report_plot(tmp_path: Path, lines: list[dict[str, object]]) -> str:
    log = tmp_path / "u.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "plot.svg"
    res = CliRunner().invoke(main, ["report", str(log), "--model", "gpt-5.6-sol",
                                    "--plot", str(out)])
    assert res.exit_code == 0, res.output
    return _svg_labels(out)


KNOWN = {"prompt_tokens": 10000, "completion_tokens": 1000,
         "prompt_tokens_details": {"cached_tokens": 4000, "cache_write_tokens": 2000}}
UNKNOWN = {"prompt_tokens": 10000, "completion_tokens": 10}  # no cached / written counts


@pytest.mark.usefixtures("svg_text")
def test_plot_of_a_log_with_unknown_cost_says_its_curves_are_known_only(
        tmp_path: Path) -> None:
    # the table says the cost is "?"; the plot's curve is the known record's $0.0645 alone,
    # so its axis must not read as the log's cost
    labels = _report_plot(tmp_path, [KNOWN, UNKNOWN])
    assert "cumulative known cost (USD)" in labels
    assert "1 of 2 requests" in labels and "cost unknown" in labels
    assert "cumulative known hit rate" in labels


@pytest.mark.usefixtures("svg_text")
def test_plot_of_a_fully_known_log_keeps_the_plain_labels(tmp_path: Path) -> None:
    labels = _report_plot(tmp_path, [KNOWN, KNOWN])
    assert "cumulative cost (USD)" in labels and "cumulative hit rate" in labels
    assert "known" not in labels


def test_otel_input_tokens_left_out_when_unknown() -> None:
    # Anthropic usage without cache fields: input_tokens is the uncached part only
    rec = parse_usage({"input_tokens": 100, "output_tokens": 5}, model="claude-sonnet-4-6")
    assert INPUT_TOKENS not in otel_attributes(rec)


def test_report_json_groups_carry_requests_unknown(tmp_path: Path) -> None:
    """Trial 29: the text ("2 (1 unknown)") and CSV reports gave the count of requests whose
    usage is unknown; the JSON groups did not."""
    import json as _json

    from click.testing import CliRunner

    from promptcache.cli import main

    log = tmp_path / "u.jsonl"
    log.write_text("\n".join(_json.dumps(line) for line in [
        {"provider": "openai", "model": "gpt-4o", "uncached_input": 1000, "cache_read": None,
         "output": 10, "label": "a"},
        {"provider": "openai", "model": "gpt-4o", "uncached_input": 1000, "cache_read": 0,
         "cache_write": 0, "output": 10, "label": "a"}]) + "\n")
    out = CliRunner().invoke(main, ["report", str(log), "--format", "json"])
    assert out.exit_code == 0, out.output
    data = _json.loads(out.output)
    assert data["groups"][0]["requests_unknown"] == 1
    assert data["total"]["requests_unknown"] == 1
