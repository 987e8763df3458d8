"""Model runner: seeded random Llama, the single forward adapter, caches, local checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from promptcache._errors import InvalidRequestError  # noqa: E402
from promptcache.local.model import (  # noqa: E402
    O200K_VOCAB_SIZE,
    ModelRunner,
    pick_device,
)

pytestmark = pytest.mark.local


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Any:
    # Tiny models: OpenMP threads only add contention (10-30x slower on a busy 2-core box).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY = {"vocab_size": 512, "hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2}


def test_random_model_is_seeded_and_leaves_the_callers_rng_alone() -> None:
    state = torch.get_rng_state()
    a = ModelRunner(seed=1, **TINY)  # type: ignore[arg-type]
    assert torch.equal(state, torch.get_rng_state())
    b = ModelRunner(seed=1, **TINY)  # type: ignore[arg-type]
    c = ModelRunner(seed=2, **TINY)  # type: ignore[arg-type]
    wa = a.model.model.embed_tokens.weight
    assert torch.equal(wa, b.model.model.embed_tokens.weight)
    assert not torch.equal(wa, c.model.model.embed_tokens.weight)
    assert a.model_id == b.model_id != c.model_id
    # tied embeddings
    assert a.model.lm_head.weight.data_ptr() == wa.data_ptr()


def test_shape_and_kv_bytes() -> None:
    r = ModelRunner(**TINY)  # type: ignore[arg-type]
    s = r.shape
    assert (s.layers, s.kv_heads, s.head_dim, s.dtype_bytes, s.vocab_size) == (2, 2, 16, 4, 512)
    assert s.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4
    assert r.eos_token_id is None  # only the o200k-sized vocabulary has <|endoftext|>
    with pytest.raises(ValueError):
        ModelRunner(hidden_size=64, heads=4, kv_heads=3, vocab_size=16)
    with pytest.raises(ValueError):
        ModelRunner(dtype="float8", **TINY)  # type: ignore[arg-type]


def test_default_vocabulary_is_o200k_so_ids_are_tiktoken_ids() -> None:
    r = ModelRunner(hidden_size=32, layers=1, heads=2, kv_heads=1)
    assert r.shape.vocab_size == O200K_VOCAB_SIZE == 200_019
    assert r.eos_token_id == 199_999
    logits = r.forward([200_018, 0, 5], r.new_cache())
    assert logits.shape == (1, O200K_VOCAB_SIZE)


def test_forward_grows_the_cache_and_a_prebuilt_cache_replays_exactly() -> None:
    r = ModelRunner(**TINY)  # type: ignore[arg-type]
    toks = [(i * 37) % 512 for i in range(40)]
    cache = r.new_cache()
    r.forward(toks[:16], cache)
    r.forward(toks[16:32], cache)
    ref = r.forward(toks[32:], cache, logits_to_keep=0)
    assert ref.shape == (8, 512)
    assert r.cache_len(cache) == 40
    kv = r.cache_kv(cache)
    assert kv[0][0].shape == (1, 2, 40, 16)
    rebuilt = r.cache_from_kv([(k[:, :, :32].clone(), v[:, :, :32].clone()) for k, v in kv])
    assert r.cache_len(rebuilt) == 32
    again = r.forward(toks[32:], rebuilt, logits_to_keep=0)
    assert torch.equal(ref, again)
    with pytest.raises(ValueError):
        r.cache_from_kv(kv[:1])


def test_token_ids_are_checked() -> None:
    r = ModelRunner(**TINY)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"tokens\[1\]"):
        r.check_tokens([1, 512])
    with pytest.raises(InvalidRequestError):
        r.check_tokens([-1])


def test_local_checkpoint_by_path_without_download(tmp_path: Path) -> None:
    r = ModelRunner(seed=3, **TINY)  # type: ignore[arg-type]
    r.model.save_pretrained(tmp_path)
    loaded = ModelRunner(str(tmp_path))
    assert loaded.model_id.startswith("hf:")
    assert loaded.shape == r.shape
    toks = [1, 2, 3, 4, 5]
    a = r.forward(toks, r.new_cache())
    b = loaded.forward(toks, loaded.new_cache())
    # same weights; loaded tensors may differ in memory layout, hence ~1e-7, not bit-equal
    assert torch.allclose(a, b, atol=1e-5) and int(a.argmax()) == int(b.argmax())
    with pytest.raises(FileNotFoundError):
        ModelRunner(str(tmp_path / "missing"))


def test_device_selection() -> None:
    assert pick_device("cpu").type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device(None).type == expected
    assert pick_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ValueError):
            pick_device("cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_runner_matches_cpu_greedy_argmax() -> None:
    cpu = ModelRunner(**TINY)  # type: ignore[arg-type]
    gpu = ModelRunner(device="cuda", **TINY)  # type: ignore[arg-type]
    toks = list(range(1, 60))
    a = cpu.forward(toks, cpu.new_cache())
    b = gpu.forward(toks, gpu.new_cache()).cpu()
    assert int(a.argmax()) == int(b.argmax())
    assert torch.allclose(a, b, atol=1e-3)
