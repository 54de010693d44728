"""verl's import-time notices of engines that are not installed, and of no GPU, stay off a launch's console;
any other warning, and anything worse than a warning, still shows."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest
from omegaconf import OmegaConf

from seal.trainer.launch.engine_notices import (
    OPTIONAL_ENGINES,
    PLATFORM_LOGGER,
    quiet_engine_notices,
    quiet_workers,
)


def warn_from_verls_engines(message: str) -> list[str]:
    """`message` warned as verl.workers.engine warns it; the warnings that got through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_engine_notices()
        # a warning whose module is verl.workers.engine, as its import issues it
        warnings.warn_explicit(message, UserWarning, "engine.py", 1, module="verl.workers.engine")
    return [str(warning.message) for warning in caught]


@pytest.mark.parametrize("engine", ["torchtitan", "veomni", "automodel", "mindspeed", "megatron"])
def test_an_engine_that_is_not_installed_is_not_announced(engine):
    notice = f"{engine} engine is not available: ModuleNotFoundError(\"No module named '{engine}'\")"
    assert warn_from_verls_engines(notice) == []


@pytest.mark.parametrize(
    "message",
    [
        "megatron engine is not available: ImportError('libcudart.so.12: cannot open shared object file')",
        "some other warning from verl's engines",
    ],
)
def test_a_broken_engine_or_another_warning_still_shows(message):
    assert warn_from_verls_engines(message) == [message]


def test_the_no_gpu_notices_are_dropped_and_the_platform_manager_s_other_records_kept(caplog):
    quiet_engine_notices()
    quiet_engine_notices()  # idempotent: one filter
    logger = logging.getLogger(PLATFORM_LOGGER)
    assert len(logger.filters) == 1
    with caplog.at_level(logging.DEBUG, logger=PLATFORM_LOGGER):
        logger.warning("No supported accelerator detected. Registered: %s. Falling back to 'nvidia'.", ("a",))
        logger.warning("Platform '%s' (%s) is registered but not available. CPU-only.", "nvidia", "Cuda")
        logger.warning("Platform 'nvidia' changed its mind")
        logger.error("No supported accelerator detected. Registered: x.")
    assert [r.getMessage() for r in caplog.records] == [
        "Platform 'nvidia' changed its mind",
        "No supported accelerator detected. Registered: x.",
    ]


def test_the_trainer_s_ray_workers_drop_the_engine_notices_and_keep_other_warnings():
    config = OmegaConf.create(
        {"ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {"PYTHONWARNINGS": "error"}}}}}
    )
    quiet_workers(config)
    filters = config.ray_kwargs.ray_init.runtime_env.env_vars.PYTHONWARNINGS
    assert filters.startswith("error,")  # the config's own filter is kept (later ones take precedence)
    notices = [f"{engine} engine is not available: ModuleNotFoundError('x')" for engine in OPTIONAL_ENGINES]
    script = (
        "import warnings\n"
        f"for message in {[*notices, 'another warning']!r}:\n"
        "    try:\n"
        "        warnings.warn_explicit(message, UserWarning, 'engine.py', 1, module='verl.workers.engine')\n"
        "    except UserWarning as raised:\n"
        "        print('raised', raised)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONWARNINGS": filters},
        capture_output=True,
        text=True,
    )
    assert done.stdout == "raised another warning\n" and done.stderr == ""


def test_a_config_without_worker_variables_gets_them():
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"runtime_env": {}}}})
    quiet_workers(config)
    assert (
        config.ray_kwargs.ray_init.runtime_env.env_vars.PYTHONWARNINGS.count("engine is not available") == 5
    )
