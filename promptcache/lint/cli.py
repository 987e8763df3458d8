"""``promptcache lint`` and ``promptcache rule``.

Exit codes (as ruff and sqlfluff): 0 clean, 1 findings, 2 usage or input error. Input errors
print one line per file (``FILE: error: REASON``) on stderr; the other files are still linted.
:func:`main` runs the lint command in-process and returns the exit code instead of exiting
(tests and fuzzing use it).
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import IO, Any

import click

from promptcache._cliutil import check_model
from promptcache.lint.api import LintResult, lint_paths
from promptcache.lint.config import LintConfig, find_pyproject
from promptcache.lint.finding import Severity
from promptcache.lint.formats import FORMATS
from promptcache.lint.rules import all_rules, get_rule

__all__ = ["lint_command", "main", "rule_command"]


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return tuple(out)


_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


def _read_baseline(path: str) -> frozenset[str]:
    """The finding fingerprints of a ``promptcache lint --format json`` output.

    Raises:
        click.UsageError: the file cannot be read, or is any other JSON (a request body, a
            SARIF log, a bare list): it would silently act as an empty baseline.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise click.UsageError(f"--baseline {path}: cannot read ({exc})") from None

    def wrong(reason: str) -> click.UsageError:
        return click.UsageError(f"--baseline {path}: not a promptcache lint JSON output "
                                f"({reason}; write one with 'promptcache lint --format json')")

    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise wrong("not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise wrong(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:
        raise wrong(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise wrong("JSON nested too deeply") from None
    if not isinstance(data, dict):
        kind = ("a JSON array" if isinstance(data, list) else "a JSON string"
                if isinstance(data, str) else "JSON null" if data is None else "a JSON boolean"
                if isinstance(data, bool) else "a JSON number")
        raise wrong(f"{kind}, not an object")
    if "runs" in data and "findings" not in data:
        raise wrong("a SARIF log")
    findings = data.get("findings")
    if not isinstance(findings, list):
        raise wrong("a request body" if any(k in data for k in ("messages", "input", "system"))
                    else 'no "findings" list')
    if not isinstance(data.get("version"), str):
        raise wrong('no "version"')
    out = set()
    for i, item in enumerate(findings):
        fingerprint = item.get("fingerprint") if isinstance(item, dict) else None
        if not (isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint)
                and isinstance(item.get("code"), str)):
            raise wrong(f"findings[{i}] is not a finding with a code and fingerprint")
        out.add(fingerprint)
    return frozenset(out)


def _build_config(config_file: str | None, select: tuple[str, ...], extend_select: tuple[str, ...],
                  ignore: tuple[str, ...], model: str | None, provider: str | None,
                  min_severity: str | None, baseline: str | None) -> LintConfig:
    if config_file is not None:
        path: Path | None = Path(config_file)
    else:
        path = find_pyproject(Path.cwd())
    try:
        config = LintConfig.from_pyproject(path) if path is not None else LintConfig()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if select:
        config.select = _split(select)
    if extend_select:
        config.extend_select = (*config.extend_select, *_split(extend_select))
    if ignore:
        config.ignore = (*config.ignore, *_split(ignore))
    for sel in (*(config.select or ()), *config.extend_select, *config.ignore):
        if not any(_selects(r, sel) for r in all_rules()):
            raise click.UsageError(f"unknown rule selector {sel!r} (see 'promptcache rule --all')")
    if model:
        config.model = model
    if provider:
        config.provider = provider
    if min_severity:
        config.min_severity = Severity.parse(min_severity)
    if baseline:
        config.baseline = _read_baseline(baseline)
    return config


def _selects(rule: Any, sel: str) -> bool:
    from promptcache.lint.config import matches

    return matches(rule, sel)


def _report(result: LintResult, fmt: str, out: IO[str], err: IO[str]) -> None:
    FORMATS[fmt](result, out)
    if fmt != "github":
        for e in result.errors:
            err.write(f"{e.file}: error: {e.reason}\n")
    if fmt != "json":  # json output carries it as "unknown_models"
        for file, note in result.unknown_models.items():
            err.write(f"{file}: note: {note.message()}\n")


@click.command("lint")
@click.argument("paths", nargs=-1, type=str)
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text",
              show_default=True, help="Output format.")
@click.option("--select", multiple=True, help="Rules to run (codes, prefixes, names, groups; "
                                              "comma-separated). Replaces the default set.")
@click.option("--extend-select", multiple=True, help="Rules to add to the set (e.g. PC202).")
@click.option("--ignore", multiple=True, help="Rules to skip.")
@click.option("--model", default=None, help="Model id for requests/templates that name none "
                                             "(and to override the one they name).")
@click.option("--provider", type=click.Choice(["anthropic", "openai-chat", "openai-responses"]),
              default=None, help="Force the request shape (default: detect).")
