"""Added tokens a released model never trained get readable rows before SFT.

Qwen2.5-Coder-1.5B-Instruct's released tokenizer writes the protocol's call markers `<tool_call>` and
`</tool_call>` as single added tokens, yet the model never learnt them: their embedding and output rows are
the very rows of the unused ids past the tokenizer's vocabulary (measured on the released weights: cosine
1.0, largest difference 0). The two markers are one vector to the model, and the logit that opens a call
starts where no trained token's does. Behaviour cloning at lr 1e-5 builds them only slowly: the project's
start scored 0 % greedy val after 60 steps and 3-10 % after 90 (docs/qwen_coder_1_5b.md), while the same
rows with the markers split into known pieces (`<`, `tool`, `_call`, `>`) scored 16 % after 27 steps.

So before SFT, each added token whose input row equals that placeholder is given the mean of the rows of the
pieces its text splits into without it (the usual start for a new token), in the input embeddings and, where
they are not tied, in the output ones. A model with no such token is used as it is.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

EMBEDDING = "model.embed_tokens.weight"
"""The input embedding's name in the safetensors files of Qwen2 and Llama models."""
MARKER = "seal_untrained_tokens.json"
"""Written last into the prepared folder: its source and the tokens set; a folder without it is rebuilt."""


@dataclass(frozen=True)
class UntrainedToken:
    token: str
    token_id: int
    pieces: list[str]
    """The token's text as the tokenizer splits it when the token is not an added one."""


def _pieces(tokenizer: Any, text: str) -> list[int]:
    """`text` through the tokenizer's pre-tokenizer and model alone, as if no token were added."""
    backend = tokenizer.backend_tokenizer
    words = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else [(text, None)]
    return [piece.id for word, _ in words for piece in backend.model.tokenize(word)]


def embedding_rows(folder: Path) -> torch.Tensor | None:
    """The input embedding matrix as saved in `folder`'s safetensors files (read alone, not the model);
    None when the folder has no such tensor."""
    from safetensors import safe_open

    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as weights:
            if EMBEDDING in weights.keys():  # noqa: SIM118 (safe_open has no __contains__)
                return weights.get_tensor(EMBEDDING)
    return None


def untrained_tokens(weight: torch.Tensor, tokenizer: Any) -> list[UntrainedToken]:
    """The added tokens whose row of the input embedding `weight` equals the row of the first id past the
    tokenizer's vocabulary (a row no text ever reaches); none when the matrix has no such row."""
    size = len(tokenizer)
    if weight.shape[0] <= size:
        return []
    placeholder = weight[size]
    found = []
    for token, token_id in sorted(tokenizer.get_added_vocab().items(), key=lambda item: item[1]):
        if token_id >= size or not torch.equal(weight[token_id], placeholder):
            continue
        pieces = [p for p in _pieces(tokenizer, token) if p != token_id]
        if pieces:
            found.append(UntrainedToken(token, token_id, tokenizer.convert_ids_to_tokens(pieces)))
    return found


@torch.no_grad()
def initialise(model: Any, tokenizer: Any, tokens: list[UntrainedToken]) -> None:
    """Set each token's input row (and untied output row) to the mean of its pieces' rows, in place."""
    matrices = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight.data_ptr() != matrices[0].data_ptr():
        matrices.append(output.weight)
    for token in tokens:
        ids = torch.tensor(tokenizer.convert_tokens_to_ids(token.pieces))
        for weight in matrices:
            weight[token.token_id] = weight[ids].float().mean(dim=0).to(weight.dtype)


def prepared_model(source: Path, dest: Path) -> tuple[Path, list[UntrainedToken]]:
    """The folder SFT should start from: `source` itself when it has no untrained added token (or no
    safetensors embedding to read), else `dest`, a copy with those rows initialised (reused when already
    prepared from `source`). Only the embedding is read to decide; the model is loaded when it must change."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = dest / MARKER
    if marker.is_file():
        recorded = json.loads(marker.read_text())
        if recorded.get("source") == str(source):
            return dest, [UntrainedToken(**t) for t in recorded["tokens"]]
    weight = embedding_rows(source)
    if weight is None:
        return source, []
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokens = untrained_tokens(weight, tokenizer)
    if not tokens:
        return source, []
    model = AutoModelForCausalLM.from_pretrained(source, torch_dtype="auto")
    initialise(model, tokenizer, tokens)
    if dest.exists():
        shutil.rmtree(dest)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    record = {"source": str(source), "tokens": [t.__dict__ for t in tokens]}
    marker.write_text(json.dumps(record, indent=1) + "\n")
    return dest, tokens
