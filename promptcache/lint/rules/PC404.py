"""PC404 openai.cache-key-hot: too many requests per minute on one prefix + key."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from promptcache.lint.engine import LogContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules.PC403 import prefix_group

__all__ = ["Rule_PC404"]


class Rule_PC404(Rule):
    """More requests per minute on one prefix + ``prompt_cache_key`` than one machine takes.

    ## What it does
    In a log with send times, groups OpenAI requests by shared prefix and key, finds the
    busiest 60-second window, and reports when it holds more requests than the documented
    overflow point (about 15 per minute, a provider fact). Details: ``requests_per_minute``,
    ``limit``, ``key``.

    ## Why is this bad?
    Above the overflow point, requests spill to other machines that do not hold the prefix,
    and miss. The hit rate falls as traffic grows.

    ## Example
    40 requests/min all with ``"prompt_cache_key": "tenant-42"`` and the same system prompt.

    ## Use instead
    Shard the key with a stable mapping (``tenant-42-0`` ... ``tenant-42-3``, chosen by
    conversation id hash) so each shard stays under the limit.

    ## Fix safety
    Safe: keys are routing hints; sharding trades some cross-conversation reuse for hits.

    ## References
    - https://developers.openai.com/api/docs/guides/prompt-caching (about 15 RPM per prefix+key)
    - https://github.com/langgenius/mosoo-agent-driver/issues/82 (BR-24)
    """

    code = "PC404"
    name = "openai.cache-key-hot"
    summary = "Too many requests per minute on one prefix + key"
    groups = ("all", "openai")
    severity = Severity.INFO
    message = "prefix + prompt_cache_key above the per-machine rate"
    fix_title = "shard the key (stable mapping) so each prefix+key stays under the limit"
    inputs = frozenset({"log"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        groups: dict[tuple[str, str], list[RequestContext]] = defaultdict(list)
        for e in ctx.entries:
            key = e.payload.get("prompt_cache_key")
            if e.view.provider == "anthropic" or not key or e.timestamp is None:
                continue
            groups[(prefix_group(e), str(key))].append(e)
        for (_, key), entries in groups.items():
            limit = entries[0].facts.key_overflow_rpm
            if limit is None:
                continue
            times = sorted(e.timestamp for e in entries if e.timestamp is not None)
            best = 0
            j = 0
            for i, t in enumerate(times):
                while times[j] < t - 60.0:
                    j += 1
                best = max(best, i - j + 1)
            if best > limit:
                msg = (f"{best} requests within one minute share a prefix and the key {key!r}; "
                       f"about {limit:.0f}/min is the documented overflow point: shard the key")
                yield entries[0].finding(self, msg, path="prompt_cache_key",
                                         requests_per_minute=best, limit=limit, key=key)
