"""The local inference engine: prefix-cache lookup, partial prefill, decode, block commit.

One request, under one lock (the API may call from several threads)::

    tokens ──► KVCacheManager.allocate ──► hit blocks (pinned) + new blocks
                     │
                     ├─► KVStorage.gather(hit blocks) (+ a kept partial tail) ──► DynamicCache
                     │
                     ├─► prefill tokens[reused:]   exact: block-aligned 16-token chunks
                     │                             fast:  one forward over the whole suffix
                     ├─► KVCacheManager.commit ──► KVStorage.write(new full blocks)
                     │   (+ TailStore.put at each keep_tail_at length)
                     ├─► decode: greedy or seeded sampling, stop token sequences or a
                     │           ``stop_when`` hook (the API's text matcher), EOS, max_tokens, cancel
                     └─► commit generated full blocks; free (tail first)

Exactness: in ``mode="exact"`` both the miss and the hit path prefill in chunks that end at
absolute multiples of ``block_size``. When every reused token comes from full blocks that an
earlier request prefilled as *prompt* tokens (a block-aligned prompt hit), a hit replays exactly
the computation a miss would have done after those blocks, and the last-position logits are
bit-identical (``torch.equal``; CPU fp32, tested). Two reuse paths are *not* bit-identical,
because their K/V was computed in a forward of another shape than a cold prefill's chunk: a
kept partial tail (``keep_tail_at``: every Anthropic breakpoint that ends mid-block) and blocks
of generated tokens (written one decode step at a time, reused when the next prompt re-sends
the reply). They differ by float rounding (about 1e-6 in fp32 on CPU; tested within 1e-4, with
the same greedy tokens in the tests), so compare such outputs with a tolerance, not
``torch.equal`` or exact text. ``mode="fast"`` prefills the uncached suffix in one forward:
about 1e-7 off, same greedy tokens, far fewer model calls.

Accounting: ``reused_tokens`` counts prompt tokens whose K/V came from the cache (full blocks
plus a kept tail) and were *not* recomputed; ``computed_tokens = prompt_tokens -
reused_tokens``. At least one prompt token is always computed (its logits start decoding).

Deviation from BACKEND.md: none in names; additions are ``GenerationResult.stop_sequence``,
``block_reused_tokens``/``tail_reused_tokens``, ``Engine.reset_prefix_cache`` and ``Engine.shape``.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from promptcache._errors import InvalidRequestError, PoolExhaustedError
from promptcache.local.blocks import BlockPool, CacheStats, KVBlock, KVCacheManager, MatchResult
from promptcache.local.errors import SEED_MAX, SEED_MIN
from promptcache.local.hashing import BlockHash, HashFn
from promptcache.local.kv import KVPairs, KVStorage, TailStore
from promptcache.local.model import ModelRunner, ModelShape

__all__ = ["Engine", "GenerationResult", "StopReason"]

StopReason = Literal["max_tokens", "stop", "eos", "cancelled"]
Mode = Literal["exact", "fast"]

DEFAULT_NUM_BLOCKS = 2048


@dataclass(slots=True)
class GenerationResult:
    """Outcome of :meth:`Engine.generate`.

    Attributes:
        prompt_tokens: tokens in the prompt.
        reused_tokens: prompt tokens whose K/V was read from the cache (not recomputed).
        computed_tokens: prompt tokens prefilled now (``prompt_tokens - reused_tokens``).
        output_ids: generated ids, without EOS and without a matched stop sequence.
        stop_reason: ``"max_tokens"``, ``"stop"`` (a stop sequence matched), ``"eos"`` or
            ``"cancelled"`` (``should_stop`` returned True: the caller went away).
        ttft_s: seconds from the call to the first generated token (to the end of prefill
            when ``max_tokens == 0``).
        total_s: seconds from the call to the return.
        stop_sequence: index into ``stop_token_seqs`` of the matched sequence, else ``None``.
        block_reused_tokens: part of ``reused_tokens`` served by full shared blocks.
        tail_reused_tokens: part served by a kept partial tail (``keep_tail_at``).
        prompt_logits: float32 logits ``[vocab_size]`` at the last prompt position, only with
            ``generate(..., return_logits=True)`` (tests compare cached vs uncached).
    """

    prompt_tokens: int
    reused_tokens: int
    computed_tokens: int
    output_ids: list[int]
    stop_reason: StopReason
    ttft_s: float
    total_s: float
    stop_sequence: int | None = None
    block_reused_tokens: int = 0
    tail_reused_tokens: int = 0
    prompt_logits: torch.Tensor | None = None


@dataclass(slots=True)
class _Totals:
    requests: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    computed_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0


class _StopMatcher:
    """Holds back generated tokens that might begin a stop sequence (for streaming)."""

    def __init__(self, seqs: Sequence[Sequence[int]]) -> None:
        self.seqs = [list(s) for s in seqs if len(s) > 0]
        self.max_hold = max((len(s) for s in self.seqs), default=1) - 1

    def matched(self, out: list[int]) -> int | None:
        for idx, s in enumerate(self.seqs):
            if len(out) >= len(s) and out[-len(s) :] == s:
                return idx
        return None

    def held(self, out: list[int]) -> int:
        """How many trailing tokens of ``out`` could still start a stop sequence."""
        for n in range(min(self.max_hold, len(out)), 0, -1):
            tail = out[-n:]
            if any(len(s) > n and s[:n] == tail for s in self.seqs):
                return n
        return 0


class Engine:
    """A model runner behind a paged block-hash KV prefix cache.

    Args:
        runner: the model.
        pool_bytes: KV budget in bytes (blocks + kept tails); or give ``num_blocks``.
        num_blocks: blocks in the pool (default 2048 when neither is given).
        block_size: tokens per block (16).
        hash_fn: ``"sha256"`` or ``"blake2b"`` (or a test callable).
        mode: ``"exact"`` (block-aligned chunked prefill: bit-identical logits for block-aligned
            prompt hits; kept tails and generated-token blocks are float-rounding close, see
            the module docstring) or ``"fast"``.
        tail_tokens: token budget of the kept-tail side table (default: 1/16 of the pool,
            at least 4 blocks' worth); counted in ``pool_bytes``.
        adapter_id: mixed into the chain root.

    Raises:
        ValueError: bad mode, both or a too-small ``pool_bytes``/``num_blocks``.
    """

    def __init__(
        self,
        runner: ModelRunner,
        *,
        pool_bytes: int | None = None,
        num_blocks: int | None = None,
        block_size: int = 16,
        hash_fn: HashFn = "sha256",
        mode: Mode = "exact",
        tail_tokens: int | None = None,
        adapter_id: str = "",
    ) -> None:
        if mode not in ("exact", "fast"):
            raise ValueError(f"mode must be 'exact' or 'fast', got {mode!r}")
        if pool_bytes is not None and num_blocks is not None:
            raise ValueError("give pool_bytes or num_blocks, not both")
        self.runner = runner
        self.mode: Mode = mode
        self.block_size = block_size
        per_token = runner.shape.kv_bytes_per_token
        per_block = per_token * block_size
        if pool_bytes is not None:
            total_tokens = pool_bytes // per_token
            tails = (
                tail_tokens if tail_tokens is not None else max(total_tokens // 16, 4 * block_size)
            )
            num_blocks = (pool_bytes - tails * per_token) // per_block
            if num_blocks < 1:
                raise ValueError(
                    f"pool_bytes={pool_bytes} is smaller than one block ({per_block} bytes) "
                    f"plus the tail budget ({tails * per_token} bytes)"
                )
        else:
            num_blocks = DEFAULT_NUM_BLOCKS if num_blocks is None else num_blocks
            if num_blocks < 1:
                raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
            tails = (
                tail_tokens
                if tail_tokens is not None
                else max(num_blocks * block_size // 16, 4 * block_size)
            )
        self.manager = KVCacheManager(
            BlockPool(num_blocks, block_size),
            model_id=runner.model_id,
            adapter_id=adapter_id,
            hash_fn=hash_fn,
            bytes_per_token=per_token,
        )
        shape = runner.shape
        self.storage = KVStorage(
            num_blocks,
            block_size,
            layers=shape.layers,
            kv_heads=shape.kv_heads,
            head_dim=shape.head_dim,
            dtype=runner.dtype,
            device=runner.device,
        )
        self.tails = TailStore(tails)
        self.pool_bytes = num_blocks * per_block + tails * per_token
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._totals = _Totals()

    @property
    def shape(self) -> ModelShape:
        """The model's KV shape."""
        return self.runner.shape

    # -- queries ----------------------------------------------------------------------------------

    def available_prefix(self, tokens: Sequence[int], *, tenant_salt: bytes | str = b"") -> int:
        """Prompt tokens whose K/V :meth:`generate` would reuse right now (no pinning).

        Full cached blocks plus a kept tail, capped at ``len(tokens) - 1``.
        """
        with self._lock:
            reused, _, _, _ = self._lookup(tokens, tenant_salt)
            return reused

    def _lookup(
        self, tokens: Sequence[int], tenant_salt: bytes | str
    ) -> tuple[int, MatchResult, BlockHash, int]:
        """``(reused, full-block match, parent hash of the tail, tail length)``."""
        root = self.manager.root(tenant_salt)
        match = self.manager.match_prefix(tokens, root=root)
        m = match.num_cached_tokens
        parent = match.block_hashes[-1] if match.block_hashes else root
        t = self.tails.longest(parent, tokens[m : m + self.block_size], len(tokens) - 1 - m)
        return m + t, match, parent, t

    @property
    def stats(self) -> CacheStats:
        """Prefix-cache counters (see :class:`~promptcache.local.blocks.CacheStats`)."""
        return self.manager.stats

    @property
    def metrics(self) -> dict[str, float | int | None]:
        """Counters for ``/metrics``: prefix-cache stats (``prefix_cache_*``) and engine totals
        (tokens are counts; ``*_seconds`` are seconds)."""
        st = self.manager.stats
        out: dict[str, float | int | None] = {
            f"prefix_cache_{k}": getattr(st, k)
            for k in (
                "queries",
                "query_tokens",
                "hits",
                "hit_tokens",
                "evictions",
                "collisions",
                "blocks_used",
                "blocks_cached",
                "blocks_total",
                "block_size",
                "bytes_per_block",
            )
        }
        out["prefix_cache_hit_rate"] = st.hit_rate
        t = self._totals
        out.update(
            pool_bytes=self.pool_bytes,
            requests_total=t.requests,
            prompt_tokens_total=t.prompt_tokens,
            reused_tokens_total=t.reused_tokens,
            computed_tokens_total=t.computed_tokens,
            generated_tokens_total=t.generated_tokens,
            prefill_seconds_total=t.prefill_seconds,
            tail_hits_total=self.tails.hits,
            tail_entries=len(self.tails),
            tail_tokens_used=self.tails.tokens_used,
            tail_tokens_capacity=self.tails.capacity_tokens,
        )
        return out

    def reset_prefix_cache(self) -> bool:
        """Drop every cached block and tail (only when no request runs). Returns whether it did."""
        with self._lock:
            if not self.manager.pool.reset_prefix_cache():
                return False
            self.tails = TailStore(self.tails.capacity_tokens)
            return True

    # -- generation -------------------------------------------------------------------------------

    def generate(
        self,
        tokens: Sequence[int],
        *,
        tenant_salt: bytes | str = b"",
        max_tokens: int,
        stop_token_seqs: Sequence[Sequence[int]] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        keep_tail_at: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        return_logits: bool = False,
        on_prefill: Callable[[], None] | None = None,
        stop_when: Callable[[int], bool] | None = None,
    ) -> GenerationResult:
        """Prefill ``tokens`` reusing cached K/V, then decode up to ``max_tokens`` tokens.

        Args:
            tokens: prompt token ids (``>= 1``, each in ``[0, vocab_size)``).
            tenant_salt: cache isolation key (other salts share nothing).
            max_tokens: tokens to generate; ``0`` = prefill only (pre-warm the cache).
            stop_token_seqs: stop when the output ends with one of these token sequences; the
                matched sequence is not returned nor passed to ``on_token``.
            stop_when: called with each generated token, in order (after the EOS check); when it
                returns True decoding ends with ``stop_reason="stop"`` and ``stop_sequence``
                None, the token kept in ``output_ids`` (the API matches stop *strings* on the
                decoded text with it: :class:`promptcache.local.app.StopText`).
            temperature: ``0`` = greedy (argmax); ``> 0`` = sampling from softmax(logits / T).
            seed: sampling seed (same seed, same prompt, same output); random if ``None``.
            keep_tail_at: prompt lengths whose partial last block K/V is kept as well, so a
                later prompt matching up to exactly that length reuses all of it.
            on_token: called with each output token once it can no longer be part of a stop
                sequence (in order; a streaming hook).
            should_stop: polled before each decode step's forward pass; once it returns True
                decoding ends with ``stop_reason="cancelled"`` (e.g. a streaming client
                disconnected). The prompt's blocks are committed as usual and the tokens
                generated so far are returned and counted.
            on_prefill: called once, when the prefill has run and the prompt's blocks are
                committed (the first token's logits exist: the response begins), before
                decoding. The API stamps cache entries' availability with it.

        Raises:
            InvalidRequestError: empty prompt, bad token id, negative ``max_tokens`` or
                ``temperature``, a ``seed`` outside ``[SEED_MIN, SEED_MAX]``.
            PoolExhaustedError: no block at all can be pinned (only possible if blocks are
                pinned outside :meth:`generate`); nothing is changed.

        A prompt longer than the pool is served, not refused: its first blocks (as many as the
        pool holds) are reused / cached as usual, the rest is prefilled into the request's own
        K/V and not cached (a later request finds only the cached part).
        """
        t0 = time.perf_counter()
        prompt = list(tokens)
        if not prompt:
            raise InvalidRequestError("tokens", "the prompt must contain at least one token")
        if max_tokens < 0:
            raise InvalidRequestError("max_tokens", f"must be >= 0, got {max_tokens}")
        if temperature < 0:
            raise InvalidRequestError("temperature", f"must be >= 0, got {temperature}")
        if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
            raise InvalidRequestError("seed", f"must be a 64-bit signed integer, got {seed}")
        self.runner.check_tokens(prompt)
        matcher = _StopMatcher(stop_token_seqs or ())
        with self._lock, torch.inference_mode():
            rid = f"req-{next(self._ids)}"
            _, match, parent, tail_len = self._lookup(prompt, tenant_salt)
            block_tokens = match.num_cached_tokens
            try:
                alloc = self.manager.allocate(rid, prompt, tenant_salt=tenant_salt, match=match)
            except PoolExhaustedError:
                # Under this lock no other request holds blocks, so the prompt alone needs more
                # blocks than the whole pool: pin what fits (the hit blocks and every other
                # block) and serve the rest uncached. Its K/V lives in the request's own cache;
                # only the first blocks are registered (commit caches no more than were pinned).
                fit = self._blocks_that_fit(match) * self.block_size
                if fit == 0:
                    raise
                alloc = self.manager.allocate(
                    rid, prompt[:fit], tenant_salt=tenant_salt, match=match
                )
            try:
                assert alloc.num_cached_tokens == block_tokens
                return self._run(
                    rid,
                    prompt,
                    alloc.blocks,
                    block_tokens,
                    parent,
                    tail_len,
                    t0=t0,
                    max_tokens=max_tokens,
                    matcher=matcher,
                    temperature=temperature,
                    seed=seed,
                    keep_tail_at=keep_tail_at,
                    on_token=on_token,
                    should_stop=should_stop,
                    return_logits=return_logits,
                    on_prefill=on_prefill,
                    stop_when=stop_when,
                )
            finally:
                self.manager.free(rid)

    def _blocks_that_fit(self, match: MatchResult) -> int:
        """Blocks a request can pin now: its hit blocks plus every free block that is not one
        of them (hit blocks with no reference also sit in the free queue)."""
        evictable_hits = sum(1 for b in match.blocks if b.ref_cnt == 0)
        return len(match.blocks) + self.manager.pool.get_num_free_blocks() - evictable_hits

    def _run(
        self,
        rid: str,
        prompt: list[int],
        blocks: list[KVBlock],
        block_tokens: int,
        parent: BlockHash,
        tail_len: int,
        *,
        t0: float,
        max_tokens: int,
        matcher: _StopMatcher,
        temperature: float,
        seed: int | None,
        keep_tail_at: Sequence[int],
        on_token: Callable[[int], None] | None,
        should_stop: Callable[[], bool] | None,
        return_logits: bool,
        on_prefill: Callable[[], None] | None = None,
        stop_when: Callable[[int], bool] | None = None,
    ) -> GenerationResult:
        runner = self.runner
        bs = self.block_size
        n = len(prompt)
        # 1. the cache: stored K/V of the hit blocks, then the kept tail
        kv: KVPairs = []
        if block_tokens:
            nb = block_tokens // bs
            kv = self.storage.gather([b.block_id for b in blocks[:nb]])
        if tail_len:
            tail_kv = self.tails.take(parent, prompt[block_tokens : block_tokens + tail_len])
            if kv:
                kv = [
                    (torch.cat([k, tk], dim=2), torch.cat([v, tv], dim=2))
                    for (k, v), (tk, tv) in zip(kv, tail_kv, strict=True)
                ]
            else:
                kv = [(tk.clone(), tv.clone()) for tk, tv in tail_kv]
        cache = runner.cache_from_kv(kv) if kv else runner.new_cache()
        reused = block_tokens + tail_len

        # 2. prefill the rest
        t_prefill = time.perf_counter()
        if self.mode == "exact":
            pos = reused
            logits = None
            while pos < n:
                end = min(n, (pos // bs + 1) * bs)
                logits = runner.forward(prompt[pos:end], cache, logits_to_keep=1)
                pos = end
            assert logits is not None
        else:
            logits = runner.forward(prompt[reused:], cache, logits_to_keep=1)
        prefill_s = time.perf_counter() - t_prefill
        prompt_logits = logits[-1].clone() if return_logits else None

        # 3. register the prompt's new full blocks and keep requested tails
        self._commit(rid, prompt, cache)
        self._keep_tails(rid, prompt, cache, keep_tail_at)
        if on_prefill is not None:
            on_prefill()

        # 4. decode
        out: list[int] = []
        emitted = 0
        stop_reason: StopReason = "max_tokens"
        stop_idx: int | None = None
        gen: torch.Generator | None = None
        if temperature > 0:
            gen = torch.Generator(device="cpu")
            gen.manual_seed(seed if seed is not None else secrets.randbits(63))
        ttft = time.perf_counter() - t0
        eos = runner.eos_token_id
        for step in range(max_tokens):
            row = logits[-1]
            if temperature > 0:
                probs = torch.softmax(row.float().cpu() / temperature, dim=-1)
                tok = int(torch.multinomial(probs, 1, generator=gen).item())
            else:
                tok = int(torch.argmax(row).item())
            if step == 0:
                ttft = time.perf_counter() - t0
            if eos is not None and tok == eos:
                stop_reason = "eos"
                break
            out.append(tok)
            stop_idx = matcher.matched(out)
            if stop_idx is not None:
                del out[len(out) - len(matcher.seqs[stop_idx]) :]
                stop_reason = "stop"
                break
            if stop_when is not None and stop_when(tok):
                stop_reason = "stop"
                break
            if on_token is not None:
                ready = len(out) - matcher.held(out)
                while emitted < ready:
                    on_token(out[emitted])
                    emitted += 1
            if step + 1 < max_tokens:
                if should_stop is not None and should_stop():
                    stop_reason = "cancelled"
                    break
                logits = runner.forward([tok], cache, logits_to_keep=1)
        if on_token is not None:
            while emitted < len(out):
                on_token(out[emitted])
                emitted += 1

        # 5. cache the generated tokens' full blocks (their K/V is in the cache)
        fed = runner.cache_len(cache)
        if fed > n:
            seq = prompt + self._fed_outputs(out, fed - n, matcher, stop_idx)
            self._commit(rid, seq, cache)

        t = self._totals
        t.requests += 1
        t.prompt_tokens += n
        t.reused_tokens += reused
        t.computed_tokens += n - reused
        t.generated_tokens += len(out)
        t.prefill_seconds += prefill_s
        return GenerationResult(
            prompt_tokens=n,
            reused_tokens=reused,
            computed_tokens=n - reused,
            output_ids=out,
            stop_reason=stop_reason,
            ttft_s=ttft,
            total_s=time.perf_counter() - t0,
            stop_sequence=stop_idx,
            block_reused_tokens=block_tokens,
            tail_reused_tokens=tail_len,
            prompt_logits=prompt_logits,
        )

    @staticmethod
    def _fed_outputs(
        out: list[int], fed: int, matcher: _StopMatcher, stop_idx: int | None
    ) -> list[int]:
        """The generated tokens whose K/V is in the cache (``fed`` of them, in order)."""
        full = list(out)
        if stop_idx is not None:
            full += matcher.seqs[stop_idx]
        return full[:fed]

    def _commit(self, rid: str, seq: list[int], cache: Any) -> None:
        done = self.manager.commit(rid, seq)
        if done:
            kv = self.runner.cache_kv(cache)
            bs = self.block_size
            self.storage.write([blk.block_id for _, blk in done], [i * bs for i, _ in done], kv)

    def _keep_tails(
        self, rid: str, prompt: list[int], cache: Any, keep_tail_at: Sequence[int]
    ) -> None:
        if not keep_tail_at or self.tails.capacity_tokens == 0:
            return
        bs = self.block_size
        hashes = self.manager.block_hashes_of(rid)
        root = self.manager.root_of(rid)
        kv = None
        for length in sorted(set(keep_tail_at)):
            if not 0 < length <= len(prompt) or length % bs == 0:
                continue
            nb = length // bs
            if nb > len(hashes):
                continue  # the full blocks before this tail are not hashed (pool was full)
            parent = hashes[nb - 1] if nb else root
            if kv is None:
                kv = self.runner.cache_kv(cache)
            start = nb * bs
            self.tails.put(
                parent,
                prompt[start:length],
                [(k[:, :, start:length], v[:, :, start:length]) for k, v in kv],
            )
