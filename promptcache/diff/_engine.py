"""The cache-miss diff: why request B cannot reuse what request A left in the cache.

Algorithm (one pass over two :class:`~promptcache.prefix.PrefixView` s):

1. Render both requests once with the same renderer (:func:`prepare`). Each segment gets a
   *content key*: its fingerprint, or, when the segment carries a cache marker
   (``cache_control`` / ``prompt_cache_breakpoint``), the fingerprint of the node without the
   marker, because moving a marker does not change the cached bytes. On older Claude models
   the thinking blocks the API strips (before the last plain user turn) are left out of the
   cached segments, as the API leaves them out of the cached prefix.
2. The first index where the content keys differ is the content divergence. Parameters that
   invalidate a tier (``tool_choice``, ``thinking``, effort, model, ...; see
   :func:`promptcache.catalog.invalidation_rules`) cut the prefix at the first segment of that
   tier. Every cut is a cause; the earliest in prefix order is the primary cause (case BR-20),
   the others are secondary.
3. The content divergence is classified: tools (reordered / one tool changed / set changed),
   serialisation (JSON key order, whitespace), system, images, history edits (messages
   aligned with :class:`difflib.SequenceMatcher`: rewritten, removed, inserted, merged).
4. Prediction (needs the model's catalog policy). Anthropic: A wrote an entry at each of its
   breakpoints whose prefix reaches the model's minimum; B reads the longest such entry that
   lies before the cut, is still within its TTL, and that a breakpoint of B reaches within the
   lookback window (``k.position - j.position <= lookback_positions``); B writes from there to
   its last breakpoint. OpenAI before GPT-5.6: B reads the identical prefix rounded down to
   ``min_cacheable_tokens + n * cache_step_tokens``, within retention (the catalog's
   ``idle_lifetime``, :func:`openai_idle`: a gap past the usual in-memory clearing, 5 min, is a
   warning-level ``ttl_expired`` that cuts nothing; only a gap past the certain bound, 1 h in
   memory or 24 h with ``"24h"`` or an org-dependent default, cuts). OpenAI GPT-5.6+ (catalog
   ``explicit_breakpoints``): A's entries are its written breakpoint prefixes (the implicit
   one on the newest message plus the latest 3 explicit ones; the latest 4 in ``"explicit"``
   mode), not rounded; B reads the longest one before the cut, as on Anthropic but with no
   lookback limit (:func:`openai_written`). TTL, minimum and breakpoint placement become
   causes when they reduce the read. A change of ``prompt_cache_key`` alone is a routing
   hint, not an invalidation: it is reported as a warning-level cause that cuts nothing
   (the read is likely, not certain); it becomes the primary cause only when B's observed
   read falls short. A Responses request with ``previous_response_id`` continues a stored
   conversation the body does not show: :func:`diff` resolves it against A (see there).
5. Money: tokens lost (what A left in the cache minus what B reads) are billed at the write
   rate (or the input rate where B does not write them) instead of the read rate.

Sources: https://platform.claude.com/docs/en/build-with-claude/prompt-caching (prefix match,
invalidation hierarchy, lookback, minimum, TTL) and
https://developers.openai.com/api/docs/guides/prompt-caching (1,024 tokens, 128-token steps).

Deviations: token counts of Anthropic requests are estimates (cl100k-based); when the
previous request's usage is known (``usage_a``), predicted numbers are calibrated to it, so
observed and predicted numbers compare on the same scale: cached positions are scaled by the
ratio of A's reported cache read + write to our estimate of its prefix up to its last written
breakpoint, and B's uncached tail by A's reported / estimated tail when A's tail is long (the
estimate's error is proportional), else by the prefix's ratio plus the fixed framing A's short
tail shows beyond its estimate; so a B of A's shape gets A's own reported split
(:func:`calibration`, :func:`_tail_correction`). Without A's cache numbers, every count is
scaled by A's reported total input over our estimate. OpenAI counts before GPT-5.6 are scaled
*before* the 128-token grid is applied, so a predicted read stays 0 or ``1,024 + n * 128``;
GPT-5.6+ counts are calibrated as Anthropic's (its usage reports writes). With A's usage of
writes known, the prediction (and the ideal read) never exceeds what A read plus wrote.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from functools import cache
from typing import Any

from promptcache._errors import InvalidRequestError, PromptCacheError, UnknownModelError
from promptcache.catalog import cache_grid_tokens, find_policy, invalidation_rules, known_models
from promptcache.catalog._policy import IdleBounds
from promptcache.diff._causes import (
    ANTHROPIC_DIAGNOSTICS_URL,
    CAUSES,
    NO_CHANGE_CAUSES,
    OPENAI_DIAGNOSTICS_URL,
    anthropic_reason_for,
    openai_reason_for,
)
from promptcache.diff._inputs import (
    Prices,
    RawDiagnostics,
    Usage,
    parse_diagnostics,
    read_prices,
    read_usage,
    writes_known,
)
from promptcache.diff._model import (
    Cause,
    Check,
    DiagnosticsComparison,
    DiffResult,
    Divergence,
    ObservedUsage,
    PredictedUsage,
)
from promptcache.planner import segment_digest
from promptcache.prefix import PrefixView, Segment, render
from promptcache.tokens import count_text

__all__ = ["ROUTING_CAUSES", "Prepared", "calibration", "cannot_tell", "chained_body",
           "chained_id", "compare", "diff", "entry_ttl_seconds", "explicit_breakpoints",
           "mark_chained", "miss_costs", "openai_cacheable_tokens", "openai_written", "prepare",
           "read_tolerance", "response_output", "stored_prompt_change"]

TIERS = ("tools", "system", "messages")
_TIER_RANK = {t: i for i, t in enumerate(TIERS)}
_MARKERS = ("cache_control", "prompt_cache_breakpoint")
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0, "30m": 1800.0, "12h": 43200.0, "24h": 86400.0}
#: A shortfall below this many tokens (or 2 % of the prediction) is estimate noise.
_MIN_TOLERANCE = 32


def read_tolerance(ideal: int | None) -> int:
    """Tokens by which an observed cache read may differ from a predicted ``ideal`` read and
    still agree with it (estimate noise): 32 tokens or 2 % of the prediction."""
    return max(_MIN_TOLERANCE, round(0.02 * (ideal or 0)))


def _ttl_seconds(ttl: str | None) -> float:
    return _TTL_SECONDS.get(ttl or "5m", 300.0)


def entry_ttl_seconds(ttl: str | None, family: str, policy: Any = None,
                      retention: Any = None) -> float:
    """Seconds after which a cache entry written with ``ttl`` (``"5m"``, ``"1h"``, ``"30m"``,
    ``"12h"``, ``"24h"``) is *likely* gone; without a known TTL, the family's default: 5
    minutes on Anthropic; on OpenAI before GPT-5.6, the catalog's usual idle clearing of
    automatic entries (``policy.idle_bounds(retention)``, :func:`openai_idle`: 300 s for
    in-memory retention, "usually cleared after 5-10 min", which is not a certain expiry:
    they are kept up to 1 h; the certain bound when the retention has no earlier usual
    clearing, ``"24h"``). ``policy``: the model's catalog policy (None: an in-memory or
    unknown default). Used to name the likely cause of an observed shortfall."""
    if ttl in _TTL_SECONDS:
        return _ttl_seconds(ttl)
    if family != "openai":
        return _ttl_seconds(None)
    bounds = openai_idle(policy, retention)
    return bounds.usual_s if bounds.usual_s is not None else bounds.max_s


@cache
def _fallback_idle_policy() -> Any:
    """A catalog policy of an OpenAI model that accepts both retentions (its idle lifetimes
    stand for a model the catalog does not know)."""
    for model in known_models(provider="openai"):
        pol = find_policy(model)
        if pol is not None and pol.idle_lifetime and len(pol.prompt_cache_retention) > 1:
            return pol
    raise PromptCacheError("the catalog has no OpenAI idle lifetime (policies.toml)")


def openai_idle(policy: Any, retention: Any = None) -> IdleBounds:
    """The idle lifetime of an OpenAI (before GPT-5.6) request's automatic cache entries,
    from the catalog (``CachePolicy.idle_bounds``; policies.toml ``idle_lifetime``, sources
    hosted-api-rules.md 2.1-2.2): in-memory entries are usually cleared after 5 min idle and
    always within 1 h; ``"24h"`` within 24 h; with no retention sent on a model that accepts
    both, the default depends on the organisation (``default_unknown``). A model without an
    idle lifetime (or none) gets the bounds of a model that accepts both retentions."""
    bounds: IdleBounds | None = (policy.idle_bounds(retention)
                                 if hasattr(policy, "idle_bounds") else None)
    if bounds is None:
        bounds = _fallback_idle_policy().idle_bounds(
            retention if retention in ("in_memory", "24h") else None)
    assert bounds is not None
    return bounds


def _strip_markers(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_markers(v) for k, v in node.items() if k not in _MARKERS}
    if isinstance(node, list):
        return [_strip_markers(v) for v in node]
    return node


def _dumps(node: Any) -> str:
    return json.dumps(node, ensure_ascii=False, separators=(",", ":"))


_MARKER_NEEDLES = (b'"cache_control":{', b'"prompt_cache_breakpoint":{')


def _strip_marker_bytes(data: bytes) -> bytes:
    """``data`` (compact JSON) without cache markers, at any depth.

    A marker's value is a flat object (no nested braces). A quote inside a JSON string is
    always escaped, so the needles cannot match string content.
    """
    out = data
    for needle in _MARKER_NEEDLES:
        i = out.find(needle)
        while i >= 0:
            j = out.find(b"}", i + len(needle))
            if j < 0:
                break
            if i > 0 and out[i - 1:i] == b",":
                out = out[:i - 1] + out[j + 1:]
            elif out[j + 1:j + 2] == b",":
                out = out[:i] + out[j + 2:]
            else:
                out = out[:i] + out[j + 1:]
            i = out.find(needle)
    return out


def _content_key(seg: Segment) -> str:
    """The segment's cached content, as the planner digests it: cache markers ignored, and a
    string ``system`` / ``content`` equal to one text block with the same text (the API reads
    one as the other: new-user trial 11, the wrapper's auto_cache sends the first request's
    system prompt as a marked block and the next ones as the caller's string)."""
    return segment_digest(seg).hex()


@dataclass(slots=True)
class _Message:
    index: int
    role: str | None
    segs: list[int]
    key: tuple[str, ...]
    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        """The message's text (its segments' texts joined by newlines)."""
        return "\n".join(self.segments[i].text or "" for i in self.segs)


@dataclass(slots=True)
class Prepared:
    """A request rendered once, with everything the diff compares precomputed.

    Attributes:
        payload: the request as given.
        view: its :class:`PrefixView`.
        family: ``"anthropic"`` or ``"openai"``.
        model: the model id (None when unknown).
        policy: the catalog's cache policy (None when the model is unknown).
        segs: the segments the provider caches: the view's, minus thinking blocks the
            provider strips (models whose catalog policy has ``strips_prior_thinking``), re-indexed
            with token offsets recomputed.
        stripped: paths of the thinking blocks the provider strips from this request.
        keys: content key per segment of ``segs`` (fingerprint without cache markers).
        bps: indices (into ``segs``) of segments carrying a breakpoint (explicit or automatic).
        bp_ttl: TTL per breakpoint index.
        model_given: whether ``model`` was passed by the caller (``--model``) rather than
            read from the payload; it decides what the unknown-model note advises.
    """

    payload: Mapping[str, Any]
    view: PrefixView
    family: str
    model: str | None
    policy: Any
    segs: tuple[Segment, ...]
    stripped: frozenset[str]
    keys: list[str]
    bps: list[int]
    bp_ttl: dict[int, str | None]
    model_given: bool = False
    _messages: list[_Message] | None = field(default=None, repr=False)
    _tier_first: dict[str, int] | None = field(default=None, repr=False)
    _chain: list[str] | None = field(default=None, repr=False)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The cached segments (:attr:`segs`)."""
        return self.segs

    @property
    def total(self) -> int:
        """Tokens of the prompt as the provider caches it."""
        return self.segs[-1].end_token if self.segs else 0

    def end(self, i: int) -> int:
        """Tokens up to and including segment ``i``."""
        return self.segs[i].end_token

    def start(self, i: int) -> int:
        """Tokens before segment ``i`` (the total when ``i`` is past the end)."""
        segs = self.segs
        return segs[i].start_token if i < len(segs) else self.total

    def tier_first(self, tier: str) -> int:
        """Index of the first segment of ``tier`` or a later tier (len when none)."""
        if self._tier_first is None:
            firsts: dict[str, int] = {}
            n = len(self.segs)
            for t in TIERS:
                rank = _TIER_RANK[t]
                firsts[t] = next((s.index for s in self.segs
                                  if _TIER_RANK[s.tier] >= rank), n)
            self._tier_first = firsts
        return self._tier_first[tier]

    def chain(self) -> list[str]:
        """Chained sha256 over the content keys: ``chain[i]`` identifies segments ``0..i``
        (cache markers ignored), for O(1) prefix lookups."""
        if self._chain is None:
            out: list[str] = []
            h = hashlib.sha256(self.family.encode())
            for key in self.keys:
                h = h.copy()
                h.update(key.encode())
                out.append(h.hexdigest())
            self._chain = out
        return self._chain

    def messages(self) -> list[_Message]:
        """The messages of the request (segments grouped by message index)."""
        if self._messages is None:
            out: list[_Message] = []
            for seg in self.segs:
                if seg.message_index is None:
                    continue
                if not out or out[-1].index != seg.message_index:
                    out.append(_Message(seg.message_index, seg.role, [], (), self.segs))
                out[-1].segs.append(seg.index)
            keys = self.keys
            for msg in out:
                msg.key = tuple([keys[i] for i in msg.segs])
            self._messages = out
        return self._messages


def _family(provider: str) -> str:
    return "anthropic" if provider == "anthropic" else "openai"


def _render_provider(provider: str | None, payload: Mapping[str, Any]) -> str | None:
    if provider in (None, "", "auto"):
        return None
    if provider == "openai":
        return "openai-responses" if ("input" in payload or "instructions" in payload) \
            and "messages" not in payload else "openai-chat"
    return provider


def prepare(payload: Mapping[str, Any], provider: str | None = None, *,
            model: str | None = None, model_given: bool | None = None) -> Prepared:
    """Render ``payload`` once and precompute what :func:`compare` needs.

    Args:
        payload: the request body as sent to the API.
        provider: ``"anthropic"``, ``"openai"`` (chat or responses by shape),
            ``"openai-chat"``, ``"openai-responses"``; detected when None.
        model: overrides ``payload["model"]`` (policy, prices and token counting).
        model_given: whether ``model`` came from the caller (default: ``model is not None``);
            pass False when ``model`` is only a fallback read from the request's wrapper.

    Raises:
        InvalidRequestError: the payload is malformed.
    """
    view = render(payload, _render_provider(provider, payload), model=model)
    policy = find_policy(view.model)
    segs, stripped = _cached_segments(view, policy)
    keys = [_content_key(s) for s in segs]
    bps: list[int] = []
    bp_ttl: dict[int, str | None] = {}
    new_index = {s.path: s.index for s in segs} if stripped else None
    for seg in view.breakpoints():
        bp = view.breakpoint_of(seg)
        idx = seg.index if new_index is None else new_index[seg.path]
        bps.append(idx)
        bp_ttl[idx] = bp.ttl if bp is not None else None
    given = model is not None if model_given is None else model_given
    return Prepared(payload, view, _family(view.provider), view.model, policy, segs, stripped,
                    keys, bps, bp_ttl, given)


def _no_policy_note(pa: Prepared, pb: Prepared) -> str:
    """Why there is no prediction: a request names no model, or the catalog lacks its id.

    Advises ``--model`` only where passing it would help: when a request names no model or
    names one the catalog lacks; a ``--model`` id the catalog lacks gets the closest ids.
    """
    head = "no prediction, no cost"
    for label, p in (("B", pb), ("A", pa)):
        if p.policy is not None:
            continue
        if not p.model:
            return f"request {label} names no model: {head} (pass --model)"
        hint = _closest_ids(p.model)
        if p.model_given:
            return f"model {p.model!r} (from --model) is unknown to the catalog: {head}{hint}"
        return (f"request {label}'s model {p.model!r} is unknown to the catalog: {head} "
                f"(pass --model with a catalog id){hint}")
    return f"model unknown to the catalog: {head}"  # unreachable: one policy is None


def _closest_ids(model: str) -> str:
    """``"; closest known ids: ..."`` for an id the catalog lacks, or ``""``."""
    from promptcache.catalog import get_policy

    try:
        get_policy(model)
    except UnknownModelError as exc:
        if exc.suggestions:
            return f"; closest known ids: {', '.join(exc.suggestions)}"
    except PromptCacheError:
        return ""
    return ""


_THINKING_KINDS = ("thinking", "redacted_thinking")


def _cached_segments(view: PrefixView, policy: Any
                     ) -> tuple[tuple[Segment, ...], frozenset[str]]:
    """The segments the provider caches, and the paths of thinking blocks it strips.

    Older Claude models (catalog policy ``strips_prior_thinking``) drop the thinking blocks of
    every assistant turn that lies before the last plain (non-``tool_result``) user message;
    the cached prefix then lacks them.
    Source: https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md
    (hosted-api-rules.md 1.7, "Thinking blocks").
    """
    segs = view.segments
    if view.provider != "anthropic" or not getattr(policy, "strips_prior_thinking", False):
        return segs, frozenset()
    if not any(s.kind in _THINKING_KINDS for s in segs):
        return segs, frozenset()
    plain_user: int | None = None
    by_message: dict[int, list[Segment]] = {}
    for s in segs:
        if s.message_index is not None:
            by_message.setdefault(s.message_index, []).append(s)
    for m, members in by_message.items():
        if members[0].role == "user" and not any(x.kind == "tool_result" for x in members):
            plain_user = m if plain_user is None else max(plain_user, m)
    if plain_user is None:
        return segs, frozenset()
    drop = {s.index for s in segs if s.kind in _THINKING_KINDS
            and s.message_index is not None and s.message_index < plain_user}
    if not drop:
        return segs, frozenset()
    kept: list[Segment] = []
    start = 0
    for s in segs:
        if s.index in drop:
            continue
        kept.append(replace(s, index=len(kept), start_token=start))
        start += s.tokens
    return tuple(kept), frozenset(segs[i].path for i in drop)


# ---------------------------------------------------------------------------- structure
def _first_leaf_diff(a: Any, b: Any, path: str) -> tuple[str, int, Any, Any]:
    """(leaf path, char offset, leaf of A, leaf of B) of the first difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        ka, kb = list(a), list(b)
        for pos in range(max(len(ka), len(kb))):
            x = ka[pos] if pos < len(ka) else None
            y = kb[pos] if pos < len(kb) else None
            if x != y or x is None:
                sa, sb = _dumps(a), _dumps(b)
                return path, _common_len(sa, sb), a, b
            if _dumps(a[x]) != _dumps(b[x]):
                return _first_leaf_diff(a[x], b[x], f"{path}.{x}")
        return path, 0, a, b
    if isinstance(a, list) and isinstance(b, list):
        for pos in range(max(len(a), len(b))):
            if pos >= len(a) or pos >= len(b):
                return f"{path}[{pos}]", 0, a[pos] if pos < len(a) else None, \
                    b[pos] if pos < len(b) else None
            if _dumps(a[pos]) != _dumps(b[pos]):
                return _first_leaf_diff(a[pos], b[pos], f"{path}[{pos}]")
        return path, 0, a, b
    if isinstance(a, str) and isinstance(b, str):
        return path, _common_len(a, b), a, b
    return path, _common_len(_dumps(a), _dumps(b)), a, b


def _common_len(a: str, b: str) -> int:
    """Length of the common prefix of two strings (characters)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on slice equality: fast on long texts
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _canon(node: Any, ordered: bool) -> Any:
    """Canonical form: JSON strings parsed; ``ordered`` keeps key order significant."""
    if isinstance(node, dict):
        if ordered:
            return ("obj", tuple((k, _canon(v, ordered)) for k, v in node.items()))
        return {k: _canon(v, ordered) for k, v in node.items()}
    if isinstance(node, list):
        return [_canon(v, ordered) for v in node]
    if isinstance(node, str):
        s = node.strip()
        if s[:1] in ("{", "[") and s[-1:] in ("}", "]"):
            try:
                return ("json", _canon(json.loads(s), ordered))
            except ValueError:
                pass
    return node


def _ws(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _ws(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_ws(v) for v in node]
    if isinstance(node, str):
        return " ".join(node.split())
    return node


def _serialisation_change(a: Any, b: Any) -> str | None:
    """``json_key_order`` / ``whitespace_only`` when ``a`` and ``b`` differ only in form."""
    ua, ub = _canon(a, False), _canon(b, False)
    if ua == ub:
        return "whitespace_only" if _canon(a, True) == _canon(b, True) else "json_key_order"
    if _ws(ua) == _ws(ub):
        return "whitespace_only"
    return None


def _tool_name(seg: Segment, fallback: int) -> str:
    try:
        node = json.loads(seg.data)
    except ValueError:
        return f"#{fallback}"
    if isinstance(node, dict):
        name = node.get("name")
        fn = node.get("function")
        if not isinstance(name, str) and isinstance(fn, dict):
            name = fn.get("name")
        if isinstance(name, str):
            return name
    return f"#{fallback}"


@dataclass(slots=True)
class _RawCause:
    code: str
    cut: int               # first segment index of B the cause invalidates
    rank: int              # tie-break within one index: model < params < content < other
    tier: str | None
    path: str | None
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    title: str | None = None   # overrides the cause table's title (this case only)
    source: str | None = None  # overrides the cause table's source (the rule's own page)


def _make_cause(raw: _RawCause) -> Cause:
    info = CAUSES[raw.code]
    return Cause.model_construct(code=raw.code, title=raw.title or info.title, tier=raw.tier,
                 path=raw.path, segment_index=raw.cut, detail=raw.detail,
                 fix_hint=info.fix_hint, source=raw.source or info.source, note=raw.note)


def _get(params: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _param_causes(pa: Prepared, pb: Prepared) -> list[_RawCause]:
    out: list[_RawCause] = []
    fam = pb.family
    for rule in invalidation_rules("anthropic" if fam == "anthropic" else "openai"):
        va = vb = None
        found_a = found_b = False
        key = rule.keys[0]
        for k in rule.keys:
            fa, xa = _get(pa.view.params, k)
            fb, xb = _get(pb.view.params, k)
            if fa or fb:
                found_a, va, found_b, vb, key = fa, xa, fb, xb, k
                break
        if found_a == found_b and va == vb:  # key order of a parameter does not matter
            continue
        if rule.cause in ROUTING_CAUSES and fam == "openai":
            out.append(_routing_cause(pb, key, va if found_a else None,
                                      vb if found_b else None, rule.source.url))
            continue
        cut = pb.tier_first(rule.invalidates)
        note, source = rule.note, None
        if fam == "openai":  # the rule's own page, not the cause table's (Anthropic) one
            source = rule.source.url
            reason = openai_reason_for(rule.cause, None)
            if not note and reason is not None:
                note = _openai_param_note(reason, source)
        detail: dict[str, Any] = {"from": va if found_a else None,
                                  "to": vb if found_b else None}
        title = None
        if rule.cause == "effort_changed" and fam == "anthropic" and found_a != found_b:
            # "setting effort explicitly to the model's default is the same as omitting it
            # and does not invalidate" (hosted-api-rules.md 1.7 [A10][A3]); the catalog
            # records no default effort per model, so this cut holds only if the value set
            # is not the default
            value = vb if found_b else va
            detail["if_model_default"] = "no change: nothing is invalidated"
            title = (f"effort set on one request only ({value!r}): a change unless "
                     f"{value!r} is this model's default effort (not recorded in the "
                     "catalog), which does not invalidate")
        out.append(_RawCause(rule.cause, cut, 1, rule.invalidates, key, detail, note,
                             title=title, source=source))
    return out


#: Warning-level causes: a change that makes a read less likely without invalidating any
#: entry. They cut nothing (the prediction keeps the full read, flagged as an upper bound) and
#: are the primary cause only when B's observed read falls short.
ROUTING_CAUSES = frozenset({"prompt_cache_key_changed"})

_WARNING_WHY = {"prompt_cache_key_changed": "the changed prompt_cache_key (routing)",
                "ttl_expired": "the gap over the minimum lifetime"}


def _warning_why(cause: Any) -> str:
    """Why a warning-level cause makes the predicted read an upper bound (for the note)."""
    if cause.code == "ttl_expired" and cause.detail.get("ttl_is") == "usual idle clearing":
        return "the idle gap past the usual in-memory clearing (5-10 min, not guaranteed)"
    return _WARNING_WHY[cause.code]


def is_warning(cause: Any) -> bool:
    """Whether ``cause`` (a :class:`Cause` or the engine's raw cause) is warning-level: it cuts
    nothing and makes a read uncertain rather than impossible (:data:`ROUTING_CAUSES`; a
    GPT-5.6+ ``ttl_expired``, whose TTL is a minimum lifetime). Such a cause is the primary
    one only when B's observed read falls short."""
    return cause.code in ROUTING_CAUSES or (
        cause.code == "ttl_expired" and cause.detail.get("level") == "warning")


def _minutes(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"


def _idle_warning(pb: Prepared, gap: float, idle: IdleBounds) -> _RawCause:
    """OpenAI before GPT-5.6: the gap is past the usual idle clearing of in-memory entries
    ("usually cleared after 5-10 min of inactivity; kept up to 1 h off-peak", hosted-api-rules
    .md 2.1 [O2]) but within the certain bound: a read is possible, not guaranteed, so the
    expiry is a warning that cuts nothing."""
    assert idle.usual_s is not None
    detail: dict[str, Any] = {"gap_seconds": gap, "ttl_seconds": idle.usual_s,
                              "max_idle_seconds": idle.max_s, "level": "warning",
                              "ttl_is": "usual idle clearing", "retention": idle.retention}
    if idle.default_unknown:
        detail["retention_default"] = "depends on the organisation"
        which = (f"no prompt_cache_retention is sent and this model's default depends on the "
                 f"organisation (openai-python: 24h for non-ZDR organisations, in_memory "
                 f"for ZDR ones; Azure: in_memory): in_memory entries are usually cleared "
                 f"after 5-10 min idle, 24h ones are kept up to {_minutes(idle.max_s)}: "
                 "a read is likely with 24h retention, unlikely with in_memory")
    else:
        which = (f"in-memory entries are usually cleared after 5-10 min idle, but that is not "
                 f"guaranteed: they are kept up to {_minutes(idle.max_s)} off-peak and "
                 f"always removed within {_minutes(idle.max_s)}: a read is possible but no "
                 "longer likely")
    return _RawCause(
        "ttl_expired", len(pb.segs), 4, None, None, detail,
        f"the gap ({gap:,.0f} s) is past {_minutes(idle.usual_s)} idle: {which}",
        title=f"the gap exceeds {_minutes(idle.usual_s)} idle: in-memory entries are usually "
              "cleared by then (not guaranteed): a read is uncertain")


def _ttl_warning(pb: Prepared, gap: float, ttl: float) -> _RawCause:
    """GPT-5.6+: the gap exceeds the ``prompt_cache_options.ttl``, a *minimum* lifetime ("The
    backend may keep entries longer", hosted-api-rules.md 2.3): a read is possible, not
    guaranteed, so the expiry is a warning that cuts nothing."""
    minutes = f"{ttl / 60:g}m"
    return _RawCause(
        "ttl_expired", len(pb.segs), 4, None, None,
        {"gap_seconds": gap, "ttl_seconds": ttl, "level": "warning", "ttl_is": "minimum"},
        f"the gap ({gap:,.0f} s) exceeds the {minutes} cache lifetime, which on this model is "
        "a minimum (entries are kept at least that long, possibly longer): a read is "
        "possible but no longer guaranteed",
        title=f"the gap exceeds the {minutes} minimum cache lifetime: a read is not guaranteed")


def _routing_cause(pb: Prepared, key: str, before: Any, after: Any, source: str) -> _RawCause:
    """A ``prompt_cache_key`` change: a routing hint, not part of the cached prefix.

    OpenAI combines the key with the prefix hash to pick the machine; "the key is a routing
    hint and does not guarantee a hit" (hosted-api-rules.md 2.1, [O2][O4]). A request with
    another key may land on another machine (a likely miss on a busy prefix) or on the same
    one (a read): no documented rule makes the read impossible, so the change cuts nothing."""
    return _RawCause(
        "prompt_cache_key_changed", len(pb.segs), 6, None, key,
        {"from": before, "to": after, "level": "warning"},
        "prompt_cache_key is combined with the prefix hash to steer routing "
        f"({source}): with another key B is likely routed to another machine, so the read "
        "is uncertain: it may still happen (the same machine, or a quiet deployment) but a "
        "miss is likely on a busy one; nothing in the cached prefix changed, so the "
        "predicted read is an upper bound",
        title="prompt_cache_key changed: routing changed, the read is uncertain (a miss is "
              "likely on a busy deployment)",
        source=source)


def _openai_param_note(reason: str, source: str) -> str:
    """The caveat of an OpenAI request setting whose change is a documented miss reason.

    OpenAI documents such a setting only as a reason value of its cache diagnostics
    (hosted-api-rules.md 2, the diagnostics page); the tier-by-tier invalidation table
    (1.7) is Anthropic's, so no tier is named: the whole prompt is counted as lost."""
    return (f"OpenAI's cache diagnostics list {reason} as a cache-miss reason ({source}); "
            "OpenAI documents no tier-by-tier invalidation table (that one is Anthropic's), "
            "so the whole prompt is counted as lost: confirm with usage or "
            "prompt_cache_diagnostics")


# ---------------------------------------------------------------------------- content
def _classify(pa: Prepared, pb: Prepared, i: int, *, redact: bool
              ) -> tuple[list[_RawCause], Divergence]:
    segs_a, segs_b = pa.segments, pb.segments
    sa = segs_a[i] if i < len(segs_a) else None
    sb = segs_b[i] if i < len(segs_b) else None
    ref = sb if sb is not None else sa
    assert ref is not None
    tier = ref.tier

    # where, exactly
    if sa is not None and sb is not None:
        na = _strip_markers(json.loads(sa.data))
        nb = _strip_markers(json.loads(sb.data))
        leaf_path, offset, la, lb = _first_leaf_diff(na, nb, sb.path)
        same_entity = (sa.kind == sb.kind and sa.role == sb.role
                       and (sa.tier != "tools" or _tool_name(sa, i) == _tool_name(sb, i)))
        path = leaf_path if same_entity else sb.path
        form = _serialisation_change(na, nb)
    else:
        leaf_path, offset, la, lb = ref.path, 0, (json.loads(sa.data) if sa else None), \
            (json.loads(sb.data) if sb else None)
        path = ref.path
        form = None
        same_entity = False
        na = nb = None
    token_offset = pb.start(i)
    if sa is not None and sb is not None and same_entity:
        if sa.text and sb.text and sa.text != sb.text:
            common = sa.text[:_common_len(sa.text, sb.text)]
        else:  # the difference is outside the text: count the common serialised part
            da = _dumps(na)
            common = da[:_common_len(da, _dumps(nb))]
        if common:
            token_offset += min(count_text(common, pb.model), sb.tokens)
    divergence = Divergence.model_construct(
        path=path, segment_path=ref.path, leaf_path=leaf_path, segment_index=i, tier=tier,
        kind=ref.kind, char_offset=offset, token_offset=token_offset,
        semantic_equal=form is not None,
        before=_excerpt(la, offset, redact), after=_excerpt(lb, offset, redact))

    causes: list[_RawCause] = []
    if tier == "tools":
        causes.extend(_tool_causes(pa, pb, i, form, path))
    elif sa is not None and sa.kind in _THINKING_KINDS and sa.path in pb.stripped:
        causes.append(_RawCause(
            "thinking_stripped", i, 2, tier, sa.path,
            {"stripped": sorted(pb.stripped - pa.stripped), "model": pb.model},
            "model-specific: older Opus and Sonnet models and Haiku up to 4.5 drop earlier "
            "thinking blocks once a plain user turn follows tool use"))
    elif form is not None:
        causes.append(_RawCause(form, i, 2, tier, path, {"tier": tier}))
    elif "image" in (sa.kind if sa else "", sb.kind if sb else ""):
        causes.append(_RawCause("image_changed", i, 2, tier, path,
                                {"before": sa.kind if sa else None,
                                 "after": sb.kind if sb else None}))
    elif tier == "system" or ref.role in ("system", "developer"):
        code = "output_format_changed" if ref.kind == "schema" else "system_changed"
        causes.append(_RawCause(code, i, 2, tier, path))
    else:
        causes.append(_message_cause(pa, pb, i, path))
    return causes, divergence


def _excerpt(leaf: Any, offset: int, redact: bool) -> str:
    if leaf is None:
        return "" if not redact else "(absent)"
    text = leaf if isinstance(leaf, str) else _dumps(leaf)
    if redact:
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    lo = max(0, offset - 24)
    hi = min(len(text), offset + 56)
    return ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def _tool_causes(pa: Prepared, pb: Prepared, i: int, form: str | None,
                 path: str) -> list[_RawCause]:
    ta = [s for s in pa.segments if s.tier == "tools"]
    tb = [s for s in pb.segments if s.tier == "tools"]
    names_a = [_tool_name(s, n) for n, s in enumerate(ta)]
    names_b = [_tool_name(s, n) for n, s in enumerate(tb)]
    keys_a = [pa.keys[s.index] for s in ta]
    keys_b = [pb.keys[s.index] for s in tb]
    seg_path = pb.segments[i].path if i < len(pb.segments) else pa.segments[i].path
    if sorted(keys_a) == sorted(keys_b):
        return [_RawCause("tools_reordered", i, 2, "tools", seg_path,
                          {"same_set": True, "order_a": names_a, "order_b": names_b})]
    set_a, set_b = set(names_a), set(names_b)
    if set_a != set_b:
        detail = {"added": [n for n in names_b if n not in set_a],
                  "removed": [n for n in names_a if n not in set_b]}
        out = [_RawCause("tools_changed", i, 2, "tools", seg_path, detail)]
        common_a = [n for n in names_a if n in set_b]
        common_b = [n for n in names_b if n in set_a]
        if common_a != common_b:
            out.append(_RawCause("tools_reordered", i, 3, "tools", seg_path,
                                 {"same_set": False, "order_a": common_a,
                                  "order_b": common_b}))
        return out
    if names_a != names_b:
        out = [_RawCause("tools_reordered", i, 2, "tools", seg_path,
                         {"same_set": False, "order_a": names_a, "order_b": names_b})]
        changed = [n for n in names_a
                   if keys_a[names_a.index(n)] != keys_b[names_b.index(n)]]
        if changed:
            out.append(_RawCause("tool_changed", i, 3, "tools", seg_path,
                                 {"tools": changed}))
        return out
    name = names_b[tb.index(pb.segments[i])] if i < len(pb.segments) else names_a[-1]
    field_path = path.split("]", 1)[1].lstrip(".") if "]" in path else ""
    if form is not None:
        return [_RawCause(form, i, 2, "tools", path, {"tool": name, "tier": "tools"})]
    return [_RawCause("tool_changed", i, 2, "tools", path,
                      {"tool": name, "field": field_path or None})]


def _message_cause(pa: Prepared, pb: Prepared, i: int, path: str) -> _RawCause:
    segs_a, segs_b = pa.segments, pb.segments
    ref = segs_b[i] if i < len(segs_b) else segs_a[i]
    tier = ref.tier
    ma, mb = pa.messages(), pb.messages()
    start_a = next((n for n, m in enumerate(ma) if i in m.segs), None)
    if i >= len(segs_b):  # B stops inside A: the tail of A's history is gone
        removed = [f"messages[{m.index}]" for m in ma[start_a:]] if start_a is not None else []
        return _RawCause("message_removed", i, 2, tier, segs_a[i].path,
                         {"subtype": "history_truncated", "removed": removed})
    start_b = next((n for n, m in enumerate(mb) if i in m.segs), None)
    if start_a is None or start_b is None:
        return _RawCause("message_rewritten", i, 2, tier, path, {"subtype": "edited"})
    ka = [m.key for m in ma[start_a:]]
    kb = [m.key for m in mb[start_b:]]
    sm = SequenceMatcher(None, ka, kb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        a_msgs = ma[start_a + i1:start_a + i2]
        b_msgs = mb[start_b + j1:start_b + j2]
        if tag == "delete":
            return _RawCause("message_removed", i, 2, tier, path,
                             {"subtype": "history_edit (message removed)",
                              "removed": [f"messages[{m.index}]" for m in a_msgs]})
        if tag == "insert":
            if i1 >= len(ka):
                break  # appended at the end: not a history edit
            return _RawCause("message_inserted", i, 2, tier, path,
                             {"subtype": "history_edit (message inserted)",
                              "inserted": [f"messages[{m.index}]" for m in b_msgs]})
        # replace
        merged_into = _merged(a_msgs, b_msgs)
        if merged_into is not None:
            # kept: an A message whose text a B message of the same role holds (a merged
            # neighbour); a text that merely recurs in a message of another role (an
            # assistant reply quoted by the merged user turn) does not keep its message
            return _RawCause("message_rewritten", i, 2, tier, path, {
                "subtype": "history_edit (message removed and neighbours merged)",
                "removed": [f"messages[{m.index}]" for m in a_msgs
                            if not any(m.role == bm.role and m.text.strip()
                                       and m.text.strip() in bm.text for bm in b_msgs)],
                "merged_into": merged_into})
        detail: dict[str, Any] = {"subtype": "edited",
                                  "messages_a": [f"messages[{m.index}]" for m in a_msgs],
                                  "messages_b": [f"messages[{m.index}]" for m in b_msgs]}
        kinds_a = [pa.segments[s].kind for m in a_msgs for s in m.segs]
        kinds_b = [pb.segments[s].kind for m in b_msgs for s in m.segs]
        thinking = ("thinking", "redacted_thinking")
        if sum(k in thinking for k in kinds_a) > sum(k in thinking for k in kinds_b):
            detail["subtype"] = "thinking blocks removed"
        return _RawCause("message_rewritten", i, 2, tier, path, detail)
    return _RawCause("message_rewritten", i, 2, tier, path, {"subtype": "edited"})


def _merged(a_msgs: Sequence[_Message], b_msgs: Sequence[_Message]) -> str | None:
    """The B message that holds the texts of two or more A messages (a merge), if any."""
    if len(a_msgs) <= len(b_msgs):
        return None
    for bm in b_msgs:
        held = [am for am in a_msgs if am.text.strip() and am.text.strip() in bm.text]
        if len(held) >= 2:
            return f"messages[{bm.index}]"
    return None


# ---------------------------------------------------------------------------- prediction
@dataclass(slots=True)
class _Prediction:
    read: int
    read_index: int | None     # last segment index read (None: nothing)
    write: int
    uncached: int


def _entries(pa: Prepared, upto: int, gap: float | None) -> list[int]:
    """A's breakpoint indices that wrote an entry, lie before ``upto`` and are alive."""
    minimum = int(getattr(pa.policy, "min_cacheable_tokens", 0) or 0)
    out = []
    for j in pa.bps:
        if j >= upto or pa.end(j) < minimum:
            continue
        if gap is not None and gap > _ttl_seconds(pa.bp_ttl.get(j)):
            continue
        out.append(j)
    return out


def _reaches(pb: Prepared, j: int) -> bool:
    lookback = getattr(pb.policy, "lookback_positions", None)
    pos_j = pb.segments[j].position
    for k in pb.bps:
        if k >= j and (lookback is None or pb.segments[k].position - pos_j <= lookback):
            return True
    return False


def _b_writes(pb: Prepared, read: int) -> tuple[int, int]:
    """(write, uncached) of B given its read, Anthropic rules."""
    minimum = int(getattr(pb.policy, "min_cacheable_tokens", 0) or 0)
    written = [pb.end(k) for k in pb.bps if pb.end(k) >= minimum]
    top = max(written, default=0)
    write = max(0, top - read)
    return write, max(0, pb.total - max(read, top))


def _predict_anthropic(pa: Prepared, pb: Prepared, cut: int, gap: float | None,
                       use_bps: bool = True) -> _Prediction:
    best, best_j = 0, None
    for j in sorted(_entries(pa, min(cut, len(pb.segments)), gap), reverse=True):
        if not use_bps or _reaches(pb, j):
            best, best_j = pb.end(j), j
            break
    write, uncached = _b_writes(pb, best)
    return _Prediction(best, best_j, write, uncached)


def openai_cacheable_tokens(tokens: int, policy: Any) -> int:
    """Tokens of a ``tokens``-long OpenAI prompt that implicit caching can store or read: 0
    under the model's minimum (``policy.min_cacheable_tokens``, 1,024), else the minimum plus
    whole steps of ``policy.cache_step_tokens`` (128). Source:
    https://developers.openai.com/api/docs/guides/prompt-caching (hosted-api-rules.md 2)."""
    return cache_grid_tokens(tokens, int(getattr(policy, "min_cacheable_tokens", 1024) or 1024),
                             int(getattr(policy, "cache_step_tokens", 128) or 1))


def _openai_ttl(p: Prepared) -> float:
    """Seconds after which ``p``'s entries are no longer guaranteed (GPT-5.6+: its TTL, a
    minimum lifetime) or certainly gone (before GPT-5.6: the catalog's certain idle bound,
    1 h in memory, 24 h with ``"24h"``; :func:`openai_idle`)."""
    ttls = tuple(getattr(p.policy, "ttls", ()) or ())
    if ttls:
        return max(_ttl_seconds(t) for t in ttls)
    return _idle(p).max_s


def _idle(p: Prepared) -> IdleBounds:
    """The idle lifetime of ``p``'s automatic entries (OpenAI before GPT-5.6)."""
    return openai_idle(p.policy, p.view.params.get("prompt_cache_retention"))


def _openai_explicit_only(p: Prepared) -> bool:
    """``prompt_cache_options.mode == "explicit"`` (GPT-5.6+): no implicit breakpoint.
    Source: https://github.com/openai/openai-python (``prompt_cache_options``)."""
    opts = p.view.params.get("prompt_cache_options")
    return isinstance(opts, Mapping) and opts.get("mode") == "explicit"


def explicit_breakpoints(p: Prepared) -> bool:
    """Whether ``p``'s model caches at breakpoints (OpenAI GPT-5.6+, catalog policy
    ``explicit_breakpoints``): its entries are the breakpoint prefixes, not rounded to the
    128-token grid. Source: hosted-api-rules.md 2.3 ("The boundary is **not** rounded to a
    128-token block"; https://github.com/openai/openai-python, ``prompt_cache_options``)."""
    return p.family == "openai" and bool(getattr(p.policy, "explicit_breakpoints", False))


def _usage_of(obj: Any, p: Prepared) -> Usage | None:
    """``obj`` (a usage object, response or :class:`Usage`) as the :class:`Usage` of request
    ``p``: on a model with a write category (GPT-5.6+) a write count the usage does not carry
    is unknown (None), not 0 (hosted-api-rules.md 2.4: ``cache_write_tokens`` is optional)."""
    if obj is None:
        return None
    if isinstance(obj, Usage):
        return writes_known(obj, explicit_breakpoints(p))
    return read_usage(obj, p.family, write_category=p.family == "openai"
                      and explicit_breakpoints(p))


def cache_reported(p: Prepared) -> bool:
    """Whether the usage of ``p``'s model reports what it wrote, so that A's read + write is
    A's largest entry (Anthropic; OpenAI GPT-5.6+ ``cache_write_tokens``)."""
    return p.family == "anthropic" or explicit_breakpoints(p)


def _cache_mode(p: Prepared) -> str:
    """GPT-5.6+ ``prompt_cache_options.mode`` (``"implicit"`` when not set)."""
    opts = p.view.params.get("prompt_cache_options")
    mode = opts.get("mode") if isinstance(opts, Mapping) else None
    return mode if isinstance(mode, str) else "implicit"


def _reach_cause(pa: Prepared, pb: Prepared, alive: list[int], p: _Prediction) -> _RawCause:
    """GPT-5.6+: A wrote an entry B's prefix still holds, but none of B's breakpoints (its
    implicit one, its explicit ones) lies at or after it, so B reads a shorter entry (reads
    look back from B's breakpoints; hosted-api-rules.md 2.3). ``cache_mode_changed`` when
    ``prompt_cache_options.mode`` differs (``"explicit"`` drops the implicit breakpoint),
    else ``breakpoint_moved``. The detail says whether B rewrites the tokens it does not
    read or only sends them uncached (``"not read"``)."""
    best = max(alive, key=pb.end)
    minimum = int(getattr(pb.policy, "min_cacheable_tokens", 1024) or 0)
    top_b = max((pb.end(k) for k in openai_written(pb) if pb.end(k) >= minimum), default=0)
    rewritten = top_b >= pb.end(best)
    reach = max([*openai_written(pb), *pb.bps], default=-1)
    detail: dict[str, Any] = {
        "cached_entry": pb.segs[best].path, "cached_tokens": pb.end(best),
        "read_up_to": pb.segs[p.read_index].path if p.read_index is not None else None,
        "b_last_breakpoint": pb.segs[reach].path if reach >= 0 else None,
        "lost_tokens_are": "rewritten" if rewritten else "not read",
        "subtype": "no breakpoint at or after the cached entry"}
    after = _after(pb, p.read_index)
    what = ("B writes them again" if rewritten else
            "they are not read, and B writes no entry over them: they are billed as "
            "uncached input (not rewritten)")
    note = (f"A's entry up to {pb.segs[best].path} is still in B's prefix, but B's last "
            f"breakpoint is {detail['b_last_breakpoint'] or 'none'}, before it: B reads "
            f"only up to {detail['read_up_to'] or 'nothing'}, so the tokens from there to "
            f"the end of A's entry are lost: {what}")
    mode_a, mode_b = _cache_mode(pa), _cache_mode(pb)
    if mode_a != mode_b:
        detail.update({"from": mode_a, "to": mode_b})
        return _RawCause("cache_mode_changed", after, 5, _tier_at(pb, after),
                         "prompt_cache_options.mode", detail, note)
    return _RawCause("breakpoint_moved", after, 5, _tier_at(pb, after), None, detail, note)


def openai_written(p: Prepared) -> list[int]:
    """GPT-5.6+: indices (into ``p.segs``) of the breakpoints that write an entry.

    ``prompt_cache_options.mode`` ``"implicit"`` (the default): the implicit breakpoint on the
    newest message (the last segment of the messages tier; the last segment when there is
    none) plus the latest ``max_breakpoints - 1`` (3) explicit ``prompt_cache_breakpoint`` s;
    ``"explicit"``: the latest ``max_breakpoints`` (4) explicit ones (none: nothing is
    cached). As the local backend (``promptcache.local.accounting.openai_breakpoints``) and
    the planner model them. The minimum is not applied here. Source: hosted-api-rules.md 2.3.
    """
    if not p.segs:
        return []
    limit = int(getattr(p.policy, "max_breakpoints", 4) or 4)
    explicit = sorted(set(p.bps))
    if _openai_explicit_only(p):
        return explicit[-limit:]
    msgs = [s.index for s in p.segs if s.tier == "messages"]
    implicit = msgs[-1] if msgs else len(p.segs) - 1
    return sorted(set(explicit[-(limit - 1):] if limit > 1 else []) | {implicit})


def _openai_entries(pa: Prepared, upto: int, gap: float | None) -> list[int]:
    """GPT-5.6+: A's written breakpoints that lie before ``upto``, reach the minimum and are
    alive after ``gap`` seconds (None: not checked)."""
    minimum = int(getattr(pa.policy, "min_cacheable_tokens", 1024) or 0)
    floor = _openai_ttl(pa)
    # a breakpoint's own ttl (e.g. "12h") may outlive the request's default
    return [j for j in openai_written(pa) if j < upto and pa.end(j) >= minimum
            and (gap is None or gap <= max(floor, _bp_seconds(pa, j)))]


def _bp_seconds(p: Prepared, j: int) -> float:
    ttl = p.bp_ttl.get(j)
    return _TTL_SECONDS.get(ttl, 0.0) if ttl is not None else 0.0


def _predict_openai_bp(pa: Prepared, pb: Prepared, cut: int, gap: float | None
                       ) -> _Prediction:
    """GPT-5.6+ prediction in *estimated* tokens (scaled by the caller, as on Anthropic).

    A wrote an entry at each breakpoint of :func:`openai_written` whose prefix reaches the
    minimum. B reads the longest of them that lies before the cut (its prefix is identical)
    and at or before one of B's breakpoints (reads look back over the latest 80 breakpoints
    with no content-block lookback limit), not rounded; B writes from there to its last
    written breakpoint. Source: hosted-api-rules.md 2.3."""
    reach = max([*openai_written(pb), *pb.bps], default=-1)
    best, best_j = 0, None
    for j in sorted(_openai_entries(pa, min(cut, len(pb.segs)), gap), reverse=True):
        if j <= reach:
            best, best_j = pb.end(j), j
            break
    minimum = int(getattr(pb.policy, "min_cacheable_tokens", 1024) or 0)
    top = max((pb.end(k) for k in openai_written(pb) if pb.end(k) >= minimum), default=0)
    write = max(0, top - best)
    return _Prediction(best, best_j, write, max(0, pb.total - max(best, top)))


def _predict_openai(pa: Prepared, pb: Prepared, identical: int, cut: int,
                    gap: float | None, scale: float = 1.0) -> _Prediction:
    """OpenAI prediction in *reported* tokens: estimated counts are scaled by ``scale``
    (A's reported / estimated prompt tokens) **before** the 128-token grid is applied, so an
    implicit read is always ``0`` or ``min_cacheable_tokens + n * cache_step_tokens``."""
    total_b = round(pb.total * scale)
    if gap is not None and gap > _openai_ttl(pa):
        read = 0
    else:
        common = round(min(identical, pa.total) * scale)
        # prompt_cache_options.mode == "explicit": only explicit breakpoints are written
        read = 0 if _openai_explicit_only(pa) else openai_cacheable_tokens(common, pb.policy)
        for j in pa.bps:  # explicit breakpoints (GPT-5.6+): boundaries are not rounded
            end_j = round(pa.end(j) * scale)
            if j < cut and end_j <= common and end_j >= int(
                    getattr(pb.policy, "min_cacheable_tokens", 1024) or 1024):
                read = max(read, end_j)
    writes_billed = bool(getattr(pb.policy, "write_multipliers", None))
    if not writes_billed:
        write = 0
    elif _openai_explicit_only(pb):
        write = round(max((pb.end(k) for k in pb.bps), default=0) * scale)
        write = max(0, write - read)
    else:
        write = max(0, openai_cacheable_tokens(total_b, pb.policy) - read)
    idx = None
    if read:
        idx = next((s.index for s in pb.segments if round(s.end_token * scale) >= read), None)
    return _Prediction(read, idx, write, max(0, total_b - read - write))


# ---------------------------------------------------------------------------- compare
def compare(pa: Prepared, pb: Prepared, *, gap: float | None = None,
            usage_a: Any = None, usage_b: Any = None,
            diagnostics_b: Any = None, prices: Any = "catalog",
            redact: bool = False, same_workspace: bool | None = None,
            with_checks: bool = True) -> DiffResult:
    """Explain why ``pb`` cannot reuse what ``pa`` left in the cache (see the module doc).

    Args:
        pa, pb: prepared requests (:func:`prepare`), same provider family.
        gap: seconds from A's start to B's start (None: TTL not checked).
        usage_a: A's reported usage (a usage object, response, ``UsageRecord`` or parsed
            usage; calibrates estimated token counts).
        usage_b: B's reported usage (compared with the prediction).
        diagnostics_b: B's response (or its diagnostics object): the provider's diagnosis.
        prices: ``"catalog"`` (the catalog's prices for B's model), a USD-per-MTok mapping /
            object, or None (no costs).
        redact: excerpts as hashes only.
        same_workspace: whether A and B were sent with the same API key / workspace (caches
            are per workspace); None when unknown.
        with_checks: build :attr:`DiffResult.checks` (``explain`` skips them for speed).

    A Responses ``pb`` that still names a ``previous_response_id`` gives verdict
    ``cannot_tell`` (:func:`cannot_tell`): its prompt starts with a stored conversation that
    ``pb`` does not hold. Resolve the chain first (:func:`chained_body`), as :func:`diff`
    and ``explain`` do. A Responses ``pb`` that names a ``conversation``
    (:func:`conversation_id`) gives ``cannot_tell`` with cause ``conversation_chained``.

    Raises:
        InvalidRequestError: the two requests are of different provider families.
    """
    if pa.family != pb.family:
        raise InvalidRequestError("", f"cannot compare a {pa.family} request with a "
                                      f"{pb.family} request")
    if chained_id(pb) is not None:  # B's prompt starts with a conversation we do not see
        return cannot_tell(pa, pb, usage_b=usage_b, reason=(
            f"B continues the stored response {chained_id(pb)!r} (previous_response_id): "
            "the server prepends that conversation to B's input, and it is not in the "
            "bodies, so B's prefix cannot be compared with A's"))
    conv = conversation_id(pb.payload, pb.view.provider)
    if conv is not None:
        return cannot_tell(pa, pb, usage_b=usage_b, reason=_conversation_reason(conv),
                           cause="conversation_chained")
    usage_a = _usage_of(usage_a, pa)
    usage_b = _usage_of(usage_b, pb)
    if diagnostics_b is not None and not isinstance(diagnostics_b, RawDiagnostics):
        diagnostics_b = parse_diagnostics(diagnostics_b)
    if isinstance(prices, str) and prices == "catalog":
        prices = read_prices(pb.model)
    elif prices is not None and not isinstance(prices, Prices):
        prices = read_prices(pb.model, prices)
    n_a, n_b = len(pa.keys), len(pb.keys)
    n = min(n_a, n_b)
    first = next((k for k in range(n) if pa.keys[k] != pb.keys[k]), n)
    raw: list[_RawCause] = []
    notes: list[str] = []
    if pa.model and pb.model and pa.model != pb.model:
        raw.append(_RawCause("model_changed", 0, 0, "tools", "model",
                             {"from": pa.model, "to": pb.model}))
    raw.extend(_param_causes(pa, pb))
    divergence: Divergence | None = None
    if first < n_a:
        content, divergence = _classify(pa, pb, first, redact=redact)
        raw.extend(content)
    cut = min((c.cut for c in raw), default=n_b)
    cut = min(cut, first)

    # identical prefix (tokens of B before the first invalidation)
    if divergence is not None and first <= cut and first < n_b:
        identical = divergence.token_offset if pb.family == "openai" else pb.start(first)
    else:
        identical = pb.start(cut)

    policy = pb.policy
    predicted: PredictedUsage | None = None
    ideal: int | None = None
    pred_read: int | None = None
    scale = 1.0
    top_a = 0  # Anthropic: A's largest written entry (estimated tokens)
    # B sent no later than A: A's entries did not exist yet when B started (an entry is
    # readable once the response writing it has begun, hosted-api-rules.md 1.9), so none is
    # alive for B: predicted as an infinite gap, and the cause is sent_before_a, not the TTL
    concurrent = gap is not None and gap <= 0
    g = math.inf if concurrent else gap
    lapse = "sent_before_a" if concurrent else "ttl_expired"
    if policy is not None and pa.policy is not None:
        scale = calibration(pa, usage_a)
        if pb.family == "anthropic":
            p = _predict_anthropic(pa, pb, cut, g)
            p_nottl = _predict_anthropic(pa, pb, cut, None)
            alive = _entries(pa, min(cut, n_b), g)
            content_best = max((pb.end(j) for j in alive), default=0)
            all_entries = _entries(pa, n_a, None)
            top_a = max((pa.end(j) for j in all_entries), default=0)
            ideal = min(top_a, pb.total)
            if not all_entries and pa.bps:
                raw.append(_RawCause("below_minimum", 0, 4, None, None, {
                    "minimum_tokens": int(getattr(pa.policy, "min_cacheable_tokens", 0)),
                    "largest_breakpoint_prefix_tokens": max(pa.end(j) for j in pa.bps)}))
            if p_nottl.read > p.read:
                raw.append(_RawCause(lapse, _after(pb, p.read_index), 4,
                                     _tier_at(pb, _after(pb, p.read_index)), None,
                                     {"gap_seconds": gap} if concurrent else
                                     {"gap_seconds": gap, "ttl": _ttls_lost(pa, gap)}))
            elif content_best > p.read:
                raw.append(_RawCause("breakpoint_moved", _after(pb, p.read_index), 5,
                                     _tier_at(pb, _after(pb, p.read_index)), None,
                                     _bp_detail(pa, pb, alive, p)))
            if not pa.bps and not pb.bps:
                notes.append("neither request carries a cache breakpoint: nothing is cached")
        elif explicit_breakpoints(pa) and explicit_breakpoints(pb):
            # GPT-5.6+: entries at the breakpoints, not on the 128-token grid. The TTL is a
            # minimum lifetime (hosted-api-rules.md 2.3): a longer gap cuts nothing (below)
            p = _predict_openai_bp(pa, pb, cut, math.inf if concurrent else None)
            if concurrent:
                p_any = _predict_openai_bp(pa, pb, cut, None)
                if p_any.read > p.read:
                    raw.append(_RawCause(lapse, 0, 4, "tools", None, {"gap_seconds": gap}))
            minimum = int(getattr(pa.policy, "min_cacheable_tokens", 1024) or 0)
            top_a = max((pa.end(j) for j in _openai_entries(pa, n_a, None)), default=0)
            ideal = min(top_a, pb.total)
            if _openai_explicit_only(pa) and not pa.bps:
                notes.append("A sends prompt_cache_options.mode 'explicit' with no "
                             "prompt_cache_breakpoint: caching is off, A wrote nothing")
            elif not top_a:
                raw.append(_RawCause("below_minimum", 0, 4, None, None, {
                    "minimum_tokens": minimum,
                    "largest_breakpoint_prefix_tokens": max(
                        (pa.end(j) for j in openai_written(pa)), default=0)}))
            # the read entry's lifetime: its breakpoint's own ttl where longer ("12h")
            ttl_read = max(_openai_ttl(pa), 0.0 if p.read_index is None
                           else _bp_seconds(pa, p.read_index))
            if gap is not None and not concurrent and gap > ttl_read and p.read:
                raw.append(_ttl_warning(pb, gap, ttl_read))
            alive = _openai_entries(pa, min(cut, n_b), None)
            if max((pb.end(j) for j in alive), default=0) > p.read:
                raw.append(_reach_cause(pa, pb, alive, p))
        else:  # scaled before the 128-token grid: predictions stay on the grid
            p = _predict_openai(pa, pb, identical, cut, g, scale)
            p_nottl = _predict_openai(pa, pb, identical, cut, None, scale)
            ideal = min(openai_cacheable_tokens(round(pa.total * scale), pa.policy),
                        round(pb.total * scale))
            ideal = openai_cacheable_tokens(ideal, pb.policy)
            if pa.total < int(getattr(pa.policy, "min_cacheable_tokens", 1024) or 1024):
                raw.append(_RawCause("below_minimum", 0, 4, None, None, {
                    "minimum_tokens": int(getattr(pa.policy, "min_cacheable_tokens", 1024)),
                    "prompt_tokens": pa.total}))
            idle = _idle(pa)
            if p_nottl.read > p.read:
                raw.append(_RawCause(lapse, 0, 4, "tools", None, {"gap_seconds": gap} if
                                     concurrent else {"gap_seconds": gap,
                                                      "ttl_seconds": idle.max_s,
                                                      "ttl_is": "certain idle bound",
                                                      "retention": idle.retention},
                                     "" if concurrent else
                                     f"the gap ({gap:,.0f} s) is past "
                                     f"{_minutes(idle.max_s)} idle, after which OpenAI "
                                     "always removes "
                                     + ("in-memory entries" if idle.retention == "in_memory"
                                        else "24h-retention entries"
                                        if idle.retention == "24h" else
                                        "the entries under either retention (no "
                                        "prompt_cache_retention sent: the default depends "
                                        "on the organisation)")))
            elif (gap is not None and not concurrent and idle.usual_s is not None
                  and gap > idle.usual_s and p.read):
                raw.append(_idle_warning(pb, gap, idle))
        # estimated-token predictions (Anthropic, GPT-5.6+) are scaled here; the others are
        # already in reported tokens, on the grid
        estimated = pb.family == "anthropic" or (explicit_breakpoints(pa)
                                                 and explicit_breakpoints(pb))
        tail_scale, tail = (_tail_correction(pa, usage_a, scale) if estimated
                            else (scale, 0.0))
        if scale != 1.0 or tail_scale != scale or round(tail):
            notes.append(_calibration_note(pa, usage_a, scale, tail_scale, tail))
        if estimated:
            pred_read = round(p.read * scale)
            pred_write = round((p.read + p.write) * scale) - pred_read
            pred_plain = max(0, round(p.uncached * tail_scale + tail))
            ideal = round(ideal * scale)
        else:  # already in reported tokens, on the grid
            pred_read, pred_write, pred_plain = p.read, p.write, p.uncached
        cap = _written_by_a(pa, usage_a)
        if cap is not None:  # B cannot read more than A actually left in the cache
            if estimated and top_a and p.read == top_a:
                # B reads A's top entry: its size is what A reported, not our estimate
                delta = cap - pred_read
                if pred_write:
                    pred_write = max(0, pred_write - delta)
                else:
                    pred_plain = max(0, pred_plain - delta)
                pred_read = cap
            if estimated and top_a and top_a <= pb.total:
                ideal = cap
            if pred_read > cap:
                if pred_write:
                    pred_write += pred_read - cap
                else:
                    pred_plain += pred_read - cap
                pred_read = cap
            ideal = min(ideal, cap)
        # a warning-level cause (routing key, GPT-5.6 gap over the minimum lifetime) cuts
        # nothing: the predicted read is what B can read at best, not what it will read
        bound = bool(pred_read) and any(is_warning(c) for c in raw)
        predicted = PredictedUsage.model_construct(cache_read=pred_read,
                                                   cache_write=pred_write,
                                                   uncached_input=pred_plain,
                                                   read_upper_bound=bound)
        if bound:
            notes.append(f"the predicted read ({pred_read:,} tokens) is an upper bound: "
                         + " and ".join(sorted({_warning_why(c) for c in raw
                                                if is_warning(c)}))
                         + " may make B miss it")
    else:
        notes.append(_no_policy_note(pa, pb))

    raw.sort(key=lambda c: (c.cut, c.rank))
    causes = [_make_cause(c) for c in raw]

    observed = None
    if usage_b is not None:
        observed = ObservedUsage.model_construct(cache_read=usage_b.cache_read,
                                                 cache_write=usage_b.cache_write,
                                                 uncached_input=usage_b.uncached_input)

    # lost tokens and verdict
    lost: int | None = None
    verdict = "no_miss"
    classification: str | None = None
    read_seen = usage_b.cache_read if usage_b is not None else None
    if ideal is not None and pred_read is not None:
        basis = read_seen if read_seen is not None else pred_read
        lost = max(0, ideal - basis)
        predicted_loss = max(0, ideal - pred_read)
        tol = read_tolerance(ideal)
        # a read short of the prediction with nothing to explain it: on automatic caching
        # (whole 128-token steps) the estimate may put a step boundary one step off, so one
        # step short is no unexplained miss (review 20); an explained loss keeps ``tol``
        short_tol = tol
        if pb.family == "openai" and not explicit_breakpoints(pb):
            short_tol = max(tol, int(getattr(pb.policy, "cache_step_tokens", 0) or 0))
        shortfall = (pred_read - read_seen) if read_seen is not None else 0
        observed_hit = read_seen is not None and lost <= tol
        if read_seen is not None and pred_read + tol < read_seen:
            notes.append(f"observed cache read ({read_seen}) exceeds the prediction "
                         f"({pred_read}): a documented invalidation rule may not apply here")
        # on automatic caching the calibrated prediction may put the divergence's step
        # boundary one step late (A's extra reported tokens are spread over the whole prompt,
        # though most are framing after it): a read one step under a prediction that shows no
        # loss, where a change inside A's cached prefix explains it, is that change's miss
        # (trial 28: instructions edited at their end, 128 tokens lost, reported as a hit)
        step_late = (short_tol > tol and lost > tol and 0 < shortfall <= short_tol
                     and any(c.code not in NO_CHANGE_CAUSES and not is_warning(c)
                             for c in causes))
        if causes and not observed_hit and (
                predicted_loss > tol or step_late
                or any(c.code == "below_minimum" for c in causes)):
            verdict = "miss_explained"
            classification = "timing" if causes[0].code == "ttl_expired" else "client_side"
            if shortfall > tol:
                notes.append(f"observed cache read is {shortfall} tokens below the prediction "
                             "even after these causes")
        elif shortfall > tol and any(is_warning(c) for c in causes):
            # the read fell short and B changed its routing key, or came after the minimum
            # lifetime (GPT-5.6+): the likely reason
            verdict = "miss_explained"
            causes.sort(key=lambda c: not is_warning(c))
            classification = "timing" if causes[0].code == "ttl_expired" else "client_side"
        elif shortfall > short_tol:
            verdict = "unexplained_miss"
            classification = "provider_side"
    else:
        if read_seen is not None:
            notes.append("observed usage given, but no prediction to compare it with")
        if causes:  # no numbers without a policy, but a change in the prefix is still a miss
            verdict = "miss_explained"
            classification = "client_side"

    cutting = [c for c in raw if not is_warning(c)]
    if verdict == "unexplained_miss" or not causes or (
            not cutting and verdict == "no_miss"):
        # warning-level causes only (a routing key change): B still reads; they stay secondary
        causes.insert(0, _make_cause(_no_change_cause(pa, pb, first, bool(cutting), scale,
                                                      missed=verdict != "no_miss")))
    primary = causes[0].code
    if verdict == "no_miss" and primary not in NO_CHANGE_CAUSES and not is_warning(causes[0]) \
            and lost is not None and ideal is not None:
        # a change that invalidates a tier holding (almost) nothing of A's cache: within the
        # estimate tolerance, so no miss; say so, so that "no miss" and the cut agree
        notes.insert(0, f"no miss: {primary} invalidates from the "
                        f"{causes[0].tier or 'changed'} tier on, but only "
                        f"{lost:,} token{'s' if lost != 1 else ''} of what A cached "
                        f"{'lie' if lost != 1 else 'lies'} there, "
                        f"within the estimate tolerance ({read_tolerance(ideal):,} tokens): a "
                        "negligible loss, not a miss")

    # invalidated tiers: from the earliest cut on
    cuts = [c.segment_index for c in causes
            if c.code not in NO_CHANGE_CAUSES and c.segment_index is not None
            and c.segment_index < max(n_b, 1)]
    invalidated: list[str] = []
    if cuts and n_b:
        earliest = min(cuts)
        tiers_at = [c.tier for c in causes if c.segment_index == earliest and c.tier]
        first_tier = min(tiers_at, key=lambda t: _TIER_RANK.get(t, 9)) if tiers_at \
            else pb.segments[min(earliest, n_b - 1)].tier
        invalidated = [t for t in TIERS if _TIER_RANK[t] >= _TIER_RANK[first_tier]]
    reusable = ("all" if not invalidated else
                "+".join(t for t in TIERS if _TIER_RANK[t] < _TIER_RANK[invalidated[0]])
                or "none")

    usd, base = miss_costs(pb, lost, predicted, usage_b, prices)
    checks: list[Check] = []
    if with_checks:
        checks = _checks(pa, pb, first, gap, ideal)
        checks.insert(3, Check.model_construct(
            name="same workspace", passed=same_workspace,
            detail="" if same_workspace is not None else "not given"))
        if pb.family == "openai" and not getattr(pb.policy, "write_multipliers", None):
            checks.append(Check.model_construct(
                name="whole-prefix rewrite", passed=None,
                detail="OpenAI reports no cache writes for this model"))
        elif usage_a is not None and usage_b is not None and usage_b.cache_read is not None \
                and usage_b.cache_write is not None and usage_a.cache_read is not None:
            before = usage_a.cache_read + (usage_a.cache_write or 0)
            rewrite = usage_b.cache_read == 0 and before > 0 \
                and usage_b.cache_write >= 0.95 * before
            checks.append(Check.model_construct(
                name="whole-prefix rewrite", passed=rewrite,
                detail=f"B read {usage_b.cache_read}, wrote {usage_b.cache_write}; "
                       f"A read + wrote {before}"))
    serial = {"json_key_order", "whitespace_only"}
    semantic_equal = bool(raw) and all(
        c.code in serial or (c.code == "tools_reordered" and c.detail.get("same_set"))
        for c in raw if c.rank >= 2 and c.code not in ("ttl_expired", "breakpoint_moved",
                                                        "below_minimum")) \
        and not any(c.rank < 2 for c in raw)
    diag = _diagnostics(diagnostics_b, primary, causes, divergence, verdict)
    return DiffResult.model_construct(
        provider=pb.view.provider, model=pb.model, verdict=verdict,  # type: ignore[arg-type]
        cause=primary, causes=causes, divergence=divergence, invalidated_levels=invalidated,
        reusable_prefix=reusable, semantic_equal=semantic_equal,
        identical_prefix_tokens=round(identical * scale),
        ideal_cache_read=ideal, predicted=predicted, lost_tokens=lost, miss_cost_usd=usd,
        extra_cost_base_tokens=base, observed=observed, classification=classification,
        checks=checks, diagnostics=diag, token_counts_exact=pb.view.counter_exact,
        notes=notes + [c.note for c in causes if c.note])


def _no_change_cause(pa: Prepared, pb: Prepared, first: int, changed: bool,
                     scale: float, *, missed: bool = True) -> _RawCause:
    """The primary cause when nothing in the payload explains a miss (or there is none).

    ``append_only``: B is A plus new segments (the healthy next turn). ``no_difference``:
    the cached contents are equal; when the bodies still differ (a marker's TTL, a request
    setting no provider documents as cached content), the detail names where, and the title
    does not claim identical payloads. ``not causal``: changes exist but do not explain the
    missed reads. ``missed=False`` (verdict ``no_miss``): the titles speak of no miss.
    """
    n_a, n_b = len(pa.keys), len(pb.keys)
    if first >= n_a and not changed and n_b > n_a:
        return _RawCause("append_only", n_b, 9, None, None, {
            "payload_difference": "append_only", "appended_from": pb.segments[n_a].path,
            "appended_tokens": round((pb.total - pb.start(n_a)) * scale)})
    if changed or first < n_a:
        return _RawCause("no_difference", n_b, 9, None, None,
                         {"payload_difference": "not causal"},
                         title="no change in the payload explains the missed reads: the "
                               "miss is not explained by content" if missed else
                               "no change in the payload invalidates what A cached")
    if _dumps(dict(pa.payload)) == _dumps(dict(pb.payload)):
        return _RawCause("no_difference", n_b, 9, None, None, {"payload_difference": "none"},
                         title=None if missed else
                         "identical payloads: B can read everything A cached")
    differs = _payload_differences(pa.payload, pb.payload)
    routing = [d for d in differs if d not in ("prompt_cache_key",)]
    if not routing:
        return _RawCause("no_difference", n_b, 9, None, None,
                         {"payload_difference": "prompt_cache_key only",
                          "differs_at": differs},
                         title="same cached content; only prompt_cache_key (a routing hint) "
                               "differs")
    return _RawCause("no_difference", n_b, 9, None, None,
                     {"payload_difference": "outside the cached content",
                      "differs_at": differs},
                     _outside_note(pb, differs),
                     title="same cached content; the bodies differ only outside it: the "
                           "miss is not explained by content" if missed else
                           "same cached content; the bodies differ only outside it")


_DIFF_LIMIT = 8


def _payload_differences(a: Any, b: Any, path: str = "",
                         out: list[str] | None = None) -> list[str]:
    """Paths where two request bodies differ (at most ``_DIFF_LIMIT``), in B's order.

    A dict whose values are equal but whose keys come in another order gives
    ``"(key order of PATH)"`` (``"(key order of the top level)"`` at the root)."""
    out = [] if out is None else out
    if len(out) >= _DIFF_LIMIT:
        return out
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = list(b) + [k for k in a if k not in b]
        for k in keys:
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(sub)
            elif _dumps(a[k]) != _dumps(b[k]):
                _payload_differences(a[k], b[k], sub, out)
            if len(out) >= _DIFF_LIMIT:
                return out
        if list(a) != list(b) and dict(a) == dict(b):
            out.append(f"(key order of {path or 'the top level'})")
        return out
    if isinstance(a, list) and isinstance(b, list):
        for k in range(max(len(a), len(b))):
            sub = f"{path}[{k}]"
            if k >= len(a) or k >= len(b):
                out.append(sub)
            elif _dumps(a[k]) != _dumps(b[k]):
                _payload_differences(a[k], b[k], sub, out)
            if len(out) >= _DIFF_LIMIT:
                break
        return out
    out.append(path or "(the whole body)")
    return out


def _outside_note(pb: Prepared, differs: list[str]) -> str:
    """Why fields outside the cached content do not change it, as far as documented.

    Cache markers (``cache_control`` / ``prompt_cache_breakpoint``: their place and TTL) are
    not cached bytes. Other request settings: the reference names what is cached and
    which settings invalidate it (hosted-api-rules.md 1.7 for Anthropic, 2.1 and the
    diagnostics reasons for OpenAI); a setting in neither list is not part of the cached
    content as far as the providers document. Anthropic's TTL-ordering rule (1.5, [A3]):
    entries with a longer TTL come before entries with a shorter one in render order.
    """
    markers = [d for d in differs if any(m in d for m in _MARKERS)]
    others = [d for d in differs if d not in markers]
    parts: list[str] = []
    if others:
        where = ("OpenAI caches the messages, images, tool definitions and output schema, "
                 "and its cache diagnostics name no miss reason for it" if pb.family == "openai"
                 else "Anthropic's invalidation table names no rule for it")
        parts.append(f"{', '.join(others)}: not part of the cached content as far as the "
                     f"providers document ({where}); confirm with usage")
    if markers:
        parts.append(f"{', '.join(markers)}: a cache marker (its place or TTL) is not part "
                     "of the cached content")
        if pb.family == "anthropic":
            parts.append("TTL ordering (Anthropic): entries with a longer TTL must come "
                         "before entries with a shorter TTL in render order (a 1h entry "
                         "before any 5m entry)")
            broken = _ttl_order_broken(pb)
            if broken is not None:
                late, late_ttl, early, early_ttl = broken
                parts.append(f"B breaks the TTL-ordering rule: its {late_ttl} breakpoint at "
                             f"{late} comes after a {early_ttl} one at {early} (third-party "
                             "gateways report such a request as a 400)")
    return "; ".join(parts)


def _ttl_order_broken(p: Prepared) -> tuple[str, str, str, str] | None:
    """(path and TTL of a breakpoint, path and shorter TTL of an earlier one), or None."""
    shortest: tuple[float, str, str] | None = None
    for k in sorted(p.bps):
        name = str(p.bp_ttl.get(k) or "5m")
        ttl = _ttl_seconds(name)
        if shortest is not None and ttl > shortest[0]:
            return p.segments[k].path, name, shortest[1], shortest[2]
        if shortest is None or ttl < shortest[0]:
            shortest = (ttl, p.segments[k].path, name)
    return None


def _after(pb: Prepared, idx: int | None) -> int:
    return 0 if idx is None else min(idx + 1, max(len(pb.segments) - 1, 0))


def _tier_at(pb: Prepared, idx: int) -> str | None:
    return pb.segments[idx].tier if idx < len(pb.segments) else None


def _ttls_lost(pa: Prepared, gap: float | None) -> list[str]:
    return sorted({str(pa.bp_ttl.get(j) or "5m") for j in pa.bps
                   if gap is not None and gap > _ttl_seconds(pa.bp_ttl.get(j))})


def _bp_detail(pa: Prepared, pb: Prepared, alive: list[int], p: _Prediction) -> dict[str, Any]:
    best = max(alive, key=pb.end)
    later = [k for k in pb.bps if k >= best]
    detail: dict[str, Any] = {"cached_entry": pb.segments[best].path,
                              "cached_tokens": pb.end(best)}
    if not later:
        detail["subtype"] = "no breakpoint at or after the cached entry"
    else:
        k = min(later)
        detail["subtype"] = "lookback_exceeded"
        detail["nearest_breakpoint"] = pb.segments[k].path
        detail["positions_apart"] = pb.segments[k].position - pb.segments[best].position
        detail["lookback_positions"] = getattr(pb.policy, "lookback_positions", None)
    return detail


def _top_entry(pa: Prepared) -> int:
    """Anthropic and GPT-5.6+: estimated tokens up to A's last breakpoint that writes an
    entry (0: none)."""
    minimum = int(getattr(pa.policy, "min_cacheable_tokens", 0) or 0)
    written = openai_written(pa) if explicit_breakpoints(pa) else pa.bps
    return max((pa.end(k) for k in written if pa.end(k) >= minimum), default=0)


def calibration(pa: Prepared, usage_a: Usage | None) -> float:
    """Ratio reported / estimated tokens of request A (1.0 when unknown).

    Anthropic and OpenAI GPT-5.6+ (whose usage reports writes), when A's usage reports a cache
    read or write and A has a breakpoint that writes: the ratio of the cached prefix (A's reported read + write over our estimate of
    the tokens up to its last written breakpoint), the scale of every cached position. The
    uncached tail gets its own correction (:func:`_tail_correction`), so the tail's error is
    not spread over the cached prefix.
    Otherwise (OpenAI before GPT-5.6, or no cache numbers): A's reported total input over our
    estimate."""
    if usage_a is None:
        return 1.0
    if cache_reported(pa) and usage_a.cache_write is not None:
        cached = (usage_a.cache_read or 0) + (usage_a.cache_write or 0)
        top = _top_entry(pa) if cached else 0
        if top:
            return cached / top
    if usage_a.total_input and pa.total:
        return usage_a.total_input / pa.total
    return 1.0


def _calibration_note(pa: Prepared, usage_a: Usage | None, scale: float,
                      tail_scale: float, tail: float) -> str:
    """The note saying how estimated token counts were calibrated to A's usage."""
    if not cache_reported(pa) or usage_a is None or usage_a.cache_write is None \
            or not _top_entry(pa) or not (usage_a.cache_read or 0) + usage_a.cache_write:
        return f"token counts scaled by {scale:.4f} to match request A's reported usage"
    top = _top_entry(pa)
    cached = (usage_a.cache_read or 0) + (usage_a.cache_write or 0)
    note = (f"token counts scaled by {scale:.4f} to match request A's reported usage: its "
            f"cached prefix is {cached:,} tokens reported, {top:,} estimated")
    if usage_a.uncached_input is not None:
        how = (f"{round(tail):+,} tokens added to B's uncached input" if round(tail)
               else f"B's uncached tail scaled by {tail_scale:.4f}")
        note += (f"; its uncached tail {usage_a.uncached_input:,} reported, "
                 f"{pa.total - top:,} estimated ({how})")
    return note


#: Estimated tokens of A's uncached tail from which its reported / estimated ratio scales B's
#: tail; below it the difference is taken as a fixed framing the estimate does not see.
TAIL_RATIO_MIN_TOKENS = 256


def _tail_correction(pa: Prepared, usage_a: Usage | None, scale: float
                     ) -> tuple[float, float]:
    """(scale, offset) of B's uncached tail estimate from A's reported uncached input.

    A's tail (after its last written breakpoint) of at least :data:`TAIL_RATIO_MIN_TOKENS`
    estimated tokens: its reported / estimated ratio scales B's tail (the estimate's error is
    proportional to the text), no offset. A shorter tail: B's tail takes the prefix's scale
    plus what A's reported tail holds beyond its scaled estimate (a fixed framing), never
    less than minus that scaled estimate (so B's tail is not shrunk below zero by it).
    ``(scale, 0.0)`` unless :func:`calibration` calibrated A's cached prefix (Anthropic)."""
    if usage_a is None or not cache_reported(pa) or usage_a.uncached_input is None \
            or usage_a.cache_write is None:
        return scale, 0.0
    cached = (usage_a.cache_read or 0) + (usage_a.cache_write or 0)
    top = _top_entry(pa) if cached else 0
    if not top:
        return scale, 0.0
    est_tail = pa.total - top
    if est_tail >= TAIL_RATIO_MIN_TOKENS:
        return usage_a.uncached_input / est_tail, 0.0
    return scale, max(usage_a.uncached_input - est_tail * scale, -est_tail * scale)


def _written_by_a(pa: Prepared, usage_a: Usage | None) -> int | None:
    """Tokens A's reported usage shows in the cache after A (read + written), or None.

    Anthropic and OpenAI GPT-5.6+: their usage reports both the read and the write, so B can
    never read more than their sum. OpenAI before GPT-5.6 reports no write; its prediction is
    already bounded by A's reported prompt tokens (rounded down to the 128-token grid)."""
    if usage_a is None or not cache_reported(pa):
        return None
    if usage_a.cache_read is None or usage_a.cache_write is None:
        return None
    return usage_a.cache_read + usage_a.cache_write


def miss_costs(pb: Prepared, lost: int | None, predicted: PredictedUsage | None,
           usage_b: Usage | None, prices: Prices | None) -> tuple[float | None, float | None]:
    """What re-writing (or re-sending) ``lost`` tokens instead of reading them costs request
    ``pb``: ``(USD, base-input-token units)``; the USD is None when ``prices`` lack an input or
    cache-read rate, both None when ``lost`` or ``predicted`` is unknown. The lost tokens the
    request writes (its reported ``cache_write``, else the predicted one) are priced at the
    write rate of its last breakpoint's TTL, the rest at the plain input rate."""
    if lost is None or predicted is None:
        return None, None
    if lost == 0:
        return 0.0, 0.0
    written = usage_b.cache_write if usage_b is not None and usage_b.cache_write is not None \
        else predicted.cache_write
    lost_written = min(lost, written)
    lost_plain = lost - lost_written
    ttl = _last_ttl(pb)
    policy = pb.policy
    read_mult = float(getattr(policy, "read_multiplier", 0.0) or 0.0)
    writes = dict(getattr(policy, "write_multipliers", {}) or {})
    write_mult = float(writes.get(ttl or "", writes.get("5m", next(iter(writes.values()), 1.0)))
                       if writes else 1.0)
    base = lost_written * (write_mult - read_mult) + lost_plain * (1.0 - read_mult)
    usd: float | None = None
    if prices is not None:
        prices = prices.for_prompt(predicted.cache_read + predicted.cache_write
                                   + predicted.uncached_input)
    if prices is not None and prices.input is not None and prices.cache_read is not None:
        wr = prices.write_rate(ttl) if writes else prices.input
        wr = prices.input if wr is None else wr
        usd = (lost_written * (wr - prices.cache_read)
               + lost_plain * (prices.input - prices.cache_read)) / 1_000_000
        usd = round(usd, 10)
    return usd, round(base, 6)


def _last_ttl(pb: Prepared) -> str | None:
    if pb.family == "openai":
        ttls = tuple(getattr(pb.policy, "ttls", ()) or ())
        return ttls[0] if ttls else None
    return pb.bp_ttl.get(pb.bps[-1]) if pb.bps else None


def _checks(pa: Prepared, pb: Prepared, first: int, gap: float | None,
            ideal: int | None) -> list[Check]:
    identical_prefix = first >= len(pa.keys)
    extends = identical_prefix and len(pb.keys) > len(pa.keys)
    same_body = (identical_prefix and len(pa.keys) == len(pb.keys)
                 and _dumps(dict(pa.payload)) == _dumps(dict(pb.payload)))
    body_detail = "B extends A" if extends else ""
    if identical_prefix and not extends and not same_body:  # same content: name the field
        body_detail = "differs at " + ", ".join(_payload_differences(pa.payload, pb.payload))
    checks = [
        # B only appends to A: its body cannot be A's, and need not be (not a failure)
        Check.model_construct(name="byte-identical bodies", passed=None if extends else same_body,
                              detail=body_detail),
        Check.model_construct(name="B extends A's prefix unchanged", passed=identical_prefix),
        Check.model_construct(name="same model",
                              passed=(pa.model == pb.model) if pa.model and pb.model else None),
    ]
    if gap is None:
        checks.append(Check.model_construct(name="gap < TTL", passed=None,
                                            detail="no timestamps given"))
    else:
        idle = None
        if pa.family == "anthropic":
            ttl = max((_ttl_seconds(pa.bp_ttl.get(j)) for j in pa.bps), default=300.0)
        elif explicit_breakpoints(pa) or getattr(pa.policy, "ttls", None):
            ttl = max([_openai_ttl(pa), *(_bp_seconds(pa, j) for j in pa.bps)])
        else:
            idle = _idle(pa)
            ttl = idle.usual_s if idle.usual_s is not None else idle.max_s
        minimum = (" (a minimum lifetime: a read is still possible)"
                   if explicit_breakpoints(pa) and gap > ttl else "")
        passed: bool | None = 0 < gap <= ttl
        if idle is not None:
            minimum = (f" (in-memory entries are usually cleared after 5-10 min idle, not "
                       f"guaranteed; always removed after {idle.max_s:g} s"
                       if idle.usual_s is not None else
                       f" (24h retention: removed after {idle.max_s:g} s idle")
            if idle.default_unknown:
                minimum += "; no prompt_cache_retention sent: the default depends on the " \
                           "organisation, 24h for non-ZDR ones"
            minimum += ")"
            if ttl < gap <= idle.max_s:
                passed = None  # past the usual clearing, within the certain bound: uncertain
                minimum += ": a read is possible, not guaranteed"
        if gap <= 0:
            minimum = ": B was sent no later than A, before A's entries existed"
        checks.append(Check.model_construct(name="gap < TTL", passed=passed,
                            detail=f"gap {gap:g} s, TTL {ttl:g} s{minimum}"))
    checks.append(Check.model_construct(name="prefix above minimum",
                        passed=None if ideal is None else ideal > 0))
    return checks


def _diagnostics(raw: RawDiagnostics | None, primary: str, causes: list[Cause],
                 divergence: Divergence | None, verdict: str) -> DiagnosticsComparison | None:
    if raw is None:
        return None
    tier = causes[0].tier if causes else (divergence.tier if divergence else None)
    if divergence is not None and primary in ("json_key_order", "whitespace_only"):
        tier = divergence.tier
    if raw.provider == "anthropic":
        ours = anthropic_reason_for(primary, tier)
        source = ANTHROPIC_DIAGNOSTICS_URL
        if raw.reason in ("pending", "previous_message_not_found", "unavailable", "unknown"):
            agrees = None
        else:
            agrees = ours == raw.reason
    else:
        ours = openai_reason_for(primary, tier)
        source = OPENAI_DIAGNOSTICS_URL
        if raw.reason in ("comparison_response_not_found", "unavailable", "unknown"):
            agrees = None
        elif raw.reason == "cache_hit":
            ours = ours if verdict == "miss_explained" else "cache_hit"
            agrees = verdict != "miss_explained"
        elif raw.reason in ROUTING_CAUSES and any(c.code == raw.reason for c in causes):
            ours, agrees = raw.reason, True  # a warning-level cause of ours names it too
        elif raw.reason == "context_compacted":
            agrees = primary in ("message_removed", "message_rewritten")
        else:
            agrees = ours == raw.reason
    return DiagnosticsComparison.model_construct(provider=raw.provider, reason=raw.reason,
                                 missed_tokens=raw.missed_tokens,
                                 reusable_tokens=raw.reusable_tokens, ours=ours, agrees=agrees,
                                 source=source)


# ---------------------------------------------------------------------------- public
def diff(a: Mapping[str, Any], b: Mapping[str, Any], *, provider: str | None = None,
         model: str | None = None, timestamps: tuple[Any, Any] | None = None,
         usage_a: Any = None, usage_b: Any = None, diagnostics_b: Any = None,
         prices: Any = None, redact: bool = False,
         same_workspace: bool | None = None, response_a: Any = None) -> DiffResult:
    """Explain why request ``b`` misses (or would miss) what request ``a`` left in the cache.

    Args:
        a, b: request bodies as sent to the API (Anthropic Messages, OpenAI Chat Completions
            or Responses), the earlier one first.
        provider: ``"anthropic"``, ``"openai"``, ``"openai-chat"``, ``"openai-responses"``;
            detected from the payload when None.
        model: model id for the policy, prices and token counts (default: ``b["model"]``;
            for both requests, so a model change is only reported when both name models).
        timestamps: (start of A, start of B): seconds since the epoch or ISO-8601 strings;
            enables the TTL check.
        usage_a, usage_b: the providers' usage objects (or whole responses) for A and B:
            A's calibrates token estimates, B's is compared with the prediction.
        diagnostics_b: B's response (or its ``diagnostics`` / ``prompt_cache_diagnostics``):
            the provider's own diagnosis, reported beside ours.
        prices: USD per MTok override (mapping or object with ``input``, ``cache_read``,
            ``cache_write_5m``, ``cache_write_1h``, ``cache_write``); default: the catalog.
        redact: show hashes instead of text excerpts.
        same_workspace: whether both were sent with the same API key / workspace (caches are
            isolated per workspace); reported as a check, None when unknown.
        response_a: A's whole response (Responses API; default: ``usage_a`` when it is a
            whole response). Used when B chains on A with ``previous_response_id``.

    ``previous_response_id`` (Responses API): the server prepends the stored conversation
    (that response's input and output) to B's input, so B's prompt is not its body. When B
    names one: if A's response id is known and differs, the verdict is ``cannot_tell``
    (cause ``previous_response_chained``; no numbers, never "0 reads"). Otherwise B is taken
    to continue A (checked when A's response id is known, assumed
    when the bodies are all there is): B's prompt is A's input + A's output + B's input
    (:func:`chained_body`) and is compared as usual; a healthy chained turn has cause
    ``previous_response_chained`` instead of ``append_only``. Without A's output (no
    response given) it is left out and a note says B's predicted write and uncached input are
    lower bounds; the read is not affected (A's entries end before A's output). When A itself
    names a ``previous_response_id``, both prompts start with a conversation of unknown size:
    the structure is compared (causes found as usual) but no token numbers are predicted;
    A's usage gives the ideal read (read + write where the usage reports writes; before
    GPT-5.6, A's prompt on the 1,024 + 128 n grid) and B's usage the lost tokens. When A and B
    name the *same* ``previous_response_id`` (siblings: an edited and regenerated turn), B
    does not continue A: their own bodies are compared the same way, without numbers. In
    both cases a change is charged at most the tokens of A's prompt that follow it (the
    stored conversation before an edited input item stays readable: on the grid before
    GPT-5.6, up to A's last breakpoint before the change on GPT-5.6+); a read short of the
    rest is an ``unexplained_miss`` (provider side), as for the same bodies without the chain.

    ``conversation`` (Responses API): the server prepends the stored conversation's items to
    B's input, so a B that names one gives verdict ``cannot_tell`` with cause
    ``conversation_chained`` (model, tool and setting changes as secondary causes).

    Returns:
        A :class:`DiffResult` (tokens; USD; see its attribute docs).

    Raises:
        InvalidRequestError: a payload is malformed or not a mapping (a JSON string: parse it
            with ``json.loads`` first), or the two are of different providers.
        PromptCacheError: a usage object cannot be parsed.
        ValueError: a timestamp cannot be parsed.
    """
    from promptcache._times import gap_seconds, parse_timestamp

    for name, payload in (("a", a), ("b", b)):
        if not isinstance(payload, Mapping):
            hint = " (JSON text: parse it with json.loads first)" if isinstance(
                payload, str | bytes) else ""
            raise InvalidRequestError("", f"request {name} must be a JSON object (a mapping), "
                                          f"not {type(payload).__name__}{hint}")
    changed = stored_prompt_change(a, b, provider)
    if changed is not None:  # the template's text is not in the bodies
        pa, pb = _prepare_pair(a, b, provider, model)
        if pb.view.provider == "openai-responses":
            return cannot_tell(pa, pb, usage_b=_usage_of(usage_b, pb), reason=changed,
                               cause="stored_prompt_changed")
    conv = conversation_id(b, provider)
    if conv is not None:  # the server prepends the conversation's items: not in the bodies
        pa, pb = _prepare_pair(a, b, provider, model)
        if pb.view.provider == "openai-responses":
            return cannot_tell(pa, pb, usage_b=_usage_of(usage_b, pb),
                               reason=_conversation_reason(conv),
                               cause="conversation_chained")
    chain = _chain_of(b, provider)
    a_response = usage_a if response_a is None else response_a
    head_gap = None  # the gap, for a chain whose shared head the bodies do not show
    if chain is not None and timestamps is not None:
        head_gap = gap_seconds(parse_timestamp(timestamps[0]), parse_timestamp(timestamps[1]))
    chain_note: str | None = None
    partial = False
    raw_b = b
    if chain is not None:
        a_id = _response_id(a_response)
        if a.get("previous_response_id") == chain:  # siblings (edit and regenerate)
            return _diff_shared_head(a, b, chain, None, provider, model, usage_a, usage_b,
                                     diagnostics_b, redact, prices, checked=False,
                                     sibling=True, gap=head_gap)
        if a_id is not None and a_id != chain:
            why = (f"B continues the stored response {chain!r} (previous_response_id), "
                   f"not A (A's response id is {a_id!r}): its prefix is that response's "
                   "conversation, which the bodies do not show")
            pa, pb = _prepare_pair(a, b, provider, model)
            return cannot_tell(pa, pb, usage_b=_usage_of(usage_b, pb), reason=why)
        if isinstance(a.get("previous_response_id"), str) and a["previous_response_id"]:
            return _diff_shared_head(a, b, chain, response_output(a_response), provider,
                                     model, usage_a, usage_b, diagnostics_b, redact,
                                     prices, checked=a_id is not None, gap=head_gap)
        output = response_output(a_response)
        partial = output is None
        raw_b, b = b, chained_body(a, output or [], b)
        checked = "checked" if a_id is not None else "not checkable from the bodies: assumed"
        chain_note = (f"previous_response_id {chain!r}: B's prompt is A's input + A's output + "
                      f"B's input (the server prepends the stored conversation; "
                      f"instructions are not carried over); that it names A is {checked}; "
                      "input indices below count in that combined input")
        if partial:
            chain_note += ("; A's output is not given (pass A's response): it is left out, "
                           "so B's predicted write and uncached input are lower bounds (the "
                           "read is not affected: A's entries end before A's output)")
    try:
        pa, pb = _prepare_pair(a, b, provider, model)
    except InvalidRequestError as exc:
        if chain is None:
            raise
        # the bodies render (else this raises again), A's output items do not, as input
        pa, pb = _prepare_pair(a, raw_b, provider, model)
        return cannot_tell(pa, pb, usage_b=_usage_of(usage_b, pb), reason=(
            f"B continues A (previous_response_id {chain!r}), but A's output cannot be "
            f"read as input ({exc}): B's prompt cannot be rebuilt"))
    gap = None
    sent_b = None  # B's send time: the price row in force then (a relative time: today's)
    if timestamps is not None:
        sent_b = parse_timestamp(timestamps[1])
        gap = gap_seconds(parse_timestamp(timestamps[0]), sent_b)
    ua = _usage_of(usage_a, pa)
    ub = _usage_of(usage_b, pb)
    diag = parse_diagnostics(diagnostics_b) if diagnostics_b is not None else None
    if diag is None and isinstance(usage_b, Mapping):
        diag = parse_diagnostics(usage_b)
    price_table = read_prices(pb.model, prices, at=sent_b)
    result = compare(pa, pb, gap=gap, usage_a=ua, usage_b=ub, diagnostics_b=diag,
                     prices=price_table, redact=redact, same_workspace=same_workspace)
    alt = _alternative(pa, pb, result, provider, model, gap, ua, price_table)
    if alt is not None:
        result = result.model_copy(update={"recommended_alternative": alt})
    if chain is not None and chain_note is not None:
        result = mark_chained(result, chain, chain_note, partial=partial)
    template = _stored_prompt_id(b, provider)
    if template is not None and pb.view.provider == "openai-responses":
        result = result.model_copy(update={"notes": [*result.notes, (
            f"A and B name the same stored prompt template ({template}, same variables): "
            "the server expands it into the prompt, and its text is not in the bodies, so "
            "the token figures leave it out")]})
    return result


def _stored_prompt_id(body: Any, provider: str | None) -> str | None:
    """``"id, version v"`` of a Responses body's ``prompt`` (None: none or not Responses)."""
    if not isinstance(body, Mapping) or "messages" in body or \
            provider not in (None, "", "auto", "openai", "openai-responses"):
        return None
    value = body.get("prompt")
    if value is None:
        return None
    if isinstance(value, Mapping):
        pid = value.get("id")
        version = value.get("version")
        name = repr(pid) if isinstance(pid, str) else "<prompt>"
        return name + (f", version {version!r}" if version is not None else "")
    return repr(value)


def stored_prompt_change(a: Mapping[str, Any], b: Mapping[str, Any],
                         provider: str | None = None) -> str | None:
    """Why B's stored prompt template differs from A's, or None (the same, or neither names
    one, or not Responses bodies).

    A Responses ``prompt`` ("Reference to a prompt template and its variables",
    https://platform.openai.com/docs/api-reference/responses/create) is expanded by the server
    into the prompt: a different template id or version, or different variable values, change
    text the bodies do not show, at a place they do not show. :func:`diff` gives such a pair
    verdict ``cannot_tell`` with cause ``stored_prompt_changed``.

    Returns:
        One sentence naming what changed (``prompt.version``, ``prompt.variables.city``...).
    """
    ida, idb = _stored_prompt_id(a, provider), _stored_prompt_id(b, provider)
    if idb is None and ida is None:
        return None
    pa_, pb_ = a.get("prompt"), b.get("prompt")
    if _dumps(pa_) == _dumps(pb_):
        return None
    if ida is None or idb is None:
        which = "B" if ida is None else "A"
        return (f"only {which} names a stored prompt template ({ida or idb}): the server "
                f"expands it into {which}'s prompt, so the two prompts differ in text the "
                "bodies do not show; B's cache read cannot be told from them")
    differs = _payload_differences(pa_, pb_, "prompt", [])
    return (f"B's stored prompt template differs from A's ({', '.join(differs)}; A: {ida}, "
            f"B: {idb}): the server expands the template into the prompt, so the text changes "
            "at a place the bodies do not show; B's cache read cannot be told from them")


#: Causes that depend on token counts (the minimum, the TTL, breakpoint reach): not judged
#: when A's and B's prompts start with a stored conversation of unknown size.
_SIZE_CAUSES = frozenset({"below_minimum", "ttl_expired", "breakpoint_moved"})


def _shared_head_lapse(pa: Prepared, pb: Prepared, gap: float | None) -> _RawCause | None:
    """The TTL cause of a gap of ``gap`` seconds between A's start and B's, for OpenAI
    entries of any size (their lifetimes do not depend on where they end), or None: GPT-5.6+
    past the longest TTL A sent (a minimum lifetime: :func:`_ttl_warning`); before GPT-5.6
    past the certain idle bound (a cut) or the usual idle clearing (:func:`_idle_warning`).
    A gap of 0 or less (B sent with A) is not judged here: B may still read the stored head
    that earlier requests wrote."""
    if gap is None or gap <= 0 or pa.policy is None or pb.family != "openai":
        return None
    if explicit_breakpoints(pa):
        ttl = max([_openai_ttl(pa), *(_bp_seconds(pa, j) for j in pa.bps)])
        return _ttl_warning(pb, gap, ttl) if gap > ttl else None
    idle = _idle(pa)
    if gap > idle.max_s:
        return _RawCause(
            "ttl_expired", 0, 4, "tools", None,
            {"gap_seconds": gap, "ttl_seconds": idle.max_s, "ttl_is": "certain idle bound",
             "retention": idle.retention},
            f"the gap ({gap:,.0f} s) is past {_minutes(idle.max_s)} idle, after which OpenAI "
            "always removes these entries")
    if idle.usual_s is not None and gap > idle.usual_s:
        return _idle_warning(pb, gap, idle)
    return None


def _diff_shared_head(a: Mapping[str, Any], b: Mapping[str, Any], chain: str,
                      output: list[Any] | None, provider: str | None, model: str | None,
                      usage_a: Any, usage_b: Any, diagnostics_b: Any, redact: bool,
                      prices: Any, *, checked: bool, sibling: bool = False,
                      gap: float | None = None) -> DiffResult:
    """B chains on A, and A itself continues a stored response: both prompts start with the
    same conversation (A's), which the bodies do not show. ``sibling``: A and B name the
    same ``previous_response_id`` (edit and regenerate): both continue that response, B does
    not continue A, so their bodies are compared as they are, without the shared head.

    The structure is still known: B's prompt is A's prompt + A's output + B's input. The
    bodies are compared without that shared head, so the causes (a tool, instructions or
    setting change) are found; token numbers are not predicted (the head's size is unknown):
    no prediction, and no cause that depends on sizes (minimum, TTL, breakpoint reach). With
    A's usage (read + write: A's largest entry) the ideal read is known, and with B's the
    lost tokens (priced at B's reported write) and an unexplained shortfall.

    ``gap`` (seconds from A's start to B's): every entry A wrote or read lives from A's start,
    whatever its size, so a gap past their lifetime is a cause (:func:`_shared_head_lapse`):
    past OpenAI's certain idle bound a cut, past GPT-5.6+'s minimum lifetime or the usual idle
    clearing a warning that explains a read short of A's usage (new-user trial 26: a chained
    turn 40 min after the last one, on GPT-5.6, was an unexplained miss)."""
    a_eff = {k: v for k, v in a.items() if k != "previous_response_id"}
    b_eff = ({k: v for k, v in b.items() if k != "previous_response_id"} if sibling
             else chained_body(a_eff, output or [], b))
    try:
        pa, pb = _prepare_pair(a_eff, b_eff, provider, model)
    except InvalidRequestError as exc:
        pa, pb = _prepare_pair(a, b, provider, model)
        return cannot_tell(pa, pb, usage_b=_usage_of(usage_b, pb), reason=(
            f"B continues A (previous_response_id {chain!r}), but A's output cannot be "
            f"read as input ({exc}): B's prompt cannot be rebuilt"))
    ua = _usage_of(usage_a, pa)
    ub = _usage_of(usage_b, pb)
    res = compare(pa, pb, prices=None, redact=redact, with_checks=False)
    kept = [c for c in res.causes if c.code not in _SIZE_CAUSES]
    cutting = [c for c in kept if c.code not in NO_CHANGE_CAUSES
               and c.code not in ROUTING_CAUSES]
    ideal = _left_by_a(pa, ua)
    read_b = ub.cache_read if ub is not None else None
    lost = None
    verdict = "no_miss"
    classification = None
    explained = None
    raw_lapse = None if sibling else _shared_head_lapse(pa, pb, gap)
    lapse = _make_cause(raw_lapse) if raw_lapse is not None else None
    if lapse is not None and not cutting:
        # nothing in the bodies changed: the gap explains a read short of A's usage (a
        # certain expiry: with no usage of B, everything A left is lost)
        if ideal is not None and (read_b is None or ideal - read_b > read_tolerance(ideal)):
            if read_b is not None or not is_warning(lapse):
                verdict, classification = "miss_explained", "timing"
                lost = ideal - (read_b or 0)
        elif ideal is not None and read_b is not None:
            lost = 0
    elif cutting:
        verdict, classification = "miss_explained", "client_side"
        if ideal is not None:
            bound = _edit_bound(pa, pb, cutting, res.divergence, ua, ideal)
            explained = ideal if bound is None else min(ideal, bound)
            lost = explained if read_b is None else max(0, ideal - read_b)
            if lost > explained + read_tolerance(ideal):  # the head was readable: not the edit
                verdict, classification = "unexplained_miss", "provider_side"
    elif ideal is not None and read_b is not None:
        lost = max(0, ideal - read_b)
        if lost > read_tolerance(ideal):
            verdict, classification = "unexplained_miss", "provider_side"
        else:
            lost = 0
    usd = base = None
    if lost is not None and ub is not None and ub.cache_write is not None:
        seen = PredictedUsage.model_construct(cache_read=ub.cache_read or 0,
                                              cache_write=ub.cache_write,
                                              uncached_input=ub.uncached_input or 0)
        usd, base = miss_costs(pb, lost, seen, ub, read_prices(pb.model, prices))
    info = CAUSES["previous_response_chained"]
    head = Cause.model_construct(
        code=info.code, title=info.title, tier=None, path="previous_response_id",
        segment_index=len(pb.segs), detail={"previous_response_id": chain,
                                            "a_previous_response_id": a["previous_response_id"],
                                            **({"relation": "sibling"} if sibling else {
                                                "a_output": "known" if output is not None
                                                else "left out (not given)"})},
        fix_hint=info.fix_hint, source=info.source, note="")
    causes = cutting + [head] + [c for c in kept if c.code in ROUTING_CAUSES]
    if verdict == "unexplained_miss" or not cutting:
        causes = [head] + [c for c in causes if c is not head]
    if lapse is not None:  # the primary cause when it explains the miss, else listed after
        causes = [lapse, *causes] if classification == "timing" else [*causes, lapse]
    if verdict == "unexplained_miss" and cutting:  # changes found, but they are not causal
        causes.insert(0, _make_cause(_no_change_cause(pa, pb, 0, True, 1.0)))
    diag = parse_diagnostics(diagnostics_b) if diagnostics_b is not None else None
    if sibling:
        note = (f"previous_response_id {chain!r}: A and B both continue that stored "
                "response (siblings, e.g. an edited and regenerated turn), so B does not "
                "continue A: both prompts start with that conversation, which the bodies do "
                "not show; their own inputs are compared, token numbers are not predicted")
    else:
        note = (f"previous_response_id {chain!r}: B's prompt is A's prompt + A's output + "
                f"B's input (that it names A is {'checked' if checked else 'assumed'}); A "
                f"itself continues {a['previous_response_id']!r}, so both start with a "
                "stored conversation the bodies do not show: the structure is compared, "
                "token numbers are not predicted")
    if ideal is not None:
        note += f" (A's usage: {ideal:,} tokens cached after A)"
    if ideal is not None and explained is not None and explained < ideal and lost is not None:
        codes = ", ".join(dict.fromkeys(c.code for c in cutting))
        note += (f"; the change ({codes}) costs at most {explained:,} of those tokens, what "
                 f"follows it in A's prompt: B could still read {ideal - explained:,} (what "
                 "precedes it, the stored conversation included when the change lies in "
                 "input)")
        if verdict == "unexplained_miss" and read_b is not None:
            note += (f", it read {read_b:,}: the other {lost - explained:,} lost tokens are "
                     "not explained by the payload (a provider-side miss)")
    observed = None
    if ub is not None:
        observed = ObservedUsage.model_construct(cache_read=ub.cache_read,
                                                 cache_write=ub.cache_write,
                                                 uncached_input=ub.uncached_input)
    return res.model_copy(update={
        "verdict": verdict, "cause": causes[0].code, "causes": causes,
        "invalidated_levels": res.invalidated_levels if cutting else [],
        "reusable_prefix": res.reusable_prefix if cutting else "all",
        "identical_prefix_tokens": 0, "ideal_cache_read": ideal, "predicted": None,
        "lost_tokens": lost, "miss_cost_usd": usd, "extra_cost_base_tokens": base,
        "observed": observed, "classification": classification, "checks": [],
        "diagnostics": _diagnostics(diag, causes[0].code, causes, res.divergence, verdict),
        "notes": [note, *(c.note for c in causes if c.note)]})


def _edit_bound(pa: Prepared, pb: Prepared, cutting: Sequence[Cause],
                divergence: Divergence | None, ua: Usage | None, ideal: int) -> int | None:
    """Most of A's ``ideal`` cached tokens the ``cutting`` causes can cost B, when both
    prompts start with a stored conversation the bodies do not show (None: not known; the
    caller then takes all of them).

    The server puts that conversation right before the first ``input`` item (after tools
    and instructions), so a prompt is: tools + instructions + stored conversation + input.
    The first cut's position in A's whole prompt is its position in A's body when it lies
    before ``input``, else A's reported input tokens (``ua.total_input``) minus A's body
    tokens from the cut on (estimated tokens). B still reads what A left before the cut:
    before GPT-5.6 (automatic prefix caching), A's entry less the tokens from the cut on,
    rounded up to the model's grid (``cache_step_tokens``, 128; nothing below
    ``min_cacheable_tokens``, 1,024; hosted-api-rules.md 2.1); on GPT-5.6+ the longest entry
    A wrote at a breakpoint before the cut that one of B's breakpoints reaches (breakpoints
    in the stored conversation are not seen: none is assumed; hosted-api-rules.md 2.3).
    Returns A's tokens (reported) after what B can read, at most ``ideal``."""
    idx = [c.segment_index for c in cutting if c.segment_index is not None]
    if not idx or ua is None or pa.policy is None:
        return None
    cut = min(min(idx), len(pa.segs))
    head_at = next((s.index for s in pa.segs if s.path.startswith("input")), len(pa.segs))
    total_a = ua.total_input

    def whole(body_tokens: int, in_input: bool) -> int | None:
        """Position in A's whole prompt of a position in A's body."""
        if not in_input:
            return body_tokens
        return None if total_a is None else total_a - max(0, pa.total - body_tokens)

    minimum = int(getattr(pa.policy, "min_cacheable_tokens", 1024) or 0)
    if explicit_breakpoints(pa):
        reach = max([*openai_written(pb), *pb.bps], default=-1)
        best = 0
        for j in openai_written(pa):
            if j >= cut or j > reach:
                continue
            end = whole(pa.end(j), j >= head_at)
            if end is not None and end >= minimum:
                best = max(best, min(end, ideal))
        return ideal - best
    if divergence is not None and divergence.segment_index == cut:
        same = divergence.token_offset
    else:
        same = pa.start(cut)
    start = whole(same, cut >= head_at)
    if start is None or total_a is None:
        return None
    step = int(getattr(pa.policy, "cache_step_tokens", 128) or 1)
    tail = max(0, total_a - start)
    explained = min(ideal, -(-tail // step) * step)
    return ideal if ideal - explained < minimum else explained


def _left_by_a(pa: Prepared, ua: Usage | None) -> int | None:
    """Tokens A left in the cache by its reported usage alone (None: not known).

    Where the usage reports writes (:func:`cache_reported`: Anthropic, GPT-5.6+ with
    ``cache_write_tokens``), A's read + write, its largest entry. OpenAI before GPT-5.6
    reports no writes: A's whole prompt (reported input tokens) rounded down to the model's
    grid, ``min_cacheable_tokens + n * cache_step_tokens`` (1,024 + 128 n; hosted-api-rules.md
    2.1), as the implicit cache keeps it."""
    if ua is None or ua.cache_read is None:
        return None
    if cache_reported(pa):
        return None if ua.cache_write is None else ua.cache_read + ua.cache_write
    if pa.family != "openai" or pa.policy is None or ua.total_input is None:
        return None
    return max(openai_cacheable_tokens(ua.total_input, pa.policy), ua.cache_read)


def conversation_id(body: Any, provider: str | None = None) -> str | None:
    """The ``conversation`` of a Responses request body (None: none, not a Responses body, or
    ``provider`` names another shape).

    A Responses request with a non-null ``conversation`` (an id string, or an object with an
    ``id``) belongs to a stored conversation: "Items from this conversation are prepended to
    ``input_items`` for this response request" (openai-python ``ResponseCreateParams``), the
    same situation as a ``previous_response_id`` the diff cannot resolve. :func:`diff` and
    :func:`compare` give verdict ``cannot_tell`` with cause ``conversation_chained`` for such
    a B (see :func:`cannot_tell`).

    Args:
        body: a request body (a mapping; anything else gives None).
        provider: the caller's provider, or None / ``"auto"`` / ``"openai"`` to accept any
            body that is not a Chat Completions one (no ``messages``).

    Returns:
        The conversation id (``"<conversation>"`` when the object carries no string id).
    """
    if not isinstance(body, Mapping) or "messages" in body:
        return None
    if provider not in (None, "", "auto", "openai", "openai-responses"):
        return None
    value = body.get("conversation")
    if isinstance(value, Mapping):
        cid = value.get("id")
        return cid if isinstance(cid, str) and cid else "<conversation>"
    return value if isinstance(value, str) and value else None


def _conversation_reason(conv: str) -> str:
    return (f"B belongs to the stored conversation {conv!r} (conversation): the server "
            "prepends that conversation's items to B's input, and they are not in the "
            "bodies, so B's prefix cannot be compared with A's")


def chained_id(p: Prepared) -> str | None:
    """The ``previous_response_id`` of a Responses request (None: none, or another shape)."""
    if p.view.provider != "openai-responses":
        return None
    value = p.payload.get("previous_response_id")
    return value if isinstance(value, str) and value else None


def _chain_of(b: Mapping[str, Any], provider: str | None) -> str | None:
    value = b.get("previous_response_id")
    if not isinstance(value, str) or not value:
        return None
    if provider not in (None, "", "auto", "openai", "openai-responses"):
        return None
    return value


def _response_id(response: Any) -> str | None:
    """The ``id`` of a Responses response (a dict or SDK object), or None."""
    rid = response.get("id") if isinstance(response, Mapping) else getattr(response, "id", None)
    return rid if isinstance(rid, str) and rid else None


def response_output(response: Any) -> list[Any] | None:
    """A Responses response's ``output`` items as input items (None when not given).

    The stored conversation that ``previous_response_id`` prepends is the earlier request's
    input followed by its output items (assistant messages, function calls, reasoning); the
    items are passed on as the response holds them (an SDK object is dumped to JSON)."""
    if response is None:
        return None
    if not isinstance(response, Mapping) and hasattr(response, "model_dump"):
        try:
            response = response.model_dump(mode="json")
        except (TypeError, ValueError):
            return None
    if not isinstance(response, Mapping):
        return None
    output = response.get("output")
    if not isinstance(output, list):
        return None
    return [dict(item) for item in output if isinstance(item, Mapping)]


def _input_items(value: Any) -> list[Any]:
    """A Responses ``input`` as a list of items (a string is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]


def chained_body(a: Mapping[str, Any], a_output: Sequence[Any],
                 b: Mapping[str, Any]) -> dict[str, Any]:
    """B's effective body when its ``previous_response_id`` names A's response: A's input, then
    A's output items, then B's input (B's own ``instructions``, tools and settings; the API
    does not carry instructions over). Sources: https://platform.openai.com/docs/guides/
    conversation-state, openai-python ``ResponseCreateParams.previous_response_id`` /
    ``instructions`` (hosted-api-rules.md [O3])."""
    body = {k: v for k, v in b.items() if k != "previous_response_id"}
    body["input"] = [*_input_items(a.get("input")), *a_output, *_input_items(b.get("input"))]
    return body


def cannot_tell(pa: Prepared, pb: Prepared, *, usage_b: Any, reason: str,
                cause: str = "previous_response_chained") -> DiffResult:
    """The result when B's prefix cannot be compared from the bodies (B continues a stored
    response the diff does not have, or belongs to a stored ``conversation``): verdict
    ``cannot_tell``, cause ``previous_response_chained`` (or ``cause``:
    ``"conversation_chained"``), no prediction, no lost tokens and no cost (never "0
    reads"). Changes outside the input that invalidate every entry on their own (model,
    tools, documented request settings) are listed as secondary causes.

    Args:
        pa, pb: the prepared requests (B's body as sent).
        usage_b: B's usage (any form :func:`compare` takes; None: not given).
        reason: the note saying why the prefix cannot be compared.
        cause: ``"previous_response_chained"``, ``"conversation_chained"`` or
            ``"stored_prompt_changed"``."""
    usage_b = _usage_of(usage_b, pb)
    if cause == "conversation_chained":
        head = _RawCause(cause, 0, 0, None, "conversation",
                         {"conversation": conversation_id(pb.payload)}, reason)
    elif cause == "stored_prompt_changed":
        head = _RawCause(cause, 0, 0, None, "prompt",
                         {"from": pa.payload.get("prompt"), "to": pb.payload.get("prompt")},
                         reason)
    else:
        head = _RawCause("previous_response_chained", 0, 0, None, "previous_response_id",
                         {"previous_response_id": chained_id(pb)}, reason)
    causes = [_make_cause(head)]
    if pa.model and pb.model and pa.model != pb.model:
        causes.append(_make_cause(_RawCause("model_changed", 0, 0, "tools", "model",
                                            {"from": pa.model, "to": pb.model})))
    causes.extend(_make_cause(c) for c in _param_causes(pa, pb))
    n = min(len(pa.keys), len(pb.keys))
    first = next((k for k in range(n) if pa.keys[k] != pb.keys[k]), n)
    if (first < len(pa.keys) and pa.segs[first].tier == "tools") or \
            (first < len(pb.keys) and pb.segs[first].tier == "tools"):
        # a tool change invalidates every entry, whatever conversation B continues
        causes.extend(_make_cause(c) for c in _classify(pa, pb, first, redact=True)[0])
    observed = None
    if usage_b is not None:
        observed = ObservedUsage.model_construct(cache_read=usage_b.cache_read,
                                                 cache_write=usage_b.cache_write,
                                                 uncached_input=usage_b.uncached_input)
    return DiffResult.model_construct(
        provider=pb.view.provider, model=pb.model, verdict="cannot_tell",
        cause=causes[0].code, causes=causes, divergence=None, invalidated_levels=[],
        reusable_prefix="unknown", semantic_equal=False, identical_prefix_tokens=0,
        ideal_cache_read=None, predicted=None, lost_tokens=None, miss_cost_usd=None,
        extra_cost_base_tokens=None, observed=observed, classification=None, checks=[],
        diagnostics=None, token_counts_exact=pb.view.counter_exact,
        notes=[c.note for c in causes if c.note])


def mark_chained(result: DiffResult, chain: str, note: str, *, partial: bool = False
                 ) -> DiffResult:
    """``result`` of a B whose ``previous_response_id`` was resolved into its effective body:
    a no-change primary cause (``append_only``: the healthy chained turn) becomes
    ``previous_response_chained`` (B continues A), and ``note`` is added to the notes."""
    causes = list(result.causes)
    detail = {"previous_response_id": chain,
              "a_output": "left out (not given)" if partial else "known"}
    if causes and causes[0].code in ("append_only",):
        old = causes[0]
        info = CAUSES["previous_response_chained"]
        causes[0] = Cause.model_construct(
            code=info.code, title=info.title, tier=None, path="previous_response_id",
            segment_index=old.segment_index, detail={**detail, **old.detail},
            fix_hint=info.fix_hint, source=info.source, note="")
    return result.model_copy(update={"causes": causes, "cause": causes[0].code if causes
                                     else result.cause, "notes": [*result.notes, note]})


def _prepare_pair(a: Mapping[str, Any], b: Mapping[str, Any], provider: str | None,
                  model: str | None) -> tuple[Prepared, Prepared]:
    """Render both; when shapes were detected and disagree, render both the same way."""
    pa = prepare(a, provider, model=model)
    pb = prepare(b, provider, model=model)
    if provider is not None or pa.view.provider == pb.view.provider:
        return pa, pb
    rank = {"openai-chat": 0, "openai-responses": 1, "anthropic": 2}
    weak, strong = (pa, pb) if rank[pa.view.provider] < rank[pb.view.provider] else (pb, pa)
    redone = None
    if weak.view.provider != "openai-chat" or not _chat_evidence(weak.payload):
        try:  # a shape detected by default (chat is the fallback) follows the other one
            redone = prepare(weak.payload, strong.view.provider, model=model)
        except InvalidRequestError:
            redone = None
    if redone is not None:
        return (redone, pb) if weak is pa else (pa, redone)
    if pa.family == pb.family:
        return pa, pb
    raise InvalidRequestError("", f"A has the {pa.view.provider} shape and B the "
                                  f"{pb.view.provider} shape: nothing to compare")


def _chat_evidence(payload: Mapping[str, Any]) -> bool:
    """Whether a payload has features only OpenAI chat requests have."""
    model = payload.get("model")
    if isinstance(model, str) and model.lower().startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return True
    for tool in payload.get("tools") or []:
        if isinstance(tool, Mapping) and "function" in tool:
            return True
    for msg in payload.get("messages") or []:
        if not isinstance(msg, Mapping):
            continue
        if msg.get("role") in ("tool", "developer", "function") or "tool_calls" in msg:
            return True
        content = msg.get("content")
        if isinstance(content, list) and any(
                isinstance(p, Mapping) and p.get("type") in ("image_url", "input_audio", "file")
                for p in content):
            return True
    return "response_format" in payload


def _alternative(pa: Prepared, pb: Prepared, result: DiffResult, provider: str | None,
                 model: str | None, gap: float | None, ua: Usage | None,
                 prices: Prices | None) -> dict[str, Any] | None:
    """When B narrowed the tool list to force one tool, price keeping all tools instead."""
    if result.cause != "tools_changed" or pb.family != "anthropic":
        return None
    detail = result.causes[0].detail
    if detail.get("added") or not detail.get("removed"):
        return None
    choice = pb.view.params.get("tool_choice")
    if not (isinstance(choice, Mapping) and choice.get("type") == "tool"):
        return None
    tools_a = pa.payload.get("tools")
    names_a = {t.get("name") for t in tools_a or [] if isinstance(t, Mapping)}
    if choice.get("name") not in names_a:
        return None
    alt_payload = dict(pb.payload)
    alt_payload["tools"] = tools_a
    try:
        alt = compare(pa, prepare(alt_payload, provider or pb.view.provider, model=model),
                      gap=gap, usage_a=ua, prices=prices)
    except InvalidRequestError:
        return None
    return {
        "change": "keep all tools; force the tool with tool_choice",
        "tools": "unchanged (all " + str(len(tools_a or [])) + ")",
        "tool_choice": dict(choice),
        "cause": alt.cause,
        "invalidated_levels": alt.invalidated_levels,
        "predicted_cache_read_tokens": alt.predicted.cache_read if alt.predicted else None,
        "miss_cost_usd": alt.miss_cost_usd,
    }
