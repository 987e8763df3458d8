"""``promptcache lint`` and ``promptcache rule``.

Exit codes (as ruff and sqlfluff): 0 clean, 1 findings, 2 usage or input error. Input errors
print one line per file (``FILE: error: REASON``) on stderr; the other files are still linted.
A folder that holds no file to lint is not an error (as ruff: a warning on stderr, exit 0);
a glob that matches nothing, or a path that does not exist, is (exit 2).
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
from promptcache._errors import InputError
from promptcache.lint.api import LintResult, lint_paths, project_root
from promptcache.lint.config import ConfigError, LintConfig, find_pyproject
from promptcache.lint.finding import Baseline, Severity
from promptcache.lint.formats import FORMATS
from promptcache.lint.rules import all_rules, get_rule

__all__ = ["lint_command", "main", "rule_command"]


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return tuple(out)


_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


def _read_baseline(path: str) -> Baseline:
    """The finding fingerprints of a ``promptcache lint --format json`` output, one entry per
    finding (a fingerprint listed twice hides two findings). Files written by every earlier
    version read the same way.

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
    out: list[str] = []
    for i, item in enumerate(findings):
        fingerprint = item.get("fingerprint") if isinstance(item, dict) else None
        if not (isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint)
                and isinstance(item.get("code"), str)):
            raise wrong(f"findings[{i}] is not a finding with a code and fingerprint")
        out.append(fingerprint)
    return Baseline(out)


class _Configs:
    """File -> its :class:`LintConfig`: the ``pyproject.toml`` nearest to the file (as ruff),
    or ``--config``'s for every file, with the command-line options applied on top. As ruff
    (since 0.0.238), ``--select`` starts the rule selection anew: it replaces the file's
    ``select`` and drops its ``extend-select`` and ``ignore``; ``--extend-select`` and
    ``--ignore`` then apply (without ``--select``, to the set the file selects: an
    ``--extend-select`` re-enables a rule the file ignores).
    ``per-file-ignores`` and inline suppressions apply in every case.

    The configuration found from the current directory applies to files that have none above
    them. A ``pyproject.toml`` that cannot be read, or names an unknown rule or model, gives a
    config whose :attr:`~LintConfig.error` names it: :func:`lint_paths` reports it once
    (exit 2) and lints none of its files, however the folder was named.

    Raises (constructor):
        click.UsageError: an option names an unknown rule, or ``--baseline`` is unusable.
    """

    def __init__(self, config_file: str | None, select: tuple[str, ...],
                 extend_select: tuple[str, ...], ignore: tuple[str, ...], model: str | None,
                 provider: str | None, min_severity: str | None, baseline: str | None) -> None:
        self.select = _split(select)
        self.extend_select = _split(extend_select)
        self.ignore = _split(ignore)
        _check_selectors((*self.select, *self.extend_select, *self.ignore))
        self.model = model
        self.provider = provider
        self.min_severity = Severity.parse(min_severity) if min_severity else None
        self.baseline = _read_baseline(baseline) if baseline else None
        self._dirs: dict[Path, Path | None] = {}
        self._configs: dict[Path | None, LintConfig] = {}
        self._fixed: Path | None = Path(config_file) if config_file is not None else None
        self._fixed_given = config_file is not None
        self._default = self._fixed if self._fixed_given else find_pyproject(Path.cwd(),
                                                                            self._dirs)

    def pyproject_for(self, path: str) -> Path | None:
        """The ``pyproject.toml`` that configures ``path`` (a file or folder)."""
        if self._fixed_given:
            return self._fixed
        if path == "-":
            return self._default
        folder = Path(path).parent if not Path(path).is_dir() else Path(path)
        return find_pyproject(folder, self._dirs) or self._default

    def __call__(self, path: str) -> LintConfig:
        return self.load(self.pyproject_for(path))

    def load(self, pyproject: Path | None) -> LintConfig:
        """The configuration read from ``pyproject`` (None: defaults) with the options."""
        if pyproject in self._configs:
            return self._configs[pyproject]
        config = LintConfig()
        if pyproject is not None:
            try:
                config = LintConfig.from_pyproject(pyproject)
                try:
                    _check_selectors((*(config.select or ()), *config.extend_select,
                                      *config.ignore))
                    if not self.model:
                        unknown = check_model(config.model, "[tool.promptcache] model")
                        if unknown is not None:
                            raise click.UsageError(unknown)
                except click.UsageError as exc:
                    raise ConfigError(str(pyproject), exc.message) from None
            except ConfigError as exc:
                config = LintConfig(root=config.root,
                                    error=InputError(exc.source, exc.reason))
        if self.select:
            # As ruff: the command line's --select starts the resolution anew, dropping the
            # file's select, extend-select and ignore (per-file-ignores still apply).
            config.select = self.select
            config.extend_select = self.extend_select
            config.ignore = self.ignore
        elif self.extend_select or self.ignore:
            # The options apply after the file's whole selection (a --extend-select undoes
            # the file's ignore): the file's set is the default of the command line's layer.
            config.base_rules = frozenset(r.code for r in config.rules())
            config.select = None
            config.extend_select = self.extend_select
            config.ignore = self.ignore
        if self.model:
            config.model = self.model
        if self.provider:
            config.provider = self.provider
        if self.min_severity is not None:
            config.min_severity = self.min_severity
        if self.baseline is not None:
            config.baseline = self.baseline
        self._configs[pyproject] = config
        return config


