"""``promptcache simulate``: hit rate and prefill time per cache, capacity and scheduling policy.

Exit codes: 0 success; 2 usage or input error (one line naming the file or option and the
reason, no traceback).

Every numeric option is checked by the Python API behind it (:class:`WorkloadConfig`,
:class:`SimConfig`, :class:`CostModel`), whose ValueError names the argument and gives the
range; the command swaps the argument for the option (``duration_s`` -> ``--duration``). The
bounds on the work are named constants: :data:`~promptcache.sim.workload.MAX_CONVERSATIONS`,
:data:`~promptcache.sim.simulator.MAX_REPLICAS`,
:data:`~promptcache.sim.simulator.MAX_CAPACITY_TOKENS`,
:data:`~promptcache.sim.simulator.MAX_POOL_BLOCKS` (and plausibility bounds on the duration,
adapters, block size, ageing and MFU). ``--window`` and ``--max-running`` have no upper
bound: a value above the queue or the request count means no limit.

``--conversations``, ``--duration`` and ``--adapters`` shape the synthetic workload; given
with ``--replay`` they are a usage error (exit 2), not silently ignored. An empty ``--cache``
or ``--policy`` is a usage error too.

A ``--replay`` file's values get the same bounds (:func:`~promptcache.sim.workload.read_replay`:
``arrival_s`` as ``--duration``, token counts by
:data:`~promptcache.sim.workload.MAX_REQUEST_TOKENS`); a bad value is reported as
``FILE:LINE: 'field' ...``. A block pool the replay itself sizes (``--capacity unlimited``, or
a capacity above what it can fill) that is over ``MAX_POOL_BLOCKS`` is reported against the
file and its largest request's line, not the options.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import click
from click.core import ParameterSource

from promptcache._cliutil import fail
from promptcache._errors import InputError
from promptcache.sim.costs import (
    HARDWARE,
    MIN_MFU,
    MODEL_SHAPES,
    CostModel,
    get_hardware,
    get_shape,
    parse_bytes,
    parse_tokens,
)
from promptcache.sim.report import SimReport, render_json, render_plot, render_text
from promptcache.sim.schedulers import MAX_AGEING_TOKENS_PER_S, POLICIES
from promptcache.sim.simulator import (
    MAX_BLOCK_SIZE,
    MAX_CAPACITY_TOKENS,
    MAX_POOL_BLOCKS,
    MAX_REPLICAS,
    SimConfig,
    check_pool,
    pool_tokens,
    sweep,
    working_set_tokens,
)
from promptcache.sim.workload import (
    MAX_ADAPTERS,
    MAX_CONVERSATIONS,
    MAX_DURATION_S,
    MIN_DURATION_S,
    Workload,
    WorkloadConfig,
    generate_workload,
    read_replay,
)

__all__ = [
    "DEFAULT_CAPACITIES",
    "VLLM_MAX_NUM_SEQS",
    "parse_capacity",
    "parse_max_running",
    "simulate_command",
]

VLLM_MAX_NUM_SEQS = 256
"""vLLM's default ``--max-num-seqs`` (sequences per iteration), the cap of ``--max-running
auto``. Source: https://docs.vllm.ai/en/v0.6.3.post1/models/engine_args.html"""

DEFAULT_CAPACITIES = ("2%", "5%", "10%", "25%", "unlimited")
"""Default capacity sweep: fractions of the workload's working set, then no eviction."""


