"""``promptcache diff`` and ``promptcache explain`` (click commands, rich text or JSON).

Exit codes: 0 no miss, 1 a miss was found (explained or not), 2 bad input (one line on
stderr naming the file and the reason; never a traceback).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from promptcache._cliutil import fail
from promptcache._errors import InputError, PromptCacheError
from promptcache.diff._causes import NO_CHANGE_CAUSES
from promptcache.diff._model import DiffResult, ExplainReport

__all__ = ["diff_command", "explain_command"]

_PROVIDERS = click.Choice(["anthropic", "openai", "openai-chat", "openai-responses"])


def _load(path: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(request body, wrapper) from a request JSON file (``"-"``: standard input); the
    wrapper may hold usage etc.

    The request is found as render, count and lint find it
    (:func:`promptcache._cliutil.unwrap_request`); a file that holds no request is bad input.

    Raises:
        InputError: unreadable, not JSON, nested too deeply, not an object, or no request.
    """
    from promptcache._cliutil import loads_json, not_a_request_reason, read_text, unwrap_request

    text = read_text(path)  # a file, or standard input read once (as render and count)
    if not text.strip():
        raise InputError(path, "empty file")
    obj = loads_json(text, path)
    if not isinstance(obj, Mapping):
        raise InputError(path, "a request must be a JSON object")
    found = unwrap_request(obj)
    if found is None:
        raise InputError(path, not_a_request_reason(obj))
    return found


