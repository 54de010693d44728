"""Import direction (docs/design.md §2), read from the source of every module: no import runs.

Imports inside functions count too, so a lazy import cannot slip past the layering.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("verl", "ray", "torch")


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name `path` imports, at any depth of its syntax tree."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; the layering test reads absolute ones"
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations(paths: list[Path], forbidden) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in sorted(imported_modules(path))
        if forbidden(path, name)
    ]


def test_the_walk_sees_lazy_imports_and_every_package(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from ray.util import x\n    import torch.nn\n")
    assert {"os", "ray.util", "ray.util.x", "torch.nn"} <= imported_modules(module)
    packages = {path.parent.name for path in modules_under("seal")}
    assert {"bfcl", "protocol", "env", "tocf", "evaluation"} <= packages


def test_bfcl_imports_nothing_else_of_the_project():
    found = violations(
        modules_under("seal/bfcl"),
        lambda _, name: (
            (within(name, "seal") and not within(name, "seal.bfcl")) or within(name, "env_service")
        ),
    )
    assert found == []


def test_tocf_reads_only_the_verifier_record_from_below():
    found = violations(
        modules_under("seal/tocf"),
        lambda _, name: (
            within(name, "seal") and not within(name, "seal.tocf") and not within(name, "seal.bfcl.checks")
        ),
    )
    assert found == []


def test_only_the_cli_imports_the_service_and_only_its_app():
    cli = ROOT / "seal" / "cli.py"
    others = [path for path in modules_under("seal") if path != cli]
    assert violations(others, lambda _, name: within(name, "env_service")) == []
    from_cli = {name for name in imported_modules(cli) if within(name, "env_service")}
    assert from_cli and all(within(name, "env_service.app") for name in from_cli), from_cli


def test_service_routes_call_seal_env_only():
    """`seal.flags` only declares the settings' flags; every call the routes make goes to seal.env."""
    found = violations(
        [ROOT / "env_service" / "app.py"],
        lambda _, name: (
            within(name, "seal") and not within(name, "seal.env") and not within(name, "seal.flags")
        ),
    )
    assert found == []


RAY_ACTORS = ROOT / "seal" / "env" / "ray_actors.py"
"""The environment on Ray: the one module below the trainer that imports ray (and nothing else heavy)."""


@pytest.mark.parametrize("heavy", HEAVY)
def test_nothing_below_the_trainer_imports_the_training_stack(heavy: str):
    trainer = ROOT / "seal" / "trainer"
    below = [path for path in modules_under("seal") if trainer not in path.parents]
    below += modules_under("env_service")
    allowed = {RAY_ACTORS} if heavy == "ray" else set()
    assert violations(below, lambda path, name: within(name, heavy) and path not in allowed) == []


def test_only_the_trainer_and_the_environment_chooser_import_the_ray_actors():
    """Whatever does not ask for the `ray` backend never imports ray: below the trainer only
    `seal.env.connect` (for `seal eval --env-backend ray`) imports `seal.env.ray_actors`."""
    trainer = ROOT / "seal" / "trainer"
    allowed = {ROOT / "seal" / "env" / "connect.py", RAY_ACTORS}
    below = [p for p in modules_under("seal") if trainer not in p.parents and p not in allowed]
    below += modules_under("env_service")
    assert violations(below, lambda _, name: within(name, "seal.env.ray_actors")) == []


def import_graph(paths: list[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules among `paths` it imports (`from m import name` counts as importing m)."""
    modules = {".".join(path.relative_to(root).with_suffix("").parts): path for path in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_modules(path):
            parts = imported.split(".")
            prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
            target = next((prefix for prefix in prefixes if prefix in modules), None)
            if target is not None and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` as [a, b, ..., a], or [] when the arrows all run one way."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for target in sorted(graph[module]):
            cycle = visit(target, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return []

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return []


def test_the_cycle_finder_sees_a_circle_through_a_lazy_import(tmp_path: Path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "top.py").write_text("from pkg.middle import run\n")
    (package / "middle.py").write_text("import os\n\ndef run():\n    from pkg.bottom import f\n")
    (package / "bottom.py").write_text("def f():\n    from pkg.top import x\n")
    graph = import_graph(sorted(package.glob("*.py")), root=tmp_path)
    assert import_cycle(graph) == ["pkg.bottom", "pkg.top", "pkg.middle", "pkg.bottom"]
    graph["pkg.bottom"] = set()
    assert import_cycle(graph) == []


def test_the_trainer_package_has_no_import_cycle():
    """The arrows run one way: launch -> experiment -> rl (task_runner -> trainer -> closed_loop), never
    back up (docs/design.md §2)."""
    assert import_cycle(import_graph(modules_under("seal/trainer"))) == []


def test_the_smoke_model_builder_needs_no_training_stack():
    """`make_smoke_model.py` runs on a GPU node before verl and Ray are installed there: it takes the tiny
    tokenizer from the suite's support and nothing from `seal`."""
    script = ROOT / "scripts" / "make_smoke_model.py"
    imported = imported_modules(script)
    from_seal = {name for name in imported if within(name, "seal")}
    assert all(within(name, "seal.backbones") for name in from_seal), from_seal
    assert any(within(name, "tests.support.chatml") for name in imported)
    needed = [ROOT / "tests" / "support" / "chatml.py", *modules_under("seal/backbones")]
    assert violations(needed, lambda _, name: within(name, "verl") or within(name, "ray")) == []


def test_the_package_holds_no_test_double():
    """Test doubles live in tests/support/: nothing in `seal` or `env_service` imports the suite."""
    shipped = modules_under("seal") + modules_under("env_service")
    assert violations(shipped, lambda _, name: within(name, "tests")) == []


def test_only_the_cli_imports_the_viewer_and_the_viewer_never_imports_the_trainer():
    """`seal.view` reads what the other parts write (docs/design.md §4.5): it sits on them, below nothing
    but the `seal` command, and needs no training stack."""
    cli = ROOT / "seal" / "cli.py"
    view = ROOT / "seal" / "view"
    others = [
        path for path in modules_under("seal") + modules_under("env_service") if view not in path.parents
    ]
    others.remove(cli)
    assert violations(others, lambda _, name: within(name, "seal.view")) == []
    assert violations(modules_under("seal/view"), lambda _, name: within(name, "seal.trainer")) == []


def test_the_shared_records_lie_below_evaluation_and_reports():
    """Pass rates, endings, tables and the eval folder's file names (seal/results) import neither package,
    and the two import each other in no direction."""
    records = violations(
        modules_under("seal/results"),
        lambda _, name: within(name, "seal.evaluation") or within(name, "seal.reports"),
    )
    evaluation_to_reports = violations(
        modules_under("seal/evaluation"), lambda _, name: within(name, "seal.reports")
    )
    reports_to_evaluation = violations(
        modules_under("seal/reports"), lambda _, name: within(name, "seal.evaluation")
    )
    assert records == [] and evaluation_to_reports == [] and reports_to_evaluation == []
