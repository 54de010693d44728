"""Request and response bodies of the service: strict, closed (extra="forbid") and length-bounded.

Request bodies are parsed from the raw bytes with pydantic's JSON parser (`parse_body`), so every
malformed body (bad JSON, bad UTF-8, wrong types, unknown fields) is the same one-line 422.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, Field, ValidationError

from seal.env.episode import EpisodeResult
from seal.env.interface_record import InterfaceRecord
from seal.env.profile_record import ProfileJson
from seal.env.store import MAX_TASK_ID_CHARS, BadRequest
from seal.protocol import PROTOCOLS
from seal.records import CLOSED as _CLOSED
from seal.records import Version, describe

ProtocolName = Literal[tuple(sorted(PROTOCOLS))]  # type: ignore[valid-type]
M = TypeVar("M", bound=BaseModel)


class CreateEpisode(BaseModel):
    model_config = _CLOSED
    task_id: str = Field(min_length=1, max_length=MAX_TASK_ID_CHARS, examples=["multi_turn_base_0"])
    mode: Literal["train", "eval"]
    protocol: ProtocolName | None = Field(
        default=None,
        validation_alias=AliasChoices("protocol", "format"),
        description="protocol of the model-facing text (`format`, its name before v1.1, is still accepted)",
    )


class StepAction(BaseModel):
    model_config = _CLOSED
    action: str = Field(
        description="the assistant message text; one longer than 131,072 characters is a rejected message "
        "(seal/env/action_limit.py), scored as the model's mistake"
    )


class ProfileUpdate(BaseModel):
    """The body of `PUT /interface/profile`: the failure profile C_t (label counts, not the label shares
    that `finish` calls `profile`), and optionally the version the evolved Ω gets."""

    model_config = _CLOSED
    failure_profile: ProfileJson = Field(
        validation_alias=AliasChoices("failure_profile", "profile"),
        description="C_t as the trainer keeps it; `profile`, its name before v1.2, is still accepted",
    )
    version: Version | None = Field(
        default=None,
        description="number the new Ω explicitly (a resumed run restoring its saved Ω); "
        "unset: the current version + 1",
    )


class InterfaceState(InterfaceRecord):
    """The body of `PUT /interface/state`: an Ω's whole state as `GET /interface` answers it, its text
    included, which the service serves exactly (a resumed run's Ω; seal/env/omega_state.py). A body this
    schema accepts but the service cannot serve (other than its config, guidelines its config does not allow,
    a text they do not render) is a 409."""


class Error(BaseModel):
    detail: str


class Health(BaseModel):
    """`GET /healthz`: the service is up, what it holds, and which process answers (`pid`: a launcher that
    started a service on a port checks the answer is its own child's, not another service's that took the
    port while its child started)."""

    status: Literal["ok"]
    tasks: int
    episodes_open: int
    interface_version: int
    taxonomy: str
    pid: int


class TaskList(BaseModel):
    split: str
    count: int
    task_ids: list[str]


class Created(BaseModel):
    episode_id: str
    messages: list[dict[str, str]]
    interface_version: int


class Stepped(BaseModel):
    observation: list[dict[str, str]]
    done: bool
    info: dict[str, Any]


Finished = EpisodeResult
"""The finish body is `EpisodeResult` itself (FastAPI documents the dataclass), declared once."""


InterfaceOut = InterfaceRecord
"""What the interface routes answer: the Ω served, as `Interface.to_json` writes it, declared once."""


def parse_body(model: type[M], body: bytes, expected: str | None = None) -> M:
    """The validated body, or BadRequest listing its problems (and, when given, the body `expected`)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        problems = describe(exc.errors(include_url=False, include_input=False))
        raise BadRequest(problems if expected is None else f"{problems} (expected {expected})") from None


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI `requestBody` for a route that parses its body itself (see `parse_body`)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline(schema, definitions)}},
        }
    }


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    """Replace pydantic's local `$ref`s (which OpenAPI would not resolve) by the schemas they name."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(definitions[ref.removeprefix("#/$defs/")], definitions)
        return {key: _inline(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node
