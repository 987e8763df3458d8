"""``promptcache report`` and ``promptcache breakeven``.

``report USAGE.jsonl``: reads a JSONL usage log (``-``: standard input; records as
:class:`~promptcache.usage.JsonlSink` writes them, or the providers' raw ``usage`` objects /
whole responses, provider detected from the fields:
:func:`~promptcache.usage.sinks.iter_usage_log`), prices every record (catalog prices,
``--prices`` override file; the model is ``--model``, else the line's own ``model``, else its
response's, else its request's (``request.model`` / ``body.model``: a request log as
``explain`` reads it); a record with none is reported with its tokens and an unknown cost,
never a guessed one; each line at its own date: a record's ``start``, else a time key of the
line or its response's ``created_at`` / ``created``, so dated catalog prices apply; a streamed
response logged event by event counts once) and prints,
by label and model: requests, hit rate (ratio of sums) and request hit rate, tokens by kind,
cost, savings, and the tracker's diagnostics (a group of concurrent cold writes once, with its
final count). An unknown cost says why (``cost unknown:`` lines; json ``cost_unknown``): no
model, no prices, a price the table lacks (e.g. ``cache_read`` in a ``--prices`` file), or a
count the usage does not report (GPT-5.6+ writes; Anthropic usage without
``cache_creation_input_tokens``), naming the field the usage lacks. A token column that some
record of a group does not report (OpenAI usage without ``prompt_tokens_details``: no cached
count, so no uncached/read split; unreported writes hide the uncached part only where the input
count includes them, OpenAI's: Anthropic's ``input_tokens`` is the uncached part itself) is
unknown (``?`` / ``null``), never a partial sum. Anomalies (the tracker's ``usage_anomaly``
events, and OpenAI ``cached_tokens`` off the catalog's caching grid, case BR-15) are listed once
per distinct message with their count (json: ``anomalies``); records whose prompt is under
the model's minimum cacheable length (nothing can be cached: not a miss, case BR-15) are
counted per model (json: ``not_cacheable``). Pricing assumptions and adjustments are listed
once per distinct message with their count (text ``note`` lines, json ``notes``): writes
without a TTL split priced at the ``--write-ttl`` rate (default 5m), OpenAI Flex / Anthropic
``inference_geo`` "us" / fast-mode prices applied, a price the reference marks UNCONFIRMED,
a Bedrock / Vertex regional premium not applied. Text amounts have 4 decimals, 6 for a
non-zero amount under $0.0001 (``<$0.000001`` below that), negative ones ``-$0.0125``; CSV
writes an unknown cost or savings as ``unknown`` (never a blank a spreadsheet sums as 0) and
adds ``requests_unknown`` and ``cost_unknown_reason`` columns (JSON groups and total carry
``requests_unknown`` too). ``--format text|json|csv``;
``--plot FILE`` draws cumulative hit rate and cost over time (needs the ``plot`` extra:
matplotlib); a curve sums the records whose usage / cost is known, and when some are unknown
its axis says "known" and how many requests it leaves out; the suffix of ``FILE`` picks the format (``.png``, ``.svg``, ``.pdf``), and the
target is checked before anything is read or printed.

``breakeven --model M --prefix-tokens N [--ttl 5m|1h] [--interval SECONDS]``: the number of
requests within the TTL from which caching pays (for a model that caches automatically, without
a TTL: requests that still find the prefix cached, kept for an unspecified time); with
``--interval`` also every TTL policy priced for that inter-arrival time and the cheapest.
``--ttl`` must be one the model offers (a model that caches automatically, without a TTL
parameter, takes none); ``--requests``,
``--suffix-tokens``, ``--output-tokens`` and ``--keepalive-cap`` price that comparison, so they
need ``--interval`` (and ``--keepalive-cap`` a model with a TTL to keep alive): given without,
they are an error, never silently ignored. A token count is at most 10**9
(:data:`~promptcache.usage.record.MAX_TOKENS`, the bound ``report`` applies; one request's prefix
plus suffix too), ``--requests`` at most 10**9 (:data:`~promptcache.usage.breakeven.MAX_REQUESTS`)
and ``--interval``, like the whole horizon (``--requests`` - 1 intervals), at most the range of
send times up to the year 9999 (:data:`~promptcache.usage.breakeven.MAX_SPAN_SECONDS`): a value
past a bound is bad input naming the option and the range, never a meaningless figure.

Exit codes: 0 success, 2 bad input (one line on stderr, ``promptcache: FILE: reason``, naming
the file or option and the reason). An incomplete last line (no newline at its end, not JSON:
a log still being written) is skipped with a warning on stderr and does not change the exit
status; a broken line anywhere else is bad input.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any, NoReturn

import click

from promptcache._cliutil import PLOT_FORMATS, check_model, fail, unknown_model_message
from promptcache._errors import CatalogError, InputError, UnknownModelError
from promptcache.usage.billing import Cost
from promptcache.usage.breakeven import MAX_REQUESTS, MAX_SPAN_SECONDS
from promptcache.usage.record import CLAMP_FLAG, MAX_TOKENS, REPORTED_FLAG, UsageRecord
from promptcache.usage.sinks import iter_usage_log_lines
from promptcache.usage.tracker import ColdWriteGroup, UsageSummary, UsageTracker

__all__ = ["breakeven_command", "report_command"]


def _fail(where: str, reason: str) -> NoReturn:
    """``promptcache: WHERE: reason`` on stderr, exit 2 (the format every command uses)."""
    fail(f"{where}: {reason}")


def _quantize(x: Decimal, places: str) -> Decimal:
    """``x`` rounded to ``places`` (``"0.0001"``) with as many digits as it needs: the default
    context's 28 digits make ``quantize`` raise InvalidOperation on a large amount."""
    exp = Decimal(places)
    digits = max(x.adjusted(), 0) - exp.as_tuple().exponent + 2  # type: ignore[operator]
    # half up, as amounts of money are read (0.09525 -> 0.0953; the context's default, half
    # to even, printed 0.0952: trial 27)
    return x.quantize(exp, rounding=ROUND_HALF_UP, context=Context(prec=max(28, digits)))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _money(x: Decimal | None, places: str = "0.000001") -> str:
    """``$1.234567`` / ``-$0.012500`` (the sign before the dollar), ``?`` for unknown."""
    if x is None:
        return "?"
    q = _quantize(x, places)
    return f"-${q.copy_abs()}" if q < 0 else f"${q}"


