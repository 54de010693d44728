"""Added tokens a released model never trained get readable rows before SFT.

Qwen2.5-Coder-1.5B-Instruct's released tokenizer writes the protocol's call markers `<tool_call>` and
`</tool_call>` as single added tokens, yet the model never learnt them: their embedding and output rows are
the very rows of the unused ids past the tokenizer's vocabulary (measured on the released weights: cosine
1.0, largest difference 0). The two markers are one vector to the model, and the logit that opens a call
starts where no trained token's does. Behaviour cloning at lr 1e-5 builds them only slowly: the project's
start scored 0 % greedy val after 60 steps and 3-10 % after 90 (docs/qwen_coder_1_5b.md), while the same
rows with the markers split into known pieces (`<`, `tool`, `_call`, `>`) scored 16 % after 27 steps.

So before SFT, in a copy of the model, each added token whose row points where that placeholder does (input
embeddings, and the output ones where they are not tied) is either initialised, its rows set to the mean of
the rows of the pieces its text splits into without it (the usual start for a new token), or split: the
copy's tokenizer retires it (its id stays, under a name no text contains), so its text is written as those
pieces, and the weights are the model's own. A model with no such row is used as it is.
"""

from __future__ import annotations

import json
import os
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
"""Written last into the prepared folder: its source, the handling and the tokens; a folder without it is
rebuilt."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "added_tokens.json")
"""The files `split` rewrites: copied, where the rest of the model is linked."""
RETIRED = "<|seal_retired_{id}|>"
"""The name a split token keeps its id under: no text contains it, so the tokenizer never writes it."""


class UntrainedTokenError(ValueError):
    """A model whose untrained tokens cannot be split as asked; the message is one line."""


@dataclass(frozen=True)
class UntrainedToken:
    token: str
    token_id: int
    pieces: list[str]
    """The token's text as the tokenizer splits it when the token is not an added one."""
    matrices: list[str]
    """Where its row is the placeholder's: `input`, `output` or both."""
    special: bool = False
    """A control token (Qwen's `<|vision_start|>` and the like), which the data's text never writes: split
    leaves it as it is."""


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
            special = token in tokenizer.all_special_tokens
            found.append(
                UntrainedToken(token, token_id, tokenizer.convert_ids_to_tokens(pieces), kinds, special)
            )
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


def _retire(folder: Path, tokens: list[UntrainedToken]) -> None:
    """Rename `tokens` in `folder`'s tokenizer files to `RETIRED`: the ids and the vocabulary's size stay,
    and the tokenizer writes each token's text as its pieces."""
    names = {t.token: RETIRED.format(id=t.token_id) for t in tokens}
    tokenizer_file = folder / "tokenizer.json"
    fast = json.loads(tokenizer_file.read_text())
    for added in fast["added_tokens"]:
        added["content"] = names.get(added["content"], added["content"])
    tokenizer_file.write_text(json.dumps(fast, ensure_ascii=False))
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text())
        for added in config.get("added_tokens_decoder", {}).values():
            added["content"] = names.get(added["content"], added["content"])
        config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    listed = folder / "added_tokens.json"
    if listed.is_file():
        ids = json.loads(listed.read_text())
        listed.write_text(json.dumps({names.get(text, text): i for text, i in ids.items()}, indent=2))


def _link_or_copy(source: str, dest: str) -> None:
    """A hard link where the file system allows one (the weights are only read), else a copy."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def _split(source: Path, dest: Path, tokens: list[UntrainedToken]) -> None:
    """`dest`: `source`'s files, with a tokenizer that writes the texts of `tokens` that are not special as
    their pieces."""
    from transformers import AutoTokenizer

    ordinary = [t for t in tokens if not t.special]
    shutil.copytree(
        source, dest, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(*TOKENIZER_FILES)
    )
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, dest / name)
    _retire(dest, ordinary)
    tokenizer = AutoTokenizer.from_pretrained(dest)
    for token in ordinary:
        written = tokenizer.convert_ids_to_tokens(tokenizer.encode(token.token, add_special_tokens=False))
        if written != token.pieces:
            shutil.rmtree(dest)
            raise UntrainedTokenError(
                f"{source}: a renamed copy of its tokenizer still writes {token.token} as {written}, not as "
                f"its pieces; use sft.untrained_tokens=initialise"
            )


def prepared_model(
    source: Path, dest: Path, handling: str = "initialise"
) -> tuple[Path, list[UntrainedToken]]:
    """The folder SFT should start from: `source` itself when it has no untrained added token (or no
    safetensors embedding to read), else `dest`, a copy whose untrained tokens are initialised or split
    (`handling`; reused when already prepared from `source` the same way). Only the embedding is read to
    decide; the model is loaded only to be initialised."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = dest / MARKER
    if marker.is_file():
        recorded = json.loads(marker.read_text())
        if recorded.get("source") == str(source) and recorded.get("handling", "initialise") == handling:
            return dest, [UntrainedToken(**t) for t in recorded["tokens"]]
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokens = untrained_tokens(saved_matrices(source), tokenizer)
    if not tokens:
        return source, []
    if handling == "split" and not (source / "tokenizer.json").is_file():
        raise UntrainedTokenError(
            f"{source}: sft.untrained_tokens=split renames tokens in a fast tokenizer's tokenizer.json, and "
            f"there is none; use sft.untrained_tokens=initialise"
        )
    if dest.exists():
        shutil.rmtree(dest)
    if handling == "split":
        _split(source, dest, tokens)
    else:
        model = AutoModelForCausalLM.from_pretrained(source, dtype="auto")
        initialise(model, tokenizer, tokens)
        model.save_pretrained(dest)
        tokenizer.save_pretrained(dest)
    record = {"source": str(source), "handling": handling, "tokens": [t.__dict__ for t in tokens]}
    marker.write_text(json.dumps(record, indent=1) + "\n")
    return dest, tokens
