"""Model shapes, hardware and the prefill/decode cost model of the simulator.

Prefill FLOPs of a prompt of ``n`` tokens whose first ``m`` tokens are cached::

    F(n, m) = 2 P (n - m)  +  2 L h d (n^2 - m^2)

- ``2 P`` per computed token: one multiply-add per weight of the transformer blocks (``P`` =
  the parameters of the layers, without the input embedding, which is a lookup, and without
  the LM head, which prefill runs for the last token only).
- ``2 L h d (n^2 - m^2)``: attention. Token ``i`` attends to ``i`` keys; ``QK^T`` and ``AV``
  cost ``2 * 2 h d i`` FLOPs per layer, and ``sum_{i=m}^{n} 4 L h d i ~= 2 L h d (n^2 - m^2)``.
  ``h`` = query heads, ``d`` = head dim (GQA shrinks the KV, not these FLOPs).

Prefill time = ``F / (peak * MFU)``. Decode time per output token is a single-sequence
roofline, ``max(F(c+1, c) / (peak * MFU), (weight bytes + c * KV bytes per token) / HBM
bandwidth)`` at context ``c``: decode is memory-bound, a FLOP model alone would make it about
100 times too fast. Deviation from the issue text (which names the FLOP model only): the
bandwidth term is added for decode; prefill uses the FLOP model exactly.

KV bytes per token = ``2 (K and V) x layers x KV heads x head dim x dtype bytes``.

Shapes are from each model's ``config.json`` on the Hugging Face Hub (URLs in ``source``);
``P`` is computed from the shape (q, k, v, o projections and a gated MLP per layer), so it can
be checked by hand: llama-3-8b gives 6.98e9 (8.03e9 total minus two 0.53e9 embedding matrices).
Hardware peaks are dense (no sparsity) BF16 tensor-core numbers from the vendors' data sheets.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from promptcache.sim._checks import check_real

__all__ = [
    "HARDWARE",
    "MIN_MFU",
    "MODEL_SHAPES",
    "CostModel",
    "Hardware",
    "ModelShape",
    "get_hardware",
    "get_shape",
    "parse_bytes",
    "parse_tokens",
]


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The shape of a decoder-only transformer, as far as KV memory and FLOPs need it.

    Attributes:
        name: short id (``"llama-3-8b"``).
        layers: transformer blocks ``L``.
        hidden: model width.
        heads: query heads ``h``.
        kv_heads: key/value heads (GQA).
        head_dim: ``d``.
        intermediate: MLP width (gated MLP: gate, up and down projections).
        vocab: vocabulary size (for the record; not in ``P``).
        dtype_bytes: bytes per KV element (2 for BF16/FP16, 1 for FP8).
        source: where the numbers come from.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    dtype_bytes: int = 2
    source: str = ""

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cache per token: ``2 * layers * kv_heads * head_dim * dtype_bytes``."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    def tokens_for_bytes(self, capacity_bytes: int) -> int:
        """Tokens of KV that fit in ``capacity_bytes`` (rounded down).

        Raises:
            ValueError: a negative size.
        """
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        return capacity_bytes // self.kv_bytes_per_token

    @property
    def params(self) -> int:
        """``P``: weights of the transformer blocks (attention projections + gated MLP)."""
        q_o = 2 * self.hidden * self.heads * self.head_dim
        k_v = 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (q_o + k_v + mlp)

    @property
    def weight_bytes(self) -> int:
        """Bytes read per decode step for the weights (blocks + LM head), at ``dtype_bytes``."""
        return (self.params + self.vocab * self.hidden) * self.dtype_bytes

    def prefill_flops(self, n: int, m: int = 0) -> float:
        """``F(n, m) = 2P(n - m) + 2 L h d (n^2 - m^2)`` FLOPs to prefill ``n`` tokens, ``m`` cached.

        Raises:
            ValueError: ``not 0 <= m <= n``.
        """
        if not 0 <= m <= n:
            raise ValueError(f"need 0 <= cached ({m}) <= tokens ({n})")
        return 2.0 * self.params * (n - m) + 2.0 * self.layers * self.heads * self.head_dim * (
            float(n) * n - float(m) * m
        )


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


MODEL_SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256,
                   source=_hf("meta-llama/Meta-Llama-3-8B")),
        ModelShape("llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256,
                   source=_hf("meta-llama/Meta-Llama-3-70B")),
        ModelShape("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064,
                   source=_hf("Qwen/Qwen2.5-7B")),
        ModelShape("qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064,
                   source=_hf("Qwen/Qwen2.5-72B")),
        ModelShape("mistral-7b", 32, 4096, 32, 8, 128, 14336, 32000,
                   source=_hf("mistralai/Mistral-7B-v0.1")),
    )
}
"""Named model shapes. KV per token (BF16): llama-3-8b 128 KiB, llama-3-70b 320 KiB,
qwen2.5-7b 56 KiB, qwen2.5-72b 320 KiB, mistral-7b 128 KiB."""


@dataclass(frozen=True, slots=True)
class Hardware:
    """An accelerator: dense BF16 peak FLOP/s and HBM bandwidth (bytes/s)."""

    name: str
    peak_flops: float
    hbm_bytes_per_s: float
    source: str = ""


HARDWARE: dict[str, Hardware] = {
    h.name: h
    for h in (
        Hardware("h100-sxm", 989e12, 3.35e12,
                 "https://www.nvidia.com/en-us/data-center/h100/ (BF16 1,979 TFLOPS with sparsity)"),
        Hardware("h200", 989e12, 4.8e12, "https://www.nvidia.com/en-us/data-center/h200/"),
        Hardware("a100-80gb", 312e12, 2.039e12, "https://www.nvidia.com/en-us/data-center/a100/"),
        Hardware("l4", 121e12, 0.3e12,
                 "https://www.nvidia.com/en-us/data-center/l4/ (BF16 242 TFLOPS with sparsity)"),
    )
}


def _lookup(table: dict[str, object], kind: str, name: str) -> None:
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}")


def get_shape(name: str) -> ModelShape:
    """Return a named :data:`MODEL_SHAPES` entry.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    _lookup(dict(MODEL_SHAPES), "model shape", name)
    return MODEL_SHAPES[name]


