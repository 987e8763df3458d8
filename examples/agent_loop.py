"""A tool-using agent loop whose every step reads the previous step's prefix from cache.

An on-call agent for the Lighthouse ingestion service investigates a paging alert with four
tools (metrics, node status, logs, deploys) and the service's runbook
(``prompts/oncall_runbook.md``) in its context. Each step is one request: tools, instructions
and runbook, then the conversation so far (the agent's tool calls and their results), then the
new tool results. One step fans out six tool calls at once (the status of every collector node),
so the request grows by a wide run of ``tool_use`` and ``tool_result`` blocks.

Every request is built with :class:`promptcache.builder.PromptBuilder`, passing the previous
step's plan (``PromptBuilder(model, previous=plan)``): the planner then places this request's
breakpoints so that one of them reaches, within Anthropic's 20-position lookback, the entry the
previous step wrote, and another marks the end of the new tool results for the next step.
At the end the script prints :meth:`PromptBuilder.explain` for the last step: every segment,
its tokens and position, and why each breakpoint is where it is.

The agent's moves are scripted. The local backend's model has random weights, so it cannot
decide which tool to call; the script plays the agent's recorded decisions (``SCRIPT``) and a
scripted tool executor (:func:`execute`) answers the calls from a fixed snapshot of the
service. Against a real API (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` set) the requests go to
the real model and its usage is real, but the script still plays the scripted calls, so both
runs send the same conversation; the real model's reply is only printed.

Run::

    python examples/agent_loop.py                      # local backend, Anthropic API shape
    python examples/agent_loop.py --provider openai    # local backend, OpenAI API shape
    ANTHROPIC_API_KEY=... python examples/agent_loop.py --model claude-sonnet-4-6
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import ExampleResult, open_target, print_summary, record_step, run_args, show_reply
from rich.console import Console

import promptcache
from promptcache.builder import Message, PromptBuilder, ToolCall, ToolResult, assistant, user
from promptcache.planner import BreakpointPlan
from promptcache.usage import UsageTracker

RUNBOOK = (Path(__file__).parent / "prompts" / "oncall_runbook.md").read_text("utf-8")

INSTRUCTIONS = """\
You are the on-call assistant for the Lighthouse metrics ingestion service. When an alert
fires, find its cause with the tools, following the runbook below, then tell the engineer what
is happening and which runbook actions to take, in order, with the exact commands. Call tools in
parallel when the calls do not depend on each other. Never run or recommend an action marked
two-person without saying so, and never suggest deleting WAL segments."""

#: The agent's tools (Anthropic shape; the builder converts them for OpenAI).
TOOLS: list[dict[str, Any]] = [
    {
        "name": "query_metrics",
        "description": "Read one ingestion metric over a recent time window from the metrics "
                       "store, optionally split by collector node. Returns the latest value "
                       "and the value at the start of the window for each series.",
        "input_schema": {
            "type": "object",
            "properties": {
                "metric": {
                    "type": "string",
                    "enum": ["ingest_error_ratio", "write_latency_p99_seconds",
                             "wal_disk_used_ratio", "compactor_lag_seconds"],
                    "description": "Metric name.",
                },
                "region": {"type": "string", "description": "Region, e.g. eu-west-1."},
                "by_node": {"type": "boolean",
                            "description": "Split the series by collector node."},
                "range_minutes": {"type": "integer", "minimum": 5, "maximum": 1440,
                                  "description": "Window length in minutes."},
            },
            "required": ["metric", "region", "range_minutes"],
        },
    },
    {
        "name": "get_node_status",
        "description": "Current status of one collector node: readiness, WAL volume use, fsync "
                       "latency, last restart, number of tenants pinned to it.",
        "input_schema": {
            "type": "object",
            "properties": {
                "region": {"type": "string"},
                "node": {"type": "string", "pattern": "^collector-[0-9]+$"},
            },
            "required": ["region", "node"],
        },
    },
    {
        "name": "search_logs",
        "description": "Search the structured logs of one Lighthouse service. Returns the "
                       "newest matching lines first.",
        "input_schema": {
            "type": "object",
            "properties": {
                "service": {"type": "string", "enum": ["collector", "compactor", "query-api"]},
                "region": {"type": "string"},
                "query": {"type": "string",
                          "description": "Substring or field filter, e.g. level=error."},
                "since_minutes": {"type": "integer", "minimum": 1, "maximum": 1440},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20},
            },
            "required": ["service", "region", "query", "since_minutes"],
        },
    },
    {
        "name": "list_deploys",
        "description": "Deploys of one service in one region, newest first.",
        "input_schema": {
            "type": "object",
            "properties": {
                "service": {"type": "string",
                            "enum": ["collector", "compactor", "query-api", "object-store"]},
                "region": {"type": "string"},
                "since_hours": {"type": "integer", "minimum": 1, "maximum": 168},
            },
            "required": ["service", "region", "since_hours"],
        },
    },
]

# ------------------------------------------------------------------ the scripted environment
#: A fixed snapshot of eu-west-1 at 14:14 UTC: collector-4's WAL volume is filling up because
#: the compactor is throttled by the object store, and collector-4 sheds writes with 503s.
NODES: dict[str, dict[str, Any]] = {
    f"collector-{i}": {"ready": True, "wal_disk_used_ratio": used, "fsync_p99_ms": fsync,
                       "last_restart": "2026-11-21T03:12:40Z", "tenants": tenants,
                       "sealed_uncompacted_segments": sealed}
    for i, used, fsync, tenants, sealed in [
        (1, 0.41, 9.8, 212, 3), (2, 0.47, 10.4, 198, 4), (3, 0.44, 9.1, 205, 3),
        (4, 0.93, 31.7, 221, 57), (5, 0.52, 11.0, 190, 5), (6, 0.39, 8.7, 207, 2),
    ]
}
NODES["collector-4"]["ready"] = False
NODES["collector-4"]["note"] = "write admission paused: WAL volume above 92 %"


def _metric(metric: str, by_node: bool) -> dict[str, Any]:
    """Latest value and value at window start of one metric (per node or region-wide)."""
    per_node: dict[str, tuple[float, float]] = {}
    for name, node in NODES.items():
        if metric == "ingest_error_ratio":
            per_node[name] = (0.162, 0.001) if name == "collector-4" else (0.0004, 0.0003)
        elif metric == "write_latency_p99_seconds":
            per_node[name] = (2.41, 0.09) if name == "collector-4" else (0.11, 0.09)
        elif metric == "wal_disk_used_ratio":
            per_node[name] = (node["wal_disk_used_ratio"],
                              0.58 if name == "collector-4" else node["wal_disk_used_ratio"])
    if metric == "compactor_lag_seconds":
        return {"series": [{"labels": {}, "latest": 2820.0, "window_start": 410.0}]}
    if by_node:
        return {"series": [{"labels": {"node": n}, "latest": v, "window_start": s}
                           for n, (v, s) in per_node.items()]}
    latest = sum(v for v, _ in per_node.values()) / len(per_node)
    start = sum(s for _, s in per_node.values()) / len(per_node)
    return {"series": [{"labels": {}, "latest": round(latest, 4),
                        "window_start": round(start, 4)}]}


def execute(call: ToolCall) -> ToolResult:
    """Run one tool call against the snapshot; unknown tools or nodes give an error result."""
    args = dict(call.input)
    if call.name == "query_metrics":
        out: Any = {"metric": args["metric"], "region": args["region"],
                    "range_minutes": args["range_minutes"],
                    **_metric(args["metric"], bool(args.get("by_node")))}
    elif call.name == "get_node_status":
        node = NODES.get(args["node"])
        if node is None:
            return ToolResult(call.id, f"no node {args['node']} in {args['region']}",
                              is_error=True)
        out = {"node": args["node"], "region": args["region"], **node}
    elif call.name == "search_logs" and args["service"] == "compactor":
        out = {"lines": [
            {"ts": "2026-11-29T14:13:52Z", "level": "error", "worker": "compactor-2",
             "msg": "upload failed", "reason": "object_store_throttled", "retry_in_s": 30,
             "segment": "collector-4/000184213"},
            {"ts": "2026-11-29T14:13:40Z", "level": "error", "worker": "compactor-0",
             "msg": "upload failed", "reason": "object_store_throttled", "retry_in_s": 30,
             "segment": "collector-4/000184207"},
            {"ts": "2026-11-29T14:12:05Z", "level": "warn", "worker": "compactor-1",
             "msg": "retry budget exhausted for 3 segments; requeued",
             "reason": "object_store_throttled"},
        ], "total_matches": 412}
    elif call.name == "search_logs":
        out = {"lines": [], "total_matches": 0}
    elif call.name == "list_deploys":
        out = {"deploys": [] if args["service"] != "object-store" else [
            {"version": "2026.11.29-1", "finished": "2026-11-29T13:31:09Z",
             "change": "lower per-tenant PUT rate limit from 3,500/s to 1,200/s"}]}
    else:
        return ToolResult(call.id, f"unknown tool {call.name}", is_error=True)
    return ToolResult(call.id, json.dumps(out))


REGION = "eu-west-1"
TASK = (f"IngestErrorRateHigh is firing for {REGION}: 2.7 % of writes returned 5xx over the "
        "last 12 minutes. Find the cause and tell me what to do. Do not take any action yet.")


def _calls(step: int, *calls: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(f"toolu_{step:02d}_{i}", name, args) for i, (name, args) in enumerate(calls)]


#: The agent's recorded moves, one per step: its text and the tool calls it made. The last
#: move has no tool calls: it is the final answer, and the loop ends.
SCRIPT: list[tuple[str, list[ToolCall]]] = [
    ("Checking which collector nodes carry the errors, and whether anything was deployed.",
     _calls(1, ("query_metrics", {"metric": "ingest_error_ratio", "region": REGION,
                                  "by_node": True, "range_minutes": 30}),
            ("list_deploys", {"service": "collector", "region": REGION, "since_hours": 6}),
            ("list_deploys", {"service": "object-store", "region": REGION, "since_hours": 6}))),
    ("Almost all errors come from collector-4; no collector deploy, but the object store's "
     "rate limit was lowered at 13:31. Comparing the status of all six collectors.",
     _calls(2, *(("get_node_status", {"region": REGION, "node": f"collector-{i}"})
                 for i in range(1, 7)))),
    ("collector-4's WAL volume is 93 % full with 57 sealed, uncompacted segments; the others "
     "look normal. Runbook 2.1 step 1 sends me to 2.3: checking compactor lag and failures.",
     _calls(3, ("query_metrics", {"metric": "compactor_lag_seconds", "region": REGION,
                                  "range_minutes": 60}),
            ("search_logs", {"service": "compactor", "region": REGION,
                             "query": "level=error", "since_minutes": 60, "limit": 20}))),
    ("Cause: since the object store's 13:31 deploy lowered the per-tenant PUT limit, the "
     "compactor's uploads are throttled (object_store_throttled), its lag grew to 47 minutes, "
     "and collector-4, which holds the busiest tenants, has a 93 % full WAL volume and refuses "
     "writes. Actions, following runbook 2.3 and 2.4: 1. Reduce upload parallelism: "
     "`lighthousectl config set compactor.upload_parallelism 4`, and tell the storage team "
     "about the new limit. 2. Watch compactor lag; scaling the compactor would add uploads and "
     "more throttling. 3. Two-person, only if the volume will be full within thirty minutes: "
     "`lighthousectl node drain collector-4`, then extend the volume. Do not delete WAL "
     "segments.", []),
]

#: Seconds between steps (tool latency plus the model's time).
STEP_SECONDS = 8.0


def build_step(model: str, plan: BreakpointPlan | None, history: list[Message],
               new_parts: list[Any]) -> PromptBuilder:
    """One step's request: tools, instructions and runbook, the conversation, the new parts."""
    builder = PromptBuilder(model, previous=plan)
    builder.tools(TOOLS).system(INSTRUCTIONS).document(RUNBOOK, title="oncall_runbook.md")
    if history:
        builder.history(*history)
    builder.turn(*new_parts)
    return builder


