"""PC201 order.tools-varies: the tool list is sent in a different order."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, PythonContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import divergence

__all__ = ["Rule_PC201"]


class Rule_PC201(Rule):
    """The same tools are sent in a different order.

    ## What it does
    In request logs, reports a request whose tool definitions are the same set as the
    previous request's but in another order. In Python source, reports a ``tools=`` argument
    built by iterating a ``set`` (string hashing is salted per process, so set order changes
    between runs). Details: ``previous_order``, ``order`` (tool names).

    ## Why is this bad?
    Tools are the first thing in the prefix. Reordering them changes the prefix from the
    first byte, so nothing — tools, system prompt or history — is read from the cache.

    ## Example
    ```python
    tools = [TOOLS[name] for name in set(enabled)]
    client.messages.create(tools=tools, ...)
    ```

    ## Use instead
    ```python
    tools = [TOOLS[name] for name in sorted(enabled)]
    client.messages.create(tools=tools, ...)
    ```

    ## Fix safety
    Sorting tools by name is safe: tool order does not change which tools the model may call.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (tool changes invalidate everything)
    - https://developers.openai.com/api/docs/guides/prompt-caching
    """

    code = "PC201"
    name = "order.tools-varies"
    summary = "Tool order varies between requests"
    groups = ("all", "order")
    severity = Severity.WARNING
    message = "tool order differs from the previous request"
    fix_title = "sort tools by name before sending"
    inputs = frozenset({"log", "python"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        for cur in ctx.entries:
            div = divergence(cur)
            if div is None or cur.previous is None or div.segment.tier != "tools":
                continue
            a = [s for s in cur.previous.view.segments if s.tier == "tools"]
            b = [s for s in cur.view.segments if s.tier == "tools"]
            if sorted(s.fingerprint for s in a) != sorted(s.fingerprint for s in b):
                continue
            if [s.fingerprint for s in a] == [s.fingerprint for s in b]:
                continue
            names_a = [_name(s.data) for s in a]
            names_b = [_name(s.data) for s in b]
            msg = (f"the same {len(b)} tools are sent in a different order than in the previous "
                   f"request: the whole prefix ({cur.view.total_tokens} tokens) misses")
            yield cur.finding(self, msg, path=div.segment.path, previous_order=names_a,
                              order=names_b, previous_request=cur.previous.entry,
                              tokens_invalidated=cur.cached_end_token)

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            if flow.volatility.kind == "set-order" and flow.sink in ("tools=", "tools()",
                                                                    "add_tools()"):
                msg = (f"tools= of {flow.call} ({flow.where}) is built from "
                       f"{flow.volatility.origin}: set order changes between processes")
                yield ctx.finding(self, flow, msg)


def _name(data: bytes) -> str:
    import json

    try:
        node = json.loads(data)
    except ValueError:
        return "?"
    if isinstance(node, dict):
        fn = node.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        if isinstance(node.get("name"), str):
            return str(node["name"])
    return "?"
