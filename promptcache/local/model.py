"""Model runner of the local backend: a seeded random Llama (default) or a local checkpoint.

The runner owns the model and the *one* adapter function that calls it (:meth:`ModelRunner.
forward`), so the transformers 5.24 API changes stay in one place (``DESIGN.md``, "Local
backend notes"):

* the forward argument ``past_key_values`` is now ``cache`` (the old name warns until 5.40);
* ``cache_position`` is gone: positions are implicit, ``cache.get_seq_length() + arange(q)``;
* ``DynamicCache.crop()`` takes negative counts only (we never crop: a cache is built fresh
  from stored blocks for each request);
* a ``DynamicCache`` is built from per-layer ``(K, V)`` pairs through its first constructor
  argument (``DynamicCache(ddp_cache_data=[(k0, v0), ...], config=cfg)``, read from the
  installed ``transformers/cache_utils.py``).

The random model (``model="random"``) is ``LlamaForCausalLM(LlamaConfig(...))`` initialised
under ``torch.manual_seed(seed)`` inside a forked RNG (the caller's RNG state is untouched),
with tied embeddings and, by default, the ``o200k_base`` vocabulary size so token ids are
tiktoken ids. Nothing is ever downloaded: a checkpoint path loads with ``local_files_only``.

Shapes: K and V per layer are ``[1, kv_heads, seq_len, head_dim]`` (batch 1 throughout).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from promptcache._errors import InvalidRequestError
from promptcache.local.attention import PREFIX_ATTENTION
from promptcache.local.blocks import kv_bytes_per_token

__all__ = ["O200K_EOS_TOKEN_ID", "O200K_VOCAB_SIZE", "ModelRunner", "ModelShape", "pick_device"]

O200K_VOCAB_SIZE = 200_019
"""``tiktoken.get_encoding("o200k_base").n_vocab``: 199,998 BPE ranks + special tokens up to
``<|endofprompt|>`` = 200018."""

O200K_EOS_TOKEN_ID = 199_999
"""``<|endoftext|>`` in ``o200k_base``: the random model's end-of-sequence token."""

KVPairs = list[tuple[torch.Tensor, torch.Tensor]]

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def pick_device(device: str | None) -> torch.device:
    """``None``/``"auto"``: CUDA if available else CPU; otherwise ``torch.device(device)``.

    Raises:
        ValueError: ``"cuda"`` requested without a CUDA device.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' requested but torch sees no CUDA device")
    return dev


def _resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)}") from None


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the KV cache needs to know about a model.

    Attributes:
        layers: decoder layers.
        kv_heads: key/value heads per layer (GQA).
        head_dim: channels per head.
        dtype_bytes: bytes per K/V element.
        vocab_size: logits per position.
        hidden_size: model width.
    """

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    vocab_size: int
    hidden_size: int

    @property
    def kv_bytes_per_token(self) -> int:
        """``2 x layers x kv_heads x head_dim x dtype_bytes`` (bytes)."""
        return kv_bytes_per_token(
            layers=self.layers,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            dtype_bytes=self.dtype_bytes,
        )


