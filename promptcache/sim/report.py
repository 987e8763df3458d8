"""Render simulation results: a text table, a JSON document, or a matplotlib plot.

One emitter per format. The text table has one row per (cache, capacity, policy)::

    cache  capacity      KV GiB  policy      hit rate  prefill ms  TTFT ms  p99 TTFT ms  max wait s
    block  11,851         1.45   fcfs         41.5 %      52.6      1146.0     ...
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptcache.sim.costs import CostModel
from promptcache.sim.simulator import SimConfig, SimResult
from promptcache.sim.workload import Workload

__all__ = ["SimReport", "render_json", "render_plot", "render_text"]


@dataclass(frozen=True, slots=True)
class SimReport:
    """Everything a report shows: the workload, the fixed config, and one result per run."""

    workload: Workload
    working_set_tokens: int
    base: SimConfig
    results: Sequence[SimResult]

    @property
    def cost(self) -> CostModel:
        return self.base.cost


def _header(report: SimReport) -> list[str]:
    cost, w, base = report.cost, report.workload, report.base
    shape, hw = cost.shape, cost.hardware
    return [
        f"workload: {w.description}",
        f"  {len(w.requests)} requests, {w.prompt_tokens:,} prompt tokens, "
        f"{w.output_tokens:,} output tokens, working set {report.working_set_tokens:,} tokens",
        f"model: {shape.name} (P = {shape.params / 1e9:.2f}e9, L={shape.layers}, h={shape.heads}, "
        f"d={shape.head_dim}; KV {shape.kv_bytes_per_token:,} bytes/token)",
        f"hardware: {hw.name}, peak {hw.peak_flops / 1e12:,.0f} TFLOP/s dense BF16 x MFU "
        f"{cost.mfu:g}; HBM {hw.hbm_bytes_per_s / 1e12:g} TB/s",
        "prefill: F(n, m) = 2P(n - m) + 2 L h d (n^2 - m^2) FLOPs / (peak x MFU)",
        f"server: {base.replicas} replica(s), routing {base.routing}, max running "
        f"{base.max_running}, window {base.window}, block size {base.block_size}",
    ]


def render_text(report: SimReport) -> str:
    """The header and a fixed-width table, one row per run."""
    lines = _header(report)
    lines.append("")
    cols = ("cache", "capacity tok", "KV GiB", "policy", "hit rate", "prefill ms",
            "TTFT ms", "p99 TTFT ms", "max wait s", "evicted tok")
    rows: list[tuple[str, ...]] = []
    for r in report.results:
        cap = "unlimited" if r.capacity_tokens is None else f"{r.capacity_tokens:,}"
        gib = "-" if r.capacity_bytes is None else f"{r.capacity_bytes / 2**30:.2f}"
        rows.append((
            r.cache, cap, gib, r.policy, f"{100 * r.hit_rate:.1f} %",
            f"{1000 * r.mean_prefill_s:.1f}", f"{1000 * r.mean_ttft_s:.1f}",
            f"{1000 * r.p99_ttft_s:.1f}", f"{r.max_wait_s:.1f}", f"{r.evicted_tokens:,}",
        ))
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    left = {0, 3}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines.append(fmt(cols))
    lines.extend(fmt(row) for row in rows)
    if report.results:
        uncached = report.results[0].mean_prefill_uncached_s
        lines.append("")
        lines.append(f"mean prefill with no cache: {1000 * uncached:.1f} ms per request")
        note = _same_policies_note(report.results)
        if note:
            lines.append(note)
    return "\n".join(lines) + "\n"


def _same_policies_note(results: Sequence[SimResult]) -> str | None:
    """A note when several policies were run and gave the same figures at every cache and
    capacity: a policy only chooses among requests that wait together, so identical rows
    mean the load never queued them (not that scheduling does not matter)."""
    groups: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    for r in results:
        row = r.to_dict()
        del row["policy"]
        groups.setdefault((r.cache, r.capacity_tokens), []).append(row)
    if not groups or all(len(rows) < 2 for rows in groups.values()):
        return None
    if any(row != rows[0] for rows in groups.values() for row in rows):
        return None
    return ("note: every policy gave the same figures: a policy only picks among requests "
            "that wait together, and this load did not queue them (a smaller --max-running "
            "or a busier workload does)")


def render_json(report: SimReport) -> str:
    """A JSON document: ``workload``, ``model``, ``hardware``, ``server``, ``results``."""
    cost, w, base = report.cost, report.workload, report.base
    doc: dict[str, Any] = {
        "workload": {
            "description": w.description,
            "seed": w.seed,
            "requests": len(w.requests),
            "prompt_tokens": w.prompt_tokens,
            "output_tokens": w.output_tokens,
            "working_set_tokens": report.working_set_tokens,
        },
        "model": {
            "name": cost.shape.name,
            "params": cost.shape.params,
            "layers": cost.shape.layers,
            "heads": cost.shape.heads,
            "kv_heads": cost.shape.kv_heads,
            "head_dim": cost.shape.head_dim,
            "kv_bytes_per_token": cost.shape.kv_bytes_per_token,
            "source": cost.shape.source,
        },
        "hardware": {
            "name": cost.hardware.name,
            "peak_flops": cost.hardware.peak_flops,
            "hbm_bytes_per_s": cost.hardware.hbm_bytes_per_s,
            "mfu": cost.mfu,
            "source": cost.hardware.source,
        },
        "server": {
            "replicas": base.replicas,
            "routing": base.routing,
            "max_running": base.max_running,
            "window": base.window,
            "block_size": base.block_size,
            "ageing_tokens_per_s": base.ageing_tokens_per_s,
        },
        "results": [r.to_dict() for r in report.results],
    }
    return json.dumps(doc, indent=2) + "\n"


def _tick_labels(caps: Sequence[int]) -> list[str]:
    """Labels of the capacity ticks (sorted, > 0): a tick within a factor 1.3 of the last
    labelled one stays unlabelled, so near-equal capacities do not print over each other."""
    labels: list[str] = []
    last: int | None = None
    for c in caps:
        if last is None or c >= 1.3 * last:
            labels.append(f"{c:,}")
            last = c
        else:
            labels.append("")
    return labels


def render_plot(report: SimReport, path: str | Path) -> None:
    """Write a plot (PNG, SVG or PDF by the path's suffix; PNG otherwise): hit rate and mean
    prefill time against capacity, one line per cache/policy.

    Unlimited-capacity runs are drawn as dotted horizontal lines on both panels (one legend
    entry says so). The capacity axis is logarithmic; with no finite capacity (``--capacity
    unlimited`` alone) it is left linear and unlabelled, as only the levels mean anything.

    Raises:
        ImportError: matplotlib is not installed (``pip install 'promptcache[plot]'``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, (ax_hit, ax_pre) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[tuple[str, str], list[SimResult]] = {}
    for r in report.results:
        series.setdefault((r.cache, r.policy), []).append(r)
    for (cache, policy), runs in series.items():
        label = f"{cache} / {policy}"
        style = "-" if cache == "radix" else "--"
        finite = sorted((r for r in runs if r.capacity_tokens is not None),
                        key=lambda r: r.capacity_tokens or 0)
        xs = [r.capacity_tokens for r in finite]
        line = ax_hit.plot(xs, [100 * r.hit_rate for r in finite], style, marker="o", label=label)
        ax_pre.plot(xs, [1000 * r.mean_prefill_s for r in finite], style, marker="o",
                    color=line[0].get_color(), label=label)
        for r in runs:
            if r.capacity_tokens is None:
                ax_hit.axhline(100 * r.hit_rate, linestyle=":", color=line[0].get_color())
                ax_pre.axhline(1000 * r.mean_prefill_s, linestyle=":",
                               color=line[0].get_color())
    caps = sorted({r.capacity_tokens for r in report.results if r.capacity_tokens is not None})
    finite_any = bool(caps)
    if any(r.capacity_tokens is None for r in report.results):
        ax_hit.plot([], [], ":", color="grey", label="dotted: unlimited capacity")
    for ax in (ax_hit, ax_pre):
        if finite_any:  # a log axis with no positive x made savefig raise (unlimited alone)
            ax.set_xscale("log")
            ax.set_xlabel("KV capacity per replica (tokens)")
            # ticks at the capacities simulated (log minor labels overlapped on a narrow sweep)
            ax.set_xticks(caps, _tick_labels(caps))
            ax.xaxis.set_minor_locator(NullLocator())
        else:
            ax.set_xticks([])
            ax.set_xlabel("unlimited capacity (no eviction)")
        ax.grid(True, alpha=0.3)
    ax_hit.set_ylabel("token-weighted hit rate (%)")
    ax_pre.set_ylabel("mean prefill time (ms)")
    ax_hit.legend(fontsize=8)
    cost = report.cost
    fig.suptitle(f"{report.workload.description}\n{cost.shape.name} on {cost.hardware.name}, "
                 f"MFU {cost.mfu:g}", fontsize=9)
    fig.tight_layout()
    from promptcache._cliutil import PLOT_FORMATS

    fig.savefig(str(path), dpi=110,
                format=PLOT_FORMATS.get(Path(path).suffix.lower(), "png"))
    plt.close(fig)
