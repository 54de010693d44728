"""Request and response bodies of the service: strict, closed (extra="forbid") and length-bounded.

Request bodies are parsed from the raw bytes with pydantic's JSON parser (`parse_body`), so every
malformed body (bad JSON, bad UTF-8, wrong types, unknown fields) is the same one-line 422.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from seal.env.episode import EpisodeResult
from seal.env.store import MAX_TASK_ID_CHARS, BadRequest
from seal.protocol import PROTOCOLS
from seal.tocf.profile import MAX_EXACT

_CLOSED = ConfigDict(extra="forbid", strict=True)
ProtocolName = Literal[tuple(sorted(PROTOCOLS))]  # type: ignore[valid-type]
M = TypeVar("M", bound=BaseModel)
SHOWN_PROBLEMS = 6
"""A refusal lists this many validation problems; a body with more gets their count."""


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


def _whole(value: Any) -> Any:
    """JSON Schema counts 62.0 as an integer, strict pydantic does not: accept it as 62."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Count = Annotated[int, Field(ge=0, le=MAX_EXACT), BeforeValidator(_whole)]
"""(The bounds come before the validator, or the OpenAPI schema loses them.)"""
Sum = Annotated[float, Field(ge=-MAX_EXACT, le=MAX_EXACT, allow_inf_nan=False)]
Label = Annotated[str, Field(min_length=1)]


class ProfileScope(BaseModel):
    """One scope S of C_t; missing keys mean zero."""

    model_config = _CLOSED
    trajectories: Count = 0
    labels: dict[Label, Count] = Field(default_factory=dict)
    reward_sum: dict[Label, Sum] = Field(default_factory=dict)
    by_category: dict[Label, dict[Label, Count]] = Field(default_factory=dict)


class ProfileJson(BaseModel):
    """C_t as `seal.tocf.profile.FailureProfile.to_json` writes it (docs/design.md §4.2)."""

    model_config = _CLOSED
    version: Literal[1]
    window: ProfileScope
    total: ProfileScope


class ProfileUpdate(BaseModel):
    """The body of `PUT /interface/profile`: the failure profile C_t (label counts, not the label shares
    that `finish` calls `profile`), and optionally the version the evolved Ω gets."""

    model_config = _CLOSED
    failure_profile: ProfileJson = Field(
        validation_alias=AliasChoices("failure_profile", "profile"),
        description="C_t as the trainer keeps it; `profile`, its name before v1.2, is still accepted",
    )
    version: Count | None = Field(
        default=None,
        description="number the new Ω explicitly (a resumed run restoring its saved Ω); "
        "unset: the current version + 1",
    )


class InterfaceState(BaseModel):
    """The body of `PUT /interface/state`: an Ω's whole state as `GET /interface` answers it, its text
    included, which the service serves exactly (a resumed run's Ω; seal/env/omega_state.py)."""

    model_config = _CLOSED
    version: Count
    config: dict[str, Any]
    guidelines: list[str]
    profile: dict[str, Any] | None
    system_suffix: str = Field(description="the text Ω adds to the system prompt; checked against the rest")


class Error(BaseModel):
    detail: str


class Health(BaseModel):
    status: Literal["ok"]
    tasks: int
    episodes_open: int
    interface_version: int
    taxonomy: str


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


class InterfaceOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: int
    config: dict[str, Any]
    guidelines: list[str]
    profile: dict[str, Any] | None


def parse_body(model: type[M], body: bytes, expected: str | None = None) -> M:
    """The validated body, or BadRequest listing its problems (and, when given, the body `expected`)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        problems = describe(exc.errors(include_url=False, include_input=False))
        raise BadRequest(problems if expected is None else f"{problems} (expected {expected})") from None


def describe(errors: list[Any]) -> str:
    """Every problem, `where: what`, separated by semicolons; the first few when there are many."""
    shown = [_problem(error) for error in errors[:SHOWN_PROBLEMS]]
    more = f"; and {len(errors) - SHOWN_PROBLEMS} more problem(s)" if len(errors) > SHOWN_PROBLEMS else ""
    return "; ".join(shown) + more


def _problem(error: Any) -> str:
    if error.get("type") == "json_invalid":
        return f"malformed JSON body: {error['msg']}"
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error['msg']}"


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
