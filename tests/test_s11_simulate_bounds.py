"""``promptcache simulate`` and the API behind it: every numeric option bounded and named.

A bad value is exit 2 naming the option and its range (never a traceback, a silently
meaningless figure or an unbounded run); the Python API raises a ValueError that starts with
the argument's name. Simulations here are tiny (two or three conversations).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.sim import costs, schedulers, simulator, workload
from promptcache.sim.costs import CostModel, get_hardware, get_shape, parse_bytes, parse_tokens
from promptcache.sim.schedulers import make_policy
from promptcache.sim.simulator import SimConfig, simulate, unlimited_capacity
from promptcache.sim.workload import WorkloadConfig, generate_workload

TINY = ["--conversations", "2", "--duration", "10", "--policy", "fcfs"]
HUGE = "99999999999999999999999"
NINES = "9" * 400  # beyond a float: float() gives inf


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["simulate", *TINY, *args])


def _tiny() -> workload.Workload:
    return generate_workload(WorkloadConfig(conversations=3, duration_s=10,
                                            system_tokens_min=40, system_tokens_max=80), seed=1)


BAD_OPTIONS = [
    ("--block-size", HUGE), ("--block-size", "0"), ("--block-size", "-3"),
    ("--block-size", "nan"), ("--block-size", "65537"),
    ("--mfu", "1e-300"), ("--mfu", "nan"), ("--mfu", "inf"), ("--mfu", "0"), ("--mfu", "-0.4"),
    ("--mfu", "1.5"), ("--mfu", "abc"),
    ("--duration", "inf"), ("--duration", "nan"), ("--duration", "1e300"), ("--duration", "0"),
    ("--duration", "-5"), ("--duration", "1e-300"), ("--duration", "abc"),
    ("--ageing", "nan"), ("--ageing", "inf"), ("--ageing", "-1"), ("--ageing", "1e300"),
    ("--ageing", "abc"),
    ("--conversations", HUGE), ("--conversations", "1000000000"), ("--conversations", "0"),
    ("--conversations", "-1"), ("--conversations", "nan"),
    ("--replicas", HUGE), ("--replicas", "1000000"), ("--replicas", "0"), ("--replicas", "inf"),
    ("--adapters", HUGE), ("--adapters", "0"),
    ("--window", "0"), ("--window", "-2"), ("--window", "nan"),
    ("--seed", "-5"), ("--seed", "nan"), ("--seed", "abc"),
    ("--max-running", "0"), ("--max-running", "-1"), ("--max-running", "nan"),
    ("--max-running", "1e9"),
    ("--capacity", "1e400%"), ("--capacity", "nan%"), ("--capacity", "-5%"), ("--capacity", "0%"),
    ("--capacity", NINES), ("--capacity", f"{NINES}GiB"), ("--capacity", "2000000000"),
    ("--capacity", "1PB"), ("--capacity", "0"), ("--capacity", "-5"), ("--capacity", "nan"),
    ("--capacity", "abc"),
]


@pytest.mark.parametrize("option,value", BAD_OPTIONS)
def test_bad_value_is_exit_2_naming_the_option(option: str, value: str) -> None:
    result = _run(option, value)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert "Traceback" not in result.output
    assert option in result.output
    for arg in ("duration_s", "ageing_tokens_per_s", "block_size", "max_running", "mfu must",
                "capacity_tokens"):
        assert arg not in result.output  # the API's name is swapped for the option


@pytest.mark.parametrize("option,value,accepted", [
    ("--block-size", HUGE, "[1, 65,536]"),
    ("--mfu", "1e-300", "[0.001, 1]"),
    ("--duration", "inf", "[0.001, 253,402,300,800] s"),
    ("--ageing", "nan", "[0, 1,000,000,000] tokens/s"),
    ("--conversations", HUGE, "[1, 10,000]"),
    ("--replicas", HUGE, "[1, 1,024]"),
    ("--seed", "-5", "[0, inf)"),
])
def test_message_gives_the_accepted_range(option: str, value: str, accepted: str) -> None:
    result = _run(option, value)
    assert result.exit_code == 2
    assert f"Invalid value for {option}: must be" in result.output
    assert accepted in result.output


def test_huge_replicas_and_conversations_are_refused_before_any_work() -> None:
    # Refused while checking the options, before a workload of 10**9 conversations is made.
    for option in ("--conversations", "--replicas"):
        result = CliRunner().invoke(main, ["simulate", option, "1000000000"])
        assert result.exit_code == 2 and option in result.output


def test_capacity_inf_means_unlimited_and_says_so() -> None:
    inf = _run("--capacity", "inf", "--format", "json")
    unlimited = _run("--capacity", "unlimited", "--format", "json")
    assert inf.exit_code == 0, inf.output
    assert json.loads(inf.stdout) == json.loads(unlimited.stdout)
    assert all(r["capacity_tokens"] is None for r in json.loads(inf.stdout)["results"])
    help_text = " ".join(CliRunner().invoke(main, ["simulate", "--help"]).output.split())
    assert "unlimited (also inf: a pool that never evicts)" in help_text


@pytest.mark.parametrize("option,value", [("--window", HUGE), ("--max-running", "1000000000000"),
                                          ("--capacity", "1000000000"),
                                          ("--block-size", "65536"), ("--seed", HUGE),
                                          ("--ageing", "0"), ("--mfu", "0.001"),
                                          ("--adapters", "1000000")])
def test_large_but_meaningful_values_run(option: str, value: str) -> None:
    # --window / --max-running above the queue mean no limit; a capacity at the bound is
    # simulated at the pool that never evicts (the block cache makes its blocks up front).
    result = _run(option, value, "--format", "json")
    assert result.exit_code == 0, result.output
    for row in json.loads(result.stdout)["results"]:
        assert math.isfinite(row["mean_prefill_s"]) and math.isfinite(row["mean_ttft_s"])
        assert 0 <= row["hit_rate"] <= 1


def test_pool_blocks_bound_is_exit_2() -> None:
    result = _run("--replicas", "1024", "--block-size", "1", "--cache", "block")
    assert result.exit_code == 2, result.output
    assert "MAX_POOL_BLOCKS" in result.output and "--replicas" in result.output


# ---- the Python API: a ValueError whose message starts with the argument's name ----------

@pytest.mark.parametrize("field,value", [
    ("conversations", 10**12), ("conversations", 0), ("conversations", math.nan),
    ("conversations", "5"), ("conversations", 2.5),
    ("duration_s", math.inf), ("duration_s", math.nan), ("duration_s", 1e300),
    ("duration_s", 10**400), ("duration_s", 0.0), ("duration_s", -1.0), ("duration_s", 1e-300),
    ("duration_s", "60"),
    ("adapters", 10**30), ("adapters", 0), ("adapters", math.inf),
])
def test_workload_config_names_the_argument(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        WorkloadConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [-1, -5, math.nan, "0"])
def test_generate_workload_seed(seed: object) -> None:
    with pytest.raises(ValueError, match=r"^seed must be"):
        generate_workload(WorkloadConfig(conversations=1), seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("mfu", [1e-300, 0.0, -0.4, 1.5, math.nan, math.inf, "0.4", True])
def test_cost_model_mfu(mfu: object) -> None:
    with pytest.raises(ValueError, match=r"^mfu must be a finite number in \[0.001, 1\]"):
        CostModel(get_shape("llama-3-8b"), get_hardware("h100-sxm"), mfu)  # type: ignore[arg-type]


@pytest.mark.parametrize("field,value", [
    ("block_size", 10**23), ("block_size", 0), ("block_size", math.nan), ("block_size", 65_537),
    ("window", 0), ("window", math.nan), ("window", "32"),
    ("replicas", 10**12), ("replicas", 1_025), ("replicas", 0), ("replicas", math.inf),
    ("max_running", 0), ("max_running", math.nan), ("max_running", 1.5),
    ("ageing_tokens_per_s", math.nan), ("ageing_tokens_per_s", math.inf),
    ("ageing_tokens_per_s", -1.0), ("ageing_tokens_per_s", 1e300),
    ("capacity_tokens", 10**12), ("capacity_tokens", 0), ("capacity_tokens", math.nan),
    ("seed", -1), ("balance_requests", -1),
])
def test_sim_config_names_the_argument(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        SimConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [math.nan, math.inf, -1.0, 1e300])
def test_ageing_policy_names_the_argument(rate: float) -> None:
    with pytest.raises(ValueError, match=r"^ageing_tokens_per_s must be"):
        make_policy("lpm-ageing", ageing_tokens_per_s=rate)


def test_parse_sizes_beyond_a_float_are_value_errors() -> None:
    with pytest.raises(ValueError, match="too large"):
        parse_tokens(NINES)
    with pytest.raises(ValueError, match="too large"):
        parse_bytes(NINES + "GiB")


def test_unlimited_pool_does_not_grow_with_max_running() -> None:
    # A max_running above the request count means no limit; the pool that never evicts is
    # sized by the requests, not by 10**12 (which made the block cache hang).
    w = _tiny()
    one_each = unlimited_capacity(w, SimConfig(max_running=len(w.requests)))
    assert unlimited_capacity(w, SimConfig(max_running=10**12)) == one_each
    assert one_each < 10**6


def test_capacity_above_the_workload_is_simulated_as_unlimited() -> None:
    w = _tiny()
    big = simulate(w, SimConfig(cache="block", capacity_tokens=simulator.MAX_CAPACITY_TOKENS))
    free = simulate(w, SimConfig(cache="block", capacity_tokens=None))
    assert big.capacity_tokens == simulator.MAX_CAPACITY_TOKENS  # reported as given
    assert (big.hit_rate, big.mean_prefill_s, big.evicted_tokens) == (
        free.hit_rate, free.mean_prefill_s, 0)


def test_pool_blocks_bound_in_the_api() -> None:
    w = _tiny()
    cfg = SimConfig(cache="block", block_size=1, replicas=simulator.MAX_REPLICAS,
                    max_running=10**6)
    with pytest.raises(ValueError, match="MAX_POOL_BLOCKS"):
        simulate(w, cfg)


def test_bounds_reuse_the_breakeven_and_usage_constants() -> None:
    from promptcache.usage.breakeven import MAX_SPAN_SECONDS
    from promptcache.usage.record import MAX_TOKENS

    assert workload.MAX_DURATION_S == MAX_SPAN_SECONDS
    assert simulator.MAX_CAPACITY_TOKENS == MAX_TOKENS
    assert schedulers.MAX_AGEING_TOKENS_PER_S == MAX_TOKENS
    assert costs.MIN_MFU == 0.001
