"""PC104 template.volatile-variable: a volatile template variable before stable text."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import Rule, TemplateContext
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.volatile import id_scope

__all__ = ["Rule_PC104"]

#: Static text after a hole below this many tokens is too little to matter.
MIN_STABLE_TOKENS = 32


class Rule_PC104(Rule):
    """A volatile template variable sits before stable text.

    ## What it does
    In Jinja2 templates, YAML / TOML prompt files, Prompty files and plain-text prompts, finds
    holes whose value changes between renders — a clock (``{{ current_date }}``,
    ``{{ now() }}``, ``{current_time}``, ``{{$time}}``), an id (``{{ request_id }}``,
    ``{{ uuid }}``; a per-conversation one such as ``{{ session_id }}``,
    ``{{ conversation_id }}`` or ``{{ thread_id }}``; a per-user one such as
    ``{{ user_id }}``, ``{{ user.email }}`` or ``{{ customerId }}``) or a random pick
    (``{{ items | random }}``) — followed by at least 32 tokens of static text. Severity
    follows granularity: a date is info, anything finer (and any id) is a warning. Details:
    ``variable``, ``kind``, ``granularity``, ``stable_tokens_after``, and for ids ``id_scope``
    (``"request"``, ``"conversation"`` or ``"user"``; a hole naming several ids takes the
    shortest-lived).

    ## Why is this bad?
    Templates become system prompts and first messages, the start of the cached prefix.
    Everything after a value that changes is re-written instead of read, so a timestamp at
    the top of a 3,000-token system prompt costs 3,000 uncached tokens per request. A
    per-conversation id (a session or thread id) keeps the prefix within one conversation,
    but every new conversation writes the whole system prompt again instead of sharing it; a
    per-user value (a user id or email) does the same for every user.

    ## Example
    ```jinja
    Today is {{ current_datetime }}.
    You are a helpful agent. <3,000 tokens of rules>
    ```

    ## Use instead
    ```jinja
    You are a helpful agent. <3,000 tokens of rules>
    Today is {{ current_date }}.
    ```
    or pass the clock in the user turn.

    ## Fix safety
    No automatic fix: moving text inside a prompt can change model behaviour.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    - https://github.com/aaif-goose/goose/pull/2434
    """

    code = "PC104"
    name = "template.volatile-variable"
    summary = "Volatile template variable before stable text"
    groups = ("all", "volatile", "template")
    severity = Severity.WARNING
    message = "volatile template variable before stable text"
    fix_title = "move the variable after the stable text (or into the user turn)"
    inputs = frozenset({"template"})

    def check_template(self, ctx: TemplateContext) -> Iterator[Finding]:
        after = None
        for i, piece in enumerate(ctx.pieces):
            if piece.kind != "hole" or piece.volatility is None:
                continue
            if after is None:
                after = ctx.stable_tokens_after
            stable = after[i]
            if stable < MIN_STABLE_TOKENS:
                continue
            vol = piece.volatility
            if vol.granularity in ("week", "month", "year"):
                continue  # changes rarely enough to cache well
            gran = f"{vol.granularity}-granularity " if vol.granularity else ""
            scope = id_scope(piece.text) if vol.kind == "id" else None
            what = {"timestamp": "clock value",
                    "id": "per-user value" if scope == "user" else f"per-{scope} id",
                    "random": "random value"}.get(vol.kind, "volatile value")
            loss = {"conversation": "they are cached within one conversation and written "
                                    "again for every new one",
                    "user": "they are cached for one user and written again for every other "
                            "user"}.get(scope or "", "they lose caching whenever it changes")
            msg = (f"{gran}{what} {piece.text.strip()!r} comes before {stable} tokens of "
                   f"stable text in {ctx.name}: {loss}")
            extra = {"id_scope": scope} if scope else {}
            yield ctx.finding(self, msg, line=piece.line, col=piece.col, severity=vol.severity,
                              variable=piece.text.strip(), kind=vol.kind,
                              granularity=vol.granularity, stable_tokens_after=stable,
                              tokens_invalidated=stable, **extra)
