"""``promptcache demo``: caching working, breaking and being explained, with no API key.

The demo starts the local reference backend in-process (a seeded random Llama with a
block-hash KV prefix cache behind Anthropic- and OpenAI-shaped endpoints), then:

1. replays a recorded tool-using agent session (``demo_data/session.json``: a release agent
   with five tools and a ~1,200-token system prompt) built turn by turn with
   :class:`~promptcache.builder.PromptBuilder`, through the wrapped official ``anthropic``
   client and then the wrapped ``openai`` client, printing per turn the tokens read, written
   and uncached, the hit rate, the cost and the savings;
2. replays the same session with one bug a real agent shipped (BR-01: the current date and
   time to the second at the top of the system prompt), shows that every turn rewrites the
   cache, and prints :func:`promptcache.diff.diff`'s explanation of each miss;
3. lints ``examples/`` (when present) and prints the findings.

The local model has random weights, so its text is meaningless and is not shown; the agent's
steps replay a recorded session. The caching is real: every token reported as a cache read was
served from the block cache, and the figures printed are the wrapper's usage records, which
:func:`run_demo` checks against the backend's own metrics.
"""

from __future__ import annotations

import copy
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import click

__all__ = ["DemoReport", "RunReport", "TurnRow", "demo_command", "run_demo"]

ANTHROPIC_MODEL = "claude-sonnet-4-6"
OPENAI_MODEL = "gpt-5"
#: Output tokens per turn: the random model's text is meaningless, so keep it short.
MAX_TOKENS = 8
#: Minutes between turns in the replay (well inside the 5-minute TTL).
TURN_GAP_SECONDS = 60.0


@dataclass(frozen=True)
class TurnRow:
    """One turn of one run, as the wrapper's usage tracker recorded it (tokens, USD)."""

    turn: int
    prompt_tokens: int
    cache_read: int
    cache_write: int
    uncached: int
    output: int
    cost_usd: Decimal | None
    savings_usd: Decimal | None
    explanation: str | None = None

    @property
    def hit_rate(self) -> float:
        """Cache-read tokens / all input tokens of this turn."""
        return self.cache_read / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class RunReport:
    """One replay of the session through one client.

    Attributes:
        title: what was run. provider: ``"anthropic"`` or ``"openai"``. model: model id.
        rows: one :class:`TurnRow` per turn. hit_rate: ratio of sums over the run.
        cost_usd / savings_usd: totals (None when the catalog has no price).
        backend: the backend's counters for this run (deltas): ``prompt``, ``cache_read``,
            ``cache_write``, ``reused`` (KV the block cache served).
        lint_warnings: run-time lint warnings the wrapper raised during the run.
    """

    title: str
    provider: str
    model: str
    rows: list[TurnRow] = field(default_factory=list)
    backend: dict[str, float] = field(default_factory=dict)
    lint_warnings: list[str] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        total = sum(r.prompt_tokens for r in self.rows)
        return sum(r.cache_read for r in self.rows) / total if total else 0.0

    @property
    def cost_usd(self) -> Decimal | None:
        return _total([r.cost_usd for r in self.rows])

    @property
    def savings_usd(self) -> Decimal | None:
        return _total([r.savings_usd for r in self.rows])


def _total(values: list[Decimal | None]) -> Decimal | None:
    """Sum of USD amounts; None when any is unknown."""
    total = Decimal(0)
    for v in values:
        if v is None:
            return None
        total += v
    return total


@dataclass
class DemoReport:
    """Everything the demo printed, for tests: the runs and the lint result."""

    runs: list[RunReport] = field(default_factory=list)
    lint_findings: list[str] = field(default_factory=list)
    lint_files: int = 0


# ------------------------------------------------------------------------ session data
def _data(name: str) -> Any:
    return json.loads(resources.files("promptcache.demo_data").joinpath(name).read_text("utf-8"))


def _system_prompt() -> str:
    return resources.files("promptcache.demo_data").joinpath(
        "release_agent_system.md").read_text("utf-8")


def _requests(fmt: str, model: str, *, broken: bool,
              start: datetime) -> Iterator[dict[str, Any]]:
    """Yield the request kwargs of each turn, built with the PromptBuilder."""
    from promptcache.builder import PromptBuilder, ToolCall, ToolResult, assistant, user

    tools = _data("tools.json")
    session = _data("session.json")["turns"]
    system = _system_prompt()
    history: list[Any] = []
    pending_results: list[Any] = []
    plan = None
    for k, turn in enumerate(session):
        b = PromptBuilder(model, previous=plan)
        b.tools(tools).system(system)
        if history:
            b.history(*history)
        parts = [*pending_results, turn["user"]]
        b.turn(*parts)
        if fmt == "anthropic":
            kwargs = b.to_anthropic(max_tokens=MAX_TOKENS)
        else:
            kwargs = b.to_openai_chat(max_tokens=MAX_TOKENS)
        plan = b.last_plan
        if broken:
            kwargs = _with_timestamp(kwargs, fmt, start + timedelta(seconds=k * TURN_GAP_SECONDS))
        yield kwargs
        # the recorded agent response becomes history for the next turn
        calls = [ToolCall(id=f"toolu_{k}_{j}", name=c["name"], input=c["input"])
                 for j, c in enumerate(turn["assistant"]["tool_calls"])]
        history.append(user(*parts))
        history.append(assistant(turn["assistant"]["text"], *calls))
        pending_results = [ToolResult(tool_use_id=c.id, content=r)
                           for c, r in zip(calls, turn["tool_results"], strict=True)]