class ModelRunner:
    """A causal LM plus the single adapter that runs it on a KV cache.

    Args:
        model: ``"random"`` for a seeded random Llama, or a local Hugging Face checkpoint
            directory (loaded with ``local_files_only=True``; never downloads).
        seed: initialisation seed of the random model.
        device: ``"cpu"`` (default), ``"cuda"``, or ``None``/``"auto"`` (CUDA when available).
        dtype: ``"float32"`` (default), ``"bfloat16"``, ``"float16"`` or a ``torch.dtype``.
        hidden_size, layers, heads, kv_heads, intermediate_size, vocab_size: random-model
            shape (defaults: 256, 4, 8, 2, 4 x hidden, :data:`O200K_VOCAB_SIZE`).
        max_positions: RoPE table length of the random model (tokens).
        init_std: weight init std of the random model. 0.1, not Llama's 0.02: with tied
            embeddings a 0.02-init model just repeats the last prompt token, which makes
            greedy-equality tests vacuous; at 0.1 its output varies token to token.
        attn_implementation: transformers' attention implementation. Default: for the random
            model :data:`~promptcache.local.attention.PREFIX_ATTENTION` (SDPA, with a split
            prefix/suffix kernel for a suffix prefilled after cached K/V on CPU; see
            :mod:`promptcache.local.attention`), for a checkpoint ``"sdpa"`` (its mask may
            carry a sliding window the split kernel does not model). ``"sdpa"`` or
            ``"eager"`` force transformers' own.
        threads: if given, ``torch.set_num_threads(threads)`` (process-wide). On a busy CPU
            box small models run 10-30x faster with 1 thread than with OpenMP contention.

    Raises:
        ValueError: bad shape (``heads`` not a multiple of ``kv_heads``, ``hidden_size`` not a
            multiple of ``heads``), unknown dtype, or CUDA requested without one.
        FileNotFoundError: ``model`` is neither ``"random"`` nor an existing directory.
    """

    def __init__(
        self,
        model: str = "random",
        *,
        seed: int = 0,
        device: str | None = "cpu",
        dtype: str | torch.dtype | None = None,
        hidden_size: int = 256,
        layers: int = 4,
        heads: int = 8,
        kv_heads: int = 2,
        intermediate_size: int | None = None,
        vocab_size: int | None = None,
        max_positions: int = 32_768,
        init_std: float = 0.1,
        attn_implementation: str | None = None,
        threads: int | None = None,
    ) -> None:
        if threads is not None:
            torch.set_num_threads(max(1, threads))
        self.device = pick_device(device)
        self.dtype = _resolve_dtype(dtype)
        self.eos_token_id: int | None
        if model == "random":
            if heads % kv_heads or hidden_size % heads:
                raise ValueError(
                    f"need hidden_size % heads == 0 and heads % kv_heads == 0, got "
                    f"hidden_size={hidden_size}, heads={heads}, kv_heads={kv_heads}"
                )
            vocab = O200K_VOCAB_SIZE if vocab_size is None else vocab_size
            self.eos_token_id = O200K_EOS_TOKEN_ID if vocab == O200K_VOCAB_SIZE else None
            self.config = LlamaConfig(
                vocab_size=vocab,
                hidden_size=hidden_size,
                intermediate_size=intermediate_size or 4 * hidden_size,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                max_position_embeddings=max_positions,
                initializer_range=init_std,
                tie_word_embeddings=True,
                eos_token_id=self.eos_token_id,
                bos_token_id=None,
                pad_token_id=None,
            )
            self.config._attn_implementation = attn_implementation or PREFIX_ATTENTION
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                net: Any = LlamaForCausalLM(self.config)
            shape_key = json.dumps(
                {"cfg": self.config.to_dict(), "seed": seed, "dtype": str(self.dtype)},
                sort_keys=True,
                default=str,
            )
            digest = hashlib.sha256(shape_key.encode()).hexdigest()[:16]
            self.model_id = f"random-llama-{digest}"
        else:
            path = Path(model)
            if not path.is_dir():
                raise FileNotFoundError(
                    f"model {model!r} is neither 'random' nor a local checkpoint directory"
                )
            from transformers import AutoModelForCausalLM

            net = AutoModelForCausalLM.from_pretrained(
                str(path),
                local_files_only=True,
                dtype=self.dtype,
                attn_implementation=attn_implementation or "sdpa",
            )
            self.config = net.config
            eos: Any = getattr(self.config, "eos_token_id", None)
            if isinstance(eos, list):
                eos = eos[0] if eos else None
            self.eos_token_id = int(eos) if eos is not None else None
            self.model_id = f"hf:{path.resolve()}"
        self.model: Any = net.to(device=self.device, dtype=self.dtype).eval()
        text_cfg = self.config.get_text_config(decoder=True)
        n_heads = int(text_cfg.num_attention_heads)
        head_dim = getattr(text_cfg, "head_dim", None) or text_cfg.hidden_size // n_heads
        self.shape = ModelShape(
            layers=int(text_cfg.num_hidden_layers),
            kv_heads=int(getattr(text_cfg, "num_key_value_heads", None) or n_heads),
            head_dim=int(head_dim),
            dtype_bytes=torch.tensor([], dtype=self.dtype).element_size(),
            vocab_size=int(text_cfg.vocab_size),
            hidden_size=int(text_cfg.hidden_size),
        )

    def __repr__(self) -> str:
        return f"ModelRunner({self.model_id!r}, device={self.device}, shape={asdict(self.shape)})"

    # -- caches -----------------------------------------------------------------------------------

    def new_cache(self) -> DynamicCache:
        """An empty KV cache for this model."""
        return DynamicCache(config=self.config)

    def cache_from_kv(self, kv: KVPairs) -> DynamicCache:
        """A cache pre-filled with per-layer ``(K, V)``, each ``[1, kv_heads, seq, head_dim]``."""
        if len(kv) != self.shape.layers:
            raise ValueError(f"need {self.shape.layers} (K, V) pairs, got {len(kv)}")
        return DynamicCache(kv, config=self.config)

    @staticmethod
    def cache_kv(cache: DynamicCache) -> KVPairs:
        """The cache's per-layer ``(K, V)`` tensors (views, ``[1, kv_heads, seq, head_dim]``)."""
        layers: list[Any] = list(cache.layers)
        return [(layer.keys, layer.values) for layer in layers]

    @staticmethod
    def cache_len(cache: DynamicCache) -> int:
        """Tokens held by the cache."""
        return int(cache.get_seq_length())

    # -- the adapter --------------------------------------------------------------------------------

    def check_tokens(self, tokens: list[int]) -> None:
        """Raise :class:`InvalidRequestError` for ids outside ``[0, vocab_size)``."""
        vocab = self.shape.vocab_size
        for i, t in enumerate(tokens):
            if not 0 <= t < vocab:
                raise InvalidRequestError(f"tokens[{i}]", f"token id {t} outside [0, {vocab})")

    def forward(
        self, input_ids: list[int], cache: DynamicCache, *, logits_to_keep: int = 1
    ) -> torch.Tensor:
        """Run ``input_ids`` after the cache's tokens; the cache grows in place.

        The ONE place the model is called. Positions are implicit
        (``cache_len .. cache_len + len(input_ids) - 1``).

        Args:
            input_ids: new token ids (``>= 1``).
            cache: KV of every earlier token (mutated: the new tokens' K/V are appended).
            logits_to_keep: logits of the last this-many positions (``0`` = all).

        Returns:
            float32 logits ``[logits_to_keep or len(input_ids), vocab_size]``.
        """
        ids = torch.tensor([input_ids], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(
                input_ids=ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep
            )
        logits: torch.Tensor = out.logits[0]
        return logits.float()
