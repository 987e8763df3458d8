"""PC203 order.json-keys-vary: JSON key order (or set order) varies between requests."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, PythonContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import divergence, key_order_path, same_canonical

__all__ = ["Rule_PC203"]

#: The fix for text built by iterating a set: its order, not a dict's keys, is what varies.
_SET_FIX = "iterate sorted(...) instead of the set (e.g. \", \".join(sorted(items)))"


class Rule_PC203(Rule):
    """JSON key order (or set iteration order) varies inside the cached prefix.

    ## What it does
    In request logs, reports a block that is equal to the previous request's block except for
    the order of object keys (a tool schema, a JSON document in the system prompt). In Python
    source, reports ``json.dumps`` of a runtime value without ``sort_keys=True``, and text
    built by iterating a ``set``, flowing into ``system=`` / the first messages. Details:
    ``json_path`` (where the order differs).

    ## Why is this bad?
    The prefix is compared byte by byte: ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` are different
    prefixes, so everything after them misses even though the meaning is the same.

    ## Example
    ```python
    system = "Config:\\n" + json.dumps(config)
    ```

    ## Use instead
    ```python
    system = "Config:\\n" + json.dumps(config, sort_keys=True)
    ```

    For text built from a set, iterate ``sorted(the_set)`` instead (the finding's fix says
    so). ``json.loads(json.dumps(x))`` is a copy of ``x`` in ``x``'s own key order and is not
    reported.

    ## Fix safety
    Safe: sorting keys does not change the JSON's meaning. The first request after the change
    writes the cache once.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (stable serialisation)
    """

    code = "PC203"
    name = "order.json-keys-vary"
    summary = "JSON key order varies inside the cached prefix"
    groups = ("all", "order")
    severity = Severity.WARNING
    message = "JSON key order differs from the previous request"
    fix_title = "serialise with sorted keys (json.dumps(..., sort_keys=True))"
    inputs = frozenset({"log", "python"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        for cur in ctx.entries:
            div = divergence(cur)
            if div is None or cur.previous is None:
                continue
            both = same_canonical(div.previous, div.segment)
            if both is None:
                continue
            where = key_order_path(both[0], both[1], "")
            path = div.segment.path + ("" if where in (None, "<root>") else
                                       ("." + where if not where.startswith("[") else where))
            msg = (f"{path} holds the same keys as in the previous request in another order: "
                   f"about {max(0, cur.view.total_tokens - div.segment.start_token)} tokens "
                   "after it miss")
            yield cur.finding(self, msg, path=path, json_path=where,
                              previous_request=cur.previous.entry)

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            kind = flow.volatility.kind
            if kind == "key-order" and flow.sink != "prompt_cache_key=":
                msg = (f"{flow.volatility.origin} without sort_keys=True flows into {flow.sink} "
                       f"of {flow.call} ({flow.where}): key order follows how the "
                       "dict was built")
                yield ctx.finding(self, flow, msg)
            elif kind == "set-order" and flow.sink not in ("tools=", "tools()", "add_tools()",
                                                           "prompt_cache_key="):
                msg = (f"text built from {flow.volatility.origin} flows into {flow.sink} of "
                       f"{flow.call} ({flow.where}): set order changes between "
                       "processes")
                yield ctx.finding(self, flow, msg, fix=_SET_FIX)
