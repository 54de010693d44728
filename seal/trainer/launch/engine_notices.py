"""verl's import-time notices that say nothing about a launch, kept off its console.

Importing verl's engines warns once per optional engine that is not installed (torchtitan, veomni,
automodel, mindspeed, megatron: SEAL trains on FSDP), and verl's platform manager warns, on a machine
without a GPU (a dry run), that it found no accelerator. They printed seven lines above the plan on every
launch. Only these exact notices are dropped: a missing engine that failed for another reason than not
being installed, and every other warning or error, still shows.
"""

from __future__ import annotations

import logging
import re
import warnings

ENGINE_NOTICE = (
    r"(torchtitan|veomni|automodel|mindspeed|megatron) engine is not available: ModuleNotFoundError"
)
"""verl.workers.engine's UserWarning for an optional engine that is not installed."""
PLATFORM_LOGGER = "verl.plugin.platform.platform_manager"
PLATFORM_NOTICES = re.compile(
    r"No supported accelerator detected\. |Platform '\w+' \(\w+\) is registered but not"
)
"""The platform manager's warnings on a machine without a GPU."""


class PlatformNotices(logging.Filter):
    """Drops the platform manager's no-accelerator warnings; passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING or not PLATFORM_NOTICES.match(record.getMessage())


def quiet_engine_notices() -> None:
    """Keep verl's optional-engine and no-accelerator notices off this process's console (idempotent)."""
    warnings.filterwarnings(
        "ignore", message=ENGINE_NOTICE, category=UserWarning, module=r"verl\.workers\.engine"
    )
    platform = logging.getLogger(PLATFORM_LOGGER)
    if not any(isinstance(f, PlatformNotices) for f in platform.filters):
        platform.addFilter(PlatformNotices())
