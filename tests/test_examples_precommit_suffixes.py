"""examples/ci/pre-commit-config.yaml passes promptcache every file type its linter reads.

pre-commit hands a hook only the files its ``files`` pattern matches, so a suffix missing there
is never linted on commit. The example's pattern lacked Handlebars (``.hbs``, ``.handlebars``,
``.mustache``), ``.ndjson``, ``.markdown``, ``.prompt`` and ``.pyi`` (new-user trial 25).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from promptcache.lint.sources import SOURCES

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = sorted({s for src in SOURCES for s in src.suffixes})


def test_example_pre_commit_files_pattern_matches_every_linted_suffix() -> None:
    config = yaml.safe_load((ROOT / "examples/ci/pre-commit-config.yaml").read_text("utf-8"))
    [hook] = config["repos"][0]["hooks"]
    pattern = re.compile(hook["files"])
    missing = [s for s in SUFFIXES if not pattern.search(f"prompts/x{s}")]
    assert missing == []
    assert ".hbs" in SUFFIXES  # the linter's own list is what this test reads
    assert not pattern.search("src/x.rs") and not pattern.search("x.jsonl.bak")


def test_root_pre_commit_hook_files_pattern_matches_every_linted_suffix() -> None:
    """The hook a user installs from this repository (.pre-commit-hooks.yaml) lacked .pyi and
    the Handlebars suffixes (trial 25)."""
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))
    pattern = re.compile(hook["files"])
    assert [s for s in SUFFIXES if not pattern.search(f"prompts/x{s}")] == []
