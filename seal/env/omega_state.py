"""Ω's identity across processes: a digest of its whole state, and Ω named in one line.

Two environments serve the same Ω only when everything the model reads and everything the next Evolve
starts from are equal: version, config, guidelines and the profile it was evolved from. The version alone
does not say it: guideline selection has hysteresis (an active guideline stays on evidence that would not
let it enter), so Evolve(Ω0, C, v) can serve another text than the Ω_v that evolved step by step. The
environment actors compare digests of `Interface.to_json()`; the launcher compares a running service's Ω
with the experiment's start.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from seal.env.interface import Interface, build_interface

DIGEST_CHARS = 12


def omega_digest(omega: Mapping[str, Any]) -> str:
    """A short hash of an Ω's whole state (`Interface.to_json()`, its rendered `system_suffix` included)."""
    canonical = orjson.dumps(dict(omega), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:DIGEST_CHARS]


def describe_omega(omega: Mapping[str, Any]) -> str:
    """`v3, guidelines [State-aware, Format], digest 0123abcd4567`: what a one-line message says of an Ω."""
    guidelines = ", ".join(omega.get("guidelines") or []) or "none"
    return f"v{omega.get('version')}, guidelines [{guidelines}], digest {omega_digest(omega)}"


def is_start(omega: Mapping[str, Any], preset: str) -> bool:
    """Whether `omega` is version 0 of `preset`, as a fresh service or actor serves it."""
    return omega_digest(omega) == omega_digest(build_interface(preset).to_json())


def restore(omega: Mapping[str, Any]) -> Interface:
    """The `Interface` whose `to_json()` is `omega` (ValueError when `omega` is not one)."""
    interface = Interface.from_json(omega)
    if omega_digest(interface.to_json()) != omega_digest(omega):
        raise ValueError(f"Ω {describe_omega(omega)} does not render as it says")
    return interface
