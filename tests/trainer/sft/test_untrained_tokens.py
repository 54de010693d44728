"""Untrained added tokens (Qwen2.5-Coder-1.5B-Instruct's `<tool_call>`) start SFT from their pieces' rows."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from seal.trainer.sft.untrained_tokens import MARKER, prepared_model
from tests.support.chatml import chatml_tokenizer

MARKERS = ["<tool_call>", "</tool_call>"]


def released_like(folder: Path, trained_markers: bool) -> Path:
    """A tiny Qwen2 whose tokenizer adds the call markers and whose embedding matrix has spare rows past
    the vocabulary; unless `trained_markers`, the markers' rows are the spare rows' placeholder."""
    corpus = [
        '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>',
        "Done.",
        "tool call <> _call",
    ] * 20
    tokenizer = chatml_tokenizer(corpus, vocab_size=400)
    tokenizer.add_tokens(MARKERS)
    config = Qwen2Config(
        vocab_size=len(tokenizer) + 16,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for weight in (model.get_input_embeddings().weight, model.get_output_embeddings().weight):
            weight[len(tokenizer) :] = 0.01
            if not trained_markers:
                for token in MARKERS:
                    weight[tokenizer.convert_tokens_to_ids(token)] = 0.01
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_untrained_markers_start_from_the_mean_of_their_pieces(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False)
    folder, tokens = prepared_model(source, tmp_path / "start")
    assert folder == tmp_path / "start" and [t.token for t in tokens] == MARKERS
    assert all(len(t.pieces) > 1 and "<tool_call>" not in t.pieces for t in tokens)
    before = AutoModelForCausalLM.from_pretrained(source)
    after = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    marker_ids = {t.token_id for t in tokens}
    for name in ("get_input_embeddings", "get_output_embeddings"):
        old, new = getattr(before, name)().weight, getattr(after, name)().weight
        for token in tokens:
            pieces = old[tokenizer.convert_tokens_to_ids(token.pieces)]
            assert torch.allclose(new[token.token_id], pieces.mean(dim=0), atol=1e-6)
        assert not torch.equal(new[tokens[0].token_id], new[tokens[1].token_id])
        others = [i for i in range(old.shape[0]) if i not in marker_ids]
        assert torch.equal(new[others], old[others])
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("<tool_call>")) == ["<tool_call>"]
    assert (folder / MARKER).is_file()


def test_a_prepared_folder_is_reused_and_a_trained_model_is_left_as_it_is(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False)
    folder, tokens = prepared_model(source, tmp_path / "start")
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert prepared_model(source, folder) == (folder, tokens)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    trained = released_like(tmp_path / "trained", trained_markers=True)
    assert prepared_model(trained, tmp_path / "unused") == (trained, [])
    assert not (tmp_path / "unused").exists()


def test_a_model_without_rows_past_its_vocabulary_has_no_untrained_token():
    from seal.trainer.sft.untrained_tokens import untrained_tokens

    tokenizer = chatml_tokenizer(["<tool_call> x"] * 5, vocab_size=300)
    tokenizer.add_tokens(MARKERS)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    weight = Qwen2ForCausalLM(config).get_input_embeddings().weight
    assert untrained_tokens(weight, tokenizer) == []
