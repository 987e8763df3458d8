"""The split prefix/suffix attention kernel against SDPA with the explicit bottom-right mask."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402

from promptcache.local.attention import (  # noqa: E402
    PREFIX_ATTENTION,
    merge_attention_states,
    prefix_attention_forward,
)
from promptcache.local.model import ModelRunner  # noqa: E402

pytestmark = pytest.mark.local


class _Module(torch.nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def _reference(q: Any, k: Any, v: Any, groups: int) -> Any:
    """SDPA with the bottom-right causal mask materialised, output ``[b, q, h, d]``."""
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    q_len, kv_len = q.shape[2], k.shape[2]
    mask = torch.ones(q_len, kv_len, dtype=torch.bool).tril(diagonal=kv_len - q_len)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize(("cached", "new"), [(0, 40), (16, 1), (16, 2), (37, 21), (300, 17)])
def test_prefix_attention_equals_masked_sdpa(groups: int, cached: int, new: int) -> None:
    gen = torch.Generator().manual_seed(cached * 100 + new)
    heads, kv_heads, d = 2 * groups, 2, 16
    q = torch.randn(1, heads, new, d, generator=gen)
    k = torch.randn(1, kv_heads, cached + new, d, generator=gen)
    v = torch.randn(1, kv_heads, cached + new, d, generator=gen)
    out, weights = prefix_attention_forward(_Module(groups), q, k, v, None, scaling=d**-0.5)
    assert weights is None
    assert out.shape == (1, new, heads, d)
    torch.testing.assert_close(out, _reference(q, k, v, groups), atol=1e-5, rtol=1e-5)


def test_merge_of_two_halves_is_softmax_over_the_union() -> None:
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, n, 8, generator=gen) for n in (5, 12, 12))
    full = F.scaled_dot_product_attention(q, k, v)
    parts = []
    for sl in (slice(0, 4), slice(4, 12)):
        scores = q @ k[:, :, sl].transpose(-1, -2) * 8**-0.5
        parts += [torch.softmax(scores, -1) @ v[:, :, sl], torch.logsumexp(scores, -1)]
    torch.testing.assert_close(merge_attention_states(*parts), full, atol=1e-6, rtol=1e-5)


def test_random_model_uses_the_kernel_and_matches_transformers_sdpa() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tiny: dict[str, Any] = {
            "vocab_size": 512,
            "hidden_size": 64,
            "layers": 2,
            "heads": 4,
            "kv_heads": 2,
        }
        ours = ModelRunner(**tiny)
        theirs = ModelRunner(attn_implementation="sdpa", **tiny)
        assert ours.config._attn_implementation == PREFIX_ATTENTION
        prompt = [(i * 37) % 512 for i in range(90)]
        results = []
        for runner in (ours, theirs):
            cache = runner.new_cache()
            runner.forward(prompt[:48], cache)
            results.append(runner.forward(prompt[48:], cache, logits_to_keep=0))
        torch.testing.assert_close(results[0], results[1], atol=1e-4, rtol=1e-4)
    finally:
        torch.set_num_threads(before)


def test_fallback_path_gives_sdpa_the_bottom_right_mask() -> None:
    # batch 2 is outside the split kernel's contract: transformers' SDPA path runs, with the
    # bottom-right causal mask built here (its own would crop the keys to the query length).
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 6, 16, generator=gen)
    k = torch.randn(2, 2, 20, 16, generator=gen)
    v = torch.randn(2, 2, 20, 16, generator=gen)
    out, _ = prefix_attention_forward(_Module(2), q, k, v, None, scaling=0.25)
    ref = _reference(q, k, v, 2)  # its default scale, 1/sqrt(16), is 0.25
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize(("cached", "new"), [(16, 2), (37, 21), (1024, 1024), (1536, 512)])
def test_cuda_prefix_attention_equals_masked_sdpa(dtype: str, groups: int, cached: int,
                                                   new: int) -> None:
    """CUDA runs the bottom-right causal pattern through torch's causal_lower_right bias."""
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(cached + new)
    heads, kv_heads, d = 2 * groups, 2, 64
    q = torch.randn(1, heads, new, d, generator=gen).to("cuda", dt)
    k = torch.randn(1, kv_heads, cached + new, d, generator=gen).to("cuda", dt)
    v = torch.randn(1, kv_heads, cached + new, d, generator=gen).to("cuda", dt)
    out, _ = prefix_attention_forward(_Module(groups), q, k, v, None, scaling=d**-0.5)
    ref = _reference(q.float().cpu(), k.float().cpu(), v.float().cpu(), groups)
    tol = 1e-4 if dtype == "float32" else 2e-2
    torch.testing.assert_close(out.float().cpu(), ref, atol=tol, rtol=tol)
