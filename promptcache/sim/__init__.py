"""Prefix-cache simulator: workloads, a radix tree, the backend's block cache, schedulers.

Compares the local backend's block-hash LRU cache (:mod:`promptcache.local.blocks`, the same
class) with an SGLang-style token radix tree under FCFS, longest-prefix-first and
longest-prefix-first-with-ageing scheduling, over capacities given in tokens or in bytes of a
named model shape, with N adapters and R replicas. Pure Python: no torch import.

    >>> from promptcache.sim import SimConfig, generate_workload, simulate
    >>> result = simulate(generate_workload(seed=0), SimConfig(cache="radix", policy="lpm"))
"""

from __future__ import annotations

from promptcache.sim.caches import BlockHashMemo, BlockSimCache, RadixSimCache, SimCache
from promptcache.sim.costs import CostModel, Hardware, ModelShape, get_hardware, get_shape
from promptcache.sim.radix import MatchResult, RadixCache, RadixKey, TreeNode
from promptcache.sim.schedulers import POLICIES, SchedulePolicy, make_policy
from promptcache.sim.simulator import SimConfig, SimResult, simulate, sweep, working_set_tokens
from promptcache.sim.workload import (
    Request,
    Workload,
    WorkloadConfig,
    generate_workload,
    read_replay,
)

__all__ = [
    "POLICIES",
    "BlockHashMemo",
    "BlockSimCache",
    "CostModel",
    "Hardware",
    "MatchResult",
    "ModelShape",
    "RadixCache",
    "RadixKey",
    "RadixSimCache",
    "Request",
    "SchedulePolicy",
    "SimCache",
    "SimConfig",
    "SimResult",
    "TreeNode",
    "Workload",
    "WorkloadConfig",
    "generate_workload",
    "get_hardware",
    "get_shape",
    "make_policy",
    "read_replay",
    "simulate",
    "sweep",
    "working_set_tokens",
]
