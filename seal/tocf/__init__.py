"""Diagnosis Ψ, failure profile C_t and A-Patch advantage weights: pure functions of recorded evidence.

Stdlib only; the one project import is the verifier's `TurnCheck` record from `seal.bfcl.checks`.
"""

from seal.tocf.apatch import APatchConfig, APatchState, apatch_factors, dynamic_update, static_weight
from seal.tocf.diagnosis import Label, diagnose, trajectory_profile
from seal.tocf.evidence import CallEvidence, TurnCheck, TurnEvidence
from seal.tocf.labels import (
    DEFAULT_PRIORITY,
    DEFAULT_RHO,
    EXCLUDED,
    PAPER_LABELS,
    REFERENCE_LABELS,
    TABLE5_PRIORITY,
)
from seal.tocf.profile import FailureProfile

__all__ = [
    "DEFAULT_PRIORITY",
    "DEFAULT_RHO",
    "EXCLUDED",
    "PAPER_LABELS",
    "REFERENCE_LABELS",
    "TABLE5_PRIORITY",
    "APatchConfig",
    "APatchState",
    "CallEvidence",
    "FailureProfile",
    "Label",
    "TurnCheck",
    "TurnEvidence",
    "apatch_factors",
    "diagnose",
    "dynamic_update",
    "static_weight",
    "trajectory_profile",
]
