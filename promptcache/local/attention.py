"""Prefix attention: the attention kernel for a suffix prefilled after cached K/V.

When a request reuses ``p`` cached tokens and prefills ``q`` new ones, each new token attends
to all ``p`` cached positions and causally to the new ones before it: a bottom-right causal
pattern over ``p + q`` keys. Handing that to SDPA as an explicit mask makes the CPU flash
kernel compute (and then mask) the full ``q x (p + q)`` score matrix, so a cache hit saves the
linear layers but far less of the attention than it should.

This kernel splits the keys instead (the "cascade" or "shared-prefix" attention of vLLM's
prefix-caching kernels and FlashInfer)::

    out = merge( attn(Q, K[:p], V[:p])            # dense, no mask
               , attn(Q, K[p:], V[p:], causal) )  # top-left causal == bottom-right here

and merges the two partial results with their log-sum-exp (exact up to float rounding:
``softmax`` over the union of keys). The causal half lets the flash kernel skip the masked
upper triangle, so the attention work of a hit falls from ``q (p + q)`` to
``q p + q^2 / 2`` score entries.

The kernel is registered with transformers' ``AttentionInterface`` under
:data:`PREFIX_ATTENTION`. It assumes what :class:`~promptcache.local.engine.Engine` guarantees:
batch 1, no padding, no sliding window, the query positions are the last ``q`` key positions.
Registered without a mask function, transformers passes no mask at all, which also skips
building the ``q x (p + q)`` mask tensor. On CUDA the same pattern goes to SDPA as torch's
``causal_lower_right`` bias, which its fused memory-efficient kernel runs without a mask tensor.
Any other case (decode, no cache, a mask, a sliding window, a soft cap) goes to transformers'
own SDPA path.

Source of the split-and-merge: FlashInfer's cascade attention
(https://docs.flashinfer.ai/api/cascade.html), which merges partial attention states by their
log-sum-exp.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention.bias import causal_lower_right
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

__all__ = ["PREFIX_ATTENTION", "merge_attention_states", "prefix_attention_forward"]

PREFIX_ATTENTION = "promptcache_prefix"
"""The ``attn_implementation`` name this module registers."""

_flash_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def merge_attention_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> torch.Tensor:
    """Merge two partial attention results over disjoint key sets.

    Args:
        out_a, out_b: attention outputs ``[batch, heads, q, head_dim]``, each normalised over
            its own keys.
        lse_a, lse_b: their log-sum-exp of the scaled scores ``[batch, heads, q]`` (float32).

    Returns:
        the attention output over the union of the keys, ``[batch, heads, q, head_dim]``, in
        ``out_a``'s dtype.
    """
    m = torch.maximum(lse_a, lse_b)
    w_a = torch.exp(lse_a - m).unsqueeze(-1)
    w_b = torch.exp(lse_b - m).unsqueeze(-1)
    merged = (out_a.float() * w_a + out_b.float() * w_b) / (w_a + w_b)
    return merged.to(out_a.dtype)


def prefix_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function (``AttentionInterface`` signature).

    Args:
        query: ``[1, heads, q, head_dim]``; key, value: ``[1, kv_heads, p + q, head_dim]``
            (the cached ``p`` positions first).
        attention_mask: must be ``None`` for the split path (see the module docstring).

    Returns:
        ``(output [1, q, heads, head_dim], None)`` as transformers expects.
    """
    q_len, kv_len = query.shape[2], key.shape[2]
    split = (
        attention_mask is None
        and query.device.type == "cpu"
        and query.shape[0] == 1
        and 1 < q_len < kv_len
        and dropout == 0.0
        and not kwargs.get("sliding_window")
        and kwargs.get("softcap") is None
        and kwargs.get("position_bias") is None
        and getattr(module, "is_causal", True)
    )
    if (not split and attention_mask is None and query.device.type == "cuda"
            and query.shape[0] == 1 and 1 < q_len < kv_len and dropout == 0.0
            and not kwargs.get("sliding_window") and kwargs.get("softcap") is None
            and kwargs.get("position_bias") is None and getattr(module, "is_causal", True)):
        # CUDA: the bottom-right causal pattern as torch's CausalBias, which SDPA runs in its
        # fused memory-efficient kernel (mask type "lower right") instead of a materialised
        # bool mask, which sends SDPA to a kernel that reads the whole q x (p + q) mask
        groups = int(getattr(module, "num_key_value_groups", 1))
        if groups > 1:
            key = repeat_kv(key, groups)
            value = repeat_kv(value, groups)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=causal_lower_right(q_len, kv_len), scale=scaling)
        return out.transpose(1, 2).contiguous(), None
    if not split:
        if attention_mask is None and 1 < q_len < kv_len:
            # transformers' SDPA path would crop the keys to q_len here (a StaticCache quirk):
            # give it the bottom-right causal mask explicitly.
            attention_mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=query.device).tril(
                diagonal=kv_len - q_len
            )[None, None]
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    groups = int(getattr(module, "num_key_value_groups", 1))
    if groups > 1:
        key = repeat_kv(key, groups)
        value = repeat_kv(value, groups)
    p = kv_len - q_len
    out_a, lse_a = _flash_cpu(query, key[:, :, :p], value[:, :, :p], 0.0, False, scale=scaling)
    out_b, lse_b = _flash_cpu(query, key[:, :, p:], value[:, :, p:], 0.0, True, scale=scaling)
    out = merge_attention_states(out_a, lse_a, out_b, lse_b)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(PREFIX_ATTENTION, prefix_attention_forward)
