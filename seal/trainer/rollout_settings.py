"""The `seal.rollout` config section: how `SealAgentLoop` reaches the environment and where it stops.

The dataclass is the single source of the defaults (the paper's Table 4 where it says something) and
the Hydra schema of the section; it imports nothing of verl so that tools can read it anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from seal.env.connect import ENV_BACKENDS, EnvSettings
from seal.env.context_limits import EpisodeBudget
from seal.env.store import StoreSettings
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS

_ENV = EnvSettings()


@dataclass
class RolloutSettings(EpisodeBudget):
    """One trajectory = one environment episode; these bound it and say how to reach the service.

    `max_llm_calls` and `max_env_tokens` are `EpisodeBudget`'s (seal/env/context_limits.py), shared with
    `seal eval`: reaching the call limit ends the trajectory (cut `calls`); the other stop is the context: a
    call whose prompt would pass `max_model_len − max_response_length` tokens is not made (cut `context`).
    `max_env_tokens` null keeps environment messages whole.
    """

    env_url: str = _ENV.url
    """Base URL of the environment service (`seal serve`); the launcher starts one unless told otherwise."""
    env_backend: str = "http"
    """Where the episodes run. `http`: one environment service (`env_url`) shared by every rollout
    worker, the default on one node and what `seal eval` uses; over several nodes the launcher takes it
    only at a URL beyond loopback where a service answers. `ray`: environment actors, each an episode
    store in-process, `env_actors_per_node` on every node of the Ray cluster; each rollout worker plays
    on its own node's actors (for `trainer.nnodes > 1`, or more than one core of environment per node).
    `inprocess`: an episode store inside each worker process (no server; Evolve(Ω) never reaches it)."""
    env_actors_per_node: int = _ENV.actors_per_node
    """With `env_backend=ray`: environment actors on each node; one actor uses at most one core."""
    protocol: str = DEFAULT_PROTOCOL
    """Tool prompt and tool-call format of the episodes (Table 4: bfcl_qwen_fc, i.e. `qwen_fc`)."""
    max_tokens_per_call: int | None = None
    """`max_tokens` of one generation; None = `max_response_length`, the released code's per-call
    budget. The trained response is the first `max_response_length` tokens of the whole episode; the
    episode is played on past that cut and scored on its end."""
    env_timeout_s: float = _ENV.timeout_s
    """Bound on one environment request, retries included."""
    env_retries: int = _ENV.retries
    """Retries of a request that could not reach the service, before the trajectory is given up
    with reward 0 and `env_error` set."""
    env_backoff_s: float = _ENV.backoff_s
    """First retry delay; it doubles with every further retry."""
    max_env_error_share: float = 0.25
    """Largest share of a training step's trajectories that may be env errors; above it the run stops
    with one line naming the service and the count."""
    trace_dir: str | None = None
    """Write each trajectory's token ids, response mask and the sampled texts as one JSON line per
    trajectory under this folder, for inspection (`benchmarks/check_masks.py` checks them); None = off."""

    def __post_init__(self) -> None:
        try:
            super().__post_init__()
        except ValueError as exc:
            raise ValueError(f"seal.rollout.{exc}") from None
        if self.env_backend not in ENV_BACKENDS:
            raise ValueError(
                f"seal.rollout.env_backend must be one of {', '.join(ENV_BACKENDS)}, not {self.env_backend!r}"
            )
        if self.env_actors_per_node < 1:
            raise ValueError("seal.rollout.env_actors_per_node must be at least 1")
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"seal.rollout.protocol must be one of {', '.join(sorted(PROTOCOLS))}, not {self.protocol!r}"
            )
        if self.max_tokens_per_call is not None and self.max_tokens_per_call < 1:
            raise ValueError("seal.rollout.max_tokens_per_call must be at least 1 (or null)")
        if not 0.0 <= self.max_env_error_share <= 1.0:
            raise ValueError("seal.rollout.max_env_error_share must be between 0 and 1")
        if not self.env_timeout_s > 0 or self.env_retries < 0 or self.env_backoff_s < 0:
            raise ValueError("seal.rollout: env_timeout_s must be > 0, env_retries and env_backoff_s >= 0")

    def env(self, store: StoreSettings | None = None) -> EnvSettings:
        """How the rollouts reach the environment; `store` is what an in-process store holds."""
        return EnvSettings(
            backend=self.env_backend,
            url=self.env_url,
            timeout_s=self.env_timeout_s,
            retries=self.env_retries,
            backoff_s=self.env_backoff_s,
            actors_per_node=self.env_actors_per_node,
            store=StoreSettings() if store is None else store,
        )
