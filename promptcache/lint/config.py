"""Lint configuration: rule selection, per-file ignores, severity floor, baseline.

Read from ``[tool.promptcache]`` (or ``[tool.promptcache.lint]``) in the ``pyproject.toml``
nearest to each linted file (as ruff: the closest one at or above the file that has the
table; the one found from the current directory when none is) and overridden by CLI
options::

    [tool.promptcache]
    select = ["PC1", "PC3"]          # codes, code prefixes, dotted names, groups, or "ALL"
    extend-select = ["PC202"]        # add preview rules to the default set
    ignore = ["PC401"]
    per-file-ignores = { "prompts/legacy/*.j2" = ["PC104"] }
    model = "claude-sonnet-4-5"
    min-severity = "warning"
    exclude = ["tests/fixtures/*"]
    max-file-size = 26214400         # bytes

Each key may also be spelt in snake_case (``per_file_ignores``). As ruff ("unknown field"), a
key the table does not know is an error naming the file and the key, with the closest known
key when one is close (``per-file-ignore``: did you mean ``per-file-ignores``?).

Selection follows ruff: ``select`` replaces the default set (every stable rule),
``extend-select`` adds to it, ``ignore`` removes; a selector matches a code exactly, a code
prefix (``PC1``), a rule's dotted name, or one of its groups. A ``--select`` on the command
line starts the selection anew (as ruff since 0.0.238): the file's ``select``,
``extend-select`` and ``ignore`` are dropped, and ``--extend-select`` / ``--ignore`` apply on
top; without it, they modify the set the file selects (``--extend-select`` re-enables a
rule the file ignores). Where a select and an ignore both pick a rule, the more specific
selector decides (:func:`specificity`: ``PC101`` over ``PC1``, a prefix over a group or ``ALL``).
``per-file-ignores`` and inline suppressions apply in every case.

``per-file-ignores`` and ``exclude`` globs are matched against the file's path relative to
the directory holding the ``pyproject.toml`` (so they hold whatever the current directory),
against its absolute path, and against its bare name; a ``per-file-ignores`` glob also
matches a trailing part of the relative path (``"prompts/*.j2"`` matches
``app/prompts/x.j2``).
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from promptcache._errors import InputError
from promptcache.lint.engine import Rule
from promptcache.lint.finding import Severity
from promptcache.lint.rules import all_rules

__all__ = ["DEFAULT_MAX_FILE_SIZE", "ConfigError", "LintConfig", "find_pyproject", "matches"]

#: Files larger than this are refused (an input error), to keep a CI run bounded. Bytes.
DEFAULT_MAX_FILE_SIZE = 25 * 1024 * 1024


class ConfigError(ValueError):
    """A ``pyproject.toml`` cannot be used: not valid TOML, or ``[tool.promptcache]`` is
    malformed. ``str()`` is ``"SOURCE: REASON"``.

    Attributes:
        source: the configuration file.
        reason: what is wrong, in one sentence (without the file name).
    """

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


def matches(rule: type[Rule], selector: str) -> bool:
    """Whether ``selector`` (code, code prefix, dotted name, group, ``ALL``) picks ``rule``."""
    return specificity(rule, selector) is not None


#: Specificity of a selector naming one rule exactly (its code or its dotted name).
_EXACT = 100


def specificity(rule: type[Rule], selector: str) -> int | None:
    """How specifically ``selector`` names ``rule`` (None: it does not pick it): ``ALL`` 0, a
    group 1, a code prefix its length (``PC`` 2, ``PC1`` 3, ``PC10`` 4), a dotted-name prefix 2
    plus its dots, the rule's own code or name :data:`_EXACT`. As ruff: between a select and
    an ignore that both pick a rule, the more specific one decides."""
    s = selector.strip()
    if not s:
        return None
    if s.upper() == "ALL":
        return 0
    if s.upper().startswith("PC") and rule.code.startswith(s.upper()):
        return _EXACT if len(s) == len(rule.code) else len(s)
    if s == rule.name:
        return _EXACT
    if rule.name.startswith(s + "."):
        return 2 + s.count(".")
    if s in rule.groups:
        return 1
    return None


def chosen(rule: type[Rule], default: bool, selects: tuple[str, ...],
           ignores: tuple[str, ...]) -> bool:
    """One layer of rule selection, as ruff: the most specific selector that picks ``rule``
    decides (an ignore wins a tie); a rule no selector picks keeps ``default``."""
    sel = max((x for s in selects if (x := specificity(rule, s)) is not None), default=None)
    ign = max((x for s in ignores if (x := specificity(rule, s)) is not None), default=None)
    if sel is None and ign is None:
        return default
    if sel is None or ign is None:
        return sel is not None
    return sel > ign


#: The keys ``[tool.promptcache]`` (and ``[tool.promptcache.lint]``) accept; each also in
#: snake_case (``per_file_ignores``). Any other key is an error (as ruff's "unknown field").
KNOWN_KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "model", "min-severity",
              "exclude", "max-file-size")


def _check_keys(table: Mapping[str, Any], where: str, source: str, *, nested: bool) -> None:
    """Raise :class:`ConfigError` for the first key of ``table`` that is not a known one,
    suggesting the closest known key (difflib) when there is one."""
    known = (*KNOWN_KEYS, "lint") if nested else KNOWN_KEYS
    for key in table:
        name = str(key)
        if name in known or name.replace("_", "-") in known:
            continue
        close = difflib.get_close_matches(name.replace("_", "-").lower(), known, n=1,
                                          cutoff=0.6)
        hint = (f"did you mean {close[0]!r}?" if close
                else "known keys: " + ", ".join(known))
        raise ConfigError(source, f"{where} unknown key {name!r} ({hint})")


@dataclass
class LintConfig:
    """Everything that shapes one lint run.

    Attributes:
        select: selectors replacing the default set (None: every stable rule).
        base_rules: codes of the default set when ``select`` is None, instead of every stable
            rule (the set an earlier layer resolved: the command line's ``--extend-select`` /
            ``--ignore`` apply on top of the file's selection).
        extend_select: selectors added to the set.
        ignore: selectors removed from the set.
        per_file_ignores: glob -> selectors ignored in files matching the glob.
        model: model id used when a request / template names none (or to override it).
        provider: force a request shape (None: detect).
        min_severity: findings below it are dropped.
        baseline: fingerprints of findings to hide (``--baseline``).
        exclude: globs of paths skipped when walking folders.
        max_file_size: larger files are an input error, in bytes.
        root: the folder ``per_file_ignores`` and ``exclude`` globs are relative to (the
            ``pyproject.toml``'s folder); None: match the path as given.
        error: the configuration file could not be used (``file`` is the
            ``pyproject.toml``): :func:`~promptcache.lint.api.lint_paths` reports it once in
            its errors and lints none of the files it governs (they are not linted with the
            defaults instead).
    """

    select: tuple[str, ...] | None = None
    base_rules: frozenset[str] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    min_severity: Severity = Severity.INFO
    baseline: frozenset[str] = frozenset()
    exclude: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    root: Path | None = None
    error: InputError | None = None

    def _paths(self, file: str) -> list[str]:
        """The forms of ``file`` the globs are matched against (POSIX): relative to
        :attr:`root` (when under it) and absolute; the path as given when there is no root."""
        if self.root is None:
            return [PurePath(file).as_posix()]
        out: list[str] = []
        for absolute in dict.fromkeys((Path(os.path.abspath(file)), Path(os.path.realpath(file)))):
            try:
                out.append(absolute.relative_to(self.root).as_posix())
            except ValueError:
                pass
            out.append(absolute.as_posix())
        return list(dict.fromkeys(out))

    def rules(self) -> list[type[Rule]]:
        """The selected rule classes, in code order."""
        out = []
        selects = (*(self.select or ()), *self.extend_select)
        for rule in all_rules():
            if self.select is not None:
                default = False
            elif self.base_rules is not None:
                default = rule.code in self.base_rules
            else:
                default = rule.status == "stable"
            if chosen(rule, default, selects, self.ignore) and rule.status != "deprecated":
                out.append(rule)
        return out

    def ignored_in(self, file: str) -> list[str]:
        """Selectors ignored for ``file`` by ``per_file_ignores``."""
        out: list[str] = []
        if not self.per_file_ignores:
            return out
        paths = self._paths(file)
        name = PurePath(file).name
        for pattern, selectors in self.per_file_ignores.items():
            if fnmatch.fnmatch(name, pattern) or any(
                    fnmatch.fnmatch(path, pattern)
                    or fnmatch.fnmatch(path, "*/" + pattern.lstrip("/")) for path in paths):
                out.extend(selectors)
        return out

    def excluded(self, path: str) -> bool:
        """Whether a path matches an ``exclude`` glob (relative to :attr:`root`, absolute,
        as given, or its bare name)."""
        if not self.exclude:
            return False
        paths = {PurePath(path).as_posix(), *self._paths(path)}
        name = PurePath(path).name
        return any(fnmatch.fnmatch(name, p) or any(fnmatch.fnmatch(x, p) for x in paths)
                   for p in self.exclude)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "pyproject.toml"
                     ) -> LintConfig:
        """Build a config from a ``[tool.promptcache]`` table.

        Raises:
            ConfigError: an unknown key (names it, with the closest known key), or a key has
                the wrong type or an unknown severity (names the key).
        """
        table = dict(data)
        _check_keys(table, "[tool.promptcache]", source, nested=True)
        lint = table.pop("lint", None)
        if lint is not None:
            if not isinstance(lint, Mapping):
                raise ConfigError(source, "[tool.promptcache] lint must be a table")
            _check_keys(lint, "[tool.promptcache.lint]", source, nested=False)
            table.update(lint)

        def strs(key: str) -> tuple[str, ...] | None:
            value = table.get(key, table.get(key.replace("-", "_")))
            if value is None:
                return None
            if isinstance(value, str):
                return (value,)
            if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise ConfigError(source, f"[tool.promptcache] {key} must be a list of strings")

        pfi_raw = table.get("per-file-ignores", table.get("per_file_ignores", {}))
        if not isinstance(pfi_raw, Mapping):
            raise ConfigError(source, "[tool.promptcache] per-file-ignores must be a table")
        pfi: dict[str, tuple[str, ...]] = {}
        for pattern, codes in pfi_raw.items():
            if isinstance(codes, str):
                codes = [codes]
            if not isinstance(codes, Sequence) or not all(isinstance(c, str) for c in codes):
                raise ConfigError(source, f"[tool.promptcache] per-file-ignores[{pattern!r}] "
                                          "must be a list of codes")
            pfi[str(pattern)] = tuple(codes)
        sev = table.get("min-severity", table.get("min_severity"))
        model = table.get("model")
        size = table.get("max-file-size", table.get("max_file_size", DEFAULT_MAX_FILE_SIZE))
        if model is not None and not isinstance(model, str):
            raise ConfigError(source, "[tool.promptcache] model must be a string")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ConfigError(source, "[tool.promptcache] max-file-size must be a positive int")
        floor = Severity.INFO
        if sev is not None:
            levels = ", ".join(repr(s.value) for s in Severity)
            if not isinstance(sev, str):
                raise ConfigError(source, f"[tool.promptcache] min-severity must be one of "
                                          f"{levels} (got {sev!r})")
            try:
                floor = Severity.parse(sev)
            except (ValueError, KeyError):
                raise ConfigError(source, f"[tool.promptcache] min-severity must be one of "
                                          f"{levels} (got {sev!r})") from None
        return cls(
            select=strs("select"),
            extend_select=strs("extend-select") or (),
            ignore=strs("ignore") or (),
            per_file_ignores=pfi,
            model=model,
            min_severity=floor,
            exclude=strs("exclude") or (),
            max_file_size=size,
        )

    @classmethod
    def from_pyproject(cls, path: Path) -> LintConfig:
        """Read ``[tool.promptcache]`` from a ``pyproject.toml`` (defaults when absent).

        Raises:
            ConfigError: the file is not valid TOML or the table is malformed.
        """
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(str(path), f"cannot read configuration: {exc}") from None
        tool = data.get("tool", {})
        table = tool.get("promptcache") if isinstance(tool, Mapping) else None
        root = Path(os.path.abspath(path)).parent
        if not isinstance(table, Mapping):
            return cls(root=root)
        config = cls.from_mapping(table, source=str(path))
        config.root = root
        return config


def _has_table(path: Path) -> bool:
    """Whether ``path`` (a ``pyproject.toml``) configures promptcache: its parsed
    ``tool.promptcache`` is a table (in any TOML spelling: ``[tool.promptcache]``,
    ``[tool]`` with ``promptcache.x = ...``). A file that cannot be read or is not valid TOML
    counts (so that the broken configuration is reported rather than skipped)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True
    tool = data.get("tool", {})
    return isinstance(tool, Mapping) and isinstance(tool.get("promptcache"), Mapping)


def find_pyproject(start: Path, cache: dict[Path, Path | None] | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` at or above the folder ``start`` that has a
    ``[tool.promptcache]`` table (parsed, not searched for as text; a file that is not valid
    TOML is returned, so that its error is reported).

    The folders above ``start`` are those of the path as given (made absolute, symbolic links
    not followed), as ruff: a linked folder takes the configuration of where the link is.

    Args:
        cache: folder -> answer, filled for every folder visited (walking a tree asks for
            each of its folders; each ``pyproject.toml`` is then parsed once).
    """
    here = Path(os.path.abspath(start))
    visited: list[Path] = []
    found: Path | None = None
    for folder in (here, *here.parents):
        if cache is not None and folder in cache:
            found = cache[folder]
            break
        visited.append(folder)
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _has_table(candidate):
            found = candidate
            break
    if cache is not None:
        for folder in visited:
            cache[folder] = found
    return found
