"""Added tokens a released model never trained get readable rows before SFT.

Qwen2.5-Coder-1.5B-Instruct's released tokenizer writes the protocol's call markers `<tool_call>` and
`</tool_call>` as single added tokens, yet the model never learnt them: their embedding and output rows are
the very rows of the unused ids past the tokenizer's vocabulary (measured on the released weights: cosine
1.0, largest difference 0). The two markers are one vector to the model, and the logit that opens a call
starts where no trained token's does. Behaviour cloning at lr 1e-5 builds them only slowly: the project's
start scored 0 % greedy val after 60 steps and 3-10 % after 90 (docs/qwen_coder_1_5b.md), while the same
rows with the markers split into known pieces (`<`, `tool`, `_call`, `>`) scored 16 % after 27 steps.

So before SFT, each row of an added token that points where that placeholder does (input embeddings, and the
output ones where they are not tied) is given the mean of the rows of the pieces its text splits into without
it (the usual start for a new token). A model with no such row is used as it is.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

MATRICES = {"input": "model.embed_tokens.weight", "output": "lm_head.weight"}
"""The embedding matrices' names in the safetensors files of Qwen2 and Llama models (a tied model saves
the input one alone)."""
UNTRAINED_COSINE = 0.999
"""A row this close in direction to the placeholder (the row of the first id past the vocabulary) was never
trained: Qwen2.5-Coder-1.5B's `<tool_call>` rows are the placeholder itself (cosine 1.0), its `</tool_call>`
input row 0.99998; `<|im_end|>`, which the model does write, stands at 0.95."""
MARKER = "seal_untrained_tokens.json"
"""Written last into the prepared folder: its source and the tokens set; a folder without it is rebuilt."""


@dataclass(frozen=True)
class UntrainedToken:
    token: str
    token_id: int
    pieces: list[str]
    """The token's text as the tokenizer splits it when the token is not an added one."""
    matrices: list[str]
    """Where its row is the placeholder's: `input`, `output` or both."""


def _pieces(tokenizer: Any, text: str) -> list[int]:
    """`text` through the tokenizer's pre-tokenizer and model alone, as if no token were added."""
    backend = tokenizer.backend_tokenizer
    words = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else [(text, None)]
    return [piece.id for word, _ in words for piece in backend.model.tokenize(word)]


def saved_matrices(folder: Path) -> dict[str, torch.Tensor]:
    """The embedding matrices as saved in `folder`'s safetensors files (read alone, not the model), by
    `MATRICES`' keys; empty when the folder has none."""
    from safetensors import safe_open

    found = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as weights:
            names = set(weights.keys())
            found.update({kind: weights.get_tensor(name) for kind, name in MATRICES.items() if name in names})
    return found


def _untrained_rows(weight: torch.Tensor, size: int, ids: list[int]) -> set[int]:
    """The `ids` whose row points where the placeholder row (id `size`) does."""
    placeholder = weight[size].float()
    rows = weight[ids].float()
    cosine = torch.nn.functional.cosine_similarity(rows, placeholder.expand_as(rows), dim=1)
    return {token_id for token_id, c in zip(ids, cosine.tolist(), strict=True) if c >= UNTRAINED_COSINE}


def untrained_tokens(matrices: dict[str, torch.Tensor], tokenizer: Any) -> list[UntrainedToken]:
    """The added tokens whose row in any of `matrices` is the placeholder's (the row of the first id past
    the tokenizer's vocabulary, which no text reaches); none where a matrix has no such row."""
    size = len(tokenizer)
    added = sorted((i, t) for t, i in tokenizer.get_added_vocab().items() if i < size)
    ids = [i for i, _ in added]
    untrained = {
        kind: _untrained_rows(weight, size, ids)
        for kind, weight in matrices.items()
        if weight.shape[0] > size
    }
    found = []
    for token_id, token in added:
        kinds = [kind for kind, rows in untrained.items() if token_id in rows]
        pieces = [p for p in _pieces(tokenizer, token) if p != token_id]
        if kinds and pieces:
            found.append(UntrainedToken(token, token_id, tokenizer.convert_ids_to_tokens(pieces), kinds))
    return found


@torch.no_grad()
def initialise(model: Any, tokenizer: Any, tokens: list[UntrainedToken]) -> None:
    """Set each token's placeholder rows to the mean of its pieces' rows in the same matrix, in place."""
    weights = {"input": model.get_input_embeddings().weight}
    output = model.get_output_embeddings()
    if output is not None and output.weight.data_ptr() != weights["input"].data_ptr():
        weights["output"] = output.weight
    for token in tokens:
        ids = torch.tensor(tokenizer.convert_tokens_to_ids(token.pieces))
        for kind in token.matrices:
            if kind in weights:
                weight = weights[kind]
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
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokens = untrained_tokens(saved_matrices(source), tokenizer)
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
