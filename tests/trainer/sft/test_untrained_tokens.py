"""Untrained added tokens (Qwen2.5-Coder-1.5B-Instruct's `<tool_call>`) start SFT from their pieces' rows, or
are written as those pieces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from seal.trainer.sft import untrained_tokens as untrained_module
from seal.trainer.sft.untrained_tokens import MARKER, UntrainedTokenError, prepared_model
from tests.support.chatml import chatml_tokenizer
from tests.support.untrained_rows import save_with_untrained_rows

MARKERS = ["<tool_call>", "</tool_call>"]
BOX = "<|box_start|>"


def released_like(folder: Path, trained_markers: bool, trained_input: bool = False) -> Path:
    """A tiny Qwen2 whose tokenizer adds the call markers and a special token (`BOX`) and whose embedding
    matrices have spare rows past the vocabulary; unless `trained_markers`, the added tokens' rows are the
    spare rows' placeholder (the markers' in the output matrix alone with `trained_input`)."""
    corpus = [
        '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>',
        "Done.",
        "tool call <> _call",
    ] * 20
    tokenizer = chatml_tokenizer(corpus, vocab_size=400)
    tokenizer.add_tokens(MARKERS)
    tokenizer.add_special_tokens({"additional_special_tokens": [BOX]})
    untrained = [] if trained_markers else [*MARKERS, BOX]
    untrained_input = [BOX] if trained_input and not trained_markers else untrained
    return save_with_untrained_rows(folder, tokenizer, untrained_input, untrained)


def test_untrained_markers_start_from_the_mean_of_their_pieces(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False)
    folder, tokens = prepared_model(source, tmp_path / "start")
    assert folder == tmp_path / "start" and [(t.token, t.special) for t in tokens] == [
        *((m, False) for m in MARKERS),
        (BOX, True),
    ]
    assert all(len(t.pieces) > 1 and t.token not in t.pieces for t in tokens)
    assert all(t.matrices == ["input", "output"] for t in tokens)
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
    assert untrained_tokens({"input": weight}, tokenizer) == []


def test_a_token_untrained_in_the_output_matrix_alone_keeps_its_input_row(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False, trained_input=True)
    folder, tokens = prepared_model(source, tmp_path / "start")
    markers = [t for t in tokens if not t.special]
    assert [(t.token, t.matrices) for t in markers] == [(m, ["output"]) for m in MARKERS]
    before, after = AutoModelForCausalLM.from_pretrained(source), AutoModelForCausalLM.from_pretrained(folder)
    ids = [t.token_id for t in markers]
    assert torch.equal(after.get_input_embeddings().weight[ids], before.get_input_embeddings().weight[ids])
    assert not torch.equal(
        after.get_output_embeddings().weight[ids], before.get_output_embeddings().weight[ids]
    )


def test_split_markers_are_written_as_their_pieces_with_the_weights_and_ids_kept(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False)
    before_files = (source / "tokenizer.json").read_text()
    folder, tokens = prepared_model(source, tmp_path / "start", "split")
    assert folder == tmp_path / "start" and [t.token for t in tokens] == [*MARKERS, BOX]
    assert (folder / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    before, after = AutoTokenizer.from_pretrained(source), AutoTokenizer.from_pretrained(folder)
    for token in tokens:
        written = [token.token] if token.special else token.pieces
        assert after.convert_ids_to_tokens(after.encode(token.token)) == written
        assert before.convert_ids_to_tokens(before.encode(token.token)) == [token.token]
    assert len(after) == len(before)
    assert after.convert_tokens_to_ids("<|im_end|>") == before.convert_tokens_to_ids("<|im_end|>")
    call = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call><|im_end|>'
    assert after.decode(after.encode(call)) == call
    assert set(after.encode(call)).isdisjoint({t.token_id for t in tokens})
    assert (source / "tokenizer.json").read_text() == before_files
    assert json.loads((folder / MARKER).read_text())["handling"] == "split"


def test_a_folder_prepared_one_way_is_rebuilt_the_other_way(tmp_path):
    source = released_like(tmp_path / "released", trained_markers=False)
    initialised, _ = prepared_model(source, tmp_path / "start")
    assert (initialised / "model.safetensors").read_bytes() != (source / "model.safetensors").read_bytes()
    split, tokens = prepared_model(source, tmp_path / "start", "split")
    assert split == initialised
    assert (split / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(split)
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode(MARKERS[0])) == tokens[0].pieces


def test_a_tokenizer_that_still_writes_a_split_token_whole_is_refused_and_leaves_no_copy(
    tmp_path, monkeypatch
):
    source = released_like(tmp_path / "released", trained_markers=False)
    monkeypatch.setattr(untrained_module, "_retire", lambda folder, tokens: None)
    with pytest.raises(UntrainedTokenError, match=r"still writes <tool_call> as \['<tool_call>'\]"):
        prepared_model(source, tmp_path / "start", "split")
    assert not (tmp_path / "start").exists()