#: Smallest amount the text report prints as a number; a non-zero amount below it is
#: ``<$0.000001`` (never ``$0.0000``, which reads as free).
_TINY = Decimal("0.000001")


def _money_short(x: Decimal | None) -> str:
    """A table cell: 4 decimals (``$0.0538``); an amount that would round to ``$0.0000`` but
    is not zero gets 6 (``$0.000019``), and below a millionth ``<$0.000001``."""
    if x is None:
        return "?"
    if x == 0 or _quantize(x, "0.0001") != 0:
        return _money(x, "0.0001")
    if abs(x) >= _TINY:
        return _money(x, "0.000001")
    return f"<${_TINY}" if x > 0 else f">-${_TINY}"


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.2f}%"


_MAX_EVENTS = 20

_COLUMNS = ("label", "model", "requests", "hit_rate", "request_hit_rate", "uncached_input",
            "cache_read", "cache_write_5m", "cache_write_1h", "cache_write", "output",
            "cost_usd", "savings_usd")
#: CSV only, after :data:`_COLUMNS`: how many requests of the group have unknown counts, and
#: why its cost is unknown (empty when known).
_CSV_EXTRA = ("requests_unknown", "cost_unknown_reason")
#: CSV cell of an unknown amount: text, so a spreadsheet's SUM over a column cannot silently
#: add a blank as 0 and show a partial total (the reason is in ``cost_unknown_reason``).
_CSV_UNKNOWN = "unknown"


#: Token columns that are unknown (``None``) in a group when any of its records leaves the
#: record field of the same name unknown: a sum of the known values would be a wrong number
#: (e.g. OpenAI usage without ``prompt_tokens_details`` has no cached count, so no split).
_SPLIT_FIELDS = ("uncached_input", "cache_read")
#: Columns unknown when a record of a model that bills cache writes does not report its writes
#: (GPT-5.6+ chat usage without ``cache_write_tokens``): the writes, and, when the provider's
#: input count includes them (the record's ``input_total``: OpenAI), the uncached part
#: (prompt - cached - written). Anthropic's ``input_tokens`` is the uncached part on its own
#: (hosted-api-rules.md 1.8), so there it stays known.
_WRITE_FIELDS = ("uncached_input", "cache_write", "cache_write_5m", "cache_write_1h")
#: The billing note of such a record (:func:`promptcache.usage.billing.price_record`).
_WRITES_NOT_REPORTED = "cache writes not reported"


def _row(label: str | None, model: str | None, s: UsageSummary,
         unknown: frozenset[str] = frozenset()) -> dict[str, Any]:
    d = s.as_dict()
    return {"label": label, "model": model,
            **{k: None if k in unknown else d[k] for k in _COLUMNS[2:]}}


def _unknown_fields(records: list[UsageRecord], costs: list[Cost | None]) -> tuple[
        dict[tuple[str | None, str | None], frozenset[str]], frozenset[str]]:
    """Per (label, model) group and for the total: the token columns some record of the group
    does not report (:data:`_SPLIT_FIELDS`; :data:`_WRITE_FIELDS` when its model bills writes
    it does not report; ``uncached_input`` among them only when the record's input count
    includes the writes)."""
    by_group: dict[tuple[str | None, str | None], set[str]] = {}
    for rec, cost in zip(records, costs, strict=True):
        missing = by_group.setdefault((rec.label, rec.model), set())
        missing.update(f for f in _SPLIT_FIELDS if getattr(rec, f) is None)
        if rec.writes is None and cost is not None and _WRITES_NOT_REPORTED in cost.notes:
            missing.update(f for f in _WRITE_FIELDS
                           if f != "uncached_input" or _uncached_needs_writes(rec))
    groups = {k: frozenset(v) for k, v in by_group.items()}
    return groups, frozenset().union(*groups.values())


def _uncached_needs_writes(rec: UsageRecord) -> bool:
    """Whether ``rec``'s uncached part is derived by subtracting its writes from an inclusive
    input count (OpenAI's ``prompt_tokens``: ``input_total`` known, or unknown uncached part),
    so unknown writes leave it unknown. Anthropic's ``input_tokens`` is the uncached part
    itself (hosted-api-rules.md 1.8)."""
    return rec.input_total is not None or rec.uncached_input is None


