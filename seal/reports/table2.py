"""The paper's Table 2 (out of distribution) from `seal eval` output folders, beside the paper's numbers.

Table 2 reports, in %: BFCL V4 (Avg, Web Search, Memory) and τ²-bench (Avg, Retail, Airline, Telecom).
Memory is the mean of the three memory backends' accuracies, Web Search the mean of its two categories, V4 Avg
the mean of Web Search and Memory; τ² Avg is the mean of the domains' pass^1. Each model's column values come
from the `summary.json` of its suites' run folders; a suite with no folder (web search needs a SerpAPI key and
network) is "not run", and an average over a column that was not run is not shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COLUMNS = ("V4 Avg", "Web Search", "Memory", "τ² Avg", "Retail", "Airline", "Telecom")
SUITES = ("bfcl_v4_web_search", "bfcl_v4_memory", "tau2")
PAPER = {
    "paper: Qwen2.5-7B": (9.17, 6.50, 11.83, 16.11, 16.67, 20.00, 11.67),
    "paper: + Vanilla RL": (10.26, 7.50, 13.02, 17.19, 19.30, 20.00, 12.28),
    "paper: + SEAL": (12.71, 9.50, 15.92, 20.79, 26.32, 22.00, 14.04),
}
"""The paper's Table 2 rows for Qwen2.5-7B-Instruct (docs/paper_results.md)."""
NOT_RUN = "not run"
FULL = {"bfcl_v4_memory": 3, "tau2": 3}
"""Categories of a whole run: three memory backends, three tau2 domains."""


class Table2Error(ValueError):
    """An evaluation folder that cannot be read as asked; one line."""


@dataclass(frozen=True)
class ModelRow:
    """One model's Table 2 values (None: not run, or an average over a column that was not run)."""

    name: str
    values: tuple[float | None, ...]
    sources: Mapping[str, Path]
    partial: Mapping[str, list[str]]
    """Suites run on less than their whole task set, and how."""


def _summary(folder: Path) -> tuple[str, dict[str, Any]] | None:
    """(suite, summary) of a `seal eval` output folder, or None if the folder is not one; the summary gets
    `partial`, what makes it less than the whole suite (a --limit, a subset of backends or domains)."""
    run, summary = folder / "run.json", folder / "summary.json"
    if not (run.is_file() and summary.is_file()):
        return None
    try:
        meta = json.loads(run.read_text())
        suite, read = meta.get("suite", "bfcl_v3"), json.loads(summary.read_text())
    except ValueError as exc:
        raise Table2Error(f"{folder}: unreadable run.json or summary.json ({exc})") from None
    partial = [f"--limit {meta['limit']}"] if meta.get("limit") else []
    for option in ("backends", "domains"):
        chosen = meta.get("options", {}).get(option)
        if chosen is not None and len(read.get("categories", {})) < FULL.get(suite, 0):
            partial.append(f"--{option} {','.join(chosen)}")
    return suite, {**read, "partial": partial}


def suite_summaries(folder: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The OOD suites' summaries found in `folder` itself or its direct sub-folders, by suite."""
    if not folder.is_dir():
        raise Table2Error(f"{folder} is not a folder")
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for candidate in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]:
        read = _summary(candidate)
        if read is None or read[0] not in SUITES:
            continue
        suite, summary = read
        if suite in found:
            raise Table2Error(f"{folder} holds two {suite} runs ({found[suite][0]}, {candidate}); keep one")
        found[suite] = (candidate, summary)
    if not found:
        raise Table2Error(f"{folder} holds no seal eval run of {', '.join(SUITES)} (run.json + summary.json)")
    return found


def _mean(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) or not values else sum(values) / len(values)  # type: ignore[arg-type]


def _category(summary: dict[str, Any] | None, name: str) -> float | None:
    if summary is None:
        return None
    cell = summary["categories"].get(name)
    return None if cell is None else cell["rate"]


def model_row(name: str, folder: Path) -> ModelRow:
    """A model's Table 2 row from its evaluation folder."""
    found = suite_summaries(folder)
    summary = {suite: found[suite][1] if suite in found else None for suite in SUITES}
    web = summary["bfcl_v4_web_search"]["average"] if summary["bfcl_v4_web_search"] else None
    memory = summary["bfcl_v4_memory"]["average"] if summary["bfcl_v4_memory"] else None
    tau2 = summary["tau2"]
    domains = tuple(_category(tau2, d) for d in ("retail", "airline", "telecom"))
    values = (_mean([web, memory]), web, memory, tau2["average"] if tau2 else None, *domains)
    partial = {suite: found[suite][1]["partial"] for suite in found if found[suite][1]["partial"]}
    return ModelRow(name, values, {suite: path for suite, (path, _) in found.items()}, partial)


def table2_rows(models: Mapping[str, Path]) -> list[ModelRow]:
    return [model_row(name, folder) for name, folder in models.items()]


NEEDS = {
    "V4 Avg": ("bfcl_v4_web_search", "bfcl_v4_memory"),
    "Web Search": ("bfcl_v4_web_search",),
    "Memory": ("bfcl_v4_memory",),
}
"""The suites a column is computed from (the τ² columns: tau2)."""


def _cell(row: ModelRow, column: str, value: float | None) -> str:
    if value is not None:
        return f"{value:.2f}"
    ran = all(suite in row.sources for suite in NEEDS.get(column, ("tau2",)))
    return "—" if ran else NOT_RUN


def markdown(rows: Sequence[ModelRow], with_paper: bool = True) -> str:
    """Table 2's shape: one row per model, then the paper's Qwen2.5-7B rows for reference."""
    lines = ["| Model | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for row in rows:
        cells = [_cell(row, column, value) for column, value in zip(COLUMNS, row.values, strict=True)]
        lines.append(f"| {row.name} | " + " | ".join(cells) + " |")
    if with_paper:
        for name, values in PAPER.items():
            lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def report(models: Mapping[str, Path], out: Path | None = None) -> str:
    """The side-by-side table (and `out/table2.md`, `out/table2.json` when `out` is given)."""
    rows = table2_rows(models)
    text = markdown(rows)
    notes = [
        "Out of distribution, in % (the paper's Table 2): V4 Avg = mean(Web Search, Memory); "
        "Memory = mean of the kv, vector and rec_sum backends; τ² Avg = mean of the domains' pass^1.",
        *(
            f"{row.name}: {', '.join(f'{s} from {p}' for s, p in row.sources.items())}"
            + ("" if "bfcl_v4_web_search" in row.sources else "; web search not run (needs SERPAPI_API_KEY)")
            + "".join(f"; {suite} partial ({' '.join(how)})" for suite, how in row.partial.items())
            for row in rows
        ),
    ]
    full = text + "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "table2.md").write_text(full)
        payload = [{"model": r.name, **dict(zip(COLUMNS, r.values, strict=True))} for r in rows]
        (out / "table2.json").write_text(json.dumps({"rows": payload, "paper": PAPER}, indent=2) + "\n")
    return full


def parse_models(pairs: Sequence[str]) -> dict[str, Path]:
    """`name=DIR` arguments, in order; a malformed one raises Table2Error."""
    models: dict[str, Path] = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name or not folder:
            raise Table2Error(f"expected NAME=DIR (e.g. base=outputs/eval/base), got {pair!r}")
        if name in models:
            raise Table2Error(f"model {name!r} given twice")
        models[name] = Path(folder)
    return models
