"""PC103 volatile.random: a random value inside the cached prefix."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import PythonContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC103"]


class Rule_PC103(Rule):
    """A random (or per-process) value flows into the cached prefix.

    ## What it does
    In Python source, follows ``random.*``, ``secrets.*``, ``os.urandom()`` and
    ``os.getpid()`` through assignments, f-strings, ``.format`` and concatenation into
    ``system=``, ``tools=`` or the first messages of an Anthropic / OpenAI call (or a
    promptcache builder's stable section). A random value in a rendered request cannot be
    told from a constant by looking at one request; in request logs it shows up as content
    that varies between requests (PC105).

    ## Why is this bad?
    A random few-shot pick, a shuffled example order or a nonce makes every prompt different,
    so the prefix after it is never reused and every request pays a cache write.

    ## Example
    ```python
    examples = random.sample(EXAMPLES, 3)
    client.messages.create(system=f"Examples:\\n{examples}\\n" + RULES, ...)
    ```

    ## Use instead
    ```python
    examples = EXAMPLES[:3]            # a fixed choice, or seed per conversation
    client.messages.create(system=f"Examples:\\n{examples}\\n" + RULES, ...)
    ```

    ## Fix safety
    No automatic fix: replacing randomness changes the prompt's content.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    - https://developers.openai.com/api/docs/guides/prompt-caching
    """

    code = "PC103"
    name = "volatile.random"
    summary = "Random value inside the cached prefix"
    groups = ("all", "volatile")
    severity = Severity.WARNING
    message = "random value inside the cached prefix"
    fix_title = "pick deterministically (or seed per conversation) before the cached prefix"
    inputs = frozenset({"python"})

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            if flow.volatility.kind != "random" or flow.sink == "prompt_cache_key=":
                continue
            msg = (f"random value {flow.volatility.origin!r} flows into {flow.sink} of "
                   f"{flow.call} ({flow.where}): the cached prefix differs on "
                   "every request")
            yield ctx.finding(self, flow, msg, inside_cached_prefix=True)
