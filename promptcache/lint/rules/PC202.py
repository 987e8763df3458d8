"""PC202 order.tools-unsorted: tools are not sorted by name (preview)."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules.PC201 import _name

__all__ = ["Rule_PC202"]


class Rule_PC202(Rule):
    """Tools are not sorted by name.

    ## What it does
    Reports a request whose tool definitions are not in name order. One request cannot show
    that its order varies (PC201 needs a log), but an unsorted list is often one built from a
    dict or set whose order depends on registration order or hashing. Preview: enable with
    ``--extend-select PC202``. Details: ``order`` (names as sent).

    ## Why is this bad?
    If the order ever changes, the whole prefix misses. Sorting makes the order independent of
    how the list was built.

    ## Example
    ```json
    {"tools": [{"name": "search"}, {"name": "edit"}]}
    ```

    ## Use instead
    ```json
    {"tools": [{"name": "edit"}, {"name": "search"}]}
    ```

    ## Fix safety
    Safe: tool order does not change which tools the model may call. Changing it once costs
    one cache write.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """

    code = "PC202"
    name = "order.tools-unsorted"
    summary = "Tools not sorted by name"
    groups = ("all", "order", "pedantic")
    severity = Severity.INFO
    status = "preview"
    message = "tools are not sorted by name"
    fix_title = "sort tools by name"
    inputs = frozenset({"request"})
    aggregate_in_logs = False

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        tools = [s for s in ctx.view.segments if s.tier == "tools" and s.kind == "tool"]
        names = [_name(s.data) for s in tools]
        if len(names) > 1 and names != sorted(names):
            first = next(i for i, (a, b) in enumerate(zip(names, sorted(names), strict=True))
                         if a != b)
            yield ctx.finding(self, f"tools are not sorted by name ({', '.join(names[:6])}"
                                    f"{', ...' if len(names) > 6 else ''})",
                              path=tools[first].path, order=names)
