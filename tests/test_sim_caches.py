"""Block cache (the backend's class) vs radix tree, adapters, replicas and the cost model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.local.blocks import KVCacheManager
from promptcache.sim.caches import BlockHashMemo, BlockSimCache, RadixSimCache
from promptcache.sim.costs import CostModel, get_hardware, get_shape, parse_bytes, parse_tokens
from promptcache.sim.schedulers import POLICIES
from promptcache.sim.simulator import SimConfig, simulate, sweep, working_set_tokens
from promptcache.sim.workload import Request, Workload, WorkloadConfig, generate_workload

# Short conversations under heavy load: fast to simulate, with queueing and eviction.
SMALL = WorkloadConfig(conversations=30, duration_s=60, system_tokens_min=40,
                       system_tokens_max=200, user_tokens_median=12, reply_tokens_median=30)


def _req(index: int, tokens: list[int], reply: list[int], adapter: str = "") -> Request:
    return Request(index=index, conversation=index, turn=0, adapter=adapter, arrival_s=0.0,
                   think_s=0.0, stream=tokens + reply, prompt_len=len(tokens),
                   insert_len=len(tokens) + len(reply), output_tokens=len(reply))


def test_the_simulator_does_not_import_torch() -> None:
    code = ("import sys, promptcache.sim, promptcache.sim.cli; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_block_cache_is_the_backend_class() -> None:
    cache = BlockSimCache(1024, 16)
    assert isinstance(cache.manager, KVCacheManager)
    assert cache.manager.pool.num_blocks == 64
    qwen = BlockSimCache(1024, 16, shape=get_shape("qwen2.5-7b"))
    assert qwen.manager.stats.pool_bytes == 1024 * 57_344


@pytest.mark.parametrize("kind", ["block", "radix"])
def test_finished_request_inserts_prompt_and_reply(kind: str) -> None:
    cache = BlockSimCache(4096, 1) if kind == "block" else RadixSimCache(4096)
    first = _req(0, list(range(100)), list(range(100, 150)))
    assert cache.peek(first) == 0
    assert cache.start(first) == 0
    cache.finish(first)
    follow = _req(1, [*range(150), 7, 8], [9])
    assert cache.peek(follow) == 150  # the reply is cached too
    assert cache.start(follow) == 150
    cache.finish(follow)
    same = _req(2, [*range(150), 7, 8], [])
    assert cache.start(same) == 151  # at least one prompt token is always computed


@pytest.mark.parametrize("kind", ["block", "radix"])
def test_adapters_never_share(kind: str) -> None:
    cache = BlockSimCache(4096, 4) if kind == "block" else RadixSimCache(4096)
    a = _req(0, list(range(64)), [], adapter="a")
    cache.start(a)
    cache.finish(a)
    assert cache.peek(_req(1, list(range(64)), [], adapter="a")) > 0
    assert cache.peek(_req(2, list(range(64)), [], adapter="b")) == 0
    assert cache.peek(_req(3, list(range(64)), [])) == 0


@pytest.mark.parametrize("kind", ["block", "radix"])
def test_running_requests_pin_their_kv(kind: str) -> None:
    cache = BlockSimCache(64, 1) if kind == "block" else RadixSimCache(64)
    big = _req(0, list(range(40)), [1] * 10)
    assert cache.start(big) == 0
    other = _req(1, list(range(100, 120)), [])
    assert cache.start(other) is None  # 50 pinned + 20 > 64: waits
    cache.finish(big)
    assert cache.start(other) == 0  # evicts part of the finished request's KV


@pytest.mark.parametrize("capacity", [None, 1_500, 3_000])
@pytest.mark.parametrize("policy", POLICIES)
def test_block_size_one_block_cache_equals_radix(capacity: int | None, policy: str) -> None:
    w = generate_workload(SMALL, seed=2)
    block = simulate(w, SimConfig(cache="block", block_size=1, capacity_tokens=capacity,
                                  policy=policy))
    radix = simulate(w, SimConfig(cache="radix", block_size=1, capacity_tokens=capacity,
                                  policy=policy))
    assert block.cached_tokens == radix.cached_tokens
    assert block.evicted_tokens == radix.evicted_tokens
    assert block.requests == radix.requests == len(w.requests)
    if capacity is not None:
        assert block.evicted_tokens > 0  # the case exercises eviction


def _cached_in_order(cache: BlockSimCache | RadixSimCache, requests: list[Request]) -> int:
    total = 0
    for req in requests:
        cached = cache.start(req)
        assert cached is not None
        total += cached
        cache.finish(req)
    return total


_tokens = st.lists(st.integers(0, 2), max_size=14)


@settings(max_examples=150)
@given(st.lists(st.tuples(_tokens, st.lists(st.integers(0, 2), max_size=5)), min_size=1,
                max_size=30),
       st.integers(20, 60))
def test_block_size_one_equals_radix_step_by_step(
    requests: list[tuple[list[int], list[int]]], capacity: int
) -> None:
    """Any sequence of requests whose last prompt token is new (as in chat: a turn ends with
    a new user message): same peeks, same hits, same evictions after every request.

    Without that condition the two differ in one corner: when a prompt is entirely a prefix of
    cached content, the hit is capped at n - 1 and the backend's ``commit`` finds the last
    block already registered (a duplicate) and leaves its LRU position alone, so that parent
    can be evicted before the children a later request added; the radix tree's insert
    refreshes the whole path.
    """
    block, radix = BlockSimCache(capacity, 1), RadixSimCache(capacity)
    for i, (prompt, reply) in enumerate(requests):
        req = _req(i, [*prompt, 100 + i], reply)
        assert block.peek(req) == radix.peek(req)
        assert block.start(req) == radix.start(req)
        block.finish(req)
        radix.finish(req)
        assert block.evicted_tokens == radix.evicted_tokens


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_radix_at_least_block_on_the_same_request_sequence(seed: int) -> None:
    # The cache-level claim: same requests in the same order, equal capacity (held for
    # seeds 0-9 x these 5 capacities when written).
    w = generate_workload(WorkloadConfig(conversations=40, duration_s=200), seed=seed)
    start = {r.conversation: r.arrival_s for r in w.requests if r.arrival_s is not None}
    order = sorted(w.requests, key=lambda r: (start[r.conversation] or 0.0) + 60.0 * r.turn)
    ws = working_set_tokens(w)
    for fraction in (0.03, 0.06, 0.12, 0.25, 2.0):
        cap = max(int(ws * fraction), w.max_request_tokens + 32)
        block = _cached_in_order(BlockSimCache(cap, 16), order)
        radix = _cached_in_order(RadixSimCache(cap), order)
        assert radix >= block, (fraction, radix, block)


@pytest.mark.parametrize("seed", [0, 5])
def test_radix_at_least_block_in_the_simulator(seed: int) -> None:
    # Whole simulator (closed loop): more hits mean shorter prefills, so follow-up turns
    # arrive earlier and the interleaving of conversations differs between the two caches;
    # under lpm the caches also rank waiting requests differently (tokens vs whole blocks).
    # A single run can therefore come out slightly either way (seed 5 at 25 % capacity, FCFS:
    # radix 0.1 point below block); the claim holds on the average over capacities and
    # policies, and no run is more than 1 point below.
    w = generate_workload(WorkloadConfig(conversations=40, duration_s=200), seed=seed)
    ws = working_set_tokens(w)
    caps = [max(int(ws * f), w.max_request_tokens + 32) for f in (0.04, 0.1, 0.25)] + [None]
    results = sweep(w, SimConfig(), caches=["block", "radix"], capacities=caps,
                    policies=POLICIES)
    by = {(r.cache, r.capacity_tokens, r.policy): r for r in results}
    diffs = [by["radix", c, p].hit_rate - by["block", c, p].hit_rate
             for c in caps for p in POLICIES]
    assert sum(diffs) / len(diffs) > 0
    assert min(diffs) > -0.01
    for p in POLICIES:  # with no eviction the order does not matter: radix >= block exactly
        assert by["radix", None, p].hit_rate >= by["block", None, p].hit_rate


def test_block_hash_memo_matches_the_backend_hashing() -> None:
    w = generate_workload(SMALL, seed=0)
    memo = BlockHashMemo(16)
    req = w.requests[3]
    manager = KVCacheManager.create_simulated(capacity_tokens=4096, block_size=16,
                                              model_id="promptcache-sim")
    manager.allocate("x", req.inserted, root=memo.root(req.adapter))
    manager.commit("x", req.inserted)
    manager.free("x")
    matched = manager.match_prefix(req.inserted, root=memo.root(req.adapter))
    assert matched.block_hashes == memo.hashes(req)[: len(matched.block_hashes)]
    assert len(matched.block_hashes) == (req.insert_len - 1) // 16


def test_two_replicas_affinity_beats_random() -> None:
    w = generate_workload(WorkloadConfig(conversations=80, duration_s=300), seed=0)
    cap = w.max_request_tokens * 3
    common = {"cache": "radix", "capacity_tokens": cap, "replicas": 2, "policy": "fcfs"}
    affinity = simulate(w, SimConfig(routing="affinity", **common))  # type: ignore[arg-type]
    rand = simulate(w, SimConfig(routing="random", **common))  # type: ignore[arg-type]
    assert affinity.hit_rate > rand.hit_rate
    assert affinity.requests == rand.requests == len(w.requests)


def test_more_adapters_lower_the_hit_rate() -> None:
    base = {"conversations": 60, "duration_s": 300}
    one = generate_workload(WorkloadConfig(**base), seed=0)  # type: ignore[arg-type]
    many = generate_workload(WorkloadConfig(adapters=8, **base), seed=0)  # type: ignore[arg-type]
    r1 = simulate(one, SimConfig(cache="radix"))
    r8 = simulate(many, SimConfig(cache="radix"))
    assert r8.hit_rate < r1.hit_rate  # system prompts are no longer shared across adapters


def test_capacity_below_one_request_is_an_error() -> None:
    w = generate_workload(SMALL, seed=0)
    with pytest.raises(ValueError, match="raise the capacity"):
        simulate(w, SimConfig(cache="radix", capacity_tokens=w.max_request_tokens - 1))


# --- cost model --------------------------------------------------------------------------------


def test_named_shapes_kv_bytes_and_params() -> None:
    # 2 x layers x kv_heads x head_dim x 2 bytes
    assert get_shape("llama-3-8b").kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    assert get_shape("llama-3-70b").kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert get_shape("qwen2.5-7b").kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 57_344
    # 8.03e9 published total minus the input embedding and LM head (2 x 128256 x 4096)
    total = 8_030_261_248
    norms = 32 * 2 * 4096 + 4096
    assert get_shape("llama-3-8b").params == total - 2 * 128_256 * 4096 - norms
    assert get_shape("llama-3-8b").tokens_for_bytes(16 * 2**30) == 131_072  # 16 GiB
    with pytest.raises(ValueError, match="known"):
        get_shape("gpt-5")


def test_prefill_flops_formula() -> None:
    s = get_shape("llama-3-8b")
    n, m = 3000, 1000
    expected = 2 * s.params * (n - m) + 2 * s.layers * s.heads * s.head_dim * (n * n - m * m)
    assert s.prefill_flops(n, m) == pytest.approx(expected, rel=1e-12)
    assert s.prefill_flops(n, n) == 0
    with pytest.raises(ValueError):
        s.prefill_flops(10, 11)
    cost = CostModel(s, get_hardware("h100-sxm"), 0.5)
    assert cost.prefill_seconds(n, m) == pytest.approx(expected / (989e12 * 0.5))


def test_decode_is_memory_bound_roofline() -> None:
    s = get_shape("llama-3-8b")
    cost = CostModel(s, get_hardware("h100-sxm"), 0.4)
    per_token = (s.weight_bytes + 1000 * s.kv_bytes_per_token) / 3.35e12
    assert cost.decode_seconds(1000, 1) == pytest.approx(per_token)
    assert cost.decode_seconds(1000, 0) == 0
    two = cost.decode_seconds(1000, 2)
    assert two == pytest.approx(per_token + (s.weight_bytes + 1001 * s.kv_bytes_per_token) / 3.35e12)


def test_parse_sizes() -> None:
    assert parse_bytes("16GiB") == 16 * 2**30
    assert parse_bytes("80GB") == 80 * 10**9
    assert parse_tokens("200k") == 200_000
    assert parse_tokens("1.5M") == 1_500_000
    for bad in ("", "12 parsecs", "GiB"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
    with pytest.raises(ValueError):
        parse_tokens("10GiB")


@pytest.mark.parametrize("block_size", [1, 16, 64])
def test_unlimited_capacity_never_evicts(block_size: int) -> None:
    w: Workload = generate_workload(SMALL, seed=1)
    many = generate_workload(
        WorkloadConfig(conversations=30, duration_s=20, adapters=3, system_tokens_min=40,
                       system_tokens_max=200, user_tokens_median=12, reply_tokens_median=30),
        seed=1)
    for workload, running in ((w, 1), (many, 4)):
        for kind in ("block", "radix"):
            r = simulate(workload, SimConfig(cache=kind, block_size=block_size,  # type: ignore[arg-type]
                                             max_running=running))
            assert r.evicted_tokens == 0, (kind, running)