def parse_capacity(spec: str, *, working_set: int, kv_bytes_per_token: int) -> int | None:
    """Parse one capacity into tokens (``None`` = unlimited).

    Forms: ``unlimited`` (also ``inf`` and ``none``: a pool that never evicts); ``5%`` (of the
    working set, in tokens); a byte size with a unit (``16GiB``, ``80GB``: divided by the
    model's KV bytes per token); a token count (``200000``, ``200k``, ``1.5M``).

    Raises:
        ValueError: none of these forms, a NaN or infinite percentage, below one token, or
            over :data:`~promptcache.sim.simulator.MAX_CAPACITY_TOKENS` tokens.
    """
    text = spec.strip()
    if text.lower() in ("unlimited", "inf", "none"):
        return None
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"bad capacity {spec!r}") from None
        if not math.isfinite(pct) or pct <= 0:
            raise ValueError(f"capacity {spec!r}: a percentage of the working set must be a "
                             "finite number > 0")
        share = working_set * pct / 100.0
        if share > MAX_CAPACITY_TOKENS:
            raise ValueError(f"capacity {spec!r} is {share:,.0f} tokens, over "
                             f"MAX_CAPACITY_TOKENS = {MAX_CAPACITY_TOKENS:,} (an implausible "
                             "pool; 'unlimited' never evicts)")
        tokens = int(share)
    elif text.lower().endswith("b"):
        tokens = parse_bytes(text) // kv_bytes_per_token  # ModelShape.tokens_for_bytes
    else:
        tokens = parse_tokens(text)
    if tokens < 1:
        raise ValueError(f"capacity {spec!r} is below one token")
    if tokens > MAX_CAPACITY_TOKENS:
        raise ValueError(f"capacity {spec!r} is {tokens:,} tokens, over MAX_CAPACITY_TOKENS = "
                         f"{MAX_CAPACITY_TOKENS:,} (an implausible pool; 'unlimited' never "
                         "evicts)")
    return tokens


def parse_max_running(spec: str, cost: CostModel) -> int:
    """``--max-running``: a positive integer, or ``auto`` =
    ``min(cost.memory_bound_batch(), VLLM_MAX_NUM_SEQS)``. No upper bound: a value above the
    number of requests means no limit (the KV pool still admits what fits).

    Raises:
        ValueError: neither form, or below 1.
    """
    text = spec.strip().lower()
    if text == "auto":
        return min(cost.memory_bound_batch(), VLLM_MAX_NUM_SEQS)
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"bad --max-running {spec!r}; use a positive integer or auto") from None
    if value < 1:
        raise ValueError(f"--max-running must be at least 1, got {value}")
    return value


#: The option of each argument the Python API names in its ValueError.
_OPTION_OF = {
    "conversations": "--conversations", "duration_s": "--duration", "adapters": "--adapters",
    "window": "--window", "ageing_tokens_per_s": "--ageing", "block_size": "--block-size",
    "replicas": "--replicas", "max_running": "--max-running", "mfu": "--mfu",
    "seed": "--seed", "capacity_tokens": "--capacity",
}


