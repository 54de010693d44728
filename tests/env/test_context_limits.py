"""The released code's episode limits on the model's context: token-exact clipping and the context stop."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from seal.env.context_limits import ContextLimits, clip_messages, clip_tokens, tokenizer_codec
from seal.env.episode import Episode
from seal.protocol.ground_truth import ground_truth_actions
from tests.support.doubles import build_chatml_model_folder


@pytest.fixture(scope="module")
def codec(tmp_path_factory: pytest.TempPathFactory):
    corpus = [m["content"] for m in Episode("multi_turn_base_0").reset()] + ground_truth_actions(
        "multi_turn_base_0"
    )
    folder = build_chatml_model_folder(tmp_path_factory.mktemp("tok") / "m", corpus)
    return tokenizer_codec(AutoTokenizer.from_pretrained(Path(folder)))


def test_a_message_within_the_limit_is_left_whole(codec):
    encode, decode = codec
    text = "a short tool result"
    assert clip_tokens(text, encode, decode, 64) == text
    assert clip_tokens(text * 500, encode, decode, None) == text * 500


@pytest.mark.parametrize("limit", [64, 100, 257])
def test_a_long_message_keeps_its_head_and_a_marker_within_the_limit_exactly(codec, limit):
    encode, decode = codec
    text = " ".join(f'{{"file_{i}": "content number {i}"}}' for i in range(400))
    total = len(encode(text))
    clipped = clip_tokens(text, encode, decode, limit)
    assert len(encode(clipped)) <= limit
    head, marker = clipped.split("\n[... message cut: ")
    assert text.startswith(head) and len(head) > 0
    shown = int(marker.split(" of its ")[0])
    assert marker.endswith(f"of its {total} tokens are shown ...]")
    assert len(encode(head)) <= shown < total


def test_each_message_is_clipped_on_its_own(codec):
    encode, decode = codec
    messages = [{"role": "user", "content": "x " * 300}, {"role": "user", "content": "short"}]
    clipped = clip_messages(messages, encode, decode, 64)
    assert "message cut" in clipped[0]["content"] and clipped[1] == messages[1]
    assert messages[0]["content"] == "x " * 300  # the input is not changed


def test_the_context_is_full_at_max_model_len_minus_max_response_length():
    limits = ContextLimits(context_tokens=16384 - 4096)
    assert not limits.context_full(12287) and limits.context_full(12288)
    assert not ContextLimits().context_full(10**9)  # an unknown window never stops an episode
    for bad in ({"max_llm_calls": 0}, {"max_env_tokens": 8}, {"context_tokens": 0}):
        with pytest.raises(ValueError):
            ContextLimits(**bad)