def get_hardware(name: str) -> Hardware:
    """Return a named :data:`HARDWARE` entry.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    _lookup(dict(HARDWARE), "hardware", name)
    return HARDWARE[name]


#: The smallest MFU :class:`CostModel` takes (0.1 %): a plausibility bound, not a hardware
#: fact. Measured prefill MFU of 7-70B models is tens of percent; at 0.1 % a prefill is 400
#: times slower than at the default 0.4, and below it the times stop meaning anything (MFU
#: 1e-300 made a prefill take 1e300 s).
MIN_MFU = 0.001


@dataclass(frozen=True, slots=True)
class CostModel:
    """Seconds of prefill and decode for a model shape on one accelerator.

    Attributes:
        shape: the model.
        hardware: the accelerator.
        mfu: model FLOP utilisation of prefill, in ``[MIN_MFU, 1]`` (:data:`MIN_MFU` =
            0.001; 0.4 by default: a typical measured prefill MFU for 7-70B models on H100;
            state yours).

    Raises:
        ValueError: ``mfu`` not a finite number in ``[MIN_MFU, 1]`` (NaN, infinite, zero,
            negative, tiny); the message starts with ``mfu``.
    """

    shape: ModelShape
    hardware: Hardware
    mfu: float = 0.4

    def __post_init__(self) -> None:
        check_real("mfu", self.mfu, MIN_MFU, 1.0,
                   why="(MIN_MFU: measured prefill MFU is tens of percent)")

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s: ``peak * MFU``."""
        return self.hardware.peak_flops * self.mfu

    def memory_bound_batch(self) -> int:
        """The largest decode batch that is still memory-bound (sequences, at least 1).

        A decode step reads every weight once (``weight bytes / HBM``) and spends ``2 P`` FLOPs
        per sequence (``2 P / (peak MFU)``); up to ``B = weight bytes x peak x MFU /
        (2 P x HBM)`` sequences share a step at no extra time. This is the batch up to which the
        simulator's premise, that running requests do not slow each other, holds
        (llama-3-70b on h100-sxm at MFU 0.4: 119).
        """
        step_bytes = self.shape.weight_bytes / self.hardware.hbm_bytes_per_s
        step_flops = 2.0 * self.shape.params / self.flops_per_s
        return max(1, math.floor(step_bytes / step_flops))

    def prefill_seconds(self, n: int, m: int = 0) -> float:
        """Seconds to prefill ``n`` prompt tokens of which ``m`` are cached: ``F(n, m) / (peak MFU)``."""
        return self.shape.prefill_flops(n, m) / self.flops_per_s

    def decode_seconds(self, context: int, output_tokens: int) -> float:
        """Seconds to decode ``output_tokens`` after a ``context``-token prompt (roofline sum).

        Each step ``t`` (context ``c = context + t``) costs ``max(compute, memory)`` with
        compute ``F(c + 1, c) / (peak MFU)`` and memory ``(weight bytes + c KV bytes) / HBM``;
        the sum over steps is taken in closed form for each regime (both terms are linear in
        ``c``, so the max switches at most once).
        """
        if output_tokens <= 0:
            return 0.0
        s = self.shape
        a_flop = 2.0 * s.params / self.flops_per_s
        b_flop = 4.0 * s.layers * s.heads * s.head_dim / self.flops_per_s  # per context token
        a_mem = s.weight_bytes / self.hardware.hbm_bytes_per_s
        b_mem = s.kv_bytes_per_token / self.hardware.hbm_bytes_per_s
        c0, k = float(context), float(output_tokens)
        sum_c = k * c0 + k * (k - 1) / 2.0  # sum of contexts c0 .. c0 + k - 1
        flop = a_flop * k + b_flop * sum_c
        mem = a_mem * k + b_mem * sum_c
        # Per-step max: if one regime dominates at both ends, it dominates throughout.
        first = (a_flop + b_flop * c0, a_mem + b_mem * c0)
        last = (a_flop + b_flop * (c0 + k - 1), a_mem + b_mem * (c0 + k - 1))
        if (first[0] >= first[1]) == (last[0] >= last[1]):
            return flop if first[0] >= first[1] else mem
        # Mixed: sum step by step (rare: only for very long contexts on slow memory).
        return sum(
            max(a_flop + b_flop * c, a_mem + b_mem * c)
            for c in range(int(c0), int(c0 + k))
        )


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$")
_BYTE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_TOKEN_UNITS = {"": 1, "k": 10**3, "m": 10**6}


def parse_bytes(text: str) -> int:
    """Parse a byte size: ``"80GB"``, ``"16GiB"``, ``"512MiB"``, ``"1e9"`` is not accepted.

    Raises:
        ValueError: not a number with an optional unit (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB),
            or a number too long for a float (hundreds of digits).
    """
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _BYTE_UNITS:
        raise ValueError(f"bad byte size {text!r}; use e.g. 16GiB, 512MiB or 80GB")
    return _scaled(text, match.group(1), _BYTE_UNITS[unit], "byte size")


def parse_tokens(text: str) -> int:
    """Parse a token count: ``"200000"``, ``"200k"``, ``"1.5M"``.

    Raises:
        ValueError: not a number with an optional ``k``/``M`` suffix, or a number too long
            for a float (hundreds of digits).
    """
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _TOKEN_UNITS:
        raise ValueError(f"bad token count {text!r}; use e.g. 200000, 200k or 1.5M")
    return _scaled(text, match.group(1), _TOKEN_UNITS[unit], "token count")


def _scaled(text: str, number: str, unit: int, what: str) -> int:
    value = float(number) * unit
    if not math.isfinite(value):  # 400 digits: beyond a float
        raise ValueError(f"{what} {text!r} is too large")
    return int(value)
