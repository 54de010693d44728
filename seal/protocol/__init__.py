"""Model-facing text formats: tool prompts, call parsing, result rendering (see docs/design.md §3.3)."""

from seal.protocol.base import CallCandidate, ParsedAction, Protocol
from seal.protocol.llama3_json import Llama3JsonProtocol
from seal.protocol.python_list import PythonListProtocol
from seal.protocol.qwen_fc import QwenFCProtocol, QwenFCStrictTagsProtocol

PROTOCOLS: dict[str, type[Protocol]] = {
    cls.name: cls
    for cls in (QwenFCProtocol, QwenFCStrictTagsProtocol, Llama3JsonProtocol, PythonListProtocol)
}
DEFAULT_PROTOCOL = QwenFCProtocol.name


def get_protocol(name: str) -> Protocol:
    """A protocol instance by name; unknown names raise ValueError listing the known ones."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}") from None


__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "CallCandidate",
    "Llama3JsonProtocol",
    "ParsedAction",
    "Protocol",
    "PythonListProtocol",
    "QwenFCProtocol",
    "QwenFCStrictTagsProtocol",
    "get_protocol",
]
