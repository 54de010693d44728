"""BFCL V4's agentic categories as `seal eval` suites: Memory (offline) and Web Search (SerpAPI key).

Both use bfcl-eval 2026.3.23's own data, system prompts, backends and `agentic_checker`, played through a
SEAL protocol (seal/evaluation/suites/agentic.py).

Memory: 155 questions in 5 scenarios, asked of each of three backends (key-value with BM25+, vector with
all-MiniLM-L6-v2 + faiss, recursive summary). Before a scenario's questions, its prerequisite conversations
(37 in all) are played in order on the same backend, each starting from the memory the previous one left
(bfcl's snapshots, written under OUT/bfcl_result); questions read that memory and change nothing, so they
run in parallel. A prerequisite the endpoint failed blocks the rest of its chain (listed as endpoint errors;
`--resume --retry-failed` continues it). The paper's Memory is the mean of the three backends' accuracies.

Web search: 100 questions, with (`web_search_base`) and without (`web_search_no_snippet`) result snippets;
it queries SerpAPI and fetches live pages, so it is offered only with SERPAPI_API_KEY set.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import seal.bfcl  # noqa: F401  (points BFCL_PROJECT_ROOT at a cache folder before bfcl_eval loads)
from seal.env.episode import BFCL_STEP_LIMIT
from seal.evaluation.runner import Played
from seal.evaluation.suites.agentic import AgenticItem, Backend, converse, played, split_question
from seal.evaluation.suites.common import Suite, SuiteRequest, SuiteRun, endpoint_errors
from seal.evaluation.suites.extras import memory_missing, web_search_missing
from seal.flags import comma_list, setting
from seal.results.pass_rate import pass_rates

MEMORY_BACKENDS = ("kv", "vector", "rec_sum")
BACKEND_NAMES = {"kv": "KV", "vector": "Vector", "rec_sum": "Rec. Sum"}
WEB_SEARCH_CATEGORIES = ("web_search_base", "web_search_no_snippet")
RESULT_FOLDER = "bfcl_result"
"""Under OUT: bfcl-eval's model result folder, where the memory backends keep their snapshots."""
STEP_LIMIT_HELP = "replies per user turn before the conversation is cut, as BFCL's MAXIMUM_STEP_LIMIT"


@dataclass(frozen=True)
class MemorySettings:
    backends: tuple[str, ...] = setting(
        MEMORY_BACKENDS,
        "memory backends, comma-separated: kv (BM25+ key-value), vector (MiniLM + faiss), "
        "rec_sum (recursive summary); the paper's Memory averages all three",
        parse=comma_list,
    )

    def __post_init__(self) -> None:
        unknown = [b for b in self.backends if b not in MEMORY_BACKENDS]
        if unknown or not self.backends:
            raise ValueError(
                f"--backends takes {', '.join(MEMORY_BACKENDS)}, got {','.join(self.backends) or 'nothing'}"
            )


def _category(entry_id: str) -> str:
    """`memory_kv_prereq_3-student-3` -> `memory_kv_prereq`, `web_search_base_7` -> `web_search_base`."""
    return entry_id.rsplit("_", 1)[0]


@cache
def _entries(category: str) -> tuple[dict[str, Any], ...]:
    from bfcl_eval.utils import load_dataset_entry

    return tuple(load_dataset_entry(category, include_prereq=True, include_language_specific_hint=False))


@cache
def _answers(category: str, shared: str) -> dict[str, tuple[str, ...]]:
    """Accepted answers by entry id (bfcl-eval keys them by the shared id, e.g. `memory_0-customer-0`)."""
    from bfcl_eval.utils import load_ground_truth_entry

    answers = {a["id"]: tuple(a["ground_truth"]) for a in load_ground_truth_entry(category)}
    return {
        e["id"]: answers[e["id"].replace(category, shared, 1)]
        for e in _entries(category)
        if "prereq" not in e["id"]
    }


def _first(ids: Sequence[str], limit: int | None) -> list[str]:
    return list(ids if limit is None else ids[:limit])