def _anomalies(tracker: UsageTracker) -> list[dict[str, Any]]:
    """Distinct anomalies with their counts: the tracker's ``usage_anomaly`` events (parse
    flags) and OpenAI responses whose ``cached_tokens`` is off the catalog's caching grid
    (:func:`~promptcache.usage.classify.classify_openai` says ``anomalous``, case BR-15).

    OpenAI-format records of a model the catalog does not list as OpenAI's are not classified
    (compatible servers use other granularities), nor are those of models that cache at
    explicit breakpoints (GPT-5.6+: a read ends at a breakpoint, off the 128-token grid);
    records without a model use
    :func:`classify_openai`'s defaults (OpenAI's 1,024 minimum and 128-token step).
    """
    from promptcache.catalog import get_policy
    from promptcache.usage.classify import classify_openai

    found: dict[tuple[str, str], list[UsageRecord]] = {}
    for event in tracker.events:
        if event.kind == "usage_anomaly":
            found.setdefault(("usage_anomaly", _flags_message(event.record)),
                             []).append(event.record)
    for rec in tracker.records:
        if rec.provider not in ("openai", "openai-responses") or CLAMP_FLAG in rec.flags:
            continue  # a clamped read is not the provider's number: flagged as usage_anomaly
        grid: dict[str, int] = {}
        if rec.model is not None:
            try:
                pol = get_policy(rec.model)
            except (UnknownModelError, CatalogError):
                continue
            if pol.provider != "openai" or pol.cache_step_tokens is None:
                continue
            if pol.explicit_breakpoints:
                # GPT-5.6+ reads at breakpoint boundaries, which are not rounded to the
                # 128-token grid (../shared/reference/hosted-api-rules.md 2.3; source:
                # https://developers.openai.com/api/docs/guides/prompt-caching): no grid
                continue
            grid = {"minimum": pol.min_cacheable_tokens, "step": pol.cache_step_tokens}
        hit = classify_openai(rec, **grid)
        if hit.classification == "anomalous":
            found.setdefault(("anomalous", hit.detail), []).append(rec)
    return [{"kind": kind, "message": message, "count": len(recs),
             "labels": sorted({r.label for r in recs if r.label is not None})}
            for (kind, message), recs in found.items()]


def _not_cacheable(records: list[UsageRecord]) -> list[dict[str, Any]]:
    """Records whose prompt is under the model's minimum cacheable length and read nothing,
    counted per model: nothing could be cached, so their 0 % is not a miss (case BR-15). The
    minimum is the catalog's (OpenAI-format records without a model: OpenAI's 1,024 tokens,
    source: ../shared/reference/hosted-api-rules.md 2.1); records of a model the catalog does
    not know, or without an input total, are not judged."""
    from promptcache.usage.classify import minimum_cacheable_tokens

    found: dict[tuple[str | None, int], list[UsageRecord]] = {}
    for rec in records:
        total = rec.total_input
        if total is None or rec.cache_read not in (0, None):
            continue
        minimum = minimum_cacheable_tokens(rec)
        if minimum is not None and total < minimum:
            found.setdefault((rec.model, minimum), []).append(rec)
    return [{"model": model, "minimum": minimum, "count": len(recs),
             "labels": sorted({r.label for r in recs if r.label is not None}),
             "message": (f"prompt under the {minimum:,}-token minimum"
                         f"{'' if model is None else f' of {model}'}: nothing can be cached "
                         "(not a miss)")}
            for (model, minimum), recs in found.items()]


def _flags_message(rec: UsageRecord) -> str:
    """The anomaly message of a record's parse flags, the same for every record with the same
    flags: the per-record numbers of ``input_parts_reported:...`` are left out (records are
    counted per message), and clamped records say what was done to their numbers."""
    names = [f for f in rec.flags if not f.startswith(f"{REPORTED_FLAG}:")]
    message = "usage flags: " + ", ".join(names)
    if CLAMP_FLAG in names:
        message += " (parts clamped to the reported input total)"
    return message


def _clamped(records: list[UsageRecord]) -> list[dict[str, Any]]:
    """Records whose parts were clamped to their input total, with the numbers as reported
    (the ``input_parts_reported`` flag's detail)."""
    out: list[dict[str, Any]] = []
    for rec in records:
        if CLAMP_FLAG not in rec.flags:
            continue
        reported = next((f.partition(":")[2] for f in rec.flags
                         if f.startswith(f"{REPORTED_FLAG}:")), None)
        out.append({"label": rec.label, "model": rec.model, "request_id": rec.request_id,
                    "reported": reported})
    return out


@click.command("report")
@click.argument("usage_file", metavar="USAGE.jsonl")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True,
              help="Output format. In json and csv, cache_write is every cache write (the 5m "
                   "and 1h columns plus writes without a TTL split): it already includes "
                   "cache_write_5m and cache_write_1h; the text table's \"write other\" "
                   "column is the writes without a split.")
@click.option("--plot", "plot_path", metavar="FILE", default=None,
              help="Write cumulative hit rate and cost over time to FILE; its suffix picks the "
                   "format: .png, .svg or .pdf (needs matplotlib).")
@click.option("--prices", "prices_file", metavar="PRICES.toml", default=None,
              help="Price override file (see promptcache.catalog.load_overrides).")
@click.option("--batch", is_flag=True, help="Price every record with the batch discount.")
@click.option("--write-ttl", "write_ttl", type=click.Choice(["5m", "1h"]), default="5m",
              show_default=True,
              help="TTL of cache writes whose usage does not split them by TTL (Anthropic "
                   "usage without cache_creation): priced at this TTL's write rate; the "
                   "report notes how many were.")
@click.option("--model", default=None,
              help="Model id that prices every line (default: each line's own \"model\", "
                   "else its response's or request's; lines naming none get tokens but an "
                   "unknown cost).")