def _with_timestamp(kwargs: dict[str, Any], fmt: str, now: datetime) -> dict[str, Any]:
    """The BR-01 bug: the current date and time, to the second, at the top of the system prompt."""
    out = copy.deepcopy(kwargs)
    stamp = f"Current date and time: {now:%Y-%m-%d %H:%M:%S}\n"
    if fmt == "anthropic":
        out["system"][0]["text"] = stamp + out["system"][0]["text"]
    else:
        first = out["messages"][0]
        if isinstance(first["content"], str):
            first["content"] = stamp + first["content"]
        else:
            first["content"][0]["text"] = stamp + first["content"][0]["text"]
    return out


# ------------------------------------------------------------------------ running
_COUNTERS = {
    "prompt": "promptcache_prompt_tokens_total",
    "cache_read": "promptcache_cache_read_tokens_total",
    "cache_write": "promptcache_cache_write_tokens_total",
    "reused": "promptcache_reused_tokens_total",
}


def _counters(backend: Any) -> dict[str, float]:
    metrics = backend.metrics()
    out = dict.fromkeys(_COUNTERS, 0.0)
    for key, name in _COUNTERS.items():
        for metric, value in metrics.items():
            if metric == name or metric.startswith(name + "{"):
                out[key] += float(value)
    return out


def _run(backend: Any, title: str, fmt: str, model: str, *, broken: bool,
         start: datetime) -> RunReport:
    from promptcache.diff import diff
    from promptcache.sdk import wrap
    from promptcache.usage import UsageTracker

    tracker = UsageTracker(warn=False)
    raw = backend.anthropic() if fmt == "anthropic" else backend.openai()
    client = wrap(raw, tracker=tracker, label=title, session=title, lint="warn")
    report = RunReport(title, fmt, model)
    before = _counters(backend)
    previous: dict[str, Any] | None = None
    previous_usage: Any = None
    # The wrapper reports through logging and warnings; the demo prints the warnings itself.
    logger = logging.getLogger("promptcache")
    level, logger.level = logger.level, logging.CRITICAL
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for kwargs in _requests(fmt, model, broken=broken, start=start):
            if fmt == "anthropic":
                response = client.messages.create(**kwargs)
            else:
                response = client.chat.completions.create(**kwargs)
            backend.clock.advance(TURN_GAP_SECONDS)
            explanation = None
            if previous is not None and broken:
                # A's usage calibrates the estimate: the lost tokens are what turn A
                # reported writing, as the table shows, not a cl100k-based estimate
                result = diff(previous, kwargs, usage_a=previous_usage,
                              usage_b=response.usage)
                where = result.divergence.path if result.divergence else "-"
                cost = (f", ${result.miss_cost_usd:.6f}" if result.miss_cost_usd is not None
                        else "")
                explanation = (f"{result.cause} at {where}: {result.lost_tokens} tokens "
                               f"rewritten{cost}")
            previous, previous_usage = kwargs, response.usage
            record = tracker.records[-1]
            cost_obj = tracker.costs[-1]
            report.rows.append(TurnRow(
                turn=len(report.rows) + 1,
                prompt_tokens=record.total_input or 0,
                cache_read=record.cache_read or 0,
                cache_write=record.cache_write or 0,
                uncached=record.uncached_input or 0,
                output=record.output or 0,
                cost_usd=cost_obj.total if cost_obj is not None else None,
                savings_usd=cost_obj.savings if cost_obj is not None else None,
                explanation=explanation,
            ))
    logger.setLevel(level)
    report.lint_warnings = list(dict.fromkeys(
        str(w.message) for w in caught if type(w.message).__module__.startswith("promptcache")))
    after = _counters(backend)
    report.backend = {k: after[k] - before[k] for k in _COUNTERS}
    return report