def _check_selectors(selectors: tuple[str, ...], where: str = "") -> None:
    for sel in selectors:
        if not any(_selects(r, sel) for r in all_rules()):
            raise click.UsageError(f"{where}unknown rule selector {sel!r} "
                                   "(see 'promptcache rule --all')")


def _selects(rule: Any, sel: str) -> bool:
    from promptcache.lint.config import matches

    return matches(rule, sel)


def _report(result: LintResult, fmt: str, out: IO[str], err: IO[str]) -> None:
    FORMATS[fmt](result, out)
    if fmt != "github":
        for w in result.warnings:
            err.write(f"{w.file}: warning: {w.reason}\n")
        for e in result.errors:
            err.write(f"{e.file}: error: {e.reason}\n")
    if fmt != "json":  # json output carries it as "unknown_models"
        for file, note in result.unknown_models.items():
            err.write(f"{file}: note: {note.message()}\n")


@click.command("lint")
@click.argument("paths", nargs=-1, type=str)
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text",
              show_default=True, help="Output format.")
@click.option("--select", multiple=True,
              help="Rules to run (codes, prefixes, names, groups; comma-separated). Replaces "
                   "the default set and the configuration's select, extend-select and ignore "
                   "(as ruff; per-file-ignores still apply).")
@click.option("--extend-select", multiple=True,
              help="Rules to add to the set (e.g. PC202), even ones the configuration ignores.")
@click.option("--ignore", multiple=True, help="Rules to skip.")
@click.option("--model", default=None, help="Model id for requests/templates that name none "
                                             "(and to override the one they name).")
@click.option("--provider", type=click.Choice(["anthropic", "openai-chat", "openai-responses"]),
              default=None, help="Force the request shape (default: detect).")
