"""A discrete-event model of R replicas serving a workload through a prefix cache.

Model (deliberately small; every simplification is listed)::

    arrival ──route──► replica r: waiting queue ──policy(window)──► running (<= max_running)
                                                                       │ prefill + decode
    next turn arrives think_s later ◄── finish: insert prompt + reply ◄┘

- Each replica has its own KV pool of ``capacity_tokens`` holding its prefix cache and the
  KV of its running requests (:mod:`promptcache.sim.caches`). A request is admitted when its
  prompt and output fit next to the pinned KV of the running ones; otherwise it waits.
- Service time of a request = prefill ``F(n, m) / (peak x MFU)`` + decode (roofline, see
  :mod:`promptcache.sim.costs`). Up to ``max_running`` requests run at once per replica
  without slowing each other (decode is memory-bound, so a small batch costs about what one
  sequence costs); with the default ``max_running=1`` a replica is a batch-1 server.
- Routing (R > 1): ``random`` (seeded) or ``affinity``: the replica whose cache holds the
  longest prefix of the request, unless its load (waiting + running) exceeds the least
  loaded replica's by more than ``balance_requests``, then the least loaded one (the shape
  of SGLang's cache-aware router, whose load guard is a balance threshold).
- Metrics: token-weighted hit rate = cached prompt tokens / prompt tokens (a ratio of sums);
  prefill seconds per request; TTFT = queue wait + prefill; maximum wait (starvation).

A replica admits in policy order: when the request the policy picks does not fit, the replica
admits nothing more until a running request finishes (no skipping ahead to a smaller one).

Events at the same instant run finishes first (they free KV), then arrivals, each in the
order they were scheduled, so a run is deterministic for a seed.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from promptcache.sim._checks import check_count, check_seed
from promptcache.sim.caches import BlockHashMemo, SimCache, make_cache
from promptcache.sim.costs import CostModel, get_hardware, get_shape
from promptcache.sim.radix import RadixCache, RadixKey
from promptcache.sim.schedulers import SchedulePolicy, Waiting, check_ageing, make_policy
from promptcache.sim.workload import Request, Workload

__all__ = [
    "MAX_BLOCK_SIZE",
    "MAX_CAPACITY_TOKENS",
    "MAX_POOL_BLOCKS",
    "MAX_REPLICAS",
    "SimConfig",
    "SimResult",
    "check_pool",
    "pool_tokens",
    "simulate",
    "sweep",
    "unlimited_capacity",
    "working_set_tokens",
]

Routing = Literal["random", "affinity"]

#: The largest KV pool per replica (``capacity_tokens``, ``--capacity``): 10**9 tokens, the
#: bound :data:`promptcache.usage.record.MAX_TOKENS` puts on any token count (128 TB of
#: llama-3-8b KV, a thousand 8-GPU nodes). A plausibility bound, not a hardware fact; a pool
#: larger than the workload needs is simulated at the size that never evicts
#: (:func:`unlimited_capacity`), which gives the same figures.
MAX_CAPACITY_TOKENS = 10**9

#: The largest block (``block_size``, ``--block-size``, tokens): 65,536. vLLM's blocks are 8 to
#: 128 tokens; a block longer than every prompt caches nothing. The block hash stores the size
#: in 4 bytes (:func:`promptcache.local.hashing.root_hash`), so 2**32 would not even hash. A
#: plausibility bound.
MAX_BLOCK_SIZE = 65_536

#: The most replicas (``replicas``, ``--replicas``): 1,024. Affinity routing looks at every
#: replica's cache for every arrival and each replica has its own pool, so time and memory
#: grow with the count. A bound on the work, not a fact about clusters.
MAX_REPLICAS = 1_024

#: The most KV blocks the block cache's pools hold in one run, all replicas together
#: (``replicas x pool tokens / block_size``): 10**7. The backend's block pool makes every block
#: up front (about 150 bytes each, so about 1.5 GB at the limit). The pool of a capacity above
#: what the workload can use is sized at :func:`unlimited_capacity`. A bound on the work.
MAX_POOL_BLOCKS = 10**7


def _default_cost() -> CostModel:
    return CostModel(get_shape("llama-3-8b"), get_hardware("h100-sxm"), 0.4)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One simulation run.

    Attributes:
        cache: ``"block"`` (the backend's block-hash LRU cache) or ``"radix"``.
        capacity_tokens: KV pool per replica, tokens; ``None`` = never evicts.
        policy: ``"fcfs"``, ``"lpm"`` or ``"lpm-ageing"``.
        window: waiting requests a policy may choose from (oldest first).
        block_size: tokens per block (block cache only).
        replicas: number of replicas ``R``.
        routing: ``"random"`` or ``"affinity"`` (only matters for ``R > 1``).
        balance_requests: affinity routing's load guard (requests).
        max_running: requests a replica runs at once.
        ageing_tokens_per_s: priority gained per second waited (``lpm-ageing``).
        cost: model shape, hardware and MFU.
        seed: seed of random routing.

    Raises:
        ValueError: a field out of range; the message starts with its name and gives the
            range: ``capacity_tokens`` None or an integer in [1, :data:`MAX_CAPACITY_TOKENS`];
            ``window`` and ``max_running`` integers >= 1 (larger than the queue means no
            limit); ``block_size`` in [1, :data:`MAX_BLOCK_SIZE`]; ``replicas`` in [1,
            :data:`MAX_REPLICAS`]; ``balance_requests`` and ``seed`` integers >= 0;
            ``ageing_tokens_per_s`` a finite number in [0,
            :data:`~promptcache.sim.schedulers.MAX_AGEING_TOKENS_PER_S`]; an unknown cache,
            routing or policy.
    """

    cache: Literal["block", "radix"] = "block"
    capacity_tokens: int | None = None
    policy: str = "fcfs"
    window: int = 32
    block_size: int = 16
    replicas: int = 1
    routing: Routing = "affinity"
    balance_requests: int = 4
    max_running: int = 1
    ageing_tokens_per_s: float = 100.0
    cost: CostModel = field(default_factory=_default_cost)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.cache not in ("block", "radix"):
            raise ValueError(f"unknown cache {self.cache!r}")
        if self.capacity_tokens is not None:
            check_count("capacity_tokens", self.capacity_tokens, 1, MAX_CAPACITY_TOKENS,
                        "tokens (MAX_CAPACITY_TOKENS: an implausible pool)")
        check_count("window", self.window, 1)
        check_count("block_size", self.block_size, 1, MAX_BLOCK_SIZE,
                    "tokens (MAX_BLOCK_SIZE: a block longer than any prompt caches nothing)")
        check_count("replicas", self.replicas, 1, MAX_REPLICAS,
                    "(MAX_REPLICAS: time and memory grow with the count)")
        if self.routing not in ("random", "affinity"):
            raise ValueError(f"unknown routing {self.routing!r}")
        check_count("balance_requests", self.balance_requests, 0)
        check_count("max_running", self.max_running, 1)
        check_ageing(self.ageing_tokens_per_s)
        check_seed("seed", self.seed)
        make_policy(self.policy)  # validates the name