@click.option("--min-severity", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Drop findings below this severity.")
@click.option("--baseline", type=str, default=None,
              help="JSON output of an earlier run (--format json): report only findings "
                   "not in it. Any other file is an error (exit 2).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--config", "config_file", type=str, default=None,
              help="pyproject.toml to read [tool.promptcache] from (default: nearest).")
@click.option("--stdin-filename", default="-",
              help="File name for '-' (stdin): its suffix picks the input kind, and findings, "
                   "errors and per-file-ignores use it as stdin's location.")
def lint_command(paths: tuple[str, ...], fmt: str, select: tuple[str, ...],
                 extend_select: tuple[str, ...], ignore: tuple[str, ...], model: str | None,
                 provider: str | None, min_severity: str | None, baseline: str | None,
                 exit_zero: bool, config_file: str | None, stdin_filename: str) -> None:
    """Lint request JSON, JSONL logs, prompt templates and Python source for cache misses.

    PATHS are files, folders (walked for known suffixes), glob patterns, or '-' for stdin.
    Exit codes: 0 clean, 1 findings, 2 usage or input error.
    """
    code = _run(list(paths), fmt=fmt, select=select, extend_select=extend_select,
                ignore=ignore, model=model, provider=provider, min_severity=min_severity,
                baseline=baseline, exit_zero=exit_zero, config_file=config_file,
                stdin_filename=stdin_filename, stdin=None,
                out=sys.stdout, err=sys.stderr)
    sys.exit(code)


def _run(paths: list[str], *, fmt: str, select: tuple[str, ...], extend_select: tuple[str, ...],
         ignore: tuple[str, ...], model: str | None, provider: str | None,
         min_severity: str | None, baseline: str | None, exit_zero: bool,
         config_file: str | None, stdin_filename: str, stdin: bytes | None,
         out: IO[str], err: IO[str]) -> int:
    if not paths:
        err.write("promptcache lint: error: give at least one PATH (or '-' for stdin)\n")
        return 2
    try:
        config = _build_config(config_file, select, extend_select, ignore, model, provider,
                               min_severity, baseline)
    except click.UsageError as exc:
        err.write(f"promptcache lint: error: {exc.message}\n")
        return 2
    # A model the user names (--model or [tool.promptcache] model) must be a catalog id:
    # an unknown one would silently skip the model-specific rules.
    unknown = check_model(config.model, "--model" if model else "[tool.promptcache] model")
    if unknown is not None:
        err.write(f"promptcache lint: error: {unknown}\n")
        return 2
    data = stdin
    if "-" in paths and data is None:
        data = sys.stdin.buffer.read()
    result = lint_paths(paths, config, stdin=data, stdin_name=stdin_filename)
    _report(result, fmt, out, err)
    if result.errors:
        return 2
    if exit_zero:
        return 0
    return result.exit_code


def main(argv: list[str], *, stdin: bytes | None = None, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None) -> int:
    """Run ``promptcache lint ARGV`` in-process and return its exit code (never raises for
    bad input or bad options)."""
    out = stdout if stdout is not None else io.StringIO()
    err = stderr if stderr is not None else io.StringIO()
    try:
        ctx = lint_command.make_context("lint", list(argv), resilient_parsing=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        err.write(f"promptcache lint: error: {exc.format_message()}\n")
        return 2
    p = ctx.params
    return _run(list(p["paths"]), fmt=p["fmt"], select=p["select"],
                extend_select=p["extend_select"], ignore=p["ignore"], model=p["model"],
                provider=p["provider"], min_severity=p["min_severity"], baseline=p["baseline"],
                exit_zero=p["exit_zero"], config_file=p["config_file"],
                stdin_filename=p["stdin_filename"], stdin=stdin if stdin is not None else b"",
                out=out, err=err)


# ------------------------------------------------------------------------ rule
@click.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Document every rule.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def rule_command(code: str | None, show_all: bool, fmt: str) -> None:
    """Print the documentation of a lint rule (CODE or dotted name), or of --all rules."""
    if show_all and code:
        click.echo(f"promptcache rule: error: give a CODE ({code!r}) or --all, not both",
                   err=True)
        sys.exit(2)
    if show_all:
        rules = all_rules()
    elif code:
        try:
            rules = [get_rule(code)]
        except KeyError:
            click.echo(f"promptcache rule: error: unknown rule {code!r} "
                       "(see 'promptcache rule --all')", err=True)
            sys.exit(2)
    else:
        click.echo("promptcache rule: error: give a CODE or --all", err=True)
        sys.exit(2)
    if fmt == "json":
        data: Any = [r.metadata() for r in rules]
        click.echo(json.dumps(data if show_all else data[0], indent=2))
        return
    for i, r in enumerate(rules):
        if i:
            click.echo("\n" + "-" * 72 + "\n")
        click.echo(f"# {r.name} ({r.code})\n")
        click.echo(f"Severity: {r.severity.value}. Status: {r.status} since {r.since}. "
                   f"Inputs: {', '.join(sorted(r.inputs))}. Groups: {', '.join(r.groups)}.")
        click.echo(f"Fix: {r.fix_title}\n")
        click.echo(r.doc())
