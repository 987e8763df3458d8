"""Bench: block hashing, prefix lookup and cache bookkeeping cost of the local prefix cache.

Prints (never asserts):
  * hashing ns/token (``block_hashes`` over a prompt, SHA-256 and BLAKE2b),
  * lookup ns/token (``match_prefix`` of a fully cached prompt: hash + map + verify),
  * cache bookkeeping per request (allocate + commit + free, pure Python) and the KV copies
    (gather of hit blocks + write of new blocks), each as % of the model's prefill time of the
    same prompt.

Targets (issue 3): hashing and lookup <= 150 ns/token; bookkeeping <= 0.3 % of prefill.

    .venv/bin/python bench/block_hash.py [--tokens 2048] [--repeat 50] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2048, help="prompt length (tokens)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", type=int, default=None, help="torch threads for the prefill")
    ap.add_argument("--no-model", action="store_true", help="skip the prefill comparison")
    args = ap.parse_args()

    from promptcache.local.blocks import BlockPool, KVCacheManager
    from promptcache.local.hashing import block_hashes, root_hash

    n, bs = args.tokens, args.block_size
    rng = random.Random(0)
    toks = [rng.randrange(200_000) for _ in range(n)]
    print(f"prompt: {n} tokens, block size {bs} ({n // bs} full blocks)")
    print(f"{'operation':<44}{'ns/token':>10}{'target':>10}")
    for fn in ("sha256", "blake2b"):
        root = root_hash(model_id="m", block_size=bs, hash_fn=fn)  # type: ignore[arg-type]
        s = best_of(lambda: block_hashes(toks, root=root, block_size=bs, hash_fn=fn), args.repeat)  # type: ignore[arg-type]  # noqa: B023
        print(f"{'hash (block_hashes, ' + fn + ')':<44}{s / n * 1e9:>10.1f}{'<= 150':>10}")

    m = KVCacheManager(BlockPool(4 * n // bs + 8, bs), model_id="m")
    m.allocate("warm", toks)
    m.commit("warm", toks)
    m.free("warm")
    probe = [*toks, 1]  # the whole prompt is cached; +1 so every block may be reused
    assert m.match_prefix(probe).num_cached_tokens == n
    s = best_of(lambda: m.match_prefix(probe), args.repeat)
    print(f"{'lookup, all blocks hit (match_prefix)':<44}{s / n * 1e9:>10.1f}{'<= 150':>10}")
    miss = [rng.randrange(200_000) for _ in range(n)]
    s = best_of(lambda: m.match_prefix(miss), args.repeat)
    print(f"{'lookup, first block misses':<44}{s / n * 1e9:>10.1f}{'':>10}")

    counter = iter(range(10**9))
    fresh_prompts = iter(
        [[rng.randrange(200_000) for _ in range(n)] for _ in range(args.repeat + 1)]
    )

    def request_miss() -> None:
        rid = f"r{next(counter)}"
        fresh = next(fresh_prompts)
        m.allocate(rid, fresh)
        m.commit(rid, fresh)
        m.free(rid)

    def request_hit() -> None:
        rid = f"r{next(counter)}"
        m.allocate(rid, probe)
        m.commit(rid, probe)
        m.free(rid)

    t_miss = best_of(request_miss, args.repeat)
    t_hit = best_of(request_hit, args.repeat)
    print(f"{'bookkeeping per request, miss (alloc+commit+free)':<44}{t_miss / n * 1e9:>10.1f}")
    print(f"{'bookkeeping per request, hit  (alloc+commit+free)':<44}{t_hit / n * 1e9:>10.1f}")

    if args.no_model:
        return
    import torch

    from promptcache.local.engine import Engine
    from promptcache.local.model import ModelRunner

    if args.threads:
        torch.set_num_threads(args.threads)
    runner = ModelRunner(vocab_size=200_019)
    eng = Engine(runner, num_blocks=4 * n // bs + 8, mode="fast")
    ids = [t % runner.shape.vocab_size for t in toks]

    def prefill() -> None:
        runner.forward(ids, runner.new_cache())

    t_prefill = best_of(prefill, max(3, args.repeat // 10))
    cache = runner.new_cache()
    runner.forward(ids, cache)
    kv = runner.cache_kv(cache)
    block_ids = list(range(n // bs))
    starts = [i * bs for i in block_ids]
    t_write = best_of(lambda: eng.storage.write(block_ids, starts, kv), args.repeat)
    t_gather = best_of(lambda: eng.storage.gather(block_ids), args.repeat)
    print()
    print(
        f"model: {runner.model_id} (hidden {runner.shape.hidden_size}, {runner.shape.layers} "
        f"layers), torch threads {torch.get_num_threads()}"
    )
    print(f"prefill of {n} tokens (one forward): {t_prefill * 1e3:.1f} ms")
    print(f"{'cost':<44}{'ms':>10}{'% prefill':>11}{'target':>10}")
    for name, t, target in (
        ("bookkeeping, miss request", t_miss, "<= 0.3 %"),
        ("bookkeeping, hit request", t_hit, "<= 0.3 %"),
        ("KV write of all blocks (storage.write)", t_write, ""),
        ("KV gather of all blocks (storage.gather)", t_gather, ""),
    ):
        print(f"{name:<44}{t * 1e3:>10.3f}{t / t_prefill * 100:>10.3f}%{target:>10}")


if __name__ == "__main__":
    main()
