"""Scheduling policies: the orderings theory predicts, and starvation made visible."""

from __future__ import annotations

import pytest

from promptcache.sim.schedulers import (
    FCFS,
    LongestPrefixFirst,
    LongestPrefixFirstAgeing,
    Waiting,
    make_policy,
)
from promptcache.sim.simulator import SimConfig, simulate, sweep, working_set_tokens
from promptcache.sim.workload import Request, WorkloadConfig, generate_workload

# Sixty conversations start within one minute: a long queue (the window matters) and, at a
# few percent of the working set, memory pressure.
BURST = WorkloadConfig(conversations=60, duration_s=60)


def _waiting(index: int, prompt_len: int, enqueued: float) -> Waiting:
    req = Request(index=index, conversation=index, turn=0, adapter="", arrival_s=enqueued,
                  think_s=0.0, stream=[0] * prompt_len, prompt_len=prompt_len,
                  insert_len=prompt_len, output_tokens=1)
    return Waiting(req, enqueued)


def test_policies_pick_as_documented() -> None:
    window = [_waiting(0, 10, 0.0), _waiting(1, 10, 1.0), _waiting(2, 10, 2.0)]
    cached = {0: 100, 1: 900, 2: 900}
    peek = lambda r: cached[r.index]  # noqa: E731
    assert FCFS().pick(window, 10.0, peek) == 0
    assert LongestPrefixFirst().pick(window, 10.0, peek) == 1  # ties go to the oldest
    # 10 s of waiting at 100 tokens/s is worth 1,000 tokens: request 0 scores 1,100 vs 1,800.
    assert LongestPrefixFirstAgeing(100.0).pick(window, 10.0, peek) == 1
    # At 200 tokens/s: 2,100 vs 2,700 vs 2,500 -> still 1; at t=100 s request 0 wins.
    assert LongestPrefixFirstAgeing(200.0).pick(window, 100.0, peek) == 1
    assert LongestPrefixFirstAgeing(1000.0).pick(window, 100.0, peek) == 0
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("sjf")
    with pytest.raises(ValueError):
        LongestPrefixFirstAgeing(-1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_longest_prefix_first_beats_fcfs_under_memory_pressure(seed: int) -> None:
    w = generate_workload(BURST, seed=seed)
    ws = working_set_tokens(w)
    for fraction in (0.05, 0.12, 0.25):
        cap = max(int(ws * fraction), w.max_request_tokens + 32)
        runs = {p: simulate(w, SimConfig(cache="radix", capacity_tokens=cap, policy=p))
                for p in ("fcfs", "lpm", "lpm-ageing")}
        assert runs["lpm"].hit_rate >= runs["fcfs"].hit_rate, fraction
        assert runs["lpm-ageing"].hit_rate >= runs["fcfs"].hit_rate, fraction
        assert runs["lpm"].mean_prefill_s <= runs["fcfs"].mean_prefill_s, fraction
        # Starvation is visible: pure lpm lets some request wait longest; ageing bounds it.
        assert runs["lpm"].max_wait_s > runs["fcfs"].max_wait_s
        assert runs["lpm-ageing"].max_wait_s < runs["lpm"].max_wait_s


def test_longest_prefix_first_beats_fcfs_with_the_block_cache() -> None:
    w = generate_workload(BURST, seed=0)
    cap = max(int(working_set_tokens(w) * 0.1), w.max_request_tokens + 32)
    fcfs = simulate(w, SimConfig(cache="block", capacity_tokens=cap, policy="fcfs"))
    lpm = simulate(w, SimConfig(cache="block", capacity_tokens=cap, policy="lpm"))
    assert lpm.hit_rate > fcfs.hit_rate


@pytest.mark.parametrize("kind", ["block", "radix"])
def test_all_policies_equal_with_unlimited_capacity(kind: str) -> None:
    w = generate_workload(BURST, seed=4)
    results = sweep(w, SimConfig(), caches=[kind], capacities=[None],
                    policies=["fcfs", "lpm", "lpm-ageing"])
    assert len({r.cached_tokens for r in results}) == 1
    assert len({r.prompt_tokens for r in results}) == 1
    assert all(r.evicted_tokens == 0 for r in results)
    # ... while the schedules themselves differ (the equality is not vacuous).
    assert len({round(r.mean_wait_s, 6) for r in results}) > 1


def test_window_of_one_is_fcfs() -> None:
    w = generate_workload(BURST, seed=0)
    cap = max(int(working_set_tokens(w) * 0.1), w.max_request_tokens + 32)
    fcfs = simulate(w, SimConfig(cache="radix", capacity_tokens=cap, policy="fcfs"))
    lpm1 = simulate(w, SimConfig(cache="radix", capacity_tokens=cap, policy="lpm", window=1))
    assert lpm1.cached_tokens == fcfs.cached_tokens
    assert lpm1.max_wait_s == fcfs.max_wait_s
