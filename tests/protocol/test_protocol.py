"""Behaviour of the model-facing text protocols (seal/protocol).

bfcl_eval is imported inside tests, after `seal.protocol` has imported `seal.bfcl`, which points
BFCL_PROJECT_ROOT at a writable cache first.
"""

from __future__ import annotations

import json
import keyword
import re
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import get_task
from seal.protocol import (
    PROTOCOLS,
    CallCandidate,
    Llama3JsonProtocol,
    ParsedAction,
    PythonListProtocol,
    QwenFCProtocol,
    QwenFCStrictTagsProtocol,
    get_protocol,
)
from seal.protocol.qwen_fc import NO_VALID_BLOCK, STRAY_TAG, find_blocks

CASES = Path(__file__).resolve().parents[1] / "data" / "diagnosis_cases.jsonl"
QWEN = QwenFCProtocol()
STRICT_TAGS = QwenFCStrictTagsProtocol()
LLAMA = Llama3JsonProtocol()
PYLIST = PythonListProtocol()
ALL = [QWEN, LLAMA, PYLIST]
TINY_DOCS = [
    {"name": "cd", "description": "Change dir.", "parameters": {"type": "dict", "properties": {}}},
    {"name": "echo", "description": 'Café "quoted"', "parameters": {"type": "dict", "required": ["x"]}},
]


def _pairs(parsed: ParsedAction) -> list[tuple[object, object]]:
    return [(call.name, call.arguments) for call in parsed.calls]


# --- registry and shared messages ---------------------------------------------------------------


def test_registry_names_and_unknown_name():
    assert set(PROTOCOLS) == {"qwen_fc", "qwen_fc_strict_tags", "llama3_json", "python_list"}
    assert isinstance(get_protocol("qwen_fc"), QwenFCProtocol)
    with pytest.raises(ValueError, match="llama3_json, python_list, qwen_fc, qwen_fc_strict_tags"):
        get_protocol("hermes")


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
def test_error_observation_and_reveal_message(protocol):
    assert protocol.error_observation(["a", "b"]) == [
        {"role": "user", "content": "[ERROR] Invalid tool call format: a; b"}
    ]
    assert protocol.reveal_message(TINY_DOCS) == (
        json.dumps(TINY_DOCS) + "\nI have updated some more functions you can choose from. What about now?"
    )


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
def test_every_observation_is_one_user_message(protocol):
    messages = protocol.observation(['{"ok": true}', "Error during execution: boom"])
    assert len(messages) == 1
    assert messages[0]["role"] == "user"
    assert messages[0]["content"].index('{"ok": true}') < messages[0]["content"].index("boom")


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
def test_extra_is_appended_after_a_blank_line(protocol):
    base = protocol.system_prompt(TINY_DOCS)
    assert protocol.system_prompt(TINY_DOCS, "Note: be brief.") == base + "\n\nNote: be brief."
    assert protocol.system_prompt(TINY_DOCS, "") == base


# --- qwen_fc --------------------------------------------------------------------------------------


def test_qwen_system_prompt_exact():
    expected = (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"name": "cd", "description": "Change dir.", "parameters": {"type": "dict", "properties": {}}}\n'
        '{"name": "echo", "description": "Caf\\u00e9 \\"quoted\\"", '
        '"parameters": {"type": "dict", "required": ["x"]}}\n'
        "</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
    assert QWEN.system_prompt(TINY_DOCS) == expected


def test_qwen_prompt_and_observation_match_bfcl_qwen_fc_handler_on_a_real_task():
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    docs = list(get_task("multi_turn_base_0").functions)
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "x"},
        {"role": "tool", "content": "A"},
        {"role": "tool", "content": "B"},
    ]
    rendered = QwenFCHandler._format_prompt(None, messages, docs)
    prompt = QWEN.system_prompt(docs)
    assert prompt == (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
        "with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + "\n".join(json.dumps(doc) for doc in docs)
        + "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
        'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        "<args-json-object>}\n</tool_call>"
    )
    assert rendered.startswith(f"<|im_start|>system\n{prompt}<|im_end|>\n")
    content = QWEN.observation(["A", "B"])[0]["content"]
    assert content == "<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response>"
    assert f"<|im_start|>user\n{content}<|im_end|>\n" in rendered


