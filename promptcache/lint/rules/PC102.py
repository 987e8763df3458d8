"""PC102 volatile.id: a UUID, ULID, request id or nonce inside the cached prefix."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import PythonContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import (
    rewritten_note,
    template_note,
    template_variable_hits,
    volatile_hits,
)

__all__ = ["Rule_PC102"]


class Rule_PC102(Rule):
    """A per-request identifier inside the cached prefix.

    ## What it does
    Finds UUIDs, ULIDs, prefixed request ids (``req_…``, ``msg_…``, ``chatcmpl-…``) and hex
    nonces next to an id word (``request id``, ``nonce``, ``trace``) in the tools, system
    prompt or system/developer messages, when they lie inside the cached prefix. In Python
    source it follows ``uuid.uuid4()`` and similar into ``system=`` / ``tools=`` / the first
    messages. Details: ``match``, ``subkind`` (uuid, ulid, prefixed-id, hex), ``char_offset``,
    ``json_key`` (when the id sits in a JSON / YAML field such as ``message_id``),
    ``tokens_invalidated`` (the cached tokens after the value) and ``tokens_rewritten``
    (the tokens written again at each change: on Anthropic also those before the value back
    to the last breakpoint a request can read, the whole prefix when there is none). An id in
    the ``variables`` of a Responses stored prompt template (``prompt``) is reported too, read
    after the variable's name (``request_id: 8a7f...``): the server substitutes it into the
    template, before the input (``template_variable``; the token figures are None).

    ## Why is this bad?
    A fresh id per request makes the prefix unique, so nothing after it is ever read from the
    cache; the only difference between consecutive prompts is often that one id (openclaw
    #19014, lunch-uncle #6).

    ## Example
    ```json
    {"system": [{"type": "text", "cache_control": {"type": "ephemeral"},
      "text": "Inbound metadata: {\\"message_id\\": \\"7c1e2a90-4b3d-4f6e-9a21-5d8c0b7e3f44\\"}\\n..."}]}
    ```

    ## Use instead
    Keep ids out of the prompt (log them), or put them in the newest user turn, after the last
    breakpoint:
    ```json
    {"messages": [{"role": "user", "content": [
      {"type": "text", "text": "{\\"message_id\\": \\"7c1e…\\"}"}, {"type": "text", "text": "hi"}]}]}
    ```

    ## Fix safety
    No automatic fix: whether the model needs the id at all is the author's call.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    - https://github.com/openclaw/openclaw/issues/19014 (BR-03)
    """

    code = "PC102"
    name = "volatile.id"
    summary = "UUID, request id or nonce inside the cached prefix"
    groups = ("all", "volatile")
    severity = Severity.WARNING
    message = "per-request id inside the cached prefix"
    fix_title = "ids belong in logs or in the newest user turn, not in the system prompt"
    inputs = frozenset({"request", "python"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        for hit in volatile_hits(ctx):
            m = hit.match
            if m.kind != "id":
                continue
            key = f" (field {m.json_key!r})" if m.json_key else ""
            where = (f"before the breakpoint at {hit.breakpoint_path}" if hit.breakpoint_path
                     else "inside the automatic cached prefix")
            msg = (f"{m.subkind} {m.match!r}{key} sits {where}: about "
                   f"{hit.tokens_invalidated} tokens after it lose caching on every request"
                   + rewritten_note(hit))
            yield ctx.finding(self, msg, path=hit.path, offset=m.start, match=m.match,
                              subkind=m.subkind, kind=m.subkind, char_offset=m.start,
                              json_key=m.json_key, inside_cached_prefix=True,
                              breakpoint_path=hit.breakpoint_path,
                              tokens_invalidated=hit.tokens_invalidated,
                              tokens_rewritten=hit.tokens_rewritten)
        for t in template_variable_hits(ctx):
            m = t.match
            if m.kind != "id":
                continue
            msg = f"{m.subkind} {m.match!r} {template_note(t)} on every request"
            yield ctx.finding(self, msg, path=t.path, offset=m.start, match=m.match,
                              subkind=m.subkind, kind=m.subkind, char_offset=m.start,
                              json_key=m.json_key, inside_cached_prefix=True,
                              breakpoint_path=None, template_variable=t.variable,
                              tokens_invalidated=None, tokens_rewritten=None)

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            if flow.volatility.kind != "id" or flow.sink == "prompt_cache_key=":
                continue
            msg = (f"per-request id {flow.volatility.origin!r} flows into {flow.sink} of "
                   f"{flow.call} ({flow.where}): the cached prefix is unique "
                   "on every request")
            yield ctx.finding(self, flow, msg, inside_cached_prefix=True)