def main(argv: Sequence[str] | None = None) -> ExampleResult:
    """Run the agent loop and print per-step usage and the last step's breakpoint table.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``); see ``--help``.

    Returns:
        The tracker, one step per request, the local backend's counters, and in ``extra``:
        ``plans`` (each step's :class:`~promptcache.planner.BreakpointPlan`) and
        ``explanation`` (the last step's :class:`~promptcache.builder.Explanation`).
    """
    args = run_args(argv, __doc__.splitlines()[0] if __doc__ else "")
    tracker = UsageTracker()
    console = Console()
    if not console.is_terminal:  # piped or captured: wide enough for the explain table
        console = Console(width=150)
    with open_target(args) as target:
        print(f"Sending to the {target.describe()}.\n")
        client = promptcache.wrap(target.client, tracker=tracker, session="alert-ingest-eu")
        result = ExampleResult(target, tracker)
        history: list[Message] = []
        new_parts: list[Any] = [TASK]
        plan: BreakpointPlan | None = None
        plans: list[BreakpointPlan | None] = []
        for step, (text, calls) in enumerate(SCRIPT, start=1):
            builder = build_step(target.model, plan, history, new_parts)
            # Render for the provider (the builder places the cache markers) and send.
            if target.provider == "anthropic":
                response = client.messages.create(
                    **builder.to_anthropic(max_tokens=target.max_tokens))
            else:
                response = client.chat.completions.create(
                    **builder.to_openai_chat(max_completion_tokens=target.max_tokens))
            plan = builder.last_plan  # the next step's breakpoints are planned against it
            plans.append(plan)
            result.steps.append(record_step(tracker, f"step {step}", target))
            show_reply(target, response)
            # The agent's move is scripted (see the module docstring), not the response's.
            print("          agent: " + (f"{len(calls)} tool call(s): "
                                           f"{', '.join(c.name for c in calls)}"
                                           if calls else "final answer"))
            history += [user(*new_parts), assistant(text, *calls)]
            if not calls:
                # Every segment of the last request, its tokens and lookback position, and why
                # each breakpoint is where it is (token counts are the builder's estimate).
                explanation = builder.explain()
                break
            # A real agent runs independent calls concurrently; the results go back together.
            new_parts = [execute(call) for call in calls]
            target.wait(STEP_SECONDS)
        print_summary(tracker)
        print("\nBreakpoints of the last step (PromptBuilder.explain()):")
        console.print(explanation)
        result.extra.update(plans=plans, explanation=explanation)
        result.counters = target.backend_counters()
    return result


if __name__ == "__main__":
    main()
