"""One normalised usage record for every provider.

A :class:`UsageRecord` says, for one API response, how many input tokens were billed at each
rate (uncached, cache read, cache write by TTL) and how many output tokens were produced, plus
who sent it (label, session) and when (start/end, seconds since the epoch).

Conventions (the places where peers go wrong, see reference/peer-tools.md section 3):

* **The buckets do not overlap.** ``uncached_input + cache_read + cache writes`` is all input.
  Anthropic's ``input_tokens`` is already the uncached bucket; OpenAI's ``prompt_tokens``
  includes cached tokens, so the OpenAI parser subtracts them (once).
* **Not reported is ``None``, never 0.** A vLLM server without ``--enable-prompt-tokens-details``
  leaves ``cached_tokens`` out: ``cache_read`` is ``None`` and every number that depends on it
  (hit rate, cost) is ``None`` too.
* **Cache writes.** Anthropic splits writes by TTL: ``cache_write_5m`` and ``cache_write_1h``
  (from ``usage.cache_creation``); ``cache_write`` is always the total of all writes
  (``cache_creation_input_tokens``). When the split is not reported (older responses, streamed
  ``message_delta`` only, Bedrock without ``cacheDetails``) the two split fields are ``None`` and
  only ``cache_write`` is set. OpenAI (GPT-5.6+) reports one write count
  (``cache_write_tokens``): it goes into ``cache_write`` with ``cache_write_ttl`` naming the
  retention it was written for (``"30m"`` by default, ``"12h"`` when the Responses API says so);
  OpenAI bills every write token at one write rate that *replaces* the input rate.
* **The parts never exceed a reported total.** When ``input_total`` is known and
  ``cache_read + writes`` (or ``uncached_input + cache_read + writes``) exceeds it (a provider or
  relay bug: e.g. ``cached_tokens`` 5000 with ``prompt_tokens`` 100), the record is clamped when
  it is made: ``cache_read`` is capped at the total, the writes at what remains, the uncached
  bucket at what remains after both. Hit rate, cost and the no-cache baseline then agree (hit
  rate stays in [0, 1]). The clamping is never silent: the record carries the flag
  ``input_parts_exceed_total`` and ``input_parts_reported:FIELD=N,...`` with the numbers as
  reported (hosted-api-rules.md 2.4: "clamp at 0 and log the case").
* **Providers that report an inclusive input total** (OpenAI ``prompt_tokens``, Responses
  ``input_tokens``, Gemini ``prompt_token_count``, DeepSeek hit + miss) keep it in
  ``input_total``. For models that have no cache-write category (OpenAI before GPT-5.6, Gemini
  implicit caching, DeepSeek) writes are simply part of the uncached bucket, ``cache_write`` stays
  ``None`` and :attr:`UsageRecord.total_input` falls back to ``input_total``.

Deviation from DESIGN.md / the style anchors: pydantic-ai's ``RequestUsage`` makes
``input_tokens`` *inclusive*; we store the exclusive buckets (what is billed at each rate) and
expose the inclusive number as :attr:`UsageRecord.total_input`, because every billing bug in the
case file comes from mixing the two conventions in one field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from promptcache._times import parse_timestamp

__all__ = ["CLAMP_FLAG", "MAX_TOKENS", "REPORTED_FLAG", "CacheWriteTTL", "UsageRecord"]

#: Flag of a record whose reported parts (read, writes, uncached) exceeded its reported
#: inclusive ``input_total``: the parts were clamped to the total (hosted-api-rules.md 2.4).
CLAMP_FLAG = "input_parts_exceed_total"
#: Prefix of the companion flag that keeps the numbers as reported before clamping, e.g.
#: ``"input_parts_reported:input_total=100,cache_read=5000,uncached_input=0"``.
REPORTED_FLAG = "input_parts_reported"

CacheWriteTTL = Literal["5m", "1h", "30m", "12h", "24h"]

#: The largest token count one response may report for one field (tokens): a thousand times
#: the longest context window of any model (a few million tokens). A count above it (``1e30``,
#: ``10**35``) is a logging or relay bug, refused rather than summed into an astronomical cost.
#: A plausibility bound, not a provider fact.
MAX_TOKENS = 10**9

#: Times (seconds) that :func:`~promptcache._times.parse_timestamp` returns unchanged: finite,
#: not read as milliseconds, before the year 9999.
_PLAIN_SECONDS = 1e11

_Count = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
_NonNegOpt = _Count | None


def _is_count(value: object) -> TypeGuard[int]:
    """A plain non-negative int (the clamp leaves anything else to the field validation)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class UsageRecord(BaseModel):
    """Token usage of one API response, normalised across providers.

    Attributes:
        provider: wire format it was parsed from: ``"anthropic"``, ``"openai"`` (chat),
            ``"openai-responses"``, ``"vllm"``, ``"deepseek"``, ``"bedrock"``, ``"gemini"``,
            ``"normalized"`` (relay shape: ``prompt_tokens`` + ``cached_read_tokens`` +
            ``cache_creation_tokens``) or any other string for hand-made records.
        model: model id as reported by the response (``None`` when absent).
        uncached_input: input tokens billed at the base input rate (tokens).
        cache_read: input tokens served from the cache (tokens).
        cache_write: all input tokens written to the cache, every TTL together (tokens).
        cache_write_5m: Anthropic/Bedrock writes with the 5-minute TTL (tokens).
        cache_write_1h: Anthropic/Bedrock writes with the 1-hour TTL (tokens).
        cache_write_ttl: retention the ``cache_write`` tokens were written for when the provider
            reports one TTL for all of them (OpenAI: ``"30m"``/``"12h"``), else ``None``.
        input_total: the provider's own inclusive input count when it reports one (tokens).
        output: output tokens, reasoning included (tokens).
        reasoning: the reasoning/thinking part of ``output`` (tokens).
        start: when the request was sent (seconds since the epoch). A number above 1e11 is
            read as milliseconds (as :func:`promptcache._times.parse_timestamp` reads a log's
            times: 1e11 s is the year 5138, 1e11 ms is 1973), so ``Date.now()`` is accepted.
        first_token: when the first response byte/token arrived (seconds since the epoch, or
            milliseconds as ``start``); a cache entry becomes readable by other requests from
            then on.
        end: when the response finished (seconds since the epoch, or milliseconds as
            ``start``).
        label: free-form grouping label (feature, endpoint, tenant...).
        session: conversation id; append-only checks and collapse classification run per session.
        request_id: provider or caller request id.
        service_tier: ``"batch"`` makes the batch discount apply; other values are informative.
        inference_geo: where an Anthropic request was processed, as its ``usage.inference_geo``
            reports it (``"us"``: US-only inference, priced 1.1x on every token category for
            Claude 4.6 and later, hosted-api-rules.md 1.6; ``"global"``...); ``None``: not
            reported.
        speed: the request's ``speed`` (``"fast"``: Anthropic fast mode, priced at its own
            rates, hosted-api-rules.md 1.6; OpenAI fast mode 2x, 2.5), read from a logged
            request; ``None``: not known (standard speed unless the request said otherwise).
        prefix_hash: fingerprint of the request's cached prefix up to its *last* breakpoint (set
            by the SDK wrapper). In a growing conversation the last breakpoint moves forward
            every turn, so two requests of one session rarely share it: see ``kept_prefix``
            and ``breakpoint_hashes``.
        breakpoint_hashes: the chained prefix digest at each breakpoint of the request, in
            render order (the last equals ``prefix_hash``); set by the SDK wrapper. Two
            requests that share a digest share the whole prefix up to that breakpoint: the
            tracker groups concurrent cold writes by the longest digest they share (``()``:
            unknown, grouped by ``prefix_hash`` as before).
        breakpoint_tokens: prompt tokens up to each breakpoint of ``breakpoint_hashes``
            (tokens; same length; the wrapper's counts, estimates for Anthropic); a
            concurrent cold write's waste counts only the shared prefix's tokens (``()``:
            unknown, the whole write counts).
        prompt_cache_retention: the ``prompt_cache_retention`` the request sent (OpenAI:
            ``"in_memory"``, ``"24h"``), set by the SDK wrapper or read from a request-log
            line; ``None``: not sent or not known (the model's default retention is assumed,
            hosted-api-rules.md 2.1-2.2). The session checks take the idle lifetime of the
            retention sent.
        kept_prefix: whether the request still holds the prefix its session's previous
            request cached (up to that request's last breakpoint), from the wrapper's digests;
            ``None``: unknown, or no previous request. A collapse is ``prefix_changed`` only
            when this is ``False`` (with ``None``, only when the prefix fingerprints differ).
        cacheable: whether the request's prefix could be cached at all (``None``: infer it).
        flags: anomalies found while parsing, e.g. ``"usage_decreased:cache_read"`` (a streamed
            counter went down), ``"input_parts_exceed_total"`` (the parts were clamped to
            ``input_total``; ``"input_parts_reported:..."`` keeps the reported numbers) or
            ``"unknown_cache_field:PATH"`` (a cache-related usage field the parser cannot map).

    Invariants: every count is ``>= 0`` and at most :data:`MAX_TOKENS`; a time is finite and
    before the year 10000 (after reading a millisecond value as milliseconds); ``cache_write_5m + cache_write_1h == cache_write``
    whenever all three are known (enforced); ``uncached_input + cache_read + writes <=
    input_total`` whenever ``input_total`` is known (enforced by clamping, flagged);
    ``breakpoint_tokens`` is empty or as long as ``breakpoint_hashes`` (enforced).

    Raises:
        pydantic.ValidationError: a negative count, a count over :data:`MAX_TOKENS`, a time
            that is not finite or past the year 9999, a TTL split that disagrees with
            ``cache_write``, or ``breakpoint_tokens`` of another length than
            ``breakpoint_hashes``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model: str | None = None
    uncached_input: _NonNegOpt = None
    cache_read: _NonNegOpt = None
    cache_write: _NonNegOpt = None
    cache_write_5m: _NonNegOpt = None
    cache_write_1h: _NonNegOpt = None
    cache_write_ttl: CacheWriteTTL | None = None
    input_total: _NonNegOpt = None
    output: _NonNegOpt = None
    reasoning: _NonNegOpt = None
    start: float | None = None
    first_token: float | None = None
    end: float | None = None
    label: str | None = None
    session: str | None = None
    request_id: str | None = None
    service_tier: str | None = None
    inference_geo: str | None = None
    speed: str | None = None
    prefix_hash: str | None = None
    breakpoint_hashes: tuple[str, ...] = Field(default=())
    breakpoint_tokens: tuple[_Count, ...] = Field(default=())
    prompt_cache_retention: str | None = None
    kept_prefix: bool | None = None
    cacheable: bool | None = None
    flags: tuple[str, ...] = Field(default=())

    @field_validator("start", "first_token", "end")
    @classmethod
    def _epoch_seconds(cls, value: float | None) -> float | None:
        """Seconds since the epoch: a value above 1e11 is milliseconds (divided by 1000); NaN,
        an infinity or a time past the year 9999 is refused (ValueError, which pydantic
        reports as a ValidationError naming the field)."""
        if value.__class__ is float and -_PLAIN_SECONDS <= value <= _PLAIN_SECONDS:
            return value  # what parse_timestamp returns for it
        return None if value is None else parse_timestamp(value)

    @model_validator(mode="before")
    @classmethod
    def _clamp_parts(cls, data: Any) -> Any:
        """Cap the parts at a known inclusive ``input_total`` and flag it (see the module
        docstring); the reported numbers are kept in an ``input_parts_reported:`` flag."""
        if not isinstance(data, dict):
            return data
        total, read = data.get("input_total"), data.get("cache_read")
        if not _is_count(total):
            return data
        uncached = data.get("uncached_input")
        write = data.get("cache_write")
        w5, w1 = data.get("cache_write_5m"), data.get("cache_write_1h")
        for v in (read, uncached, write, w5, w1):
            if v is not None and not (v.__class__ is int and v >= 0) and not _is_count(v):
                return data  # a bad value: left to the field validation
        writes = write if write is not None else (
            w5 + w1 if w5 is not None and w1 is not None else 0)
        if (read or 0) + writes + (uncached or 0) <= total:
            return data
        # an unknown read counts as 0 (it stays unknown): the known parts are still capped
        new_read = min(read or 0, total)
        new_writes = min(writes, total - new_read)
        out = dict(data)
        if read is not None:
            out["cache_read"] = new_read
        if new_writes != writes:
            if write is not None:
                out["cache_write"] = new_writes
            if w5 is not None and w1 is not None:
                out["cache_write_5m"] = min(w5, new_writes)
                out["cache_write_1h"] = new_writes - out["cache_write_5m"]
            elif w5 is not None or w1 is not None:
                out["cache_write_5m"] = out["cache_write_1h"] = None
        if uncached is not None:
            out["uncached_input"] = min(uncached, total - new_read - new_writes)
        reported = ",".join(
            f"{name}={data[name]}"
            for name in ("input_total", "cache_read", "cache_write", "cache_write_5m",
                         "cache_write_1h", "uncached_input")
            if data.get(name) is not None
        )
        flags = tuple(data.get("flags") or ())
        extra = [f for f in (CLAMP_FLAG, f"{REPORTED_FLAG}:{reported}") if f not in flags]
        out["flags"] = (*flags, *extra)
        return out

    def model_post_init(self, __context: object) -> None:
        """Check the TTL split against the write total, and ``breakpoint_tokens`` against
        ``breakpoint_hashes`` (ValueError when they disagree)."""
        if self.breakpoint_tokens and len(self.breakpoint_tokens) != len(self.breakpoint_hashes):
            raise ValueError(
                f"breakpoint_tokens has {len(self.breakpoint_tokens)} entries, "
                f"breakpoint_hashes {len(self.breakpoint_hashes)}: one count per breakpoint"
            )
        if (
            self.cache_write is not None
            and self.cache_write_5m is not None
            and self.cache_write_1h is not None
            and self.cache_write_5m + self.cache_write_1h != self.cache_write
        ):
            raise ValueError(
                f"cache_write_5m ({self.cache_write_5m}) + cache_write_1h ({self.cache_write_1h}) "
                f"!= cache_write ({self.cache_write})"
            )

    # ------------------------------------------------------------------ derived numbers

    @property
    def writes(self) -> int | None:
        """All cache-write tokens (tokens); ``None`` when not reported."""
        if self.cache_write is not None:
            return self.cache_write
        if self.cache_write_5m is not None and self.cache_write_1h is not None:
            return self.cache_write_5m + self.cache_write_1h
        return None

    @property
    def total_input(self) -> int | None:
        """All input tokens: uncached + cache read + cache writes (tokens).

        ``None`` when a part is unknown. For providers that report an inclusive total and have
        no separate write category (``cache_write`` is ``None``), the reported ``input_total``
        is used, because the writes are then inside the uncached bucket.
        """
        if self.uncached_input is None or self.cache_read is None:
            return None
        writes = self.writes
        if writes is not None:
            return self.uncached_input + self.cache_read + writes
        return self.input_total

    @property
    def hit_rate(self) -> float | None:
        """``cache_read / total_input`` for this one response, in [0, 1]; ``None`` if unknown."""
        total = self.total_input
        if total is None or self.cache_read is None:
            return None
        if total == 0:
            return None
        return self.cache_read / total

    @property
    def duration(self) -> float | None:
        """``end - start`` in seconds, ``None`` when either is unknown."""
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    @classmethod
    def from_inclusive_total(
        cls,
        provider: str,
        total_input: int,
        *,
        cache_read: int,
        cache_write: int = 0,
        cache_write_5m: int | None = None,
        cache_write_1h: int | None = None,
        **fields: object,
    ) -> UsageRecord:
        """Build a record from an *inclusive* input total (reads and writes inside it).

        ``uncached_input = total_input - cache_read - writes``: both reads and writes are
        subtracted (subtracting only the reads bills the writes twice, case BR-25).

        Raises:
            ValueError: the parts exceed the total.
        """
        writes = cache_write
        if cache_write_5m is not None or cache_write_1h is not None:
            writes = (cache_write_5m or 0) + (cache_write_1h or 0)
            if cache_write and cache_write != writes:
                raise ValueError("cache_write disagrees with cache_write_5m + cache_write_1h")
        uncached = total_input - cache_read - writes
        if uncached < 0:
            raise ValueError(
                f"cache_read ({cache_read}) + writes ({writes}) exceed the total ({total_input})"
            )
        return cls.model_validate(
            {
                "provider": provider,
                "uncached_input": uncached,
                "cache_read": cache_read,
                "cache_write": writes,
                "cache_write_5m": cache_write_5m,
                "cache_write_1h": cache_write_1h,
                "input_total": total_input,
                **fields,
            }
        )
