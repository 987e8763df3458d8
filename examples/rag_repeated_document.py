"""Questions against one repeated document: every conversation reads the document from cache.

Retrieval often hands the model the same document again and again: here the on-call runbook of
an ingestion service (``prompts/oncall_runbook.md``, about 1,800 tokens). Four engineers ask
four unrelated questions, each in a new conversation. The document goes into the request's
static context with :meth:`PromptBuilder.document`, after the short instructions and before the
question, so the prefix "instructions + document" is byte-identical in all four requests: the
first request writes it to the cache and the other three read it.

At the end the script prints what the four requests cost against the same requests without
caching (the tracker's savings), and :func:`promptcache.usage.breakeven` for that prefix: how
many requests within one TTL it takes before caching it pays.

Run::

    python examples/rag_repeated_document.py                      # local backend
    python examples/rag_repeated_document.py --provider openai    # local backend, OpenAI shape
    OPENAI_API_KEY=... python examples/rag_repeated_document.py --model gpt-5

Without an API key the requests go to the local reference backend (in-process, no network);
its model has random weights, so its answers are not shown. The caching, the usage and the
costs are real.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from _common import (
    ExampleResult,
    open_target,
    print_summary,
    record_step,
    run_args,
    show_reply,
    usd,
)

import promptcache
from promptcache.builder import PromptBuilder
from promptcache.planner import ReuseModel
from promptcache.usage import UsageTracker, breakeven

RUNBOOK = (Path(__file__).parent / "prompts" / "oncall_runbook.md").read_text("utf-8")

INSTRUCTIONS = """\
You answer questions from engineers on call for the Lighthouse ingestion service. Answer only
from the runbook below. Quote the runbook section number you rely on, give the exact
`lighthousectl` commands to run, and say when an action is marked two-person. If the runbook
does not cover the question, say so and name who to escalate to."""

#: Four unrelated questions, each asked in a new conversation.
QUESTIONS = [
    "WALDiskAlmostFull just fired for collector-4 in eu-west-1 and the disk is at 91 %. Can I "
    "delete the oldest WAL segments to buy time?",
    "The compactor shows segment_checksum_mismatch failures since 03:10 UTC. What do I do with "
    "the affected segment?",
    "p99 write latency is 1.2 s on every node since the 14:00 deploy. Is rolling back the "
    "collector safe?",
    "I need to add a seventh collector node this afternoon. Anything I should watch out for?",
]

#: What the next request shares with this one: never this conversation (continuation=0), always
#: the static prefix (a new conversation over the same document).
ONE_SHOT = ReuseModel(continuation=0.0, new_conversation=1.0)

#: Seconds between the questions (they arrive from different engineers within a few minutes).
GAP_SECONDS = 50.0


def main(argv: Sequence[str] | None = None) -> ExampleResult:
    """Ask the four questions and print per-request usage, savings and the break-even.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``); see ``--help``.

    Returns:
        The tracker, one step per question, the local backend's counters, and in ``extra``:
        ``prefix_tokens`` (the cached instructions + document, as the provider counted the
        read) and ``breakeven`` (a :class:`promptcache.usage.BreakEven`).
    """
    args = run_args(argv, __doc__.splitlines()[0] if __doc__ else "")
    tracker = UsageTracker()
    with open_target(args) as target:
        print(f"Sending to the {target.describe()}.\n")
        client = promptcache.wrap(target.client, tracker=tracker, label="runbook-qa")
        result = ExampleResult(target, tracker)
        for n, question in enumerate(QUESTIONS):
            # A new conversation per question: no history, no previous plan. ONE_SHOT tells the
            # planner that the next request shares only the instructions + document, so it
            # marks the end of the document and does not pay the write premium on the question.
            builder = PromptBuilder(target.model, reuse=ONE_SHOT)
            builder.system(INSTRUCTIONS)
            builder.document(RUNBOOK, title="oncall_runbook.md")
            builder.turn(question)
            # Render for the provider (the builder places the cache markers) and send.
            if target.provider == "anthropic":
                response = client.messages.create(
                    **builder.to_anthropic(max_tokens=target.max_tokens))
            else:
                response = client.chat.completions.create(
                    **builder.to_openai_chat(max_completion_tokens=target.max_tokens))
            result.steps.append(record_step(tracker, f"Q{n + 1}", target))
            show_reply(target, response)
            target.wait(GAP_SECONDS)
        print_summary(tracker)

        # The shared prefix, as the provider measured it: what the second question read.
        prefix_tokens = result.steps[1].record.cache_read or 0
        be = breakeven(target.model, prefix_tokens)
        n = len(QUESTIONS)
        print(f"\nShared prefix (instructions + runbook): {prefix_tokens:,} tokens.")
        if be.requests is None:
            print(f"Caching it never pays: {be.reason}.")
        else:
            ttl = f"within one {be.ttl} TTL" if be.ttl else "while the entry lives"
            print(f"Break-even: caching it pays from {be.requests} requests {ttl} "
                  f"(write {be.write_multiplier:g}x, read {be.read_multiplier:g}x the input "
                  f"price). For {n} requests the prefix costs {usd(be.cost_cached(n))} cached "
                  f"against {usd(be.cost_uncached(n))} uncached.")
        result.extra.update(prefix_tokens=prefix_tokens, breakeven=be)
        result.counters = target.backend_counters()
    return result


if __name__ == "__main__":
    main()