def run_demo(*, examples: Path | None = None,
             print_fn: Callable[[Any], None] | None = None, **backend_options: Any) -> DemoReport:
    """Run the demo and return what it printed.

    Args:
        examples: folder to lint at the end (default: ``./examples`` when it exists).
        print_fn: where tables go (default: a rich console); pass ``lambda _: None`` to mute.
        **backend_options: :class:`~promptcache.local.testing.LocalBackend` options (model
            shape, pool size, ...). The default ``mode`` is ``"fast"`` (one-shot suffix
            prefill, about 3x less CPU than block-aligned ``"exact"`` mode); the usage figures
            are the same in both modes, since they come from the block cache, not the logits.

    Returns:
        A :class:`DemoReport`.

    Raises:
        RuntimeError: the wrapper's usage records disagree with the backend's own metrics
            (never expected: it would mean the accounting is wrong).
    """
    from rich.console import Console

    from promptcache.local.testing import LocalBackend

    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    out = print_fn or console.print
    report = DemoReport()
    start = datetime(2026, 11, 29, 14, 3, 27, tzinfo=UTC)
    backend_options.setdefault("mode", "fast")
    with LocalBackend(**backend_options) as backend:
        runs = [
            ("anthropic: agent built with PromptBuilder", "anthropic", ANTHROPIC_MODEL, False),
            ("openai: the same agent", "openai", OPENAI_MODEL, False),
            ("anthropic: BROKEN (timestamp in the system prompt)", "anthropic",
             ANTHROPIC_MODEL, True),
        ]
        for title, fmt, model, broken in runs:
            run = _run(backend, title, fmt, model, broken=broken, start=start)
            _check_against_backend(run)
            report.runs.append(run)
            out(_table(run))
            if run is report.runs[0]:
                out("[dim]read = cache reads (0.1x the input price), written = cache writes (1.25x), "
                    "uncached = full price; saved = the same input uncached minus what was paid "
                    "(negative on a turn that only writes: the write premium).[/dim]")
            if run.lint_warnings:
                more = len(run.lint_warnings) - 1
                out(f"[yellow]run-time warning[/yellow] (wrap(..., lint='warn')): "
                    f"{run.lint_warnings[0]}" + (f" [dim](+{more} more like it)[/dim]"
                                                 if more else ""))
            if broken:
                for row in run.rows:
                    if row.explanation:
                        out(f"  turn {row.turn}: [red]miss[/red] {row.explanation}")
    folder = examples if examples is not None else Path("examples")
    if folder.is_dir():
        from promptcache.lint.api import lint_paths

        result = lint_paths([str(folder)])
        report.lint_files = len(result.files)
        for f in result.findings:
            report.lint_findings.append(f"{f.file}:{f.line}:{f.col}: {f.code} [{f.severity.value}] "
                                        f"{f.message}")
        out(f"[bold]promptcache lint {folder}[/bold]: {len(result.findings)} findings in "
            f"{report.lint_files} files")
        for line in report.lint_findings:
            out("  " + line)
    good, bad = report.runs[0], report.runs[-1]
    out(f"[bold]Summary[/bold]: the builder's run read {good.hit_rate:.1%} of its input from "
        f"cache; the broken run read {bad.hit_rate:.1%}.")
    return report


def _check_against_backend(run: RunReport) -> None:
    mine = {"prompt": sum(r.prompt_tokens for r in run.rows),
            "cache_read": sum(r.cache_read for r in run.rows),
            "cache_write": sum(r.cache_write for r in run.rows)}
    for key, value in mine.items():
        if int(run.backend[key]) != value:
            raise RuntimeError(f"{run.title}: tracker {key}={value} but backend reported "
                               f"{int(run.backend[key])}")
    if run.backend["reused"] < mine["cache_read"]:
        raise RuntimeError(f"{run.title}: {mine['cache_read']} tokens reported as cache reads "
                           f"but only {int(run.backend['reused'])} were served from the block cache")


def _usd(value: Decimal | None) -> str:
    if value is None:
        return "n/a"
    return f"-${-value:.6f}" if value < 0 else f"${value:.6f}"  # as `report` prints it


def _table(run: RunReport) -> Any:
    from rich.table import Table

    table = Table(title=f"{run.title} ({run.model})", title_justify="left")
    for col in ("turn", "prompt", "read", "written", "uncached", "out", "hit rate", "cost",
                "saved"):
        table.add_column(col, justify="right")
    for r in run.rows:
        table.add_row(str(r.turn), f"{r.prompt_tokens:,}", f"{r.cache_read:,}",
                      f"{r.cache_write:,}", f"{r.uncached:,}", str(r.output), f"{r.hit_rate:.1%}",
                      _usd(r.cost_usd), _usd(r.savings_usd))
    table.add_section()
    table.add_row("all", f"{sum(r.prompt_tokens for r in run.rows):,}",
                  f"{sum(r.cache_read for r in run.rows):,}",
                  f"{sum(r.cache_write for r in run.rows):,}",
                  f"{sum(r.uncached for r in run.rows):,}",
                  str(sum(r.output for r in run.rows)), f"{run.hit_rate:.1%}",
                  _usd(run.cost_usd), _usd(run.savings_usd))
    return table


@click.command("demo")
@click.option("--examples", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to lint at the end (default: ./examples when present).")
def demo_command(examples: Path | None) -> None:
    """Run the end-to-end demo on the local backend (no API key, no network)."""
    click.echo("Starting the local reference backend (random-weight Llama, block-hash KV "
               "prefix cache); the model's text is meaningless, the caching is real.")
    run_demo(examples=examples)
