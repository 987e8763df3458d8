"""Shared plumbing for the examples: choose a client, print the usage of each request.

Not an example itself. Each example script does ``from _common import ...`` (Python puts the
script's folder on ``sys.path``), so copy this file along with the script you copy.

Which backend an example talks to:

* the local reference backend (:class:`promptcache.local.testing.LocalBackend`: a seeded
  random-weight Llama with a block-hash KV prefix cache behind Anthropic- and OpenAI-shaped
  endpoints, in-process, no network) by default;
* the real API when ``ANTHROPIC_API_KEY`` (``--provider anthropic``, the default) or
  ``OPENAI_API_KEY`` (``--provider openai``) is set, with ``anthropic.Anthropic()`` /
  ``openai.OpenAI()`` and the model named by ``--model``. When only ``OPENAI_API_KEY`` is set,
  the provider defaults to ``openai``. ``--local`` forces the local backend.

The local model's weights are random, so its text is meaningless: :meth:`Target.reply_text`
returns ``None`` for it and the examples never print it. The caching is real: cache reads are
served from the block cache, and the usage fields follow the providers' rules
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
https://developers.openai.com/api/docs/guides/prompt-caching).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, NoReturn

from promptcache import UnknownModelError, get_policy
from promptcache.usage import UsageRecord, UsageTracker

Provider = Literal["anthropic", "openai"]

#: Model used when ``--model`` is not given (a real model id on both providers; on the local
#: backend it only selects the catalog's caching rules and prices).
DEFAULT_MODELS: dict[Provider, str] = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5"}
#: Environment variable whose presence switches a provider to its real API.
KEY_ENV: dict[Provider, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
#: Output tokens per request on the local backend: its text is meaningless, keep it short.
LOCAL_MAX_TOKENS = 8


def make_parser(description: str) -> argparse.ArgumentParser:
    """The command line every example shares (``--provider``, ``--model``, ``--local``...)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default=None,
                        help="API shape to use (default: the provider of --model; else "
                             "anthropic, or openai when only OPENAI_API_KEY is set)")
    parser.add_argument("--model", default=None,
                        help="model id (default: claude-sonnet-4-6 / gpt-5)")
    parser.add_argument("--local", action="store_true",
                        help="use the local backend even when an API key is set")
    parser.add_argument("--small-model", action="store_true",
                        help="local backend only: a tiny model shape (fast; used by the tests)")
    parser.add_argument("--max-tokens", type=_positive_int, default=None,
                        help=f"output tokens per request (default: {LOCAL_MAX_TOKENS} on the "
                             "local backend, 1024 on a real API)")
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def usage_error(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with status 2 (bad command line)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def choose_provider(requested: str | None, env: Mapping[str, str],
                    model: str | None = None) -> Provider:
    """The API shape to use: ``requested`` when given; else the provider of ``model`` when
    the catalog knows it; else ``"openai"`` when only ``OPENAI_API_KEY`` is set; else
    ``"anthropic"``."""
    if requested in ("anthropic", "openai"):
        return "openai" if requested == "openai" else "anthropic"
    if model is not None:
        try:
            return "openai" if get_policy(model).provider == "openai" else "anthropic"
        except UnknownModelError:
            pass  # reported by open_target
    if env.get(KEY_ENV["openai"]) and not env.get(KEY_ENV["anthropic"]):
        return "openai"
    return "anthropic"


@dataclass
class Target:
    """Where an example sends its requests.

    Attributes:
        provider: ``"anthropic"`` (Messages API) or ``"openai"`` (Chat Completions).
        model: the model id sent with every request.
        client: the official SDK client (``anthropic.Anthropic`` / ``openai.OpenAI``), not yet
            wrapped: the example wraps it with ``promptcache.wrap``.
        max_tokens: output tokens per request.
        backend: the in-process local backend, or ``None`` on a real API.
    """

    provider: Provider
    model: str
    client: Any
    max_tokens: int
    backend: Any = None
    _seen: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def local(self) -> bool:
        """True on the local backend (random weights: its text is never shown)."""
        return self.backend is not None

    def describe(self) -> str:
        """One line saying where the requests go."""
        if self.local:
            return (f"local backend ({self.provider} API shape, caching rules and prices of "
                    f"{self.model}); the random-weight model's text is not shown")
        return f"real {self.provider} API, model {self.model}"

    def reply_text(self, response: Any) -> str | None:
        """The model's text; ``None`` on the local backend, whose text is meaningless."""
        if self.local:
            return None
        if self.provider == "anthropic":
            return "".join(b.text for b in response.content if b.type == "text").strip()
        return (response.choices[0].message.content or "").strip()

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass between requests on the local backend's manual TTL clock.

        On a real API nothing waits: the examples' gaps are well inside every TTL.
        """
        if self.backend is not None:
            self.backend.clock.advance(seconds)

    def backend_counters(self) -> dict[str, int] | None:
        """The local backend's own token counters (``None`` on a real API): ``prompt``,
        ``cache_read``, ``cache_write`` (as reported) and ``reused`` (KV served from the
        block cache), summed over all endpoints."""
        if self.backend is None:
            return None
        names = {"prompt": "promptcache_prompt_tokens_total",
                 "cache_read": "promptcache_cache_read_tokens_total",
                 "cache_write": "promptcache_cache_write_tokens_total",
                 "reused": "promptcache_reused_tokens_total"}
        metrics = self.backend.metrics()
        return {key: int(sum(v for m, v in metrics.items()
                             if m == name or m.startswith(name + "{")))
                for key, name in names.items()}


    def reused_since_last(self) -> int | None:
        """KV tokens the local engine reused since the previous call (None on a real API)."""
        counters = self.backend_counters()
        if counters is None:
            return None
        reused = counters["reused"] - self._seen.get("reused", 0)
        self._seen = counters
        return reused


@contextmanager
def open_target(args: argparse.Namespace, *,
                env: Mapping[str, str] | None = None) -> Iterator[Target]:
    """Open the client ``args`` ask for (see the module docstring); close it afterwards.

    Args:
        args: the parsed command line (:func:`make_parser`).
        env: environment to read the API keys from (default ``os.environ``).

    Raises:
        SystemExit: status 2 with one line on stderr when the model is unknown to the catalog,
            belongs to the other provider, or ``--small-model`` is given for a real API;
            status 1 with one line on stderr when a real API refuses a request or cannot be
            reached (the SDK's ``APIError``: a wrong key, a network error), instead of the
            SDK's traceback.
    """
    env = os.environ if env is None else env
    provider = choose_provider(args.provider, env, args.model)
    model = args.model or DEFAULT_MODELS[provider]
    try:
        policy = get_policy(model)  # minimum length, TTLs and prices come from the catalog
    except UnknownModelError as exc:
        usage_error(str(exc))
    if policy.provider != provider:
        usage_error(f"--model {model} belongs to {policy.provider}, but --provider is "
                    f"{provider}")
    if env.get(KEY_ENV[provider]) and not args.local:
        if args.small_model:
            usage_error("--small-model applies to the local backend only")
        api_error: type[Exception]
        if provider == "anthropic":
            import anthropic

            client: Any = anthropic.Anthropic(api_key=env[KEY_ENV[provider]])
            api_error = anthropic.APIError
        else:
            import openai

            client = openai.OpenAI(api_key=env[KEY_ENV[provider]])
            api_error = openai.APIError
        try:
            yield Target(provider, model, client, args.max_tokens or 1024)
        except api_error as exc:
            # a wrong key, a model the account cannot use, no network: one line, not a traceback
            print(f"error: the {provider} API: {type(exc).__name__}: {exc} (check "
                  f"{KEY_ENV[provider]} and the network, or run with --local)", file=sys.stderr)
            raise SystemExit(1) from None
        finally:
            client.close()
        return

    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    shape: dict[str, Any] = dict(SMALL_MODEL) if args.small_model else {}
    # mode="fast": prefill the uncached suffix in one forward pass (the default "exact" mode
    # prefills in block-sized chunks for bit-identical logits, which these examples do not need;
    # the caching and the usage are the same in both modes).
    with LocalBackend(mode="fast", **shape) as backend:
        client = backend.anthropic() if provider == "anthropic" else backend.openai()
        yield Target(provider, model, client, args.max_tokens or LOCAL_MAX_TOKENS, backend)


# ------------------------------------------------------------------------------ printing
@dataclass
class Step:
    """Usage of one request, as the wrapper's tracker recorded it (tokens, USD)."""

    label: str
    record: UsageRecord
    cost_usd: Decimal | None
    savings_usd: Decimal | None
    #: Local backend only: prompt tokens whose KV the engine took from its block cache for
    #: this request instead of recomputing them (None on a real API).
    backend_reused: int | None = None


@dataclass
class ExampleResult:
    """What an example's ``main()`` returns (the tests read it).

    Attributes:
        target: where the requests went (its ``backend`` is closed by then; use
            ``counters`` for its metrics).
        tracker: the usage tracker every request was recorded in.
        steps: one :class:`Step` per request, in order.
        counters: the local backend's token counters after the run (``None`` on a real API).
        extra: example-specific results (break-even, final plan, ...).
    """

    target: Target
    tracker: UsageTracker
    steps: list[Step] = field(default_factory=list)
    counters: dict[str, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def usd(value: Decimal | None) -> str:
    """``$0.001234`` (``-$0.000875`` when negative) or ``n/a`` when the price is unknown."""
    if value is None:
        return "n/a"
    return f"-${-value:.6f}" if value < 0 else f"${value:.6f}"


def record_step(tracker: UsageTracker, label: str, target: Target) -> Step:
    """The usage of the request just sent (the tracker's last record) as a :class:`Step`,
    printed as one line: read / written / uncached tokens, hit rate, cost, savings."""
    record, cost = tracker.records[-1], tracker.costs[-1]
    step = Step(label, record,
                cost.total if cost is not None else None,
                cost.savings if cost is not None else None,
                target.reused_since_last())
    hit = "n/a" if record.hit_rate is None else f"{record.hit_rate:6.1%}"
    print(f"{label:>8}: {record.total_input or 0:>6,} input tokens = "
          f"{record.cache_read or 0:>6,} read + {record.cache_write or 0:>6,} written + "
          f"{record.uncached_input or 0:>5,} uncached | hit rate {hit} | "
          f"cost {usd(step.cost_usd)} (saved {usd(step.savings_usd)})")
    return step


def print_summary(tracker: UsageTracker) -> None:
    """The tracker's totals: hit rate (ratio of sums), cost, savings against no caching."""
    s = tracker.summary()
    hit = "n/a" if s.hit_rate is None else f"{s.hit_rate:.1%}"
    print(f"\n{s.requests} requests, {s.total_input:,} input tokens: {s.cache_read:,} read from "
          f"cache, {s.cache_write:,} written, {s.uncached_input:,} uncached; hit rate {hit}")
    print(f"input cost {usd(s.input_cost)} instead of {usd(s.uncached_input_cost)} without "
          f"caching (saved {usd(s.savings)}); total cost with output {usd(s.cost)}")


def show_reply(target: Target, response: Any, width: int = 160) -> None:
    """Print the start of a real model's reply; nothing on the local backend."""
    text = target.reply_text(response)
    if text:
        flat = " ".join(text.split())
        print(f"          reply: {flat[:width]}{'...' if len(flat) > width else ''}")


def run_args(argv: Sequence[str] | None, description: str) -> argparse.Namespace:
    """Parse ``argv`` (``sys.argv[1:]`` when None) with :func:`make_parser`."""
    return make_parser(description).parse_args(argv)
