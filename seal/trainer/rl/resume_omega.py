"""The Ω a resumed run trains under: exactly the one its checkpoint saved.

`seal_state.json` holds Ω's whole state (`interface`: `Interface.to_json()`, i.e. version, config,
guidelines, the profile it was evolved from and its text). On resume the environment, the HTTP service or
every Ray environment actor, is told to serve exactly that state (`put_interface`, `PUT /interface/state`),
and what it then serves must have the saved digest (seal/env/omega_state.py). Evolve(Ω0, C, v) from the saved
profile cannot stand in: guideline selection has hysteresis, so it may choose other guidelines. A saved Ω
without its text (`system_suffix` absent or null: a record from before the whole state was saved, or written
by hand) is re-derived that way, as SEAL did before, with a one-line warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from seal.env.client import EnvServiceError
from seal.env.connect import EnvSettings, put_interface, put_profile
from seal.env.omega_state import describe_omega, omega_digest

LOG = logging.getLogger(__name__)
TEXT_KEY = "system_suffix"


def restore_omega(settings: EnvSettings, saved: Mapping[str, Any] | None) -> None:
    """Have the environment of `settings` serve the checkpoint's Ω `saved` (None: nothing was evolved);
    RuntimeError (one line) when it cannot, or serves another Ω."""
    if saved is None:
        return
    try:
        if saved.get(TEXT_KEY) is None:
            _rederive(settings, saved)
            return
        served = put_interface(settings, dict(saved))
    except EnvServiceError as exc:
        raise RuntimeError(f"cannot restore the checkpoint's Ω on the environment: {exc}") from exc
    if omega_digest(served) != omega_digest(saved):
        raise RuntimeError(
            f"the environment serves Ω {describe_omega(served)} after being sent the checkpoint's Ω "
            f"{describe_omega(saved)}"
        )
    LOG.info("restored the checkpoint's Ω %s", describe_omega(served))


def _rederive(settings: EnvSettings, saved: Mapping[str, Any]) -> None:
    """The old way, for a saved Ω without its text: Evolve from its profile into its version."""
    LOG.warning(
        "the checkpoint's Ω v%s has no %s (an older seal_state.json): re-derived by Evolve from its "
        "profile, which may choose other guidelines",
        saved.get("version"),
        TEXT_KEY,
    )
    if saved.get("profile") is None:
        return
    served = put_profile(settings, dict(saved["profile"]), saved.get("version"))
    if served.get("guidelines") != saved.get("guidelines"):
        LOG.warning(
            "restored Ω: the environment chose guidelines %s, the checkpoint had %s",
            served.get("guidelines"),
            saved.get("guidelines"),
        )