def test_qwen_parses_blocks_in_order():
    text = (
        'Let me do that.\n<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n'
        '<tool_call>{"name": "ls", "arguments": {"nested": {"x": [1, {"y": 2}]}}}</tool_call>'
    )
    parsed = QWEN.parse(text)
    assert parsed.errors == ()
    assert parsed.has_markup
    assert _pairs(parsed) == [("cd", {"folder": "a"}), ("ls", {"nested": {"x": [1, {"y": 2}]}})]


def test_qwen_arguments_as_json_string_are_decoded():
    parsed = QWEN.parse('<tool_call>\n{"name": "cd", "arguments": "{\\"folder\\": \\"a\\"}"}\n</tool_call>')
    assert parsed.errors == ()
    assert _pairs(parsed) == [("cd", {"folder": "a"})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<tool_call>\ncd(folder='a')\n</tool_call>", NO_VALID_BLOCK),
        ("I will use <tool_call> now", NO_VALID_BLOCK),
        ('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}\n</tool_call>', "Invalid tool call JSON"),
        ("<tool_call>\n{'name': 'cd', 'arguments': {}}\n</tool_call>", "Invalid tool call JSON"),
        ('<tool_call>\n{"arguments": {}}\n</tool_call>', "must contain 'name' and 'arguments'"),
        ('<tool_call>\n{"name": "cd"}\n</tool_call>', "must contain 'name' and 'arguments'"),
        (
            '<tool_call>\n{"name": "cd", "parameters": {}}\n</tool_call>',
            "must contain 'name' and 'arguments'",
        ),
        ('<tool_call>\n{"name": "cd", "arguments": "{oops"}\n</tool_call>', "string that is not valid JSON"),
        ('<tool_call>\n{"name": "cd", "arguments": ["a"]}\n</tool_call>', "must be a JSON object, got list"),
        ('<tool_call>\n{"name": "cd", "arguments": "[1]"}\n</tool_call>', "must be a JSON object, got list"),
        ('<tool_call>\n{"name": "cd", "arguments": 3}\n</tool_call>', "must be a JSON object, got int"),
    ],
)
def test_qwen_format_errors_are_reported(text, message):
    parsed = QWEN.parse(text)
    assert parsed.has_markup
    assert any(message in error for error in parsed.errors), parsed.errors


STRAY_TAGS = [
    ('<tool_call>\n{"name": "cd", "arguments": {}}\n</tool_call>\n<tool_call>\nls()', [("cd", {})]),
    ('<tool_call>\n{"name": "cd", "arguments": {}}\n</tool_call></tool_call>', [("cd", {})]),
    (
        '<tool_call>\nls()\n</tool_call>\n<tool_call>\n{"name": "cd", "arguments": {}}\n</tool_call>',
        [("cd", {})],
    ),
    (  # a message the 1.5B's greedy policy sent again and again after its RL steps (docs/qwen_coder_1_5b.md)
        '<tool_call>\n{"name": "get_stock_info", "arguments": {"symbol": "AAPL"}}\n</tool_call>\n'
        '</tool_call>\n<tool_call>\n<tool_call>\n<tool_call>\n{"name": "remove_stock_from_watchlist", '
        '"arguments": {"symbol": "AAPL"}}\n</tool_call>\n</tool_call>',
        [("get_stock_info", {"symbol": "AAPL"}), ("remove_stock_from_watchlist", {"symbol": "AAPL"})],
    ),
]


@pytest.mark.parametrize(("text", "calls"), STRAY_TAGS)
def test_qwen_drops_tag_text_outside_the_valid_blocks_as_the_released_code_does(text, calls):
    parsed = QWEN.parse(text)
    assert parsed.has_markup and parsed.errors == () and _pairs(parsed) == calls


@pytest.mark.parametrize(("text", "calls"), STRAY_TAGS)
def test_qwen_strict_tags_rejects_tag_text_outside_the_valid_blocks(text, calls):
    parsed = STRICT_TAGS.parse(text)
    assert parsed.errors == (STRAY_TAG,) and _pairs(parsed) == calls


def _released_parse(text: str) -> tuple[list[tuple[object, object]], bool]:
    """The released code's strict `xml_json` parse of a message: its calls, and whether it has an error."""
    matches = list(re.finditer(r"<tool_call>\s*\n?({.*?})\s*\n?</tool_call>", text, re.DOTALL))
    if not matches:
        return [], "<tool_call" in text or "</tool_call>" in text
    calls: list[tuple[object, object]] = []
    error = False
    for match in matches:
        try:
            data = json.loads(match.group(1).strip())
        except json.JSONDecodeError:
            error = True
            continue
        if "name" not in data or "arguments" not in data or not isinstance(data["arguments"], dict):
            error = True
            continue
        calls.append((data["name"], data["arguments"]))
    return calls, error