@dataclass(frozen=True, slots=True)
class SimResult:
    """Aggregates of one run. Units: tokens, seconds.

    Attributes:
        cache, policy, capacity_tokens (``None`` = unlimited), replicas, routing: the config.
        capacity_bytes: ``capacity_tokens x KV bytes per token`` of the model shape.
        requests: requests served.
        prompt_tokens, cached_tokens: sums over requests.
        hit_rate: ``cached_tokens / prompt_tokens`` (token-weighted).
        mean_prefill_s: mean prefill seconds per request with the cache.
        mean_prefill_uncached_s: the same without any cache (for scale).
        mean_ttft_s, p99_ttft_s: time to first token (wait + prefill).
        mean_wait_s, max_wait_s: queueing delay (max shows starvation).
        evicted_tokens: cached tokens evicted, all replicas.
        makespan_s: time the last request finished.
    """

    cache: str
    policy: str
    capacity_tokens: int | None
    capacity_bytes: int | None
    replicas: int
    routing: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    hit_rate: float
    mean_prefill_s: float
    mean_prefill_uncached_s: float
    mean_ttft_s: float
    p99_ttft_s: float
    mean_wait_s: float
    max_wait_s: float
    evicted_tokens: int
    makespan_s: float

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def working_set_tokens(workload: Workload) -> int:
    """Distinct tokens a cache needs to hold every request's prompt + reply at once.

    Computed exactly by inserting everything into a :class:`RadixCache` (adapters kept apart).
    """
    tree = RadixCache()
    for req in workload.requests:
        tree.insert(RadixKey(req.stream[: req.insert_len], req.adapter or None))
    return tree.total_size()


def unlimited_capacity(workload: Workload, config: SimConfig,
                       working_set: int | None = None) -> int:
    """A pool size at which nothing is ever evicted (an upper bound, in tokens).

    ``W + B * S + running * (largest request + B) + B`` with ``W`` the working set
    (:func:`working_set_tokens`), ``B`` the block size, ``S`` the number of distinct token
    streams and ``running`` the smaller of ``max_running`` and the number of requests:
    cached full blocks hold at most ``W`` distinct token prefixes plus, per stream, one block
    that straddles the point where the stream branches off the others; running requests add
    their reservations and a partial last block each.

    Args:
        working_set: ``working_set_tokens(workload)`` if already known; ``None`` computes it,
            ``-1`` takes the cheaper bound ``sum over streams of their longest insert``.
    """
    streams: dict[int, int] = {}
    for req in workload.requests:
        key = id(req.stream)
        streams[key] = max(streams.get(key, 0), req.insert_len)
    if working_set is None:
        working_set = working_set_tokens(workload)
    elif working_set < 0:
        working_set = sum(streams.values())
    bs = config.block_size
    per_request = workload.max_request_tokens + bs
    running = min(config.max_running, len(workload.requests))
    return working_set + bs * len(streams) + running * per_request + bs