def _response(w: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The ``"response"`` recorded beside a request (None when absent or null).

    Raises:
        InputError: it is not an object (e.g. the response id as a string).
    """
    response = w.get("response")
    if response is None or isinstance(response, Mapping):
        return response
    kind = {str: "a string", list: "a list", bool: "a boolean"}.get(type(response), "a number")
    raise InputError(name, f'"response" must be an object (the response body, with its '
                     f'"id", "output" and "usage"), not {kind}')


def _wrapper_time(w: Mapping[str, Any], name: str) -> float | None:
    """The send time recorded beside a request (``promptcache._times.TIME_KEYS``), or None.

    Raises:
        InputError: a time key holds something that is not a time.
    """
    from promptcache._times import timestamp_of

    try:
        return timestamp_of(w, strict=True)
    except ValueError as exc:
        raise InputError(name, f"bad timestamp ({exc})") from None


@click.command("diff")
@click.argument("a", metavar="A.json")
@click.argument("b", metavar="B.json")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--redact", is_flag=True, help="Show hashes instead of prompt text.")
@click.option("--model", default=None, help="Model id (default: the requests' own).")
@click.option("--provider", type=_PROVIDERS, default=None,
              help="Request shape (default: detected).")
@click.option("--gap", type=click.FloatRange(min=0), default=None,
              help="Seconds from A's start to B's start (enables the TTL check).")
def diff_command(a: str, b: str, fmt: str, redact: bool, model: str | None,
                 provider: str | None, gap: float | None) -> None:
    """Explain why request B misses what request A wrote to the prompt cache.

    A.json and B.json hold request bodies as sent to the API, or objects with the body under
    "request" / "body" plus optional "usage", "response" and "timestamp". Either one (not
    both) may be '-' to read it from standard input. A Responses B with
    previous_response_id is read as A's input + A's output (from A's "response", when given)
    + B's input. Exit status: 0 no miss (or "cannot tell": B continues a stored response
    that is not A's), 1 miss, 2 bad input.
    """
    from promptcache._cliutil import check_model
    from promptcache.diff._engine import diff

    if a == "-" and b == "-":
        fail("A and B cannot both be '-' (standard input)")
    unknown = check_model(model)
    if unknown is not None:
        fail(unknown)
    try:
        body_a, wrap_a = _load(a)
        body_b, wrap_b = _load(b)
        timestamps = None
        if gap is not None:
            timestamps = (0.0, gap)
        else:
            ta, tb = _wrapper_time(wrap_a, a), _wrapper_time(wrap_b, b)
            if ta is not None and tb is not None:
                timestamps = (ta, tb)
        response_a = _response(wrap_a, a)
        response_b = _response(wrap_b, b)
        usage_a = wrap_a.get("usage") or (response_a or {}).get("usage")
        usage_b = wrap_b.get("usage") or (response_b or {}).get("usage")
        result = diff(body_a, body_b, provider=provider, model=model, timestamps=timestamps,
                      usage_a=usage_a, usage_b=usage_b, diagnostics_b=wrap_b or None,
                      redact=redact, response_a=response_a)
    except InputError as exc:
        fail(str(exc))
        return
    except PromptCacheError as exc:
        fail(f"{a} / {b}: {exc}")
        return
    except ValueError as exc:
        fail(f"{a} / {b}: {exc}")
        return
    except RecursionError:  # parsed, yet too deep to compare
        fail(f"{a} / {b}: request nested too deeply")
        return
    if fmt == "json":
        click.echo(result.model_dump_json(indent=2))
    else:
        _print_diff(result, a, b)
    # cannot tell (B continues a stored response): no miss was found, and the verdict says so
    raise SystemExit(0 if result.verdict in ("no_miss", "cannot_tell") else 1)


def _tokens(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _count(n: int | None, noun: str, plural: str | None = None) -> str:
    """``"1 session"``, ``"2 sessions"``, ``"1,024 tokens"``; ``"? tokens"`` when unknown."""
    word = noun if n == 1 else (plural or noun + "s")
    return f"{_tokens(n)} {word}"


def _usd(x: float | None) -> str:
    return "unknown" if x is None else f"${x:,.6f}"


def _print_diff(r: DiffResult, a: str, b: str) -> None:
    from rich.table import Table

    from promptcache.diff._engine import is_warning

    console = _console()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    verdict = r.verdict.replace("_", " ")
    if r.classification:
        verdict += f" ({r.classification.replace('_', ' ')})"
    primary = r.primary
    label = "cause"
    if r.verdict == "no_miss" and primary is not None \
            and primary.code not in NO_CHANGE_CAUSES and not is_warning(primary):
        # a change that cuts a tier holding (almost) nothing A cached: not a miss
        verdict += (f" (negligible: the change below costs {_count(r.lost_tokens, 'token')}, "
                    "within the estimate tolerance)")
        label = "change"
    grid.add_row("verdict", verdict)
    if primary is not None:
        where = f" at {primary.path}" if primary.path else ""
        grid.add_row(label, f"[bold]{primary.code}[/bold]{where}: {primary.title}")
        for key, value in primary.detail.items():
            grid.add_row("", f"{key}: {_fmt(value)}")
        for c in r.secondary:
            where = f" at {c.path}" if c.path else ""
            grid.add_row("also", f"{c.code}{where}: {c.title}")
    d = r.divergence
    if d is not None:
        grid.add_row("divergence", f"{d.path} (segment {d.segment_path}, {d.tier} tier, "
                                   f"char {d.char_offset}, token {d.token_offset:,})")
        if d.semantic_equal:
            grid.add_row("", "equal after canonical parse / whitespace normalisation")
        grid.add_row("before", _escape(d.before))
        grid.add_row("after", _escape(d.after))
    invalid = " -> ".join(r.invalidated_levels) or "nothing"
    if r.provider.startswith("openai") and r.invalidated_levels \
            and r.invalidated_levels[0] == "tools":
        # OpenAI documents no tools -> system -> messages hierarchy (Anthropic's, 1.7)
        invalid = "whole prompt"
    if r.verdict == "cannot_tell":
        grid.add_row("invalidated", "unknown (B's prefix is not in the bodies)")
    else:
        grid.add_row("invalidated", f"{invalid} (reusable: {r.reusable_prefix})")
    if r.predicted is not None:
        calibrated = any(n.startswith("token counts scaled by") for n in r.notes)
        basis = ("" if r.token_counts_exact else
                 ", estimated counts calibrated to A's usage" if calibrated
                 else ", estimated counts")
        partial = any(str(c.detail.get("a_output", "")).startswith("left out")
                      for c in r.causes)  # a chained B without A's output: lower bounds
        upper = "up to " if getattr(r.predicted, "read_upper_bound", False) else ""
        grid.add_row("tokens", f"A left {_tokens(r.ideal_cache_read)} cached; B reads {upper}"
                               f"{_tokens(r.predicted.cache_read)} and writes "
                               f"{'at least ' if partial else ''}"
                               f"{_tokens(r.predicted.cache_write)} (predicted{basis})")
    elif r.ideal_cache_read is not None:
        grid.add_row("tokens", f"A left {_tokens(r.ideal_cache_read)} cached (A's usage); "
                               "B's read is not predicted (see the notes)")
    elif r.verdict == "cannot_tell":
        grid.add_row("tokens", "cannot tell: B's prefix is a stored conversation the bodies "
                               "do not show (no prediction)")
    if r.observed is not None:
        grid.add_row("observed", f"read {_tokens(r.observed.cache_read)}, write "
                                 f"{_tokens(r.observed.cache_write)}, uncached "
                                 f"{_tokens(r.observed.uncached_input)}")
    if r.lost_tokens is not None:
        base = "" if r.extra_cost_base_tokens is None else \
            f" ({r.extra_cost_base_tokens:,.2f} base-token units)"
        how = ("not read (billed as uncached input)"
               if primary is not None and primary.detail.get("lost_tokens_are") == "not read"
               else "rewritten")
        grid.add_row("lost", f"{_count(r.lost_tokens, 'token')} {how}; "
                             f"{_usd(r.miss_cost_usd)} extra{base}")
    if primary is not None and r.verdict != "no_miss":  # nothing missed: nothing to fix
        grid.add_row("fix", primary.fix_hint)
    if r.recommended_alternative:
        alt = r.recommended_alternative
        grid.add_row("instead", f"{alt['change']}: reads "
                                f"{_tokens(alt.get('predicted_cache_read_tokens'))}, "
                                f"invalidates {', '.join(alt['invalidated_levels']) or 'nothing'}")
    if r.diagnostics is not None:
        dg = r.diagnostics
        verdict_d = {True: "agrees", False: "DISAGREES", None: "no comparison"}[dg.agrees]
        grid.add_row("provider", f"{dg.provider} diagnostics: {dg.reason} "
                                 f"(ours: {dg.ours or 'n/a'}; {verdict_d})")
    for check in r.checks:
        if r.cause in NO_CHANGE_CAUSES:  # what was verified: no change
            mark = {True: "ok", False: "FAILED", None: "n/a"}[check.passed]
            extra = f" ({check.detail})" if check.detail else ""
            grid.add_row("check", f"{mark}: {check.name}{extra}")
    for note in r.notes:
        grid.add_row("note", note)
    console.print(f"[bold]promptcache diff[/bold] {a} -> {b}  ({r.provider}"
                  f"{', ' + r.model if r.model else ''})")
    console.print(grid)


def _console() -> Any:
    """A rich console; 120 columns when not writing to a terminal (CI logs, pipes)."""
    import sys

    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text.replace("\n", "\\n"))


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return _escape(str(value))


@click.command("explain")
@click.argument("log", metavar="LOG.jsonl")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--model", default=None, help="Model id for every request.")
@click.option("--provider", type=_PROVIDERS, default=None,
              help="Request shape for every request (default: detected).")
@click.option("--all", "show_all", is_flag=True, help="List every request, not just misses.")
def explain_command(log: str, fmt: str, model: str | None, provider: str | None,
                    show_all: bool) -> None:
    """Explain every cache miss in a request log (JSONL), by cause, count and USD.

    LOG.jsonl '-' reads the log from standard input. Each line holds a request (under
    "request" or "body", or the bare body) and optionally "usage" / "response", "timestamp",
    "session_id", "response_id" and provider diagnostics. Usage-only lines (a usage tracker
    log) are checked with the append-only identity read[n] >= read[n-1] + write[n-1] against
    the previous line of the same session and model. A log with no request in it (a usage
    log) gets that check only: exit 0 when it holds on every pair of lines it compared, 1 on
    a regression, 2 when it had no two lines of one session to compare. Exit status: 0 no
    miss, 1 misses, 2 bad input.
    """
    from promptcache._cliutil import check_model, is_blank_file, read_text
    from promptcache.diff._explain import explain_counted

    unknown = check_model(model)
    if unknown is not None:
        fail(unknown)
    text: str | None = None
    try:
        if log == "-":  # read once, whole: parsed from memory, checked for blank from it
            import io

            text = read_text(log)
            lines = io.StringIO(text, newline=None).readlines()  # split as a file is
            report, with_request = explain_counted(lines, provider=provider, model=model,
                                                   name=log)
        else:
            report, with_request = explain_counted(log, provider=provider, model=model)
    except PromptCacheError as exc:
        fail(str(exc))
        return
    if not report.requests:  # "0 requests, 0 misses" would read as a clean log
        blank = is_blank_file(log, text=text)
        fail(f"{log}: {'empty file' if blank else 'no requests in the log'}")
    if not with_request and not report.misses and not _usage_checked(report):
        # a usage log where the append-only check compared nothing: "0 misses" would read
        # as a clean bill (a log whose pairs were checked is reported, exit 0 or 1)
        n = len(report.requests)
        fail(f"{log}: no line holds a request ({n} usage-only line{'s' if n != 1 else ''}; "
             "no two lines of one session and model to check read[n] >= read[n-1] + "
             "write[n-1]; explain needs the request bodies: 'promptcache report' reads "
             "usage logs)")
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report, log, show_all)
        if not with_request:
            _print_usage_only(report)
    raise SystemExit(1 if report.misses else 0)


def _usage_checked(r: ExplainReport) -> int:
    """How many usage-only lines the append-only identity was checked on (held or not)."""
    return sum(1 for x in r.requests if "expected_min_read" in x.detail)


def _print_usage_only(r: ExplainReport) -> None:
    """What a log without request bodies was checked for, and the outcome."""
    checked = _usage_checked(r)
    failed = sum(1 for x in r.requests if x.status == "prefix_regression")
    outcome = ((f"held on all {checked}" if checked > 1 else "held on the 1") if not failed else
               f"failed on {failed} of {checked}")
    _console().print(
        f"usage only (no request bodies): the append-only check read[n] >= read[n-1] + "
        f"write[n-1] {outcome} line{'s' if checked != 1 else ''} compared with the previous "
        "line of their session; causes need the request bodies (log them to explain a miss)",
        markup=False)


def _print_report(r: ExplainReport, log: str, show_all: bool) -> None:
    from rich.table import Table

    console = _console()
    console.print(f"[bold]promptcache explain[/bold] {log}: "
                  f"{_count(len(r.requests), 'request')}, {_count(r.sessions, 'session')}, "
                  f"{_count(r.misses, 'miss', 'misses')}, "
                  f"{_count(r.lost_tokens, 'token')} rewritten, {_usd(r.miss_cost_usd)} extra")
    if r.summary:
        table = Table(title="misses by cause")
        for col in ("cause", "count", "tokens lost", "USD"):
            table.add_column(col, justify="left" if col == "cause" else "right")
        for s in r.summary:
            table.add_row(s.cause, str(s.count), _tokens(s.lost_tokens), _usd(s.usd))
        console.print(table)
    rows = [x for x in r.requests if show_all or x.status in
            ("miss_explained", "unexplained_miss", "prefix_regression")
            or (x.diagnostics is not None and x.diagnostics.agrees is False)]
    if not rows:
        _print_cannot_tell(r)
        return
    table = Table(title="requests" if show_all else "misses")
    for col, justify in (("line", "right"), ("vs line", "right"), ("session:turn", "left"),
                         ("status / cause", "left"),
                         ("at", "left"), ("read pred/obs", "right"), ("lost", "right"),
                         ("USD", "right"), ("provider says", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for x in rows[:200]:
        dg = x.diagnostics
        says = "" if dg is None else f"{dg.reason}{' (disagrees)' if dg.agrees is False else ''}"
        what = x.cause or x.status
        if x.status == "unexplained_miss":
            what = "unexplained (provider side?)"
        elif x.status == "cannot_tell":
            what = f"cannot tell ({x.path or 'previous_response_id'})"
        elif x.detail.get("routing") and x.cause != "prompt_cache_key_changed":
            what = f"{what} (prompt_cache_key changed: routing hint)"
        vs = "-" if x.compared_with_line is None else str(x.compared_with_line)
        table.add_row(str(x.line), vs, f"{x.session}:{x.turn}", what, x.path or "",
                      f"{_tokens(x.predicted_cache_read)}/{_tokens(x.observed_cache_read)}",
                      _tokens(x.lost_tokens), _usd(x.miss_cost_usd), says)
    console.print(table)
    if len(rows) > 200:
        console.print(f"... {len(rows) - 200} more (use --format json for all)")
    _print_cannot_tell(r)


def _print_cannot_tell(r: ExplainReport) -> None:
    """One line for the requests whose prefix the log cannot show (previous_response_id),
    one for those continuing a stored ``conversation``, and one for those whose stored prompt
    template (``prompt``) differs from the earlier request's."""
    held = [x for x in r.requests if x.status == "cannot_tell"]
    template = sum(1 for x in held if x.cause == "stored_prompt_changed")
    conversation = sum(1 for x in held if x.cause != "stored_prompt_changed"
                       and x.path == "conversation")
    n = len(held) - template - conversation
    if n:
        _console().print(f"{_count(n, 'request')} continue{'s' if n == 1 else ''} a response "
                         "the log does not hold with its output (previous_response_id): "
                         "cannot tell what they could read")
    if conversation:
        _console().print(f"{_count(conversation, 'request')} "
                         f"continue{'s' if conversation == 1 else ''} a stored conversation "
                         "(conversation): the server prepends its items, so cannot tell what "
                         "they could read")
    if template:
        _console().print(f"{_count(template, 'request')} "
                         f"change{'s' if template == 1 else ''} the stored prompt template "
                         "(prompt: id, version or variables): the server expands it, so "
                         "cannot tell what they could read")
