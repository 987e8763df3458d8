"""The linter's public functions: :func:`lint_request` (one payload, in-process; the SDK
wrapper calls it on every request) and :func:`lint_paths` (files, folders, globs, stdin).

Bad input never raises out of :func:`lint_paths`: each unreadable or unparsable file becomes
one :class:`~promptcache._errors.InputError` in :attr:`LintResult.errors` (file + reason) and
the other files are still linted.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from promptcache._errors import InputError, InvalidRequestError
from promptcache.lint.config import LintConfig, matches
from promptcache.lint.engine import LogContext, RequestContext, Rule, run_rules
from promptcache.lint.facts import MODEL_RULES, facts_for, model_rules_skipped
from promptcache.lint.finding import Baseline, Finding
from promptcache.lint.rules import all_rules
from promptcache.lint.sources import LoadOptions, source_for, source_for_content, suffixes
from promptcache.lint.sources.base import Document, parse_suppressions
from promptcache.prefix import PrefixView, render

__all__ = ["LintResult", "UnknownModelNote", "lint_paths", "lint_request", "lint_text",
           "project_path", "project_root"]

#: Folders never walked into (ruff's default ``exclude`` list, plus ``__pycache__``): tool,
#: VCS, cache and build folders. Other dot-folders are walked (``.github/prompts``,
#: ``.gemini/commands`` hold prompts). A folder named on the command line is always walked.
SKIP_DIRS = frozenset({
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pycache__", "__pypackages__", "_build", "buck-out",
    "build", "dist", "node_modules", "site-packages", "venv",
})
_DEFAULT_RULES: list[Rule] | None = None
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class UnknownModelNote:
    """Requests of one file name a model the catalog does not know (a vLLM model, a typo).

    Attributes:
        models: the unknown model ids, in order of first use.
        skipped_rules: codes of the selected model-specific rules that could not check them
            (the fact they need differs between the provider's models).
        provider_wide_rules: codes of the selected model-specific rules that ran on facts
            every catalog model of the provider shares.
    """

    models: tuple[str, ...]
    skipped_rules: tuple[str, ...]
    provider_wide_rules: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        """JSON-ready form."""
        return {"models": list(self.models), "skipped_rules": list(self.skipped_rules),
                "provider_wide_rules": list(self.provider_wide_rules)}

    def message(self) -> str:
        """One line: which model is unknown and what that changed."""
        from promptcache.lint.rules import get_rule

        names = ", ".join(repr(m) for m in self.models)
        what = "model" if len(self.models) == 1 else "models"
        verb = "is" if len(self.models) == 1 else "are"
        skipped = ", ".join(f"{c} ({get_rule(c).name})" for c in self.skipped_rules) or "none"
        out = (f"{what} {names} {verb} unknown to the catalog; model-specific rules skipped: "
               f"{skipped}")
        if self.provider_wide_rules:
            out += (f"; {', '.join(self.provider_wide_rules)} used the facts shared by every "
                    "catalog model of the provider")
        return out + " (pass --model with a catalog id to check them)"


def _unknown_models(contexts: Sequence[Any], codes: Sequence[str]) -> UnknownModelNote | None:
    models: dict[str, None] = {}
    skipped: dict[str, None] = {}
    wide: dict[str, None] = {}
    for ctx in contexts:
        entries = [ctx] if isinstance(ctx, RequestContext) else \
            list(ctx.entries) if isinstance(ctx, LogContext) else []
        for entry in entries:
            facts = entry.facts
            if facts.known_model or not facts.model:
                continue
            models[facts.model] = None
            miss = model_rules_skipped(facts, codes)
            skipped.update(dict.fromkeys(miss))
            wide.update(dict.fromkeys(c for c in codes if c in MODEL_RULES
                                      and MODEL_RULES[c][0] == facts.provider and c not in miss))
    if not models:
        return None
    return UnknownModelNote(tuple(models), tuple(skipped),
                            tuple(c for c in wide if c not in skipped))


@dataclass
class LintResult:
    """The outcome of :func:`lint_paths`.

    Attributes:
        findings: every finding that survived selection, suppression, severity floor and
            baseline, sorted by file, line, column. A problem in a layout (``{% extends %}``)
            found while linting several files is one finding (see :func:`lint_paths`).
        errors: one :class:`InputError` per file that could not be linted, and one per
            ``pyproject.toml`` that could not be used (``file`` is it; the files it governs
            are not linted).
        warnings: one :class:`InputError` (file + reason) per problem that did not stop a
            file being linted (a JSONL log's incomplete last line, skipped); they do not
            change :attr:`exit_code`.
        files: the files linted (in order).
        skipped: file -> why it held nothing to lint (a JSON file that is not a request).
        unknown_models: file -> the model ids its requests name that the catalog does not
            know, and the model-specific rules that were skipped for it (see
            :class:`UnknownModelNote`).
        empty_folders: folders named in ``paths`` that held no file to lint (not an error,
            as in ruff: the CLI warns on stderr and exits 0 when nothing else is wrong).
        below_severity: severity floor (``min_severity``) -> findings it hid.
        in_baseline: findings hidden because the baseline holds them; each baseline entry
            hides one finding, so this never exceeds the baseline's number of entries.
    """

    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    unknown_models: dict[str, UnknownModelNote] = field(default_factory=dict)
    empty_folders: list[str] = field(default_factory=list)
    below_severity: dict[str, int] = field(default_factory=dict)
    in_baseline: int = 0

    @property
    def exit_code(self) -> int:
        """2 when any input failed, else 1 when there are findings, else 0."""
        if self.errors:
            return 2
        return 1 if self.findings else 0


def _default_rules() -> list[Rule]:
    global _DEFAULT_RULES
    if _DEFAULT_RULES is None:
        _DEFAULT_RULES = [r() for r in all_rules() if r.status == "stable"]
    return _DEFAULT_RULES


def lint_request(payload: Mapping[str, Any], *, model: str | None = None,
                 provider: str | None = None, previous: Mapping[str, Any] | None = None,
                 rules: Sequence[str] | None = None, view: PrefixView | None = None,
                 previous_view: PrefixView | None = None) -> list[Finding]:
    """Lint one request payload as it is about to be sent.

    Args:
        payload: the request body (Anthropic Messages, OpenAI Chat Completions or Responses;
            shape detected unless ``provider`` is given).
        model: overrides ``payload["model"]`` (catalog facts, token counts).
        provider: ``"anthropic"``, ``"openai-chat"``, ``"openai-responses"`` or None.
        previous: the request sent before this one in the same conversation; enables the
            lookback rule (PC302). A malformed ``previous`` is ignored.
        rules: selectors (codes, prefixes, names, groups); None runs every stable rule.
        view: the payload already rendered with :func:`promptcache.prefix.render` (the SDK
            wrapper has it): skips rendering it again, which is most of the cost.
        previous_view: ``previous`` already rendered (used instead of rendering it).

    Returns:
        Findings; ``file`` is ``"<request>"`` and ``line``/``col`` are 1 (use ``path``).

    Raises:
        promptcache._errors.InvalidRequestError: the payload is malformed.
    """
    if view is None:
        view = render(payload, provider, model=model)
    ctx = RequestContext(view, payload, facts_for(view.provider, model or view.model))
    if previous is not None:
        pview = previous_view
        if pview is None:
            try:
                pview = render(previous, provider or view.provider, model=model)
            except InvalidRequestError:
                pview = None  # a malformed previous request only disables the lookback check
        if pview is not None:
            ctx.previous = RequestContext(pview, previous, ctx.facts)
    if rules is None:
        selected = _default_rules()
    else:
        selected = [r() for r in all_rules() if any(matches(r, s) for s in rules)]
    out: list[Finding] = []
    for rule in selected:
        if "request" in rule.inputs:
            out.extend(rule.check_request(ctx))
    return out


# ------------------------------------------------------------------------ files
def _glob_kept(pattern: str, match: str, config_for: Callable[[str], LintConfig]) -> bool:
    """Whether a match of a glob is linted: the folders the glob matched (not the literal
    ones the user typed) must not be tool/VCS/cache/build folders (:data:`SKIP_DIRS`) nor
    excluded by the configuration in force where they are (that of the folder holding each),
    and a matched file must not be excluded by its own configuration."""
    parts = PurePath(pattern).parts
    literal = 0
    while literal < len(parts) and not any(ch in parts[literal] for ch in "*?["):
        literal += 1
    prefix = PurePath(*parts[:literal]) if literal else PurePath()
    matched = PurePath(match).parts[len(prefix.parts):]
    folder = prefix
    is_dir = os.path.isdir(match)
    for i, name in enumerate(matched):
        path = folder / name
        if i < len(matched) - 1 or is_dir:
            holder = str(folder) if str(folder) else "."
            if name in SKIP_DIRS or config_for(holder).excluded(str(path)):
                return False
        folder = path
    return is_dir or not config_for(match).excluded(match)


def _expand(paths: Iterable[str], config_for: Callable[[str], LintConfig],
            errors: list[InputError], empty: list[str],
            walked: set[str] | None = None) -> Iterator[str]:
    """The files ``paths`` name (folders walked for known suffixes, globs expanded), each
    once (by real path: ``t/a.j2`` and ``./t/a.j2`` are one file, linted under the first
    spelling); ``walked`` collects those found by a folder walk (not named by the user)."""
    known = suffixes()
    seen: set[str] = set()
    for raw in paths:
        if raw == "-":
            yield raw
            continue
        if any(ch in raw for ch in "*?[") and not os.path.exists(raw):
            # dot-folders too (.github/prompts), as a folder walk (trial 20)
            matched = sorted(glob.glob(raw, recursive=True, include_hidden=True))
            if not matched:
                errors.append(InputError(raw, "no file matches this pattern"))
            # a dot-file (.env, .DS_Store) only with a known suffix, as a folder walk takes it
            candidates: Iterable[str] = [
                m for m in matched if _glob_kept(raw, m, config_for) and not (
                    os.path.basename(m).startswith(".") and os.path.isfile(m)
                    and os.path.splitext(m)[1].lower() not in known)]
            if matched and not candidates:
                # every match lies in a skipped (tool, VCS, cache, build) or excluded folder:
                # a pattern that lints nothing is not a pass
                errors.append(InputError(raw, f"every file this pattern matches ({len(matched)}) "
                                              "is in a skipped or excluded folder"))
        else:
            candidates = [raw]
        for path in candidates:
            if os.path.isdir(path):
                found = False
                for root, dirs, files in os.walk(path):
                    # a folder is judged by the configuration in force where it is (that of
                    # the folder holding it), as ruff: a parent's exclude reaches a subfolder
                    # that has its own pyproject.toml
                    here = config_for(root)
                    dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                                     and not here.excluded(os.path.join(root, d)))
                    for name in sorted(files):
                        full = os.path.join(root, name)
                        if os.path.splitext(name)[1].lower() in known and \
                                not config_for(full).excluded(full):
                            found = True
                            real = os.path.realpath(full)
                            if real not in seen:
                                seen.add(real)
                                if walked is not None:
                                    walked.add(full)
                                yield full
                if not found:
                    empty.append(path)
            elif os.path.exists(path):
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    yield path
            elif not any(ch in raw for ch in "*?["):
                errors.append(InputError(path, "no such file or directory"))


def _read(path: str, config: LintConfig) -> str:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if size > config.max_file_size:
        raise InputError(path, f"file too large ({size:,} bytes; the limit is "
                               f"{config.max_file_size:,}; raise max-file-size to lint it)")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    return decode(path, data, config)


def _source_encoding(name: str) -> bool:
    """Whether ``name`` is an encoding a ``# coding:`` line may declare: a text encoding
    that is ASCII-compatible (not UTF-16 / UTF-32, whose declaration cannot be read)."""
    import codecs

    try:
        info = codecs.lookup(name)
    except LookupError:
        return False
    if not getattr(info, "_is_text_encoding", True):
        return False
    try:
        return "# coding".encode(info.name) == b"# coding"
    except (UnicodeError, LookupError):
        return False


def decode(file: str, data: bytes, config: LintConfig | None = None, *,
           declared: bool = True) -> str:
    """Bytes -> text, refusing binary, oversized and undecodable input with an
    :class:`InputError`.

    UTF-8 (a BOM is dropped), except Python source (``.py`` / ``.pyi``), which is read in the
    encoding its ``# coding:`` line declares (PEP 263, as Python reads it:
    :func:`tokenize.detect_encoding`; UTF-8 without one). ``declared=False``: ``data`` is text
    the caller encoded as UTF-8 (a ``str`` given as stdin), whose coding line no longer
    applies, as ``compile()`` ignores it for a ``str``."""
    limit = (config or LintConfig()).max_file_size
    if len(data) > limit:
        raise InputError(file, f"input too large ({len(data):,} bytes; the limit is {limit:,})")
    if b"\x00" in data[:8192]:
        raise InputError(file, "binary file (contains NUL bytes)")
    encoding = "utf-8-sig"
    if declared and file.lower().endswith((".py", ".pyi")):
        import io
        import tokenize

        try:
            cookie, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:  # an unknown or conflicting coding declaration
            raise InputError(file, f"bad source encoding: {exc.msg}") from None
        encoding = "utf-8-sig" if cookie in ("utf-8", "utf-8-sig") else cookie
        if encoding != "utf-8-sig" and not _source_encoding(encoding):
            # Python refuses these too ("encoding problem"): rot13 / hex are not text
            # encodings, and a UTF-16 / UTF-32 cookie cannot be read in its own encoding
            raise InputError(file, f"bad source encoding: {cookie!r} is not an encoding "
                                   "Python source can declare")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding == "utf-8-sig" else encoding
        raise InputError(file, f"not valid {name} (byte 0x{data[exc.start]:02x} at offset "
                               f"{exc.start})") from None
    return text


def _load(file: str, text: str, config: LintConfig) -> Document:
    source = source_for(file) if file != "-" else source_for_content(text)
    if source is None:
        source = source_for_content(text)
    root = None
    if file not in ("-", "<request>", ""):
        root = str(config.root) if config.root is not None else project_root(file)
    options = LoadOptions(model=config.model, provider=config.provider, root=root)
    try:
        return source.load(file, text, options)
    except InputError:
        raise
    except RecursionError:
        raise InputError(file, "input nested too deeply") from None
    except Exception as exc:  # a parser bug must not hide the other files' results
        raise InputError(file, f"internal error while reading ({type(exc).__name__}: {exc})"
                         ) from None


#: What marks a project's root folder when no configuration names one.
_ROOT_MARKERS = ("pyproject.toml", ".git")


def _project_root(folder: str, cache: dict[str, str] | None = None) -> str:
    """The nearest folder at or above ``folder`` (absolute) holding a ``pyproject.toml`` or a
    ``.git``; the current directory when there is none."""
    visited: list[str] = []
    found: str | None = None
    here = folder
    while True:
        if cache is not None and here in cache:
            found = cache[here]
            break
        visited.append(here)
        if any(os.path.exists(os.path.join(here, m)) for m in _ROOT_MARKERS):
            found = here
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    if found is None:
        found = os.getcwd()
    if cache is not None:
        for v in visited:
            cache[v] = found
    return found


def project_root(file: str) -> str:
    """The folder finding paths of ``file`` are relative to when no configuration names one:
    the nearest folder above it holding a ``pyproject.toml`` or ``.git``, else the current
    directory (absolute)."""
    return _project_root(os.path.dirname(os.path.abspath(file)))


def project_path(file: str, root: str | Path | None = None,
                 cache: dict[str, str] | None = None) -> str | None:
    """The identity of ``file`` in finding fingerprints: its path relative to ``root`` (the
    folder of the configuration in force; None: the nearest folder above the file holding a
    ``pyproject.toml`` or ``.git``, else the current directory), with ``/`` separators, so that
    ``src/a.json``, ``./src/a.json``, ``/abs/src/a.json`` and ``a.json`` linted from inside
    ``src`` are one file (as ruff keys findings by project-relative path). None for ``"-"``
    and ``"<request>"`` (no file).

    Args:
        cache: folder -> project root, shared between calls of one run.
    """
    if file in ("-", "<request>", ""):
        return None
    absolute = os.path.abspath(file)
    base = os.path.abspath(root) if root is not None else \
        _project_root(os.path.dirname(absolute), cache)
    try:
        rel = os.path.relpath(absolute, base)
    except ValueError:  # another drive (Windows)
        rel = absolute
    return PurePath(rel).as_posix()


def _identified(findings: Iterable[Finding], file: str, config: LintConfig,
                cache: dict[str, str] | None = None) -> list[Finding]:
    """``findings`` of ``file`` with :attr:`Finding.project_path` set: that of the file each
    one names (a finding in a layout ``file`` extends names the layout)."""
    ident = project_path(file, config.root, cache)
    if ident is None:
        return list(findings)
    idents = {file: ident}
    out: list[Finding] = []
    for f in findings:
        if f.file not in idents:
            idents[f.file] = project_path(f.file, config.root, cache) or ""
        out.append(replace(f, project_path=idents[f.file]) if idents[f.file] else f)
    return out


class _Suppressions:
    """The inline suppressions of the files findings are placed in: the linted file's
    (its :class:`Document`'s) and, for a finding in a layout or included template the
    linted one read (its include loader confined it to the project), that file's own,
    read once per run. A file that cannot be read now has none."""

    def __init__(self) -> None:
        self._files: dict[str, dict[int, frozenset[str] | None]] = {}

    def of(self, file: str, doc: Document,
           config: LintConfig) -> Mapping[int, frozenset[str] | None]:
        """``line -> codes`` (None: every code) silenced in ``file``."""
        if file == doc.file:
            return doc.suppressions
        if file not in self._files:
            try:
                self._files[file] = parse_suppressions(_read(file, config))
            except InputError:
                self._files[file] = {}
        return self._files[file]


def _open(f: Finding, suppressions: Mapping[int, frozenset[str] | None]) -> bool:
    """Whether no inline suppression of ``f``'s own file (``suppressions``) silences ``f``:
    on its line, or for Python source on the line of the argument, the call or the message
    element the value reaches."""
    lines = {f.line, f.details.get("sink_line"), *f.details.get("suppress_lines", ())}
    for line in lines:
        if isinstance(line, int) and line in suppressions:
            codes = suppressions[line]
            if codes is None or f.code in codes:
                return False
    return True


@dataclass
class _Linted:
    """One linted file's findings between the per-file steps and the run-wide ones."""

    file: str
    config: LintConfig
    findings: list[Finding]


def _unsuppressed(findings: Iterable[Finding], doc: Document, config: LintConfig,
                  suppressions: _Suppressions) -> list[Finding]:
    """The per-file steps: inline suppressions (by the file and line each finding names, per
    call), then one finding per volatile value (:func:`_first_open_sink`), then
    ``per_file_ignores`` (those of the file each finding names)."""
    ignored: dict[str, list[str]] = {}
    out: list[Finding] = []
    for f in _first_open_sink(f for f in findings
                              if _open(f, suppressions.of(f.file, doc, config))):
        if f.file not in ignored:
            ignored[f.file] = config.ignored_in(f.file)
        if not _ignored(f, ignored[f.file]):
            out.append(f)
    return out


def _problem(f: Finding, real: Callable[[str], str]) -> tuple[Any, ...]:
    """What makes two findings the same problem at the same place: rule, file (``real``: its
    identity whatever its spelling, see :func:`_real_path`), line, column, payload path, and
    the message up to numbers (token counts) and the template that led to it (PC104's
    ``in child.j2``)."""
    message = f.message
    template = f.details.get("template")
    if isinstance(template, str) and template:
        message = message.replace(f" in {template}", " in \x00")
    return (f.code, real(f.file), f.line, f.col, f.path, _DIGITS.sub("#", message))


def _real_path(cache: dict[str, str]) -> Callable[[str], str]:
    """``file -> its resolved real path`` (symlinks followed, relative to the working
    folder), so that ``t/base.j2``, ``./t/base.j2`` and its absolute path are one file; a
    name that cannot be resolved (empty, a NUL byte) is itself. Memoised in ``cache``."""
    def real(file: str) -> str:
        if file not in cache:
            try:
                cache[file] = os.path.realpath(file) if file else file
            except (OSError, ValueError):
                cache[file] = file
        return cache[file]
    return real


def _deduplicated(linted: Sequence[_Linted]) -> None:
    """Drop, in place, the findings a run reports more than once: a layout's (or a template
    it includes) volatile value is found once per template that extends it, at the layout's
    line. A finding placed in another file than the one linted is dropped when the run holds
    the same problem (:func:`_problem`) found by linting that file itself, or found earlier
    from another file; findings in their own linted file are always kept, so a child's own
    text at the same line of another file is a different place. Files are compared by their
    real path, not their spelling: the one kept (the layout's own when the run lints it, else
    the first found) keeps its spelling."""
    real = _real_path({})
    own = {_problem(f, real) for item in linted for f in item.findings
           if f.file == item.file}
    seen: set[tuple[Any, ...]] = set()
    for item in linted:
        kept: list[Finding] = []
        for f in item.findings:
            if f.file != item.file:
                key = _problem(f, real)
                if key in own or key in seen:
                    continue
                seen.add(key)
            kept.append(f)
        item.findings = kept


def _reported(item: _Linted, result: LintResult | None = None,
              budgets: dict[int, Counter[str]] | None = None) -> list[Finding]:
    """The findings of one linted file to report: the severity floor, then the baseline, so
    that it matches the one finding per value (and per place) that an earlier run reported.
    ``result`` counts the findings the severity floor and the baseline hid.

    The baseline hides with multiplicity: each of its entries hides one finding, taken in
    file order (line, column), so that of two identical findings (one baseline entry) the
    later one is reported. ``budgets`` holds, per baseline object (``id``), the entries not
    yet used in this run (a fresh budget when None)."""
    config = item.config
    kept = [f for f in item.findings if _above_floor(f, config, result)]
    if not config.baseline:
        return kept
    budget = _baseline_budget(config.baseline, {} if budgets is None else budgets)
    hidden: set[int] = set()
    for i in sorted(range(len(kept)), key=lambda i: (kept[i].line, kept[i].col)):
        f = kept[i]
        for fp in (f.fingerprint, f.legacy_fingerprint if f.project_path is not None else None,
                   f.layout_fingerprint):
            if fp is not None and budget.get(fp, 0) > 0:
                budget[fp] -= 1
                hidden.add(i)
                break
    if result is not None:
        result.in_baseline += len(hidden)
    return [f for i, f in enumerate(kept) if i not in hidden]


def _baseline_budget(baseline: frozenset[str], budgets: dict[int, Counter[str]]) -> Counter[str]:
    """The unused entries of ``baseline`` in this run: its :attr:`Baseline.counts`, or one
    per fingerprint for a plain frozenset."""
    key = id(baseline)  # the configs, and so their baselines, live for the whole run
    if key not in budgets:
        counts = baseline.counts if isinstance(baseline, Baseline) else None
        budgets[key] = Counter(counts) if counts is not None else Counter(baseline)
    return budgets[key]


def _ignored(f: Finding, ignored: list[str]) -> bool:
    """Whether a ``per_file_ignores`` selector of ``f``'s file matches its rule."""
    if not ignored:
        return False
    from promptcache.lint.rules import get_rule

    rule = get_rule(f.code)
    return any(matches(rule, s) for s in ignored)


def _above_floor(f: Finding, config: LintConfig, result: LintResult | None = None) -> bool:
    """Whether ``f`` is at or above the severity floor (``result`` counts the others)."""
    if f.severity.rank < config.min_severity.rank:
        if result is not None:
            floor = config.min_severity.value
            result.below_severity[floor] = result.below_severity.get(floor, 0) + 1
        return False
    return True


def _first_open_sink(findings: Iterable[Finding]) -> list[Finding]:
    """Python source: the analysis yields one flow per volatile value and call it reaches, so
    that an inline suppression on one call's line silences that call only. Of the findings
    left after suppression, keep one per rule and volatile value: the first call it reaches
    that is not suppressed (the others share its fix)."""
    seen: set[tuple[str, str, int, int]] = set()
    out: list[Finding] = []
    for f in findings:
        if f.path is None and "sink_line" in f.details:
            key = (f.code, f.file, f.line, f.col)
            if key in seen:
                continue
            seen.add(key)
        out.append(f)
    return out


def lint_text(text: str, file: str, config: LintConfig | None = None) -> list[Finding]:
    """Lint already-decoded text as if it were ``file`` (suffix picks the input kind).

    Raises:
        InputError: the text cannot be parsed.
    """
    config = config or LintConfig()
    doc = _load(file, text, config)
    rules = [r() for r in config.rules()]
    findings = _identified(run_rules(doc.contexts, rules), file, config)
    linted = [_Linted(file, config, _unsuppressed(findings, doc, config, _Suppressions()))]
    _deduplicated(linted)
    return _reported(linted[0])


def lint_paths(paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
               config: LintConfig | None = None, *,
               stdin: str | bytes | None = None, stdin_name: str = "-",
               config_for: Callable[[str], LintConfig] | None = None) -> LintResult:
    """Lint files, folders (walked for known suffixes) and globs; ``"-"`` reads ``stdin``.

    An empty (or blank) file a folder walk finds is skipped (:attr:`LintResult.skipped`:
    ``"empty file"``): a project's empty ``pyproject.toml`` or YAML config is not a prompt. An
    empty file named in ``paths`` (or matched by a glob) is an input error, as empty stdin is.

    Args:
        paths: file names, folder names, glob patterns, or ``"-"`` (``str`` or
            ``pathlib.Path``); one name alone is taken as a list of one.
        config: selection and options (defaults: every stable rule).
        stdin: the text for ``"-"`` (the CLI passes ``sys.stdin``'s bytes).
        stdin_name: the file name stdin stands for (``--stdin-filename``): its suffix picks
            the input kind, and it is the ``file`` of stdin's findings, errors and entry in
            :attr:`LintResult.files`, and what ``per_file_ignores`` match (``"-"``: guess the
            kind from content, and locate everything at ``"-"``).
        config_for: file or folder path -> the configuration that applies to it (the CLI
            passes the nearest ``pyproject.toml``'s, with its options applied); replaces
            ``config``. Called with stdin's ``stdin_name``. A config whose ``error`` is set
            is reported once in :attr:`LintResult.errors` and its files are skipped.

    A finding may name another file than the one linted: a Jinja layout the template
    ``{% extends %}`` (its own text, or a template it includes, at the layout's line). Inline
    suppressions (``promptcache: ignore``) and ``per_file_ignores`` apply by the file and line
    a finding names: the layout's own comments silence it, the linted file's never do. The
    same problem at the same place (rule, file, line, column, and message up to numbers and
    the template that led to it) found from several files is reported once: the one found
    by linting that file itself, else the first; the severity floor and the baseline come
    after that.

    Returns:
        A :class:`LintResult`. Never raises for bad input.
    """
    # one path given alone (not iterated character by character), Path objects as names
    names = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    given: list[str] = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in names]
    if config_for is None:
        single = config or LintConfig()

        def config_for(_path: str) -> LintConfig:
            return single

    result = LintResult()
    rule_sets: dict[int, tuple[LintConfig, list[Rule]]] = {}
    budgets: dict[int, Counter[str]] = {}  # baseline entries not yet used, per baseline
    broken: set[tuple[str, str]] = set()
    roots: dict[str, str] = {}
    suppressions = _Suppressions()
    linted: list[_Linted] = []
    walked: set[str] = set()
    for file in _expand(given, config_for, result.errors, result.empty_folders, walked):
        if file == "-":
            file = stdin_name or "-"
            is_stdin = True
        else:
            is_stdin = False
        config = config_for(file)
        if config.error is not None:  # one error for the config; its files are not linted
            key = (config.error.file, config.error.reason)
            if key not in broken:
                broken.add(key)
                result.errors.append(config.error)
            continue
        if id(config) not in rule_sets:  # the config is kept: its id is not reused
            rule_sets[id(config)] = (config, [r() for r in config.rules()])
        rules = rule_sets[id(config)][1]
        try:
            if is_stdin:
                raw = stdin if stdin is not None else ""
                data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
                text = decode(file, data, config, declared=not isinstance(raw, str))
                try:
                    doc = _load(file, text, config)
                except InputError as exc:
                    raise InputError(file, exc.reason) from None
                doc.file = file
            else:
                text = _read(file, config)
                if file in walked and not text.strip():
                    # an empty file a folder walk found (an empty pyproject.toml or YAML
                    # config): nothing to lint, not an error (a file named is one)
                    result.files.append(file)
                    result.skipped[file] = "empty file"
                    continue
                doc = _load(file, text, config)
            findings = run_rules(doc.contexts, rules)
        except InputError as exc:
            result.errors.append(exc)
            continue
        except RecursionError:
            result.errors.append(InputError(file, "input nested too deeply"))
            continue
        except Exception as exc:  # one bad file must not stop the run
            result.errors.append(InputError(file, f"internal error ({type(exc).__name__}: "
                                                  f"{exc})"))
            continue
        result.files.append(file)
        result.warnings.extend(InputError(file, w) for w in doc.warnings)
        if doc.skipped:
            result.skipped[file] = doc.skipped
        note = _unknown_models(doc.contexts, [r.code for r in rules])
        if note is not None:
            result.unknown_models[file] = note
        findings = _identified(findings, file, config, roots)
        linted.append(_Linted(file, config, _unsuppressed(findings, doc, config, suppressions)))
    _deduplicated(linted)
    for item in linted:
        result.findings.extend(_reported(item, result, budgets))
    result.findings.sort(key=lambda f: (f.file, f.line, f.col, f.code))
    return result