@dataclass(slots=True)
class _Replica:
    index: int
    cache: SimCache
    waiting: list[Waiting] = field(default_factory=list)
    running: int = 0

    @property
    def load(self) -> int:
        return len(self.waiting) + self.running


_FINISH, _ARRIVAL = 0, 1


class _Run:
    """State of one simulation (internal)."""

    def __init__(self, workload: Workload, config: SimConfig, capacity: int,
                 memo: BlockHashMemo | None) -> None:
        self.workload = workload
        self.config = config
        self.policy: SchedulePolicy = make_policy(
            config.policy, ageing_tokens_per_s=config.ageing_tokens_per_s
        )
        if memo is None and config.cache == "block":
            memo = BlockHashMemo(config.block_size)  # shared by the replicas
        self.replicas = [
            _Replica(i, make_cache(config.cache, capacity, block_size=config.block_size,
                                   memo=memo, shape=config.cost.shape))
            for i in range(config.replicas)
        ]
        self.rng = random.Random(config.seed)
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.waits: list[float] = []
        self.ttfts: list[float] = []
        self.prefills: list[float] = []
        self.uncached: list[float] = []
        self.cached_tokens = 0
        self.prompt_tokens = 0
        self.makespan = 0.0

    def push(self, time_s: float, kind: int, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (time_s, kind, self.seq, a, b))

    def route(self, req: Request) -> _Replica:
        reps = self.replicas
        if len(reps) == 1:
            return reps[0]
        if self.config.routing == "random":
            return reps[min(int(self.rng.random() * len(reps)), len(reps) - 1)]
        least = min(reps, key=lambda r: r.load)
        best = max(reps, key=lambda r: (r.cache.peek(req), -r.load))
        if best.load - least.load > self.config.balance_requests:
            return least
        return best

    def dispatch(self, rep: _Replica, now: float) -> None:
        cfg = self.config
        cost = cfg.cost
        while rep.running < cfg.max_running and rep.waiting:
            window = rep.waiting[: cfg.window]
            i = 0 if len(window) == 1 else self.policy.pick(window, now, rep.cache.peek)
            entry = window[i]
            req = entry.request
            cached = rep.cache.start(req)
            if cached is None:
                if rep.running == 0:
                    raise ValueError(
                        f"request {req.index} needs {req.prompt_len + req.output_tokens} "
                        f"tokens of KV but the pool holds {rep.cache.capacity_tokens}: "
                        "raise the capacity"
                    )
                return  # wait for a running request to release its KV
            del rep.waiting[i]
            rep.running += 1
            n = req.prompt_len
            prefill = cost.prefill_seconds(n, cached)
            decode = cost.decode_seconds(n, req.output_tokens)
            wait = now - entry.enqueued_s
            self.waits.append(wait)
            self.ttfts.append(wait + prefill)
            self.prefills.append(prefill)
            self.uncached.append(cost.prefill_seconds(n, 0))
            self.cached_tokens += cached
            self.prompt_tokens += n
            self.push(now + prefill + decode, _FINISH, req.index, rep.index)

    def run(self) -> None:
        requests = self.workload.requests
        for req in self.workload.first_arrivals:
            assert req.arrival_s is not None
            self.push(req.arrival_s, _ARRIVAL, req.index)
        while self.events:
            now, kind, _, a, b = heapq.heappop(self.events)
            req = requests[a]
            if kind == _ARRIVAL:
                rep = self.route(req)
                rep.waiting.append(Waiting(req, now))
            else:
                rep = self.replicas[b]
                rep.cache.finish(req)
                rep.running -= 1
                self.makespan = now
                if req.next_turn is not None:
                    nxt = requests[req.next_turn]
                    self.push(now + nxt.think_s, _ARRIVAL, nxt.index)
            self.dispatch(rep, now)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[k]


