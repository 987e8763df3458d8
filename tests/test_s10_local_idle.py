"""The local backend never expired OpenAI automatic-cache entries (models before GPT-5.6): a
prefix 25 h idle was still read, for gpt-4o and for gpt-5 with ``in_memory`` or ``24h``
(new-user trial 15, F3). In-memory entries are "always removed within 1 h of last use" and
``24h`` keeps them up to 24 h (hosted-api-rules.md 2.1-2.2; catalog ``idle_lifetime``): the
backend now stops reading a prefix idle for longer than that (by its clock)."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.local.accounting import (
    CacheLedger,
    automatic_live_prefix,
    automatic_prefix_keys,
)
from promptcache.local.app import ServerOptions
from promptcache.local.testing import SMALL_MODEL, LocalBackend

W = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
     "oscar papa quebec romeo sierra tango").split()


def _text(n: int, s: int) -> str:
    return " ".join(W[(i * 3 + s) % len(W)] + str(i % 7) for i in range(n))


def _reads(backend: LocalBackend, model: str, seed: int, waits: list[float],
           **extra: Any) -> list[int]:
    client = backend.openai()
    msgs = [{"role": "system", "content": _text(900, seed)}, {"role": "user", "content": "q"}]
    out = []
    for wait in [0.0, *waits]:
        backend.clock.advance(wait)
        r = client.chat.completions.create(model=model, max_completion_tokens=1, messages=msgs,
                                           extra_body=extra or None)
        assert r.usage is not None and r.usage.prompt_tokens_details is not None
        out.append(r.usage.prompt_tokens_details.cached_tokens or 0)
    return out


def test_ledger_reads_only_the_prefixes_used_within_their_lifetime() -> None:
    ledger = CacheLedger()
    ids = list(range(1500))
    keys = automatic_prefix_keys(ids, b"salt", min_tokens=1024, step_tokens=128)
    assert [end for end, _ in keys] == [1024, 1152, 1280, 1408]
    assert automatic_live_prefix(ledger, keys, 0.0, 3600) == 0  # first use: nothing read
    assert automatic_live_prefix(ledger, keys, 3599.0, 3600) == 1408  # a use restarts it
    shorter = automatic_prefix_keys(ids[:1200], b"salt", min_tokens=1024, step_tokens=128)
    assert automatic_live_prefix(ledger, shorter, 3599.0 + 3601, 3600) == 0
    other = automatic_prefix_keys(ids, b"other tenant", min_tokens=1024, step_tokens=128)
    assert automatic_live_prefix(ledger, other, 7200.0, 3600) == 0


@pytest.fixture(scope="module")
def backend() -> Any:
    with LocalBackend(**SMALL_MODEL) as b:
        yield b


def test_in_memory_entries_go_after_1_h_idle(backend: LocalBackend) -> None:
    for seed, (model, extra) in enumerate([("gpt-4o", {}),
                                           ("gpt-5", {"prompt_cache_retention": "in_memory"})]):
        reads = _reads(backend, model, 10 + seed, [3599, 3601], **extra)
        assert reads[0] == 0 and reads[1] > 1024 and reads[2] == 0, (model, reads)


def test_24h_entries_go_after_24_h_idle(backend: LocalBackend) -> None:
    reads = _reads(backend, "gpt-5", 20, [3700, 86401], prompt_cache_retention="24h")
    assert reads[0] == 0 and reads[1] > 1024 and reads[2] == 0, reads
    # no retention sent on a model that accepts both: 24 h (openai-python's non-ZDR default)
    reads = _reads(backend, "gpt-5", 21, [3700, 86401])
    assert reads[0] == 0 and reads[1] > 1024 and reads[2] == 0, reads


def test_in_memory_idle_lifetime_is_a_server_option() -> None:
    with LocalBackend(**SMALL_MODEL, options=ServerOptions(openai_in_memory_idle_s=300)) as b:
        reads = _reads(b, "gpt-4o", 30, [299, 301])
        assert reads[0] == 0 and reads[1] > 1024 and reads[2] == 0, reads


def test_serve_passes_the_in_memory_idle_lifetime_to_the_server(monkeypatch: Any) -> None:
    from click.testing import CliRunner

    import promptcache.local.app as app_mod
    from promptcache.local.cli import serve_command

    seen: dict[str, Any] = {}

    def fake_create_app(engine: Any, options: Any = None, **kw: Any) -> Any:
        seen["options"] = options
        raise SystemExit(0)  # stop before uvicorn starts

    monkeypatch.setattr(app_mod, "build_engine", lambda *a, **k: object())
    monkeypatch.setattr(app_mod, "create_app", fake_create_app)
    result = CliRunner().invoke(serve_command, ["--port", "0", "--openai-in-memory-idle", "300"])
    assert result.exit_code == 0, result.output
    assert seen["options"].openai_in_memory_idle_s == 300
