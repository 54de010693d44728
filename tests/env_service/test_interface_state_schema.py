"""`PUT /interface/state`: its OpenAPI schema is the strict record it validates (`InterfaceRecord`), so a body
the schema calls valid is never a 422; a well-formed Ω the service cannot serve is a 409."""

from __future__ import annotations

from dataclasses import fields

import httpx
import jsonschema
import pytest

from env_service.app import ServiceSettings, create_app
from env_service.models import InterfaceState, request_body
from seal.env.interface import GUIDELINES, InterfaceConfig
from seal.env.interface_record import InterfaceConfigRecord, InterfaceRecord
from seal.tocf.profile import FailureProfile


def test_the_record_names_every_field_of_the_config_and_no_other():
    """The record mirrors `InterfaceConfig` for the schema: a field added to one belongs in the other."""
    assert list(InterfaceConfigRecord.model_fields) == [field.name for field in fields(InterfaceConfig)]


def pressing_profile() -> dict:
    profile = FailureProfile()
    for _ in range(20):
        profile.observe(["missing_tool_call", "state_mismatch", "pass"], 0.0, "multi_turn_base")
    return profile.to_json()


@pytest.fixture
async def api():
    app = create_app(ServiceSettings.from_options(interface_preset="full"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client


def route_schema(app) -> dict:
    operation = app.openapi()["paths"]["/interface/state"]["put"]
    return operation["requestBody"]["content"]["application/json"]["schema"]


async def test_the_route_schema_is_the_record_the_route_validates(api):
    schema = route_schema(api.app)
    assert schema == request_body(InterfaceState)["requestBody"]["content"]["application/json"]["schema"]
    record = request_body(InterfaceRecord)["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"] == record["properties"] and schema["required"] == record["required"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"version", "config", "guidelines", "profile", "system_suffix"}
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False and len(config["required"]) == 11
    assert schema["properties"]["guidelines"]["items"]["enum"] == list(GUIDELINES)
    assert "409" in api.app.openapi()["paths"]["/interface/state"]["put"]["responses"]


async def test_an_evolved_omega_is_schema_valid_and_served_exactly(api):
    evolved = (await api.put("/interface/profile", json={"failure_profile": pressing_profile()})).json()
    assert len(evolved["guidelines"]) >= 2
    await api.put("/interface/profile", json={"failure_profile": FailureProfile().to_json()})
    jsonschema.validate(evolved, route_schema(api.app))
    shuffled = {**evolved, "guidelines": evolved["guidelines"][::-1]}
    jsonschema.validate(shuffled, route_schema(api.app))
    served = await api.put("/interface/state", json=shuffled)
    assert served.status_code == 200, served.text
    assert served.json() == evolved and (await api.get("/interface")).json() == evolved


async def test_a_schema_valid_omega_the_service_cannot_serve_is_a_409_that_changes_nothing(api):
    before = (await api.get("/interface")).json()
    other_config = {**before, "config": {**before["config"], "min_count": 3}}
    wrong_text = {**before, "system_suffix": "something else"}
    too_many = {**before, "guidelines": list(GUIDELINES)}
    for body in (other_config, wrong_text, too_many):
        jsonschema.validate(body, route_schema(api.app))
        refused = await api.put("/interface/state", json=body)
        assert refused.status_code == 409, refused.text
        assert "\n" not in refused.json()["detail"]
    assert (await api.get("/interface")).json() == before


@pytest.mark.parametrize(
    "change, where",
    [
        ({"config": {}}, "config.schema_required"),
        ({"guidelines": ["Format", "Format"]}, "guidelines"),
        ({"guidelines": ["Be nice"]}, "guidelines.0"),
        ({"version": "1"}, "version"),
        ({"profile": {"version": 1}}, "profile.window"),
        ({"colour": "blue"}, "colour"),
    ],
)
async def test_a_body_the_schema_refuses_is_a_422_naming_the_field(api, change, where):
    before = (await api.get("/interface")).json()
    body = {**before, **change}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, route_schema(api.app))
    refused = await api.put("/interface/state", json=body)
    assert refused.status_code == 422 and refused.json()["detail"].startswith(where), refused.text