def _create(class_name: str, config: dict[str, Any]) -> Any:
    """A fresh backend instance loaded from its initial config, as bfcl-eval's executor creates one."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
    instance._load_scenario(copy.deepcopy(config))
    return instance


def rates(
    suite: str, records: Sequence[dict[str, Any]], categories: Sequence[str], label: str
) -> dict[str, Any]:
    """Accuracy (%) per category over the scored records, and their mean (the suite's Table 2 column)."""
    scored = [r for r in records if "reward" in r and "error" not in r]
    found = pass_rates((r["category"], r["reward"]) for r in scored if r["category"] in categories)
    per = {
        category: {
            "n": found.counts.get(category, 0),
            "passed": found.passed.get(category, 0),
            "rate": 100 * found.by_category[category] if category in found.by_category else None,
        }
        for category in categories
    }
    return {
        "suite": suite,
        "metric": "accuracy (%)",
        "label": label,
        "categories": per,
        "average": 100 * found.mean if found.by_category else None,
        "scored": len(scored),
        "truncated": sum(bool(r.get("truncated")) for r in scored),
        "endpoint_errors": endpoint_errors(records),
    }


def rate_table(summary: dict[str, Any], names: dict[str, str]) -> str:
    cells = summary["categories"]
    head = [summary["label"], *(names[c] for c in cells), "n"]

    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    row = [pct(summary["average"]), *(pct(c["rate"]) for c in cells.values()), str(summary["scored"])]
    return (
        "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(row) + " |"])
        + "\n"
    )


class AgenticSuite(Suite):
    """A suite of bfcl-eval agentic entries."""

    max_llm_calls: ClassVar[tuple[int, str]] = (BFCL_STEP_LIMIT, STEP_LIMIT_HELP)

    def __init__(self) -> None:
        self.semaphore: asyncio.Semaphore | None = None

    async def _converse(self, run: SuiteRun, item: AgenticItem, backend: Backend) -> Played:
        assert self.semaphore is not None
        async with self.semaphore:
            talk = await converse(run.endpoint, run.budget, item, run.request.protocol, backend)
        return played(item, run.request.protocol, talk)


class MemorySuite(AgenticSuite):
    name = "bfcl_v4_memory"
    description = "BFCL V4 Memory: prerequisite conversations, then questions, on three memory backends"
    settings = MemorySettings

    def missing(self) -> str | None:
        return memory_missing(self.name)

    def categories(self, request: SuiteRequest) -> list[str]:
        return [f"memory_{backend}" for backend in request.options.backends]

    def select(self, request: SuiteRequest) -> tuple[str, ...]:
        """Per backend: the first N questions, preceded by every prerequisite of their scenarios."""
        selection: list[str] = []
        for category in self.categories(request):
            entries = _entries(category)
            questions = _first([e["id"] for e in entries if "prereq" not in e["id"]], request.limit)
            wanted = {e["scenario"] for e in entries if e["id"] in questions}
            selection += [e["id"] for e in entries if "prereq" in e["id"] and e["scenario"] in wanted]
            selection += questions
        return tuple(selection)

    async def prepare(self, request: SuiteRequest) -> None:
        """Read the data, and load the backends' modules (the vector one loads MiniLM: seconds)."""
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

        for category in self.categories(request):
            _answers(category, "memory")
            class_name = _entries(category)[0]["involved_classes"][0]
            await asyncio.to_thread(importlib.import_module, CLASS_FILE_PATH_MAPPING[class_name])

    def _item(self, entry: dict[str, Any], instance: Any, answers: tuple[str, ...] | None) -> AgenticItem:
        from bfcl_eval.model_handler.utils import add_memory_instruction_system_prompt

        category = _category(entry["id"])
        question = add_memory_instruction_system_prompt(
            copy.deepcopy(entry["question"]), category, entry["scenario"], instance
        )
        system, turns = split_question(question)
        return AgenticItem(
            entry["id"], category, system, turns, tuple(entry["function"]), answers, entry["scenario"]
        )

    def _backend(self, entry: dict[str, Any], result_dir: Path) -> Backend:
        from bfcl_eval.utils import populate_initial_settings_for_memory_test_cases

        (configured,) = populate_initial_settings_for_memory_test_cases([copy.deepcopy(entry)], result_dir)
        class_name = entry["involved_classes"][0]
        return Backend(
            _create(class_name, configured["initial_config"][class_name]), tuple(entry["function"])
        )

    async def play(self, run: SuiteRun, todo: Sequence[str]) -> None:
        """Every (backend, scenario) chain at once; within one, prerequisites in order, then the questions."""
        self.semaphore = asyncio.Semaphore(run.request.concurrency)
        wanted = set(todo) | set(run.done)
        chains: dict[tuple[str, str], tuple[list[dict], list[dict]]] = {}
        for category in self.categories(run.request):
            for entry in _entries(category):
                if entry["id"] in wanted:
                    prereqs, questions = chains.setdefault((category, entry["scenario"]), ([], []))
                    (prereqs if "prereq" in entry["id"] else questions).append(entry)
        await asyncio.gather(
            *(self._chain(run, prereqs, questions) for prereqs, questions in chains.values())
        )

    async def _chain(self, run: SuiteRun, prereqs: list[dict], questions: list[dict]) -> None:
        result_dir = (run.request.out / RESULT_FOLDER).resolve()
        blocked: str | None = None
        for entry in prereqs:
            previous = run.done.get(entry["id"])
            if previous is not None:
                blocked = blocked or (entry["id"] if "error" in previous else None)
            elif blocked is not None:
                run.record(self._blocked(entry, blocked, run.request.protocol))
            else:
                backend = self._backend(entry, result_dir)
                result = await self._converse(run, self._item(entry, backend.instance, None), backend)
                if "error" in result.record:
                    blocked = entry["id"]
                else:
                    backend.instance._flush_memory_to_local_file()
                run.record(result)
        pending = [e for e in questions if e["id"] not in run.done]
        if blocked is not None:
            for entry in pending:
                run.record(self._blocked(entry, blocked, run.request.protocol))
            return
        await asyncio.gather(*(self._question(run, entry, result_dir) for entry in pending))

    async def _question(self, run: SuiteRun, entry: dict[str, Any], result_dir: Path) -> None:
        backend = self._backend(entry, result_dir)
        answers = _answers(_category(entry["id"]), "memory")[entry["id"]]
        run.record(await self._converse(run, self._item(entry, backend.instance, answers), backend))

    def _blocked(self, entry: dict[str, Any], by: str, protocol: str) -> Played:
        record = {
            "task_id": entry["id"],
            "category": _category(entry["id"]),
            "scenario": entry["scenario"],
            "error": f"not run: prerequisite {by} failed on the endpoint",
        }
        return Played(record, {"task_id": entry["id"], "protocol": protocol, "actions": []})

    def summarize(self, records: Sequence[dict[str, Any]], request: SuiteRequest) -> dict[str, Any]:
        summary = rates(self.name, records, self.categories(request), "Memory")
        prereqs = [r for r in records if "prereq" in r["task_id"]]
        cut = sum(bool(r.get("truncated")) for r in prereqs)
        summary["notes"] = {
            "prerequisite conversations": f"{len(prereqs)} played ({cut} cut by a limit)",
            "Memory": "mean of the backends' accuracies, as the paper's Table 2 and BFCL V4 report it",
        }
        return summary

    def table(self, summary: dict[str, Any]) -> str:
        return rate_table(summary, {f"memory_{b}": BACKEND_NAMES[b] for b in MEMORY_BACKENDS})


class WebSearchSuite(AgenticSuite):
    name = "bfcl_v4_web_search"
    description = "BFCL V4 Web Search (SerpAPI and live pages: needs SERPAPI_API_KEY and network)"

    def missing(self) -> str | None:
        return web_search_missing(self.name)

    def select(self, request: SuiteRequest) -> tuple[str, ...]:
        return tuple(
            item
            for category in WEB_SEARCH_CATEGORIES
            for item in _first([e["id"] for e in _entries(category)], request.limit)
        )

    async def play(self, run: SuiteRun, todo: Sequence[str]) -> None:
        from bfcl_eval.utils import populate_initial_settings_for_web_search_test_cases

        self.semaphore = asyncio.Semaphore(run.request.concurrency)
        wanted = set(todo)

        async def one(entry: dict[str, Any]) -> None:
            (configured,) = populate_initial_settings_for_web_search_test_cases([copy.deepcopy(entry)])
            class_name = entry["involved_classes"][0]
            functions = tuple(entry["function"])
            backend = Backend(_create(class_name, configured["initial_config"][class_name]), functions)
            category = _category(entry["id"])
            system, turns = split_question(entry["question"])
            answers = _answers(category, "web_search")[entry["id"]]
            item = AgenticItem(entry["id"], category, system, turns, functions, answers)
            run.record(await self._converse(run, item, backend))

        await asyncio.gather(
            *(one(e) for category in WEB_SEARCH_CATEGORIES for e in _entries(category) if e["id"] in wanted)
        )

    def summarize(self, records: Sequence[dict[str, Any]], request: SuiteRequest) -> dict[str, Any]:
        summary = rates(self.name, records, WEB_SEARCH_CATEGORIES, "Web Search")
        summary["notes"] = {"Web Search": "mean of the two categories' accuracies"}
        return summary

    def table(self, summary: dict[str, Any]) -> str:
        return rate_table(summary, {"web_search_base": "Base", "web_search_no_snippet": "No Snippet"})
