"""Regression tests for new-user trial 14, finding F3: ``lint --baseline`` matches with
multiplicity (each baseline entry hides one finding), so a second identical flow is reported."""

from __future__ import annotations

import io
import json
from pathlib import Path

from promptcache.lint.api import lint_paths
from promptcache.lint.cli import main
from promptcache.lint.config import LintConfig

HEAD = "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"


def _fn(name: str) -> str:
    return (f"\ndef {name}(q):\n"
            "    now = datetime.datetime.now().isoformat()\n"
            "    return client.messages.create(model=\"claude-sonnet-4-6\", max_tokens=5, "
            "system=f\"Now {now}. Rules...\", messages=[{\"role\": \"user\", \"content\": q}])\n")


def run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue()


def test_second_identical_flow_is_reported_against_the_old_baseline(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(HEAD + _fn("ask"), encoding="utf-8")
    code, out = run([str(app), "--format", "json"])
    assert code == 1 and len(json.loads(out)["findings"]) == 1
    baseline = tmp_path / "baseline.json"
    baseline.write_text(out, encoding="utf-8")
    assert run([str(app), "--baseline", str(baseline)])[0] == 0  # the old finding stays hidden

    app.write_text(HEAD + _fn("ask") + _fn("summarise"), encoding="utf-8")
    code, out = run([str(app), "--baseline", str(baseline), "--format", "json"])
    doc = json.loads(out)
    assert code == 1
    assert [(f["code"], f["line"]) for f in doc["findings"]] == [("PC101", 10)]
    assert doc["hidden"]["in_baseline"] == 1  # never more than the baseline holds


def test_a_fingerprint_listed_twice_hides_two_findings(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(HEAD + _fn("ask") + _fn("summarise"), encoding="utf-8")
    code, out = run([str(app), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and len(doc["findings"]) == 2
    assert doc["findings"][0]["fingerprint"] == doc["findings"][1]["fingerprint"]
    baseline = tmp_path / "baseline.json"
    baseline.write_text(out, encoding="utf-8")
    code, out = run([str(app), "--baseline", str(baseline), "--format", "json"])
    assert code == 0 and json.loads(out)["hidden"]["in_baseline"] == 2
    # a third identical flow is new
    app.write_text(HEAD + _fn("ask") + _fn("summarise") + _fn("third"), encoding="utf-8")
    code, out = run([str(app), "--baseline", str(baseline), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and [f["line"] for f in doc["findings"]] == [14]
    assert doc["hidden"]["in_baseline"] == 2


def test_api_frozenset_baseline_hides_one_finding_per_entry(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(HEAD + _fn("ask") + _fn("summarise"), encoding="utf-8")
    found = lint_paths([str(app)]).findings
    assert len(found) == 2
    result = lint_paths([str(app)], LintConfig(baseline=frozenset({found[0].fingerprint})))
    assert [f.line for f in result.findings] == [10]
    assert result.in_baseline == 1