def report_command(usage_file: str, fmt: str, plot_path: str | None, prices_file: str | None,
                   batch: bool, write_ttl: str, model: str | None) -> None:
    """Hit rate, tokens, cost and savings by label and model from a JSONL usage log.

    Each line is a usage record (as promptcache's JsonlSink writes it), a provider's raw
    usage object (Anthropic, OpenAI chat or Responses, DeepSeek, Bedrock, Gemini, LangChain
    usage_metadata; detected from the field names) or a whole response, priced at the line's
    date (its timestamp / start key, or the response's created_at / created). The events of
    one streamed response on consecutive lines count as one request. Writes whose usage does
    not split them by TTL are priced at --write-ttl (a note says how many). USAGE.jsonl '-'
    reads standard input. Exit status: 0 success, 2 bad input.
    """
    from promptcache._cliutil import is_blank_file, read_text

    if plot_path is not None:
        _check_plot_target(plot_path)
    text: str | None = None
    try:
        if usage_file == "-":  # read once, whole: parsed and checked for blank from memory
            text = read_text(usage_file)
        located = list(iter_usage_log_lines(usage_file, text=text))
    except InputError as exc:
        _fail(exc.file, exc.reason)
    except RecursionError:  # json raises it for [[[[...]]]]: bad input, not a crash
        _fail(_too_deep_line(usage_file, text), "JSON nested too deeply")
    if not located:  # an empty table would read as "nothing was spent"
        blank = is_blank_file(usage_file, text=text)
        _fail(usage_file, "empty file" if blank else "no usage records")
    records = [r for _, r in located]
    if prices_file is not None:
        from promptcache.catalog import load_overrides

        try:
            load_overrides(prices_file)
        except CatalogError as exc:
            _fail(prices_file, str(exc).removeprefix(f"{prices_file}: "))
        except RecursionError:
            _fail(prices_file, "TOML nested too deeply")
    if model is not None:
        _check_model(model, located)
        records = [r.model_copy(update={"model": model}) for r in records]
    tracker = UsageTracker(batch=True if batch else None, warn=False,
                           default_write_ttl=write_ttl)
    for rec in records:
        tracker.add(rec)
    groups = sorted(tracker.by_label_model().items(),
                    key=lambda kv: (str(kv[0][0]), str(kv[0][1])))
    total = tracker.summary()
    unknown, total_unknown = _unknown_fields(tracker.records, tracker.costs)
    rows = [_row(label, model, s, unknown.get((label, model), frozenset()))
            for (label, model), s in groups]
    shown = _shown_events(tracker)
    events: Counter[str] = Counter(kind for kind, _ in shown)
    events.update(str(e.kind) for e in tracker.events if e.kind in _UNLISTED)
    anomalies = _anomalies(tracker)
    not_cacheable = _not_cacheable(tracker.records)
    clamped = _clamped(tracker.records)
    notes = _price_notes(tracker)
    if plot_path is not None:  # before the report: a failed plot leaves no report behind
        _plot(tracker, plot_path)
    if fmt == "json":
        # the count of requests whose usage is unknown, as the text ("2 (1 unknown)") and CSV
        # reports give it (trial 29)
        for row, (_key, s) in zip(rows, groups, strict=True):
            row["requests_unknown"] = s.requests_unknown
        total_row = _row(None, None, total, total_unknown)
        total_row["requests_unknown"] = total.requests_unknown
        click.echo(json.dumps({"file": usage_file, "groups": rows,
                               "total": total_row,
                               "events": dict(events),
                               "messages": [message for _, message in shown],
                               "anomalies": anomalies,
                               "not_cacheable": not_cacheable,
                               "clamped_records": len(clamped),
                               "clamped": clamped,
                               "cost_unknown": _unpriced(records, tracker),
                               "notes": notes},
                              indent=2))
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[*_COLUMNS, *_CSV_EXTRA],
                                lineterminator="\n")
        writer.writeheader()
        reasons = _group_reasons(records, tracker)
        for (key, summary), row in [*zip(groups, rows, strict=True),
                                    ((None, total), _row("TOTAL", None, total, total_unknown))]:
            cells = {k: "" if v is None else v for k, v in row.items()}
            for money in ("cost_usd", "savings_usd"):
                if row[money] is None:
                    cells[money] = _CSV_UNKNOWN
            cells["requests_unknown"] = summary.requests_unknown
            why = reasons.get(key) if key is not None else sorted(
                {r for rs in reasons.values() for r in rs})
            cells["cost_unknown_reason"] = "; ".join(why or ()) if row["cost_usd"] is None else ""
            writer.writerow(cells)
        click.echo(buf.getvalue(), nl=False)
    else:
        _print_table(usage_file, groups, total, events, unknown, total_unknown)
        for note in _unpriced(records, tracker):
            click.echo(f"  cost unknown: {note}")
        for item in notes:
            n = item["count"]
            click.echo(f"  note ({n} {'record' if n == 1 else 'records'}): {item['message']}")
        if clamped:
            n = len(clamped)
            first = clamped[0]["reported"]
            click.echo(f"  clamped ({n} {'record' if n == 1 else 'records'}): cache read/write "
                       "counts exceeded the reported input total and were clamped to it; the "
                       "numbers above use the clamped counts"
                       + (f" (first as reported: {first})" if first else ""))
        for anomaly in anomalies:
            n = anomaly["count"]
            click.echo(f"  {anomaly['kind']} ({n} {'record' if n == 1 else 'records'}): "
                       f"{anomaly['message']}")
        for short in not_cacheable:
            count = short["count"]
            click.echo(f"  not cacheable ({count} {'record' if count == 1 else 'records'}): "
                       f"{short['message']}")
        for kind, message in shown[:_MAX_EVENTS]:
            click.echo(f"  {kind}: {message}")
        if len(shown) > _MAX_EVENTS:
            click.echo(f"  ... {len(shown) - _MAX_EVENTS} more (--format json lists them all)")


