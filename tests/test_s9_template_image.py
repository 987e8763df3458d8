"""Anthropic image token estimate: the vision page's ~1,600-token cap (trial 14 F1).

Source: https://platform.claude.com/docs/en/build-with-claude/vision ("If your image's long
edge is more than 1568 pixels, or your image is more than ~1,600 tokens, it will first be
scaled down, preserving aspect ratio, until it's within the size limits"); the values are the
catalog's ``image_limits`` (provider_rules.toml).
"""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from promptcache.catalog._rules import provider_rules
from promptcache.prefix import render

VISION = "https://platform.claude.com/docs/en/build-with-claude/vision"


def _png(width: int, height: int) -> str:
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    return base64.b64encode(raw).decode()


def _image_tokens(width: int, height: int, *, in_tool_result: bool = False) -> int:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": _png(width, height)}}
    block = ({"type": "tool_result", "tool_use_id": "t1", "content": [image]}
             if in_tool_result else image)
    view = render({"model": "claude-sonnet-4-6", "max_tokens": 1,
                   "messages": [{"role": "user", "content": [block]}]})
    return view.segments[0].tokens


def test_catalog_holds_the_vision_page_limits() -> None:
    rules = provider_rules("anthropic")
    limits = rules.image_limits
    assert limits is not None
    assert (limits.max_long_edge_px, limits.max_tokens, limits.pixels_per_token) == (
        1568, 1600, 750)
    assert rules.sources["image_limits"].url == VISION
    assert provider_rules("openai").image_limits is None


@pytest.mark.parametrize("size", [(1568, 1568), (4000, 3000), (1500, 1200)])
def test_a_large_image_is_capped_at_max_tokens(size: tuple[int, int]) -> None:
    limits = provider_rules("anthropic").image_limits
    assert limits is not None
    w, h = size
    scale = min(1.0, limits.max_long_edge_px / max(w, h))
    uncapped = (w * scale) * (h * scale) / limits.pixels_per_token
    assert uncapped > limits.max_tokens  # the old estimate: above the cap
    assert _image_tokens(w, h) == limits.max_tokens
    assert _image_tokens(w, h, in_tool_result=True) == limits.max_tokens


def test_a_small_image_keeps_its_area_estimate() -> None:
    limits = provider_rules("anthropic").image_limits
    assert limits is not None
    assert _image_tokens(1000, 1000) == round(1000 * 1000 / limits.pixels_per_token)
    # a long strip: only the 1568 px edge rule applies (3000x100 -> 1568x52.3)
    scale = limits.max_long_edge_px / 3000
    assert _image_tokens(3000, 100) == round(3000 * scale * 100 * scale / limits.pixels_per_token)
