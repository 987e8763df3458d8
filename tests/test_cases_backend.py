"""../shared/cases entries of kind ``backend`` against the real local backend.

BR-32 (https://github.com/vllm-project/vllm/issues/54607): only full KV blocks are shared, so a
shared prefix shorter than one block reuses nothing (``below_block_floor``, not
``no_shared_prefix``); with 16-token blocks a 1,000-token shared prefix of a 1,300-token prompt
reuses 992 tokens (hit rate 0.7631); and a server that does not report
``prompt_tokens_details`` (vLLM without ``--enable-prompt-tokens-details``) leaves cached tokens
*unknown*, never 0.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.local.accounting import block_floor_reuse, classify_block_reuse
from promptcache.local.app import ServerOptions
from promptcache.local.cli import serve_command
from promptcache.local.engine import Engine
from promptcache.local.template import encode_text
from promptcache.local.testing import SMALL_MODEL, LocalBackend, shared_runner
from promptcache.usage.parse import parse_usage
from tests.cases import case, filler, load_cases

pytestmark = pytest.mark.local

BR32 = case("BR-32")
CASES: list[dict[str, Any]] = BR32["input"]["cases"]
EXPECTED: list[dict[str, Any]] = BR32["expected"]["cases"]


def test_every_backend_case_is_covered() -> None:
    assert [c["id"] for c in load_cases("backend")] == ["BR-32"]


def _engine(block_size: int, num_blocks: int) -> Engine:
    return Engine(
        shared_runner(device="cpu", **SMALL_MODEL),
        block_size=block_size,
        num_blocks=num_blocks,
        mode="fast",
    )


def _tokens(n: int, salt: str) -> list[int]:
    ids = encode_text(filler(n, salt))
    assert len(ids) == n
    return ids


def _two_requests(shared: int, prompt: int, block_size: int) -> tuple[int, int]:
    """Send two prompts sharing ``shared`` tokens; return (shared, reused tokens of the 2nd)."""
    engine = _engine(block_size, num_blocks=max(8, 3 * (prompt // block_size + 2)))
    prefix = _tokens(shared, "BR-32 shared system prompt")
    first = prefix + _tokens(prompt - shared, "BR-32 first user turn")
    second = prefix + _tokens(prompt - shared, "BR-32 second user turn")
    common = next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
    assert common == shared
    engine.generate(first, max_tokens=1)
    result = engine.generate(second, max_tokens=1)
    assert result.reused_tokens + result.computed_tokens == prompt
    return common, result.reused_tokens


def test_br32_shared_prefix_below_one_block_reuses_nothing() -> None:
    spec, expected = CASES[0], EXPECTED[0]
    block, shared = spec["block_size"], spec["shared_prefix_tokens"]
    assert block_floor_reuse(shared, block) == expected["max_reusable_tokens_per_request"] == 0
    assert classify_block_reuse(shared, block) == expected["classification"]
    assert classify_block_reuse(shared, block) != expected["not"]
    assert classify_block_reuse(0, block) == expected["not"]  # the distinction the case draws
    common, reused = _two_requests(shared, shared + 100, block)  # the real block cache agrees
    assert common == shared and reused == 0
    # the same prefix under 16-token blocks is reused (so it is the floor, not the prefix)
    assert _two_requests(shared, shared + 100, 16)[1] == block_floor_reuse(shared, 16) == 240


def test_br32_block_floor_arithmetic_and_hit_rate() -> None:
    spec, expected = CASES[1], EXPECTED[1]
    block, shared, prompt = spec["block_size"], spec["shared_prefix_tokens"], spec["prompt_tokens"]
    assert block_floor_reuse(shared, block) == expected["max_reusable_tokens_per_request"] == 992
    _, reused = _two_requests(shared, prompt, block)
    assert reused == 992
    assert round(reused / prompt, 4) == expected["expected_hit_rate"] == 0.7631


@pytest.fixture(scope="module")
def vllm_like() -> LocalBackend:
    spec = CASES[2]
    assert spec["server_flag_enable_prompt_tokens_details"] is False
    options = ServerOptions(openai_prompt_tokens_details=False)
    return LocalBackend(_engine(spec["block_size"], num_blocks=512), options=options)


def test_br32_absent_cached_tokens_field_is_unknown(vllm_like: LocalBackend) -> None:
    expected = EXPECTED[2]
    system = filler(1500, "BR-32 vllm system")
    request = {
        "model": "gpt-4o",
        "max_tokens": 1,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
    }
    client = vllm_like.openai()
    client.chat.completions.create(**request)
    raw = vllm_like.http_client().post("/v1/chat/completions", json=request).json()
    assert "prompt_tokens_details" not in raw["usage"]  # the field is absent, as in vLLM
    resp = client.chat.completions.create(**request)
    assert resp.usage is not None and resp.usage.prompt_tokens_details is None
    record = parse_usage(resp, provider="vllm")
    assert expected["cached_tokens"] == "unknown"
    assert record.cache_read is None  # unknown, not 0
    # ... although the block cache did reuse the prefix on the server side
    assert vllm_like.metrics()["promptcache_reused_tokens_total"] > 1000


def test_br32_details_reported_when_enabled() -> None:
    local = LocalBackend(_engine(16, num_blocks=512))
    resp = local.openai().chat.completions.create(
        model="gpt-4o", max_tokens=1, messages=[{"role": "user", "content": "hi"}]
    )
    assert resp.usage is not None and resp.usage.prompt_tokens_details is not None
    assert parse_usage(resp, provider="vllm").cache_read == 0  # known zero


def test_serve_has_the_vllm_style_switch() -> None:
    names = {opt for param in serve_command.params for opt in param.opts}
    assert "--no-prompt-tokens-details" in names
    assert {"--host", "--port", "--model", "--device", "--pool-mb"} <= names
    host = next(p for p in serve_command.params if "--host" in p.opts)
    assert host.default == "127.0.0.1"
