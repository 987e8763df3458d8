"""PC402 openai.cache-key-missing: no prompt_cache_key on a cacheable OpenAI request."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from promptcache.lint.engine import LogContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import stored_prompt_fields, stored_prompt_label
from promptcache.lint.rules.PC403 import prefix_group

__all__ = ["Rule_PC402"]


def _cacheable_openai(ctx: RequestContext) -> bool:
    """An OpenAI request that reaches the model's minimum, or a Responses request chained with
    a stored prompt (``previous_response_id`` / ``conversation`` / ``prompt``): its size is
    not in the body (usually a short new input on a long stored conversation), so it may be
    cacheable whatever the body's size."""
    minimum = ctx.facts.min_cacheable_tokens
    if ctx.view.provider == "anthropic" or minimum is None:
        return False
    return ctx.view.total_tokens >= minimum or bool(stored_prompt_fields(ctx))


class Rule_PC402(Rule):
    """A cacheable OpenAI request without a ``prompt_cache_key``.

    ## What it does
    Reports an OpenAI request of at least the minimum cacheable length that sends no
    ``prompt_cache_key``, and a Responses request chained with ``previous_response_id`` /
    ``conversation`` / ``prompt`` that sends none, whatever its body's size (the server adds
    the stored prompt, whose size the body does not show). In a log it reports once for the file with the share of requests
    that lack the key. Details: ``requests_without_key``, ``requests``. When the log records
    usage and the keyless requests of one prefix hit bimodally (near-full or zero, zeros after
    the prefix was cached; :func:`promptcache.usage.diagnose_hit_pattern`), the finding says
    so and adds ``diagnosis`` (``"routing"``), ``request_hit_fraction`` and
    ``token_hit_rate``.

    ## Why is this bad?
    OpenAI routes a request by a hash of its first tokens, combined with the key. Without a
    key, identical prefixes are spread across machines and hit only when they happen to land
    on the same one: byte-stable prompts show bimodal hits (mosoo-agent-driver #82: 3 of 16).

    ## Example
    ```json
    {"model": "gpt-5", "messages": ["<12,400 tokens, identical prefix>"]}
    ```

    ## Use instead
    ```json
    {"model": "gpt-5", "prompt_cache_key": "support-agent-v3", "messages": ["..."]}
    ```
    A key per prompt family (or per conversation) that stays the same across requests.

    ## Fix safety
    Safe: the key is a routing hint and does not change the response.

    ## References
    - https://developers.openai.com/api/docs/guides/prompt-caching (prompt_cache_key)
    - https://github.com/langgenius/mosoo-agent-driver/issues/82 (BR-24)
    """

    code = "PC402"
    name = "openai.cache-key-missing"
    summary = "OpenAI request without prompt_cache_key"
    groups = ("all", "openai")
    severity = Severity.INFO
    message = "cacheable OpenAI request without prompt_cache_key"
    fix_title = "send a stable prompt_cache_key per prompt family"
    inputs = frozenset({"request", "log"})
    aggregate_in_logs = True

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        if _cacheable_openai(ctx) and not ctx.payload.get("prompt_cache_key"):
            stored = stored_prompt_label(ctx)
            size = (f"prompt ({stored}, plus {ctx.view.total_tokens} tokens in the body)"
                    if stored else f"{ctx.view.total_tokens}-token prompt")
            msg = (f"{size} without prompt_cache_key: identical "
                   "prefixes may be routed to different machines and miss")
            yield ctx.finding(self, msg, path=None)

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        cacheable = [e for e in ctx.entries if _cacheable_openai(e)]
        missing = [e for e in cacheable if not e.payload.get("prompt_cache_key")]
        if not missing:
            return
        first = missing[0]
        msg = (f"{len(missing)} of {len(cacheable)} cacheable requests carry no "
               "prompt_cache_key: identical prefixes may be routed to different machines")
        extra = _routing_diagnosis(missing)
        if extra:
            msg += (f"; their usage shows bimodal hits on one prefix ({extra['hits']} of "
                    f"{extra['with_usage']} requests hit): routing, not content")
        yield first.finding(self, msg, path=None, requests_without_key=len(missing),
                            requests=len(cacheable), **extra)


def _routing_diagnosis(entries: Sequence[RequestContext]) -> dict[str, Any]:
    """Finding details when the keyless requests of one prefix hit bimodally, else ``{}``."""
    from promptcache._errors import PromptCacheError
    from promptcache.usage import UsageRecord, diagnose_hit_pattern, parse_usage

    groups: dict[str, list[UsageRecord]] = defaultdict(list)
    for e in entries:
        if e.usage is None:
            continue
        try:
            groups[prefix_group(e)].append(parse_usage(e.usage))
        except (PromptCacheError, ValueError):
            continue  # unreadable usage: no diagnosis from it
    for records in sorted(groups.values(), key=len, reverse=True):
        pattern = diagnose_hit_pattern(records)
        if pattern.diagnosis == "routing":
            return {"diagnosis": "routing", "hit_pattern": pattern.pattern,
                    "with_usage": pattern.requests, "hits": pattern.hits,
                    "request_hit_fraction": pattern.request_hit_fraction,
                    "token_hit_rate": pattern.token_hit_rate}
    return {}