_CALL_TOKENS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "\n",
        " ",
        "x",
        "{",
        "}",
        '{"name": "cd", "arguments": {}}',
        '{"name": "ls"}',
    ]
)


@settings(max_examples=400)
@given(st.lists(_CALL_TOKENS, max_size=24).map("".join))
@example('<tool_call>\n{"name": "cd", "arguments": {}}\n</tool_call>\n</tool_call>')
def test_qwen_parse_reads_a_message_as_the_released_code_does(text):
    calls, error = _released_parse(text)
    parsed = QWEN.parse(text)
    assert _pairs(parsed) == calls and bool(parsed.errors) == error
    strict = STRICT_TAGS.parse(text)
    assert _pairs(strict) == calls and set(parsed.errors) <= set(strict.errors)


def test_qwen_unclosed_block_before_a_valid_one_is_an_error_not_a_silent_call():
    text = (
        '<tool_call>\n{"name": "a", "arguments": {}}\n'
        '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'
    )
    parsed = QWEN.parse(text)
    assert parsed.errors
    assert parsed.calls == ()


def test_qwen_keeps_valid_candidates_next_to_errors():
    text = (
        '<tool_call>\n{"name": "cd", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": 1}\n</tool_call>'
    )
    parsed = QWEN.parse(text)
    assert _pairs(parsed) == [("cd", {})]
    assert len(parsed.errors) == 1


@pytest.mark.parametrize("text", ["Done.", "", "I used {json} and <tool_response> tags", "[cd(folder='a')]"])
def test_qwen_plain_text_has_no_markup(text):
    assert QWEN.parse(text) == ParsedAction(calls=(), errors=(), has_markup=False)


def test_qwen_format_calls_text():
    calls = [ToolCall("cd", {"folder": "a"}), ToolCall("ls")]
    assert QWEN.format_calls(calls) == (
        '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    )


def test_qwen_argument_text_cannot_close_a_block_early():
    call = ToolCall("echo", {"content": "x} </tool_call> <tool_call>{}</tool_call>"})
    assert _pairs(QWEN.parse(QWEN.format_calls([call]))) == [("echo", call.arguments)]


_TOKENS = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<tool_call>{", "} </tool_call>", "{", "}", "\n", " ", "x"]
)


@settings(max_examples=400)
@given(st.lists(_TOKENS, max_size=30).map("".join))
@example("<tool_call>\n{} \n</tool_call>")
@example("<tool_call>{<tool_call> {}}\n</tool_call>}</tool_call>")
def test_find_blocks_matches_the_reference_regex(text):
    reference = re.compile(r"<tool_call>\s*\n?({.*?})\s*\n?</tool_call>", re.DOTALL)
    expected = [(m.start(), m.end(), m.group(1)) for m in reference.finditer(text)]
    assert find_blocks(text) == expected


@pytest.mark.parametrize(
    "text",
    ["<tool_call>{" * 20_000 + "</tool_call>", "<tool_call>{}" * 20_000 + "x</tool_call>", "}" * 200_000],
)
def test_qwen_parse_is_linear_on_pathological_markup(text):
    start = time.perf_counter()
    QWEN.parse(text)
    assert time.perf_counter() - start < 1.0


# --- llama3_json ----------------------------------------------------------------------------------


