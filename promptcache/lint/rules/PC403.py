"""PC403 openai.cache-key-unstable: a prompt_cache_key that changes on every request."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator

from promptcache.lint.engine import LogContext, PythonContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.volatile import scan_text

__all__ = ["Rule_PC403", "prefix_group", "template_group"]


def prefix_group(ctx: RequestContext) -> str:
    """A hash naming the request's shared prefix: tools + system tiers (or the first segment)."""
    hashes = ctx.view.prefix_hashes()
    if not hashes:
        return ""
    stable = [s.index for s in ctx.view.segments if s.tier in ("tools", "system")]
    return hashes[stable[-1]] if stable else hashes[0]


def template_group(ctx: RequestContext) -> tuple[str, bool]:
    """A hash naming the request's shared prefix (as :func:`prefix_group`) with its volatile
    values (timestamps, ids: :func:`~promptcache.lint.volatile.scan_text`) masked, and whether
    any was masked.

    Requests whose tools and system prompt differ only in such a value (a uuid or a clock in
    the system prompt, which PC101 or PC102 reports) share a template: grouping them by it lets a
    per-request ``prompt_cache_key`` be reported beside that value, not only once it is fixed
    (new-user trial 15)."""
    segs = ctx.view.segments
    if not segs:
        return "", False
    stable = [s for s in segs if s.tier in ("tools", "system")] or [segs[0]]
    h = hashlib.sha256(f"{ctx.view.provider}\x00{ctx.view.model}".encode())
    masked = False
    for seg in stable:
        # the whole block as sent (a tool's name and schema too, not only its description)
        raw = seg.data.decode("utf-8", "surrogatepass")
        matches = scan_text(raw)
        if not matches:
            h.update(b"F\x00" + seg.fingerprint.encode())
            continue
        masked = True
        parts: list[str] = []
        last = 0
        for m in matches:
            parts.append(raw[last:m.start])
            parts.append(f"\x00{m.kind}\x00")
            last = m.end
        parts.append(raw[last:])
        h.update("\x00".join((seg.tier, seg.role or "", seg.kind, "".join(parts))).encode(
            "utf-8", "surrogatepass"))
    return h.hexdigest(), masked


class Rule_PC403(Rule):
    """``prompt_cache_key`` differs on every request that shares a prefix.

    ## What it does
    In a log, groups requests by their shared prefix (tools + system, with timestamps and ids
    in it masked: a uuid in the system prompt, which PC102 reports, does not hide the key) and
    reports a group of three or more requests where every request carries a different key. In Python source,
    reports ``prompt_cache_key=`` fed from ``uuid4()``, a clock or a random value. Details:
    ``requests``, ``distinct_keys``.

    ## Why is this bad?
    The key steers routing: a fresh key per request sends identical prefixes to different
    machines on purpose, so nothing is reused (a gateway that used a new UUID per request got
    0 % hits).

    ## Example
    ```python
    client.responses.create(prompt_cache_key=str(uuid.uuid4()), ...)
    ```

    ## Use instead
    ```python
    client.responses.create(prompt_cache_key=f"agent-v3-{conversation_id}", ...)
    ```

    ## Fix safety
    Safe: the key is only a routing hint.

    ## References
    - https://developers.openai.com/api/docs/guides/prompt-caching
    - https://github.com/langgenius/mosoo-agent-driver/issues/82 (BR-24)
    """

    code = "PC403"
    name = "openai.cache-key-unstable"
    summary = "prompt_cache_key differs on every request"
    groups = ("all", "openai")
    severity = Severity.WARNING
    message = "prompt_cache_key differs on every request that shares a prefix"
    fix_title = "derive the key from the prompt family or conversation, not per request"
    inputs = frozenset({"log", "python"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        groups: dict[str, list[RequestContext]] = defaultdict(list)
        masked: dict[str, bool] = {}
        for e in ctx.entries:
            if e.view.provider != "anthropic" and e.payload.get("prompt_cache_key"):
                group, was_masked = template_group(e)
                groups[group].append(e)
                masked[group] = masked.get(group, False) or was_masked
        for group, entries in groups.items():
            keys = [str(e.payload.get("prompt_cache_key")) for e in entries]
            if len(entries) >= 3 and len(set(keys)) == len(keys):
                shared = "share a prefix"
                if masked[group] and len({prefix_group(e) for e in entries}) > 1:
                    shared += (" apart from timestamps or ids in it (PC101 and PC102 report "
                               "those)")
                msg = (f"prompt_cache_key differs on every one of {len(entries)} requests that "
                       f"{shared}: each is routed to a fresh machine")
                yield entries[1].finding(self, msg, path="prompt_cache_key",
                                         requests=len(entries), distinct_keys=len(set(keys)))

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            if flow.sink == "prompt_cache_key=" and flow.volatility.kind in ("id", "random",
                                                                            "timestamp"):
                msg = (f"prompt_cache_key of {flow.call} ({flow.where}) comes from "
                       f"{flow.volatility.origin!r}: a new key per request defeats routing")
                yield ctx.finding(self, flow, msg)