def _as_option(exc: ValueError) -> Exception:
    """A ValueError whose message starts with an API argument's name, as a click usage error
    naming the option (exit 2); any other ValueError unchanged."""
    name, _, rest = str(exc).partition(" ")
    if name in _OPTION_OF:
        return click.BadParameter(rest, param_hint=_OPTION_OF[name])
    return exc


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def _replay_pool_reason(workload: Workload, config: SimConfig, pool: int) -> str:
    """Why a replay's block pools are over :data:`MAX_POOL_BLOCKS` when the replay, not the
    options, sized the pool (``--capacity unlimited``, or a capacity above what the replay
    can fill): names the largest request's line and its KV tokens."""
    big = max(workload.requests,
              key=lambda r: (max(r.prompt_len + r.output_tokens, r.insert_len), -r.index))
    kv = max(big.prompt_len + big.output_tokens, big.insert_len)
    blocks = config.replicas * (pool // config.block_size)
    return (f"the replay needs a KV pool of {pool:,} tokens per replica to never evict "
            f"(largest request: line {big.conversation}, {kv:,} tokens of prompt + output); "
            f"{config.replicas:,} such pool{'s' if config.replicas > 1 else ''} in blocks of "
            f"{config.block_size:,} hold {blocks:,} blocks, over MAX_POOL_BLOCKS = "
            f"{MAX_POOL_BLOCKS:,} (every block is made up front): use --cache radix, a larger "
            "--block-size, a smaller --capacity (at least the largest request's KV), or a "
            "replay with smaller requests")


@click.command("simulate")
@click.option("--replay", "replay", type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL of requests with arrival times (instead of the synthetic workload).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the synthetic workload and of random routing (an integer >= 0).")
@click.option("--conversations", default=400, show_default=True, type=int,
              help=f"Synthetic conversations, 1 to {MAX_CONVERSATIONS:,} (a bound on the "
                   "work: simulate a sample).")
@click.option("--duration", default=3600.0, show_default=True, type=float,
              help=f"Seconds over which conversations start, {MIN_DURATION_S:g} to "
                   f"{MAX_DURATION_S:.0f} (the year 9999).")
@click.option("--adapters", default=1, show_default=True, type=int,
              help=f"LoRA adapters (the adapter id is part of the cache key), 1 to "
                   f"{MAX_ADAPTERS:,}.")
@click.option("--cache", "caches", default="block,radix", show_default=True,
              help="Caches to compare: block, radix (comma-separated).")
@click.option("--capacity", "capacities", multiple=True,
              help="KV pool per replica: tokens (200k), bytes (16GiB), % of the working set "
                   f"(5%), at most {MAX_CAPACITY_TOKENS:,} tokens; or unlimited (also inf: "
                   "a pool that never evicts); repeat or comma-separate. Default: "
                   + ",".join(DEFAULT_CAPACITIES))
@click.option("--policy", "policies", default=",".join(POLICIES), show_default=True,
              help="Scheduling policies: fcfs, lpm, lpm-ageing (comma-separated).")
@click.option("--window", default=32, show_default=True, type=int,
              help="Waiting requests a policy may choose from (>= 1; more than wait = all).")
@click.option("--ageing", default=100.0, show_default=True, type=float,
              help=f"lpm-ageing: priority tokens gained per second waited, 0 to "
                   f"{MAX_AGEING_TOKENS_PER_S:g}.")
@click.option("--block-size", default=16, show_default=True, type=int,
              help=f"Tokens per block (block cache), 1 to {MAX_BLOCK_SIZE:,}.")
@click.option("--replicas", default=1, show_default=True, type=int,
              help=f"Replicas, each with its own KV pool, 1 to {MAX_REPLICAS:,} (the block "
                   f"cache's pools hold at most {MAX_POOL_BLOCKS:,} blocks in all).")
@click.option("--routing", type=click.Choice(["affinity", "random"]), default="affinity",
              show_default=True, help="How requests are spread over replicas.")
@click.option("--max-running", default="auto", show_default=True, metavar="N|auto",
              help="Requests a replica runs at once (continuous batching, like vLLM's "
                   "--max-num-seqs). auto: the largest decode batch that is still memory-bound "
                   "on this model and hardware (weight bytes x peak x MFU / (2P x HBM), e.g. "
                   "119 for llama-3-70b on h100-sxm), capped at vLLM's default of "
                   f"{VLLM_MAX_NUM_SEQS}; up to it, batching costs no decode time, which is "
                   "what this model assumes. The KV pool (--capacity) may admit fewer. "
                   "1 = a batch-1 server (every request queues behind the previous one). "
                   "No upper bound: more than the requests = no limit.")
@click.option("--model", default="llama-3-8b", show_default=True,
              type=click.Choice(sorted(MODEL_SHAPES)), help="Model shape (KV bytes, FLOPs).")
@click.option("--hardware", default="h100-sxm", show_default=True,
              type=click.Choice(sorted(HARDWARE)), help="Accelerator (peak FLOP/s, HBM).")
@click.option("--mfu", default=0.4, show_default=True, type=float,
              help=f"Model FLOP utilisation of prefill, {MIN_MFU:g} to 1.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--plot", "plot", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write a plot of hit rate and prefill time against capacity (.png, "
                   ".svg or .pdf: the suffix picks the format).")
def simulate_command(replay: Path | None, seed: int, conversations: int, duration: float,
                     adapters: int, caches: str, capacities: tuple[str, ...], policies: str,
                     window: int, ageing: float, block_size: int, replicas: int, routing: str,
                     max_running: str, model: str, hardware: str, mfu: float, fmt: str,
                     plot: Path | None) -> None:
    """Simulate prefix caches and cache-aware schedulers on a chat workload.

    Prints token-weighted hit rate, mean prefill time (prefill FLOP model at the stated
    hardware peak and MFU), TTFT and the maximum queueing wait for every cache, capacity and
    policy.
    """
    if plot is not None:
        from promptcache._cliutil import plot_target_problem

        problem = plot_target_problem(str(plot))
        if problem is not None:  # before the simulation: a bad target costs nothing
            fail(f"{plot}: {problem}")
    try:
        kinds = _split((caches,))
        if not kinds:  # '--cache ""' ran nothing (JSON: no results) or failed in the table
            raise click.BadParameter("no cache given; use block, radix or both",
                                     param_hint="--cache")
        for kind in kinds:
            if kind not in ("block", "radix"):
                raise click.BadParameter(f"unknown cache {kind!r}; use block, radix",
                                         param_hint="--cache")
        pols = _split((policies,))
        if not pols:
            raise click.BadParameter(f"no policy given; use {', '.join(POLICIES)}",
                                     param_hint="--policy")
        for pol in pols:
            if pol not in POLICIES:
                raise click.BadParameter(f"unknown policy {pol!r}; use {', '.join(POLICIES)}",
                                         param_hint="--policy")
        # Every numeric option first (cheap), so a bad one costs no workload generation.
        try:
            wcfg = WorkloadConfig(conversations=conversations, duration_s=duration,
                                  adapters=adapters)
            cost = CostModel(get_shape(model), get_hardware(hardware), mfu)
            try:
                running = parse_max_running(max_running, cost)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--max-running") from None
            base = SimConfig(window=window, block_size=block_size, replicas=replicas,
                             routing="random" if routing == "random" else "affinity",
                             max_running=running, ageing_tokens_per_s=ageing, cost=cost,
                             seed=seed)
        except ValueError as exc:
            raise _as_option(exc) from None
        workload: Workload
        if replay is not None:
            ctx = click.get_current_context()
            ignored = [f"--{name}" for name in ("conversations", "duration", "adapters")
                       if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT]
            if ignored:  # they shape the synthetic workload only: a replay ignored them
                raise click.UsageError(
                    f"{', '.join(ignored)} shape the synthetic workload and do nothing with "
                    "--replay (a replay's requests, arrival times and 'adapter' ids come "
                    "from its lines); drop " + ("them" if len(ignored) > 1 else "it"))
            workload = read_replay(replay)
        else:
            workload = generate_workload(wcfg, seed=seed)
        working_set = working_set_tokens(workload)
        specs = _split(capacities) or list(DEFAULT_CAPACITIES)
        try:
            caps = [parse_capacity(s, working_set=working_set,
                                   kv_bytes_per_token=cost.shape.kv_bytes_per_token)
                    for s in specs]
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--capacity") from None
        # The smallest pool that admits the largest request: its KV in whole blocks (the
        # block cache rounds the pool down to blocks; the radix tree needs the KV itself).
        unit = block_size if "block" in kinds else 1
        need = -(-workload.max_request_tokens // unit) * unit
        if not _split(capacities):
            # Default sweep on a small workload (a short replay log): a share of the working set
            # can fall below one request's KV; raise those capacities to the smallest that
            # admits every request, and keep each capacity once.
            raised = [c if c is None or c >= need else need for c in caps]
            if raised != caps:
                click.echo(f"note: default capacities below the largest request's KV raised to "
                           f"{need:,} tokens", err=True)
            caps = list(dict.fromkeys(raised))
        small = [c for c in caps if c is not None and c < need]
        if small:
            raise click.BadParameter(
                f"{small[0]:,} tokens is below the largest request's KV ({need:,} tokens"
                + (f": {workload.max_request_tokens:,} of prompt + output in blocks of "
                   f"{block_size:,})" if need != workload.max_request_tokens else ")"),
                param_hint="--capacity")
        if "block" in kinds:
            for cap in caps:
                probe = dataclasses.replace(base, cache="block", capacity_tokens=cap)
                pool = pool_tokens(workload, probe, working_set)
                try:
                    check_pool(probe, pool)
                except ValueError as exc:
                    if replay is not None and (cap is None or pool < cap):
                        # the pool is the size this replay needs, not one the options set
                        raise InputError(str(replay), _replay_pool_reason(
                            workload, probe, pool)) from None
                    raise click.BadParameter(
                        str(exc), param_hint="--replicas / --capacity / --block-size"
                    ) from None
        results = sweep(workload, base, caches=kinds, capacities=caps, policies=pols)
    except (InputError, ValueError) as exc:
        fail(str(exc))
    report = SimReport(workload, working_set, base, results)
    click.echo(render_json(report) if fmt == "json" else render_text(report), nl=False)
    if plot is not None:
        try:
            render_plot(report, plot)
        except ImportError:
            fail("--plot needs matplotlib: pip install 'promptcache[plot]'")
        except OSError as exc:
            fail(f"{plot}: cannot write the plot: {exc}")