#: Event kinds the report states elsewhere (``cost_unknown``, ``anomalies``), not as messages.
_UNLISTED = ("unpriced", "usage_anomaly")


def _shown_events(tracker: UsageTracker) -> list[tuple[str, str]]:
    """``(kind, message)`` of the tracker's events, in order, for the report: a group of
    concurrent cold writes once (at its first event), with its final count, tokens and
    waste (the tracker raises it as the group grows: at 2, 4, 8... writes)."""
    out: list[tuple[str, str]] = []
    groups: set[int] = set()
    for event in tracker.events:
        if event.kind in _UNLISTED:
            continue
        group = event.data.get("group") if event.kind == "concurrent_cold_writes" else None
        if isinstance(group, ColdWriteGroup):
            if id(group) in groups:
                continue
            groups.add(id(group))
            out.append((event.kind, group.message()))
            continue
        out.append((str(event.kind), event.message))
    return out


def _too_deep_line(path: str, text: str | None = None) -> str:
    """``path:line`` of the first line nested too deeply for :mod:`json` (``path`` when none
    is: the whole file was parsed as one document); ``text``: the file's text, already read
    (standard input)."""
    try:
        fh = (io.StringIO(text, newline=None) if text is not None
              else open(path, encoding="utf-8", errors="replace"))
        with fh:
            for lineno, line in enumerate(fh, start=1):
                try:
                    json.loads(line)
                except RecursionError:
                    return f"{path}:{lineno}"
                except ValueError:
                    continue
    except OSError:
        pass
    return path


def _check_plot_target(path: str) -> None:
    """Exit 2 (one line, before any work) when ``--plot path`` cannot be written
    (:func:`promptcache._cliutil.plot_target_problem`)."""
    from promptcache._cliutil import plot_target_problem

    reason = plot_target_problem(path)
    if reason is not None:
        _fail(path, reason)


_FAMILY = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}


def _check_model(model: str, located: list[tuple[str, UsageRecord]]) -> None:
    """Exit 2 naming ``--model`` when no price table knows ``model``, or naming the first line
    whose usage is another provider's (pricing it with ``model`` would be a wrong number)."""
    from promptcache.catalog import get_policy, get_prices

    try:
        get_prices(model)
    except UnknownModelError as exc:
        near = f"; closest known ids: {', '.join(exc.suggestions)}" if exc.suggestions else ""
        _fail("--model", f"no prices for model {exc.model!r}{near}")
    except CatalogError as exc:
        _fail("--model", str(exc))
    try:
        family: str | None = get_policy(model).provider
    except (UnknownModelError, CatalogError):
        # another provider's model priced from genai-prices (deepseek-chat, gemini-*: their
        # OpenAI- and Anthropic-compatible endpoints return those shapes), or a model priced
        # by an override file only (a self-hosted one): any usage shape goes
        family = None
    for where, rec in located:
        other = _FAMILY.get(rec.provider)
        if family is not None and other is not None and other != family:
            _fail(where, f"{rec.provider} usage cannot be priced as --model {model} "
                         f"({family}); drop --model or split the log")


#: Billing notes that state an assumption made while pricing or an adjustment applied, not
#: why a cost is unknown.
#: What the report adds to a billing assumption note: how to change the assumption.
_NOTE_HINTS = {
    "write TTL not reported: priced at the 5m rate":
        " (cache_creation has no TTL split; if the application writes 1h entries, pass "
        "--write-ttl 1h)",
    "write TTL not reported: priced at the 1h rate":
        " (cache_creation has no TTL split; --write-ttl 1h)",
}


def _price_notes(tracker: UsageTracker) -> list[dict[str, Any]]:
    """Distinct pricing assumptions and applied adjustments (the billing notes that start with
    :data:`~promptcache.usage.billing.ASSUMPTION_PREFIXES`: writes without a TTL split priced
    at the ``--write-ttl`` rate, Flex / inference geo / fast-mode prices, an UNCONFIRMED
    price, a Bedrock / Vertex regional premium not applied), each with its record count and
    models: json ``notes``, text ``note`` lines."""
    found: dict[str, list[UsageRecord]] = {}
    for rec, cost in zip(tracker.records, tracker.costs, strict=True):
        if cost is None:
            continue
        for note in dict.fromkeys(cost.assumptions):
            found.setdefault(note, []).append(rec)
    return [{"message": note + _NOTE_HINTS.get(note, ""), "count": len(recs),
             "models": sorted({r.model for r in recs if r.model is not None})}
            for note, recs in found.items()]


def _group_reasons(records: list[UsageRecord], tracker: UsageTracker
                   ) -> dict[tuple[str | None, str | None], list[str]]:
    """Per (label, model) group: why some record's cost is unknown (distinct, in order)."""
    out: dict[tuple[str | None, str | None], dict[str, None]] = {}
    for rec, cost in zip(records, tracker.costs, strict=True):
        if cost is not None and cost.total is not None:
            continue
        if cost is None:
            reason = ("no model (pass --model)" if rec.model is None
                      else _no_prices_reason(rec.model))
        else:
            reason = "; ".join(_unknown_reason(n, rec) for n in cost.unknown_reasons
                               ) or "a count is unknown"
        out.setdefault((rec.label, rec.model), {})[reason] = None
    return {k: list(v) for k, v in out.items()}


