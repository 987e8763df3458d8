"""Engine: cached vs uncached exactness, accounting, decode controls, tails, pool pressure."""

from __future__ import annotations

import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from promptcache._errors import InvalidRequestError  # noqa: E402
from promptcache.local.engine import Engine  # noqa: E402
from promptcache.local.model import ModelRunner  # noqa: E402

pytestmark = pytest.mark.local


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Any:
    # Tiny models: OpenMP threads only add contention (10-30x slower on a busy 2-core box).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


VOCAB = 512


@pytest.fixture(scope="module")
def runner() -> ModelRunner:
    return ModelRunner(vocab_size=VOCAB, hidden_size=64, layers=2, heads=4, kv_heads=2, seed=7)


def prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [int(x) for x in torch.randint(0, VOCAB, (n,), generator=g)]


def logits_of(engine: Engine, toks: list[int], **kw: Any) -> tuple[Any, int]:
    res = engine.generate(toks, max_tokens=0, return_logits=True, **kw)
    assert res.prompt_logits is not None
    return res.prompt_logits, res.reused_tokens


# ---------------------------------------------------------------------------------------------
# exactness
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [17, 32, 47, 64, 70])
def test_exact_mode_logits_are_bit_identical_cached_vs_uncached(
    runner: ModelRunner, n: int
) -> None:
    toks = prompt(n, seed=n)
    uncached, r0 = logits_of(Engine(runner, num_blocks=32), toks)
    assert r0 == 0
    eng = Engine(runner, num_blocks=32)
    eng.generate(toks, max_tokens=0)  # warm
    cached, r1 = logits_of(eng, toks)
    assert r1 == ((n - 1) // 16) * 16 and r1 > 0
    assert torch.equal(cached, uncached)


def test_exact_mode_shared_prefix_other_suffix(runner: ModelRunner) -> None:
    base = prompt(50, seed=1)
    other = [*base[:40], *prompt(25, seed=2)]
    eng = Engine(runner, num_blocks=32)
    eng.generate(base, max_tokens=0)
    cached, reused = logits_of(eng, other)
    assert reused == 32
    uncached, _ = logits_of(Engine(runner, num_blocks=32), other)
    assert torch.equal(cached, uncached)


def test_fast_mode_same_greedy_tokens_cached_vs_uncached(runner: ModelRunner) -> None:
    toks = prompt(75, seed=3)
    cold = Engine(runner, num_blocks=32, mode="fast").generate(toks, max_tokens=12)
    eng = Engine(runner, num_blocks=32, mode="fast")
    eng.generate(toks, max_tokens=0)
    warm = eng.generate(toks, max_tokens=12, return_logits=True)
    assert warm.reused_tokens == 64 and warm.computed_tokens == 11
    assert warm.output_ids == cold.output_ids
    assert len(set(cold.output_ids)) > 1  # the random model does not just repeat a token
    exact = Engine(runner, num_blocks=32).generate(toks, max_tokens=0, return_logits=True)
    assert exact.prompt_logits is not None and warm.prompt_logits is not None
    assert torch.allclose(warm.prompt_logits, exact.prompt_logits, atol=1e-4)


def test_storage_stays_correct_under_eviction(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=8, tail_tokens=0)  # 128 tokens of KV
    prompts = [prompt(40, seed=100 + i) for i in range(6)]
    for p in prompts:  # each pins 3 blocks; later ones evict earlier ones
        eng.generate(p, max_tokens=0)
    assert eng.stats.evictions > 0
    for p in reversed(prompts):
        cached, _ = logits_of(eng, p)
        uncached, _ = logits_of(Engine(runner, num_blocks=8), p)
        assert torch.equal(cached, uncached)


# ---------------------------------------------------------------------------------------------
# accounting and pool
# ---------------------------------------------------------------------------------------------


def test_reuse_accounting_prewarm_and_salt_isolation(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32)
    toks = prompt(100, seed=4)
    first = eng.generate(toks, max_tokens=0, tenant_salt=b"a")
    assert (first.prompt_tokens, first.reused_tokens, first.computed_tokens) == (100, 0, 100)
    assert first.output_ids == [] and first.stop_reason == "max_tokens"
    assert eng.available_prefix(toks, tenant_salt=b"a") == 96
    assert eng.available_prefix(toks, tenant_salt=b"b") == 0
    assert eng.generate(toks, max_tokens=1, tenant_salt=b"b").reused_tokens == 0
    second = eng.generate([*toks, 5, 6], max_tokens=2, tenant_salt=b"a")
    assert (second.reused_tokens, second.computed_tokens) == (96, 6)
    assert len(second.output_ids) == 2
    # a prompt of exactly 6 cached blocks still computes its last token
    assert eng.available_prefix(toks[:96], tenant_salt=b"a") == 80
    m = eng.metrics
    assert m["requests_total"] == 3
    assert m["reused_tokens_total"] == 96 and m["computed_tokens_total"] == 100 + 100 + 6
    assert m["prefix_cache_blocks_used"] == 0  # nothing pinned between requests
    assert m["pool_bytes"] == eng.pool_bytes


def test_generated_tokens_are_cached_for_the_next_turn(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32)
    toks = prompt(30, seed=5)
    res = eng.generate(toks, max_tokens=20)
    nxt = [*toks, *res.output_ids, 1, 2, 3]
    # 30 prompt + 19 fed output tokens -> 3 full blocks (48 tokens) were committed
    assert eng.available_prefix(nxt) == 48


def test_a_prompt_over_the_pool_is_served_and_its_first_blocks_cached(
    runner: ModelRunner,
) -> None:
    eng = Engine(runner, num_blocks=2, tail_tokens=0)  # 32 tokens of blocks
    cold = Engine(runner, num_blocks=8, tail_tokens=0).generate(prompt(40), max_tokens=3)
    res = eng.generate(prompt(40), max_tokens=3)
    assert res.prompt_tokens == 40 and res.reused_tokens == 0
    assert res.output_ids == cold.output_ids
    assert eng.stats.blocks_used == 0 and eng.stats.blocks_cached == 2
    assert eng.generate(prompt(40), max_tokens=1).reused_tokens == 32


def test_pool_sized_in_bytes(runner: ModelRunner) -> None:
    per_token = runner.shape.kv_bytes_per_token
    eng = Engine(runner, pool_bytes=per_token * 16 * 10, tail_tokens=16)
    assert eng.manager.pool.num_blocks == 9
    assert eng.pool_bytes == per_token * 16 * 10
    assert eng.storage.nbytes == 9 * 16 * per_token
    with pytest.raises(ValueError):
        Engine(runner, pool_bytes=per_token, tail_tokens=0)
    with pytest.raises(ValueError):
        Engine(runner, pool_bytes=10**6, num_blocks=4)


def test_bad_input_raises_named_errors(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=8)
    with pytest.raises(InvalidRequestError):
        eng.generate([], max_tokens=1)
    with pytest.raises(InvalidRequestError):
        eng.generate([VOCAB], max_tokens=1)
    with pytest.raises(InvalidRequestError):
        eng.generate([1], max_tokens=-1)
    with pytest.raises(InvalidRequestError):
        eng.generate([1], max_tokens=1, temperature=-0.5)
    assert eng.stats.blocks_used == 0


# ---------------------------------------------------------------------------------------------
# decode controls
# ---------------------------------------------------------------------------------------------


def test_stop_sequences_eos_and_streaming_hook(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32)
    toks = prompt(20, seed=6)
    ref = eng.generate(toks, max_tokens=12).output_ids
    assert len(ref) == 12

    seen: list[int] = []
    res = eng.generate(
        toks, max_tokens=12, stop_token_seqs=[[ref[4], ref[5]]], on_token=seen.append
    )
    k = next(i for i in range(len(ref) - 1) if ref[i : i + 2] == ref[4:6])
    assert res.output_ids == ref[:k] and res.stop_reason == "stop" and res.stop_sequence == 0
    assert seen == ref[:k]  # the stop sequence never reached the stream

    seen = []
    res = eng.generate(
        toks, max_tokens=12, stop_token_seqs=[[ref[2], VOCAB + 1]], on_token=seen.append
    )
    assert res.output_ids == ref and res.stop_reason == "max_tokens" and seen == ref

    saved = runner.eos_token_id
    runner.eos_token_id = ref[3]
    try:
        res = eng.generate(toks, max_tokens=12)
    finally:
        runner.eos_token_id = saved
    k = ref.index(ref[3])
    assert res.output_ids == ref[:k] and res.stop_reason == "eos"


def test_seeded_sampling_is_reproducible(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32)
    toks = prompt(20, seed=8)
    a = eng.generate(toks, max_tokens=10, temperature=1.0, seed=123).output_ids
    b = eng.generate(toks, max_tokens=10, temperature=1.0, seed=123).output_ids
    c = eng.generate(toks, max_tokens=10, temperature=1.0, seed=124).output_ids
    assert a == b and a != c


# ---------------------------------------------------------------------------------------------
# kept tails (keep_tail_at)
# ---------------------------------------------------------------------------------------------


def test_keep_tail_at_reuses_up_to_the_exact_breakpoint(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32)
    system = prompt(41, seed=9)  # breakpoint at 41 = 2 blocks + 9-token tail
    turn1 = [*system, *prompt(10, seed=10)]
    eng.generate(turn1, max_tokens=0, keep_tail_at=[41])
    turn2 = [*system, *prompt(12, seed=11)]
    assert eng.available_prefix(turn2) == 41
    cached = eng.generate(turn2, max_tokens=4, return_logits=True)
    assert (cached.reused_tokens, cached.block_reused_tokens, cached.tail_reused_tokens) == (
        41,
        32,
        9,
    )
    cold = Engine(runner, num_blocks=32).generate(turn2, max_tokens=4, return_logits=True)
    assert cached.output_ids == cold.output_ids
    assert cached.prompt_logits is not None and cold.prompt_logits is not None
    assert torch.allclose(cached.prompt_logits, cold.prompt_logits, atol=1e-5)
    # a prompt diverging inside the tail reuses only the full blocks
    assert eng.available_prefix([*system[:38], 1, 2, 3, 4, 5]) == 32
    # a tail is never used up to the very last prompt token
    assert eng.available_prefix(system) == 32
    assert eng.metrics["tail_hits_total"] == 1


def test_tail_store_is_lru_bounded(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=32, tail_tokens=20)
    for i in range(4):
        p = prompt(25, seed=20 + i)  # 9-token tail each
        eng.generate(p, max_tokens=0, keep_tail_at=[25])
    assert eng.tails.tokens_used <= 20 and len(eng.tails) == 2
    assert eng.available_prefix([*prompt(25, seed=23), 0]) == 25
    assert eng.available_prefix([*prompt(25, seed=20), 0]) == 16


def test_concurrent_generate_calls_are_serialised(runner: ModelRunner) -> None:
    eng = Engine(runner, num_blocks=64)
    toks = prompt(40, seed=30)
    expected = Engine(runner, num_blocks=64).generate(toks, max_tokens=5).output_ids
    results: list[list[int]] = []

    def work() -> None:
        results.append(eng.generate(toks, max_tokens=5).output_ids)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4
    assert eng.stats.blocks_used == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_engine_exact_and_fast() -> None:
    r = ModelRunner(device="cuda", vocab_size=VOCAB, hidden_size=64, layers=2, heads=4, kv_heads=2)
    toks = prompt(70, seed=1)
    cold, _ = logits_of(Engine(r, num_blocks=32), toks)
    eng = Engine(r, num_blocks=32)
    eng.generate(toks, max_tokens=0)
    warm, reused = logits_of(eng, toks)
    assert reused == 64 and torch.equal(cold, warm)
    fast = Engine(r, num_blocks=32, mode="fast")
    a = fast.generate(toks, max_tokens=8).output_ids
    assert fast.generate(toks, max_tokens=8).output_ids == a


def test_forced_hash_collision_never_serves_wrong_kv(runner: ModelRunner) -> None:
    def constant(_: bytes) -> bytes:
        return b"\x07" * 32

    eng = Engine(runner, num_blocks=16, hash_fn=constant)
    first, second = prompt(40, seed=40), prompt(40, seed=41)
    eng.generate(first, max_tokens=0)
    cached, reused = logits_of(eng, second)
    assert reused == 0 and eng.stats.collisions >= 1
    uncached, _ = logits_of(Engine(runner, num_blocks=16), second)
    assert torch.equal(cached, uncached)
