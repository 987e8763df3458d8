"""Result types of ``diff`` and ``explain`` (pydantic, JSON-serialisable).

Units: tokens are prompt tokens (estimates for Anthropic models unless the counts came from
usage); money is USD at catalog prices (``None`` when the model or its prices are unknown);
``*_base_tokens`` is money expressed in base-input-token units (a write of N tokens at 1.25x
costs 1.25 N base tokens), so results can be checked without a price table.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Cause",
    "CauseSummary",
    "Check",
    "DiagnosticsComparison",
    "DiffResult",
    "Divergence",
    "ExplainReport",
    "ObservedUsage",
    "PredictedUsage",
    "RequestExplanation",
]

Verdict = Literal["miss_explained", "unexplained_miss", "no_miss", "cannot_tell"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cause(_Frozen):
    """One reason request B cannot reuse what request A left in the cache.

    Attributes:
        code: cause code (see ``promptcache.diff.CAUSES``).
        title: one line for humans.
        tier: the first tier the cause invalidates (None for causes outside the prefix).
        path: where in B (or A, for removals) the cause sits, if it has a place.
        segment_index: index of the first segment the cause invalidates (prefix order).
        detail: cause-specific facts (tool orders, added / removed tools, from / to values).
        fix_hint: the mechanical fix.
        source: URL of the provider rule.
        note: caveat (documented but disputed rules, model-specific behaviour).
    """

    code: str
    title: str
    tier: str | None = None
    path: str | None = None
    segment_index: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    fix_hint: str
    source: str
    note: str = ""


class Divergence(_Frozen):
    """Where the two renderings first differ.

    Attributes:
        path: the most specific path naming one node present in both requests
            (``"messages[2].tool_calls[0].function.arguments"``; the segment path when the
            two segments are different entities, e.g. two different tools).
        segment_path: the path of the divergent segment (``"tools[0]"``).
        leaf_path: the first differing leaf inside the segment.
        segment_index: index of the divergent segment among B's cached segments (the
            rendered segments minus thinking blocks an older Claude model strips).
        tier: tier of the divergent segment.
        kind: segment kind in B (or A when B has none there).
        char_offset: first differing character inside the leaf (its JSON text when the leaf
            is not a string).
        token_offset: tokens before the divergence (start of segment plus the common text).
        semantic_equal: True when the two nodes are equal after canonical JSON parse or
            whitespace normalisation (a pure serialisation change).
        before: excerpt of A around the divergence (a sha256 prefix when redacted).
        after: excerpt of B around the divergence (a sha256 prefix when redacted).
    """

    path: str
    segment_path: str
    leaf_path: str
    segment_index: int
    tier: str
    kind: str
    char_offset: int
    token_offset: int
    semantic_equal: bool
    before: str
    after: str


class PredictedUsage(_Frozen):
    """Predicted input-token buckets of request B (tokens).

    Attributes:
        cache_read: tokens read from the cache.
        cache_write: tokens written (Anthropic cache creation; OpenAI GPT-5.6+ cache writes;
            0 where the provider bills no writes).
        uncached_input: the remaining input tokens.
        read_upper_bound: True when ``cache_read`` is what B can read at best, not what it
            is expected to read: a warning-level cause (a changed ``prompt_cache_key``,
            which steers routing; a GPT-5.6+ gap over the minimum cache lifetime) makes
            the read uncertain without invalidating anything.
    """

    cache_read: int
    cache_write: int
    uncached_input: int
    read_upper_bound: bool = False


class ObservedUsage(_Frozen):
    """Usage the provider reported for request B (None = not reported)."""

    cache_read: int | None
    cache_write: int | None
    uncached_input: int | None


class Check(_Frozen):
    """One check behind a 'no client-side cause' verdict (None = could not be checked)."""

    name: str
    passed: bool | None
    detail: str = ""


class DiagnosticsComparison(_Frozen):
    """The provider's own diagnosis beside ours.

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        reason: their reason (``"tools_changed"``; ``"cache_hit"``; ``"pending"`` for a null
            Anthropic reason).
        missed_tokens: their ``cache_missed_input_tokens`` / ``cache_missed_tokens``.
        reusable_tokens: OpenAI's ``comparison_reusable_tokens``.
        ours: our primary cause mapped to their taxonomy (None: outside their taxonomy).
        agrees: whether the two agree (None when either side cannot judge).
        source: URL of the provider's diagnostics documentation.
    """

    provider: str
    reason: str | None
    missed_tokens: int | None = None
    reusable_tokens: int | None = None
    ours: str | None
    agrees: bool | None
    source: str


class DiffResult(_Frozen):
    """Why request B did (or would) miss what request A left in the cache.

    Attributes:
        provider: request shape (``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``).
        model: model id of B (None when neither request nor caller names one).
        verdict: ``miss_explained`` (a cause in the requests explains lost cache reads),
            ``unexplained_miss`` (observed reads fall short and nothing in the payload
            explains it: provider side), ``no_miss``, ``cannot_tell`` (B continues a stored
            Responses conversation, ``previous_response_id``, that is not A's or not known,
            cause ``previous_response_chained``; or B names a stored ``conversation``, cause
            ``conversation_chained``; or B's stored prompt template, ``prompt``, differs from
            A's, cause ``stored_prompt_changed``: its prefix cannot be compared from the
            bodies; no prediction, no lost tokens).
        cause: the primary cause code (the earliest in prefix order); ``append_only`` when B
            is A plus new segments and nothing else differs (the healthy next turn),
            ``no_difference`` when the cached contents do not differ.
        causes: every cause found, primary first, then in prefix order.
        divergence: the first content divergence (None when contents agree).
        invalidated_levels: tiers whose cache entries B cannot reuse.
        reusable_prefix: the tiers still reusable, joined by '+' (``"tools+system"``,
            ``"none"``, ``"all"``).
        semantic_equal: True when every content change is pure serialisation (same tool set
            in another order, JSON key order, whitespace) and no parameter changed.
        identical_prefix_tokens: tokens of B before the first invalidation, at the
            granularity the provider caches: whole blocks on Anthropic (an entry ends at a
            block boundary, so a block that differs from its 14th token on shares none of its
            tokens; :attr:`Divergence.token_offset` is the token inside the block), tokens on
            OpenAI. Scaled to A's reported usage when it is given.
        ideal_cache_read: tokens A left in the cache that B could have read (A's largest
            live entry, capped at B's size); None without a model policy.
        predicted: B's predicted usage (None without a model policy).
        lost_tokens: tokens that must be rewritten because of the causes
            (``ideal_cache_read - cache read``, observed read when usage is given).
        miss_cost_usd: USD the miss costs over reading those tokens (None: unknown prices).
        extra_cost_base_tokens: the same in base-input-token units.
        observed: B's reported usage, if given.
        classification: ``client_side`` / ``provider_side`` / None.
        checks: what was verified before calling a miss provider side.
        diagnostics: the provider's own diagnosis beside ours, if the response carried one.
        recommended_alternative: a cheaper variant of B and its prediction, when one exists.
        token_counts_exact: False when token counts are estimates (Anthropic).
        notes: caveats.
    """

    provider: str
    model: str | None
    verdict: Verdict
    cause: str
    causes: list[Cause]
    divergence: Divergence | None
    invalidated_levels: list[str]
    reusable_prefix: str
    semantic_equal: bool
    identical_prefix_tokens: int
    ideal_cache_read: int | None
    predicted: PredictedUsage | None
    lost_tokens: int | None
    miss_cost_usd: float | None
    extra_cost_base_tokens: float | None
    observed: ObservedUsage | None = None
    classification: str | None = None
    checks: list[Check] = Field(default_factory=list)
    diagnostics: DiagnosticsComparison | None = None
    recommended_alternative: dict[str, Any] | None = None
    token_counts_exact: bool = True
    notes: list[str] = Field(default_factory=list)

    @property
    def primary(self) -> Cause | None:
        """The primary cause (None when there is no cause at all)."""
        return self.causes[0] if self.causes else None

    @property
    def secondary(self) -> list[Cause]:
        """Causes after the primary one, in prefix order."""
        return self.causes[1:]


class RequestExplanation(_Frozen):
    """One request of a log, explained against an earlier request of its session.

    Attributes:
        line: 1-based line number in the log.
        session: session id (explicit, or ``"inferred-N"``).
        turn: 0-based index of the request in its session.
        response_id: the response id, if logged.
        status: ``cold_start`` (first of a session, unless it writes nothing because its prefix
            is below the model's minimum: then ``uncached``), ``hit``, ``miss_explained``,
            ``unexplained_miss``, ``prefix_regression`` (usage-only logs), ``uncached``
            (nothing read and nothing could be), ``no_usage`` (no usage logged and nothing
            predicted lost) or ``cannot_tell`` (a Responses request whose
            ``previous_response_id`` names a response the log does not hold with its output:
            cause ``previous_response_chained``, no prediction).
        cause: primary cause code (None for cold starts and hits); for ``uncached``,
            ``below_minimum`` when the prefix is below the model's minimum.
        secondary: other cause codes.
        path: where the primary cause sits.
        predicted_cache_read: tokens (None without a policy or a previous request).
        observed_cache_read: tokens reported (None when not logged).
        lost_tokens: tokens that had to be rewritten.
        miss_cost_usd: USD of the miss (None when prices are unknown).
        diagnostics: the provider's diagnosis beside ours.
        detail: extra facts (expected minimum read for usage-only checks, gap seconds;
            ``routing`` when ``prompt_cache_key`` changed, a routing hint that makes a read
            likely but not certain; ``previous_response_id`` when the request continues a
            logged response).
        compared_with_line: line number of the earlier request this one was compared with:
            the one whose still-live cache entries give the longest expected read, else the
            session's last request (None for the first request of a session).
    """

    line: int
    session: str
    turn: int
    response_id: str | None = None
    status: str
    cause: str | None = None
    secondary: list[str] = Field(default_factory=list)
    path: str | None = None
    predicted_cache_read: int | None = None
    observed_cache_read: int | None = None
    lost_tokens: int | None = None
    miss_cost_usd: float | None = None
    diagnostics: DiagnosticsComparison | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    compared_with_line: int | None = None


class CauseSummary(_Frozen):
    """Misses of one cause across a log: how many, tokens lost, USD."""

    cause: str
    count: int
    lost_tokens: int
    usd: float | None


class ExplainReport(_Frozen):
    """Every request of a log explained, plus a summary by cause.

    Attributes:
        requests: one entry per log line, in log order.
        sessions: number of sessions (explicit or inferred).
        misses: requests with status miss_explained, unexplained_miss or prefix_regression.
        summary: causes by count, most expensive first.
        lost_tokens: total tokens rewritten because of misses.
        miss_cost_usd: total USD of misses (None when no price was known).
        disagreements: requests where the provider's diagnosis disagrees with ours.
    """

    requests: list[RequestExplanation]
    sessions: int
    misses: int
    summary: list[CauseSummary]
    lost_tokens: int
    miss_cost_usd: float | None
    disagreements: int