def _no_prices_reason(model: str) -> str:
    """Why ``model`` has no price table: a fine-tuned OpenAI model (``ft:``) is billed at its
    own rates, not its base model's; any other model is unknown to the price sources."""
    from promptcache.catalog import is_fine_tuned

    if is_fine_tuned(model):
        return (f"fine-tuned model {model!r}: no prices (fine-tuned models are billed at their "
                "own rates, not the base model's; add the ft: id to a --prices file)")
    return f"no prices for model {model!r} (pass --model or --prices)"


def _unknown_reason(note: str, rec: UsageRecord) -> str:
    """A billing note of ``rec``'s unknown cost, in report terms (what to do about it). Unreported
    writes name the field ``rec``'s wire format reports them in
    (:data:`~promptcache.usage.parse.CACHE_WRITE_FIELDS`: ``cache_creation_input_tokens`` for
    Anthropic, ``prompt_tokens_details.cache_write_tokens`` for OpenAI chat, ...) and say
    whether the uncached part is unknown too (only when the input count includes the writes)."""
    model = rec.model
    if note == "no cache-read price for this model":
        return (f"no cache_read price for model {model!r} while cached tokens are reported "
                "(add cache_read to the --prices file)")
    if note.startswith("no ") and "price" in note:
        return f"{note} (add it to the --prices file)"
    if note == _WRITES_NOT_REPORTED:
        from promptcache.usage.parse import CACHE_WRITE_FIELDS

        field = CACHE_WRITE_FIELDS.get(rec.provider or "")
        missing = f" (the usage has no {field})" if field else ""
        if _uncached_needs_writes(rec):
            return (f"cache writes not reported{missing}, and the model bills them at their own "
                    "rate: the writes and the uncached part are unknown")
        return (f"cache writes not reported{missing}, and the model bills them at their own "
                "rate: the writes are unknown (the uncached part is reported on its own)")
    return note


