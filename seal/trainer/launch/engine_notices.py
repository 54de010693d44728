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

from omegaconf import DictConfig, open_dict

OPTIONAL_ENGINES = ("torchtitan", "veomni", "automodel", "mindspeed", "megatron")
ENGINE_NOTICE = rf"({'|'.join(OPTIONAL_ENGINES)}) engine is not available: ModuleNotFoundError"
"""verl.workers.engine's UserWarning for an optional engine that is not installed."""
WORKER_FILTERS = ",".join(
    f"ignore:{engine} engine is not available:UserWarning" for engine in OPTIONAL_ENGINES
)
"""The same notices as `PYTHONWARNINGS` filters, for the trainer's Ray workers, which import verl's engines
again (the variable's fields are split at colons, so they match the notice's start, whatever the error)."""
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


def quiet_workers(config: DictConfig) -> None:
    """Add `WORKER_FILTERS` to the `PYTHONWARNINGS` of the Ray job the trainer starts
    (`ray_kwargs.ray_init.runtime_env.env_vars`), after any filters the config sets there."""
    with open_dict(config):
        runtime_env = config.ray_kwargs.ray_init.runtime_env
        if runtime_env.get("env_vars") is None:
            runtime_env.env_vars = {}
        given = runtime_env.env_vars.get("PYTHONWARNINGS")
        runtime_env.env_vars.PYTHONWARNINGS = f"{given},{WORKER_FILTERS}" if given else WORKER_FILTERS