def test_llama_system_prompt_lists_docs_after_instructions():
    prompt = LLAMA.system_prompt(TINY_DOCS)
    assert prompt.startswith("Given the following functions, please respond with a JSON for a function call")
    assert '{"name": function name, "parameters": dictionary of argument name and its value}' in prompt
    assert prompt.endswith("\n\n" + "\n\n".join(json.dumps(doc, indent=4) for doc in TINY_DOCS))


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "cd", "parameters": {"folder": "a"}}\n{"name": "ls", "parameters": {}}',
        '[{"name": "cd", "parameters": {"folder": "a"}}, {"name": "ls", "arguments": {}}]',
        '{"name": "cd", "arguments": {"folder": "a"}}; {"name": "ls", "parameters": {}}',
        '  <|python_tag|>{"name": "cd", "parameters": "{\\"folder\\": \\"a\\"}"};'
        '{"name": "ls", "parameters": {}}\n',
    ],
)
def test_llama_accepts_objects_lists_and_separators(text):
    parsed = LLAMA.parse(text)
    assert parsed.errors == ()
    assert parsed.has_markup
    assert _pairs(parsed) == [("cd", {"folder": "a"}), ("ls", {})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"name": "cd", "parameters": {"folder": "a"}', "Invalid tool call JSON"),
        ('{"name": "cd", "parameters": {}}\nI called cd.', "Invalid tool call JSON"),
        ('{"name": "cd"}', "must contain 'name' and 'parameters' or 'arguments'"),
        ('{"name": "cd", "parameters": {}, "arguments": {}}', "only one of"),
        ('["cd"]', "must be a JSON object, got str"),
        ('{"name": "cd", "parameters": [1]}', "must be a JSON object, got list"),
    ],
)
def test_llama_format_errors_are_reported(text, message):
    parsed = LLAMA.parse(text)
    assert parsed.has_markup
    assert any(message in error for error in parsed.errors), parsed.errors


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "cd", "parameters": {"folder": "a"}}\n{"name": "ls", "parameters": {}}\n```',
        "{'name': 'cd', 'parameters': {'folder': 'a'}}; {'name': 'ls', 'parameters': {}}",
        "[{'name': 'cd', 'parameters': {'folder': 'a'}}, {'name': 'ls', 'parameters': {}}]",
        '{"name": "cd", "parameters": {"folder": "a"}},\n{"name": "ls", "parameters": {}}',
        '{"function": "cd", "parameters": {"folder": "a"}}\n<|python_tag|>{"name": "ls", "arguments": {}}',
    ],
)
def test_llama_reads_fences_python_literals_and_commas_as_the_references_do(text):
    """bfcl-eval's decoder reads Python syntax, the released code a fence, Python literals and `function`."""
    parsed = LLAMA.parse(text)
    assert parsed.errors == ()
    assert _pairs(parsed) == [("cd", {"folder": "a"}), ("ls", {})]


_TEXT = st.text(alphabet=st.characters(exclude_characters=";", exclude_categories=("Cs",)), max_size=6)
"""Without `;`: bfcl-eval's decoder splits a reply holding one on it, strings included."""
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
)
_CALLS = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=8).filter(lambda name: ";" not in name),
        st.dictionaries(_TEXT, _JSON_VALUES, max_size=3),
    ),
    min_size=2,
    max_size=3,
)
_LLAMA_FORMS = {
    "JSON objects joined by `;`": lambda objects: "; ".join(json.dumps(o) for o in objects),
    "a Python list": repr,
    "Python objects joined by `,`": lambda objects: ", ".join(repr(o) for o in objects),
}


def _bfcl_llama_decode(text: str) -> list[tuple[object, object]]:
    """bfcl-eval's Llama-3.1 decoder (its `eval` only ever sees text this test wrote)."""
    from bfcl_eval.model_handler.local_inference.llama_3_1 import LlamaHandler_3_1

    return [next(iter(call.items())) for call in LlamaHandler_3_1.decode_ast(None, text, "Python", False)]


@given(_CALLS, st.sampled_from(sorted(_LLAMA_FORMS)))
@settings(max_examples=300, deadline=None)
def test_llama_reads_a_reply_as_bfcl_evals_llama_decoder_does(calls, form):
    text = _LLAMA_FORMS[form]([{"name": name, "parameters": arguments} for name, arguments in calls])
    parsed = LLAMA.parse(text)
    assert parsed.errors == ()
    assert _pairs(parsed) == _bfcl_llama_decode(text) == calls


@given(_CALLS)
@settings(max_examples=100, deadline=None)
def test_llama_reads_python_objects_one_a_line(calls):
    """The form the instructions ask for, one object a line, in Python syntax (bfcl-eval's decoder
    cannot read lines: its `eval` takes one expression)."""
    text = "\n".join(repr({"name": name, "parameters": arguments}) for name, arguments in calls)
    parsed = LLAMA.parse(text)
    assert parsed.errors == ()
    assert _pairs(parsed) == calls


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>',
        '{"name": "cd", "parameters": {"folder": "a"}}</tool_call>',
        "Calling it now. <tool_call>",
    ],
)
def test_llama_tag_text_is_a_format_error_as_in_the_released_codes_strict_mode(text):
    parsed = LLAMA.parse(text)
    assert parsed.calls == ()
    assert parsed.errors == ("Reply with raw JSON calls, not <tool_call> tags",)


@pytest.mark.parametrize(
    "text",
    [
        "{'name': 'ls', 'parameters': {'a': " + "-" * 800 + "1}}",
        "{'name': 'ls', 'parameters': {'a': " + "[" * 5000 + "]" * 5000 + "}}",
        "{'name': 'ls', 'parameters': {'a': " + "9" * 4301 + "}}",
        "{'name': 'ls', 'parameters': {}}; import os",
        "{'name': 'ls', 'parameters': {'a': x}}",
    ],
)
def test_llama_a_reply_neither_json_nor_python_literals_is_a_json_error(text):
    parsed = LLAMA.parse(text)
    assert parsed.calls == ()
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith("Invalid tool call JSON")


@pytest.mark.parametrize("text", ["Done.", "", "The answer is {x}.", "[]", "  []  "])
def test_llama_plain_text_has_no_markup(text):
    assert LLAMA.parse(text) == ParsedAction()


def test_llama_observation_text():
    assert LLAMA.observation(["r1", "r2"])[0]["content"] == (
        "Results of your function calls, in call order:\n[1] r1\n[2] r2"
    )


# --- python_list ----------------------------------------------------------------------------------


def test_python_list_system_prompt_is_bfcls_default_prompt():
    from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT
    from bfcl_eval.model_handler.utils import formulate_system_prompt

    docs = list(get_task("multi_turn_base_0").functions)
    prompt = PYLIST.system_prompt(docs)
    assert prompt == formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, docs)
    assert prompt.startswith("You are an expert in composing functions.You are given a question")
    assert json.dumps(docs, indent=4) in prompt


@pytest.mark.parametrize(
    "text",
    [
        "[cd(folder='a'), ls(a=-1.5, b=[1, {'k': None}], c=True)]",
        "```python\n[cd(folder='a'), ls(a=-1.5, b=[1, {'k': None}], c=True)]\n```",
        "  ```\n[cd(folder='a'),\n ls(a=-1.5, b=[1, {'k': None}], c=True)]```  ",
    ],
)
def test_python_list_parses_keyword_calls(text):
    parsed = PYLIST.parse(text)
    assert parsed.errors == ()
    assert _pairs(parsed) == [("cd", {"folder": "a"}), ("ls", {"a": -1.5, "b": [1, {"k": None}], "c": True})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[sort('final_report.pdf')]", "positional arguments"),
        ("[f(*args)]", "positional arguments"),
        ("[f(**kw)]", "** unpacking"),
        ("[f(a=1, a=2)]", "repeats argument a"),
        ("[f(a=x)]", "not a literal value"),
        ("[f(a=g(b=1))]", "not a literal value"),
        ("[os.system(cmd='ls')]", "must be a plain name"),
        ("[f(a=1), 3]", "is not a function call"),
        ("[f(a=1)] + [g()]", "one list of function calls"),
        ("[f(a=1)]\nI called f.", "Invalid function call list"),
        ("[f(a=1)", "Invalid function call list"),
        ("[f(a='\0')]", "Invalid function call list"),
    ],
)
def test_python_list_format_errors_are_reported(text, message):
    parsed = PYLIST.parse(text)
    assert parsed.has_markup
    assert any(message in error for error in parsed.errors), parsed.errors


@pytest.mark.parametrize("text", ["Done.", "", "f(a=1)", "[]", "```\n[]\n```"])
def test_python_list_plain_text_has_no_markup(text):
    assert PYLIST.parse(text) == ParsedAction()


def test_python_list_observation_is_bfcl_tool_message_repr():
    content = PYLIST.observation(["r1", "it's"])[0]["content"]
    assert content == repr([{"role": "tool", "content": "r1"}, {"role": "tool", "content": "it's"}])


def test_python_list_format_calls_text_and_bfcl_decoder_agree():
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    calls = [ToolCall("f", {"a": 1, "b": "it's"}), ToolCall("g", {"c": [None, {"k": 1.5}]})]
    text = PYLIST.format_calls(calls)
    assert text == "[f(a=1,b=\"it's\"), g(c=[None, {'k': 1.5}])]"
    assert default_decode_ast_prompting(text) == [
        {"f": {"a": 1, "b": "it's"}},
        {"g": {"c": [None, {"k": 1.5}]}},
    ]


# --- all protocols: round trip, injection, robustness ----------------------------------------------

_IDENTIFIERS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_CALLS = st.lists(
    st.builds(ToolCall, _IDENTIFIERS, st.dictionaries(_IDENTIFIERS, _JSON, max_size=4)),
    min_size=1,
    max_size=4,
)


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
@settings(max_examples=150, deadline=None)
@given(calls=_CALLS)
def test_parse_round_trips_format_calls(protocol, calls):
    parsed = protocol.parse(protocol.format_calls(calls))
    assert parsed.errors == ()
    assert parsed.has_markup
    assert _pairs(parsed) == [(call.name, call.arguments) for call in calls]


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
def test_no_calls_format_to_plain_text(protocol):
    assert protocol.parse(protocol.format_calls([])) == ParsedAction()


@pytest.mark.parametrize(
    "name", ["open('/tmp/seal_protocol_probe','w').close", "__import__('os').system", "cd; rm -rf /"]
)
@pytest.mark.parametrize("protocol", [QWEN, LLAMA], ids=lambda p: p.name)
def test_json_protocols_return_injection_names_raw(protocol, name):
    probe = Path("/tmp/seal_protocol_probe")
    probe.unlink(missing_ok=True)
    text = (
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': {}})}\n</tool_call>"
        if protocol is QWEN
        else json.dumps({"name": name, "parameters": {}})
    )
    parsed = protocol.parse(text)
    assert parsed.calls == (CallCandidate(name=name, arguments={}),)
    assert not probe.exists()


@pytest.mark.parametrize(
    "text", ["[open('/tmp/seal_protocol_probe','w').close()]", "[__import__('os').system(command='ls')]"]
)
def test_python_list_rejects_injection_without_evaluating(text):
    probe = Path("/tmp/seal_protocol_probe")
    probe.unlink(missing_ok=True)
    parsed = PYLIST.parse(text)
    assert parsed.errors
    assert parsed.calls == ()
    assert not probe.exists()


_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("protocol", "text"),
    [
        (QWEN, '<tool_call>\n{"name": "f", "arguments": {"a": ' + _DEEP + "}}\n</tool_call>"),
        (QWEN, '<tool_call>\n{"name": "f", "arguments": "{\\"a\\": ' + "[" * 100_000 + '"}\n</tool_call>'),
        (LLAMA, '{"name": "f", "parameters": {"a": ' + _DEEP + "}}"),
        (LLAMA, _DEEP),
        (PYLIST, "[f(a=" + _DEEP + ")]"),
        (PYLIST, _DEEP),
    ],
    ids=["qwen", "qwen-string-args", "llama", "llama-list", "python", "python-list"],
)
def test_deep_nesting_becomes_an_error(protocol, text):
    parsed = protocol.parse(text)
    assert parsed.has_markup
    assert parsed.errors


@pytest.mark.parametrize("protocol", ALL, ids=lambda p: p.name)
def test_huge_arguments_parse(protocol):
    call = ToolCall("echo", {"content": "x" * 15_000})
    parsed = protocol.parse(protocol.format_calls([call]))
    assert _pairs(parsed) == [("echo", call.arguments)]


# --- realistic fixtures ---------------------------------------------------------------------------


def _fixture_actions() -> list[tuple[str, str]]:
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    return [
        (case["case"], action) for case in cases if case["format"] == "qwen_fc" for action in case["actions"]
    ]


def test_qwen_parses_the_diagnosis_case_actions():
    expected_errors = 0
    for case, action in _fixture_actions():
        parsed = QWEN.parse(action)
        assert parsed.has_markup == ("<tool_call>" in action), (case, action)
        malformed = "malformed_json" in case and '"delete_message"' in action
        python_syntax = "python_syntax" in case and "pressBrakePedal(" in action
        if malformed or python_syntax:
            expected_errors += 1
            assert parsed.errors and not parsed.calls, (case, action)
            continue
        assert parsed.errors == (), (case, action)
        assert len(parsed.calls) == action.count("<tool_call>")
        for call in parsed.calls:
            ToolCall(call.name, call.arguments)
    assert expected_errors == 2


def test_qwen_replays_ground_truth_of_base_0():
    case = next(json.loads(line) for line in CASES.read_text().splitlines() if "full_replay__base_0" in line)
    called = [
        [ToolCall(c.name, c.arguments).to_call_string() for c in QWEN.parse(action).calls]
        for action in case["actions"]
        if "<tool_call>" in action
    ]
    assert called[0] == [
        "cd(folder='document')",
        "mkdir(dir_name='temp')",
        "mv(source='final_report.pdf',destination='temp')",
    ]
    assert called[2] == ["sort(file_name='final_report.pdf')"]