@click.option("--min-severity", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Drop findings below this severity.")
@click.option("--baseline", type=str, default=None,
              help="JSON output of an earlier run (--format json): report only findings "
                   "not in it (matched by rule, path relative to the project root, node and "
                   "text, not line; however the files were named). Each finding in it hides "
                   "one finding: a second identical one is reported. Any other file is an "
                   "error (exit 2).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--config", "config_file", type=str, default=None,
              help="pyproject.toml to read [tool.promptcache] from, for every file "
                   "(default: the nearest one above each file).")
@click.option("--stdin-filename", default="-",
              help="File name for '-' (stdin): its suffix picks the input kind, and findings, "
                   "errors and per-file-ignores use it as stdin's location.")
def lint_command(paths: tuple[str, ...], fmt: str, select: tuple[str, ...],
                 extend_select: tuple[str, ...], ignore: tuple[str, ...], model: str | None,
                 provider: str | None, min_severity: str | None, baseline: str | None,
                 exit_zero: bool, config_file: str | None, stdin_filename: str) -> None:
    """Lint request JSON, JSONL logs, prompt templates and Python source for cache misses.

    PATHS are files, folders (walked for known suffixes, skipping VCS, cache, virtualenv and
    build folders such as .git, .venv, node_modules, dist), glob patterns, or '-' for stdin.
    Each file's settings come from the nearest pyproject.toml with [tool.promptcache]
    (unless --config); per-file-ignores and exclude globs are relative to its folder.
    As ruff, --select replaces the file's select, extend-select and ignore; --extend-select
    and --ignore apply on top (per-file-ignores and inline suppressions always apply); where a
    select and an ignore both name a rule, the more specific one wins (PC101 over PC1).
    Exit codes: 0 clean, 1 findings, 2 usage or input error. A folder holding nothing to lint
    is a warning (exit 0); a glob matching nothing is an error (exit 2).
    """
    _set_stdout_encoding(fmt)
    code = _run(list(paths), fmt=fmt, select=select, extend_select=extend_select,
                ignore=ignore, model=model, provider=provider, min_severity=min_severity,
                baseline=baseline, exit_zero=exit_zero, config_file=config_file,
                stdin_filename=stdin_filename, stdin=None,
                out=sys.stdout, err=sys.stderr)
    sys.exit(code)


def _set_stdout_encoding(fmt: str) -> None:
    """Make ``sys.stdout`` write what ``fmt`` needs whatever the locale: UTF-8 for the
    ``github`` workflow commands (the runner reads them as UTF-8; a Windows runner's
    redirected stdout would write cp1252, and a non-ASCII file name then names no file);
    for ``text``, characters the stream cannot encode as ``\\xNN`` escapes instead of a
    traceback. ``json`` and ``sarif`` write ASCII only. A stream that cannot be reconfigured
    is left as it is."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is None:
        return
    try:
        if fmt == "github":
            reconfigure(encoding="utf-8", errors="backslashreplace")
        elif fmt == "text":
            reconfigure(errors="backslashreplace")
    except (ValueError, OSError):  # pragma: no cover - a stream already written to
        pass


def _run(paths: list[str], *, fmt: str, select: tuple[str, ...], extend_select: tuple[str, ...],
         ignore: tuple[str, ...], model: str | None, provider: str | None,
         min_severity: str | None, baseline: str | None, exit_zero: bool,
         config_file: str | None, stdin_filename: str, stdin: bytes | None,
         out: IO[str], err: IO[str]) -> int:
    if not paths:
        err.write("promptcache lint: error: give at least one PATH (or '-' for stdin)\n")
        return 2
    try:
        configs = _Configs(config_file, select, extend_select, ignore, model, provider,
                           min_severity, baseline)
    except click.UsageError as exc:
        err.write(f"promptcache lint: error: {exc.message}\n")
        return 2
    # A model the user names (--model or [tool.promptcache] model) must be a catalog id:
    # an unknown one would silently skip the model-specific rules.
    unknown = check_model(model, "--model")
    if unknown is not None:
        err.write(f"promptcache lint: error: {unknown}\n")
        return 2
    # A broken pyproject.toml is one input error (naming it) in the result, wherever it is
    # found: the files it governs are not linted (not with the defaults either).
    data = stdin
    if "-" in paths and data is None:
        data = sys.stdin.buffer.read()
    if "-" in paths and not (data or b"").removeprefix(b"\xef\xbb\xbf").strip():
        # Nothing (or only blanks) on stdin is an input error, as an empty file is: an empty
        # pipe is a mistake upstream, not a clean prompt.
        rest = [p for p in paths if p != "-"]
        result = (lint_paths(rest, config_for=configs) if rest else LintResult())
        result.errors.append(InputError(stdin_filename or "-",
                                        "empty input (nothing read from stdin)"))
    else:
        result = lint_paths(paths, stdin=data, stdin_name=stdin_filename, config_for=configs)
    _report(result, fmt, out, err)
    if configs.baseline is not None:
        _baseline_hint(result, configs, err)
    for folder in result.empty_folders:
        err.write(f"promptcache lint: warning: no files to lint found under {folder}\n")
    if result.errors:
        return 2
    if exit_zero:
        return 0
    return result.exit_code


def _baseline_hint(result: LintResult, configs: _Configs, err: IO[str]) -> None:
    """A note on stderr when a ``--baseline`` with entries hid none of this run's findings:
    findings match by path relative to the project root, so a baseline written from another
    folder (no ``pyproject.toml`` / ``.git`` marking the root) matches nothing (new-user
    trial 15)."""
    entries = sum(configs.baseline.counts.values()) if configs.baseline is not None else 0
    if not entries or result.in_baseline or not result.findings:
        return
    first = result.findings[0]
    config = configs(first.file)
    root = (str(config.root) if config.root is not None
            else project_root(first.file))
    err.write(f"promptcache lint: note: 0 of the {entries} --baseline "
              f"entr{'ies' if entries != 1 else 'y'} matched a finding. Baseline entries match by "
              f"path relative to the project root (here {root}: the nearest folder above the "
              "file holding a pyproject.toml or .git, else the current folder); lint from the "
              "folder the baseline was written from, or mark the project root with a "
              "pyproject.toml\n")


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
