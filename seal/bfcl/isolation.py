"""Closes bfcl-eval's cross-episode leaks and cleans the namespaces its executor leaves behind.

In bfcl-eval 2026.3.23 the long-context TravelAPI shares the credit-card and booking-record dicts
of `long_context.py` with every instance, and VehicleControlAPI writes the weather into a
module-level dict; a charge or a reading in one episode then shows up in every later one. The
executor and checker also keep every instance in `multi_turn_utils` globals forever.
"""

from __future__ import annotations

import copy
import re
import uuid

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import (
    long_context,
    travel_booking,
    vehicle_control,
)

from seal.bfcl import call_deadline

_PATCHED = "_seal_isolated"


def _add_credit_cards(self: travel_booking.TravelAPI) -> None:
    for card_id, card_info in long_context.CREDIT_CARD_EXTENSION.items():
        if card_id not in self.credit_card_list:
            self.credit_card_list[card_id] = copy.deepcopy(card_info)


def _add_booking_records(self: travel_booking.TravelAPI) -> None:
    for booking_id, booking_info in long_context.BOOKING_RECORD_EXTENSION.items():
        if booking_id not in self.booking_record:
            self.booking_record[booking_id] = copy.deepcopy(booking_info)


_original_temperature = vehicle_control.VehicleControlAPI.get_outside_temperature_from_google


def _get_outside_temperature_from_google(self: vehicle_control.VehicleControlAPI) -> dict[str, float]:
    """Same draw from the instance's own RNG and same key order, without mutating the module dict."""
    if not self.long_context:
        return _original_temperature(self)
    reading = dict(long_context.LONG_WEATHER_EXTENSION)
    reading["outsideTemperature"] = self._random.uniform(-10.0, 40.0)
    return reading


for _patch, _original in (
    (_add_credit_cards, travel_booking.TravelAPI._add_credit_cards),
    (_add_booking_records, travel_booking.TravelAPI._add_booking_records),
    (_get_outside_temperature_from_google, _original_temperature),
):
    _patch.__name__, _patch.__qualname__, _patch.__doc__ = (
        _original.__name__,
        _original.__qualname__,
        _original.__doc__,
    )


def close_leaks() -> None:
    """Patch the three leaking methods once per process (idempotent), and put MathAPI's calls under their
    deadline (seal/bfcl/call_deadline.py)."""
    call_deadline.install()
    if getattr(travel_booking.TravelAPI, _PATCHED, False):
        return
    travel_booking.TravelAPI._add_credit_cards = _add_credit_cards
    travel_booking.TravelAPI._add_booking_records = _add_booking_records
    vehicle_control.VehicleControlAPI.get_outside_temperature_from_google = (
        _get_outside_temperature_from_google
    )
    setattr(travel_booking.TravelAPI, _PATCHED, True)


def fresh_namespace(purpose: str) -> str:
    """An identifier-safe, never-reused model name for bfcl-eval's executor and checker."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", purpose):
        raise ValueError(f"namespace purpose must be [A-Za-z0-9_]+, got {purpose!r}")
    return f"seal_{purpose}_{uuid.uuid4().hex}"


def drop_namespace(name: str) -> int:
    """Delete every instance bfcl-eval stored in module globals under `name`; returns how many."""
    namespace = vars(multi_turn_utils)
    stale = [key for key in namespace if key.startswith(name + "_")]
    for key in stale:
        namespace.pop(key, None)
    return len(stale)


def leftover_instances() -> list[str]:
    """Names of executor instances still in module globals (for tests and the service's health)."""
    return [key for key in vars(multi_turn_utils) if key.endswith("_instance")]


close_leaks()
