"""The CI examples users copy: the GitHub Actions workflow and the pre-commit configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _workflow() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "examples/ci/github-actions.yml").read_text(encoding="utf-8"))


def test_sarif_is_uploaded_even_when_there_are_findings() -> None:
    """The gate (``--format github``, exit 1 on findings) runs last; the SARIF steps run before
    it and the upload also after a failure, so findings reach code scanning (new-user trial 8:
    the upload was skipped exactly when there was something to upload)."""
    steps = _workflow()["jobs"]["lint-prompts"]["steps"]
    runs = [s.get("run", s.get("uses", "")) for s in steps]
    sarif = next(i for i, r in enumerate(runs) if "--format sarif" in r)
    upload = next(i for i, r in enumerate(runs) if "upload-sarif" in r)
    gate = next(i for i, r in enumerate(runs) if "--format github" in r)
    assert "--exit-zero" in runs[sarif]
    assert sarif < upload < gate == len(steps) - 1
    assert steps[upload].get("if") == "always()"


def test_upload_has_the_permission_it_needs() -> None:
    assert _workflow()["permissions"]["security-events"] == "write"


def test_install_never_takes_the_pypi_name() -> None:
    """"promptcache" on PyPI is another project: the example installs from a repository URL."""
    wf = _workflow()
    installs = [s["run"] for s in wf["jobs"]["lint-prompts"]["steps"]
                if "pip install" in s.get("run", "")]
    assert installs == ['pip install "promptcache @ ${PROMPTCACHE_SOURCE}"']
    assert wf["env"]["PROMPTCACHE_SOURCE"].startswith("git+")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "- run: pip install promptcache " not in readme


def test_pre_commit_hook_runs_once_per_commit() -> None:
    """One process: one summary (pre-commit splits files over processes otherwise, each
    printing its own "Found N findings"), as ruff's hook does."""
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "promptcache-lint" and hook["require_serial"] is True
    config = yaml.safe_load((ROOT / "examples/ci/pre-commit-config.yaml").read_text(
        encoding="utf-8"))
    [repo] = config["repos"]
    assert not repo["repo"].startswith("https://github.com/promptcache/")  # not ours to name
    assert [h["id"] for h in repo["hooks"]] == ["promptcache-lint"]
