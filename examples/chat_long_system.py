"""A support chat under a long system prompt: turn 1 writes the cache, later turns read it.

The system prompt (``prompts/support_system.md``, about 1,100 tokens: the Forgehouse support
assistant) is the same on every request, so the first request writes it to the cache and every
later request reads it, together with the earlier turns of the conversation. The request is
built with :class:`promptcache.builder.PromptBuilder`, which puts the sections in cache order
(system, then history, then the new turn) and places the cache breakpoints; each request passes
the previous request's plan (``previous=plan``) so the new breakpoint can reach what the last
one wrote.

Run::

    python examples/chat_long_system.py                      # local backend, Anthropic API shape
    python examples/chat_long_system.py --provider openai    # local backend, OpenAI API shape
    ANTHROPIC_API_KEY=... python examples/chat_long_system.py --model claude-sonnet-4-6

Without an API key the requests go to the local reference backend (in-process, no network).
Its model has random weights, so its answers are meaningless and not shown; a prepared answer
stands in for each of its replies in the conversation history. On a real API the model's own
answer goes into the history and its first line is printed. Either way, every number printed is
the wrapper's record of the provider's ``usage`` field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from _common import ExampleResult, open_target, print_summary, record_step, run_args, show_reply

import promptcache
from promptcache.builder import Message, PromptBuilder, assistant, user
from promptcache.usage import UsageTracker

SYSTEM_PROMPT = (Path(__file__).parent / "prompts" / "support_system.md").read_text("utf-8")

#: The administrator's four questions, asked in one conversation.
QUESTIONS = [
    "We run Forgehouse 7.2 on Debian 12 with PostgreSQL 13. What is the safest way to get to "
    "7.4, and do we have to touch the database first?",
    "While testing the upgrade on a staging copy, pushing our monorepo fails with \"fatal: the "
    "remote end hung up unexpectedly\" after about a minute. Forgehouse sits behind nginx.",
    "Our security team wants single sign-on through Okta with SAML. We are on the Community "
    "edition. Is that possible, or what are the alternatives?",
    "Since we rotated the runner registration token yesterday, every pipeline job stays in "
    "\"pending\". What should I check?",
]

#: Stand-ins for the local model's replies (its text is random): what a good answer looks like.
PREPARED_ANSWERS = [
    "Upgrade PostgreSQL first, then Forgehouse: 7.4 supports PostgreSQL 14 to 17, and 13 is not "
    "supported. 1. Take a backup with `forgehouse backup create`. 2. Upgrade PostgreSQL to 16 "
    "with `pg_upgrade`. 3. Install the 7.3 binary and start it once so its migrations run. "
    "4. Install 7.4 and start it. Downgrades are not supported, so keep the backup until 7.4 "
    "has run for a few days.",
    "This is usually nginx's request-size limit, not Forgehouse. 1. Raise "
    "`client_max_body_size` in the server block that proxies Forgehouse (for example to 2g). "
    "2. Reload nginx. Forgehouse itself accepts pushes up to `[repository] max_push_size`, "
    "2 GiB by default. If it still fails, send me the matching lines of `forgehouse.log`.",
    "Not on the Community edition: SAML is available only in the Enterprise edition. Okta also "
    "speaks OpenID Connect, which every edition supports. 1. Create an OIDC web application in "
    "Okta. 2. Add it as an authentication source on the administration page. 3. Require "
    "two-factor authentication per organisation if your policy asks for it.",
    "Runners stuck in pending after a token rotation usually still use the old registration "
    "token. 1. Run `forgehouse-runner diagnose` on a runner host: it prints the token state and "
    "the labels. 2. Re-register each runner with the new token. 3. Check that the pipeline jobs "
    "request labels the runners offer.",
]

#: Seconds between the user's messages (inside the 5-minute TTL).
THINK_TIME_SECONDS = 40.0


def main(argv: Sequence[str] | None = None) -> ExampleResult:
    """Run the four-turn chat and print per-turn usage and the tracker's summary.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``); see ``--help``.

    Returns:
        The tracker, one step per turn and the local backend's counters.
    """
    args = run_args(argv, __doc__.splitlines()[0] if __doc__ else "")
    tracker = UsageTracker()
    with open_target(args) as target:
        print(f"Sending to the {target.describe()}.\n")
        # promptcache.wrap records every response's usage in the tracker (and lints requests).
        client = promptcache.wrap(target.client, tracker=tracker, session="support-chat")
        result = ExampleResult(target, tracker)
        history: list[Message] = []
        plan = None
        for n, question in enumerate(QUESTIONS):
            # One builder per request: system prompt, earlier turns, then the new question.
            builder = PromptBuilder(target.model, previous=plan)
            builder.system(SYSTEM_PROMPT)
            if history:
                builder.history(*history)
            builder.turn(question)
            # Render for the provider (the builder places the cache markers) and send.
            if target.provider == "anthropic":
                response = client.messages.create(
                    **builder.to_anthropic(max_tokens=target.max_tokens))
            else:
                response = client.chat.completions.create(
                    **builder.to_openai_chat(max_completion_tokens=target.max_tokens))
            plan = builder.last_plan  # what this request wrote; the next one reads it
            result.steps.append(record_step(tracker, f"turn {n + 1}", target))
            show_reply(target, response)
            # The reply joins the history. The local model's text is random, so a prepared
            # answer stands in for it (also when a real reasoning model spent every output
            # token thinking and returned no text).
            answer = target.reply_text(response) or PREPARED_ANSWERS[n]
            history += [user(question), assistant(answer)]
            target.wait(THINK_TIME_SECONDS)
        print_summary(tracker)
        result.counters = target.backend_counters()
    return result


if __name__ == "__main__":
    main()