def simulate(workload: Workload, config: SimConfig | None = None, *,
             memo: BlockHashMemo | None = None, working_set: int | None = None) -> SimResult:
    """Run one simulation.

    Args:
        workload: the requests.
        config: the run (defaults of :class:`SimConfig` when ``None``).
        memo: block-hash memo to share between runs of the same workload (block cache).
        working_set: ``working_set_tokens(workload)`` if already known (sizes the pool of an
            unlimited run).

    A ``capacity_tokens`` above what the workload can fill is simulated at a pool that never
    evicts (:func:`unlimited_capacity` with the cheap working-set bound): the figures are the
    same, and the block cache, which makes every block of its pool up front, stays small.

    Raises:
        ValueError: a request can never fit the pool (capacity below one request's KV), or
            the block cache's pools would hold more than :data:`MAX_POOL_BLOCKS` blocks
            (``replicas x pool tokens / block_size``).
    """
    cfg = config or SimConfig()
    capacity = pool_tokens(workload, cfg, working_set)
    check_pool(cfg, capacity)
    run = _Run(workload, cfg, capacity, memo)
    run.run()
    count = len(run.prefills)

    def mean(values: list[float]) -> float:
        return sum(values) / count if count else 0.0

    per_token = cfg.cost.shape.kv_bytes_per_token
    return SimResult(
        cache=cfg.cache,
        policy=cfg.policy,
        capacity_tokens=cfg.capacity_tokens,
        capacity_bytes=None if cfg.capacity_tokens is None else cfg.capacity_tokens * per_token,
        replicas=cfg.replicas,
        routing=cfg.routing,
        requests=count,
        prompt_tokens=run.prompt_tokens,
        cached_tokens=run.cached_tokens,
        hit_rate=run.cached_tokens / run.prompt_tokens if run.prompt_tokens else 0.0,
        mean_prefill_s=mean(run.prefills),
        mean_prefill_uncached_s=mean(run.uncached),
        mean_ttft_s=mean(run.ttfts),
        p99_ttft_s=_percentile(run.ttfts, 0.99),
        mean_wait_s=mean(run.waits),
        max_wait_s=max(run.waits, default=0.0),
        evicted_tokens=sum(r.cache.evicted_tokens for r in run.replicas),
        makespan_s=run.makespan,
    )


def pool_tokens(workload: Workload, config: SimConfig, working_set: int | None = None) -> int:
    """The KV pool of one replica as simulated (tokens): ``config.capacity_tokens``, capped at
    :func:`unlimited_capacity` with the cheap working-set bound (a larger pool never evicts
    either, so the figures are the same); for ``None``, :func:`unlimited_capacity`.

    Args:
        working_set: ``working_set_tokens(workload)`` if already known (``None`` capacity).
    """
    if config.capacity_tokens is None:
        return unlimited_capacity(workload, config, working_set)
    return min(config.capacity_tokens, unlimited_capacity(workload, config, -1))


def check_pool(config: SimConfig, tokens: int) -> None:
    """Refuse a block-cache run whose pools would hold over :data:`MAX_POOL_BLOCKS` blocks.

    Args:
        config: the run (only the block cache makes its blocks up front).
        tokens: the pool of one replica as simulated (:func:`pool_tokens`).

    Raises:
        ValueError: ``replicas x pool_tokens / block_size`` over :data:`MAX_POOL_BLOCKS`.
    """
    if config.cache != "block":
        return
    blocks = config.replicas * (tokens // config.block_size)
    if blocks > MAX_POOL_BLOCKS:
        raise ValueError(
            f"replicas x capacity: {config.replicas:,} block pools of {tokens:,} tokens "
            f"in blocks of {config.block_size} hold {blocks:,} blocks, over "
            f"MAX_POOL_BLOCKS = {MAX_POOL_BLOCKS:,} (every block is made up front): fewer "
            "replicas, a smaller capacity or a larger block size")


def sweep(workload: Workload, base: SimConfig, *, caches: Iterable[str],
          capacities: Iterable[int | None], policies: Iterable[str]) -> list[SimResult]:
    """Run every (cache, capacity, policy) combination; block hashes are computed once.

    Returns:
        Results in cache, capacity, policy order.

    Raises:
        ValueError: as :func:`simulate`; a run over :data:`MAX_POOL_BLOCKS` is refused before
            any run starts.
    """
    memo = BlockHashMemo(base.block_size)
    caps = list(capacities)
    working_set = working_set_tokens(workload) if None in caps else None
    pols = list(policies)
    kinds = list(caches)
    if "block" in kinds:
        for cap in caps:
            block = _replace(base, cache="block", capacity_tokens=cap)
            check_pool(block, pool_tokens(workload, block, working_set))
    out: list[SimResult] = []
    for kind in kinds:
        for cap in caps:
            for pol in pols:
                cfg = _replace(base, cache=kind, capacity_tokens=cap, policy=pol)
                out.append(simulate(workload, cfg, memo=memo, working_set=working_set))
    return out


def _replace(cfg: SimConfig, **changes: Any) -> SimConfig:
    import dataclasses

    return dataclasses.replace(cfg, **changes)