def _unpriced(records: list[UsageRecord], tracker: UsageTracker) -> list[str]:
    """One sentence per reason some records have no cost: no model; a model without prices;
    a price table or usage that leaves a part of the cost unknown (the billing notes: a price
    the table lacks, a count the usage does not report)."""
    from promptcache.catalog import is_fine_tuned

    costs = tracker.costs
    missing: Counter[str | None] = Counter(
        r.model for r, c in zip(records, costs, strict=True) if c is None)
    partial: Counter[tuple[str | None, str]] = Counter()
    for rec, cost in zip(records, costs, strict=True):
        if cost is None or cost.total is not None:
            continue
        notes = list(cost.unknown_reasons)
        reason = "; ".join(_unknown_reason(n, rec) for n in notes) or "a count is unknown"
        partial[(rec.model, reason)] += 1
    out = []
    if missing[None]:
        n = missing.pop(None)
        out.append(f"{n} {'record names' if n == 1 else 'records name'} no model "
                   "(pass --model to price them)")
    for name, n in sorted(missing.items(), key=lambda kv: str(kv[0])):
        why = ("no prices (pass --model or --prices)" if name is None or not is_fine_tuned(name)
               else _no_prices_reason(name).split(": ", 1)[1])
        out.append(f"{n} {'record' if n == 1 else 'records'} of model {name!r}: {why}")
    for (name, reason), n in sorted(partial.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        out.append(f"{n} {'record' if n == 1 else 'records'} of model {name!r}: {reason}")
    return out


def _print_table(name: str, groups: list[tuple[tuple[str | None, str | None], UsageSummary]],
                 total: UsageSummary, events: Counter[str],
                 unknown: dict[tuple[str | None, str | None], frozenset[str]],
                 total_unknown: frozenset[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"usage: {name}")
    for col, just in (("label", "left"), ("model", "left"), ("requests", "right"),
                      ("hit rate", "right"), ("req. hits", "right"), ("uncached", "right"),
                      ("cache read", "right"), ("write 5m", "right"), ("write 1h", "right"),
                      ("write other", "right"), ("output", "right"), ("cost", "right"),
                      ("savings", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]

    def add(label: str, model: str, s: UsageSummary, missing: frozenset[str], *,
            end: bool = False) -> None:
        other = s.cache_write - s.cache_write_5m - s.cache_write_1h
        unknown = f" ({s.requests_unknown} unknown)" if s.requests_unknown else ""

        def tokens(field: str, n: int) -> str:
            return "?" if field in missing else f"{n:,}"

        table.add_row(label, model, f"{s.requests}{unknown}", _pct(s.hit_rate),
                      _pct(s.request_hit_rate), tokens("uncached_input", s.uncached_input),
                      tokens("cache_read", s.cache_read),
                      tokens("cache_write_5m", s.cache_write_5m),
                      tokens("cache_write_1h", s.cache_write_1h), tokens("cache_write", other),
                      f"{s.output:,}", _money_short(s.cost), _money_short(s.savings),
                      end_section=end)

    for i, ((label, model), s) in enumerate(groups):
        add(label or "-", model or "-", s, unknown.get((label, model), frozenset()),
            end=i == len(groups) - 1)
    add("TOTAL", "", total, total_unknown)
    console = Console(width=max(160, Console().width))
    console.print(table)
    if events:
        console.print("events: " + ", ".join(f"{n} {k}" for k, n in sorted(events.items())))


def _plot(tracker: UsageTracker, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _fail(path, "plotting needs matplotlib: pip install 'promptcache[plot]'")
    pairs = list(zip(tracker.records, tracker.costs, strict=True))
    timed = [(r.start if r.start is not None else r.end, r, c) for r, c in pairs]
    use_time = all(t is not None for t, _, _ in timed) and bool(timed)
    if use_time:
        timed.sort(key=lambda x: x[0] or 0.0)
    xs: list[float] = []
    rates: list[float] = []
    costs: list[float] = []
    read = total = 0
    usage_unknown = cost_unknown = 0
    spent = Decimal(0)
    t0 = timed[0][0] if use_time and timed[0][0] is not None else 0.0
    for i, (t, rec, cost) in enumerate(timed):
        if rec.total_input is not None and rec.cache_read is not None:
            read += rec.cache_read
            total += rec.total_input
        else:
            usage_unknown += 1
        if cost is not None and cost.total is not None:
            spent += cost.total
        else:
            cost_unknown += 1
        xs.append(((t or 0.0) - t0) / 60 if use_time else float(i))
        rates.append(read / total if total else float("nan"))
        costs.append(float(spent))
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    ax1.plot(xs, rates)
    # the curves sum the known records only: say so on the axes, as the table says "?"
    # (a partial sum labelled "cost" read as the whole cost: trial 29)
    ax1.set_ylabel(_plot_label("hit rate", usage_unknown, len(timed), "usage"))
    ax1.set_ylim(0, 1)
    ax2.plot(xs, costs, color="tab:red")
    ax2.set_ylabel(_plot_label("cost (USD)", cost_unknown, len(timed), "cost"))
    ax2.set_xlabel("minutes since first request" if use_time else "request #")
    fig.tight_layout()
    try:
        fig.savefig(path, format=PLOT_FORMATS.get(os.path.splitext(path)[1].lower()))
    except OSError as exc:
        _fail(path, exc.strerror or str(exc))
    finally:
        plt.close(fig)


def _plot_label(what: str, unknown: int, requests: int, kind: str) -> str:
    """Y label of a cumulative ``--plot`` curve: ``"cumulative <what>"``, or, when ``unknown``
    of the ``requests`` have an unknown ``kind`` (left out of the curve), a label that says
    the curve covers the known records only and how many it leaves out."""
    if not unknown:
        return f"cumulative {what}"
    return f"cumulative known {what}\n({unknown} of {requests} requests' {kind} unknown)"


def _check_breakeven_options(model: str, ttl: str | None, interval: float | None,
                             keepalive_cap: float | None) -> None:
    """Exit 2 (one line) on an unknown ``--model`` (naming the closest catalog ids), a
    ``--ttl`` for a model without a TTL parameter, an option that only prices the
    ``--interval`` comparison given without ``--interval``, or ``--keepalive-cap`` for a model
    with no TTL to keep alive: each would otherwise be silently ignored."""
    from click.core import ParameterSource

    from promptcache.catalog import get_policy

    error = check_model(model)
    if error is not None:
        fail(error)
    pol = get_policy(model)
    if ttl is not None and not pol.ttls:
        if pol.automatic_caching:
            kept = [r for r in pol.prompt_cache_retention if r != "in_memory"]
            hint = (f" (its retention options in_memory, {', '.join(kept)}: compare them with "
                    "--interval)" if kept else "")
            _fail(f"--ttl {ttl}", f"{model} caches automatically and takes no --ttl{hint}")
        _fail(f"--ttl {ttl}", f"{model} has no cache TTL to choose")
    ctx = click.get_current_context()
    if interval is None:
        for param, option in (("n_requests", "--requests"), ("suffix_tokens", "--suffix-tokens"),
                              ("output_tokens", "--output-tokens"),
                              ("keepalive_cap", "--keepalive-cap")):
            if ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT):
                _fail(option, "needs --interval (it prices the TTL policy comparison; the "
                              "break-even count depends on the prefix alone)")
    if keepalive_cap is not None and not pol.ttls:
        _fail("--keepalive-cap", f"{model} has no TTL to keep alive (it caches automatically); "
                                 "drop --keepalive-cap")


def _retention_note(model: str) -> str | None:
    """What the catalog says about how long ``model`` keeps a prefix without a TTL (the note
    on its ``ttls`` fact, with the source URL), or None when it says nothing."""
    from promptcache.catalog import get_policy

    try:
        src = get_policy(model).sources.get("ttls")
    except (UnknownModelError, CatalogError):
        return None
    if src is None or not src.note:
        return None
    return f"{src.note}; {src.url}"


_BREAKEVEN_ARGS = {"inter_arrival_seconds": "--interval", "keepalive_cap_usd": "--keepalive-cap",
                   "prefix_tokens": "--prefix-tokens", "requests": "--requests",
                   "suffix_tokens": "--suffix-tokens", "output_tokens": "--output-tokens"}


def _breakeven_option(message: str) -> str:
    """The command-line option(s) a :func:`breakeven` / :func:`ttl_policy` ValueError is about
    (its message starts with the argument's name, or names joined by ``x`` / ``+`` before
    ``must`` or ``:``: ``--requests, --interval`` for a horizon too long), ``--ttl`` for a TTL
    the model does not offer, else ``breakeven``."""
    head = re.split(r" must |:", message, maxsplit=1)[0]
    names = [_BREAKEVEN_ARGS[w] for w in re.findall(r"[a-z_]+", head) if w in _BREAKEVEN_ARGS]
    if names and head.split(" ", 1)[0] in _BREAKEVEN_ARGS:
        return ", ".join(dict.fromkeys(names))
    return "--ttl" if "TTL" in message else "breakeven"


@click.command("breakeven")
@click.option("--model", required=True, help="Model id (catalog).")
@click.option("--prefix-tokens", type=click.IntRange(min=0), required=True,
              help=f"Tokens of the shared prefix (at most {MAX_TOKENS:,}).")
@click.option("--ttl", default=None,
              help="TTL to price: 5m or 1h (Anthropic), 30m (OpenAI 5.6+); default: the model's "
                   "default. Models that cache automatically without a TTL take none.")
@click.option("--interval", type=click.FloatRange(min=0, min_open=True), default=None,
              help=f"Seconds between requests (at most {MAX_SPAN_SECONDS:.0f}, the year "
                   "9999): also compare every TTL policy.")
@click.option("--requests", "n_requests", type=click.IntRange(min=1), default=100,
              show_default=True,
              help=f"Requests in the horizon (at most {MAX_REQUESTS:,}; needs --interval).")
@click.option("--suffix-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Uncached suffix after the prefix, per request (tokens; needs --interval).")
@click.option("--output-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Output per request (tokens; needs --interval).")
@click.option("--keepalive-cap", type=click.FloatRange(min=0), default=None,
              help="Spend cap in USD on keepalive pings over the horizon (needs --interval and "
                   "a model with a TTL).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def breakeven_command(model: str, prefix_tokens: int, ttl: str | None, interval: float | None,
                      n_requests: int, suffix_tokens: int, output_tokens: int,
                      keepalive_cap: float | None, fmt: str) -> None:
    """Requests within the TTL from which caching pays, and the cheapest TTL policy.

    For a model that caches automatically (no TTL), the count is of requests that still find
    the prefix cached: the provider keeps it for an unspecified time.
    """
    from promptcache.usage.breakeven import breakeven, ttl_policy

    _check_breakeven_options(model, ttl, interval, keepalive_cap)
    try:
        # the policy first: its errors name the options (--suffix-tokens over the bound...)
        pol = None if interval is None else ttl_policy(
            model, prefix_tokens, interval, requests=n_requests, suffix_tokens=suffix_tokens,
            output_tokens=output_tokens, keepalive_cap_usd=keepalive_cap)
        # priced at the tier of the whole prompt, as the policy table prices it
        prompt = prefix_tokens + suffix_tokens
        be = breakeven(model, prefix_tokens, ttl,
                       prompt_tokens=prompt if prompt <= MAX_TOKENS else None)
    except UnknownModelError as exc:
        fail(unknown_model_message(exc))
    except CatalogError as exc:
        _fail("--model", str(exc))
    except ValueError as exc:
        _fail(_breakeven_option(str(exc)), str(exc))
    if fmt == "json":
        out: dict[str, Any] = {
            "model": be.model, "ttl": be.ttl, "prefix_tokens": be.prefix_tokens,
            "requests": be.requests, "read_multiplier": be.read_multiplier,
            "write_multiplier": be.write_multiplier,
            "uncached_prefix_usd": str(be.uncached_prefix_usd), "write_usd": str(be.write_usd),
            "read_usd": str(be.read_usd), "reason": be.reason,
        }
        if pol is not None:
            out["policy"] = {
                "inter_arrival_seconds": pol.inter_arrival_seconds, "requests": pol.requests,
                "best": pol.best.name,
                "options": [{"name": o.name, "cost_usd": str(o.cost), "writes": o.writes,
                             "reads": o.reads, "pings": o.pings, "ping_cost_usd": str(o.ping_cost),
                             "available": o.available, "capped": o.capped, "note": o.note}
                            for o in pol.options],
            }
        click.echo(json.dumps(out, indent=2))
        return
    ttl_text = f"TTL {be.ttl}" if be.ttl else "automatic caching, no write fee"
    if be.requests is None:
        click.echo(f"{model}, {prefix_tokens}-token prefix, {ttl_text}: caching never pays "
                   f"({be.reason})")
    else:
        window = "within the TTL"
        if not be.ttl:
            note = _retention_note(model) or "the entry is kept for an unspecified time"
            window = f"while the provider still holds the prefix ({note})"
        click.echo(f"{model}, {prefix_tokens}-token prefix, {ttl_text}: caching is cheaper from "
                   f"{be.requests} requests {window} (per prefix: uncached "
                   f"{_money(be.uncached_prefix_usd)}, write {_money(be.write_usd)}, read "
                   f"{_money(be.read_usd)}; x{be.write_multiplier:g} write, "
                   f"x{be.read_multiplier:g} read)")
    if pol is not None:
        click.echo(f"{pol.requests} requests every {pol.inter_arrival_seconds:g}s:")
        for o in pol.options:
            mark = "*" if o is pol.best else " "
            extra = (f", {_plural(o.pings, 'ping')} ({_money(o.ping_cost)})" if o.pings
                     else "")
            click.echo(f" {mark} {o.name:<14} {_money_short(o.cost):>12}  "
                       f"{_plural(o.writes, 'write')}, {_plural(o.reads, 'read')}{extra}; "
                       f"{o.note}")
        if pol.best.name == "none":
            click.echo("cheapest: none (no caching is cheapest at this interval)")
        else:
            click.echo(f"cheapest: {pol.best.name} (saves "
                       f"{_money_short(pol.savings_vs_none)} vs no caching)")
